"""Parsed input trees (JSON, YAML, TOML) checked before anything reads them.

Every reader of a user's file parses it with :func:`loads` (JSON) or checks what another parser
made with :func:`check_tree`, so the same three limits hold for every input alike:

* **depth**: at most :data:`MAX_DEPTH` nested lists and objects (TAB, results files and audit
  specs need fewer than 15); deeper is refused, so no ``RecursionError`` escapes from the parser
  or from code that walks the tree later;
* **size** (YAML): at most :data:`YAML_MAX_NODES` values counted as a reader would see them, so an
  alias bomb (a 1 KB spec whose aliases expand to billions of values) is refused before anything
  expands it (JSON has no aliases: its tree is never larger than its file);
* **Unicode**: every string (keys too) must be valid Unicode: JSON's ``"\\ud800"`` escape gives a
  lone surrogate, which no UTF-8 file can hold and every later write would fail on;
* **unique keys** (JSON): an object that gives one key twice is refused, naming the key and the
  line where the object opens: ``json`` would keep the last value and drop the first unseen.

Each problem is a :class:`~audit.core.errors.DataError` naming the file, the line when known, and
the place in the tree (``[3].text``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from audit.core.errors import DataError, Problem

#: Nesting of lists and objects an input may have.
MAX_DEPTH = 100
#: Nesting a YAML document (an audit spec, a --param value) may have: less than a JSON input's, so
#: a spec's values stay readable inside the results' provenance, a few levels deeper.
YAML_MAX_DEPTH = 50
#: Values (strings, numbers, lists, objects) a YAML document (an audit spec, a --param value) may
#: expand to: a hand-written spec has hundreds.
YAML_MAX_NODES = 100_000


def tree_problem(data: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int | None = None) -> str:
    """What is wrong with a parsed tree ("" when nothing): too deep, too large once expanded, or
    a string that is not valid Unicode. Iterative: a deep tree cannot overflow the stack here."""
    stack: list[tuple[Any, int, str]] = [(data, 0, "")]
    seen = 0
    while stack:
        node, depth, where = stack.pop()
        seen += 1
        if max_nodes is not None and seen > max_nodes:
            return (f"expands to more than {max_nodes:,} values (YAML aliases that repeat a value again and "
                    "again?); refused before it fills the memory")
        if isinstance(node, str):
            wrong = _unicode_problem(node)
            if wrong:
                return f"{where or 'the value'}: {wrong}"
            continue
        if isinstance(node, Mapping):
            items = list(node.items())
        elif isinstance(node, (list, tuple)):
            items = list(enumerate(node))
        else:
            continue
        if not items:
            continue
        if depth >= max_depth:
            return f"{where or 'the top level'}: nested deeper than {max_depth} levels"
        for key, value in reversed(items):
            if isinstance(key, str):
                wrong = _unicode_problem(key)
                if wrong:
                    return f"{where or 'the top level'}: a key is {wrong}"
                place = f"{where}.{key}" if where else key
            else:
                place = f"{where}[{key}]"
            stack.append((value, depth + 1, place))
    return ""


def _unicode_problem(text: str) -> str:
    if text.isascii():
        return ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return (f"not valid Unicode text: a lone surrogate {text[exc.start]!r} at character {exc.start} "
                "(e.g. a JSON \\ud800 escape without its pair)")
    return ""


def check_tree(data: Any, source: str, *, line: int | None = None, max_nodes: int | None = None,
               max_depth: int = MAX_DEPTH) -> Any:
    """``data`` unchanged, or a :class:`DataError` naming ``source`` (and ``line``); ``max_nodes``
    and ``max_depth``: :data:`YAML_MAX_NODES` and :data:`YAML_MAX_DEPTH` for what a YAML parser made."""
    wrong = tree_problem(data, max_nodes=max_nodes, max_depth=max_depth)
    if wrong:
        raise DataError(Problem(source, wrong, line=line))
    return data


class DuplicateKey(ValueError):
    """Raised by :func:`unique_keys` for a key an object gives twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON ``object_pairs_hook``: the object as a dict, or :class:`DuplicateKey` for a key
    given twice (``json`` would keep the last value and drop the first without a word)."""
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return out


def loads(text: str | bytes, source: str, *, line: int | None = None) -> Any:
    """``json.loads`` with the limits of this module. Invalid JSON raises
    :class:`json.JSONDecodeError` as before (the callers word it); a key given twice in one
    object, or a tree nested past what the parser can hold, is a :class:`DataError` naming
    ``source`` and the line (``line``: the line of ``text`` in its file, for one JSONL record)."""
    try:
        data = json.loads(text, object_pairs_hook=unique_keys)
    except RecursionError:
        raise DataError(Problem(source, f"nested deeper than {MAX_DEPTH} levels", line=line)) from None
    except DuplicateKey as exc:
        where = (line or 1) + (_key_line(text, exc.key) or 1) - 1
        raise DataError(Problem(source, duplicate_key_message(exc.key), line=where)) from None
    return check_tree(data, source, line=line)


def duplicate_key_message(key: str) -> str:
    return (f"the key {key[:80]!r} appears twice in one JSON object (JSON would keep only the last value); "
            "remove or rename one")


def _key_line(text: str | bytes, key: str) -> int | None:
    """The line (1-based) of the second ``key`` of the object that gives it twice: the text is
    parsed again by the pure-Python scanner, which knows where each object starts (only when
    a duplicate was found, so the fast parser reads every valid file)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8-sig", errors="replace")
    found: list[int] = []
    decoder = json.JSONDecoder(object_pairs_hook=unique_keys)

    def parse_object(s_and_end: tuple[str, int], *args: Any) -> Any:
        s, end = s_and_end
        try:
            return json.decoder.JSONObject(s_and_end, *args)
        except DuplicateKey:
            if not found:  # the innermost object: its own keys, at depth 1
                found.append(_second_key_at(s, end, key))
            raise

    decoder.parse_object = parse_object  # type: ignore[assignment]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    try:
        decoder.decode(text)
    except (DuplicateKey, ValueError, RecursionError):
        pass
    return found[0] if found else None


def _second_key_at(s: str, start: int, key: str) -> int:
    """The line of the second time ``key`` is a key of the object opened just before ``start``."""
    scan = json.decoder.scanstring  # type: ignore[attr-defined]
    depth, i, seen = 1, start, 0
    while i < len(s) and depth:
        c = s[i]
        if c == '"':
            value, after = scan(s, i + 1)
            rest = s[after:after + 64].lstrip()
            if depth == 1 and value == key and rest.startswith(":"):
                seen += 1
                if seen == 2:
                    return s.count("\n", 0, i) + 1
            i = after
            continue
        if c in "{[":
            depth += 1
        elif c in "}]":
            depth -= 1
        i += 1
    return s.count("\n", 0, start) + 1
