"""The llama.cpp backend: a GGUF file served in process by ``xllamacpp``, several slots at once,
shared prompt prefixes reused, and log-probabilities of fixed answers."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from audit.core import config
from audit.models.llm import LLM, ChatRequest, LLMError, check_cuts
from audit.models.backends import key_of, map_concurrently, template_text, gguf_tokenizer, tokenizers_root

log = logging.getLogger(__name__)


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
    Each slot gets the full ``n_ctx`` tokens (``context_size``). ``poll``: how busily idle worker
    threads wait for work (0-100; 0, the default here, sleeps; it changes no number, only time).
    ``json_schema`` is enforced
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
                 deterministic: bool = True, reuse_prefix: bool = True, source: str = "", poll: int = 0):
        import xllamacpp as xlc

        self.model_path = str(model_path)
        self.identity = identity or f"llamacpp:{Path(model_path).name}"
        self.context_size = int(n_ctx)
        self.deterministic = bool(deterministic)
        self.reuse_prefix = bool(reuse_prefix)
        # one slot: no request is ever decoded beside another (see the class doc)
        self.n_parallel = 1 if self.deterministic else max(1, int(n_parallel))
        threads = n_threads or config.threads()
        params = xlc.CommonParams()
        params.model.path = self.model_path
        params.n_parallel = self.n_parallel
        params.n_ctx = self.context_size * self.n_parallel  # llama.cpp splits n_ctx across slots
        params.cpuparams.n_threads = threads
        params.cpuparams_batch.n_threads = threads
        # idle worker threads sleep (llama.cpp's default, 50, has them spin for new work): on a few
        # shared cores a spinning thread takes the core the next step needs (benchmarks/README.md,
        # the judge's LLM cost: a one-token step 0.7-3 s with 50, 0.08 s with 0, under load 3)
        params.cpuparams.poll = params.cpuparams_batch.poll = int(poll)
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
        self._tok_dir = tokenizers_root() / key_of(self.identity)
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
        if not all(full.startswith(text) for text in texts):
            log.info("llama.cpp: a shared prefix is not where the whole prompt starts; evaluated whole")
            return None
        return self._levels(full, texts)

    def _levels(self, full: str, texts: list[str]) -> tuple[list[int], list[tuple[int, ...]], int] | None:
        """``full`` as token ids, each of ``texts`` (its prefixes, shortest first) as the tokens
        the ids begin with, and a token that none of them is followed by; ``None`` where a
        prefix tokenizes otherwise alone than as the start of the whole."""
        tok = self.tokenizer
        ids = tok(full, add_special_tokens=False)["input_ids"]
        levels: list[tuple[int, ...]] = []
        for text in texts:
            level = tuple(tok(text, add_special_tokens=False)["input_ids"])
            if tuple(ids[:len(level)]) != level or len(level) >= len(ids) or (levels and len(level) <= len(levels[-1])):
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
        body = {k: v for k, v in self._request_body(request).items() if k != "messages"}
        body.update(n_predict=request.max_tokens, **extra)
        return self._run_shared(body, ids, levels, filler)

    def _run_shared(self, body: dict[str, Any], ids: list[int], levels: list[tuple[int, ...]],
                    filler: int) -> tuple[dict[str, Any], int]:
        """The answer to ``body`` with the prompt ``ids``, its shared ``levels`` evaluated
        canonically (see :meth:`_complete_shared`), and the prompt tokens the prefix calls
        evaluated. Called with :attr:`_slot_lock` held."""
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
            return self._call(self._server.handle_completions, {**body, "prompt": ids, "cache_prompt": True}), evaluated
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
        return map_concurrently(self._complete, requests, self.n_parallel, progress)

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
        return template_text(self.tokenizer, messages)

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
        timings = result.get("timings") if isinstance(result, dict) else None
        ran = timings.get("prompt_n") if isinstance(timings, dict) else None
        usage = result.get("usage") if isinstance(result, dict) else None
        self._note_usage({**(usage if isinstance(usage, dict) else {}), "prompt_tokens": len(prompt_ids),
                          "prompt_evaluated": ran if isinstance(ran, int) else len(prompt_ids)})
        got = [c["id"] for c in content]
        if got != cont_ids:
            raise LLMError(f"llama.cpp did not follow the forced continuation ({got} != {cont_ids})")
        return [float(c["logprob"]) for c in content]

    # fixed answers, one forward pass ---------------------------------------------------
    #: How many of the most likely next tokens a scoring call reports: the other fixed answers
    #: are read from them (a second call scores any that is not among them).
    SCORE_TOP = 20

    def scoring_key(self, prefix: str, answers, shared) -> dict[str, Any]:
        """Values scored with shared parts reused canonically differ in the last bits from a
        whole-prompt evaluation: keyed with the parts where they are reused."""
        key = super().scoring_key(prefix, answers, shared)
        return {**key, "shared": [int(k) for k in shared]} if shared and self._canonical else key

    @property
    def _canonical(self) -> bool:
        """Whether prompts are evaluated in one fixed way (one slot, shared parts reused so)."""
        return self.deterministic and self.reuse_prefix

    def answer_logprobs(self, prefix: str, answers, *, shared=()) -> list[float]:
        """Every answer that is one token after ``prefix`` is scored from one forward pass (the
        first answer forced by a grammar, the others read from the ``n_probs`` most likely tokens
        of the same logits); the shared parts are evaluated canonically, so a passage is
        evaluated once for all the questions about it, and a value is the same whatever ran
        before. Answers of several tokens: :meth:`logprobs` each."""
        cuts = check_cuts(prefix, shared)
        tok = self.tokenizer
        ids = tok(prefix, add_special_tokens=False)["input_ids"]
        tokens = []
        for answer in answers:
            joint = tok(prefix + answer, add_special_tokens=False)["input_ids"]
            if not ids or len(joint) != len(ids) + 1 or joint[:len(ids)] != ids:
                return super().answer_logprobs(prefix, answers, shared=shared)
            tokens.append(joint[-1])
        plan = self._levels(prefix, [prefix[:k] for k in cuts]) if cuts and self._canonical else None
        found: dict[int, float] = {}
        for token in tokens:
            if token not in found:
                found.update(self._score_call(ids, plan, token))
        return [found[t] for t in tokens]

    def _score_call(self, ids: list[int], plan, token: int) -> dict[int, float]:
        """Log-probabilities of ``token`` (forced) and of the most likely tokens after ``ids``,
        from one forward pass: shared levels canonically when ``plan`` gives them, else the
        whole prompt from position 0 (reusing the slot where answers need not be canonical)."""
        body = {"n_predict": 1, "n_probs": self.SCORE_TOP, "grammar": f"root ::= <[{token}]>", "temperature": 0.0,
                "post_sampling_probs": False}
        with self._slot_lock:
            if plan is not None:
                result, evaluated = self._run_shared(body, ids, plan[1], plan[2])
            else:
                self._held = ()  # the slot is about to hold something else
                result = self._call(self._server.handle_completions,
                                    {**body, "prompt": ids, "cache_prompt": not self.deterministic})
                evaluated = 0
        timings = result.get("timings") if isinstance(result, dict) else None
        ran = timings.get("prompt_n") if isinstance(timings, dict) else None
        usage = result.get("usage") if isinstance(result, dict) else None
        self._note_usage({**(usage if isinstance(usage, dict) else {}), "prompt_tokens": len(ids),
                          "prompt_evaluated": evaluated + (ran if isinstance(ran, int) else len(ids))})
        try:
            (content,) = result["choices"][0]["logprobs"]["content"]
            values = {int(c["id"]): float(c["logprob"]) for c in content.get("top_logprobs", ())}
            values[int(content["id"])] = float(content["logprob"])
        except (KeyError, IndexError, TypeError, ValueError) as exc:
            raise LLMError(f"llama.cpp returned no log-probabilities: {str(result)[:300]}") from exc
        if int(content["id"]) != token:
            raise LLMError(f"llama.cpp did not follow the forced answer ({content['id']} != {token})")
        return values

    def close(self) -> None:
        self._server = None  # the C++ server shuts down when the object is collected
