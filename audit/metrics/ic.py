"""Information content of terms: IC(t) = -log P(t | context), with pluggable estimators.

* :class:`CausalIC` (default): the log-probability of the term (with its leading
  space) given its left context, through the LLM layer's ``logprobs(prefix,
  continuation)`` call. The left context is cut to a token budget; its start moves
  in steps of half the budget, so consecutive terms share the same prefix and a
  llama.cpp backend reuses its prompt cache instead of re-reading the context.
* :class:`MaskedIC`: a local BERT-like folder with a masked-LM head (as in the TPI
  and TPS papers): one term in every ``every`` is replaced by mask tokens while the
  others stay visible, shifting the masked set over ``every`` passes; a multi-token
  term takes the minimum token probability.

IC of a document's terms is computed once and cached on disk (:class:`ICCache`), keyed
by the document's text and the estimator's identity, so every release of an audit, every
later run and every other corpus holding the same document (a subset, a sample) reuses it;
an interrupted computation resumes.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from audit.core import config
from audit.core.errors import AnonauditError
from audit.core.files import atomic_write_json
from audit.metrics.terms import Term
from audit.metrics.token_scores import PRECISIONS, resolve_precision, token_logprobs

if TYPE_CHECKING:
    from audit.core.data import Corpus
    from audit.models.llm import LLM

#: Bump when term extraction or IC computation changes meaning (invalidates caches).
IC_VERSION = "1"
#: The most tokens of left context a term sees in causal IC (each sees between half of it and all
#: of it; a document of up to this many tokens is read whole, in one forward pass).
CONTEXT_TOKENS = 256
#: Decimals of the information content kept in the cache, and so used by every run.
IC_DECIMALS = 6
#: Probabilities are floored here so a term the model "cannot" produce has a finite IC.
MIN_PROB = 1e-12


class ICEstimator(ABC):
    """Estimates the information content (nats) of each term of a text."""

    @property
    @abstractmethod
    def identity(self) -> str:
        """What determines the values (model checksum, parameters): part of the cache key."""

    @abstractmethod
    def estimate(self, text: str, terms: Sequence[Term]) -> np.ndarray:
        """IC of each term of ``text`` (same order as ``terms``), as float64 nats >= 0."""

    def worker(self) -> ICWorker | None:
        """A worker that computes these values on an executor's workers (:func:`corpus_ic`), or
        None where they are computed here."""
        return None


# --------------------------------------------------------------------------- causal


class CausalIC(ICEstimator):
    """-log P(term | left context) from a causal LLM (sum over the term's tokens).

    ``llm``: an :class:`~audit.models.llm.LLM` with ``logprobs`` (e.g. from
    :func:`audit.models.specs.load_llm`). ``context_tokens``: the most context a term sees;
    each term sees between half of it and all of it (whole document when shorter).
    ``chars_per_token`` converts the budget to characters (4 fits English BPE).
    """

    def __init__(self, llm: LLM, context_tokens: int = CONTEXT_TOKENS, chars_per_token: float = 4.0,
                 one_pass: bool | None = None, batch_size: int = 4, precision: str = "auto"):
        if precision not in PRECISIONS:
            raise AnonauditError(f"ic_precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
        self.llm = llm
        self.context_tokens = int(context_tokens)
        self.chars_per_token = float(chars_per_token)
        self.one_pass = one_pass
        self.batch_size = int(batch_size)
        self.precision = precision

    def _local_model(self) -> tuple[Any, Any] | None:
        """(model, tokenizer) of an in-process transformers backend, if that is what ``llm`` is."""
        return self.llm.in_process

    @property
    def uses_one_pass(self) -> bool:
        return self.llm.runs_in_process if self.one_pass is None else bool(self.one_pass)

    def precision_of(self) -> str:
        """``fp32`` or ``bf16``: what the one-pass scoring computes in (``auto``: bf16 where the
        device an in-process model takes, a GPU torch sees or else the CPU, computes it natively);
        the per-term path computes as its backend does."""
        if self.precision != "auto":
            return self.precision
        import torch

        return resolve_precision("auto", "cuda" if torch.cuda.is_available() else "cpu")

    @property
    def identity(self) -> str:
        mode = ""
        if self.uses_one_pass:
            mode = ":one-pass" + (":bf16" if self.precision_of() == "bf16" else "")
        return f"causal:{self.llm.identity or type(self.llm).__name__}:ctx={self.context_tokens}{mode}"

    def worker(self) -> ICWorker | None:
        """One pass over windows on the workers, each loading the scorer the run's LLM layer
        names (:attr:`~audit.models.llm.LLM.worker_spec`: on a distributed executor); per term, the
        log-probabilities stay with the LLM layer here (its answer cache)."""
        spec = self.llm.worker_spec
        if not self.uses_one_pass or spec is None:
            return None
        return ICWorker("causal", spec, {"context_tokens": self.context_tokens, "batch_size": self.batch_size,
                                         "precision": self.precision_of()})  # what the identity names

    def estimate(self, text: str, terms: Sequence[Term]) -> np.ndarray:
        if self.uses_one_pass:
            local = self._local_model()
            if local is None:
                raise AnonauditError("one-pass causal IC needs an in-process transformers model "
                                     "(e.g. --llm transformers:qwen2.5-coder-0.5b)")
            return self._estimate_one_pass(text, terms, *local)
        return self._estimate_per_term(text, terms)

    def _estimate_one_pass(self, text: str, terms: Sequence[Term], model: Any, tok: Any) -> np.ndarray:
        """Score the tokens of the text that overlap a term, window by window
        (:func:`~audit.metrics.token_scores.token_logprobs`: a document that fits the budget in
        one forward pass), then sum the log-probabilities of the tokens of each term."""
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
        if not ids:
            return np.zeros(len(terms))
        starts = np.array([a for a, _ in offsets])
        ends = np.array([b for _, b in offsets])
        hits = [(starts < t.end) & (ends > t.start) for t in terms]
        needed = np.logical_or.reduce(hits) if hits else np.zeros(len(ids), dtype=bool)
        logp = token_logprobs(model, tok, ids, size=self.context_tokens, batch_size=self.batch_size,
                              precision=self.precision_of(), needed=needed)
        return np.array([max(0.0, -float(logp[hit].sum())) for hit in hits])

    def _estimate_per_term(self, text: str, terms: Sequence[Term]) -> np.ndarray:
        budget = max(8, int(self.context_tokens * self.chars_per_token))
        step = max(1, budget // 2)
        starts = [t.start for t in terms]
        out = np.zeros(len(terms))
        for i, term in enumerate(terms):
            prefix, continuation = self.split(text, term, budget, step, starts)
            lps = self.llm.logprobs(prefix, continuation)
            out[i] = max(0.0, -float(sum(lps)))
        return out

    @staticmethod
    def split(text: str, term: Term, budget: int, step: int, starts: Sequence[int]) -> tuple[str, str]:
        """(prefix, continuation) for one term: the continuation is the term with its
        leading space; the prefix starts at a term boundary between ``budget - step``
        and ``budget`` characters before it (snapped in steps, so neighbours share it)."""
        anchor = 0
        if term.start > budget:
            anchor = ((term.start - (budget - step)) // step) * step  # start - anchor in [budget-step, budget)
            # snap forward to the start of a term (a word boundary) at or after the anchor
            snapped = next((s for s in starts if s >= anchor), term.start)
            anchor = min(snapped, term.start)
        prefix = text[anchor:term.start]
        continuation = term.text
        if prefix.endswith(" "):
            prefix, continuation = prefix[:-1], " " + continuation
        return prefix, continuation


# --------------------------------------------------------------------------- masked


class MaskedIC(ICEstimator):
    """-log of the minimum masked-token probability of a term (BERT-style MLM).

    ``model``: a local folder with a masked-LM head and a fast tokenizer. ``every``:
    mask one term in every ``every`` (``every`` passes per window; the TPI/TPS papers
    use 6). Long documents are cut into windows of at most ``max_length`` tokens at
    term boundaries.
    """

    def __init__(self, model: str, every: int = 6, max_length: int = 512, batch_size: int = 6,
                 device: str | None = None):
        if every < 1:
            raise AnonauditError(f"--mask-every must be at least 1, got {every}")
        self.model = model
        self.every = int(every)
        self.max_length = int(max_length)
        self.batch_size = int(batch_size)
        self.device = device
        self._loaded: tuple[Any, Any] | None = None
        self._identity: str | None = None

    def _load(self) -> tuple[Any, Any]:
        if self._loaded is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            import torch
            from transformers import AutoModelForMaskedLM, AutoTokenizer

            path = Path(self.model).expanduser()
            if not path.is_dir():
                raise AnonauditError(f"--ic-model {self.model!r} is not a local model folder "
                                     "(nothing is downloaded from a hub)")
            try:
                tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
                mlm = AutoModelForMaskedLM.from_pretrained(path, local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - transformers raises many kinds
                raise AnonauditError(f"{path}: not a masked language model folder ({exc})") from None
            if not getattr(tok, "is_fast", False) or tok.mask_token_id is None:
                raise AnonauditError(f"{path}: the tokenizer must be a fast tokenizer with a mask token")
            device = self.device or ("cuda" if torch.cuda.is_available() else "cpu")
            self._loaded = (tok, mlm.to(device).eval())
        return self._loaded

    def worker(self) -> ICWorker:
        """The same estimator on the workers, each loading the model folder (every node sees it)."""
        return ICWorker("masked", self.model, {"every": self.every, "max_length": self.max_length,
                                               "batch_size": self.batch_size, "device": self.device})

    @property
    def identity(self) -> str:
        if self._identity is None:
            h = hashlib.sha256()
            root = Path(self.model).expanduser()
            files = sorted(f for f in root.rglob("*") if f.is_file()) if root.is_dir() else []
            for f in files:
                h.update(f"{f.relative_to(root)}:{f.stat().st_size}\n".encode())
                if f.suffix == ".json" and f.stat().st_size < 1_000_000:
                    h.update(f.read_bytes())
            self._identity = f"masked:{root.name}:{h.hexdigest()[:16]}:every={self.every}"
        return self._identity

    def _windows(self, offsets: list[tuple[int, int]], term_tokens: list[list[int]]) -> list[tuple[int, int]]:
        """Token windows [a, b) of at most max_length-2 tokens that never cut a term."""
        limit = max(8, self.max_length - 2)
        windows, start, n = [], 0, len(offsets)
        term_at = {}
        for toks in term_tokens:
            if toks:
                term_at[toks[0]] = toks[-1] + 1
        while start < n:
            end = min(n, start + limit)
            if end < n:  # do not cut a term: end at the start of the term that crosses
                for first, stop in term_at.items():
                    if first < end < stop and first > start:
                        end = first
                        break
            windows.append((start, end))
            start = end
        return windows

    def estimate(self, text: str, terms: Sequence[Term]) -> np.ndarray:
        import torch

        tok, mlm = self._load()
        enc = tok(text, add_special_tokens=False, return_offsets_mapping=True)
        ids: list[int] = enc["input_ids"]
        offsets: list[tuple[int, int]] = [tuple(o) for o in enc["offset_mapping"]]
        term_tokens = [[i for i, (a, b) in enumerate(offsets) if a < t.end and t.start < b and b > a]
                       for t in terms]
        out = np.zeros(len(terms))
        if not ids:
            return out
        cls_id = tok.cls_token_id if tok.cls_token_id is not None else tok.bos_token_id
        sep_id = tok.sep_token_id if tok.sep_token_id is not None else tok.eos_token_id
        jobs: list[tuple[list[int], list[tuple[int, list[int]]]]] = []  # (input ids, [(term, positions)])
        for a, b in self._windows(offsets, term_tokens):
            inside = [k for k, toks in enumerate(term_tokens) if toks and a <= toks[0] < b]
            for shift in range(self.every):
                masked = inside[shift::self.every]
                if not masked:
                    continue
                window = list(ids[a:b])
                targets = []
                for k in masked:
                    pos = [p - a for p in term_tokens[k] if p < b]
                    for p in pos:
                        window[p] = tok.mask_token_id
                    targets.append((k, pos))
                head = [cls_id] if cls_id is not None else []
                tail = [sep_id] if sep_id is not None else []
                off = len(head)
                jobs.append((head + window + tail, [(k, [p + off for p in pos]) for k, pos in targets]))
        device = next(mlm.parameters()).device
        for j in range(0, len(jobs), self.batch_size):
            batch = jobs[j:j + self.batch_size]
            width = max(len(x) for x, _ in batch)
            pad = tok.pad_token_id or 0
            input_ids = torch.tensor([x + [pad] * (width - len(x)) for x, _ in batch], device=device)
            mask = torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x, _ in batch], device=device)
            with torch.no_grad():
                logp = torch.log_softmax(mlm(input_ids=input_ids, attention_mask=mask).logits.float(), dim=-1)
            for row, (_, targets) in enumerate(batch):
                for k, pos in targets:  # pos[i] is where term_tokens[k][i] sits in this row
                    out[k] = self._term_ic(logp[row], pos, term_tokens[k], ids)
        return out

    @staticmethod
    def _term_ic(logp_row, positions: list[int], token_ids: list[int], ids: list[int]) -> float:
        """-log of the least probable original token of a term (positions align with token_ids)."""
        lps = [float(logp_row[p, ids[t]]) for p, t in zip(positions, token_ids)]
        return max(0.0, -max(min(lps), math.log(MIN_PROB))) if lps else 0.0


# --------------------------------------------------------------------------- cache


class ICWorker:
    """Information content on an executor's worker: the estimator (``kind`` ``causal``: a
    :class:`CausalIC` in one pass over the scorer ``model``, an LLM spec; ``masked``: a
    :class:`MaskedIC` of the folder ``model``) made once per worker (``setup``, its model
    loaded there, with as many torch threads as the worker has CPUs), then ``[(text, terms)] ->
    [IC]``, each document's as :meth:`ICEstimator.estimate` gives it here."""

    def __init__(self, kind: str, model: str, params: dict[str, Any]):
        self.kind, self.model, self.params = kind, model, dict(params)
        self.threads: int | None = None
        self._estimator: ICEstimator | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_estimator": None}

    def setup(self) -> None:
        if self._estimator is not None:
            return
        if self.threads:
            import torch

            torch.set_num_threads(self.threads)
        if self.kind == "causal":
            from audit.models.specs import load_llm

            llm = load_llm(self.model, cache=False)
            if llm.in_process is None:  # loads a transformers model (on first use) here, once a worker
                raise AnonauditError(f"the scorer {self.model} is not a model that runs in this process")
            self._estimator = CausalIC(llm, one_pass=True, **self.params)
        else:
            self._estimator = MaskedIC(self.model, **self.params)

    def __call__(self, items: list[tuple[str, list[Term]]]) -> list[np.ndarray]:
        self.setup()
        assert self._estimator is not None
        return [np.asarray(self._estimator.estimate(text, terms), dtype=float) for text, terms in items]


class ICCache:
    """IC of the terms of each document on disk, keyed by its text and the estimator: a
    document's IC depends on its own text (its left context, its masked neighbours) and the
    estimator, never on the rest of its corpus, so any corpus reuses what another computed for
    the same texts (a subset, a sample, a larger release, the same text under another id).

    One JSON file per document under ``config.subdir("utility")`` (or ``folder``): ``{"identity",
    "text_sha256", "version", "terms": [[start, end, text, kind, ic], ...], "seconds"}``.
    :func:`corpus_ic` saves every :data:`IC_SAVE_SECONDS` and when it ends or stops, so an
    interrupted run resumes where it stopped."""

    def __init__(self, identity: str, folder: str | os.PathLike | None = None, enabled: bool = True):
        self.identity = identity
        self.enabled = enabled and config.cache_enabled()
        self.folder = Path(folder) if folder else (config.subdir("utility") if self.enabled
                                                   else config.home() / "utility")
        #: The entries this cache was asked for or given, by the sha256 of their text.
        self.documents: dict[str, dict[str, Any]] = {}
        self.stats = {"hits": 0, "misses": 0}

    def path_of(self, text: str) -> Path:
        """The file of the document whose text is ``text``."""
        key = hashlib.sha256(f"{_text_sha(text)}|{self.identity}|{IC_VERSION}".encode()).hexdigest()[:32]
        return self.folder / f"ic-{key}.json"

    def get(self, text: str) -> tuple[list[Term], np.ndarray] | None:
        """The terms and IC of the document whose text is ``text`` (None when not cached)."""
        sha = _text_sha(text)
        entry = self.documents.get(sha) or (self._read(text, sha) if self.enabled else None)
        self.stats["hits" if entry is not None else "misses"] += 1
        if entry is None:
            return None
        self.documents[sha] = entry
        terms = [Term(int(s), int(e), str(t), str(k)) for s, e, t, k, _ in entry["terms"]]
        return terms, np.array([float(x[4]) for x in entry["terms"]], dtype=float)

    def _read(self, text: str, sha: str) -> dict[str, Any] | None:
        try:
            data = json.loads(self.path_of(text).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # absent, or damaged: computed again and written over
        ok = isinstance(data, dict) and isinstance(data.get("terms"), list) and \
            (data.get("identity"), data.get("text_sha256"), data.get("version")) == (self.identity, sha, IC_VERSION)
        return data if ok else None

    def put_many(self, entries: Sequence[tuple[str, Sequence[Term], np.ndarray, float]]) -> None:
        """Several documents' ``(text, terms, IC, seconds)``, each saved to its own file."""
        for text, terms, ic, seconds in entries:
            sha = _text_sha(text)
            entry = {"identity": self.identity, "text_sha256": sha, "version": IC_VERSION,
                     "terms": [[t.start, t.end, t.text, t.kind, round(float(v), IC_DECIMALS)] for t, v in zip(terms, ic)],
                     "seconds": round(seconds, 4)}
            self.documents[sha] = entry
            if self.enabled:
                atomic_write_json(self.path_of(text), entry)

    def seconds(self) -> list[float]:
        """The seconds each document this cache was asked for or given took to compute."""
        return [float(d.get("seconds", 0.0)) for d in self.documents.values()]


def _text_sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


#: Documents a round of :func:`corpus_ic` sends to the workers (one executor stage, saved after it).
IC_ROUND = 256
#: A local :func:`corpus_ic` saves its cache at most this often (seconds), and when it ends or
#: stops (an error, Ctrl-C): the file is written whole each time, so saving after every document
#: would take time quadratic in a corpus's documents; a run killed outright loses at most this.
IC_SAVE_SECONDS = 10.0
#: Documents a worker scores per call.
IC_GROUP = 8


def corpus_ic(corpus: Corpus, estimator: ICEstimator, extract, *, cache: ICCache | None = None,
              progress: bool = False, executor: Any = None) -> dict[str, tuple[list[Term], np.ndarray]]:
    """Terms and IC of every document of ``corpus`` (from ``cache`` where present).

    ``extract``: a callable text -> list[Term] (e.g. :class:`~audit.metrics.terms.TermExtractor`).
    On a distributed ``executor``, an estimator with a :meth:`~ICEstimator.worker` scores the
    documents on the workers, in rounds of :data:`IC_ROUND` documents saved to the cache as each
    comes back (an interrupted run resumes from the last); a document's seconds are then its
    round's wall time shared out. The terms are extracted here.
    """
    from audit.runtime.progress import bar as progress_bar

    out: dict[str, tuple[list[Term], np.ndarray]] = {}
    todo = []
    for doc in corpus:
        hit = cache.get(doc.text) if cache is not None else None
        if hit is not None:
            out[doc.id] = hit
        else:
            todo.append(doc)
    worker = estimator.worker() if todo and getattr(executor, "distributed", False) else None
    if worker is not None:
        with progress_bar(total=len(todo), desc="information content", unit="doc", enabled=progress) as bar:
            for at in range(0, len(todo), IC_ROUND):
                part = todo[at:at + IC_ROUND]
                t0 = time.perf_counter()
                terms = [extract(doc.text) for doc in part]
                scored = iter(executor.map(worker, [(d.text, t) for d, t in zip(part, terms) if t],
                                           group=IC_GROUP, label="information content"))
                seconds = (time.perf_counter() - t0) / len(part)
                done = [(d, t, _kept(next(scored) if t else np.zeros(0)), seconds) for d, t in zip(part, terms)]
                if cache is not None:
                    cache.put_many([(d.text, t, ic, sec) for d, t, ic, sec in done])
                out.update((d.id, (t, ic)) for d, t, ic, _ in done)
                bar.update(len(part))
        return out
    unsaved: list[tuple[str, list[Term], np.ndarray, float]] = []
    saved_at = time.perf_counter()
    try:
        for doc in progress_bar(todo, desc="information content", unit="doc", enabled=progress):
            t0 = time.perf_counter()
            terms = extract(doc.text)
            ic = _kept(estimator.estimate(doc.text, terms) if terms else np.zeros(0))
            out[doc.id] = (terms, ic)
            if cache is not None:
                unsaved.append((doc.text, terms, ic, time.perf_counter() - t0))
                if time.perf_counter() - saved_at >= IC_SAVE_SECONDS:
                    cache.put_many(unsaved)
                    unsaved, saved_at = [], time.perf_counter()
    finally:  # what was scored before an error or an interruption is kept
        if cache is not None:
            cache.put_many(unsaved)
    return out


def _kept(ic: Any) -> np.ndarray:
    """IC values as the cache keeps them: finite, 6 decimals (so a cold run and a warm one agree)."""
    ic = np.nan_to_num(np.asarray(ic, dtype=float), nan=0.0, posinf=-math.log(MIN_PROB))
    return np.round(ic, IC_DECIMALS)
