"""Chat requests answered on an executor's workers, with the answer cache kept by the run.

On a distributed executor (``--executor ray``), :meth:`audit.models.resources.Resources.llm`
returns ``CachedLLM(RemoteLLM(...))``: the run's process looks every request up in the answer
cache, sends only the misses to the workers (rounds of :data:`ROUND` requests, each round one
executor stage, groups of :data:`GROUP` requests per worker call), and stores the answers of each
round as it comes back. A batch of fewer than :data:`MIN_REMOTE` misses (a component asking one
question at a time) is answered by the run's own backend, also there for the model's tokeniser
and context size (a transformers model loads only on first use). Each worker loads the model once
(``setup``) from the same spec, with no cache of its own, and sends its group through the
backend's own bounded concurrency (the OpenAI-compatible client's ``max_workers`` threads; the
embedded llama.cpp answers one request at a time, so its answers do not depend on their
neighbours).

Why the cache stays with the run rather than a shared sqlite path on the workers or per-worker
caches merged at the end: one writer needs no shared filesystem (sqlite's WAL needs shared memory,
so it is not safe on NFS across nodes), keys stay exactly the local run's (the same file serves a
local and a Ray run), and an interrupted run keeps every finished round; a merge at the end would
lose everything a crashed run had asked.
"""

from __future__ import annotations

from typing import Any

from audit.models.llm import LLM, ChatRequest

#: Cache misses sent to the workers per round (one executor stage; answers are stored after each).
ROUND = 1024
#: Requests per worker call.
GROUP = 16
#: Fewer requests than this are answered here by the run's own backend (same model, same answers):
#: a stage on the cluster costs seconds to start, more than a handful of requests.
MIN_REMOTE = 2 * GROUP


class LLMWorker:
    """An executor's worker for chat requests: the model named by ``spec`` loaded once (or the
    picklable ``llm`` given, e.g. a scripted one in tests), then ``group -> answers``."""

    def __init__(self, spec: str | None = None, llm: LLM | None = None):
        self.spec = spec
        self.llm = llm

    def __getstate__(self) -> dict[str, Any]:
        return {"spec": self.spec, "llm": self.llm if self.spec is None else None}

    def setup(self) -> None:
        if self.llm is None:
            from audit.models.specs import load_llm

            self.llm = load_llm(self.spec, cache=False)

    def __call__(self, requests: list[ChatRequest]) -> list[str]:
        self.setup()
        return list(self.llm.complete_batch(list(requests)))


class RemoteLLM(LLM):
    """``local``'s identity, tokeniser and context size; its chat answered by ``worker`` on
    ``executor`` (see the module doc). Log-probabilities are computed locally."""

    def __init__(self, local: LLM, executor: Any, worker: LLMWorker, *, group: int = GROUP):
        self.local = local
        self.executor = executor
        self.worker = worker
        self.group = group
        self.identity = local.identity

    @property
    def cache_identity(self) -> str:
        return self.local.cache_identity

    @property
    def in_process(self) -> tuple[Any, Any] | None:  # type: ignore[override]
        """The run's own copy of the model's (the workers load theirs)."""
        return self.local.in_process

    @property
    def runs_in_process(self) -> bool:  # type: ignore[override]
        return self.local.runs_in_process

    @property
    def worker_spec(self) -> str | None:  # type: ignore[override]
        return self.worker.spec

    @property
    def context_size(self) -> int:  # type: ignore[override]
        return self.local.context_size

    @property
    def supports_schema(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.local, "supports_schema", False))

    def keyed(self, request: ChatRequest) -> ChatRequest:
        return self.local.keyed(request)

    def count_tokens(self, text: str) -> int:
        return self.local.count_tokens(text)

    def chat_text(self, messages) -> str | None:
        return self.local.chat_text(messages)

    @property
    def usage(self) -> dict[str, int]:  # type: ignore[override]
        """Tokens spent by the local backend (the workers' own are not counted here)."""
        return self.local.usage

    def _complete(self, request: ChatRequest) -> str:
        return self._complete_batch([request])[0]

    def _complete_batch(self, requests: list[ChatRequest], *, progress: bool | str = False) -> list[str]:
        if len(requests) < MIN_REMOTE:  # a caller asking one request at a time: not worth a stage
            return list(self.local.complete_batch(requests))
        return [str(a) for a in self.executor.map(self.worker, requests, group=self.group, label="LLM requests")]

    def logprobs(self, prefix: str, continuation: str) -> list[float]:
        return self.local.logprobs(prefix, continuation)

    def answer_logprobs(self, prefix: str, answers, *, shared=()) -> list[float]:
        return self.local.answer_logprobs(prefix, answers, shared=shared)

    def scoring_key(self, prefix: str, answers, shared) -> dict[str, Any]:
        return self.local.scoring_key(prefix, answers, shared)

    def close(self) -> None:
        self.local.close()
