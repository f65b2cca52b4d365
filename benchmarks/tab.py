"""The benchmarks' helper module (scripts import it as ``tab``, from beside them): where the TAB
(ECHR) data is (:data:`TAB`), the originals with the manual mentions as gold spans, the published
span files restricted to a few documents, a fresh ``ANONAUDIT_HOME`` that reuses the assembled
models (:func:`fresh_home`), TRIR's TAB target (:func:`target_scenario`) and the load and tables
the scripts print.

Not a test fixture: the TAB data lives in ``../shared/data/tab`` and is never committed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from audit.core.data import Corpus, Document, Release, Scenario, Span, outermost, span_order
from audit.io.loaders import load_corpus, load_release_file

TAB = Path(__file__).resolve().parents[2] / "shared" / "data" / "tab"


def labelled_originals(data: Path = TAB, *, outer: bool = False) -> Corpus:
    """The 127 TAB test originals with the manual mentions of ``TAB_test_Manual_Entity.json`` as
    gold spans (label = TAB entity type). ``outer``: keep only the outermost of nested spans."""
    texts = load_corpus(data / "bks" / "TAB_test_BK=Original.json")
    entity = json.loads((data / "anonymizations" / "TAB_test_Manual_Entity.json").read_text())
    docs = []
    for doc in texts:
        spans = [Span(s, e, label=lab) for s, e, lab in entity.get(doc.id, [])]
        if outer:
            spans, _ = outermost(spans)
        docs.append(Document(doc.id, doc.text, subject=doc.subject, spans=tuple(sorted(spans, key=span_order))))
    return Corpus(docs, name="TAB_test", source=texts.source)


def published(name: str, file: str, originals: Corpus, ids: list[str], data: Path = TAB) -> Release:
    """A published span file applied to the originals, restricted to the documents ``ids``."""
    (rel,) = load_release_file(data / "anonymizations" / file, name=name, originals=originals)
    return dataclasses.replace(rel, corpus=Corpus([rel.corpus[i] for i in ids], name=name, source=rel.corpus.source))


@contextlib.contextmanager
def fresh_home(keep: Path | None = None):
    """A fresh ANONAUDIT_HOME whose ``models`` link to the default home's assembled models
    (``keep``: that folder instead, created if needed and kept, so a stopped run resumes)."""
    from audit.core.config import home

    models = home() / "models"
    old = os.environ.get("ANONAUDIT_HOME")
    with contextlib.ExitStack() as stack:
        if keep is None:
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-home-"))
        else:
            keep.mkdir(parents=True, exist_ok=True)
            tmp = str(keep)
        if models.is_dir() and not (Path(tmp) / "models").exists():
            os.symlink(models, Path(tmp) / "models")
        os.environ["ANONAUDIT_HOME"] = tmp
        try:
            yield Path(tmp)
        finally:
            if old is None:
                os.environ.pop("ANONAUDIT_HOME", None)
            else:
                os.environ["ANONAUDIT_HOME"] = old


#: The dev release of :func:`target_scenario` (used only to choose the epoch) and the releases under test.
TARGET_DEV = ("Manual_Entity", "TAB_test_Manual_Entity.json")
TARGET_RELEASES = (("spaCy_Entity", "TAB_test_spaCy_Entity.json"),
                   ("Manual_Supression", "TAB_test_Manual_Supression.json"))


def target_scenario(people: int, shortest: bool = False, skip: int = 0) -> Scenario:
    """TAB's public background of the ``people`` people with the longest public judgments (ties
    by id; ``shortest``: the shortest, for a smoke run; ``skip``: after the first ``skip`` of that
    ranking); dev release: TAB's manual entity masking
    of their originals (labels); releases under test: their originals, spaCy's entity masking
    and the manual suppression."""
    bg = load_corpus(TAB / "bks" / "TAB_test_BK=Public.json", name="public")
    ranked = sorted(bg, key=lambda d: (len(d.text) if shortest else -len(d.text), d.id))
    keep = {d.subject for d in ranked[skip : skip + people]}
    background = Corpus([d for d in bg if d.subject in keep], name="public")
    originals = load_corpus(TAB / "bks" / "TAB_test_BK=Original.json", name="originals")
    ids = [d.id for d in originals if d.subject in keep]
    mine = Corpus([originals[i] for i in ids], name="Original")
    releases = (Release("Original", mine), *(published(n, f, originals, ids) for n, f in TARGET_RELEASES))
    return Scenario(originals=mine, background=background, releases=releases, dev=published(*TARGET_DEV, originals, ids))


def cut_texts(corpus: Corpus, chars: int | None) -> Corpus:
    """``corpus`` with each text cut to its first ``chars`` characters (its spans that end there
    kept): a smoke size's background, a few windows a person. ``None``: as it is."""
    if not chars:
        return corpus
    return Corpus([dataclasses.replace(d, text=d.text[:chars], spans=tuple(s for s in d.spans if s.end <= chars))
                   for d in corpus], name=corpus.name, source=corpus.source)


def load_avg() -> list[float]:
    """This machine's load averages (1, 5 and 15 minutes), rounded: how busy it was."""
    return [round(x, 2) for x in os.getloadavg()]


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table: the first column left-aligned (names), the others right-aligned (figures);
    cells are printed as they are given (format them first)."""
    lines = ["| " + " | ".join(header) + " |", "| --- | " + " | ".join("---:" for _ in header[1:]) + " |"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)
