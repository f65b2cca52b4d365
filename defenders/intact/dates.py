"""Rule-based truthful generalisations of dates (no LLM): month year, year, part of decade, decade, century."""

from __future__ import annotations

import re


# =========================================================================== dates

_MONTHS = ("January February March April May June July August September October November "
           "December").split()
_MONTH_OF = {m.lower(): m for m in _MONTHS} | {m[:3].lower(): m for m in _MONTHS} | {"sept": "September"}
_M = r"(?P<month>" + "|".join(sorted(_MONTH_OF, key=len, reverse=True)) + r")\.?"
_D = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_Y = r"(?P<year>(?:1[0-9]|20)\d\d)"
_DATE_FORMS = [
    re.compile(rf"^(?:the\s+)?{_D}\s+(?:of\s+)?{_M},?\s+{_Y}$", re.I),  # 12 March 1999, 12th of March 1999
    re.compile(rf"^{_M}\s+{_D},?\s+{_Y}$", re.I),  # March 12, 1999
    re.compile(rf"^{_Y}-(?P<mnum>[01]?\d)-(?P<day>[0-3]?\d)$"),  # 1999-03-12
    re.compile(rf"^(?:in\s+)?{_M},?\s+{_Y}$", re.I),  # March 1999
    re.compile(rf"^(?:in\s+)?{_Y}$"),  # 1999
]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def date_generalisations(text: str) -> list[str] | None:
    """Truthful generalisations of a date in a standard format, most specific first
    (``None`` when ``text`` is not one): "12 March 1999" gives "March 1999", "1999",
    "late 1990s", "1990s", "20th century". Parts of a decade: early (0-3), mid (4-6),
    late (7-9); centuries are counted strictly (2000 is in the 20th century)."""
    text = " ".join(text.split()).strip(" .,;")
    for form in _DATE_FORMS:
        m = form.match(text)
        if not m:
            continue
        groups = m.groupdict()
        year = int(groups["year"])
        month = None
        if groups.get("month"):
            month = _MONTH_OF[groups["month"].lower()]
        elif groups.get("mnum"):
            n = int(groups["mnum"])
            if not 1 <= n <= 12:
                return None
            month = _MONTHS[n - 1]
        day = groups.get("day")
        if day is not None and not 1 <= int(day) <= 31:
            return None
        out = []
        if day is not None and month:
            out.append(f"{month} {year}")
        if month:
            out.append(str(year))
        decade = year - year % 10
        part = "early" if year % 10 <= 3 else ("mid" if year % 10 <= 6 else "late")
        out += [f"{part} {decade}s", f"{decade}s", f"{_ordinal((year - 1) // 100 + 1)} century"]
        return out
    return None
