"""The LLM layer: one small interface, several backends, one disk cache.

Every attack and sanitizer that needs a language model talks to :class:`LLM`:

* :meth:`LLM.complete` — a chat completion (messages, temperature, max_tokens,
  seed, stop, optional JSON schema for structured output);
* :meth:`LLM.complete_batch` — the same for many independent requests (server
  backends send them concurrently; llama.cpp answers them one at a time unless told
  otherwise, since its batched answers depend on their neighbours);
* :meth:`LLM.logprobs` — log-probabilities of the tokens of a continuation given
  a prefix (information content of terms);
* :meth:`LLM.answer_logprobs` — the log-probabilities of a few fixed answers to one prompt (a
  yes/no judge), in one forward pass where the backend can, shared prompt parts reused.

Backends: in-process llama.cpp (``xllamacpp``; the embedded default), any
OpenAI-compatible server, local transformers (:mod:`audit.models.backends`); the
sqlite answer cache :class:`CachedLLM` (:mod:`audit.models.answer_cache`); build one from an
``--llm`` spec with :func:`audit.models.specs.load_llm`. :class:`ScriptedLLM` is a
deterministic stand-in for unit tests of parsing logic.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from audit.core.errors import AnonauditError

Message = Mapping[str, str]


def extract_json_list(text: str) -> list[Any] | None:
    """The JSON list in an LLM answer, or None when there is none.

    Small models wrap their JSON in chatter ("Here you go: [...]") or in an object
    (``{"guesses": [...]}``): the whole answer is tried first, then the outermost
    ``[...]`` and ``{...}`` spans; an object yields its first list value. An empty list
    is returned as ``[]`` (the model said "nothing"), not as None."""
    candidates = [text.strip()]
    for open_, close in ("[]", "{}"):
        start, end = text.find(open_), text.rfind(close)
        if 0 <= start < end:
            candidates.append(text[start:end + 1])
    for cand in candidates:
        try:
            data = json.loads(cand)
        except ValueError:
            continue
        if isinstance(data, dict):
            data = next((v for v in data.values() if isinstance(v, list)), None)
        if isinstance(data, list):
            return data
    return None


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion request; hashable and JSON-serialisable (the cache key)."""

    messages: tuple[tuple[str, str], ...]
    temperature: float = 0.0
    max_tokens: int = 256
    seed: int = 0
    stop: tuple[str, ...] = ()
    json_schema: str | None = None  # canonical JSON text of the schema, if any
    #: Where the prompt's shared prefixes end, in messages (increasing): ``(3, 4)`` says that
    #: many requests begin with the same first 3 messages, and some of those also with the same
    #: 4th. A backend may evaluate each prefix once and reuse it (:class:`~audit.models.backends.
    #: LlamaCppLLM` does, deterministically); put what requests share first, what differs last.
    shared: tuple[int, ...] = ()

    @classmethod
    def make(
        cls,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int = 0,
        stop: Sequence[str] | None = None,
        json_schema: Mapping[str, Any] | None = None,
        shared: Sequence[int] = (),
    ) -> ChatRequest:
        msgs = []
        for m in messages:
            if "role" not in m or "content" not in m:
                raise ValueError(f"a message needs 'role' and 'content': {m!r}")
            msgs.append((str(m["role"]), str(m["content"])))
        schema = None if json_schema is None else json.dumps(json_schema, sort_keys=True)
        cuts = tuple(int(k) for k in shared)
        if any(not 0 < k < len(msgs) for k in cuts) or list(cuts) != sorted(set(cuts)):
            raise ValueError(f"shared prefixes must be increasing message counts below {len(msgs)}: {cuts!r}")
        return cls(tuple(msgs), float(temperature), int(max_tokens), int(seed), tuple(stop or ()), schema, cuts)

    @property
    def message_dicts(self) -> list[dict[str, str]]:
        return [{"role": r, "content": c} for r, c in self.messages]

    @property
    def schema(self) -> dict[str, Any] | None:
        return None if self.json_schema is None else json.loads(self.json_schema)

    def to_dict(self) -> dict[str, Any]:
        return {
            "messages": self.message_dicts,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "seed": self.seed,
            "stop": list(self.stop),
            "json_schema": self.schema,
            # only when declared, so the keys of requests without shared prefixes stay as they were
            **({"shared": list(self.shared)} if self.shared else {}),
        }


#: ``prompt_tokens``: the prompts' length, as sent; ``prompt_evaluated``: prompt tokens the model
#: actually ran (less where a backend reused an evaluated prefix); ``completion_tokens``: generated.
_USAGE_KEYS = ("prompt_tokens", "prompt_evaluated", "completion_tokens")
_USAGE_LOCK = threading.Lock()


class LLMError(AnonauditError):
    """The model could not answer (server down, context too long, ...)."""


def check_cuts(prefix: str, shared: Sequence[int]) -> tuple[int, ...]:
    """``shared`` as a tuple, checked: increasing offsets strictly inside ``prefix``."""
    cuts = tuple(int(k) for k in shared)
    if any(not 0 < k < len(prefix) for k in cuts) or list(cuts) != sorted(set(cuts)):
        raise ValueError(f"shared prefixes must be increasing offsets inside the prompt: {cuts!r}")
    return cuts


class LLM(ABC):
    """A chat model. Subclasses implement :meth:`_complete` (and optionally
    :meth:`_complete_batch` and :meth:`logprobs`)."""

    #: Identity used in cache keys and provenance: backend + model checksum or name.
    identity: str = ""
    #: Context window in tokens (prompt + answer), when known.
    context_size: int = 4096
    #: Whether ``json_schema`` requests are enforced by the backend (grammar / guided decoding).
    supports_schema: bool = False

    @property
    def cache_identity(self) -> str:
        """What the answer cache keys chat answers on: :attr:`identity`, plus any backend
        setting that changes answers (llama.cpp's batched decoding), so answers made one way
        are never served to a run that makes them the other way."""
        return self.identity

    def keyed(self, request: ChatRequest) -> ChatRequest:
        """The request as it determines this backend's answer, for the cache key: its declared
        shared prefixes only where the backend's answers depend on them (llama.cpp's reuse);
        elsewhere the same request without them, so both forms share one cache entry."""
        return dataclasses.replace(request, shared=()) if request.shared else request

    def complete(
        self,
        messages: Sequence[Message],
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        seed: int = 0,
        stop: Sequence[str] | None = None,
        json_schema: Mapping[str, Any] | None = None,
    ) -> str:
        req = ChatRequest.make(messages, temperature=temperature, max_tokens=max_tokens, seed=seed,
                               stop=stop, json_schema=json_schema)
        return self.complete_batch([req])[0]

    def complete_batch(self, requests: Sequence[ChatRequest], *, progress: bool | str = False) -> list[str]:
        """Answer many independent requests; order of answers = order of requests. ``progress``:
        show a bar, named by it when it is a string (what the requests are for)."""
        return self._complete_batch(list(requests), progress=progress)

    def _complete_batch(self, requests: list[ChatRequest], *, progress: bool | str = False) -> list[str]:
        from audit.runtime.progress import bar as progress_bar

        return [self._complete(r) for r in progress_bar(requests, enabled=bool(progress), desc=llm_desc(progress),
                                                        unit="req")]

    @abstractmethod
    def _complete(self, request: ChatRequest) -> str:
        """Answer one request (no cache)."""

    def logprobs(self, prefix: str, continuation: str) -> list[float]:
        """Natural-log probabilities of the tokens of ``continuation`` after ``prefix``."""
        raise LLMError(f"{self.identity or type(self).__name__} cannot compute log-probabilities")

    def answer_logprobs(self, prefix: str, answers: Sequence[str], *, shared: Sequence[int] = ()) -> list[float]:
        """The log-probability of each of the fixed ``answers`` after ``prefix`` (its tokens summed):
        a closed question scored without generating text. ``shared``: offsets in ``prefix``
        (increasing) where parts that other questions begin with end (the instructions, then a
        passage), so that a backend may evaluate each once and reuse it (llama.cpp does, in one
        fixed way: :class:`~audit.models.llamacpp.LlamaCppLLM`); put what questions share first.
        This default asks :meth:`logprobs` for each answer."""
        check_cuts(prefix, shared)
        return [sum(self.logprobs(prefix, a)) for a in answers]

    def scoring_key(self, prefix: str, answers: Sequence[str], shared: Sequence[int]) -> dict[str, Any]:
        """What determines :meth:`answer_logprobs`' values, for the answer cache's key: the prompt
        and the answers, and the shared parts only where their reuse changes the values."""
        return {"prefix": prefix, "answers": list(answers)}

    def chat_text(self, messages: Sequence[Message]) -> str | None:
        """The text a chat becomes for this model (its own chat template, the assistant's turn
        opened), so that :meth:`logprobs` can score fixed answers to it; ``None`` where the
        backend does not know its template (a server): callers then write a plain-text prompt."""
        return None

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (a rough estimate unless the backend knows better)."""
        return max(1, len(text) // 4)

    @property
    def in_process(self) -> tuple[Any, Any] | None:
        """``(model, tokenizer)`` where this is a transformers-style model in this process (one
        forward pass scores a whole window: :class:`~audit.metrics.ic.CausalIC`), else None.
        A wrapper (the answer cache, a cluster's remote model) answers for what it wraps."""
        model = getattr(self, "model", None)
        if model is None or not hasattr(model, "forward"):
            return None
        tok = getattr(self, "tokenizer", None)
        return (model, tok) if callable(tok) else None

    @property
    def runs_in_process(self) -> bool:
        """Whether :attr:`in_process` gives a model, known without loading it (a backend that
        loads its model on first use says so before): :class:`~audit.metrics.ic.CausalIC`
        chooses its one-pass scoring, and names it in its identity, from this."""
        return self.in_process is not None

    @property
    def worker_spec(self) -> str | None:
        """The spec a distributed executor's workers load this model from (the run's LLM on a
        cluster: :class:`~audit.models.remote.RemoteLLM`), else None."""
        return None

    @property
    def usage(self) -> dict[str, int]:
        """Tokens the backend reported so far (``prompt_tokens``, ``completion_tokens``):
        the machine-independent cost of the requests this object sent to a model."""
        return dict(self.__dict__.get("_usage") or dict.fromkeys(_USAGE_KEYS, 0))

    def _note_usage(self, usage: object) -> None:
        """Add one answer's OpenAI-style ``usage`` to :attr:`usage` (thread-safe). Without a
        ``prompt_evaluated`` count, the prompt tokens less those the server reports as cached."""
        if not isinstance(usage, Mapping):
            return
        if "prompt_evaluated" not in usage:
            details = usage.get("prompt_tokens_details")
            cached = details.get("cached_tokens") if isinstance(details, Mapping) else None
            prompt = usage.get("prompt_tokens")
            if isinstance(prompt, (int, float)):
                usage = {**usage, "prompt_evaluated": prompt - (cached if isinstance(cached, (int, float)) else 0)}
        with _USAGE_LOCK:
            total = self.__dict__.setdefault("_usage", dict.fromkeys(_USAGE_KEYS, 0))
            for key in _USAGE_KEYS:
                value = usage.get(key)
                total[key] += int(value) if isinstance(value, (int, float)) else 0

    def close(self) -> None:
        """Release resources (processes, sockets, model memory)."""

    def __enter__(self) -> LLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class ScriptedLLM(LLM):
    """A deterministic fake for unit tests: ``script`` maps a request to an answer.

    ``script`` may be a callable ``(ChatRequest) -> str`` or a list of answers
    returned in turn. ``calls`` records every request that reached it.
    """

    script: Callable[[ChatRequest], str] | list[str]
    identity: str = "scripted"
    calls: list[ChatRequest] = field(default_factory=list)

    def _complete(self, request: ChatRequest) -> str:
        self.calls.append(request)
        if callable(self.script):
            return self.script(request)
        if not self.script:
            raise LLMError("ScriptedLLM ran out of answers")
        return self.script.pop(0)


_LAZY = {
    "CachedLLM": "audit.models.answer_cache",
    "cache_key": "audit.models.answer_cache",
    "LlamaCppLLM": "audit.models.llamacpp",
    "OpenAILLM": "audit.models.server",
    "TransformersLLM": "audit.models.backends",
}


def __getattr__(name: str) -> Any:
    """The backends and the cache live in submodules (heavy imports stay lazy);
    ``audit.models.llm.CachedLLM`` etc. still work."""
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'audit.models.llm' has no attribute {name!r}")


def llm_desc(progress: bool | str) -> str:
    """The name of an LLM progress bar: what the requests are for, when the caller said it."""
    return f"LLM: {progress}" if isinstance(progress, str) and progress else "LLM"
