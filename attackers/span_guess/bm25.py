"""BM25 over the people of the background, each term's weights worked out once.

``rank_bm25.BM25Okapi.get_scores`` reads every person's term counts for every word of the query,
in Python: on TAB (127 people, a release document of ~800-5,000 words) that was 0.13 s of the
0.17 s it took to find a document's people, and finding the people the larger part of a span's
cost (benchmarks/README.md, "Speed: each person's candidates worked out once"). :class:`TermBM25`
keeps the same index (it wraps a ``BM25Okapi``) with each term's postings (the people whose
background holds it, and how often), works out the weight over the people of each distinct term of
a query once, as one array, and adds those arrays in the query's order, which is the order and the arithmetic ``get_scores`` uses, so the scores are
``get_scores``'s bit for bit (``tests/test_span_guess_table.py`` compares them) and the people
found, their posteriors and every guess stay what they were.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class TermBM25:
    """``TermBM25(tokens).get_scores(query)``: ``BM25Okapi(tokens).get_scores(query)``, bit for bit,
    each distinct term's weights over the documents computed once per query (none is kept between
    queries: memory stays that of the index)."""

    def __init__(self, tokens: Sequence[Sequence[str]]):
        from rank_bm25 import BM25Okapi

        self.okapi = BM25Okapi(tokens)
        ok = self.okapi
        # the part of BM25's denominator that depends on the document only, computed as get_scores does
        self._norm = ok.k1 * (1 - ok.b + ok.b * np.array(ok.doc_len) / ok.avgdl)
        self._postings: dict[str, tuple[list[int], list[int]]] = {}
        for i, freqs in enumerate(ok.doc_freqs):
            for word, freq in freqs.items():
                where = self._postings.setdefault(word, ([], []))
                where[0].append(i)
                where[1].append(freq)

    def row(self, term: str) -> np.ndarray | None:
        """``term``'s weight in every document (None where it adds nothing: a term no document
        holds, or one whose IDF is 0)."""
        ok = self.okapi
        idf = ok.idf.get(term) or 0
        found = self._postings.get(term)
        out = None
        if idf and found is not None:
            q_freq = np.zeros(ok.corpus_size, dtype=np.array([0]).dtype)  # the integer type get_scores builds
            q_freq[found[0]] = found[1]
            out = idf * (q_freq * (ok.k1 + 1) / (q_freq + self._norm))
        return out

    def get_scores(self, query: Sequence[str]) -> np.ndarray:
        """The BM25 score of every document for ``query`` (its words, repeats counted)."""
        score = np.zeros(self.okapi.corpus_size)
        rows: dict[str, np.ndarray | None] = {}
        for term in query:
            weights = rows[term] if term in rows else rows.setdefault(term, self.row(term))
            if weights is not None:
                score += weights
        return score
