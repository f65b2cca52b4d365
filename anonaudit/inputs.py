"""The API's inputs as the sources of an audit spec.

A file (a path, or ``{"path", "format", "columns"}``) is passed on as it is: the runner
loads it as ``anonaudit run`` would. Data in memory (a :class:`~audit.core.data.Corpus`, a
:class:`~audit.core.data.Release`, a list of dicts, a pandas DataFrame, a Hugging Face
``Dataset``) is validated here, row by row, into documents that the runner takes as they are
(an :class:`~audit.pipeline.spec.InputSpec` or :class:`~audit.pipeline.entries.ReleaseSpec`
holding them, and what they were for messages): nothing in memory is written to disk.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError
from audit.io.frames import check_columns, corpus_from_table
from audit.pipeline.entries import ReleaseSpec
from audit.pipeline.spec import InputSpec


def is_file(value: Any) -> bool:
    return isinstance(value, (str, os.PathLike))


def as_corpus(value: Any, *, name: str, columns: Mapping[str, str] | None = None) -> Corpus:
    """A Corpus from a Corpus, a Release (its documents) or a table in memory."""
    if isinstance(value, Corpus):
        return value
    if isinstance(value, Release):
        return value.corpus
    return corpus_from_table(value, name=name, columns=columns)


def input_entry(value: Any, role: str, columns: Mapping[str, str]) -> Any:
    """The spec entry of an input (``originals``, ``background``, a corpus): a file as given
    (with the column names), or the documents of data in memory."""
    if value is None:
        return None
    if is_file(value):
        return {"path": os.fspath(value), **({"columns": dict(columns)} if columns else {})}
    if isinstance(value, Mapping):
        if "path" not in value:
            raise AnonauditError(f"{role}: a mapping names a file as {{'path': ..., 'format': ..., 'columns': ...}}; "
                                 "give a table as a list of dicts or a DataFrame")
        return {**({"columns": dict(columns)} if columns else {}), **value}
    corpus = as_corpus(value, name=role, columns=columns)
    return InputSpec(None, corpus=corpus, label=f"{role} ({type(value).__name__})")


def release_entries(releases: Any, columns: Mapping[str, str]) -> list[Any]:
    """The spec's ``releases``: from ``{name: data}``, or a list of files, Release objects and
    spec entries (``{"name", "path"}``, ``{"name", "sanitizer", "params"}``)."""
    if releases is None:
        raise AnonauditError("releases: give the releases to audit, as {name: data or file}")
    if is_file(releases) or isinstance(releases, Release):
        releases = [releases]
    if isinstance(releases, Mapping):
        items = [(str(k), v) for k, v in releases.items()]
    elif isinstance(releases, (list, tuple)):
        if releases and all(isinstance(r, Mapping) and "path" not in r and "sanitizer" not in r for r in releases):
            raise AnonauditError("releases: this looks like one table (a list of rows); name it: "
                                 "releases={'NAME': rows}")
        items = [(None, v) for v in releases]
    else:
        raise AnonauditError("releases: give {name: data or file} (data: a DataFrame, a list of dicts, a Hugging "
                             f"Face Dataset, a Corpus or a Release), got {type(releases).__name__}")
    out: list[Any] = []
    for name, value in items:
        label = f"releases[{name!r}]" if name is not None else "releases"
        if isinstance(value, Mapping) and ("path" in value or "sanitizer" in value):
            entry = dict(value)
            if "path" in value and columns and "columns" not in entry:
                entry["columns"] = dict(columns)
        elif is_file(value):
            entry = {"path": os.fspath(value), **({"columns": dict(columns)} if columns else {})}
        elif isinstance(value, Release):
            out.append(ReleaseSpec(name if name is not None else value.name, release=value,
                                   label=f"release {value.name} (Release)"))
            continue
        else:
            release = Release(name or "release", as_corpus(value, name=name or "release", columns=columns))
            out.append(ReleaseSpec(name, release=release, label=f"{label} ({type(value).__name__})"))
            continue
        if name is not None:
            entry["name"] = name
        out.append(entry)
    return out


def columns_of(text_column: str, id_column: str, subject_column: str, spans_column: str) -> dict[str, str]:
    """``{field: column}`` for the columns not named as their field."""
    return check_columns({"text": text_column, "id": id_column, "subject": subject_column, "spans": spans_column})


def component_entries(value: Any, what: str) -> list[Any]:
    """Attacks or metrics as the spec takes them: ``"name"``, ``{"name", "params", "sample"}``,
    a list of either, or ``{name: {params}}``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        if "name" in value:
            return [dict(value)]
        wrong = [k for k, v in value.items() if v is not None and not isinstance(v, Mapping)]
        if wrong:
            raise AnonauditError(f"{what}={{{wrong[0]!r}: {value[wrong[0]]!r}}}"[:120]
                                + ": the parameters of a component are a mapping {name: value}")
        return [{"name": str(k), "params": dict(v or {})} for k, v in value.items()]
    if isinstance(value, (list, tuple)):
        return list(value)
    raise AnonauditError(f"{what}: give names, {{'name': ..., 'params': {{...}}}} or {{name: {{params}}}}, "
                         f"got {type(value).__name__}")
