"""The phrase-search attack on one released document: its visible phrases, the links they make
to the collection, the evidence and the finding. :class:`DocumentLinking` is the part of
:class:`~attackers.phrase_search.attack.PhraseSearchAttack` that reads one document (its fitted
index, ``k``, ``arity`` and the originals' rare phrases come from the attack); a document longer
than a window is read one window at a time, so its memory stays bounded."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np

from attackers.phrase_search.combinations import Combination, rare_combinations
from audit.ngrams import NgramIndex, TextNgrams, minimal_set, windows
from attackers.phrase_search.linking import rare_indices
from audit.core.data import Document
from audit.core.results import Finding, Highlight


class DocumentLinking:
    """Links one released document (see the module docstring); mixed into the attack."""

    def attack_document(self, doc: Document, truth: Sequence[int] | None) -> Finding:
        """Everything found for one released document. Its facts ``truth``, ``guess`` and
        ``evidence`` are private: they name the source document and the collection's
        documents that hold each phrase (the phrases themselves are sanitized text).
        A document longer than :data:`~audit.ngrams.windows.WINDOW_CHARS` is
        read in windows (:meth:`_attack_huge_document`), so its memory stays bounded."""
        if len(doc.text) > windows.WINDOW_CHARS:
            return self._attack_huge_document(doc, truth)
        index, k = self.index_, self.k
        ids = index.docs.ids
        tn = index.ngrams(doc.text, self.blocked_ranges(doc))
        truth_arr = np.asarray(sorted(truth or ()), dtype=np.int64)
        rare = rare_indices(tn, k)
        # correct links: the posting list contains a ground-truth document
        pdocs, owner = tn.gather_postings(index, rare)
        hits = np.bincount(owner[np.isin(pdocs, truth_arr)], minlength=len(rare))
        linking, wrong = rare[hits > 0], rare[hits == 0]
        combos: list[Combination] = []
        if self.arity >= 2 and (self.exhaustive or not len(linking)):
            combos = rare_combinations(index, tn, k, self.arity, df_cap=self.df_cap,
                                       max_candidates=self.max_candidates)
        combo_ok = [c for c in combos if np.isin(c.docs, truth_arr).any()]
        combo_wrong = [c for c in combos if not np.isin(c.docs, truth_arr).any()]
        linked = bool(len(linking) or combo_ok)
        outcome = "linked" if linked else ("wrong" if (len(wrong) or combo_wrong) else "unlinked")
        if truth is None:
            outcome = "unscored"
        evidence = self._evidence(doc, tn, ((linking, True), (wrong, False)),
                                  ((combo_ok, True), (combo_wrong, False)))
        guess = _best_guess(index, tn, rare, combos)
        # the paper's n-gram-level figure
        orig_rare = (np.concatenate([self._original_rare(i) for i in truth if i < self._n_orig])
                     if truth else np.zeros(0, dtype=np.uint64))
        still = int(np.isin(orig_rare, tn.hash).sum()) if len(orig_rare) else 0
        facts = {
            "outcome": outcome,
            "linked_by": ("ngram" if len(linking) else ("combination" if combo_ok else None)),
            "truth": [ids[i] for i in truth] if truth else [],
            "guess": None if guess is None else ids[guess],
            "guess_correct": bool(guess is not None and truth is not None and guess in set(truth)),
            "visible_ngrams": int(len(tn)),
            "rare_ngrams": int(len(rare)),
            "rare_combinations": len(combos),
            "original_rare_ngrams": int(len(orig_rare)),
            "original_rare_still_present": still,
            "evidence": evidence,
        }
        return Finding(id=doc.id, success=None if outcome == "unscored" else outcome == "linked",
                       summary=self._summary(outcome, len(minimal_set(tn, linking)) if len(linking) else 0,
                                             combo_ok, _example(evidence)),
                       highlights=sorted(_highlights(evidence, linked), key=lambda h: (h.start, h.end)), facts=facts,
                       private={"truth", "guess", "evidence"})

    def _evidence(self, doc: Document, tn: TextNgrams, ngram_groups, combo_groups) -> list[dict[str, Any]]:
        """The linking phrases (``ngram_groups``: arrays of n-gram indices, with whether they
        link correctly) and combinations (``combo_groups``), at most ``max_evidence`` of each
        group; for single phrases, the minimal set."""
        index, k = self.index_, self.k
        ids = index.docs.ids

        def ngram_info(i: int) -> dict[str, Any]:
            r = tn.rare(index, i) if tn.df[i] < k else None
            s, e = int(tn.char_start[i]), int(tn.char_end[i])
            info = {"text": doc.text[s:e], "start": s, "end": e, "n": int(tn.n[i]), "df": int(tn.df[i])}
            if r is not None:
                info["docs"] = [ids[d] for d in r.docs]
            return info

        evidence: list[dict[str, Any]] = []
        for group, correct in ngram_groups:
            for i in minimal_set(tn, group)[: self.max_evidence]:
                info = ngram_info(int(i))
                evidence.append({"kind": "ngram", "correct": correct, "ngrams": [info], "docs": info["docs"]})
        for group, correct in combo_groups:
            for c in group[: self.max_evidence]:
                evidence.append({"kind": f"combination{len(c.members)}", "correct": correct,
                                 "ngrams": [ngram_info(i) for i in c.members],
                                 "docs": [ids[int(d)] for d in c.docs]})
        return evidence

    def _attack_huge_document(self, doc: Document, truth: Sequence[int] | None) -> Finding:
        """:meth:`attack_document` one window of the text at a time: the same facts, counted
        over the windows, with the evidence of the first windows that have some (at most
        ``max_evidence`` per group) and minimal sets taken per window. Combinations, when they
        are looked for, come from a second pass over the windows."""
        index, k = self.index_, self.k
        ids = index.docs.ids
        blocked = self.blocked_ranges(doc)
        truth_arr = np.asarray(sorted(truth or ()), dtype=np.int64)
        orig_rare = (np.concatenate([self._original_rare(i) for i in truth if i < self._n_orig])
                     if truth else np.zeros(0, dtype=np.uint64))
        present = np.zeros(len(orig_rare), dtype=bool)
        visible = n_rare = n_link = 0
        any_link = any_wrong = False
        votes: Counter[int] = Counter()
        ngram_ev: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        combo_ev: dict[bool, list[dict[str, Any]]] = {True: [], False: []}
        for tn in index.iter_ngrams(doc.text, blocked):
            visible += len(tn)
            rare = rare_indices(tn, k)
            n_rare += len(rare)
            pdocs, owner = tn.gather_postings(index, rare)
            hits = np.bincount(owner[np.isin(pdocs, truth_arr)], minlength=len(rare))
            linking, wrong = rare[hits > 0], rare[hits == 0]
            any_link |= bool(len(linking))
            any_wrong |= bool(len(wrong))
            n_link += len(minimal_set(tn, linking))
            for group, correct in ((linking, True), (wrong, False)):
                room = self.max_evidence - len(ngram_ev[correct])
                if room > 0 and len(group):
                    ngram_ev[correct] += self._evidence(doc, tn, ((group, correct),), ())[:room]
            mdocs, _ = tn.gather_postings(index, minimal_set(tn, rare))
            votes.update(mdocs.tolist())
            if len(orig_rare):
                present |= np.isin(orig_rare, tn.hash)
            del tn, rare, pdocs, owner, hits, linking, wrong, mdocs
        n_combos, combo_first_ok = 0, []
        if self.arity >= 2 and (self.exhaustive or not any_link):
            n_combos, combo_first_ok = self._huge_combinations(doc, blocked, truth_arr, votes, combo_ev)
        combo_ok_found = bool(combo_first_ok)
        linked = bool(any_link or combo_ok_found)
        outcome = "linked" if linked else ("wrong" if (any_wrong or combo_ev[False]) else "unlinked")
        if truth is None:
            outcome = "unscored"
        evidence = ngram_ev[True] + ngram_ev[False] + combo_ev[True] + combo_ev[False]
        guess = min(votes, key=lambda d: (-votes[d], d)) if votes else None
        facts = {
            "outcome": outcome,
            "linked_by": ("ngram" if any_link else ("combination" if combo_ok_found else None)),
            "truth": [ids[i] for i in truth] if truth else [],
            "guess": None if guess is None else ids[guess],
            "guess_correct": bool(guess is not None and truth is not None and guess in set(truth)),
            "visible_ngrams": int(visible),
            "rare_ngrams": int(n_rare),
            "rare_combinations": n_combos,
            "original_rare_ngrams": int(len(orig_rare)),
            "original_rare_still_present": int(present.sum()),
            "evidence": evidence,
            "read_in_windows": True,
        }
        return Finding(id=doc.id, success=None if outcome == "unscored" else outcome == "linked",
                       summary=self._summary(outcome, n_link, combo_first_ok, _example(evidence)),
                       highlights=sorted(_highlights(evidence, linked), key=lambda h: (h.start, h.end)), facts=facts,
                       private={"truth", "guess", "evidence"})

    def _huge_combinations(self, doc: Document, blocked: list[tuple[int, int]], truth_arr: np.ndarray,
                           votes: Counter[int], combo_ev: dict[bool, list[dict[str, Any]]]) -> tuple[int, list[Combination]]:
        """The second pass of :meth:`_attack_huge_document`: the rare combinations of each window,
        their votes added to ``votes`` and their evidence to ``combo_ev`` (at most ``max_evidence``
        per group); returns how many there were and the first that links correctly."""
        index, n_combos, combo_first_ok = self.index_, 0, []
        for tn in index.iter_ngrams(doc.text, blocked):
            combos = rare_combinations(index, tn, self.k, self.arity, df_cap=self.df_cap,
                                       max_candidates=self.max_candidates)
            n_combos += len(combos)
            for c in combos:
                votes.update(int(d) for d in c.docs)
            for correct in (True, False):
                group = [c for c in combos if bool(np.isin(c.docs, truth_arr).any()) is correct]
                if correct and group and not combo_first_ok:
                    combo_first_ok = group[:1]
                room = self.max_evidence - len(combo_ev[correct])
                if room > 0 and group:
                    combo_ev[correct] += self._evidence(doc, tn, (), ((group[:room], correct),))
        return n_combos, combo_first_ok

    def _summary(self, outcome: str, n_link: int, combo_ok: list[Combination], example: str = "") -> str:
        """One sentence on the outcome, for the report (``n_link``: the minimal set of linking
        phrases; ``example``: one of them, sanitized text as it is in the release)."""
        if outcome == "linked":
            eg = f", e.g. \u201c{example}\u201d" if example else ""
            return (f"Linked to its source by {n_link} rare phrase{'s' if n_link != 1 else ''}{eg}" if n_link
                    else f"Linked to its source by a combination of {len(combo_ok[0].members)} phrases{eg}")
        return {"wrong": "Its rare phrases point to other documents, not to its source",
                "unlinked": (f"No phrase{' or combination of phrases' if self.arity > 1 else ''} "
                             f"is found in fewer than {self.k} documents"),
                "unscored": "Not scored: its source is not in the collection"}[outcome]


def _highlights(evidence: list[dict[str, Any]], linked: bool) -> list[Highlight]:
    """The phrases of the evidence, marked in the released text (only the correct ones when
    the document is linked)."""
    highlights = []
    for ev in evidence:
        if not ev["correct"] and linked:
            continue
        for g in ev["ngrams"]:
            note = (f"found in {g['df']} document(s)" if ev["kind"] == "ngram"
                    else f"with {len(ev['ngrams']) - 1} other phrase(s): {len(ev['docs'])} document(s)")
            highlights.append(Highlight(g["start"], g["end"], "ngram", f"{note}: {', '.join(ev['docs'][:3])}"))
    return highlights


def _example(evidence: list[dict[str, Any]]) -> str:
    """The longest correctly linking phrase (by words), to quote in a finding's summary."""
    phrases = [g["text"] for ev in evidence if ev["correct"] for g in ev["ngrams"] if g.get("text")]
    best = max(phrases, key=lambda t: (len(t.split()), -phrases.index(t)), default="")
    return best if len(best) <= 80 else best[:77] + "..."


def _best_guess(index: NgramIndex, tn: TextNgrams, rare: np.ndarray, combos: list[Combination]) -> int | None:
    """The attacker's single best guess: the document most rare phrases point to."""
    votes: Counter[int] = Counter()
    mdocs, _ = tn.gather_postings(index, minimal_set(tn, rare))
    votes.update(mdocs.tolist())
    for c in combos:
        votes.update(int(d) for d in c.docs)
    return min(votes, key=lambda d: (-votes[d], d)) if votes else None
