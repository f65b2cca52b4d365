"""How values and names are written on the page: percentages, numbers, result titles, and
text with its bidirectional controls made visible."""

from __future__ import annotations

import math
from typing import Any

# Bidirectional-text controls would reorder what surrounds them: show them as visible codes.
BIDI_CONTROLS = {c: f"[U+{ord(c):04X}]" for c in
                 "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"}
_BIDI_TABLE = str.maketrans(BIDI_CONTROLS)


def pct(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{100 * x:.{digits}f}%"


def num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{digits}g}" if abs(x) < 1e4 else f"{x:.3e}"
    return str(x)


_ACRONYMS = {"trir": "TRIR", "tpi": "TPI", "tps": "TPS", "nmi": "NMI", "bm25": "BM25", "llm": "LLM",
             "ner": "NER", "rouge": "ROUGE-L", "top5": "top-5", "ngram": "n-gram",
             "reid": "re-identification"}


def title_of(name: str) -> str:
    """``span_guess`` -> ``Span guess``, ``trir.top5`` -> ``TRIR: top-5`` (how result names are shown)."""
    parts = []
    for part in name.split("."):
        words = [_ACRONYMS.get(w.lower(), w) for w in part.replace("-", "_").split("_") if w]
        parts.append(" ".join(words))
    t = ": ".join(p for p in parts if p)
    return t[:1].upper() + t[1:] if t else name


def visible(text: str) -> str:
    """Text with bidirectional controls made visible (so they cannot reorder the page)."""
    return text.translate(_BIDI_TABLE)


def anchor(name: str) -> str:
    """``name`` as an HTML id (letters and digits kept, everything else ``-``)."""
    return "".join(c if c.isalnum() else "-" for c in name.lower())


def short(h: Any) -> str:
    """A checksum cut to its first 12 characters (anything else as :func:`num` writes it)."""
    return f"{h[:12]}…" if isinstance(h, str) and len(h) > 12 else num(h)
