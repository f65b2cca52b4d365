"""The delinker on given ranges (``anonaudit harden``'s text repairer): reword exactly the words an
attack used in a released document, nothing else."""

from __future__ import annotations

import time
from collections.abc import Sequence

from audit.core.data import REPHRASED, Corpus, Document, Release
from audit.models.llm import LLM, ChatRequest
from defenders.delinker.draft import Draft, cuts as _cuts, whole_rephrasings
from defenders.delinker.prompts import REDACTION, merge_ranges, parse_rewrites


class DelinkerRepair:
    """The repair part of :class:`~defenders.delinker.sanitizer.Delinker` (its LLM, rounds and
    checks come from the delinker)."""

    def rewrite(self, doc: Document, ranges: Sequence[tuple[int, int]], *, rnd: int = 1) -> Document:
        """``doc`` with exactly the text in ``ranges`` (offsets in ``doc.text``) reworded, in one
        pass, with no link check (``anonaudit harden`` attacks the result again).

        Ranges are cut around the de-identifier's spans and placeholders (never rewritten); one
        that touches an earlier rephrasing (``REPHRASED``) is widened to cover it (or, where that
        would reach a mask, stops short of it: :func:`whole_rephrasings`), and the new record then
        holds the text before both rewrites. A phrase whose rewording is refused
        (:func:`~defenders.delinker.prompts.usable_rewrite`) stays as it is in the first round;
        ``rnd`` > 1 samples at ``retry_temperature`` with another seed, so a refused answer is
        not replayed from the cache, and a phrase refused again there is redacted when
        ``on_failure`` is ``"redact"`` (the delinker's last resort, as after its own last round).
        Counts go to ``meta["delinker"]``: targets, rewritten, refused, redacted, llm_requests."""
        return self.rewrite_many([(doc, ranges)], rnd=rnd)[0]

    def rewrite_many(self, items: Sequence[tuple[Document, Sequence[tuple[int, int]]]], *,
                     rnd: int = 1) -> list[Document]:
        """:meth:`rewrite` for several ``(document, ranges)``, their requests sent together."""
        llm = self._get_llm()
        prepared = [self._rewrite_jobs(llm, doc, ranges, rnd) for doc, ranges in items]
        requests = [r for _, _, jobs in prepared for r, _ in jobs]
        answers = iter(llm.complete_batch(requests, progress=self.progress) if requests else [])
        out = []
        for draft, counts, jobs in prepared:
            if jobs:
                counts["llm_requests"] = len(jobs)
                replacements: list[tuple[int, int, str]] = []
                refused: list[tuple[int, int]] = []
                for _, group in jobs:
                    news = self._valid(draft, group, parse_rewrites(next(answers), [draft.text[a:b] for a, b in group]),
                                       counts)
                    replacements += [(a, b, new) for (a, b), new in zip(group, news) if new is not None]
                    refused += [(a, b) for (a, b), new in zip(group, news) if new is None]
                redact = rnd > 1 and self.on_failure == "redact"
                edits = replacements + ([(a, b, None) for a, b in refused] if redact else [])
                for a, b, new in sorted(edits, key=lambda t: t[:2], reverse=True):
                    if new is None:
                        draft.replace(a, b, REDACTION, redaction=True)
                    else:
                        draft.replace(a, b, new)
                counts["rewritten"] = len(replacements)
                counts["redacted"] = len(refused) if redact else 0
            counts["refused"] = counts["targets"] - counts["rewritten"]
            out.append(draft.document(counts))
        return out

    def _rewrite_jobs(self, llm: LLM, doc: Document, ranges: Sequence[tuple[int, int]],
                      rnd: int) -> tuple[Draft, dict[str, int], list[tuple[ChatRequest, list[tuple[int, int]]]]]:
        """The draft of ``doc``, its counts and the requests that reword ``ranges`` in it."""
        draft = Draft(doc, movable_labels=(REPHRASED,))
        blocked = merge_ranges(self._blocked(draft))
        targets: list[tuple[int, int]] = []
        for s, e in ranges:
            pieces = [(max(0, s), min(len(draft.text), e))]
            for bs, be in blocked:  # (an empty one, a suppression, cuts too)
                pieces = [q for a, b in pieces for q in (((a, bs), (be, b)) if _cuts(a, b, bs, be) else ((a, b),))
                          if q[1] > q[0]]
            for a, b in pieces:
                while a < b and not draft.text[a].isalnum():
                    a += 1
                while b > a and not draft.text[b - 1].isalnum():
                    b -= 1
                if b > a:
                    targets.append((a, b))
        # a target that reaches an earlier rephrasing takes it whole (or leaves it, next to a mask)
        targets = whole_rephrasings(merge_ranges(targets), draft.movable, blocked)
        counts = {"targets": len(targets), "rewritten": 0, "refused": 0, "redacted": 0, "llm_requests": 0}
        jobs: list[tuple[ChatRequest, list[tuple[int, int]]]] = []
        for chunk in self.chunks(draft.text, targets) if targets else []:
            inside = [t for t in targets if chunk[0] <= t[0] and t[1] <= chunk[1]]
            for j in range(0, len(inside), self.max_spans):
                group = inside[j:j + self.max_spans]
                # a long target (a claim, a classifier's window) needs room for its rewording
                room = 96 + sum(max(48, 2 * llm.count_tokens(draft.text[a:b]) + 16) for a, b in group)
                jobs.append((self.marked_request(draft.text, chunk, group, rnd, max_tokens=room), group))
        return draft, counts, jobs

    def repair(self, release: Release, targets, *, name: str, round: int = 1) -> Release:
        """``release`` with the ``"text"`` targets of each document reworded (:meth:`rewrite`);
        documents without one are kept as they are. Run totals go to :meth:`stats`."""
        from audit.runtime.progress import bar as progress_bar

        t0 = time.perf_counter()
        docs, totals = [], {"documents": 0, "targets": 0, "rewritten": 0, "refused": 0, "redacted": 0,
                            "llm_requests": 0}
        todo = {i: [(t.start, t.end) for t in ts if t.kind == "text"] for i, ts in targets.items()}
        released = list(release.corpus)
        with progress_bar(total=len(released), desc=f"rewording ({name})", unit="doc", enabled=self.progress) as bar:
            for lo in range(0, len(released), self.batch):
                group = released[lo:lo + self.batch]
                items = [(doc, todo[doc.id]) for doc in group if todo.get(doc.id)]
                rewritten = {new.id: new for new in self.rewrite_many(items, rnd=round)}
                for doc in group:
                    new = rewritten.get(doc.id)
                    if new is None:  # nothing to reword
                        docs.append(doc)
                        continue
                    totals["documents"] += 1
                    for key in ("targets", "rewritten", "refused", "redacted", "llm_requests"):
                        totals[key] += new.meta["delinker"][key]
                    docs.append(new)
                bar.update(len(group))
        self._totals[name] = totals
        self.record_timing(name, {"repair": time.perf_counter() - t0})
        return Release(name=name, corpus=Corpus(docs, name=name, source=release.source), aligned=release.aligned,
                       sanitizer=self.name, source=release.source)
