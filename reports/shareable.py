"""The shareable edition: results with every original text and original span removed.

``anonaudit report --shareable`` renders from the output of :func:`shareable`, a
copy of the results that keeps only what can be shown outside the data owner:

* per-document findings (typed :class:`~audit.core.results.Finding`) keep their id,
  ``success``, ``highlights_in`` and every fact the attack did not name in ``private``
  (an attack names there the facts that may hold an original span, a guess, a
  predicted identity, a claim of the original...); their ``summary`` unless
  ``"summary"`` is private; and their highlights as ``{start, end, kind}`` (offsets
  into the *sanitized* text; the free-text ``note`` is dropped: it may quote a guess
  or an original, and a kind that does not read like a category becomes "finding");
* ``details`` keep numbers and booleans at any depth, strings only under
  :data:`DETAIL_STRING_KEYS`, and nested mapping keys only when they look like a
  category (``PERSON``, ``direct_identifier``), never like a name;
* provenance keeps no free text: the command line is dropped and the reasons a component was
  skipped or failed become a category and a count (:func:`not_run_categories`);
* keys named like originals (:data:`DENY`) are dropped even when their value is a number, and
  so are such facts of a finding that its attack forgot to name private (a safety net: a new
  attack's ``guess`` or ``original`` never reaches a shared report by an oversight).
"""

from __future__ import annotations

import re
from typing import Any

from audit.core.results import Finding, Highlight, Result, ResultsFile

DETAIL_STRING_KEYS = frozenset({"description", "unit", "method", "metric", "strategy", "linker", "model",
                                "mode", "label", "entity_type", "selection", "aggregation", "note_kind",
                                "baseline_kind", "embedder", "llm", "trial_unit", "interval",
                                "warning"})  # a component's doubt about its own figure; never quotes a document
#: Key names dropped whatever their value.
DENY = re.compile(r"^(orig(inal)?(_.*)?|.*_original|guess(es)?|.*_guess(es)?|gold.*|truth|answer|expected|"
                  r"subject|true_.*|predicted(_subject|_name)?|source_text|claims?|original_claims|text)$",
                  re.IGNORECASE)
CATEGORY_KEY = re.compile(r"^(?:[A-Z0-9_]{1,40}|[a-z0-9_]{1,40})$")
#: A highlight kind is kept when it reads like a category ("rare n-gram", "PERSON"), not a name.
CATEGORY_KIND = re.compile(r"^(?:[a-z0-9 _/-]{1,40}|[A-Z0-9_/-]{1,40})$")


def shareable(rf: ResultsFile) -> ResultsFile:
    """A copy of ``rf`` safe to share (see the module docstring for what is kept)."""
    results = [
        Result(kind=r.kind, name=r.name, release=r.release, value=r.value, ci=r.ci, n=r.n, baseline=r.baseline,
               beats_baseline=r.beats_baseline, details=_details(r.details),
               documents=[_finding(d) for d in r.documents])
        for r in rf.results
    ]
    return ResultsFile(results=results, provenance=_provenance(rf.provenance))


def _finding(f: Finding) -> Finding:
    """The finding without its private facts (and summary, when private) and highlight notes."""
    return Finding(id=f.id, success=f.success, summary="" if "summary" in f.private else f.summary,
                   highlights=tuple(_highlight(h) for h in f.highlights), highlights_in=f.highlights_in,
                   facts={k: v for k, v in f.facts.items() if k not in f.private and not DENY.match(k)},
                   private=f.private)


def _highlight(h: Highlight) -> Highlight:
    kind = h.kind if isinstance(h.kind, str) and CATEGORY_KIND.match(h.kind) else "finding"
    return Highlight(h.start, h.end, kind)


def _details(value: Any, key: str | None = None) -> Any:
    if isinstance(value, bool) or isinstance(value, (int, float)) or value is None:
        return value
    if isinstance(value, str):
        return value if key in DETAIL_STRING_KEYS else _DROP
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            k = str(k)
            if DENY.match(k) or not CATEGORY_KEY.match(k):
                continue
            kept = _details(v, k)
            if kept is not _DROP:
                out[k] = kept
        return out
    if isinstance(value, (list, tuple)):
        kept = [v for v in (_details(v, key) for v in value if not isinstance(v, str)) if v is not _DROP]
        return kept if kept or not value else _DROP
    return _DROP


_DROP = object()


def _provenance(prov: dict[str, Any]) -> dict[str, Any]:
    """Provenance without free text: the command line is dropped, and the reasons a component
    was skipped or failed (exception texts, model answers, document ids) become a category
    and a count per component (:func:`not_run_categories`)."""
    out = {k: v for k, v in prov.items() if k not in ("argv", "skipped", "errors")}
    for key in ("skipped", "errors"):
        if prov.get(key):
            out[key] = not_run_categories(prov.get(key), "skipped" if key == "skipped" else "error")
    return out


def not_run_categories(entries: Any, category: str) -> list[dict[str, Any]]:
    """``[{"component", "category", "count"}]`` from provenance's skipped/errors entries: the
    component's name only when it reads like one, never a reason."""
    counts: dict[str, int] = {}
    for e in entries if isinstance(entries, list) else []:
        name = str(e.get("component", "")) if isinstance(e, dict) else ""
        if not COMPONENT_NAME.match(name):
            name = "a component"
        counts[name] = counts.get(name, 0) + 1
    return [{"component": name, "category": category, "count": n} for name, n in counts.items()]


#: A registered component's name ("span_guess", "claim_linker.leakage", "presidio").
COMPONENT_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_.:#@\[\]-]{0,80}$")
