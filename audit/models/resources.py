"""The models of one run, loaded once and shared by every component, then released.

The runner builds one :class:`Resources` per audit, hands it to every attack, metric and
sanitizer with :meth:`~audit.core.interfaces.Component.use` and closes it at the end::

    with Resources(seed=spec.seed, progress=True) as res:
        attack = registry.create("attack", "span_guess", llm="qwen2.5-coder-0.5b").use(res)
        ...

A component asks for what it needs when it needs it:

* :meth:`Resources.llm` — one loaded LLM per spec (``None`` = the default model), wrapped
  in the sqlite answer cache exactly as :func:`audit.models.specs.load_llm` does; an
  :class:`~audit.models.llm.LLM` object passes through untouched (and is never closed here);
* :meth:`Resources.embedder` — one sentence embedder per (spec, vector cache on/off, precision); an
  object with ``encode`` passes through;
* :meth:`Resources.spacy` — one :class:`~audit.models.nlp.Spacy` pipeline per
  (model, disabled pipes, enabled pipes);
* :meth:`Resources.shared` — any other state several components of the run share (the
  utility metrics' context), made once per key;
* :attr:`Resources.seed` and :attr:`Resources.progress` — the run's seed and whether
  model loads are announced;
* :attr:`Resources.executor` — where per-document work runs
  (:class:`~audit.runtime.executor.LocalExecutor` by default; the runner gives a Ray executor with
  ``--executor ray``). Embedders made here send their batches through it.

A component used on its own (tests, benchmarks, a notebook) gets a private set on first
need from :func:`resources_of`, which its ``close()`` releases; a set given with ``use()``
belongs to the caller and is never closed by the component.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Hashable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar

from audit.runtime.executor import Executor, LocalExecutor
from audit.models.nlp import DEFAULT_SPACY_MODEL, Spacy

if TYPE_CHECKING:
    from audit.models.llm import LLM

T = TypeVar("T")

#: Counters of the answer cache, summed by :meth:`Resources.llm_stats`.
LLM_STATS = ("hits", "misses", "backend_calls")


class Resources:
    """Models and shared state of one run (see the module doc).

    ``seed``: the run's seed. ``progress``: announce model loads on stderr.
    ``llm_cache_path``: the answer cache file (default ``config.subdir("cache")/llm.sqlite``).
    ``executor``: where per-document work runs (default: this process); the caller owns it.
    Thread-safe; closing twice is harmless, and a closed set loads again if asked.
    """

    def __init__(self, *, seed: int = 0, progress: bool = False,
                 llm_cache_path: str | os.PathLike[str] | None = None, executor: Executor | None = None):
        self.seed = seed
        self.executor = executor or LocalExecutor()
        self.progress = progress
        self.llm_cache_path = llm_cache_path
        self._llms: dict[tuple[str, bool], LLM] = {}
        self._embedders: dict[tuple[str, Any, str], Any] = {}
        self._spacy: dict[tuple[str, tuple[str, ...], tuple[str, ...]], Spacy] = {}
        self._shared: dict[Hashable, Any] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ LLMs
    def llm(self, spec: str | LLM | None = None, *, cache: bool = True, what: str = "the LLM") -> LLM:
        """The LLM named by ``spec`` (an ``--llm`` value; ``None`` = the default model), loaded on
        first request and wrapped in the answer cache (``cache=False``: a pass-through wrapper
        that touches no file). An LLM object is returned as it is. ``what`` names the model in
        the progress line ("the information-content scorer")."""
        from audit.models.llm import LLM

        if isinstance(spec, LLM):
            return spec
        key = (spec or "default", bool(cache))
        with self._lock:
            found = self._llms.get(key)
            if found is None:
                other = self._llms.get((key[0], not key[1]))
                backend = getattr(other, "backend", None)
                if backend is not None:  # same model, other cache setting: share the loaded backend
                    from audit.models.answer_cache import CachedLLM
                    from audit.models.remote import ROUND, RemoteLLM

                    found = CachedLLM(backend, self._cache_path(), enabled=bool(cache),
                                      **({"chunk_size": ROUND} if isinstance(backend, RemoteLLM) else {}))
                else:
                    from audit.models import specs

                    shown = {None: "(default)", "scorer": "(default scorer: the embedded 0.5B model through "
                                                          "transformers)"}.get(spec, spec)
                    found = specs.load_llm(spec, cache=bool(cache), cache_path=self.llm_cache_path,
                                           announce=f"{what} {shown}" if self.progress else None)
                    if self.executor.distributed:
                        found = self._remote(found, spec)
                self._llms[key] = found
            return found

    def _remote(self, cached: LLM, spec: str | None) -> LLM:
        """``cached`` (a CachedLLM) with its chat requests answered on the executor's workers,
        each loading ``spec`` once; the answer cache stays here (:mod:`audit.models.remote`)."""
        from audit.models.answer_cache import CachedLLM
        from audit.models.remote import ROUND, LLMWorker, RemoteLLM

        if not isinstance(cached, CachedLLM):
            return cached
        if cached.store is not None:
            cached.store.close()
        remote = RemoteLLM(cached.backend, self.executor, LLMWorker(spec))
        return CachedLLM(remote, cached.path, enabled=cached.enabled, chunk_size=ROUND)

    def _cache_path(self) -> Path:
        if self.llm_cache_path:
            return Path(self.llm_cache_path)
        from audit.core import config

        return config.subdir("cache") / "llm.sqlite"

    def llm_usage(self, *extra: Any) -> dict[str, int]:
        """Tokens the backends of the LLMs loaded here (and of the LLM objects ``extra``) have
        spent (prompt and completion; answers from the cache cost none), each backend once."""
        with self._lock:
            llms = list(self._llms.values())
        total = {"prompt_tokens": 0, "completion_tokens": 0}
        seen: set[int] = set()
        for llm in [*llms, *extra]:
            backend = getattr(llm, "backend", None) or llm
            usage = getattr(llm, "usage", None)
            if id(backend) in seen or not isinstance(usage, dict):
                continue
            seen.add(id(backend))
            for k in total:
                total[k] += int(usage.get(k, 0))
        return total

    def llm_stats(self) -> dict[str, int]:
        """Answer-cache counters summed over the LLMs loaded here (hits, misses, backend calls)."""
        with self._lock:
            llms = list(self._llms.values())
        total = dict.fromkeys(LLM_STATS, 0)
        for llm in llms:
            stats = getattr(llm, "stats", None)
            if isinstance(stats, dict):
                for k in LLM_STATS:
                    total[k] += int(stats.get(k, 0))
        return total

    # ------------------------------------------------------------------ embeddings
    def embedder(self, spec: Any = None, *, cache: bool | str | os.PathLike[str] = False,
                 precision: str = "fp32") -> Any:
        """The sentence embedder (:class:`audit.models.embed.Embedder`) for ``spec`` (``None`` /
        ``"minilm"`` = the embedded MiniLM, or a local folder), with the on-disk vector cache when
        ``cache``, computing in ``precision`` (``fp32``, ``bf16``, ``auto``). An object that is not
        a spec (anything with ``encode``) is returned as it is."""
        if spec is not None and not isinstance(spec, str):
            return spec
        key = (spec or "minilm", cache if isinstance(cache, bool) else str(cache), precision)
        with self._lock:
            found = self._embedders.get(key)
            if found is None:
                from audit.runtime.progress import stage
                from audit.models import embed

                with stage(f"loading the embedder {spec or '(default)'}", enabled=self.progress):
                    remote = {"executor": self.executor} if self.executor.distributed else {}
                    found = embed.Embedder(spec, cache=cache, precision=precision, **remote)
                self._embedders[key] = found
            return found

    # ------------------------------------------------------------------ spaCy
    def spacy(self, model: str = DEFAULT_SPACY_MODEL, disable: Iterable[str] = (),
              enable: Iterable[str] = ()) -> Spacy:
        """The spaCy pipeline ``model`` with the pipes ``disable`` left out and the pipes
        ``enable`` switched on (e.g. ``"senter"``); one per combination, loaded on first use."""
        key = (model, tuple(disable), tuple(enable))
        with self._lock:
            found = self._spacy.get(key)
            if found is None:
                found = self._spacy[key] = Spacy(model, disable=key[1], enable=key[2])
            return found

    # ------------------------------------------------------------------ anything else
    def shared(self, key: Hashable, make: Callable[[], T]) -> T:
        """The run's object for ``key``, made by ``make()`` on first request. An object with a
        ``close()`` method is closed with the resources."""
        with self._lock:
            if key not in self._shared:
                self._shared[key] = make()
            return self._shared[key]

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        """Release everything loaded here (shared objects first, then models). Objects that were
        handed in (an LLM or embedder object given instead of a spec) are not touched."""
        with self._lock:
            shared, self._shared = list(self._shared.values()), {}
            llms, self._llms = list(self._llms.values()), {}
            self._embedders.clear()
            self._spacy.clear()
        for obj in reversed(shared):
            _close_quietly(obj)
        from audit.models.answer_cache import CachedLLM

        backends: list[Any] = []
        for llm in llms:
            if isinstance(llm, CachedLLM):  # its cache connection now, its (maybe shared) backend once
                if llm.store is not None:
                    _close_quietly(llm.store)
                if all(llm.backend is not b for b in backends):
                    backends.append(llm.backend)
            else:
                _close_quietly(llm)
        for backend in backends:
            _close_quietly(backend)

    def __enter__(self) -> Resources:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (f"Resources(seed={self.seed}, llms={[k[0] for k in self._llms]}, "
                f"embedders={[k[0] for k in self._embedders]}, spacy={[k[0] for k in self._spacy]})")


def resources_of(component: Any) -> Resources:
    """The resources ``component`` was given with ``use()``; for a component used on its own, a
    private set made now (seeded with its ``seed``, announcing loads when its ``progress`` is
    on) that its ``close()`` releases."""
    res = getattr(component, "resources", None)
    if res is None:
        res = Resources(seed=getattr(component, "seed", 0) or 0, progress=bool(getattr(component, "progress", False)))
        own = getattr(component, "own", None)
        if callable(own):  # a Component: its close() releases what it owns
            own(res)
        else:  # any other object that asks: it keeps the set for as long as it lives
            component.resources = res
    return res


class UsesLLM:
    """For a component with LLM parameters (``llm``; the claim linker's ``judge_llm`` too: each a
    spec or an LLM object) and, optionally, a ``cache`` one: :meth:`_get_llm` gets the LLM a
    parameter names from the component's resources once and keeps it in the one memo ``_llms``
    (by parameter), which :meth:`close` forgets (the resources own the models)."""

    #: What the LLM does for the component, in the messages about loading it.
    llm_role: ClassVar[str] = "the LLM"

    def _get_llm(self, param: str = "llm", *, what: str | None = None) -> LLM:
        """The LLM the parameter ``param`` names, asked of the resources on first use; ``what``:
        what it does, for the messages about loading it (default :attr:`llm_role`)."""
        memo: dict[str, LLM] = self.__dict__.setdefault("_llms", {})
        if param not in memo:
            memo[param] = resources_of(self).llm(getattr(self, param), cache=getattr(self, "cache", True),
                                                 what=what or self.llm_role)
        return memo[param]

    def close(self) -> None:
        """Forget the LLMs (the resources close them), then what the component's other bases hold."""
        self.__dict__.pop("_llms", None)
        super().close()  # type: ignore[misc]


def _close_quietly(obj: Any) -> None:
    close = getattr(obj, "close", None)
    if callable(close):
        try:
            close()
        except Exception:  # releasing is best effort  # noqa: BLE001
            pass
