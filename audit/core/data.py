"""The data model: spans, documents, corpora, releases and scenarios.

Plain frozen dataclasses passed between stages, like Presidio's ``RecognizerResult``:
sanitizers produce :class:`Release` objects whose documents record every replaced
span (:class:`Span` with ``original`` set), and attacks read those records to know
exactly what was hidden.

Offsets are character offsets into ``Document.text``; ``end`` is exclusive.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from audit.core.errors import AnonauditError, DataError, Problem


#: Label of a span recording a rewrite whose new words are visible text (a rephrasing by the
#: delinker), not hidden: attacks search its text like any other, unlike a masked span.
REPHRASED = "REPHRASED"


def span_order(span: "Span") -> tuple[int, int, int]:
    """Sort key for spans: by start, then end, then original offset (never by optional fields)."""
    return (span.start, span.end, span.orig_start if span.orig_start is not None else -1)


def release_name_problem(name: Any) -> str:
    """What is wrong with a release name ("" when nothing): the ONE check of every name the tool
    puts into a file name (a spec's release, bench's ``--name``, ``--also NAME=FILE``, a
    comparison point, a TRI method column, a default name taken from a file's stem), run before
    any file is read or written. A name must be writable as ``--release NAME=FILE`` on the command
    line and as ``gate --release NAME``, and be one plain name: no ``=`` (the command line splits
    there), no path separator, not ``.`` or ``..``, no control character. The file a release is
    written to is derived from its name by
    :func:`audit.pipeline.releases.release_file_name` (a safe stem and a hash of the name)."""
    if not isinstance(name, str) or not name.strip():
        return f"a release name must be a non-empty string, got {name!r}"
    bad = sorted({c for c in name if c in "=/\\" or not c.isprintable()})
    if bad:
        shown = ", ".join(repr(c) for c in bad)
        return (f"release name {name!r} contains {shown}: a name may not contain '=', '/', '\\' or control "
                "characters (it must be writable as --release NAME=FILE)")
    if name.strip() in (".", ".."):
        return f"release name {name!r} is not a name: '.' and '..' name folders"
    return ""


def check_release_name(name: Any, what: str) -> str:
    """``name`` when :func:`release_name_problem` finds nothing; else an
    :class:`~audit.core.errors.AnonauditError` naming ``what`` gave it (``--name``, ``--also``...)."""
    wrong = release_name_problem(name)
    if wrong:
        raise AnonauditError(f"{what}: {wrong}")
    return name


@dataclass(frozen=True)
class Span:
    """A labelled region ``text[start:end]`` of a document.

    On an original document a span is an annotation (e.g. a gold PII mention), and
    ``replacement`` is what a sanitizer should put in its place, if known.
    On a released (sanitized) document a span records one applied replacement:
    ``start``/``end`` locate the replacement in the sanitized text, ``original``
    is the text it replaced and ``orig_start``/``orig_end`` its offsets in the
    original document.
    """

    start: int
    end: int
    label: str = ""
    entity_id: str | None = None
    identifier_type: str | None = None
    replacement: str | None = None
    original: str | None = None
    orig_start: int | None = None
    orig_end: int | None = None

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start:
            raise ValueError(f"invalid span offsets [{self.start}, {self.end})")

    @property
    def length(self) -> int:
        return self.end - self.start

    def overlaps(self, other: Span) -> bool:
        return self.start < other.end and other.start < self.end

    def contains(self, other: Span) -> bool:
        return self.start <= other.start and other.end <= self.end

    def to_dict(self) -> dict[str, Any]:
        """JSON form: only the fields that are set."""
        return {k: v for k, v in asdict(self).items() if v is not None and v != ""}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Span:
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown span field(s): {', '.join(sorted(unknown))}")
        if "start" not in data or "end" not in data:
            raise ValueError("a span needs 'start' and 'end'")
        values = dict(data)
        for key in ("start", "end", "orig_start", "orig_end"):
            if values.get(key) is not None and not _is_int(values[key]):
                raise ValueError(f"span field {key!r} must be an integer, got {values[key]!r}")
        return cls(**values)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Document:
    """One text. ``subject`` names the individual it is about (re-identification
    ground truth); ``spans`` are annotations (originals) or applied replacements
    (releases), sorted by start."""

    id: str
    text: str
    subject: str | None = None
    spans: tuple[Span, ...] = ()
    meta: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if not isinstance(self.spans, tuple):
            object.__setattr__(self, "spans", tuple(self.spans))

    def span_text(self, span: Span) -> str:
        return self.text[span.start : span.end]

    def with_spans(self, spans: Iterable[Span]) -> Document:
        return replace(self, spans=tuple(sorted(spans, key=span_order)))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "text": self.text}
        if self.subject is not None:
            out["subject"] = self.subject
        if self.spans:
            out["spans"] = [s.to_dict() for s in self.spans]
        if self.meta:
            out["meta"] = dict(self.meta)
        return out


class Corpus(Sequence[Document]):
    """An ordered, id-unique collection of documents.

    Indexing by position returns a document; :meth:`get` and ``corpus[id]`` (a
    string) look one up by id. ``source`` is the file it came from, for messages.
    """

    def __init__(self, documents: Iterable[Document], *, name: str = "corpus", source: str | None = None):
        self._docs: tuple[Document, ...] = tuple(documents)
        self.name = name
        self.source = source
        self._index: dict[str, int] = {}
        problems = []
        for i, doc in enumerate(self._docs):
            if doc.id in self._index:
                problems.append(Problem(source or name, "duplicate document id", doc_id=doc.id))
            else:
                self._index[doc.id] = i
        if problems:
            raise DataError(problems)

    def __len__(self) -> int:
        return len(self._docs)

    def __iter__(self) -> Iterator[Document]:
        return iter(self._docs)

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            return self._docs[self._index[key]]
        if isinstance(key, slice):
            return Corpus(self._docs[key], name=self.name, source=self.source)
        return self._docs[key]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, Document):
            return key.id in self._index
        return key in self._index

    def __repr__(self) -> str:
        return f"Corpus(name={self.name!r}, documents={len(self)})"

    def get(self, doc_id: str, default: Document | None = None) -> Document | None:
        i = self._index.get(doc_id)
        return default if i is None else self._docs[i]

    @property
    def ids(self) -> list[str]:
        return [d.id for d in self._docs]

    @property
    def subjects(self) -> list[str | None]:
        return [d.subject for d in self._docs]

    def by_subject(self) -> dict[str, list[Document]]:
        out: dict[str, list[Document]] = {}
        for doc in self._docs:
            if doc.subject is not None:
                out.setdefault(doc.subject, []).append(doc)
        return out

    def fingerprint(self) -> str:
        """sha256 of the content (ids, texts, subjects, spans), for cache keys."""
        h = hashlib.sha256()
        for doc in self._docs:
            h.update(json.dumps(doc.to_dict(), sort_keys=True, ensure_ascii=False).encode())
            h.update(b"\n")
        return h.hexdigest()

    def rename(self, name: str) -> Corpus:
        return Corpus(self._docs, name=name, source=self.source)


@dataclass(frozen=True)
class Release:
    """A named sanitized corpus.

    ``aligned`` is true when each released document has the id of the original it
    was made from (span masking, INTACT, LLM rewriting); synthetic releases are
    unaligned and attacks must not assume ids match.
    """

    name: str
    corpus: Corpus
    aligned: bool = True
    sanitizer: str | None = None
    source: str | None = None
    #: What the sanitizer that made it found degenerate in it (its self-check), when it says.
    warnings: tuple[str, ...] = ()
    #: How it was read, where a reader had to interpret the file (crossing spans merged...):
    #: recorded in the release's provenance.
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.corpus)

    def __iter__(self) -> Iterator[Document]:
        return iter(self.corpus)

    def check_against(self, originals: Corpus) -> None:
        """For an aligned release, every id must exist in the originals."""
        if not self.aligned:
            return
        missing = [d.id for d in self.corpus if d.id not in originals]
        if missing:
            raise DataError(
                [Problem(self.source or self.name, "id not found in the originals", doc_id=i) for i in missing]
            )

    def doubts_against(self, originals: Corpus, *, examples: int = 3) -> list[str]:
        """What looks wrong with an aligned release beside ``originals``, though it can be audited:
        originals it leaves out (they are not audited, so the risk covers fewer documents than
        the user may think), and recorded replacements whose ``original`` is not the text at
        ``orig_start:orig_end`` of the original (a release made from other originals, or
        offsets gone wrong). Empty when nothing is doubtful."""
        if not self.aligned:
            return []
        out: list[str] = []
        missing = [i for i in originals.ids if i not in self.corpus]
        if missing:
            shown = ", ".join(repr(i) for i in missing[:examples]) + (", ..." if len(missing) > examples else "")
            out.append(f"release {self.name!r} has {len(self.corpus)} of the {len(originals)} original documents; "
                       f"{len(missing)} are missing ({shown}) and are not audited")
        wrong: list[str] = []
        n_wrong = 0
        for doc in self.corpus:
            orig = originals.get(doc.id)
            if orig is None:
                continue
            for sp in doc.spans:
                if sp.original is None or sp.orig_start is None or sp.orig_end is None:
                    continue
                actual = orig.text[sp.orig_start:sp.orig_end]
                if actual != sp.original:
                    n_wrong += 1
                    if len(wrong) < examples:
                        wrong.append(f"document {doc.id!r}: recorded {sp.original[:40]!r} at "
                                     f"[{sp.orig_start}, {sp.orig_end}), the original has {actual[:40]!r}")
        if n_wrong:
            out.append(f"release {self.name!r}: {n_wrong} recorded replacement(s) contradict the originals "
                       f"({'; '.join(wrong)}); was it made from other originals?")
        return out


@dataclass(frozen=True)
class Scenario:
    """What the auditor holds and what the attacker is assumed to know.

    ``originals`` are private (the ground truth); ``background`` are public
    documents per subject, possibly about more people than the release covers;
    ``releases`` are the sanitized corpora under test; ``dev`` is a sanitized release of people
    in the background that an attacker may tune itself on (a TRI file's ``dev_abstract``
    column), never a release under test.
    """

    originals: Corpus | None = None
    background: Corpus | None = None
    releases: tuple[Release, ...] = ()
    dev: Release | None = None

    def release(self, name: str) -> Release:
        for r in self.releases:
            if r.name == name:
                return r
        raise KeyError(name)

    def subject_of(self, doc: Document) -> str | None:
        """Who ``doc`` is about: its own ``subject``, else its original's (the same id)."""
        if doc.subject:
            return doc.subject
        orig = self.originals.get(doc.id) if self.originals is not None else None
        return orig.subject if orig is not None and orig.subject else None

    def unscorable(self, release: Release, people: Iterable[str]) -> str:
        """Why an attack that names one of ``people`` (the background's) can score no document of
        ``release`` ("" when it can score one): none says who it is about, or none is about one
        of them. Asked before the work (a training, an index), so that it does not end in a
        figure over no document."""
        people = set(people)
        subjects = [self.subject_of(d) for d in release.corpus]
        if not subjects or any(s in people for s in subjects if s is not None):
            return ""
        unknown = sum(s is None for s in subjects)
        why = []
        if unknown:
            why.append(f"{unknown} do not say who they are about (the release has no subject for them"
                       + (", nor do the originals of the same ids" if self.originals is not None else
                          " and no originals were given") + ": give the originals, or a subject column)")
        if len(subjects) > unknown:
            why.append(f"{len(subjects) - unknown} are about people the background does not cover")
        return (f"release {release.name!r}: no document can be scored, none is about a person of the background "
                f"({len(people)} in all): of its {len(subjects)} documents, {' and '.join(why)}")


# --------------------------------------------------------------------------- spans


def outermost(spans: Iterable[Span]) -> tuple[list[Span], list[Span]]:
    """Sort spans by start (longest first on ties) and keep the outermost ones.

    A span inside an already kept span is dropped (nested mentions: ``Serco Limited
    ("Serco")`` and ``Serco``). Crossing spans (overlapping, neither inside the other: two
    TAB annotators who disagree on a mention's extent) are masked as their **union**: the
    kept span grows to the end of the crossing one (its label and replacement kept), so no
    part of either is left in the clear. Returns ``(kept, dropped)``; a crossing span is
    among the dropped, the union among the kept.
    """
    import dataclasses

    kept: list[Span] = []
    dropped: list[Span] = []
    for span in sorted(spans, key=lambda s: (s.start, -s.end)):
        if kept and span.start < kept[-1].end:
            if span.end > kept[-1].end:  # crossing: mask the union
                kept[-1] = dataclasses.replace(kept[-1], end=span.end)
            dropped.append(span)
        else:
            kept.append(span)
    return kept, dropped


def apply_spans(doc: Document, spans: Iterable[Span], *, default: str = "") -> Document:
    """Return the sanitized version of ``doc`` with every outermost span replaced.

    Each span's ``replacement`` is used; ``None`` means ``default`` (suppression
    by default). The returned document records, as its spans, every applied
    replacement with its offsets in the sanitized text and the original it replaced.
    Offsets must lie inside the text (``ValueError`` otherwise; loaders turn it
    into a :class:`~audit.core.errors.DataError` naming file and document).
    """
    text = doc.text
    kept, _ = outermost(spans)
    pieces: list[str] = []
    records: list[Span] = []
    cursor = 0
    out_len = 0
    for span in kept:
        if span.end > len(text):
            raise ValueError(f"span [{span.start}, {span.end}) ends past the text (length {len(text)})")
        gap = text[cursor : span.start]
        pieces.append(gap)
        out_len += len(gap)
        repl = span.replacement if span.replacement is not None else default
        pieces.append(repl)
        records.append(
            Span(
                start=out_len,
                end=out_len + len(repl),
                label=span.label,
                entity_id=span.entity_id,
                identifier_type=span.identifier_type,
                replacement=repl,
                original=text[span.start : span.end],
                orig_start=span.start,
                orig_end=span.end,
            )
        )
        out_len += len(repl)
        cursor = span.end
    pieces.append(text[cursor:])
    return Document(id=doc.id, text="".join(pieces), subject=doc.subject, spans=tuple(records), meta=doc.meta)


def sanitize_corpus(
    originals: Corpus,
    spans_by_id: Mapping[str, Iterable[Span]],
    *,
    name: str,
    default: str = "",
    sanitizer: str | None = None,
    source: str | None = None,
) -> Release:
    """Apply span lists to the originals (documents with no entry are released unchanged)."""
    docs = [apply_spans(doc, spans_by_id.get(doc.id, ()), default=default) for doc in originals]
    return Release(name=name, corpus=Corpus(docs, name=name, source=source), aligned=True,
                   sanitizer=sanitizer, source=source)
