"""Read corpora and releases from the file formats people actually have.

Formats (:data:`FORMATS`), detected from the extension and the content, or named
explicitly (``--format``):

``jsonl``
    One JSON object per line: ``id`` (``doc_id`` accepted), ``text``, optional
    ``subject`` and ``spans``. A span is ``{"start", "end", "label", ...}`` (any
    field of :class:`~audit.core.data.Span`; ``entity_type``/``type`` are read as
    ``label``) or a list ``[start, end, label?]``. Other keys go to ``meta``.
    Read line by line, so large files stream.
``csv``
    The same columns in a CSV file (``.tsv``: tab-separated); ``spans`` is a JSON
    string column.
``parquet``
    The same columns in a Parquet file (``spans`` a list of structs or a JSON string),
    read through pandas and pyarrow (:mod:`audit.io.frames`). In CSV, Parquet and
    JSONL the columns may have other names (``columns={"text": "body"}``).
``json-map``
    ``{id: text}`` (e.g. TAB background files); subject = id.
``json-list``
    A JSON list of document objects, as in JSONL (TAB's text-only corpus uses
    ``doc_id``; a record with ``doc_id`` and no ``subject`` gets subject = doc_id,
    because each TAB document is about one individual).
``tab``
    TAB JSON: ``[{doc_id, text, annotations: {annotator: {entity_mentions: [...]}}}]``.
    Mentions become spans (label = ``entity_type``, with ``entity_id`` and
    ``identifier_type``). ``annotator=NAME`` keeps one annotator; by default the
    annotators are merged, identical offsets kept once (first annotator wins).
    Overlaps between mentions are kept as they are (TAB has nested mentions and
    annotators disagree); sanitizing keeps the outermost, and masks crossing
    mentions (two annotators' extents of one mention) as their union, so none is
    left half in the clear (:func:`audit.core.data.outermost`). Subject = doc_id.
``tri``
    The TRI dataframe layout: one row per individual with ``name`` (= subject and
    id), ``public_knowledge`` (background text) and one text column per method.
    A JSON list of records, a pandas ``to_json`` dict (orient ``columns``,
    ``index``, ``split`` or ``table``) or a CSV. :func:`load_tri` returns the
    background corpus and one release per method (one document per individual
    with a non-empty cell); :func:`load_corpus` returns the background corpus.
``spans``
    A span file ``{doc_id: [[start, end, replacement?], ...]}`` applied to
    original documents with :func:`audit.core.data.sanitize_corpus` (sorted by start,
    outermost of nested spans kept, crossing spans an error as in JSONL, no or empty
    replacement = suppression). A JSON object whose values are neither all texts nor all
    span lists is an error, not a guess; ``{id: text}`` given as a release needs the
    originals (or ``--format json-map``). Each
    released document records its applied spans (offsets in the sanitized text,
    ``original``, ``orig_start``/``orig_end``). Span files carry no labels: an
    applied span's ``label``/``entity_id``/``identifier_type`` are copied from
    the original's gold span with the same offsets when there is one, else the
    label is ``""`` (in TAB's ``*_Entity`` files the label is in ``replacement``).

Every problem in an input is collected into one :class:`~audit.core.errors.DataError`
naming the file, the line (JSONL, CSV, invalid JSON) or the document.

This module is the public face of :mod:`audit.io`; each format family lives in its own
module: :mod:`~audit.io.detect` (detection, shared reading helpers),
:mod:`~audit.io.records` (document records and spans), :mod:`~audit.io.tables` (JSONL, CSV),
:mod:`~audit.io.jsondocs` (JSON map and list, TAB), :mod:`~audit.io.tri` and
:mod:`~audit.io.spanfiles`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Document, Release
from audit.core.errors import AnonauditError, Problems
from audit.core.files import atomic_open
from audit.io.detect import FORMATS, read_once, sniff
from audit.io.frames import load_parquet
from audit.io.jsondocs import load_json_list, load_json_map, load_tab
from audit.io.spanfiles import apply_span_file
from audit.io.tables import load_csv, load_jsonl
from audit.io.tri import read_tri, read_tri_dev

__all__ = ["FORMATS", "detect_format", "load_corpus", "load_dev", "load_release_file", "load_releases", "load_tri",
           "parse_release_spec", "save_jsonl"]


def parse_release_spec(spec: str) -> tuple[str | None, str]:
    """Split ``NAME=PATH`` into ``(NAME, PATH)``; a plain ``PATH`` gives ``(None, PATH)``.

    File names may contain ``=`` (``TAB_test_BK=Original.json``): a spec that is an
    existing file, or whose part before ``=`` contains a path separator, is a path.
    """
    if os.path.exists(spec) or "=" not in spec:
        return None, spec
    name, path = spec.split("=", 1)
    if "/" in name or os.sep in name or not name.strip():
        return None, spec
    return name.strip(), path


@read_once
def detect_format(path: str | os.PathLike) -> str:
    """The format of ``path`` (one of :data:`FORMATS`), from its extension and content."""
    return sniff(str(path))[0]


@read_once
def load_corpus(path: str | os.PathLike, format: str | None = None, *, name: str | None = None,
                annotator: str | None = None, columns: dict[str, str] | None = None) -> Corpus:
    """Load documents from ``path`` (format detected unless given).

    A TRI file gives its background corpus (``public_knowledge``); a span file
    cannot be loaded alone (it needs originals: use :func:`load_releases`).
    ``columns`` names the columns of the fields of a CSV, Parquet or JSONL file
    (``{"text": "body", "id": "case"}``); the other formats have fixed fields and ignore it
    (so one ``--text-column`` serves a CSV release beside a TAB background).
    """
    source = str(path)
    fmt, data = sniff(source, format)
    name = name or Path(source).stem
    if fmt == "spans":
        raise AnonauditError(
            f"{source}: this is a span file {{doc_id: [[start, end, replacement?], ...]}}; it is applied "
            "to the original documents: pass them with --originals FILE")
    if annotator is not None and fmt != "tab":
        raise AnonauditError(f"{source}: --annotator applies to TAB files only (this file is {fmt})")
    if fmt == "tri":
        return read_tri(source, data)[0].rename(name)
    return Corpus(_load_documents(source, fmt, data, annotator, columns), name=name, source=source)


def _load_documents(source: str, fmt: str, data: Any, annotator: str | None = None,
                    columns: dict[str, str] | None = None) -> list[Document]:
    """The documents of a file in one of the document formats (not TRI, not a span file)."""
    if fmt == "jsonl":
        return load_jsonl(source, columns)
    if fmt == "csv":
        return load_csv(source, columns)
    if fmt == "parquet":
        return load_parquet(source, columns)
    if fmt == "json-map":
        return load_json_map(source, data)
    if fmt == "json-list":
        return load_json_list(source, data)
    return load_tab(source, data, annotator)


def load_releases(spec: str, *, originals: Corpus | None = None, format: str | None = None,
                  columns: dict[str, str] | None = None) -> list[Release]:
    """Load the release(s) named by a command-line ``spec`` (``NAME=PATH`` or ``PATH``; see
    :func:`parse_release_spec`). Code that has the name and the path apart calls
    :func:`load_release_file`, which never splits a string."""
    name, path = parse_release_spec(spec)
    return load_release_file(path, name=name, originals=originals, format=format, columns=columns)


@read_once
def load_release_file(path: str | os.PathLike, *, name: str | None = None, originals: Corpus | None = None,
                      format: str | None = None, columns: dict[str, str] | None = None) -> list[Release]:
    """Load the release(s) in the file ``path``, named ``name`` (default: the file stem).

    A span file is applied to ``originals``. A TRI file gives one release per
    method column (``name`` selects the column of that name); its releases are
    aligned when every name is an id of ``originals``. Other formats give one
    release; when ``originals`` are given, its ids must all be among them.
    Name and path are separate arguments, so either may contain ``=``.
    """
    path = str(path)
    fmt, data = sniff(path, format)
    if fmt == "tri":
        _, releases = read_tri(path, data, need_methods=True)
        if name is not None:
            chosen = [r for r in releases if r.name == name]
            if not chosen:
                cols = ", ".join(r.name for r in releases) or "(none)"
                raise AnonauditError(f"{path}: no method column {name!r} in this TRI file; columns: {cols}")
            releases = chosen
        if originals is not None:
            releases = [Release(r.name, r.corpus, aligned=all(d.id in originals for d in r.corpus),
                                source=path) for r in releases]
        return releases
    name = name or Path(path).stem
    if fmt == "spans":
        if originals is None:
            raise AnonauditError(
                f"{path}: this is a span file {{doc_id: [[start, end, replacement?], ...]}}; it is applied "
                "to the original documents: pass them with --originals FILE")
        return [apply_span_file(path, data, originals, name)]
    if fmt == "json-map" and originals is None and format is None:
        # {id: text} gives every document its id as subject: right for background files, a guess
        # for a release (a mistyped span file {"doc": "abc"} would be audited as one document).
        raise AnonauditError(
            f"{path}: a JSON object {{id: text}} given as a release; without the original documents its ids "
            "cannot be checked and would be taken as subjects. Pass the originals (--originals FILE), or "
            "--format json-map if that is what you mean (a span file is {doc_id: [[start, end], ...]})")
    corpus = Corpus(_load_documents(path, fmt, data, columns=columns), name=name, source=path)
    if originals is not None:
        check_release_ids(corpus, originals, path)
    return [Release(name=name, corpus=corpus, aligned=True, source=path)]


def check_release_ids(corpus: Corpus, originals: Corpus, source: str) -> None:
    """Every document of a release (read from ``source``: a file, or what data in memory was)
    must have the id of an original: a :class:`DataError` naming each one that has not."""
    problems = Problems(source)
    for doc in corpus:
        if doc.id not in originals:
            problems.add(f"id not found in the originals ({originals.source or originals.name})", doc_id=doc.id)
    problems.raise_if_any()


@read_once
def load_dev(path: str | os.PathLike, format: str | None = None) -> Release | None:
    """The dev release a background file carries: a TRI file's ``dev_abstract`` column (the
    TRI paper's code chooses the attacker's epoch on it); ``None`` for any other file."""
    source = str(path)
    fmt, data = sniff(source, format)
    return read_tri_dev(source, data) if fmt == "tri" else None


@read_once
def load_tri(path: str | os.PathLike) -> tuple[Corpus, list[Release]]:
    """Load a TRI dataframe file: ``(background corpus, one release per method)``."""
    source = str(path)
    fmt, data = sniff(source, "tri")
    return read_tri(source, data)


def jsonl_lines(corpus: Iterable[Document]) -> Iterator[bytes]:
    """Documents as JSONL lines (one per document, spans included), UTF-8."""
    for doc in corpus:
        yield (json.dumps(doc.to_dict(), ensure_ascii=False) + "\n").encode("utf-8")


def jsonl_bytes(corpus: Iterable[Document]) -> bytes:
    """Documents as JSONL, in memory: what :func:`save_jsonl` writes."""
    return b"".join(jsonl_lines(corpus))


def save_jsonl(corpus: Iterable[Document], path: str | os.PathLike) -> Path:
    """Write documents as JSONL (one per line, spans included), atomically. A document with no
    text (only whitespace), which no loader reads back, is refused naming it; nothing is written."""
    path = Path(path)
    corpus = list(corpus)
    problems = Problems(str(path))
    for doc in corpus:
        if not doc.text.strip():
            problems.add("no text left in this document: a JSONL file holding it could not be read back (empty "
                         "text); nothing was written", doc_id=doc.id)
    problems.raise_if_any()
    with atomic_open(path, "wb") as fh:
        fh.writelines(jsonl_lines(corpus))
    return path
