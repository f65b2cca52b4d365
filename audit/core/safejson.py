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
  lone surrogate, which no UTF-8 file can hold and every later write would fail on.

Each problem is a :class:`~audit.core.errors.DataError` naming the file, the line when known, and
the place in the tree (``[3].text``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
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


def loads(text: str | bytes, source: str, *, line: int | None = None,
          object_pairs_hook: Callable[[list[tuple[str, Any]]], Any] | None = None) -> Any:
    """``json.loads`` with the limits of this module. Invalid JSON raises
    :class:`json.JSONDecodeError` as before (the callers word it); a tree nested past what the
    parser can hold is a :class:`DataError` like any other too-deep tree."""
    try:
        data = json.loads(text, object_pairs_hook=object_pairs_hook)
    except RecursionError:
        raise DataError(Problem(source, f"nested deeper than {MAX_DEPTH} levels", line=line)) from None
    return check_tree(data, source, line=line)
