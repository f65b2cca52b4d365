"""Sampling to a stated precision (audit.core.sequential): a seeded order, doubling looks, a
stop at the first look whose interval is narrow enough, and what it costs in coverage."""

from __future__ import annotations

import numpy as np
import pytest

from attackers.span_guess.batches import merge_diagnostics
from audit.core.details import Details, details_problems
from audit.core.errors import AnonauditError
from audit.core.sequential import check_target, look_points, sample_sequentially, seeded_order
from audit.core.stats import wilson_interval


def test_the_order_is_fixed_by_the_seed_not_by_the_input_order():
    ids = [f"d{i}" for i in range(30)]
    assert seeded_order(ids, 0, "x") == seeded_order(list(reversed(ids)), 0, "x")
    assert seeded_order(ids, 0, "x") != seeded_order(ids, 1, "x")
    assert sorted(seeded_order(ids, 3, "x")) == sorted(ids)


def test_looks_double_from_ten_and_end_at_every_document():
    assert look_points(45) == [10, 20, 40, 45]
    assert look_points(40) == [10, 20, 40]
    assert look_points(3) == [3] and look_points(0) == []


def _bernoulli(outcomes: dict[str, int], target, limit=None):
    seen: list[int] = []
    seq = sample_sequentially(list(outcomes), seed=0, salt="t", target=target, limit=limit,
                              run=lambda batch: seen.extend(outcomes[d] for d in batch),
                              interval=lambda: wilson_interval(sum(seen), len(seen)))
    return seq, seen


def test_it_stops_at_the_first_look_narrow_enough_and_says_so():
    # No successes: Wilson's upper end is 0.28 at 10 documents, 0.16 at 20, 0.088 at 40 (half 0.044).
    seq, seen = _bernoulli({f"d{i}": 0 for i in range(100)}, 0.05)
    assert (seq.documents, seq.of, seq.reached, seq.looks) == (40, 100, True, (10, 20, 40)) and len(seen) == 40
    assert "40 of 100 documents, taken until the 95% interval reached ±0.05" in seq.sentence()
    # Half successes never get there on 100 documents: every one is done, and that is said.
    seq, seen = _bernoulli({f"d{i}": i % 2 for i in range(100)}, 0.05)
    assert (seq.documents, seq.reached) == (100, False) and len(seen) == 100
    assert "every document (100)" in seq.sentence() and "wider than the ±0.05" in seq.sentence()
    # No target: every document, in the same batches (the first calibrates); a limit: that many.
    seq, seen = _bernoulli({f"d{i}": 0 for i in range(100)}, None)
    assert (seq.documents, seq.looks, seq.target) == (100, (10, 20, 40, 80, 100), None)
    seq, _ = _bernoulli({f"d{i}": 0 for i in range(100)}, None, limit=7)
    assert seq.documents == 7 and seq.sentence() == "a seeded sample of 7 of 100 documents"


def test_the_first_batch_says_what_the_rest_may_cost():
    said: list[str] = []
    seen: list[int] = []
    sample_sequentially([f"d{i}" for i in range(50)], seed=0, salt="t", target=0.05, say=said.append,
                        run=lambda batch: seen.extend(i % 2 for i, _ in enumerate(batch)),
                        interval=lambda: wilson_interval(sum(seen), len(seen)))
    assert len(said) == 1 and said[0].startswith("10 of 50 documents in ") and "the other 40, if all are needed" in said[0]


def test_a_target_outside_its_range_is_refused_by_name():
    for bad in (0, -0.1, 0.6, "0.05", True):
        with pytest.raises(AnonauditError, match="my stage"):
            check_target(bad, "my stage")
    check_target(None, "x")
    check_target(0.1, "x")


def test_the_report_note_reads_back_and_bad_values_are_named():
    seq, _ = _bernoulli({f"d{i}": 0 for i in range(100)}, 0.05)
    info = Details.of({"sampled": seq.to_dict()}).sampled
    assert (info.documents, info.of, info.target, info.reached) == (40, 100, 0.05, True)
    assert "taken until the 95% interval reached ±0.05" in info.sentence()
    assert details_problems({"sampled": {**seq.to_dict(), "target": "tight"}}) == \
        ['"details.sampled.target" must be a finite number or null, not \'tight\'']
    assert details_problems({"sampled": {**seq.to_dict(), "reached": 1}})


def test_stopping_on_the_width_keeps_the_average_coverage():
    """The rule stops on the interval's width only, at doubling looks: over success rates from 0.05
    to 0.95 the Wilson interval of the stopped sample covers the true rate about as often as 95%
    (docs/methods.md gives the full simulation, benchmarks/sequential_coverage.py)."""
    rng = np.random.default_rng(0)
    covered = []
    for p in np.linspace(0.05, 0.95, 10):
        x = rng.random((400, 127)) < p
        for row in x:
            seen: list[int] = []
            outcomes = {f"d{i:03d}": int(v) for i, v in enumerate(row)}
            seq = sample_sequentially(sorted(outcomes), seed=0, salt="c", target=0.1,
                                      run=lambda b: seen.extend(outcomes[d] for d in b),
                                      interval=lambda: wilson_interval(sum(seen), len(seen)))
            lo, hi = wilson_interval(sum(seen), seq.documents)
            covered.append(lo <= p <= hi)
    assert 0.93 <= float(np.mean(covered)) <= 0.98


def test_batches_diagnostics_combine_as_one_computation():
    a = {"retrieval": "BM25", "documents_attacked": 2, "spans_without_candidates": 1, "person_found_rate": 1.0,
         "person_posterior": None, "odd": 1}
    b = {"retrieval": "BM25", "documents_attacked": 3, "spans_without_candidates": 0, "person_found_rate": 0.0,
         "person_posterior": 0.5, "odd": 2}
    merged = merge_diagnostics([(a, 2), (b, 2)])
    assert merged["documents_attacked"] == 5 and merged["spans_without_candidates"] == 1
    assert merged["person_found_rate"] == 0.5 and merged["person_posterior"] == 0.5
    assert merged["retrieval"] == "BM25" and "odd" not in merged
