"""Checking the shape of a serialized result before it is read (on load) or written (on save).

Every problem is a message naming the field (``"n" must be at least 1``, ``"details.sampled.of"
must be a whole number``), so a malformed results file is one :class:`DataError` that lists
them all, never a Python exception from deep inside.
"""

from __future__ import annotations

import json
import math
import numbers
import unicodedata
from typing import Any

from audit.core.details import details_problems

KINDS = ("attack", "utility")
#: How far outside [0, 1] a share may stray by floating-point rounding and still be read as the
#: bound it missed. The one tolerance of the project: the cosine of two unit vectors held in
#: float32 (embedding similarity, TPS's term similarity) is 1 within a few 1e-7 (1.0000000432612823
#: for a release equal to its originals), and a sum of float32 products over 384 dimensions may
#: stray further; anything beyond 1e-5 is a real error, never rounding. A figure within it is
#: clamped to the bound and the figure as computed recorded (:func:`clamp_share`).
SHARE_TOLERANCE = 1e-5


def clamp_share(x: Any) -> Any:
    """``x`` with floating-point noise at the [0, 1] bounds removed: a finite number less than
    :data:`SHARE_TOLERANCE` below 0 or above 1 is that bound; anything else (a share, a real
    error such as 1.2 or NaN, not a number at all) is returned as it is, for the checks to judge."""
    if not isinstance(x, numbers.Real) or isinstance(x, bool) or not math.isfinite(x):
        return x
    if -SHARE_TOLERANCE <= x < 0.0:
        return 0.0
    if 1.0 < x <= 1.0 + SHARE_TOLERANCE:
        return 1.0
    return x


def json_type(value: Any) -> str:
    """How JSON calls the type of ``value`` (for messages)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def control_characters(text: str) -> list[str]:
    """The control, format and line-separator characters in ``text`` (newline, carriage return,
    ESC, a bidirectional override...), each once: what a name printed in a log, a table or an
    annotation may never hold."""
    return sorted({c for c in text if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp")})


def result_shape_problems(item: Any) -> list[str]:
    """What is wrong with the shape of one serialized result (empty when it can be read)."""
    if not isinstance(item, dict):
        return [f"must be an object, not {json_type(item)}"]
    out: list[str] = []
    for key in ("kind", "name", "release"):
        if not isinstance(item.get(key), str):
            out.append(f"\"{key}\" must be a string, not {json_type(item.get(key))}")
    for key in ("name", "release"):
        if isinstance(item.get(key), str) and control_characters(item[key]):
            out.append(f"\"{key}\" {item[key]!r} holds control characters "
                       f"({', '.join(repr(c) for c in control_characters(item[key]))}): names never do (a CI log "
                       "would print them raw)"[:300])
    if isinstance(item.get("kind"), str) and item["kind"] not in KINDS:
        out.append(f"\"kind\" must be one of {', '.join(KINDS)}, not {item['kind']!r}")
    out += figure_problems(item)
    if item.get("beats_baseline") is not None and not isinstance(item["beats_baseline"], bool):
        out.append(f"\"beats_baseline\" must be true, false or null, not {json_type(item['beats_baseline'])}")
    if item.get("details") is not None and not isinstance(item["details"], dict):
        out.append(f"\"details\" must be an object, not {json_type(item['details'])}")
    out += details_problems(item.get("details"))
    docs = item.get("documents")
    if docs is not None and not isinstance(docs, list):
        out.append(f"\"documents\" must be a list of findings, not {json_type(docs)}")
    elif docs:
        for j, d in enumerate(docs):
            wrong = _finding_shape_problems(d)
            if wrong:
                out.append(f"documents[{j}]: {wrong}")
                if len(out) >= 20:
                    break
    return out


def _share_problem(key: str, x: Any) -> str:
    """What is wrong with ``x`` as a share (a risk, a utility, a baseline: 0 <= x <= 1)."""
    if not _is_number(x):
        return f"\"{key}\" must be a number, not {json_type(x)}"
    if not math.isfinite(x):
        return f"\"{key}\" must be a finite number, not {x}"
    if not -SHARE_TOLERANCE <= x <= 1 + SHARE_TOLERANCE:
        return f"\"{key}\" must lie between 0 and 1 (risks and utilities are shares), not {x}"
    return ""


def figure_problems(item: dict[str, Any]) -> list[str]:
    """What is wrong with the figures of one serialized result: ``value`` a finite share,
    ``ci`` ordered and within [0, 1], ``n`` at least 1, ``baseline`` a finite share or null. A
    figure outside these (NaN, a reversed interval, a rate over no trial) would be read as a
    verdict it does not support, so it is refused on read and on write alike."""
    out: list[str] = []
    if "value" not in item:
        out.append("\"value\" is missing")
    elif item["value"] is None:
        out.append("\"value\" is null: the figure was not finite (NaN or infinite), so it says nothing")
    else:
        out.append(_share_problem("value", item["value"]))
    ci = item.get("ci")
    if ci is not None:
        if isinstance(ci, list) and len(ci) == 2 and None in ci:
            out.append(f"\"ci[{ci.index(None)}]\" is null: the bound was not finite (NaN or infinite)")
        elif not (isinstance(ci, list) and len(ci) == 2 and all(_is_number(x) for x in ci)):
            out.append(f"\"ci\" must be a list of two numbers [low, high] or null, not {json.dumps(ci)[:60]}")
        else:
            wrong = [w for w in (_share_problem("ci[0]", ci[0]), _share_problem("ci[1]", ci[1])) if w]
            out += wrong
            if not wrong and ci[0] > ci[1]:
                out.append(f"\"ci\" must be ordered [low, high], not [{ci[0]}, {ci[1]}]")
    n = item.get("n")
    if not (isinstance(n, int) and not isinstance(n, bool)):
        out.append(f"\"n\" must be a whole number, not {json_type(n)}" + (" (it is missing)" if "n" not in item
                                                                            else ""))
    elif n < 1:
        out.append(f"\"n\" must be at least 1 (the number of documents scored), not {n}: a figure over no "
                   "document measures nothing")
    if item.get("baseline") is not None:
        out.append(_share_problem("baseline", item["baseline"]))
    return [w for w in out if w]


def _finding_shape_problems(d: Any) -> str:
    """What is wrong with one serialized finding ("" when nothing)."""
    if not isinstance(d, dict):
        return f"must be a finding (an object with an \"id\"), not {json_type(d)}"
    if not isinstance(d.get("id"), (str, int)) or isinstance(d.get("id"), bool):
        return "must have an \"id\" (a string)"
    hl = d.get("highlights")
    if hl is not None:
        if not isinstance(hl, list):
            return f"\"highlights\" must be a list, not {json_type(hl)}"
        for h in hl:
            if not (isinstance(h, dict) and isinstance(h.get("start"), int) and isinstance(h.get("end"), int)
                    and not isinstance(h["start"], bool) and not isinstance(h["end"], bool)
                    and 0 <= h["start"] <= h["end"]):
                return "each highlight must be an object with whole-number offsets 0 <= \"start\" <= \"end\""
    if d.get("highlights_in") is not None and not isinstance(d["highlights_in"], str):
        return "\"highlights_in\" must be a document id (a string)"
    private = d.get("private")
    if private is not None and not (isinstance(private, list) and all(isinstance(x, str) for x in private)):
        return "\"private\" must be a list of fact names"
    if d.get("summary") is not None and not isinstance(d["summary"], str):
        return "\"summary\" must be a string"
    return ""
