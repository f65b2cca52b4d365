"""spaCy's parse of each text, once, kept on disk by content: shared by the attacks that read it.

TRIR's text preparation (masking the background's entities in every style, curating it) needs
the entities and, per token, its offset, lemma and whether it is a stop word or space; span
guessing needs the entities of each passage of the public background. A :class:`Parse` holds
exactly that (``tokens`` empty when only the entities are asked for), so spaCy runs once per text.

:class:`ParseCache` keeps the parses on disk, keyed by the text's content and the pipeline's
identity (model, its version, spaCy's version, the pipes run, and whether tokens are kept), so
a second run, or a second attacker configuration on the same background, parses nothing: an
sqlite file under ``ANONAUDIT_HOME/parses`` (owner only, like every cache there; each row with
its checksum, a row that fails it is parsed again; off with ``--no-cache``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sqlite3
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from audit.core import config
from audit.models.checked_rows import read_rows, write_rows

#: Parses stored per write: an interrupted preparation keeps what it finished.
STORE_EVERY = 64


@dataclass(frozen=True)
class Parse:
    """What the text preparation reads of spaCy's parse of one text: its entities as
    ``(start_char, end_char, label)`` and its tokens as ``(start_char, end_char, lemma,
    is_stop, is_space)`` (``is_stop``: the token's text is one of the pipeline's stop words)."""

    ents: tuple[tuple[int, int, str], ...]
    tokens: tuple[tuple[int, int, str, bool, bool], ...]

    @classmethod
    def of_doc(cls, doc, stop_words, tokens: bool = True) -> Parse:
        """The parse of a spaCy ``Doc`` (``tokens=False``: its entities only)."""
        return cls(ents=tuple((e.start_char, e.end_char, e.label_) for e in doc.ents),
                   tokens=tuple((t.idx, t.idx + len(t.text), t.lemma_ or t.text, t.text in stop_words, t.is_space)
                                for t in doc) if tokens else ())

    def to_json(self) -> str:
        return json.dumps([self.ents, self.tokens], ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, data: str) -> Parse:
        ents, tokens = json.loads(data)
        return cls(ents=tuple((int(a), int(b), str(c)) for a, b, c in ents),
                   tokens=tuple((int(a), int(b), str(c), bool(d), bool(e)) for a, b, c, d, e in tokens))


def text_key(text: str) -> str:
    """The key of a text in the parse cache: the SHA-256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ParseCache:
    """The parses of texts by content, from a spaCy pipeline (:class:`audit.models.nlp.Spacy`),
    kept in ``path`` (default ``ANONAUDIT_HOME/parses/parses.sqlite``) unless caches are off
    (``--no-cache``) or ``path`` is ``False``. ``stats`` counts the texts found and parsed.
    ``tokens=False`` keeps the entities only (what span guessing reads); ``who`` names the user
    in messages; ``batch_size``: texts per spaCy batch."""

    def __init__(self, spacy, path: str | Path | bool | None = None, *, tokens: bool = True, who: str = "TRIR",
                 batch_size: int = 32):
        self.spacy = spacy
        self.tokens = tokens
        self.who = who
        self.batch_size = batch_size
        self.cache_path: Path | None = None
        if path is not False and config.cache_enabled():
            self.cache_path = Path(path) if path else config.subdir("parses") / "parses.sqlite"
            self.cache_path.parent.mkdir(parents=True, exist_ok=True)
            config.private_file(self.cache_path)
            self._open()
        self._identity: str | None = None
        self.stats = {"cached": 0, "parsed": 0}

    @property
    def identity(self) -> str:
        """The pipeline's identity: its name and version, spaCy's version, the pipes run (and
        ``:ents`` when only the entities are kept)."""
        if self._identity is None:
            import spacy

            nlp = self.spacy.nlp
            meta = nlp.meta
            self._identity = (f"{meta.get('lang')}_{meta.get('name')}:{meta.get('version')}:spacy-{spacy.__version__}"
                              f":{','.join(nlp.pipe_names)}" + ("" if self.tokens else ":ents"))
        return self._identity

    def _db(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        from audit.models.answer_cache import transaction

        assert self.cache_path is not None
        return transaction(self.cache_path)

    def _open(self) -> None:
        """Create the table; a file that is not a readable database is set aside, with a message."""
        create = "CREATE TABLE IF NOT EXISTS parses (model TEXT, key TEXT, parse TEXT, sum TEXT, PRIMARY KEY (model, key))"
        try:
            with self._db() as db:
                db.execute(create)
                db.execute("SELECT count(*) FROM parses").fetchone()
        except sqlite3.DatabaseError as exc:
            if "locked" in str(exc) or "busy" in str(exc):
                raise
            from audit.models.answer_cache import set_aside

            set_aside(self.cache_path, exc, who=self.who, what="the spaCy parse cache")
            config.private_file(self.cache_path)
            with self._db() as db:
                db.execute(create)

    def _lookup(self, keys: list[str]) -> dict[str, Parse]:
        """The cached parses of ``keys`` whose checksum holds; the others are deleted (parsed again)."""
        with self._db() as db:
            found, bad = read_rows(db, "parses", "parse", self.identity, keys, Parse.from_json)
        if bad:
            print(f"    {self.who}: {len(bad)} cached spaCy parse(s) in {self.cache_path} failed their checksum: parsing "
                  "them again", file=sys.stderr, flush=True)
        return found

    def _store(self, parses: dict[str, Parse]) -> None:
        with self._db() as db:
            write_rows(db, "parses", self.identity, {k: p.to_json() for k, p in parses.items()})

    def parse(self, texts: Sequence[str], progress: str | None = None) -> list[Parse]:
        """The parse of each of ``texts`` (order kept): from the cache, else spaCy (each distinct
        text once, stored as it goes); ``progress`` names the progress bar."""
        from audit.runtime.progress import bar

        keys = [text_key(t) for t in texts]
        known = self._lookup(list(dict.fromkeys(keys))) if self.cache_path is not None else {}
        first = dict(zip(keys, texts))
        todo = [k for k in dict.fromkeys(keys) if k not in known]
        self.stats["cached"] += len(keys) - len(todo)
        self.stats["parsed"] += len(todo)
        if todo:
            from audit.runtime.progress import stage

            with stage(f"loading spaCy ({self.spacy.model})", enabled=bool(progress) and not self.spacy.loaded):
                stop = self.spacy.nlp.Defaults.stop_words
            desc = progress and (f"{progress} ({len(keys) - len(todo)} of {len(keys)} cached)"
                                 if self.cache_path is not None else progress)
            fresh: dict[str, Parse] = {}
            docs = self.spacy.pipe((first[k] for k in todo), batch_size=self.batch_size)
            for k, doc in zip(todo, bar(docs, total=len(todo), desc=str(desc or ""), unit="doc", enabled=bool(desc))):
                fresh[k] = known[k] = Parse.of_doc(doc, stop, self.tokens)
                if self.cache_path is not None and len(fresh) >= STORE_EVERY:
                    self._store(fresh)
                    fresh = {}
            if self.cache_path is not None and fresh:
                self._store(fresh)
        return [known[k] for k in keys]
