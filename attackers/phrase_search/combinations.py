"""Combinations of common phrases: pairs and minimal triples of n-grams whose posting lists
intersect in fewer than ``k`` documents (step 4 of the attack, see the package docstring)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from audit.ngrams import NgramIndex, TextNgrams


@dataclass
class Combination:
    """N-grams (indices into a :class:`TextNgrams`) whose posting lists intersect in ``docs``."""

    members: tuple[int, ...]
    docs: np.ndarray


def combination_candidates(tn: TextNgrams, k: int, df_cap: int, max_candidates: int) -> np.ndarray:
    """The pruned candidate n-grams for combinations (see the module docstring)."""
    cand = np.flatnonzero((tn.df >= k) & (tn.df <= df_cap))
    if len(cand) == 0:
        return cand
    _, first = np.unique(tn.hash[cand], return_index=True)
    cand = cand[np.sort(first)]
    order = cand[np.lexsort((tn.first[cand], -tn.n[cand].astype(np.int64), tn.df[cand]))]
    taken = bytearray(int(tn.last.max()) + 2)
    chosen: list[int] = []
    for i, a, b in zip(order.tolist(), tn.first[order].tolist(), tn.last[order].tolist()):
        if not any(taken[a : b + 1]):
            taken[a : b + 1] = b"\x01" * (b + 1 - a)
            chosen.append(i)
            if len(chosen) >= max_candidates:
                break
    return np.asarray(chosen, dtype=np.int64)


def rare_combinations(index: NgramIndex, tn: TextNgrams, k: int, arity: int = 2, *, df_cap: int = 1000,
                      max_candidates: int = 40, block: int = 256) -> list[Combination]:
    """Pairs (and, for ``arity >= 3``, minimal triples) of the text's common
    n-grams whose posting lists intersect in 1..k-1 documents."""
    if arity < 2:
        return []
    chosen = combination_candidates(tn, k, df_cap, max_candidates)
    m = len(chosen)
    if m < 2:
        return []
    lists = [index.postings_at(int(tn.post_ref[i]), int(tn.df[i])) for i in chosen]
    lens = np.array([len(x) for x in lists])
    docs_all = np.concatenate(lists).astype(np.int64)
    cols = np.repeat(np.arange(m), lens)
    universe, rows = np.unique(docs_all, return_inverse=True)
    M = np.zeros((len(universe), m), dtype=np.float32)
    M[rows, cols] = 1.0
    shared = M.sum(axis=1)
    M2, U2 = M[shared >= 2], universe[shared >= 2]
    C2 = M2.T @ M2  # C2[i, j] = |postings_i ∩ postings_j|
    iu, ju = np.triu_indices(m, 1)
    c = C2[iu, ju]
    out: list[Combination] = []
    for i, j in zip(iu[(c >= 1) & (c < k)], ju[(c >= 1) & (c < k)]):
        sel = (M2[:, i] > 0) & (M2[:, j] > 0)
        out.append(Combination((int(chosen[i]), int(chosen[j])), U2[sel]))
    if arity >= 3:
        M3, U3 = M[shared >= 3], universe[shared >= 3]
        pi, pj = iu[c >= k], ju[c >= k]  # pairs that do not link on their own
        ok_pair = C2 >= k
        cols_idx = np.arange(m)
        for s in range(0, len(pi), block):
            bi, bj = pi[s : s + block], pj[s : s + block]
            V = M3[:, bi] * M3[:, bj]
            C3 = V.T @ M3  # (pairs, m): |postings_i ∩ postings_j ∩ postings_l|
            hit = ((C3 >= 1) & (C3 < k) & (cols_idx[None, :] > bj[:, None])
                   & ok_pair[bi][:, :] & ok_pair[bj][:, :])
            for p, l in zip(*np.nonzero(hit)):
                i, j = bi[p], bj[p]
                sel = (M3[:, i] > 0) & (M3[:, j] > 0) & (M3[:, l] > 0)
                out.append(Combination((int(chosen[i]), int(chosen[j]), int(chosen[l])), U3[sel]))
    return out
