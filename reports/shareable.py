"""The shareable edition: results with every original text and original span removed.

``anonaudit report --shareable`` renders from the output of :func:`shareable`, a
copy of the results that keeps, by construction, only what can be shown outside
the data owner: numbers, booleans, offsets into the *sanitized* text, and strings
under a short allow-list of keys that name categories, not content. Everything else
is dropped, whatever an attack chose to call it. In particular:

* per-document findings keep ``id``, numbers and booleans (confidence, rank,
  ``correct``...), strings only under :data:`DOC_STRING_KEYS`, and highlights as
  ``{start, end, kind}`` (the free-text ``note`` is dropped: it may quote a guess or
  an original); every other string or list is dropped — ``original``,
  ``original_text``, ``orig_*``, ``guess``/``guesses``, ``predicted`` subject
  names, ``claims`` of the original, ``subject``, ``text`` (a document's own copy
  of any text; the sanitized text is taken from the release file instead, or from
  a finding's ``sanitized_text``);
* ``details`` keep numbers and booleans at any depth, strings only under
  :data:`DETAIL_STRING_KEYS`, and nested mapping keys only when they look like a
  category (``PERSON``, ``direct_identifier``), never like a name;
* keys named like originals (:data:`DENY`) are dropped even when their value is a number.
"""

from __future__ import annotations

import re
from typing import Any

from audit.core.results import Result, ResultsFile

DOC_STRING_KEYS = frozenset({"id", "kind", "label", "entity_type", "identifier_type", "type", "status",
                             "outcome", "method", "strategy"})
DETAIL_STRING_KEYS = frozenset({"description", "unit", "method", "metric", "strategy", "linker", "model",
                                "mode", "label", "entity_type", "selection", "aggregation", "note_kind",
                                "baseline_kind", "embedder", "llm",
                                "warning"})  # a component's doubt about its own figure; never quotes a document
HIGHLIGHT_KEYS = ("start", "end", "kind")
#: Key names dropped whatever their value.
DENY = re.compile(r"^(orig(inal)?(_.*)?|.*_original|guess(es)?|.*_guess(es)?|gold.*|truth|answer|expected|"
                  r"subject|true_.*|predicted(_subject|_name)?|source_text|claims?|original_claims|text)$",
                  re.IGNORECASE)
CATEGORY_KEY = re.compile(r"^(?:[A-Z0-9_]{1,40}|[a-z0-9_]{1,40})$")
#: A highlight kind is kept when it reads like a category ("rare n-gram", "PERSON"), not a name.
CATEGORY_KIND = re.compile(r"^(?:[a-z0-9 _/-]{1,40}|[A-Z0-9_/-]{1,40})$")
MAX_KIND = 40


def shareable(rf: ResultsFile) -> ResultsFile:
    """A copy of ``rf`` safe to share (see the module docstring for what is kept)."""
    results = [
        Result(kind=r.kind, name=r.name, release=r.release, value=r.value, ci=r.ci, n=r.n, baseline=r.baseline,
               beats_baseline=r.beats_baseline, details=_details(r.details),
               documents=[_document(d) for d in r.documents if isinstance(d, dict)])
        for r in rf.results
    ]
    return ResultsFile(results=results, provenance=_provenance(rf.provenance))


def _document(doc: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "highlights" and isinstance(value, list):
            out[key] = [_highlight(h) for h in value if isinstance(h, dict)]
        elif key == "sanitized_text" and isinstance(value, str):
            out[key] = value
        elif key == "id":
            out[key] = str(value)
        elif DENY.match(key):
            continue
        elif isinstance(value, bool) or (isinstance(value, (int, float)) and not isinstance(value, bool)):
            out[key] = value
        elif isinstance(value, str) and key in DOC_STRING_KEYS:
            out[key] = value[:MAX_KIND]
    return out


def _highlight(h: dict[str, Any]) -> dict[str, Any]:
    out = {k: h[k] for k in ("start", "end") if isinstance(h.get(k), int)}
    kind = h.get("kind")
    out["kind"] = kind if isinstance(kind, str) and CATEGORY_KIND.match(kind) else "finding"
    return out


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
    """Provenance holds no document text; drop only the free-form command line, which may."""
    return {k: v for k, v in prov.items() if k != "argv"}
