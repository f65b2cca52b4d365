"""The registered phrase-search attack: the index over the attacker's collection, the visible
phrases of each released document, the links they make, and the results."""

from __future__ import annotations

import dataclasses
import re
import sys
import time
from typing import Any, ClassVar, Literal

import numpy as np

from audit.ngrams import NgramIndex, collection_fingerprint, minimal_set
from attackers.phrase_search.document import DocumentLinking
from audit.ngrams.shards import build_sharded, open_saved
from attackers.phrase_search.linking import blocked_ranges, rare_indices
from audit.core.paramtypes import NonNegativeInt, PositiveInt
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.errors import AnonauditError
from audit.core.files import folder_problem
from audit.runtime.executor import sends_to_workers
from audit.core.interfaces import Attack
from audit.core.registry import register
from audit.core.results import Finding, Result
from audit.core.stats import cluster_bootstrap, clustered_details, clustered_risk, risk
from audit.models.resources import resources_of

#: Documents a cluster's worker attacks per call; a release of one group or fewer is attacked here,
#: where the index is (a stage would start a worker and send it the index, seconds, for less).
DOC_GROUP = 256

#: Placeholder tokens sanitizers leave behind: bracketed or angled labels
#: ([PERSON], [ORG_1], <NAME>), runs of * # or _ (***), words such as SENSITIVE or
#: REDACTED, and numbered labels (CODE_0, PERSON_12).
DEFAULT_PLACEHOLDER_PATTERN = (
    r"(?=[\[<*#_A-Z])(?:"  # every alternative starts with one of these: fail fast elsewhere
    r"\[[^\[\]\n]{1,40}\]"
    r"|<[A-Za-z][A-Za-z0-9_ \-]{0,30}>"
    r"|\*{2,}|#{3,}|_{3,}|X{4,}"
    r"|\b(?:SENSITIVE|REDACTED|MASKED|ANONYMI[SZ]ED|REMOVED|WITHHELD|PLACEHOLDER)\b"
    r"|\b[A-Z][A-Z]*(?:_[A-Z]+)*_\d+\b)"
)


@register("attack")
class PhraseSearchAttack(DocumentLinking, Attack):
    """Search-based linkage through rare n-grams and n-gram combinations.

    The method, step by step, is in the package docstring (:mod:`attackers.phrase_search`)."""

    name = "phrase_search"
    description = (
        "Simulates an adversary who holds the original documents (or a larger collection containing "
        "them) and types phrases from each sanitized document into a search engine. Any phrase, or "
        "combination of up to three phrases, that appears in fewer than k documents links the "
        "sanitized text back to its source. It needs no model and runs on millions of documents; "
        "evidence shows the linking phrases and how many documents contain them."
    )
    #: The fix the report proposes when this attack decides a release ({exposed}/{total} documents).
    remedy: ClassVar[str] = (
        "Rewrite the rare phrases that link {exposed} of {total} documents to their source (or name "
        "their subject): run the delinker (`anonaudit sanitize delinker`), or mask those phrases.")
    #: Needs the originals or the background (``against``): neither is required on its own.
    requires = frozenset()
    accepts: ClassVar[frozenset[str]] = frozenset({"originals", "background"})
    #: Older command-line spellings.
    cli_aliases: ClassVar[dict[str, str]] = {"corpus": "extra_corpus", "index": "index_dir",
                                             "case_sensitive": "no_lowercase"}

    def __init__(
        self,
        k: PositiveInt = 2,
        max_n: PositiveInt = 7,
        arity: PositiveInt = 1,
        extra_corpus: Corpus | None = None,
        index_dir: str | None = None,
        lowercase: bool = True,
        placeholder_pattern: str | None = DEFAULT_PLACEHOLDER_PATTERN,
        use_spans: bool = True,
        df_cap: PositiveInt = 1000,
        max_candidates: PositiveInt = 40,
        exhaustive: bool = False,
        max_evidence: NonNegativeInt = 10,
        against: Literal["auto", "originals", "background"] = "auto",
        progress: bool = False,
        shards: PositiveInt = 1,
    ):
        """
        k: a phrase links when it occurs in fewer than k documents of the collection.
        max_n: longest phrase (n-gram), in words.
        arity: also combine 2 or 3 common phrases (posting-list intersection); 1 = single phrases.
        extra_corpus: extra documents searched with the originals (the attacker's larger collection).
        index_dir: folder to save the n-gram index to, or reuse it from when it matches.
        lowercase: fold case before matching (off: case-sensitive).
        placeholder_pattern: regex of placeholder tokens never used in a phrase ('' for none).
        use_spans: never let a phrase cross a span the release records as replaced.
        df_cap: combinations only use phrases found in at most this many documents.
        max_candidates: combinations use at most this many of the rarest phrases per document.
        exhaustive: look for combinations (arity 2 or 3) in documents already linked by a single phrase too.
        max_evidence: linking phrases kept as evidence per document.
        against: the collection searched: originals (link each sanitized document to its source),
            background (public documents about people, one entry per person: name each document's
            subject, reported on TRIR's scale as the result phrase_search_reid), or auto (the
            originals when given, else the background).
        shards: build the index in this many hash-partitioned shards (a power of two), each built and
            queried on its own, for a collection larger than one machine's memory (same answers).
        """
        self.against = against
        self.k = k
        self.max_n = max_n
        self.arity = arity
        self.extra_corpus = extra_corpus
        self.index_dir = index_dir
        self.lowercase = lowercase
        self.placeholder_pattern = placeholder_pattern
        self.use_spans = use_spans
        self.df_cap = df_cap
        self.max_candidates = max_candidates
        self.exhaustive = exhaustive
        self.max_evidence = max_evidence
        self.progress = progress
        self.shards = shards
        self._check()
        self.index_: NgramIndex | None = None
        self._fitted_on: str | None = None
        self._originals: Corpus | None = None
        self._source: Corpus | None = None
        self._mode = "originals"
        self._orig_rare: dict[int, np.ndarray] = {}

    def _check(self) -> None:
        if self.against not in ("auto", "originals", "background"):
            raise AnonauditError(f"phrase_search: against must be auto, originals or background, got {self.against!r}")
        if not isinstance(self.k, int) or self.k < 1:
            raise AnonauditError(f"phrase_search: k must be a positive integer, got {self.k!r}")
        if not 1 <= self.max_n <= 32:
            raise AnonauditError(f"phrase_search: max_n must be between 1 and 32, got {self.max_n!r}")
        if self.arity not in (1, 2, 3):
            raise AnonauditError(f"phrase_search: arity must be 1, 2 or 3, got {self.arity!r}")
        if self.df_cap < self.k or self.max_candidates < 2:
            raise AnonauditError("phrase_search: df_cap must be >= k and max_candidates >= 2")
        if not isinstance(self.shards, int) or self.shards < 1 or self.shards & (self.shards - 1):
            raise AnonauditError(f"phrase_search: shards must be a power of two (1, 2, 4, ...), got {self.shards!r}")
        if self.placeholder_pattern:
            try:
                re.compile(self.placeholder_pattern)
            except re.error as exc:
                raise AnonauditError(f"phrase_search: invalid placeholder_pattern: {exc}") from None

    # ------------------------------------------------------------------ fit

    def _extra(self) -> Corpus | None:
        if self.extra_corpus is None or isinstance(self.extra_corpus, Corpus):
            return self.extra_corpus
        raise AnonauditError(f"phrase_search: extra_corpus must be a loaded corpus, got {self.extra_corpus!r} "
                             "(in an audit spec: declare it under corpora and pass corpus:NAME; on the "
                             "command line: --extra-corpus FILE)")

    def _collection(self, scenario: Scenario) -> tuple[str, Corpus, Corpus]:
        """``(mode, source, collection)``: what is searched, the scenario's corpus it comes from
        and the documents indexed (the background: one document per person)."""
        mode = self.against
        if mode == "auto":
            mode = "originals" if scenario.originals is not None or scenario.background is None else "background"
        if mode == "originals":
            if scenario.originals is None:
                raise AnonauditError("phrase_search needs the original documents (--originals), or background "
                                     "knowledge (--background FILE) to name subjects instead")
            return mode, scenario.originals, scenario.originals
        background = scenario.background
        if background is None or len(background) == 0:
            raise AnonauditError("phrase_search against the background needs background knowledge: public "
                                 "documents with a subject (--background FILE, or --tri FILE)")
        return mode, background, people_collection(background)

    def fit(self, scenario: Scenario) -> PhraseSearchAttack:
        """Build the index over originals (or the background, one document per person) plus the
        extra corpus, or load it from ``index_dir`` when a saved one was built from the same
        collection and settings."""
        mode, source, originals = self._collection(scenario)
        if self.index_ is not None and self._source is source and self._mode == mode:
            return self
        if self.index_dir and (why := folder_problem(self.index_dir)):  # before the index is built, not after
            raise AnonauditError(f"phrase_search: index_dir {self.index_dir}: {why}")
        unscorable = [scenario.unscorable(r, {d.subject for d in originals}) for r in scenario.releases]
        if mode == "background" and unscorable and all(unscorable):
            raise AnonauditError("phrase_search: " + "; ".join(unscorable))
        extra = self._extra()
        parts = [(mode, originals)] + ([("extra", extra)] if extra is not None else [])
        fp = collection_fingerprint([(src, ((d.id, d.text) for d in c)) for src, c in parts])
        if self.index_ is not None and self._fitted_on == fp:
            self._source, self._mode = source, mode
            return self
        index = None
        # an index saved by an older version (another format) is rebuilt over, like a stale one
        index = self._saved_index(fp)
        if index is None:
            executor = resources_of(self).executor
            if self.shards > 1:
                folder = self.index_dir
                if not folder:
                    from audit.runtime.folders import new_scratch

                    self._tmp_index = str(new_scratch("anonaudit-shards-"))
                    folder = self._tmp_index
                docs = [d for _, c in parts for d in c]
                index = build_sharded(folder, [d.text for d in docs], shards=self.shards, ids=[d.id for d in docs],
                                      subjects=[d.subject for d in docs],
                                      sources=[src for src, c in parts for _ in c], max_n=self.max_n,
                                      lowercase=self.lowercase, fingerprint=fp, executor=executor)
            else:
                index = NgramIndex.from_corpora(parts, max_n=self.max_n, lowercase=self.lowercase,
                                                progress=self.progress, fingerprint=fp, executor=executor)
                if self.index_dir:
                    index.save(self.index_dir)
        self.index_ = index
        self._fitted_on = fp
        self._orig_rare = {}
        n_orig = len(originals)
        self._orig_by_id = {d.id: i for i, d in enumerate(originals)}
        self._orig_by_subject: dict[str, list[int]] = {}
        for i, d in enumerate(originals):
            if d.subject is not None:
                self._orig_by_subject.setdefault(d.subject, []).append(i)
        self._originals = originals
        self._source, self._mode = source, mode
        self._n_orig = n_orig
        return self

    def _saved_index(self, fp: str):
        """The index saved in ``index_dir`` when it matches and its checksums hold; ``None``
        (rebuild) otherwise, saying so when the folder is corrupt or was changed."""
        if not self.index_dir:
            return None
        index, note = open_saved(self.index_dir, fp, max_n=self.max_n, lowercase=self.lowercase, shards=self.shards)
        if note:
            print(f"    phrase_search: {note}", file=sys.stderr, flush=True)
        return index

    def close(self) -> None:
        """Remove a sharded index built in a temporary folder (no ``index_dir``), then what
        :meth:`Component.close` releases."""
        tmp = self.__dict__.pop("_tmp_index", None)
        if tmp:
            from audit.runtime.folders import remove_scratch

            remove_scratch(tmp)
            self.index_, self._fitted_on = None, None
        super().close()

    # ------------------------------------------------------------------ per document

    def blocked_ranges(self, doc: Document) -> list[tuple[int, int]]:
        """Character ranges the attacker cannot use: replaced spans (not rephrasings, whose words
        are visible) and placeholders."""
        return blocked_ranges(doc.text, doc.spans, self.placeholder_pattern, self.use_spans)

    def _truth(self, doc: Document, release: Release, originals: Corpus | None = None) -> list[int] | None:
        if self._mode == "background":  # the person's entry, whatever the document's id
            subject = doc.subject
            if subject is None and originals is not None and doc.id in originals:
                subject = originals[doc.id].subject
            return self._orig_by_subject.get(subject) if subject is not None else None
        if release.aligned:
            i = self._orig_by_id.get(doc.id)
            return None if i is None else [i]
        if doc.subject is not None:
            return self._orig_by_subject.get(doc.subject) or None
        i = self._orig_by_id.get(doc.id)
        return None if i is None else [i]

    def _original_rare(self, i: int) -> np.ndarray:
        """Hashes of the original's minimal set of n-grams with df < k (window by window for a
        huge original: :meth:`NgramIndex.iter_ngrams`)."""
        if i not in self._orig_rare:
            parts = [tn.hash[minimal_set(tn, rare_indices(tn, self.k))]
                     for tn in self.index_.iter_ngrams(self._originals[i].text)]
            self._orig_rare[i] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        return self._orig_rare[i]


    # ------------------------------------------------------------------ evaluate

    def _subjects_result(self, release: Release, found: list[Finding]) -> Result:
        """The background search on TRIR's scale: the share of documents whose subject the
        attacker names (the person most of their rare phrases point to); chance 1/population."""
        docs = [_named(f, self.k) for f in found]
        scored = [d for d in docs if d.success is not None]
        n, named = len(scored), sum(bool(d.success) for d in scored)
        linked = sum(d.facts["outcome"] == "linked" for d in scored)
        population = self._n_orig
        details = {
            "against": "background", "k": self.k, "max_n": self.max_n, "arity": self.arity,
            "population": population, "documents": len(docs), "evaluated": n,
            "not_in_background": len(docs) - n,
            "named": named, "true_subject_among_rare_hits": linked,
            "unit": "documents",
            "explanation": (f"{named} of {n} sanitized documents contain phrases"
                            + (" or combinations of phrases" if self.arity > 1 else "")
                            + f" found in the public texts of fewer than {self.k} of the {population} people of "
                              "the background, and the person most of them point to is the document's subject "
                              "(TRIR's scale: the share of documents whose subject is named)."),
        }
        return Result.from_risk(f"{self.name}_reid", release.name, risk(named, n, 1.0 / max(1, population)),
                                details={**details, "value_from": "success"}, documents=docs)

    def evaluate(self, scenario: Scenario, release: Release) -> list[Result]:
        t0 = time.perf_counter()
        self.fit(scenario)  # a no-op when fitted on this scenario's collection
        if self._mode == "background" and (why := scenario.unscorable(release, self._orig_by_subject)):
            raise AnonauditError(f"phrase_search: {why}")
        index = self.index_
        docs_out = []
        executor = resources_of(self).executor
        if sends_to_workers(executor, len(release.corpus), DOC_GROUP):
            # the documents go to the workers, each with its originals; the index once a worker
            items = []
            for doc in release.corpus:
                truth = self._truth(doc, release, scenario.originals)
                items.append((doc, truth, {i: self._originals[i] for i in truth or () if i < self._n_orig}))
            docs_out = executor.map(DocumentWorker(self), items, group=DOC_GROUP, label="phrase search: documents")
        else:
            it = release.corpus
            if self.progress:  # a bar of its own here (on the workers, the executor shows the cluster's)
                from audit.runtime.progress import bar as progress_bar

                it = progress_bar(it, desc=f"phrase search {release.name}", unit="doc")
            for doc in it:
                docs_out.append(self.attack_document(doc, self._truth(doc, release, scenario.originals)))
        if self._mode == "background":
            self.record_timing(release.name, {"attack": time.perf_counter() - t0})
            return [self._subjects_result(release, docs_out)]
        scored = [d.facts for d in docs_out if d.success is not None]
        n = len(scored)
        linked = sum(d["outcome"] == "linked" for d in scored)
        details = self._linkage_details(release, scored, len(docs_out))
        self.record_timing(release.name, {"attack": time.perf_counter() - t0})
        head = Result.from_risk(self.name, release.name, risk(linked, n, min(1.0, (self.k - 1) / max(index.n_docs, 1))),
                                details={**details, "value_from": "success"}, documents=docs_out)
        return [head, self._residual_result(release, scored)]

    def _linkage_details(self, release: Release, scored: list[dict[str, Any]], n_docs: int) -> dict[str, Any]:
        """The headline result's details: counts of each outcome over the ``scored`` documents'
        facts (of ``n_docs``), the settings and the index."""
        index = self.index_
        n = len(scored)
        linked = sum(d["outcome"] == "linked" for d in scored)
        wrong = sum(d["outcome"] == "wrong" for d in scored)
        ambiguous = sum(d["outcome"] == "linked" and any(not e["correct"] for e in d["evidence"]) for d in scored)
        by_ngram = sum(d["linked_by"] == "ngram" for d in scored)
        guess_ok = sum(d["guess_correct"] for d in scored)
        details = {
            "k": self.k, "max_n": self.max_n, "arity": self.arity,
            "collection_size": index.n_docs, "originals": self._n_orig, "extra_documents": index.n_docs - self._n_orig,
            "linked": linked, "linked_by_ngram": by_ngram, "linked_by_combination_only": linked - by_ngram,
            "wrong_links": wrong, "wrong_link_rate": wrong / n if n else 0.0,
            "linked_with_wrong_candidates_too": ambiguous,
            "unlinked": n - linked - wrong, "unscored": n_docs - n,
            "best_guess_accuracy": guess_ok / n if n else 0.0,
            "ground_truth": ("same id" if release.aligned
                             else "same subject (ids of an unaligned release need not match)"),
            "pruning": {"df_cap": self.df_cap, "max_candidates": self.max_candidates, "exhaustive": self.exhaustive},
            "placeholder_pattern": self.placeholder_pattern, "use_spans": self.use_spans,
            "index": {"dir": self.index_dir, "n_ngrams": index.config.get("n_ngrams"),
                      "hash_bits": index.config.get("hash", {}).get("hash_bits"),
                      "collection_fingerprint": index.config.get("collection_fingerprint")},
            "explanation": (f"{linked} of {n} sanitized documents contain a phrase"
                            + (" or a combination of phrases" if self.arity > 1 else "")
                            + f" found in fewer than {self.k} documents of the collection, including the original."),
        }
        return details

    def _residual_result(self, release: Release, scored: list[dict[str, Any]]) -> Result:
        """The paper's n-gram-level figure: the share of the originals' linking n-grams still in
        the release, with an interval that resamples documents."""
        n = len(scored)
        total = sum(d["original_rare_ngrams"] for d in scored)
        present = sum(d["original_rare_still_present"] for d in scored)
        # The n-grams of one document stand or fall together: resample documents, not n-grams.
        units = [(d["original_rare_still_present"], d["original_rare_ngrams"]) for d in scored]
        clustered = cluster_bootstrap(units)
        residual = Result.from_risk(
            f"{self.name}.ngram_residual", release.name, clustered_risk(units, None),
            details={**clustered_details(clustered, "n-grams"),
                     "k": self.k, "max_n": self.max_n, "original_rare_ngrams": total, "still_present": present,
                     "documents": n,
                     "definition": ("share of the originals' uniquely-linking n-grams (minimal non-overlapping "
                                    f"set of n-grams with df < {self.k}) still present in the sanitized text; "
                                    "single n-grams only")})
        return residual


class DocumentWorker:
    """The per-document attack on an executor's worker: a copy of the fitted attack without the
    run's shared resources (models stay with the run) and without the collection's originals;
    ``(document, truth, {i: original document}) -> Finding``, each item with the originals of
    its truth. A worker so receives its share of the originals, not all of them (a million
    documents' texts to every worker), and the index with its arrays (read-only, shared by
    the workers of a node on Ray)."""

    #: What the copy leaves behind: the run's resources, the collection's originals and the
    #: tables that map released documents to them (the driver computes each item's truth).
    LEFT = ("resources", "_private_resources", "timings_by_release_", "_originals", "_source", "_orig_by_id",
            "_orig_by_subject", "_orig_rare")

    def __init__(self, attack: PhraseSearchAttack):
        state = {k: v for k, v in attack.__dict__.items() if k not in self.LEFT}
        self.attack = object.__new__(type(attack))
        self.attack.__dict__.update(state)

    def __call__(self, items: list[tuple[Document, list[int] | None, dict[int, Document]]]) -> list[Finding]:
        out = []
        for doc, truth, originals in items:
            # the attack reads an original's text (for its rare n-grams) from these two
            self.attack._originals, self.attack._orig_rare = originals, {}
            out.append(self.attack.attack_document(doc, truth))
        return out


def _named(f: Finding, k: int) -> Finding:
    """A finding of the background search as a re-identification: success = the person most of
    its rare phrases point to is its subject."""
    facts = f.facts
    if f.success is None:
        return dataclasses.replace(f, summary="Not scored: its subject is not among the people of the background")
    ok = bool(facts["guess_correct"])
    if ok:
        summary = "Its rare phrases name its subject (the person most of them point to)"
    elif facts["guess"] is not None:
        summary = "Its rare phrases point to someone else"
    else:
        summary = f"No phrase of it is found about fewer than {k} people"
    return dataclasses.replace(f, success=ok, summary=summary, facts={**facts, "named": ok})


def people_collection(background: Corpus) -> Corpus:
    """The background as one document per person (their public texts joined), so that a phrase
    "in fewer than k documents" means "about fewer than k people"."""
    texts: dict[str, list[str]] = {}
    for d in background:
        if not d.subject:
            raise AnonauditError(f"{background.source or background.name}: background document {d.id!r} has no "
                                 "subject; phrase search against the background names people")
        texts.setdefault(d.subject, []).append(d.text)
    return Corpus([Document(s, "\n\n".join(t), subject=s) for s, t in texts.items()],
                  name=f"{background.name} (per person)", source=background.source)


