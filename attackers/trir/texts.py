"""Text preparation of the TRIR attacker: NER-masked copies of the background in the masking
style a release shows (labels, suppression or a fixed token such as ``SENSITIVE``), and
document curation as the TRI paper's code does it, with a map back to the original text."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from attackers.trir.parse_settings import Parse
    from audit.core.data import Release


#: Masking styles of the augmented background: entities replaced by their spaCy label (the
#: paper's), removed (suppression), or replaced by one fixed token (``token:SENSITIVE``).
LABEL_STYLE = "label"
SUPPRESS_STYLE = "suppress"
TOKEN_STYLE = "token:"
#: At most this many masked copies of the background (one per masking style seen).
MAX_MASK_STYLES = 3

_FIXED_TOKENS = ("SENSITIVE", "REDACTED", "MASKED", "MASK", "ANONYMIZED", "ANONYMISED", "REMOVED", "WITHHELD")
_LABEL_WORD = re.compile(r"^([\[<]?)([A-Z][A-Z_]{1,20}?)(?:_\d+)?([\]>]?)$")
_FIXED_IN_TEXT = re.compile(r"\*{3,}|\[(?:" + "|".join(_FIXED_TOKENS) + r")\]|\b(?:" + "|".join(_FIXED_TOKENS) + r")\b")
_SPACY_LABELS = ("PERSON", "ORG", "GPE", "LOC", "DATE", "NORP", "CARDINAL", "FAC", "EVENT", "TIME", "MONEY",
                 "QUANTITY", "ORDINAL", "PERCENT", "WORK_OF_ART", "LAW", "LANGUAGE", "PRODUCT", "MISC")
_LABEL_IN_TEXT = re.compile(r"([\[<]?)\b(" + "|".join(_SPACY_LABELS) + r")\b(?:_\d+)?([\]>]?)")


def ner_masked(spacy, texts: Sequence[str], style: str = LABEL_STYLE) -> list[str]:
    """Copies of ``texts`` with every named entity masked in ``style``: its spaCy label (also
    wrapped, ``label:[{}]``), nothing (``suppress``), or a fixed token (``token:SENSITIVE``)."""
    return masked_copies(spacy, texts, [style])[0]


def _mask_text(style: str, label: str) -> str:
    if style == SUPPRESS_STYLE:
        return ""
    if style.startswith(TOKEN_STYLE):
        return style[len(TOKEN_STYLE):]
    if style.startswith(LABEL_STYLE + ":"):
        return style[len(LABEL_STYLE) + 1:].replace("{}", label)
    return label


def _pipe(spacy, texts: Sequence[str], desc: str | bool | None):
    """spaCy over ``texts``, with a progress bar named ``desc`` (none when ``desc`` is empty):
    on a large background this is minutes of work."""
    from audit.runtime.progress import bar

    return bar(spacy.pipe(texts), total=len(texts), desc=str(desc or ""), unit="doc", enabled=bool(desc))


def masked_copies(spacy, texts: Sequence[str], styles: Sequence[str], *, progress: str | bool | None = None) -> list[list[str]]:
    """One NER-masked copy of ``texts`` per masking style (spaCy runs once); ``progress``: the
    name of a progress bar to show."""
    from attackers.trir.parse_settings import Parse

    parses = [Parse(ents=tuple((e.start_char, e.end_char, e.label_) for e in doc.ents), tokens=())
              for doc in _pipe(spacy, texts, progress)]
    return masked_from_parses(texts, parses, styles)


def masked_from_parses(texts: Sequence[str], parses: Sequence[Parse], styles: Sequence[str]) -> list[list[str]]:
    """One copy of ``texts`` per masking style, each text's entities (from its parse) masked."""
    out: list[list[str]] = [[] for _ in styles]
    for text, parse in zip(texts, parses):
        for k, style in enumerate(styles):
            pieces, cursor = [], 0
            for start, end, label in parse.ents:
                pieces.append(text[cursor:start])
                pieces.append(_mask_text(style, label))
                cursor = end
            pieces.append(text[cursor:])
            masked = "".join(pieces)
            out[k].append(re.sub(r"[ \t]{2,}", " ", masked) if style == SUPPRESS_STYLE else masked)
    return out


def masking_style(release: Release) -> str | None:
    """The masking style a release shows, or ``None`` when it shows none.

    From the replacements its documents record when there are any: empty ones are
    suppression; one text for (nearly) all spans is a fixed token; upper-case words that vary
    are labels (with their brackets). Otherwise from the text: fixed tokens such as
    ``SENSITIVE`` or ``***``, or spaCy-style labels (``PERSON``, ``[ORG]``)."""
    replaced = [d.text[s.start : s.end] for d in release.corpus for s in d.spans if s.original is not None]
    if replaced:
        counts = Counter(r.strip() for r in replaced)
        top, n_top = counts.most_common(1)[0]
        if top == "" and n_top >= 0.5 * len(replaced):
            return SUPPRESS_STYLE
        if top and n_top >= 0.8 * len(replaced) and len(counts) <= 3:
            m = _LABEL_WORD.match(top)
            if not (m and m.group(2) in _SPACY_LABELS):
                return TOKEN_STYLE + top
        labels = [m for m in (_LABEL_WORD.match(r.strip()) for r in replaced) if m]
        if len(labels) >= 0.5 * len(replaced):
            pre, _, post = Counter((m.group(1), "", m.group(3)) for m in labels).most_common(1)[0][0]
            return LABEL_STYLE if not (pre or post) else f"{LABEL_STYLE}:{pre}{{}}{post}"
        return None
    fixed: Counter[str] = Counter()
    wrapped: Counter[tuple[str, str]] = Counter()
    for d in release.corpus:
        fixed.update(m.group(0) for m in _FIXED_IN_TEXT.finditer(d.text))
        wrapped.update((m.group(1), m.group(3)) for m in _LABEL_IN_TEXT.finditer(d.text))
    if not fixed and not wrapped:
        return None
    if sum(fixed.values()) >= sum(wrapped.values()):
        return TOKEN_STYLE + fixed.most_common(1)[0][0]
    pre, post = wrapped.most_common(1)[0][0]
    return LABEL_STYLE if not (pre or post) else f"{LABEL_STYLE}:{pre}{{}}{post}"


def mask_styles(releases: Sequence[Release]) -> list[str]:
    """The masking styles to imitate for ``releases``: each style one of them shows (the most
    common first, at most :data:`MAX_MASK_STYLES`), else the paper's spaCy labels."""
    seen = Counter(s for s in (masking_style(r) for r in releases) if s is not None)
    styles = [s for s, _ in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0]))][:MAX_MASK_STYLES]
    return styles or [LABEL_STYLE]


_SPECIAL_CHARS = re.compile(r"[^ \nA-Za-z0-9\u00C0-\u00D6\u00D8-\u00F6\u00F8-\u00FF\u0400-\u04FF./]+")


def style_words(style: str) -> str:
    if style == SUPPRESS_STYLE:
        return "removed"
    if style.startswith(TOKEN_STYLE):
        return repr(style[len(TOKEN_STYLE):])
    return "their label" + (f" as {style[len(LABEL_STYLE) + 1:]!r}" if ":" in style else "")


def curated(spacy, texts: Sequence[str], *, progress: str | bool | None = None) -> list[str]:
    """Document curation as the TRI paper's code does it: stop words dropped, every other token
    lemmatized and stripped of special characters (letters, digits, ``.`` and ``/`` stay), and
    a full stop glued to the word before it, so sentence ends survive."""
    return [text for text, _ in curated_with_offsets(spacy, texts, progress=progress)]


def curated_with_offsets(spacy, texts: Sequence[str], *,
                         progress: str | bool | None = None) -> list[tuple[str, list[tuple[int, int, int, int]]]]:
    """:func:`curated` texts, each with its pieces as ``(start, end, orig_start, orig_end)``:
    where each curated word lies and the characters of the original it came from, so a passage
    of the curated text can be shown in the original."""
    from attackers.trir.parse_settings import Parse

    stop = spacy.nlp.Defaults.stop_words
    return [curated_from_parse(Parse.of_doc(doc, stop)) for doc in _pipe(spacy, texts, progress)]


def curated_from_parse(parse: Parse) -> tuple[str, list[tuple[int, int, int, int]]]:
    """One text curated (:func:`curated_with_offsets`) from its parse."""
    words: list[str] = []
    pieces: list[list[int]] = []
    length = 0
    for o_start, o_end, lemma, is_stop, is_space in parse.tokens:
        if is_stop or is_space:
            continue
        word = _SPECIAL_CHARS.sub("", lemma)
        if not word:
            continue
        if word == "." and words:
            words[-1] += "."
            length += 1
            pieces[-1][1] = length
            pieces[-1][3] = o_end
            continue
        start = length + (1 if words else 0)
        words.append(word)
        length = start + len(word)
        pieces.append([start, length, o_start, o_end])
    return " ".join(words), [tuple(p) for p in pieces]


def original_range(pieces: Sequence[tuple[int, int, int, int]], start: int, end: int) -> tuple[int, int] | None:
    """The characters of the original that the curated range ``[start, end)`` came from."""
    inside = [p for p in pieces if p[0] < end and start < p[1]]
    return (inside[0][2], inside[-1][3]) if inside else None
