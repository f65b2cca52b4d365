"""The LLM backends: in-process llama.cpp, OpenAI-compatible HTTP, local transformers.

All implement :class:`audit.models.llm.LLM` without any caching; :func:`audit.models.specs.load_llm`
wraps them in :class:`audit.models.answer_cache.CachedLLM`. Nothing here downloads anything:
transformers runs with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from audit.core import config
from audit.models.llm import LLM, ChatRequest, LLMError

log = logging.getLogger(__name__)

T = TypeVar("T")


def _offline() -> None:
    """Make sure transformers / huggingface_hub never reach the network."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def map_concurrently(fn, items: Sequence[Any], workers: int, progress: bool | str) -> list[Any]:
    """``[fn(x) for x in items]`` on a thread pool, in order, with an optional progress bar."""
    from audit.runtime.progress import bar as progress_bar
    from audit.models.llm import llm_desc

    desc = llm_desc(progress)
    progress = bool(progress)
    if len(items) <= 1 or workers <= 1:
        return [fn(x) for x in progress_bar(items, enabled=progress, desc=desc, unit="req")]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(progress_bar(pool.map(fn, items), total=len(items), enabled=progress, desc=desc, unit="req"))


def _schema_hint(request: ChatRequest) -> list[dict[str, str]]:
    """Messages for a backend that cannot enforce a schema: say the schema in words."""
    msgs = request.message_dicts
    if request.json_schema is None:
        return msgs
    note = f"Answer only with JSON that matches this JSON schema: {request.json_schema}"
    if msgs and msgs[0]["role"] == "system":
        return [{"role": "system", "content": msgs[0]["content"] + "\n\n" + note}, *msgs[1:]]
    return [{"role": "system", "content": note}, *msgs]


# --------------------------------------------------------------------------- tokenizer


#: The file in each kept conversion (:func:`kept_folder`) that says what it was made from, so that
#: ``anonaudit models prune`` can tell the conversions this installation will not use again.
KEPT_RECORD = "anonaudit-kept.json"


def kept_folder(dest: Path, what: str, make: Callable[[], T], save: Callable[[T, Path], None],
                load: Callable[[Path], T], source: str = "") -> T:
    """Something slow to make (``make()``: a conversion of a GGUF file), kept in the folder
    ``dest`` of the model cache so that later processes ``load`` it instead. It is saved into a
    folder beside ``dest``, renamed when whole (so ``dest`` exists only complete), by one process
    at a time: the others wait for the lock, then load what it saved; a maker killed half-way
    leaves a folder the next one removes. Where ``dest`` cannot be written (a read-only cache, a
    full disk), ``what`` is made each time, with a warning. ``source``: the ``--llm`` value of
    the model it is made from, kept in the folder's :data:`KEPT_RECORD` with ``what``
    (:func:`audit.models.specs.kept_conversions` reads it)."""
    import json
    import shutil

    from audit.core.files import locked

    if dest.exists():
        return load(dest)
    made = None
    try:
        with locked(dest):
            if dest.exists():  # saved by another process while this one waited
                return load(dest)
            for left in dest.parent.glob(f".{dest.name}.*.tmp"):  # half-saved by a killed process
                shutil.rmtree(left, ignore_errors=True)
            made = make()
            tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
            try:
                save(made, tmp)
                (tmp / KEPT_RECORD).write_text(json.dumps({"what": what, "source": source}) + "\n")
                os.replace(tmp, dest)
                config.record(dest)  # anonaudit's: `cache clear --models` may remove it
            finally:
                shutil.rmtree(tmp, ignore_errors=True)
    except OSError as exc:
        log.warning("could not keep %s in %s (%s): it is made again each time", what, dest.parent, exc)
    return made if made is not None else make()


def gguf_tokenizer(gguf_path: str | Path, folder: str | Path, source: str):
    """A Hugging Face tokenizer rebuilt from a GGUF file's vocabulary.

    Converting it takes tens of seconds, so the result is kept in ``folder``
    (:func:`tokenizers_root` ``/KEY``: :func:`kept_folder`, with ``source``) and later loads take
    a fraction of a second.
    """
    _offline()
    from transformers import AutoTokenizer

    path = Path(gguf_path)
    return kept_folder(Path(folder), f"the tokeniser of {path.name}",
                       lambda: AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name),
                       lambda tok, tmp: tok.save_pretrained(tmp), AutoTokenizer.from_pretrained, source)


def tokenizers_root() -> Path:
    """Where the tokenisers rebuilt from GGUF files for llama.cpp are kept, a folder each."""
    return config.subdir("models") / "tokenizers"


def dequantised_root() -> Path:
    """Where GGUF models read through transformers are kept dequantised, a folder each
    (:class:`TransformersLLM`); ``anonaudit models list`` shows its size."""
    return config.home() / "models" / "transformers"


def _save_dequantised(model: Any, tokenizer: Any, folder: Path) -> None:
    """A model loaded from a GGUF file (its weights dequantised to float32) and its tokeniser,
    written as a Hugging Face folder. transformers will not ``save_pretrained`` a model it loaded
    from GGUF, so the weights go through safetensors and the config without its GGUF
    quantisation entry (the weights are plain tensors now)."""
    import copy

    from safetensors.torch import save_model

    tokenizer.save_pretrained(folder)
    cfg = copy.deepcopy(model.config)
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    cfg.save_pretrained(folder)
    if model.can_generate() and model.generation_config is not None:
        model.generation_config.save_pretrained(folder)
    weights = folder / "model.safetensors"
    save_model(model, str(weights), metadata={"format": "pt"})
    # safetensors writes the file for its owner alone: readable as the other files are (umask)
    os.chmod(weights, (folder / "config.json").stat().st_mode & 0o777)


def key_of(identity: str) -> str:
    """The folder name a model's converted copy (or tokenizer) is kept under: a short hash of its
    identity, shared by every backend and by the model specs' cache check."""
    import hashlib

    return hashlib.sha256(identity.encode()).hexdigest()[:24]


# --------------------------------------------------------------------------- llama.cpp


def template_text(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str | None:
    """``messages`` through the tokenizer's chat template with the assistant's turn opened;
    ``None`` when it has no template (or refuses these messages)."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    try:
        return tokenizer.apply_chat_template([dict(m) for m in messages], tokenize=False, add_generation_prompt=True)
    except Exception as exc:  # noqa: BLE001 - a template that refuses a chat (e.g. no system role)
        log.info("no chat template text for these messages (%s)", exc)
        return None


# --------------------------------------------------------------------------- OpenAI HTTP


# --------------------------------------------------------------------------- transformers


class TransformersLLM(LLM):
    """A local causal LM with transformers: a model folder, or a GGUF file (dequantised on
    load through the ``gguf`` package, so it needs float32 memory: ~2 GB for 0.5B).

    Chat uses the tokenizer's chat template; ``json_schema`` is not enforced (the schema
    is stated in a system note, and callers parse tolerantly). :meth:`logprobs` is exact:
    prefix + continuation are tokenized together and the continuation's tokens scored.

    The model and its tokeniser are loaded on first use, not when this object is made: a run
    whose information content all comes from the cache, or whose scoring runs on a cluster's
    workers (:class:`~audit.metrics.ic.ICWorker`), never loads them in its own process.
    ``announce``: the model's name in a line on stderr when the load starts and ends (none when
    None).

    A GGUF file is dequantised once into a folder of this machine's model cache, named by
    ``identity`` (which names the file's content and the versions of transformers and torch:
    :func:`audit.models.specs.spec_identity`), and loaded from there: the 0.5B scorer in 1.5 s
    instead of 80-90 s here (2.5 GB of float32 weights on disk; the same weights and log-
    probabilities, bit for bit). Without an ``identity`` the file is read each time. ``source``
    (the ``--llm`` value that names this model; its path when not given) is kept with the copy,
    so that ``anonaudit models prune`` can tell a copy this installation will not use again.
    """

    supports_schema = False

    def __init__(self, path: str | Path, *, identity: str = "", n_ctx: int = 4096, device: str | None = None,
                 announce: str | None = None, source: str = ""):
        path = Path(path)
        if not path.exists():
            raise LLMError(f"transformers model {path} does not exist (a model folder or a GGUF file)")
        self.path = path
        self.identity = identity or f"transformers:{path.name}"
        self.n_ctx = int(n_ctx)
        self.announce = announce
        self._source = source or f"transformers:{path.resolve()}"
        self._converted_key = key_of(identity) if identity else None
        self._device = device
        self._loaded: tuple[Any, Any, Any] | None = None  # (torch, model, tokenizer)
        self._load_lock = threading.Lock()
        self._lock = threading.Lock()

    @property
    def runs_in_process(self) -> bool:  # type: ignore[override]
        return True

    @property
    def loaded(self) -> bool:
        """Whether the model is in memory yet."""
        return self._loaded is not None

    def _load(self) -> tuple[Any, Any, Any]:
        with self._load_lock:
            if self._loaded is None:
                from audit.runtime.progress import stage

                with stage(f"loading {self.announce}", enabled=self.announce is not None):
                    self._loaded = self._load_now()
            return self._loaded

    def _load_now(self) -> tuple[Any, Any, Any]:
        _offline()
        import torch

        folder, kwargs = self.path, {}
        if self.path.is_file():
            folder, kwargs = self.path.parent, {"gguf_file": self.path.name}
        elif not (self.path / "config.json").exists():
            ggufs = sorted(self.path.glob("*.gguf"))
            if ggufs:
                kwargs = {"gguf_file": ggufs[0].name}
        device = self._device or ("cuda" if torch.cuda.is_available() else "cpu")
        tokenizer, model = (self._dequantised(folder, kwargs) if kwargs and self._converted_key
                            else self._read(folder, kwargs))
        model.to(device).eval()
        return torch, model, tokenizer

    def _read(self, folder: Path, kwargs: dict[str, Any], copy: bool = False) -> tuple[Any, Any]:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        try:
            return (AutoTokenizer.from_pretrained(folder, local_files_only=True, **kwargs),
                    AutoModelForCausalLM.from_pretrained(folder, local_files_only=True, **kwargs))
        except Exception as exc:  # noqa: BLE001
            what = f" (its dequantised copy {folder}: delete that folder to make it again)" if copy else ""
            raise LLMError(f"transformers could not load {self.path}{what}: {exc}") from exc

    def _dequantised(self, folder: Path, kwargs: dict[str, Any]) -> tuple[Any, Any]:
        """``(tokenizer, model)`` of the GGUF file: from its dequantised copy in the model cache,
        or read from the file and the copy kept (:func:`kept_folder`)."""
        return kept_folder(dequantised_root() / self._converted_key, f"{self.path.name} dequantised",
                           lambda: self._read(folder, kwargs),
                           lambda read, tmp: _save_dequantised(read[1], read[0], tmp),
                           lambda dest: self._read(dest, {}, copy=True), self._source)

    @property
    def model(self) -> Any:
        return self._load()[1]

    @property
    def tokenizer(self) -> Any:
        return self._load()[2]

    @property
    def _torch(self) -> Any:
        return self._load()[0]

    @property
    def device(self) -> Any:
        return next(self.model.parameters()).device

    @property
    def context_size(self) -> int:  # type: ignore[override]
        return min(self.n_ctx, int(getattr(self.model.config, "max_position_embeddings", self.n_ctx)))

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def chat_text(self, messages) -> str | None:
        return template_text(self.tokenizer, messages)

    def _complete(self, request: ChatRequest) -> str:
        torch = self._torch
        msgs = _schema_hint(request)
        if getattr(self.tokenizer, "chat_template", None):
            prompt = self.tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
        else:
            prompt = "\n".join(f"{m['role']}: {m['content']}" for m in msgs) + "\nassistant:"
        inputs = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False).to(self.device)
        sample = request.temperature > 0
        with self._lock, torch.no_grad():
            torch.manual_seed(request.seed)
            out = self.model.generate(**inputs, max_new_tokens=request.max_tokens, do_sample=sample,
                                      temperature=request.temperature if sample else None,
                                      top_p=None, top_k=None,
                                      pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id)
        n_prompt = int(inputs["input_ids"].shape[1])
        self._note_usage({"prompt_tokens": n_prompt, "completion_tokens": int(out.shape[1]) - n_prompt})
        text = self.tokenizer.decode(out[0, n_prompt:], skip_special_tokens=True)
        for s in request.stop:
            cut = text.find(s)
            if cut >= 0:
                text = text[:cut]
        return text

    def logprobs(self, prefix: str, continuation: str) -> list[float]:
        if not continuation:
            return []
        torch = self._torch
        enc = self.tokenizer(prefix + continuation, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = enc["input_ids"], enc["offset_mapping"]
        split = next((i for i, (_, end) in enumerate(offsets) if end > len(prefix)), len(ids))
        if split == 0:  # empty prefix: condition on BOS (or EOS when there is none)
            bos = self.tokenizer.bos_token_id
            ids = [bos if bos is not None else self.tokenizer.eos_token_id, *ids]
            split = 1
        with self._lock, torch.no_grad():
            logits = self.model(torch.tensor([ids], device=self.device)).logits[0].float()
        logp = torch.log_softmax(logits, dim=-1)
        return [float(logp[i - 1, ids[i]]) for i in range(split, len(ids))]
