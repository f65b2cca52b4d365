"""TAE's Precision, Recall and RecallPerEntityType (the Text Anonymization Evaluator of the TAB
and TRI authors), by the definitions its documentation and the TAB paper give, so a figure here
can be put beside a figure computed with TAE.

How TAE counts (written from its README and the TAB paper, Pilán et al. 2022):

- **Words.** A word is a run of letters, digits or underscores (the regular expression ``\\w+``):
  punctuation and spaces are not counted, and a hyphenated or slashed code ("36110/97") is two
  words. Token-level figures count words; mention-level figures count whole spans.
- **Gold.** Each annotator's entity mentions, grouped into entities by ``entity_id``. An entity
  needs masking when any of its mentions is DIRECT or QUASI; its type and whether it is a direct
  identifier are read from its first mention.
- **Masked.** A word (or mention) of the gold is masked when every character of it lies inside
  the release's masked spans, leaving aside the words spaCy tags as adpositions, particles,
  conjunctions or determiners, the words mr, mrs, ms, no, nr and about, and punctuation
  characters (annotators disagree on whether those belong to a mention).
- **Recall**: over every annotator (a micro-average), the share of the words of every mention of
  each entity needing masking (DIRECT and QUASI by default) that are masked.
  **RecallPerEntityType**: the same, per entity type.
- **Precision**: for each word of each masked span as the span file lists them (a word inside two
  listed spans counts twice), the number of annotators with a DIRECT or QUASI mention containing
  the whole word, over the number of annotators of the document.

TAE weighs Precision by a masked language model's information content (Precision_IC,
``PrecisionWeighted``) only with ``google-bert/bert-base-uncased``, which is not packaged offline:
that figure is not computed here. spaCy's part-of-speech tags come from the embedded
``en_core_web_sm`` (TAE loads ``en_core_web_md``): they only matter for words left unmasked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from audit.core.data import Document, Release, Scenario
from audit.core.errors import AnonauditError
from audit.core.registry import register
from audit.core.results import Result
from audit.metrics.base import UtilityMetric, bootstrap_ratio, findings_of
from audit.metrics.utility_context import UtilityContext

WORD = re.compile(r"\w+")
IGNORED_POS = frozenset({"ADP", "PART", "CCONJ", "DET"})
IGNORED_WORDS = frozenset({"mr", "mrs", "ms", "no", "nr", "about"})
IGNORED_CHARS = frozenset(" ,.-;:/&()[]–'\"’“”")
MASK = ("DIRECT", "QUASI")


@dataclass(frozen=True)
class Entity:
    """One annotator's entity: its mentions ``(start, end, needs masking)``."""

    annotator: str
    entity_id: str
    entity_type: str
    direct: bool
    needs_masking: bool
    mentions: tuple[tuple[int, int, bool], ...]


def gold_mentions(doc: Document) -> list[dict[str, Any]]:
    """Every annotator's mentions of ``doc``: the TAB/TAE loader keeps them per annotator in
    ``meta["annotations"]``; other originals' spans are one annotator's, and a span without an
    identifier type counts as one to mask (QUASI), as in our own precision and recall."""
    raw = doc.meta.get("annotations") if isinstance(doc.meta, dict) else None
    if raw:
        return list(raw)
    return [{"annotator": "annotator1", "start": s.start, "end": s.end, "entity_type": s.label,
             "entity_id": s.entity_id or f"mention-{n}", "identifier_type": s.identifier_type or "QUASI"}
            for n, s in enumerate(doc.spans)]


def entities_of(doc: Document) -> list[Entity]:
    grouped: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for n, m in enumerate(gold_mentions(doc)):
        key = (str(m.get("annotator") or "annotator1"), str(m.get("entity_id") or f"mention-{n}"))
        grouped.setdefault(key, []).append(m)
    out = []
    for (annotator, entity_id), ms in grouped.items():
        kinds = [str(m.get("identifier_type") or "").upper() for m in ms]
        out.append(Entity(annotator, entity_id, str(ms[0].get("entity_type") or ""), kinds[0] == "DIRECT",
                          any(k in MASK for k in kinds),
                          tuple((int(m["start"]), int(m["end"]), k in MASK) for m, k in zip(ms, kinds))))
    return out


def words(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """TAE's words of ``text[start:end]`` as character offsets."""
    return [(start + m.start(), start + m.end()) for m in WORD.finditer(text[start:end])]


class Coverage:
    """Which characters of an original a release masked, and TAE's test of a masked span.
    ``parse`` gives the spaCy parse of the text, asked for only when a span is not all masked."""

    def __init__(self, text: str, masked: Iterable[tuple[int, int]], parse):
        self.text = text
        self.mask = np.zeros(len(text) + 1, bool)
        for a, b in masked:
            self.mask[a:b] = True
        self._parse = parse
        self._ignorable: np.ndarray | None = None

    def ignorable(self) -> np.ndarray:
        """Characters of the words TAE leaves aside when they are not masked."""
        if self._ignorable is None:
            out = np.zeros(len(self.text) + 1, bool)
            for tok in self._parse():
                if tok.pos_ in IGNORED_POS or tok.lower_ in IGNORED_WORDS:
                    out[tok.idx:tok.idx + len(tok)] = True
            for i, ch in enumerate(self.text):
                if ch in IGNORED_CHARS:
                    out[i] = True
            self._ignorable = out
        return self._ignorable

    def masked(self, start: int, end: int) -> bool:
        if end <= start or self.mask[start:end].all():
            return True
        return bool((self.mask[start:end] | self.ignorable()[start:end]).all())


def recall_counts(doc: Document, cover: Coverage, *, token_level: bool = True, include_direct: bool = True,
                  include_quasi: bool = True) -> dict[str, list[int]]:
    """``{entity type: [masked, total]}`` of TAE's Recall for one document."""
    counts: dict[str, list[int]] = {}
    for ent in entities_of(doc):
        if not ent.needs_masking or (ent.direct and not include_direct) or (not ent.direct and not include_quasi):
            continue
        row = counts.setdefault(ent.entity_type, [0, 0])
        for start, end, _ in ent.mentions:
            units = words(doc.text, start, end) if token_level else [(start, end)]
            for a, b in units:
                row[0] += cover.masked(a, b)
                row[1] += 1
    return counts


def precision_counts(doc: Document, listed: Sequence[tuple[int, int]], *, token_level: bool = True) -> tuple[int, int]:
    """``(annotators agreeing, annotators x units)`` of TAE's Precision for one document."""
    ents = entities_of(doc)
    annotators = {e.annotator for e in ents}
    masks: dict[str, list[tuple[int, int]]] = {}
    for e in ents:
        if e.needs_masking:
            masks.setdefault(e.annotator, []).extend((a, b) for a, b, need in e.mentions if need)
    agree = total = 0
    for start, end in listed:
        for a, b in (words(doc.text, start, end) if token_level else [(start, end)]):
            agree += sum(any(s <= a and b <= t for s, t in spans) for spans in masks.values())
            total += len(annotators)
    return agree, total


def listed_spans(original: Document, released: Document, applied: Sequence[Any]) -> list[tuple[int, int]]:
    """The release's masked spans as its span file listed them (``meta["span_file"]``, kept when
    nested, repeated or crossing spans were applied as fewer), else the applied ones."""
    listed = released.meta.get("span_file") if isinstance(released.meta, dict) else None
    if listed:
        return [(int(a), int(b)) for a, b in listed]
    return [(s.orig_start, s.orig_end) for s in applied if s.orig_start is not None and s.orig_end is not None]


def tae_row(original: Document, released: Document, applied: Sequence[Any], parsed: Any) -> dict[str, int]:
    """TAE's default counts for one document (words, DIRECT and QUASI) given its spaCy parse: what
    our own precision/recall report beside theirs."""
    masked = [(s.orig_start, s.orig_end) for s in applied if s.orig_start is not None]
    listed = listed_spans(original, released, applied)
    counts = recall_counts(original, Coverage(original.text, masked + listed, lambda: parsed))
    agree, total = precision_counts(original, listed)
    return {"tae_masked": sum(c[0] for c in counts.values()), "tae_to_mask": sum(c[1] for c in counts.values()),
            "tae_agreeing": agree, "tae_counted": total}


class _TAEMetric(UtilityMetric):
    """Shared by TAE's gold metrics: the documents with gold, and what each release masked."""

    def __init__(self, context: UtilityContext | None = None, token_level: bool = True, seed: int = 0,
                 progress: bool = False):
        """
        token_level: count words (TAE's default); false counts whole spans (mention level).
        """
        super().__init__(context=context, seed=seed, progress=progress)
        self.token_level = token_level

    def _documents(self, scenario: Scenario, release: Release) -> list[tuple[Document, Document, Coverage, list]]:
        ctx = self._context(scenario)
        ids = [i for i in self._aligned_ids(ctx, release) if gold_mentions(ctx.originals[i])]
        if not ids:
            raise AnonauditError(f"{self.name} needs gold annotations on the originals (a TAB/TAE corpus with "
                                 "'annotations', or a \"spans\" list per document with identifier_type); these "
                                 "originals carry none")
        out = []
        for i in ids:
            orig, rel = ctx.originals[i], release.corpus[i]
            applied = ctx.replaced(orig, rel)
            masked = [(s.orig_start, s.orig_end) for s in applied if s.orig_start is not None]
            listed = listed_spans(orig, rel, applied)
            out.append((orig, rel, Coverage(orig.text, masked + listed, _parser(ctx, orig)), listed))
        return out


def parses(ctx: UtilityContext, ids: Sequence[str]) -> list[Any]:
    """spaCy's parse of each original, made once per context (every release and both our gold
    metrics and TAE's read the same parses)."""
    from audit.runtime.progress import bar

    todo = [i for i in ids if ("tae-parse", i) not in ctx.memo]
    docs = ctx.spacy.pipe([ctx.originals[i].text for i in todo])
    with bar(total=len(todo), desc="utility: spaCy over the originals", unit="doc",
             enabled=ctx.progress and len(todo) > 1) as shown:
        for i, parsed in zip(todo, docs):
            ctx.memo[("tae-parse", i)] = parsed
            shown.update(1)
    return [ctx.memo[("tae-parse", i)] for i in ids]


def _parser(ctx: UtilityContext, doc: Document):
    """The spaCy parse of ``doc``, made only when asked."""
    return lambda: parses(ctx, [doc.id])[0]


@register("metric")
class TAEPrecisionMetric(_TAEMetric):
    name = "tae_precision"
    description = ("TAE's Precision: of the words inside the release's masked spans (as listed), the share "
                   "the annotators marked DIRECT or QUASI, averaged over annotators (words are \\w+ runs).")

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        rows = []
        for orig, _, _, listed in self._documents(scenario, release):
            agree, total = precision_counts(orig, listed, token_level=self.token_level)
            rows.append({"id": orig.id, "value": agree / total if total else None, "agreeing": agree,
                         "counted": total})
        num, den = [r["agreeing"] for r in rows], [r["counted"] for r in rows]
        value = sum(num) / sum(den) if sum(den) else 0.0
        docs = findings_of(rows, lambda r: f"{r['agreeing']} of {r['counted']} (annotator, masked word) pairs "
                                           "agree" if r["counted"] else "Nothing masked")
        details = {"tae_name": "Precision", "token_level": self.token_level, "masked_units": sum(den),
                   "not_computed": {"Precision_IC": "TAE weighs words by google-bert/bert-base-uncased, a "
                                                    "masked language model not packaged offline"}}
        return [Result(kind="utility", name=self.name, release=release.name, value=value,
                       ci=bootstrap_ratio(num, den, seed=self.seed), n=len(rows), details=details, documents=docs)]


@register("metric")
class TAERecallMetric(_TAEMetric):
    name = "tae_recall"
    description = ("TAE's Recall: the share of the words of the mentions of entities the annotators marked "
                   "DIRECT or QUASI that the release masked, over all annotators (RecallPerEntityType in "
                   "the details).")

    def __init__(self, context: UtilityContext | None = None, token_level: bool = True,
                 include_direct: bool = True, include_quasi: bool = True, seed: int = 0, progress: bool = False):
        """
        include_direct: count the entities whose first mention is a DIRECT identifier.
        include_quasi: count the other entities that need masking (QUASI identifiers).
        """
        super().__init__(context=context, token_level=token_level, seed=seed, progress=progress)
        self.include_direct = include_direct
        self.include_quasi = include_quasi

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        rows, by_type = [], {}
        for orig, _, cover, _ in self._documents(scenario, release):
            counts = recall_counts(orig, cover, token_level=self.token_level, include_direct=self.include_direct,
                                   include_quasi=self.include_quasi)
            for t, (m, n) in counts.items():
                acc = by_type.setdefault(t, [0, 0])
                acc[0] += m
                acc[1] += n
            m, n = sum(c[0] for c in counts.values()), sum(c[1] for c in counts.values())
            rows.append({"id": orig.id, "value": m / n if n else None, "masked": m, "counted": n})
        num, den = [r["masked"] for r in rows], [r["counted"] for r in rows]
        value = sum(num) / sum(den) if sum(den) else 0.0
        docs = findings_of(rows, lambda r: f"{r['masked']} of {r['counted']} words to mask are masked"
                           if r["counted"] else "Nothing to mask")
        details = {"tae_name": "Recall", "token_level": self.token_level, "include_direct": self.include_direct,
                   "include_quasi": self.include_quasi, "units": sum(den),
                   "per_entity_type": {t: m / n for t, (m, n) in sorted(by_type.items()) if n}}
        return [Result(kind="utility", name=self.name, release=release.name, value=value,
                       ci=bootstrap_ratio(num, den, seed=self.seed), n=len(rows), details=details, documents=docs)]
