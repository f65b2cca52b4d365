"""The leaderboard of a bench: one row per release ranked by risk, each figure with its
interval, the cost per document, paired tests against the sanitizer under test, and the
published figures of a reference table beside ours.

Paired tests compare two releases on the SAME documents, so what the documents share cancels:
- attacks (per-document outcome: re-identified, linked, recovered): an exact McNemar test
  (:func:`audit.core.stats.sign_test`) on the documents where exactly one of the two was hit;
- utility (per-document value): a paired bootstrap of the mean difference
  (:func:`audit.core.stats.paired_bootstrap`).
Each test reads "is safer than X (p = ...)", "is less safe than X (p = ...)" or "is not
distinguishable from X (p = ...)" (utility: "keeps more/less than X") at the 5% level, one test at a time (no correction for the number of tests:
the page says so).

A reference table is a CSV file ``method,metric,value,source[,ours,note]``: published figures
for a corpus, ``ours`` naming the leaderboard row that is the same method (for the rank
agreement). One for TAB ships with the package (:data:`REFERENCES`).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from audit.core.errors import AnonauditError, Problems
from audit.core.results import Result
from audit.core.stats import paired_bootstrap, sign_test

#: Significance level of the statements.
ALPHA = 0.05
#: The reference tables that ship with anonaudit, by corpus name.
REFERENCES = {"tab": Path(__file__).with_name("references") / "tab.csv"}
REFERENCE_COLUMNS = ("method", "metric", "value", "source")
#: Reference metrics that are proportions (a rate, an accuracy, a share of documents or terms):
#: a published value outside [0, 1] is a typing error, refused naming the line and the column.
PROPORTIONS = frozenset({"trir", "tps", "tpi", "nmi", "precision", "recall", "tae_precision", "tae_recall", "tae_tps",
                         "tae_nmi", "phrase_search", "span_guess", "claim_linker", "rouge", "truthful_human",
                         "less_specific_human"})


@dataclass(frozen=True)
class ReferenceRow:
    """A published figure: ``method`` scored ``value`` on ``metric`` (``source``: the citation).
    ``ours``: the leaderboard row that is the same method, if any."""

    method: str
    metric: str
    value: float
    source: str
    ours: str = ""
    note: str = ""


@dataclass(frozen=True)
class Row:
    """One release on the leaderboard (see the module doc)."""

    name: str
    role: str  # "under test", "comparison", "published"
    documents: int
    risk: dict[str, Any] | None
    risks: dict[str, dict[str, Any]]
    utility: dict[str, dict[str, Any]]
    cost: dict[str, Any]
    tests: tuple[dict[str, Any], ...] = ()
    rank: int | None = None
    source: str = ""


@dataclass(frozen=True)
class Leaderboard:
    title: str
    corpus: str
    under_test: str
    attacks: tuple[str, ...]
    metrics: tuple[str, ...]
    rows: tuple[Row, ...]
    published: tuple[ReferenceRow, ...] = ()
    agreement: tuple[dict[str, Any], ...] = ()
    reuse: Mapping[str, Any] = field(default_factory=dict)
    skipped: Mapping[str, str] = field(default_factory=dict)
    results: tuple[Result, ...] = ()
    #: What each attack and metric measures, as the run recorded it: ``{name: description}``.
    about: Mapping[str, str] = field(default_factory=dict)


def fmt_p(p: float) -> str:
    return "p < 0.001" if p < 0.001 else f"p = {p:.3f}"


def build_leaderboard(rf: Any, spec: Any, costs: Mapping[str, Mapping[str, Any]], *,
                      reuse: Mapping[str, Any] | None = None) -> Leaderboard:
    """The leaderboard of the contenders of ``spec`` (a :class:`~audit.pipeline.bench.BenchSpec`)
    from the results file ``rf`` of its audit."""
    names = [c.name for c in spec.contenders if c.name in costs and "skipped" not in costs[c.name]]
    results = [r for r in rf.results if r.release in names]
    heads = [r for r in results if r.kind == "attack" and "." not in r.name]
    attacks = tuple(dict.fromkeys(r.name for r in heads))
    metrics = tuple(dict.fromkeys(r.name for r in results if r.kind == "utility"))
    under = spec.contenders[0].name
    rows = []
    for c in spec.contenders:
        if c.name not in names:
            continue
        mine = [r for r in results if r.release == c.name]
        risks = {r.name: _figure(r) for r in mine if r in heads}
        worst = max(risks.items(), key=lambda kv: (kv[1]["value"], kv[0]), default=None)
        tests = () if c.name == under else tuple(_tests(under, c.name, results, attacks, metrics, spec.seed))
        rows.append(Row(name=c.name, role="under test" if c.under_test else "comparison",
                        documents=max([r.n for r in mine if r.kind == "attack"] or [costs[c.name].get("documents", 0)]),
                        risk=None if worst is None else {"attack": worst[0], **worst[1]}, risks=risks,
                        utility={r.name: _figure(r) for r in mine if r.kind == "utility"},
                        cost=dict(costs[c.name]), tests=tests, source=c.path or c.command or c.sanitizer or ""))
    ranked = sorted(rows, key=lambda r: (r.risk is None, r.risk["value"] if r.risk else 0.0,
                                         -(_first_utility(r, metrics)), r.name))
    rows = [_with_rank(r, i) for i, r in enumerate(ranked, 1)]
    published = tuple(spec.reference)
    return Leaderboard(title=spec.title, corpus=spec.corpus, under_test=under, attacks=attacks, metrics=metrics,
                       rows=tuple(rows), published=published, agreement=tuple(agreement(rows, published)),
                       reuse=dict(reuse or {}), results=tuple(results),
                       about={n: rf.about(k, n).description for k, names in (("attack", attacks), ("utility", metrics))
                              for n in names if hasattr(rf, "about") and rf.about(k, n).description},
                       skipped={k: v["skipped"] for k, v in costs.items() if "skipped" in v})


def _with_rank(row: Row, rank: int) -> Row:
    from dataclasses import replace

    return replace(row, rank=rank if row.risk is not None else None)


def _first_utility(row: Row, metrics: Sequence[str]) -> float:
    for m in metrics:
        if m in row.utility:
            return float(row.utility[m]["value"])
    return 0.0


def _figure(r: Result) -> dict[str, Any]:
    """A figure with what qualifies it: ``warning`` (the component doubts it: an attacker that
    failed its own check gives a lower bound only) and ``beats_baseline`` (False: no risk shown)."""
    return {"value": r.value, "ci": list(r.ci) if r.ci else None, "n": r.n, "baseline": r.baseline,
            "beats_baseline": r.beats_baseline, "warning": r.info.warning}


def _outcomes(results: Sequence[Result], release: str, name: str) -> dict[str, Any]:
    for r in results:
        if r.release == release and r.name == name:
            if r.kind == "attack":
                return {d.id: d.success for d in r.documents if d.success is not None}
            return {d.id: float(d.get("value")) for d in r.documents
                    if isinstance(d.get("value"), (int, float)) and math.isfinite(float(d.get("value")))}
    return {}


def _tests(under: str, other: str, results: Sequence[Result], attacks: Sequence[str], metrics: Sequence[str],
           seed: int) -> list[dict[str, Any]]:
    """The paired tests of the sanitizer under test against ``other``, one per attack and metric."""
    out = []
    for name in attacks:
        a, b = _outcomes(results, under, name), _outcomes(results, other, name)
        shared = sorted(set(a) & set(b))
        if not shared:
            continue
        only_ours = sum(1 for i in shared if a[i] and not b[i])
        only_theirs = sum(1 for i in shared if b[i] and not a[i])
        p = sign_test(only_ours, only_theirs)
        if p < ALPHA:
            verdict = "is safer than" if only_theirs > only_ours else "is less safe than"
        else:
            verdict = "is not distinguishable from"
        out.append({"measure": name, "test": "exact McNemar", "n": len(shared), "only_under_test": only_ours,
                    "only_other": only_theirs, "p": p,
                    "statement": f"{verdict} {other} on {name} ({fmt_p(p)}; {only_theirs} document(s) hit only "
                                 f"in {other}, {only_ours} only in {under}, of {len(shared)})"})
    for name in metrics:
        a, b = _outcomes(results, under, name), _outcomes(results, other, name)
        shared = sorted(set(a) & set(b))
        if not shared:
            continue
        d = paired_bootstrap([a[i] for i in shared], [b[i] for i in shared], seed=seed)
        verdict = ("keeps more than" if d.value > 0 else "keeps less than") if d.p < ALPHA else \
            "is not distinguishable from"
        out.append({"measure": name, "test": "paired bootstrap", "n": d.n, "difference": d.value,
                    "ci": list(d.ci), "p": d.p,
                    "statement": f"{verdict} {other} on {name} (mean difference {d.value:+.3f}, 95% CI "
                                 f"[{d.ci[0]:+.3f}, {d.ci[1]:+.3f}], {fmt_p(d.p)}, {d.n} documents)"})
    return out


def agreement(rows: Sequence[Row], published: Sequence[ReferenceRow]) -> list[dict[str, Any]]:
    """Per metric of the reference table: our figures beside the published ones for the methods
    both have (a reference row's ``ours``), with Spearman's rank correlation when it is defined
    (at least 3 methods, neither side constant)."""
    by_name = {r.name: r for r in rows}
    out = []
    for metric in dict.fromkeys(p.metric for p in published):
        pairs = []
        for p in published:
            row = by_name.get(p.ours) if p.metric == metric and p.ours else None
            fig = (row.utility.get(metric) or row.risks.get(metric)) if row else None
            if fig is not None:
                pairs.append((p.ours, p.method, float(fig["value"]), p.value))
        if not pairs:
            continue
        rho = None
        ours, theirs = [x[2] for x in pairs], [x[3] for x in pairs]
        if len(pairs) >= 3 and len(set(ours)) > 1 and len(set(theirs)) > 1:
            from scipy.stats import spearmanr

            rho = float(spearmanr(ours, theirs).statistic)
        same_order = all((a[2] - b[2]) * (a[3] - b[3]) >= 0 for a in pairs for b in pairs)
        out.append({"metric": metric, "methods": [x[0] for x in pairs], "ours": ours, "published": theirs,
                    "spearman": rho, "same_order": same_order, "n": len(pairs)})
    return out


def read_reference(source: str | Path) -> tuple[ReferenceRow, ...]:
    """A reference table: a CSV file (``method,metric,value,source`` and optionally ``ours``,
    ``note``), or the name of one that ships with anonaudit (``tab``). Every bad line is named."""
    path = REFERENCES.get(str(source).lower(), Path(source))
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        known = ", ".join(sorted(REFERENCES))
        raise AnonauditError(f"{source}: no such reference table (a CSV file, or one of: {known})") from None
    except UnicodeDecodeError:
        raise AnonauditError(f"{path}: a reference table must be UTF-8 text") from None
    reader = csv.DictReader(io.StringIO(text))
    missing = [c for c in REFERENCE_COLUMNS if c not in (reader.fieldnames or [])]
    if missing:
        raise AnonauditError(f"{path}: a reference table needs the columns {', '.join(REFERENCE_COLUMNS)}; "
                             f"missing {', '.join(missing)}")
    problems = Problems(str(path))
    rows = []
    for line, rec in enumerate(reader, 2):
        try:
            value = float(rec["value"])
        except (TypeError, ValueError):
            problems.add(f"value {rec['value']!r} is not a number", line=line)
            continue
        if not math.isfinite(value) or not all((rec.get(k) or "").strip() for k in REFERENCE_COLUMNS):
            problems.add("every row needs a method, a metric, a finite value and a source", line=line)
            continue
        if rec["metric"].strip().lower() in PROPORTIONS and not 0 <= value <= 1:
            problems.add(f"column value: {rec['value'].strip()!r} is impossible for {rec['metric'].strip()}, a "
                         "proportion between 0 and 1", line=line)
            continue
        rows.append(ReferenceRow(rec["method"].strip(), rec["metric"].strip(), value, rec["source"].strip(),
                                 (rec.get("ours") or "").strip(), (rec.get("note") or "").strip()))
    problems.raise_if_any()
    if not rows:
        raise AnonauditError(f"{path}: the reference table has no rows")
    return tuple(rows)
