"""The LLM backends: in-process llama.cpp, OpenAI-compatible HTTP, local transformers.

All implement :class:`audit.models.llm.LLM` without any caching; :func:`audit.models.specs.load_llm`
wraps them in :class:`audit.models.cache.CachedLLM`. Nothing here downloads anything:
transformers runs with ``HF_HUB_OFFLINE=1``.
"""

from __future__ import annotations

import logging
import os
import random
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


def _map_concurrently(fn, items: Sequence[Any], workers: int, progress: bool | str) -> list[Any]:
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


def _key_of(identity: str) -> str:
    import hashlib

    return hashlib.sha256(identity.encode()).hexdigest()[:24]


# --------------------------------------------------------------------------- llama.cpp


class LlamaCppLLM(LLM):
    """In-process llama.cpp through ``xllamacpp`` (its embedded HTTP-less server).

    ``deterministic=True`` (the default): an answer depends on its request alone, so a cold
    run and a cached (warm) one agree. llama.cpp's numbers are not batch-invariant: when
    several slots decode together, or a slot reuses the KV cache of an earlier prompt
    (``cache_prompt``), the same prompt gets other logits (measured on the 0.5B judge: up
    to 0.08 nats on the top token, 0.17 on the margin between the top two), enough to flip
    a close greedy or seeded answer (issue 13). So the server gets one slot, requests go
    one at a time, and every chat prompt is evaluated from scratch. ``deterministic=False``
    runs ``n_parallel`` slots with continuous batching and prompt reuse (requests sent from
    threads share decoding steps): faster for long answers, but an answer then depends on
    its neighbours, and the cache keys such answers apart (:attr:`cache_identity`).
    Each slot gets the full ``n_ctx`` tokens (``context_size``). ``json_schema`` is enforced
    by llama.cpp's grammar sampler; temperature and seed are passed through.

    ``reuse_prefix=True`` (the default) keeps determinism and still reuses work: a request that
    declares shared prefixes (:attr:`ChatRequest.shared`) has each prefix evaluated in one fixed
    way, whatever ran before it: the first from position 0, each deeper one from where the one
    above it ends, the rest of the prompt from where the deepest ends (:meth:`_complete_shared`).
    The slot's evaluated prefixes are kept and reused by the next request that shares them, so
    an answer is the same whether its prefix was evaluated for it or for an earlier request
    (checked bit for bit on the log-probabilities in any order), and a resumed run gets the same
    answers as an uninterrupted one. Such answers differ in the last bits from a whole-prompt
    evaluation, so they are keyed apart (the request's ``shared`` is in its cache key).

    :meth:`logprobs` uses llama.cpp itself, exactly: prefix and continuation are tokenized
    together with the model's own tokenizer (rebuilt once from the GGUF file and kept, with
    ``source``, the ``--llm`` value that names the model, for ``anonaudit models prune``),
    the prefix tokens are the prompt, and a token-level grammar forces the continuation
    tokens while ``n_probs`` reports each forced token's log-probability under the raw
    (pre-sampling) distribution.
    """

    supports_schema = True

    def __init__(self, model_path: str | Path, *, n_ctx: int = 4096, n_parallel: int = 4,
                 n_threads: int | None = None, identity: str = "", verbose: bool = False,
                 deterministic: bool = True, reuse_prefix: bool = True, source: str = ""):
        import xllamacpp as xlc

        self.model_path = str(model_path)
        self.identity = identity or f"llamacpp:{Path(model_path).name}"
        self.context_size = int(n_ctx)
        self.deterministic = bool(deterministic)
        self.reuse_prefix = bool(reuse_prefix)
        # one slot: no request is ever decoded beside another (see the class doc)
        self.n_parallel = 1 if self.deterministic else max(1, int(n_parallel))
        threads = n_threads or max(1, os.cpu_count() or 1)
        params = xlc.CommonParams()
        params.model.path = self.model_path
        params.n_parallel = self.n_parallel
        params.n_ctx = self.context_size * self.n_parallel  # llama.cpp splits n_ctx across slots
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        params.warmup = False
        # no host-memory prompt cache: it could restore another request's state into the slot,
        # which would make what a prompt reuses depend on the requests before it
        params.cache_ram_mib = 0
        if not verbose:
            params.verbosity = -1
        self._xlc = xlc
        try:
            self._server = xlc.Server(params)
        except Exception as exc:  # noqa: BLE001 - the C++ side raises plain exceptions
            raise LLMError(f"llama.cpp could not load {self.model_path}: {exc}") from exc
        self._tok = None
        self._tok_lock = threading.Lock()
        # one slot: the prefixes it holds, evaluated canonically (token tuples, outermost first),
        # and a lock so that the calls that keep them so are never interleaved with another request
        self._held: tuple[tuple[int, ...], ...] = ()
        self._slot_lock = threading.Lock()
        # decided now, not at first use: the tokenizer cache sits beside the assembled models
        self._tok_dir = tokenizers_root() / _key_of(self.identity)
        self._source = source or f"llamacpp:{Path(model_path).resolve()}"

    # chat ------------------------------------------------------------------------
    def _request_body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "messages": request.message_dicts,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
            "seed": request.seed,
            "stream": False,
            # a reused prompt prefix is evaluated in other batches than a fresh one: other logits
            "cache_prompt": not self.deterministic,
        }
        if request.stop:
            body["stop"] = list(request.stop)
        if request.json_schema is not None:
            body["json_schema"] = request.schema
        return body

    @property
    def cache_identity(self) -> str:
        """Answers made with batching and prompt reuse differ from one-at-a-time answers (and
        from run to run): they never share cache entries with them."""
        return f"{self.identity}:decode={'serial' if self.deterministic else 'batched'}"

    def keyed(self, request: ChatRequest) -> ChatRequest:
        """Answers to requests with shared prefixes depend on their reuse: keyed with them when
        reused, without them (as the same prompt evaluated whole) otherwise."""
        return request if self.deterministic and self.reuse_prefix else super().keyed(request)

    def _complete(self, request: ChatRequest) -> str:
        if not self.deterministic:
            return self._complete_chat(request)
        with self._slot_lock:
            if request.shared and self.reuse_prefix:
                prompt = self._shared_prompt(request)
                if prompt is not None:
                    return self._complete_shared(request, *prompt)
            self._held = ()  # the slot is about to hold something else
            return self._complete_chat(request)

    def _complete_chat(self, request: ChatRequest) -> str:
        result = self._call(self._server.handle_chat_completions, self._request_body(request))
        self._note_usage(result.get("usage") if isinstance(result, dict) else None)
        try:
            return result["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"llama.cpp returned an unexpected answer: {str(result)[:300]}") from exc

    # shared prefixes ---------------------------------------------------------------
    def _shared_prompt(self, request: ChatRequest) -> tuple[list[int], list[tuple[int, ...]], int] | None:
        """The request's prompt and its shared prefixes as token ids (the model's own chat
        template), and a token that none of the prefixes is followed by. ``None`` (the prompt
        is then evaluated whole) when the template renders a prefix otherwise than as the
        start of the whole prompt, or tokenizes it otherwise."""
        tok = self.tokenizer
        msgs = request.message_dicts
        try:
            full = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
            texts = [tok.apply_chat_template(msgs[:k], tokenize=False) for k in request.shared]
        except Exception as exc:  # noqa: BLE001 - no template, or one that refuses a partial chat
            log.info("llama.cpp: no shared-prefix reuse for this request (%s)", exc)
            return None
        ids = tok(full, add_special_tokens=False)["input_ids"]
        levels: list[tuple[int, ...]] = []
        for text in texts:
            level = tuple(tok(text, add_special_tokens=False)["input_ids"])
            if not full.startswith(text) or tuple(ids[:len(level)]) != level or len(level) >= len(ids) \
                    or (levels and len(level) <= len(levels[-1])):
                log.info("llama.cpp: a shared prefix is not where the whole prompt starts; evaluated whole")
                return None
            levels.append(level)
        nexts = {ids[len(level)] for level in levels}
        filler = next(t for t in (tok.eos_token_id, tok.pad_token_id, 0, 1, 2) if t is not None and t not in nexts)
        return ids, levels, filler

    def _complete_shared(self, request: ChatRequest, ids: list[int], levels: list[tuple[int, ...]],
                         filler: int) -> str:
        """Answer with each shared prefix evaluated canonically (see the class doc).

        The slot's cache is reused up to the longest common prefix of its tokens and the new
        prompt. A prefix call sends a prefix plus ``filler``, a token that no prompt has at
        that position: the common part then ends exactly at the prefix, so the call cuts the
        slot back to it (when the slot holds it) or evaluates the prefix from where the one
        above it ends, and the next call, whose next token differs from ``filler``, starts
        evaluating exactly there. A prefix that the slot does not hold under an outer one it
        holds is evaluated from position 0 (``cache_prompt`` off).
        """
        result, evaluated = self._answer_shared(request, ids, levels, filler)
        timings = result.get("timings") if isinstance(result, dict) else None
        usage = result.get("usage") if isinstance(result, dict) else None
        if isinstance(usage, dict):
            ran = timings.get("prompt_n") if isinstance(timings, dict) else None
            self._note_usage({**usage, "prompt_evaluated": evaluated + (ran if isinstance(ran, int) else len(ids))})
        try:
            return result["choices"][0]["text"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"llama.cpp returned an unexpected answer: {str(result)[:300]}") from exc

    def _answer_shared(self, request: ChatRequest, ids: list[int], levels: list[tuple[int, ...]], filler: int,
                       **extra: Any) -> tuple[dict[str, Any], int]:
        """The server's raw answer (``extra`` goes into its body) and the prompt tokens the
        prefix calls evaluated. Called with :attr:`_slot_lock` held."""
        try:
            held = 0
            while held < min(len(self._held), len(levels)) and self._held[held] == levels[held]:
                held += 1
            evaluated = 0
            if held == 0:
                evaluated += self._prefix_call([*levels[0], filler], reuse=False)
                held = 1
            else:
                evaluated += self._prefix_call([*levels[held - 1], filler], reuse=True)  # cut back to it
            self._held = tuple(levels[:held])
            for level in levels[held:]:
                evaluated += self._prefix_call([*level, filler], reuse=True)
                self._held = (*self._held, level)
            body = {k: v for k, v in self._request_body(request).items() if k != "messages"}
            body.update(prompt=ids, n_predict=request.max_tokens, cache_prompt=True, **extra)
            return self._call(self._server.handle_completions, body), evaluated
        except BaseException:
            self._held = ()  # whatever the slot holds now, it is not known to be canonical
            raise

    def _prefix_call(self, ids: list[int], *, reuse: bool) -> int:
        """Evaluate ``ids`` into the slot (reusing what it holds when ``reuse``), generating
        nothing; the number of prompt tokens evaluated."""
        result = self._call(self._server.handle_completions,
                            {"prompt": ids, "n_predict": 0, "cache_prompt": reuse, "temperature": 0.0})
        timings = result.get("timings") if isinstance(result, dict) else None
        ran = timings.get("prompt_n") if isinstance(timings, dict) else None
        return ran if isinstance(ran, int) else len(ids)

    def _complete_batch(self, requests: list[ChatRequest], *, progress: bool | str = False) -> list[str]:
        return _map_concurrently(self._complete, requests, self.n_parallel, progress)

    def _call(self, handler, body: dict[str, Any]) -> dict[str, Any]:
        if self._server is None:
            raise LLMError("this llama.cpp model was closed")
        result = handler(body)
        if isinstance(result, dict) and "error" in result:
            err = result["error"]
            msg = err.get("message", err) if isinstance(err, dict) else err
            raise LLMError(f"llama.cpp refused the request: {msg}")
        return result

    # tokens ----------------------------------------------------------------------
    @property
    def tokenizer(self):
        with self._tok_lock:
            if self._tok is None:
                self._tok = gguf_tokenizer(self.model_path, self._tok_dir, self._source)
            return self._tok

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def chat_text(self, messages) -> str | None:
        return _template_text(self.tokenizer, messages)

    def logprobs(self, prefix: str, continuation: str) -> list[float]:
        if not continuation:
            return []
        tok = self.tokenizer
        full = tok(prefix + continuation, add_special_tokens=False, return_offsets_mapping=True)
        ids, offsets = full["input_ids"], full["offset_mapping"]
        # first token that ends after the prefix belongs to the continuation
        split = next((i for i, (_, end) in enumerate(offsets) if end > len(prefix)), len(ids))
        prompt_ids, cont_ids = ids[:split], ids[split:]
        if not prompt_ids:  # empty prefix: condition on BOS
            bos = tok.bos_token_id if tok.bos_token_id is not None else tok.eos_token_id
            prompt_ids = [bos]
        grammar = "root ::= " + " ".join(f"<[{i}]>" for i in cont_ids)
        body = {"prompt": prompt_ids, "max_tokens": len(cont_ids), "n_probs": 1, "grammar": grammar,
                "temperature": 0.0, "post_sampling_probs": False, "cache_prompt": True}
        with self._slot_lock:
            self._held = ()  # the slot is about to hold something else
            result = self._call(self._server.handle_completions, body)
        try:
            content = result["choices"][0]["logprobs"]["content"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"llama.cpp returned no log-probabilities: {str(result)[:300]}") from exc
        got = [c["id"] for c in content]
        if got != cont_ids:
            raise LLMError(f"llama.cpp did not follow the forced continuation ({got} != {cont_ids})")
        return [float(c["logprob"]) for c in content]

    def close(self) -> None:
        self._server = None  # the C++ server shuts down when the object is collected


def _template_text(tokenizer: Any, messages: Sequence[Mapping[str, str]]) -> str | None:
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


#: Hosts (``host`` or ``host:port``, comma-separated) that may receive the API key over plain
#: http although they are not this machine: the user names the servers the key is meant for.
HTTP_KEY_HOSTS_ENV = "ANONAUDIT_HTTP_KEY_HOSTS"


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host.lower() in ("localhost", "localhost.localdomain") or host.lower().endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def server_api_key(base_url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The API key to send to the server at ``base_url``: ``ANONAUDIT_API_KEY``, else
    ``OPENAI_API_KEY``. Over https it is always sent; over plain http (readable by anyone on
    the way) only to this machine (a loopback address) or to a host the user listed in
    ``ANONAUDIT_HTTP_KEY_HOSTS`` — an OpenAI key set for other tools never leaks to a
    ``http://`` server by accident. A key held back is logged as a warning."""
    from urllib.parse import urlsplit

    env = os.environ if environ is None else environ
    key = env.get("ANONAUDIT_API_KEY") or env.get("OPENAI_API_KEY")
    if not key:
        return None
    parts = urlsplit(base_url)
    if parts.scheme.lower() == "https":
        return key
    host = (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        port = None
    allowed = {h.strip().lower() for h in env.get(HTTP_KEY_HOSTS_ENV, "").split(",") if h.strip()}
    if _is_loopback(host) or host in allowed or (port is not None and f"{host}:{port}" in allowed):
        return key
    log.warning("not sending the API key to %s: it is plain http and not this machine; use https, or "
                "list the host in %s=%s if the key is meant for it", base_url, HTTP_KEY_HOSTS_ENV, host)
    return None


class OpenAILLM(LLM):
    """Any OpenAI-compatible server (vLLM, llama.cpp server, Ollama, OpenAI).

    Requests are sent concurrently from a thread pool (``max_workers``), each with a
    timeout, retried with exponential backoff (and jitter) on 429, 5xx and connection
    errors. ``json_schema`` goes out as ``response_format`` (type ``json_schema``), which
    vLLM, llama.cpp and OpenAI enforce. :meth:`logprobs` uses ``/completions`` with
    ``echo`` and ``logprobs`` (vLLM and llama.cpp-compatible servers; OpenAI chat models
    do not offer it). The API key comes from ``api_key``, else :func:`server_api_key`
    (``ANONAUDIT_API_KEY``, else ``OPENAI_API_KEY``, sent over plain http only where meant).
    """

    supports_schema = True
    RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})

    def __init__(self, model: str, base_url: str, *, api_key: str | None = None, timeout: float = 120.0,
                 max_retries: int = 5, backoff: float = 1.0, max_workers: int = 4, context_size: int = 4096):
        import httpx

        self.model = model
        self.base_url = base_url.rstrip("/")
        self.identity = f"openai:{model}@{self.base_url}"
        self.context_size = context_size
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_workers = max(1, max_workers)
        key = api_key if api_key is not None else server_api_key(self.base_url)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._httpx = httpx
        self._client = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout,
                                    limits=httpx.Limits(max_connections=self.max_workers * 2))

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        httpx = self._httpx
        url = f"{self.base_url}{path}"
        last = ""
        for attempt in range(self.max_retries + 1):
            try:
                resp = self._client.post(path, json=payload)
            except (httpx.TimeoutException, httpx.TransportError) as exc:
                last = f"{type(exc).__name__}: {exc}"
            else:
                if resp.status_code < 400:
                    try:
                        return resp.json()
                    except ValueError as exc:
                        raise LLMError(f"{url} answered with invalid JSON: {resp.text[:200]}") from exc
                last = f"HTTP {resp.status_code}: {resp.text[:300]}"
                if resp.status_code not in self.RETRY_STATUS:
                    raise LLMError(f"{url} refused the request ({last})")
            if attempt < self.max_retries:
                delay = self.backoff * (2 ** attempt) * (0.5 + random.random() / 2)
                log.info("retrying %s in %.1fs after %s", url, delay, last)
                time.sleep(delay)
        raise LLMError(f"{url} failed after {self.max_retries + 1} attempts (last error: {last})")

    def _complete(self, request: ChatRequest) -> str:
        payload: dict[str, Any] = {"model": self.model, "messages": request.message_dicts,
                                   "temperature": request.temperature, "max_tokens": request.max_tokens,
                                   "seed": request.seed}
        if request.stop:
            payload["stop"] = list(request.stop)
        if request.json_schema is not None:
            payload["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "answer", "schema": request.schema,
                                                          "strict": True}}
        data = self._post("/chat/completions", payload)
        self._note_usage(data.get("usage") if isinstance(data, dict) else None)
        try:
            return data["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.base_url} returned an unexpected answer: {str(data)[:300]}") from exc

    def _complete_batch(self, requests: list[ChatRequest], *, progress: bool | str = False) -> list[str]:
        return _map_concurrently(self._complete, requests, self.max_workers, progress)

    def logprobs(self, prefix: str, continuation: str) -> list[float]:
        full = prefix + continuation
        data = self._post("/completions", {"model": self.model, "prompt": full, "max_tokens": 1,
                                           "temperature": 0.0, "echo": True, "logprobs": 1})
        try:
            lp = data["choices"][0]["logprobs"]
            offsets, values = lp["text_offset"], lp["token_logprobs"]
        except (KeyError, IndexError, TypeError) as exc:
            raise LLMError(f"{self.base_url} does not return prompt log-probabilities (/completions with "
                           "echo and logprobs); use a vLLM server or a local model for this") from exc
        out = [float(v) for off, v in zip(offsets, values) if len(prefix) <= off < len(full) and v is not None]
        if not out:
            raise LLMError(f"{self.base_url} returned no log-probabilities for the continuation")
        return out

    def close(self) -> None:
        self._client.close()


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
        self._converted_key = _key_of(identity) if identity else None
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
        return _template_text(self.tokenizer, messages)

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
