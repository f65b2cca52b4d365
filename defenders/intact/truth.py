"""Truth checks of INTACT's candidate generalisations, before any is chosen.

A generalisation must stay true of the detail it replaces ("a city in Poland" for Gdansk, not
"a city in Germany"); a small model often proposes one that is not. Each candidate is checked
where it can be:

* **by rule** (:func:`rule_verdict`), for years and numbers: every period the candidate names
  (a year, a range "1995-1999" or "between 1995 and 1999", a decade "the 1990s" or "'90s", its
  early, mid or late part, a century, "before"/"after" a year) must contain the original's
  years, and a month it names must be the original's; a quantity's bound ("more than 10", "under
  20", "10 to 20") must hold for the original's number, and a bare number must be it. A rough
  figure ("about 20") is not judged by rule. Parts of a decade are read loosely (early: 0-4,
  mid: 3-7, late: 6-9) so that no reasonable reading is called false;
* **by the model** otherwise (:class:`TruthCheck`): the same LLM scores two fixed answers,
  "Yes" and "No", after a few-shot question "is this description true of that detail?", by
  log-probability (the LLM layer's :meth:`~audit.models.llm.LLM.logprobs`, cached like every
  answer); a candidate is untruthful when "No" is the likelier. A backend without
  log-probabilities leaves such candidates unchecked (counted).

Counts (per release): ``truth_checked_rule``, ``truth_checked_model``, ``truth_unchecked``,
``untruthful_rule``, ``untruthful_model``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from audit.models.llm import LLM, LLMError

#: Labels whose numbers are quantities, not years.
QUANTITY_LABELS = frozenset({"QUANTITY", "MONEY", "PERCENT", "CARDINAL", "ORDINAL"})

_MONTHS = ("january february march april may june july august september october november "
           "december").split()
_MONTH = re.compile(r"\b(" + "|".join(_MONTHS + [m[:3] for m in _MONTHS] + ["sept"]) + r")\b\.?", re.I)
_YEAR = r"(1\d{3}|20\d{2})"
_PART = {"early": (0, 4), "mid": (3, 7), "middle": (3, 7), "late": (6, 9)}
_PERIODS = [  # (pattern, how to read it) in order: a matched piece is not read again
    (re.compile(rf"\bbetween\s+{_YEAR}\s+and\s+{_YEAR}\b", re.I), "range"),
    (re.compile(rf"\b{_YEAR}\s*(?:-|–|—|to|until|and)\s*{_YEAR}\b", re.I), "range"),
    (re.compile(r"\b(early|mid|middle|late)[- ]?(?:the\s+)?(1\d{2}|20\d)0'?s\b", re.I), "part"),
    (re.compile(r"\b(1\d{2}|20\d)0'?s\b", re.I), "decade"),
    (re.compile(r"(?:\b(early|mid|middle|late)[- ]?)?(?:\bthe\s+|')([1-9]0)'?s\b", re.I), "short"),
    (re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)[- ]century\b", re.I), "century"),
    (re.compile(rf"\b(before|after|since|until|by)\s+{_YEAR}\b", re.I), "bound"),
    (re.compile(rf"\b{_YEAR}\b"), "year"),
]
_NUMBER = r"(\d+(?:[.,]\d+)*)"
_BOUNDS = [
    (re.compile(rf"\bbetween\s+{_NUMBER}\s+and\s+{_NUMBER}", re.I), "range"),
    (re.compile(rf"\b{_NUMBER}\s*(?:-|–|to)\s*{_NUMBER}", re.I), "range"),
    (re.compile(rf"\b(?:more than|over|above|greater than|at least|upwards of|exceeding)\s+{_NUMBER}", re.I), "min"),
    (re.compile(rf"\b(?:less than|under|below|fewer than|at most|up to|no more than)\s+{_NUMBER}", re.I), "max"),
    (re.compile(rf"\b(?:about|around|approximately|roughly|nearly|almost|some|circa|close to)\s+{_NUMBER}", re.I),
     "rough"),
    (re.compile(rf"\b{_NUMBER}"), "exact"),
]


def _num(text: str) -> float | None:
    text = text.replace(",", "")
    try:
        return float(text)
    except ValueError:
        return None


def _periods(text: str, century_of: int) -> list[tuple[int, int]]:
    """The periods (first year, last year) that ``text`` names; ``century_of``: a year that
    dates a two-digit decade ("'90s")."""
    out = []
    for pattern, how in _PERIODS:
        for m in pattern.finditer(text):
            g = m.groups()
            if how == "range":
                lo, hi = sorted((int(g[0]), int(g[1])))
            elif how in ("part", "decade", "short"):
                part = g[0] if how != "decade" else None
                decade = int(g[-1]) * 10 if how != "short" else century_of - century_of % 100 + int(g[-1])
                a, b = _PART[part.lower()] if part else (0, 9)
                lo, hi = decade + a, decade + b
            elif how == "century":
                n = int(g[0])
                lo, hi = 100 * (n - 1), 100 * n  # either count of the boundary year
            elif how == "bound":
                year = int(g[1])
                lo, hi = ((0, year) if g[0].lower() in ("before", "until", "by") else (year, 9999))
            else:
                lo = hi = int(g[0])
            out.append((lo, hi))
        text = pattern.sub(lambda m: " " * len(m.group(0)), text)
    return out


def _months(text: str) -> set[str]:
    """The months ``text`` names (their first three letters; "may" only capitalised)."""
    return {m.group(1).lower()[:3] for m in _MONTH.finditer(text)
            if m.group(1).lower() != "may" or m.group(1)[0].isupper()}


def _quantity_verdict(original: float, candidate: str) -> bool | None:
    verdicts: list[bool] = []
    for pattern, how in _BOUNDS:
        for m in pattern.finditer(candidate):
            values = [_num(g) for g in m.groups()]
            if any(v is None for v in values):
                continue
            if how == "range":
                lo, hi = sorted(values)
                verdicts.append(lo <= original <= hi)
            elif how == "min":
                verdicts.append(original >= values[0])
            elif how == "max":
                verdicts.append(original <= values[0])
            elif how == "exact":
                verdicts.append(original == values[0])
        candidate = pattern.sub(lambda m: " " * len(m.group(0)), candidate)
    return all(verdicts) if verdicts else None


def rule_verdict(original: str, candidate: str, label: str = "") -> bool | None:
    """Whether ``candidate`` is true of ``original`` by the rules of the module doc: True or
    False when a rule decides, None when none applies (no year or number to compare)."""
    if label.upper() not in QUANTITY_LABELS:
        years = [int(y) for y in re.findall(rf"\b{_YEAR}\b", original)]
        if years:
            periods = _periods(candidate, years[0])
            months_o, months_c = _months(original), _months(candidate)
            if not periods and not months_c:
                return None
            ok = all(lo <= y <= hi for lo, hi in periods for y in years)
            if months_c and months_o:
                ok = ok and months_c <= months_o
            return ok
    numbers = [_num(n) for n in re.findall(_NUMBER, original)]
    numbers = [n for n in numbers if n is not None]
    if len(numbers) != 1:  # none, or several (which one a bound is about is not known)
        return None
    return _quantity_verdict(numbers[0], candidate)


_FEW_SHOT = (
    "Each question gives a detail of a document, in its sentence, and a description proposed to replace "
    "it. Answer Yes when the description is true of the detail, and No when it is false or about "
    "something else.\n\n"
    "Detail: \"Gdansk\" (She moved to [[Gdansk]] after the war.)\nDescription: a port city in northern "
    "Poland\nTrue? Yes\n\n"
    "Detail: \"a nurse\" (His mother worked as [[a nurse]] in the city hospital.)\nDescription: a teacher\n"
    "True? No\n\n"
    "Detail: \"Siemens AG\" (He joined [[Siemens AG]] as an engineer.)\nDescription: a food retailer\n"
    "True? No\n\n"
    "Detail: \"Lutheran\" (The family was [[Lutheran]].)\nDescription: Protestant\nTrue? Yes\n\n"
)


class TruthCheck:
    """Keeps the candidates that are true of their original, by rule where one applies and by
    the model's log-probabilities of two fixed answers otherwise (see the module doc)."""

    def __init__(self, llm: LLM | None):
        self.llm = llm
        self._usable = llm is not None and scores_text(llm)

    def model_verdict(self, original: str, sentence: str, candidate: str) -> bool | None:
        """True when the model finds "Yes" likelier than "No"; None when it cannot score."""
        if not self._usable:
            return None
        prefix = (f"{_FEW_SHOT}Detail: {_quote(original)} ({' '.join(sentence.split())})\n"
                  f"Description: {' '.join(candidate.split())}\nTrue?")
        try:
            yes = sum(self.llm.logprobs(prefix, " Yes"))
            no = sum(self.llm.logprobs(prefix, " No"))
        except (LLMError, NotImplementedError):
            self._usable = False  # a backend without log-probabilities: leave the rest unchecked
            return None
        return yes >= no

    def keep(self, original: str, label: str, sentence: str, candidates: Sequence[str],
             counts: dict[str, Any]) -> list[str]:
        """The truthful ``candidates`` (in order); counts what was checked how and caught."""
        kept = []
        for cand in candidates:
            verdict = rule_verdict(original, cand, label)
            how = "rule"
            if verdict is None:
                verdict, how = self.model_verdict(original, sentence, cand), "model"
            if verdict is None:
                counts["truth_unchecked"] = counts.get("truth_unchecked", 0) + 1
                kept.append(cand)
                continue
            counts[f"truth_checked_{how}"] = counts.get(f"truth_checked_{how}", 0) + 1
            if verdict:
                kept.append(cand)
            else:
                counts[f"untruthful_{how}"] = counts.get(f"untruthful_{how}", 0) + 1
        return kept


def scores_text(llm: Any) -> bool:
    """Whether ``llm`` (or the model a cache or a cluster wraps) implements log-probabilities."""
    for _ in range(8):
        inner = getattr(llm, "backend", None) or getattr(llm, "local", None)
        if inner is None or inner is llm:
            break
        llm = inner
    return type(llm).logprobs is not LLM.logprobs


def _quote(text: str) -> str:
    return '"' + " ".join(text.split()).replace('"', "'") + '"'
