"""Guessing: the one-shot prompt that asks an LLM for the original words of a marked span,
and the tolerant parser of its answers (:func:`parse_guesses`)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from audit.core.data import Span
from audit.core.errors import AnonauditError
from audit.models.llm import LLM, ChatRequest, extract_json_list


# =========================================================================== parsing

_FENCE = re.compile(r"```(?:json|python|text)?\s*(.*?)```", re.S | re.I)
_BULLET = re.compile(r"^\s*(?:[-*•–+]|\(?\d{1,2}[.):\]]|(?:guess|option|answer)\s*\d*\s*[:.)-])\s*", re.I)
_QUOTED = re.compile(r"\"([^\"\n]{1,200})\"|“([^”\n]{1,200})”")
_STRIP = " \t\"'“”‘’`*_[](),;."


def _clean(item: Any) -> str:
    if isinstance(item, dict):  # {"guess": "..."} and the like
        item = next((v for v in item.values() if isinstance(v, str)), "")
    text = str(item).strip()
    text = re.sub(r"^(?:guess|answer)\s*\d*\s*[:.-]\s*", "", text, flags=re.I)
    # trailing explanations: "Warsaw (the capital)" keeps "Warsaw"; "Warsaw - because ..." too
    text = re.split(r"\s+(?:-|–|—)\s+", text, maxsplit=1)[0]
    text = re.sub(r"\s+\([^()]*\)?$", "", text)
    return text.strip(_STRIP).strip()


def parse_guesses(text: str, limit: int | None = None) -> list[str]:
    """The guesses in an LLM answer, in order, without duplicates.

    Reads a JSON array (also inside a code fence or an object, with chatter around),
    numbered or bulleted lines, quoted strings, or a single comma- or
    semicolon-separated line; lines that introduce the list ("Here are my
    guesses:") are dropped.
    """
    fence = _FENCE.search(text)
    body = fence.group(1) if fence else text
    items: list[Any] | None = extract_json_list(body) or None  # [] reads as no JSON: try the lines
    if items is None:
        lines = [ln for ln in body.splitlines() if ln.strip()]
        bullets = [ln for ln in lines if _BULLET.match(ln)]
        if bullets:
            items = [_BULLET.sub("", ln, count=1) for ln in bullets]
        else:
            quoted = [a or b for a, b in _QUOTED.findall(body)]
            if len(quoted) >= 2:
                items = quoted
            else:
                kept = [ln for ln in lines if not ln.rstrip().endswith(":")]
                if len(kept) == 1:
                    line = re.sub(r"^[^:]{0,40}:\s*", "", kept[0]) if ":" in kept[0] else kept[0]
                    sep = ";" if ";" in line else ("," if "," in line else None)
                    items = line.split(sep) if sep else [line]
                else:
                    items = kept
    out: list[str] = []
    seen: set[str] = set()
    for item in items:
        guess = _clean(item)
        key = guess.lower()
        if guess and key not in seen:
            seen.add(key)
            out.append(guess)
    return out[:limit] if limit else out


# =========================================================================== guessing

_TASK = (
    "You test whether a sanitized document still gives away what was hidden in it. {where} "
    "Using the replacement and everything else the document says, guess the original words of the marked "
    "span.\n"
    "Give exactly {p} different guesses, the most likely first. Each guess must be a concrete value that "
    "could have stood in the original text (a name, a place, an organisation, a number, a date...), not a "
    "description. For dates, always guess an exact date with the day, the month in letters and the year, "
    "for example \"3 September 1981\".\n"
    "Answer with a JSON array of {p} strings and nothing else."
)
#: where the replacement is shown, per layout
_WHERE = {
    "inline": "One span of the document is marked with double square brackets [[...]]: the original words "
              "there were replaced by the text inside the brackets (a more general description, a placeholder "
              "or category label, or nothing at all if they were deleted).",
    "shared": "One span of the document is marked [[?]]. After the document you are told what the sanitized "
              "text says there: the original words were replaced by it (a more general description, a "
              "placeholder or category label, or nothing at all if they were deleted).",
}
_BLANK = "[[?]]"
_EXAMPLE_DOC = (
    "The applicant, PERSON_1, was born in 1962 and lives in [[a city in northern Italy]]. In March 2004 "
    "she was dismissed by ORG_1, the municipal transport company of her home town, after criticising its "
    "managers in an interview with Corriere della Sera, a daily newspaper published in the same city."
)
_EXAMPLE_SPAN = "a city in northern Italy"
_EXAMPLE_GUESSES = ["Milan", "Turin", "Bergamo", "Brescia", "Monza", "Como", "Varese", "Genoa", "Verona", "Pavia"]
_ELLIPSIS = "…"

Layout = Literal["inline", "shared"]


def _user_message(context: str, replacement: str) -> str:
    return f"Document:\n{context}\n\nGuesses for [[{replacement}]] in this document:"


def _question(replacement: str) -> str:
    shown = f'"{replacement}"' if replacement.strip() else "nothing (the words were deleted)"
    return f"The sanitized text at {_BLANK} says: {shown}. Guesses for its original words:"


@dataclass
class SpanGuesser:
    """Asks an LLM for ``guesses`` guesses of the original words of a marked span.

    ``context_tokens`` caps the tokens of document context shown (``None``: as much as
    the model's context window allows after the instructions and the answer). The
    context is trimmed around the span, keeping it centred. ``structured`` asks the
    backend for a JSON array of exactly ``guesses`` strings (``None``: when the
    backend says it enforces schemas); answers are parsed tolerantly either way.
    Requests are deterministic (temperature 0 by default), so the LLM cache makes
    re-runs free.

    ``layout``: ``inline`` shows the replacement inside the marked span of the document and
    asks about it in the same message; ``shared`` shows the document with the span blanked
    (``[[?]]``) and says what replaced it in a last, separate message, so that every question
    about one place of one document (INTACT's candidates for a span) shares the document as a
    prompt prefix that the backend evaluates once (:attr:`ChatRequest.shared`). Both share the
    instructions and the worked example.
    """

    llm: LLM
    guesses: int = 5
    context_tokens: int | None = None
    temperature: float = 0.0
    seed: int = 0
    structured: bool | None = None
    max_tokens: int | None = None
    layout: Layout = "inline"

    def __post_init__(self) -> None:
        if self.guesses < 1:
            raise ValueError("guesses must be at least 1")
        if self.layout not in _WHERE:
            raise ValueError(f"layout must be one of {sorted(_WHERE)}, got {self.layout!r}")

    # ------------------------------------------------------------------ prompt

    @property
    def answer_tokens(self) -> int:
        return self.max_tokens or 24 + 16 * self.guesses

    def _messages(self, context: str, replacement: str) -> list[dict[str, str]]:
        p = self.guesses
        example = (_EXAMPLE_GUESSES * (1 + p // len(_EXAMPLE_GUESSES)))[:p]
        system = {"role": "system", "content": _TASK.format(p=p, where=_WHERE[self.layout])}
        answer = {"role": "assistant", "content": json.dumps(example, ensure_ascii=False)}
        if self.layout == "inline":
            return [system, {"role": "user", "content": _user_message(_EXAMPLE_DOC, _EXAMPLE_SPAN)}, answer,
                    {"role": "user", "content": _user_message(context, replacement)}]
        blank = _EXAMPLE_DOC.replace(f"[[{_EXAMPLE_SPAN}]]", _BLANK)
        return [system, {"role": "user", "content": f"Document:\n{blank}"},
                {"role": "user", "content": _question(_EXAMPLE_SPAN)}, answer,
                {"role": "user", "content": f"Document:\n{context}"}, {"role": "user", "content": _question(replacement)}]

    @property
    def _shared(self) -> tuple[int, ...]:
        """Where the requests' shared prefixes end: the instructions and example; with the
        ``shared`` layout also the document."""
        return (3,) if self.layout == "inline" else (4, 5)

    def _schema(self) -> dict[str, Any] | None:
        structured = self.structured
        if structured is None:
            structured = bool(getattr(self.llm, "supports_schema", False))
        if not structured:
            return None
        return {"type": "array", "items": {"type": "string", "minLength": 1},
                "minItems": self.guesses, "maxItems": self.guesses}

    def context_budget(self) -> int:
        """Tokens left for the document context."""
        overhead = sum(self.llm.count_tokens(m["content"]) + 8 for m in self._messages("", ""))
        budget = int(getattr(self.llm, "context_size", 4096)) - overhead - self.answer_tokens - 32
        if self.context_tokens is not None:
            budget = min(budget, self.context_tokens)
        if budget < 16:
            raise AnonauditError(
                f"the model's context ({getattr(self.llm, 'context_size', '?')} tokens) is too small for the "
                "span-guessing prompt")
        return budget

    def context(self, document_text: str, span: Span, budget: int | None = None) -> str:
        """The document with the span marked ``[[...]]``, trimmed around it to ``budget`` tokens."""
        budget = self.context_budget() if budget is None else budget
        text, s, e = document_text, span.start, span.end
        if not 0 <= s <= e <= len(text):
            raise ValueError(f"span [{s}, {e}) lies outside the document (length {len(text)})")
        mark = f"[[{text[s:e]}]]" if self.layout == "inline" else _BLANK
        marked = f"{text[:s]}{mark}{text[e:]}"
        e = s + len(mark) - 4
        total = self.llm.count_tokens(marked)
        if total <= budget:
            return marked
        chars = int(len(marked) * budget / total)
        while True:
            piece = _window(marked, s, e + 4, chars)
            if self.llm.count_tokens(piece) <= budget or chars <= (e + 4 - s):
                return piece
            chars = int(chars * 0.85)

    def request(self, document_text: str, span: Span, budget: int | None = None) -> ChatRequest:
        context = self.context(document_text, span, budget)
        replacement = document_text[span.start:span.end]
        return ChatRequest.make(self._messages(context, replacement), temperature=self.temperature,
                                max_tokens=self.answer_tokens, seed=self.seed, json_schema=self._schema(),
                                shared=self._shared)

    # ------------------------------------------------------------------ asking

    def guess(self, document_text: str, span: Span) -> list[str]:
        """Up to ``guesses`` guesses of the original of ``span`` (offsets in ``document_text``)."""
        return self.guess_many([(document_text, span)])[0]

    def guess_many(self, items: Sequence[tuple[str, Span]], *, progress: bool = False) -> list[list[str]]:
        """Guesses for many (document text, span) pairs, sent to the LLM as one batch."""
        if not items:
            return []
        budget = self.context_budget()
        requests = [self.request(text, span, budget) for text, span in items]
        answers = self.llm.complete_batch(requests, progress=progress and "span guessing")
        return [parse_guesses(a, self.guesses) for a in answers]


def _window(marked: str, s: int, e: int, chars: int) -> str:
    """About ``chars`` characters of ``marked`` around [s, e), cut at spaces, with ellipses."""
    room = max(0, chars - (e - s))
    left = room // 2
    right = room - left
    if s - left < 0:  # give what the start cannot use to the end, and vice versa
        right += left - s
        left = s
    if e + right > len(marked):
        left += e + right - len(marked)
        right = len(marked) - e
    lo, hi = max(0, s - left), min(len(marked), e + right)
    if lo > 0:
        cut = marked.find(" ", lo, s)
        lo = cut + 1 if cut >= 0 else lo
    if hi < len(marked):
        cut = marked.rfind(" ", e, hi)
        hi = cut if cut >= 0 else hi
    return (_ELLIPSIS + " " if lo > 0 else "") + marked[lo:hi] + (" " + _ELLIPSIS if hi < len(marked) else "")
