"""Parsing the LLM's answers, finding every occurrence of a term, cutting documents into chunks."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from audit.models.llm import extract_json_list

# =========================================================================== parsing

_JSON_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')
_BULLET = re.compile(r"^\s*(?:[-*•–+]|\d{1,3}[.)])\s+(.+?)\s*$")
_KEYS = ("text", "term", "span", "value", "pii", "entity", "word")
_QUOTES = "\"'“”‘’`"


def _flatten(items: Iterable[Any]) -> list[str]:
    out: list[str] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, (int, float)):
            out.append(str(item))
        elif isinstance(item, (list, tuple)):
            out.extend(_flatten(item))
        elif isinstance(item, dict):
            value = next((item[k] for k in _KEYS if isinstance(item.get(k), str)), None)
            if value is None:
                value = next((v for v in item.values() if isinstance(v, str)), None)
            if value is not None:
                out.append(value)
    return out


def parse_terms(answer: str) -> tuple[list[str], str]:
    """The terms in an LLM answer and how they were read: ``"json"`` (a JSON list, maybe inside
    chatter or an object), ``"repaired"`` (a Python-style list, a JSON list cut off by the token
    limit, bulleted or numbered lines) or ``"unparsable"`` (nothing read; the terms are ``[]``)."""
    found = extract_json_list(answer)
    if found is not None:
        return _flatten(found), "json"
    start, end = answer.find("["), answer.rfind("]")
    if 0 <= start < end:
        try:
            literal = ast.literal_eval(answer[start:end + 1])
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            literal = None
        if isinstance(literal, (list, tuple)):
            return _flatten(literal), "repaired"
    if start >= 0:  # a JSON list cut off by the token limit: keep its complete strings
        items = []
        for m in _JSON_STRING.finditer(answer, start):
            try:
                items.append(json.loads(f'"{m.group(1)}"'))
            except ValueError:
                continue
        if items:
            return items, "repaired"
    bullets = [m.group(1) for m in map(_BULLET.match, answer.splitlines()) if m]
    if bullets:
        return [b.strip(_QUOTES + " ,") for b in bullets], "repaired"
    return [], "unparsable"


# =========================================================================== masking

def _pattern(term: str) -> re.Pattern[str] | None:
    words = term.split()
    if not words:
        return None
    body = r"\s+".join(re.escape(w) for w in words)
    body = re.sub(r"(?:'|’)", "['’]", body)  # either apostrophe (re.escape leaves both alone)
    left = r"(?<!\w)" if re.match(r"\w", term[0]) else ""
    right = r"(?!\w)" if re.match(r"\w", term[-1]) else ""
    return re.compile(left + body + right, re.IGNORECASE)


def _variants(term: str) -> list[str]:
    """The term as given, then without enclosing quotes and trailing punctuation."""
    term = term.strip()
    cleaned = term.strip(_QUOTES).strip().rstrip(".,;:").strip()
    return [t for t in dict.fromkeys((term, cleaned)) if t and any(c.isalnum() for c in t)]


def find_terms(text: str, terms: Iterable[str]) -> tuple[list[tuple[int, int]], list[str]]:
    """Where the terms occur in ``text``: regions to mask (sorted, disjoint) and the terms that
    occur nowhere (as given). Case-insensitive, word-bounded, every occurrence; longest match first,
    a match inside a kept region is dropped and one crossing it widens it to their union."""
    matches: set[tuple[int, int]] = set()
    missing: list[str] = []
    for term in dict.fromkeys(t for t in terms if isinstance(t, str)):
        hits: list[tuple[int, int]] = []
        for variant in _variants(term):
            pattern = _pattern(variant)
            hits = [m.span() for m in pattern.finditer(text) if m.end() > m.start()] if pattern else []
            if hits:
                break
        if hits:
            matches.update(hits)
        elif term.strip():
            missing.append(term)
    kept: list[list[int]] = []
    for s, e in sorted(matches, key=lambda m: (-(m[1] - m[0]), m[0])):
        touching = [k for k in kept if s < k[1] and k[0] < e]
        if not touching:
            kept.append([s, e])
            continue
        if len(touching) == 1 and touching[0][0] <= s and e <= touching[0][1]:
            continue  # inside a longer match
        merged = [min([s] + [k[0] for k in touching]), max([e] + [k[1] for k in touching])]
        kept = [k for k in kept if k not in touching] + [merged]
    return sorted((s, e) for s, e in kept), missing


def covered(regions: Iterable[tuple[int, int]]) -> set[int]:
    return {i for s, e in regions for i in range(s, e)}


# =========================================================================== chunking

def pack_chunks(sentences: Sequence[tuple[int, int]], count: Callable[[int, int], int], budget: int,
                text_length: int) -> list[tuple[int, int]]:
    """Consecutive sentences packed into chunks of at most ``budget`` tokens (``count(start, end)``);
    chunks cover the text from 0 to ``text_length`` with no gap, cut where sentences start."""
    chunks: list[tuple[int, int]] = []
    start, used = 0, 0
    cuts = [s for s, _ in sentences][1:] + [text_length]
    prev = 0
    for cut in cuts:
        size = count(prev, cut)
        if used and used + size > budget:
            chunks.append((start, prev))
            start, used = prev, 0
        used += size
        prev = cut
    chunks.append((start, text_length))
    return [c for c in chunks if c[1] > c[0]]


def split_long(text: str, start: int, end: int, pieces: int) -> list[tuple[int, int]]:
    """[start, end) cut between words into about ``pieces`` parts of similar length."""
    out, lo = [], start
    step = max(1, (end - start) // max(1, pieces))
    while end - lo > step:
        cut = text.rfind(" ", lo + 1, lo + step)
        cut = cut if cut > lo else lo + step
        out.append((lo, cut))
        lo = cut
    out.append((lo, end))
    return out
