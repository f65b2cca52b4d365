"""What sampling to a precision costs in coverage (docs/methods.md, "Sampling to a precision").

The rule of :mod:`audit.core.sequential`: documents in a seeded order, the 95% Wilson interval
looked at after 10, 20, 40, ... documents (:func:`~audit.core.sequential.look_points`), stopped
at the first look whose half-width is at most the target, or at the last document. Simulated
here on independent per-document successes with a true rate ``p`` (50 rates from 0.01 to 0.99,
``--reps`` releases each): how often the stopped interval covers ``p``, beside the Wilson interval
of a fixed sample of as many documents as the rule took on average (no looking). The Wilson
interval is computed vectorised by the same formula as :func:`audit.core.stats.wilson_interval`
(checked against it at the start).

    python benchmarks/sequential_coverage.py                 # targets 0.05 and 0.10; releases of 127 and 1000
    python benchmarks/sequential_coverage.py --quick         # 200 releases per rate: a smoke test
"""

from __future__ import annotations

import argparse

import numpy as np

from audit.core.sequential import look_points
from audit.core.stats import wilson_interval

Z = 1.959963984540054


def wilson(s: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    p = s / n
    d = 1 + Z * Z / n
    c = (p + Z * Z / (2 * n)) / d
    h = Z * np.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / d
    return np.where(s == 0, 0.0, np.maximum(0, c - h)), np.where(s == n, 1.0, np.minimum(1, c + h))


def coverage(target: float, n_docs: int, reps: int, rng: np.random.Generator) -> dict[str, float]:
    seq, fixed, used = [], [], []
    for p in np.linspace(0.01, 0.99, 50):
        cum = np.cumsum(rng.random((reps, n_docs), dtype=np.float32) < p, axis=1, dtype=np.int32)
        cover, done, n_used = np.zeros(reps, bool), np.zeros(reps, bool), np.zeros(reps)
        for k in look_points(n_docs):
            lo, hi = wilson(cum[:, k - 1], k)
            stop = ~done & (((hi - lo) / 2 <= target) | (k == n_docs))
            cover[stop] = (lo[stop] <= p) & (p <= hi[stop])
            n_used[stop] = k
            done |= stop
        m = int(round(n_used.mean()))
        lo, hi = wilson(cum[:, m - 1], m)
        seq.append(cover.mean())
        fixed.append(((lo <= p) & (p <= hi)).mean())
        used.append(n_used.mean())
    return {"seq_mean": float(np.mean(seq)), "seq_min": float(np.min(seq)), "fixed_mean": float(np.mean(fixed)),
            "fixed_min": float(np.min(fixed)), "docs_min": float(min(used)), "docs_max": float(max(used))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--quick", action="store_true", help="200 releases per rate (a smoke test, not a figure)")
    args = ap.parse_args()
    if args.quick:
        args.reps = 200
    for s, n in ((0, 10), (3, 40), (17, 127)):  # the vectorised formula is the library's
        lo, hi = wilson(np.array([s]), n)
        assert np.allclose([lo[0], hi[0]], wilson_interval(s, n)), (s, n)
    rng = np.random.default_rng(args.seed)
    print("| target | documents | coverage, sequential: mean (lowest) | fixed sample of the same mean size | "
          "documents used (by p) |")
    print("|---|---|---|---|---|")
    for target in (0.05, 0.10):
        for n_docs in (127, 1000):
            r = coverage(target, n_docs, args.reps, rng)
            print(f"| ±{target:.2f} | {n_docs} | {r['seq_mean']:.3f} ({r['seq_min']:.3f}) | {r['fixed_mean']:.3f} "
                  f"({r['fixed_min']:.3f}) | {r['docs_min']:.0f}–{r['docs_max']:.0f} |")


if __name__ == "__main__":
    main()
