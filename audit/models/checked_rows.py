"""Rows of the content-addressed sqlite caches (spaCy parses, sentence vectors): one row per
(model identity, text key), each with its checksum (:func:`audit.runtime.integrity.row_checksum`),
read back in chunks that stay under sqlite's limit on bound variables, a row whose checksum does
not hold (or whose value does not read) deleted, so that its text is computed again."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from audit.runtime.integrity import row_checksum

#: Keys per ``SELECT ... IN (...)``: under sqlite's default limit of bound variables (999 before 3.32).
CHUNK = 500


def read_rows(db: sqlite3.Connection, table: str, column: str, identity: str, keys: Iterable[str],
              read: Callable[[Any], Any]) -> tuple[dict[str, Any], list[str]]:
    """``(found, bad)``: ``read(value)`` of each row of ``table`` (columns ``model, key, COLUMN,
    sum``) for ``identity`` and ``keys`` whose checksum holds; the keys of the rows that failed it,
    or whose ``read`` raised ValueError or TypeError, which are deleted."""
    keys = list(keys)
    found: dict[str, Any] = {}
    bad: list[str] = []
    for i in range(0, len(keys), CHUNK):
        chunk = keys[i:i + CHUNK]
        rows = db.execute(f"SELECT key, {column}, sum FROM {table} WHERE model = ? AND key IN "
                          f"({','.join('?' * len(chunk))})", [identity, *chunk]).fetchall()
        for key, value, checksum in rows:
            try:
                if checksum != row_checksum(identity, key, value):
                    raise ValueError("checksum")
                found[key] = read(value)
            except (ValueError, TypeError):
                bad.append(key)
    if bad:
        db.executemany(f"DELETE FROM {table} WHERE model = ? AND key = ?", [(identity, k) for k in bad])
    return found, bad


def write_rows(db: sqlite3.Connection, table: str, identity: str, values: Mapping[str, Any]) -> None:
    """Keep ``values`` (key -> the stored value) in ``table`` for ``identity``, each row with its checksum."""
    rows = [(identity, k, v) for k, v in values.items()]
    db.executemany(f"INSERT OR REPLACE INTO {table} VALUES (?, ?, ?, ?)", [(*row, row_checksum(*row)) for row in rows])
