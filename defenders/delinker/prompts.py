"""The delinker's prompts and the parsing of its answers."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any


#: What a span the LLM could not fix becomes (a placeholder the attacks never search).
REDACTION = "[REDACTED]"
REDACTED_LABEL = "REDACTED"

# --------------------------------------------------------------------------- prompts

SYSTEM_MARKED = (
    "You help publish a document without letting anyone find its source by searching for exact "
    "phrases. In the passage, some phrases are wrapped in [[double brackets]]. Give a new wording for "
    "each bracketed phrase only:\n"
    "- it must stay true to what the phrase says; it may be vaguer, but never add or change facts;\n"
    "- it must read naturally in place of the brackets and must not reuse the same word sequence;\n"
    "- leave placeholders such as [PERSON] or ***, and everything outside the brackets, alone.\n"
    "Reply with a JSON object only: \"reasoning\" (one short sentence on how you will reword) and "
    "\"rewrites\", a list with one {\"marked\": <the bracketed phrase>, \"new\": <its new wording>} "
    "per bracketed phrase, in the order they appear."
)

EXAMPLES_MARKED = [
    ("In [DATE] the applicant, who [[ran a small bakery]] in [LOC], was stopped [[outside the municipal "
     "swimming pool]] by two police officers.",
     {"reasoning": "Describe the job and the place in more general words.",
      "rewrites": [{"marked": "ran a small bakery", "new": "had a food business"},
                   {"marked": "outside the municipal swimming pool", "new": "near a public sports venue"}]}),
    ("The [[regional court of appeal upheld]] the sentence of [NUMBER] years and [[ordered the seizure of "
     "his fishing boat]].",
     {"reasoning": "Keep the decisions but phrase them differently.",
      "rewrites": [{"marked": "regional court of appeal upheld", "new": "appellate judges confirmed"},
                   {"marked": "ordered the seizure of his fishing boat", "new": "had his vessel confiscated"}]}),
]

SYSTEM_PLAIN = (
    "You help publish a document without letting anyone find its source by searching for exact "
    "phrases. Rewrite the passage in your own words: keep every fact and its meaning, but change the "
    "wording. Markers such as {{1}} stand for hidden text: keep each of them exactly once, in the same "
    "order. Reply with a JSON object only: \"reasoning\" (one short sentence on how you will reword) "
    "and \"rewritten\" (the new passage)."
)

EXAMPLES_PLAIN = [
    ("In {{1}} the applicant, who ran a small bakery in {{2}}, was stopped outside the municipal "
     "swimming pool by two police officers.",
     {"reasoning": "Reorder the sentence and use other words for the job and the place.",
      "rewritten": "Two police officers stopped the applicant, a bakery owner from {{2}}, near the town's "
                   "public pool in {{1}}."}),
]

_MARK = re.compile(r"\{\{(\d+)\}\}")
_NON_WORD = re.compile(r"\W+")


def norm_words(text: str) -> str:
    return " ".join(text.lower().split())


def merge_ranges(ranges: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted ranges with overlapping ones merged."""
    out: list[list[int]] = []
    for s, e in sorted(ranges):
        if out and s < out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _json_object(answer: str) -> dict[str, Any] | None:
    """The JSON object in an answer (the whole answer, else its outermost braces)."""
    for cand in (answer.strip(), answer[answer.find("{"): answer.rfind("}") + 1]):
        try:
            data = json.loads(cand)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def parse_rewrites(answer: str, marked: Sequence[str]) -> list[str | None]:
    """The new wording of each marked phrase from an LLM answer (None where there is no usable
    one: missing, empty, multi-line, still bracketed, or the same words as the phrase). Items
    are matched to phrases by their ``marked`` text when it names one, else by position."""
    data = _json_object(answer)
    items = data.get("rewrites") if data else None
    if items is None and data:
        items = next((v for v in data.values() if isinstance(v, list)), None)
    out: list[str | None] = [None] * len(marked)
    if not isinstance(items, list):
        return out
    wanted = [norm_words(m) for m in marked]
    for pos, item in enumerate(items):
        if isinstance(item, dict):
            said, new = item.get("marked"), item.get("new")
        else:
            said, new = None, item
        slot = None
        if isinstance(said, str):
            slot = next((j for j, w in enumerate(wanted) if w == norm_words(said) and out[j] is None), None)
        if slot is None and pos < len(marked) and out[pos] is None:
            slot = pos
        if slot is None or not isinstance(new, str):
            continue
        new = new.strip()
        if usable_rewrite(marked[slot], new):
            out[slot] = new
    return out


def usable_rewrite(original: str, new: str) -> bool:
    """Whether ``new`` can replace ``original``: one line, no brackets or braces (small models
    copy the [[marks]] or invent placeholders), not much longer, and not containing the
    original's words in their order (a copy, or the phrase padded with more words)."""
    if not new or "\n" in new or any(c in new for c in "[]{}") or len(new) > 2 * len(original) + 30:
        return False
    words_old = _words(original)
    return bool(words_old) and f" {words_old} " not in f" {_words(new)} "


def _words(text: str) -> str:
    return norm_words(_NON_WORD.sub(" ", text))


def parse_plain(answer: str, n_markers: int) -> list[str] | None:
    """The rewritten passage split at its ``{{i}}`` markers (``n_markers + 1`` pieces), or None
    when there is none or its markers are not exactly 1..n in order."""
    data = _json_object(answer)
    text = data.get("rewritten") if data else None
    if not isinstance(text, str) or not text.strip():
        return None
    parts = _MARK.split(text)
    numbers = [int(x) for x in parts[1::2]]
    if numbers != list(range(1, n_markers + 1)):
        return None
    return parts[0::2]
