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
* document ids become pseudonyms (``D01``, ``D02``..., :func:`pseudonyms`, stable for the same
  results) unless ``keep_ids``: an id can be a person's name (a TRI file) or a case number;
* so do the names of releases that nobody chose, taken from their file's name (``R1``,
  ``R2``..., :func:`release_pseudonyms`; the release's provenance says ``name_from: file``):
  ``john_smith.jsonl`` names its release ``john_smith``. A name the user gave (``NAME=FILE``, a
  spec's ``name:``, bench's ``--name``) or a sanitizer's is kept, and ``keep_ids`` keeps all;
* provenance keeps no free text and no file path: the command line is dropped, the reasons a
  component was skipped or failed become a category and a count (:func:`not_run_categories`),
  a release's warnings from the checks against the originals (which quote them, and list the
  ids of missing documents) become a count (:func:`_withheld`), and every value or key that
  reads like a path goes (:func:`_no_paths`);
* keys named like originals (:data:`DENY`) are dropped even when their value is a number, and
  so are such facts of a finding that its attack forgot to name private (a safety net: a new
  attack's ``guess`` or ``original`` never reaches a shared report by an oversight).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from typing import Any

from audit.core.results import Finding, Highlight, Result, ResultsFile

DETAIL_STRING_KEYS = frozenset({"description", "unit", "method", "metric", "strategy", "linker", "model",
                                "mode", "label", "entity_type", "selection", "aggregation", "note_kind",
                                "baseline_kind", "embedder", "llm", "trial_unit", "interval",
                                "value_from", "warning"})  # a component's doubt about its own figure; never quotes a document
#: Key names dropped whatever their value.
DENY = re.compile(r"^(orig(inal)?(_.*)?|.*_original|guess(es)?|.*_guess(es)?|gold.*|truth|answer|expected|"
                  r"subject|true_.*|predicted(_subject|_name)?|source_text|claims?|original_claims|text)$",
                  re.IGNORECASE)
CATEGORY_KEY = re.compile(r"^(?:[A-Z0-9_]{1,40}|[a-z0-9_]{1,40})$")
#: A highlight kind is kept when it reads like a category ("rare n-gram", "PERSON"), not a name.
CATEGORY_KIND = re.compile(r"^(?:[a-z0-9 _/-]{1,40}|[A-Z0-9_/-]{1,40})$")


def shareable(rf: ResultsFile, *, keep_ids: bool = False) -> ResultsFile:
    """A copy of ``rf`` safe to share (see the module docstring for what is kept); document ids
    become their :func:`pseudonyms` unless ``keep_ids``."""
    ids = {} if keep_ids else pseudonyms(rf)
    names = {} if keep_ids else release_pseudonyms(rf)
    results = [
        Result(kind=r.kind, name=r.name, release=names.get(r.release, r.release), value=r.value, ci=r.ci, n=r.n,
               baseline=r.baseline, beats_baseline=r.beats_baseline, details=_details(r.details, ids=ids),
               documents=[_finding(d, ids) for d in r.documents])
        for r in rf.results
    ]
    return ResultsFile(results=results, provenance=_renamed(_provenance(rf.provenance), names))


def release_pseudonyms(rf: ResultsFile) -> dict[str, str]:
    """``{release name: pseudonym}`` for the releases named after their file (provenance
    ``name_from: file``): ``R1``, ``R2``... in the order the releases first appear in the results
    (then in the provenance), so the same results give the same names in the HTML and the CSV;
    a pseudonym that is already another release's name is skipped."""
    prov = rf.provenance.get("releases") if isinstance(rf.provenance.get("releases"), dict) else {}
    hidden = [n for n in dict.fromkeys([*rf.releases, *prov])
              if isinstance(prov.get(n), dict) and prov[n].get("name_from") == "file"]
    taken = set(rf.releases) | set(prov)
    out: dict[str, str] = {}
    n = 0
    for name in hidden:
        n += 1
        while f"R{n}" in taken:
            n += 1
        out[name] = f"R{n}"
    return out


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """``value`` with every key and string that is a hidden release name replaced, and the name
    where a text quotes it (a title "Benchmark of NAME"), at any depth."""
    if not names:
        return value
    if isinstance(value, str):
        return names[value] if value in names else _summary(value, names)
    if isinstance(value, dict):
        return {names.get(k, k) if isinstance(k, str) else k: _renamed(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_renamed(v, names) for v in value)
    return value


def published_names(value: Any, names: dict[str, str]) -> Any:
    """``value`` (results, a leaderboard, checks: dataclasses, mappings, sequences, strings at any
    depth) with every hidden release name replaced by its pseudonym (``names``:
    :func:`release_pseudonyms`, plus any other name to hide), where a string is one and where a
    text quotes one: what every table CI or a paper publishes goes through (the gate's table and
    JUnit, ``to_latex()``, the bench's leaderboard files)."""
    if not names:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: published_names(getattr(value, f.name), names) for f in dataclasses.fields(value) if f.init}
        return dataclasses.replace(value, **fields)
    if isinstance(value, Mapping) and not isinstance(value, dict):
        value = dict(value)
    if isinstance(value, dict):
        return {names.get(k, k) if isinstance(k, str) else k: published_names(v, names) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(published_names(v, names) for v in value)
    return _renamed(value, names)


def pseudonyms(rf: ResultsFile) -> dict[str, str]:
    """``{document id: pseudonym}`` for every document of ``rf``: ``D01``, ``D02``... in the order
    the documents first appear in the results file, so the same results give the same pseudonyms
    (every run, every report of them) and one document has one pseudonym across releases and
    attacks. An id can name a person (a TRI file's ids are the subjects' names) or a case; the
    order of first appearance says nothing about it (sorting by id would)."""
    order: dict[str, None] = {}
    for r in rf.results:
        for d in r.documents:
            for i in (d.id, d.highlights_in):
                if isinstance(i, str):
                    order.setdefault(i, None)
    width = max(2, len(str(len(order))))
    return {i: f"D{n:0{width}d}" for n, i in enumerate(order, 1)}


def _ids(value: Any, ids: dict[str, str]) -> Any:
    """``value`` with every string that is a document id replaced by its pseudonym, at any depth."""
    if not ids:
        return value
    if isinstance(value, str):
        return ids.get(value, value)
    if isinstance(value, dict):
        return {ids.get(k, k) if isinstance(k, str) else k: _ids(v, ids) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_ids(v, ids) for v in value)
    return value


def _summary(text: str, ids: dict[str, str]) -> str:
    """A summary with any document id it quotes (a wrong link's document) replaced."""
    for i in sorted((i for i in ids if len(i) >= 3), key=len, reverse=True):
        if i in text:
            text = re.sub(rf"(?<!\w){re.escape(i)}(?!\w)", ids[i], text)
    return text


def _finding(f: Finding, ids: dict[str, str]) -> Finding:
    """The finding without its private facts (and summary, when private) and highlight notes,
    its ids replaced by their pseudonyms."""
    return Finding(id=ids.get(f.id, f.id), success=f.success,
                   summary="" if "summary" in f.private else _summary(f.summary or "", ids),
                   highlights=tuple(_highlight(h) for h in f.highlights),
                   highlights_in=ids.get(f.highlights_in, f.highlights_in) if f.highlights_in else f.highlights_in,
                   facts={k: _ids(v, ids) for k, v in f.facts.items() if k not in f.private and not DENY.match(k)},
                   private=f.private)


def _highlight(h: Highlight) -> Highlight:
    kind = h.kind if isinstance(h.kind, str) and CATEGORY_KIND.match(h.kind) else "finding"
    return Highlight(h.start, h.end, kind)


def _details(value: Any, key: str | None = None, *, ids: dict[str, str]) -> Any:
    if isinstance(value, bool) or isinstance(value, (int, float)) or value is None:
        return value
    if isinstance(value, str):
        return value if key in DETAIL_STRING_KEYS and value not in ids else _DROP
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            k = str(k)
            if k in ids:  # keyed by document: the pseudonym
                k = ids[k]
            elif DENY.match(k) or not CATEGORY_KEY.match(k):
                continue
            kept = _details(v, k, ids=ids)
            if kept is not _DROP:
                out[k] = kept
        return out
    if isinstance(value, (list, tuple)):
        kept = [v for v in (_details(v, key, ids=ids) for v in value if not isinstance(v, str)) if v is not _DROP]
        return kept if kept or not value else _DROP
    return _DROP


_DROP = object()


def _provenance(prov: dict[str, Any]) -> dict[str, Any]:
    """Provenance without free text: the command line is dropped, and the reasons a component
    was skipped or failed (exception texts, model answers, document ids) become a category
    and a count per component (:func:`not_run_categories`)."""
    out = {k: _no_paths(v) for k, v in prov.items() if k not in ("argv", "skipped", "errors")}
    if isinstance(out.get("releases"), dict):
        out["releases"] = {k: _withheld(v) for k, v in out["releases"].items()}
    for key in ("skipped", "errors"):
        if prov.get(key):
            out[key] = not_run_categories(prov.get(key), "skipped" if key == "skipped" else "error")
    return out


#: Keys of a release's provenance that hold what the checks against the originals found: text
#: that quotes an original ("recorded 'X' at [108, 122), the original has 'Mr ...'") and the ids of
#: the documents a release leaves out. A shared edition keeps only how many there were.
WITHHELD = ("warnings", "missing", "missing_ids")


def _withheld(info: Any) -> Any:
    """A release's provenance without :data:`WITHHELD` (their count kept as ``warnings_withheld``)."""
    if not isinstance(info, dict) or not any(k in info for k in WITHHELD):
        return info
    kept = {k: v for k, v in info.items() if k not in WITHHELD}
    found = info.get("warnings")
    kept["warnings_withheld"] = len(found) if isinstance(found, list) else 1
    return kept


#: Keys whose value is a file or folder, dropped from a shared provenance.
PATH_KEY = re.compile(r"^(path|paths|source|file|files|dir|folder|cwd|out|spec_file|.*_(path|dir|file|folder))$",
                      re.IGNORECASE)
#: A value that reads like a path or a URL (a folder separator, a drive, a home, a file's extension).
PATH_VALUE = re.compile(r"[/\\]|^~|^[A-Za-z]:|\.(jsonl?|csv|tsv|ya?ml|toml|txt|gguf|parquet|html|sqlite|npy)$",
                        re.IGNORECASE)


def _no_paths(value: Any) -> Any:
    """Provenance with no file path (an input's path may name a person or a case): keys named
    like a path and values that read like one are dropped, at any depth; checksums, counts and
    names stay, so the shared report still says which data it is about."""
    if isinstance(value, dict):
        return {k: _no_paths(v) for k, v in value.items()
                if not (isinstance(k, str) and PATH_KEY.match(k)) and not (isinstance(v, str) and PATH_VALUE.search(v))}
    if isinstance(value, (list, tuple)):
        return [_no_paths(v) for v in value if not (isinstance(v, str) and PATH_VALUE.search(v))]
    return value


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
