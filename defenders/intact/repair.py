"""INTACT's repair of a released document (``anonaudit harden``): the replacements an attack saw
through, generalised one level further (or to their label), every mention of the entity with them."""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from attackers.span_guess.guesser import parse_guesses
from attackers.span_guess.matcher import DATE_LABELS, normalise
from audit.core.data import REPHRASED, Corpus, Document, Release, Span
from audit.runtime.progress import bar
from audit.core.evidence import set_replacements
from audit.models.llm import ChatRequest
from audit.models.resources import resources_of
from defenders.intact.dates import date_generalisations
from defenders.intact.prompts import MAX_CANDIDATE_WORDS


@dataclass
class _RepairPlan:
    """A document's span repair before the LLM answers: per entity to generalise, its mentions
    (span indices), its first targeted span, its current wording and its candidates (None: asked
    in ``asked``, a (entity index, request) pair each); ``others``: every hidden original of the
    document, which no candidate may contain."""

    entities: list[tuple[list[int], Span, str, list[str] | None]] = field(default_factory=list)
    asked: list[tuple[int, ChatRequest]] = field(default_factory=list)
    others: list[str] = field(default_factory=list)


class IntactRepair:
    """The repair part of :class:`~defenders.intact.sanitizer.IntactSanitizer` (its LLM, candidates count
    and fallbacks come from the sanitizer)."""

    def at_label(self, replacement: str, label: str) -> bool:
        """Whether a replacement says nothing more than its category: empty (suppressed), a mask
        or placeholder without a lowercase letter (``[LOC]``, ``PERSON_1``, ``***``), or the
        fallback :attr:`template` of ``label``."""
        return (not any(c.isalpha() and c.islower() for c in replacement)
                or normalise(replacement) == normalise(self._fallback(label)))

    def next_level(self, replacement: str, candidates: Sequence[str], label: str) -> str:
        """One step more general than ``replacement``: the candidate after it when it is one of
        ``candidates`` (most specific first), else (its level unknown, or the last) the label."""
        ranked = [normalise(c) for c in candidates]
        cur = normalise(replacement)
        if cur in ranked and ranked.index(cur) + 1 < len(candidates):
            return candidates[ranked.index(cur) + 1]
        return self._fallback(label)

    def repair(self, release: Release, targets, *, name: str, round: int = 1) -> Release:
        """``release`` with each recorded replacement named by a ``"span"`` target made one level
        more general (:meth:`next_level`; dates by rule, names and codes to their label, other
        details by the candidates the LLM proposes for the original in its sentence), and every
        other mention of the same entity in the document with it. A replacement already at its
        label stays (counted as ``at_label``): only its context could still give it away.
        The candidate requests of ``batch`` documents go to the LLM together (concurrently on a
        server's slots); the release is the same whatever the batch. Counts per release go to
        :meth:`stats` (``repair``)."""
        t0 = time.perf_counter()
        counts = {"documents": 0, "targets": 0, "generalised": 0, "to_label": 0, "at_label": 0,
                  "candidate_requests": 0}
        released = list(release.corpus)
        docs: list[Document] = []
        with bar(total=len(released), desc=f"generalising ({name})", unit="doc", enabled=self.progress) as progress:
            for lo in range(0, len(released), self.batch):
                group = released[lo:lo + self.batch]
                plans = {doc.id: self._repair_plan(doc, [t for t in targets.get(doc.id, ()) if t.kind == "span"],
                                                   counts)
                         for doc in group}
                asked = [r for plan in plans.values() if plan for _, r in plan.asked]
                answers = iter(self._get_llm().complete_batch(asked, progress=self.progress) if asked else [])
                counts["candidate_requests"] += len(asked)
                for doc in group:
                    plan = plans[doc.id]
                    docs.append(doc if plan is None else
                                self._repair_finish(doc, plan, [next(answers) for _ in plan.asked], counts))
                progress.update(len(group))
        self._counts.setdefault(name, {})["repair"] = counts
        self.record_timing(name, {"repair": time.perf_counter() - t0})
        return Release(name=name, corpus=Corpus(docs, name=name, source=release.source), aligned=release.aligned,
                       sanitizer=self.name, source=release.source)

    def _repair_plan(self, doc: Document, targets, counts: dict[str, int]) -> _RepairPlan | None:
        """What repairing ``doc``'s span ``targets`` takes: the entities to generalise (every
        mention of a targeted one), their current wording, the rule-made candidates, and the
        candidate requests still to ask. None when the document has no span target."""
        if not targets:
            return None
        hidden = [i for i, s in enumerate(doc.spans) if s.original is not None and s.label != REPHRASED]

        def key(i: int) -> str:
            sp = doc.spans[i]
            return f"id:{sp.entity_id}" if sp.entity_id else f"text:{normalise(sp.original or '')}"

        wanted = {(t.start, t.end) for t in targets}
        hit = [i for i in hidden if (doc.spans[i].start, doc.spans[i].end) in wanted]
        counts["documents"] += 1
        counts["targets"] += len(hit)
        groups: dict[str, list[int]] = {}
        for i in hit:
            groups.setdefault(key(i), [])
        for i in hidden:
            if key(i) in groups:
                groups[key(i)].append(i)
        placeholder_labels = {x.upper() for x in (self.placeholders or ())}
        plan = _RepairPlan(others=[normalise(doc.spans[i].original or "") for i in hidden])
        bounds_text: tuple[str, list] | None = None
        for members in groups.values():
            first = next(i for i in members if i in hit)
            sp = doc.spans[first]
            current = sp.replacement if sp.replacement is not None else doc.text[sp.start:sp.end]
            label = (sp.label or "").upper()
            if self.at_label(current, label):
                counts["at_label"] += 1
                continue
            rules = date_generalisations(sp.original or "") if label in DATE_LABELS or not label else []
            if label in placeholder_labels:
                plan.entities.append((members, sp, current, []))
            elif rules:
                plan.entities.append((members, sp, current, list(rules)))
            else:
                text = doc.text[:sp.start] + (sp.original or "") + doc.text[sp.end:]
                marked = Span(sp.start, sp.start + len(sp.original or ""), sp.label)
                if bounds_text is None or bounds_text[0] != text:
                    bounds_text = (text, resources_of(self).spacy(disable=("ner",)).sentences(text))
                plan.asked.append((len(plan.entities), self.candidate_request(
                    self._sentence(text, bounds_text[1], marked), sp.label or "")))
                plan.entities.append((members, sp, current, None))
        return plan

    def _repair_finish(self, doc: Document, plan: _RepairPlan, answers: Sequence[str],
                       counts: dict[str, int]) -> Document:
        """``doc`` with the planned entities one level more general, the LLM's ``answers`` to the
        plan's requests (in their order) giving the candidates they lacked."""
        entities = list(plan.entities)
        others = [re.compile(rf"(?<!\w){re.escape(o)}(?!\w)") for o in set(plan.others) if o]
        for (j, _), answer in zip(plan.asked, answers):
            members, sp, current, _ = entities[j]
            original = normalise(sp.original or "")
            kept = [c for c in parse_guesses(answer)
                    if original not in normalise(c) and not any(o.search(normalise(c)) for o in others)
                    and len(c.split()) <= MAX_CANDIDATE_WORDS]
            entities[j] = (members, sp, current, kept[:self.candidates])
        new: dict[int, str] = {}
        for members, sp, current, candidates in entities:
            choice = self.next_level(current, candidates or [], sp.label or "")
            counts["to_label" if choice == self._fallback(sp.label or "") else "generalised"] += 1
            for i in members:
                new[i] = choice
        return set_replacements(doc, new) if new else doc
