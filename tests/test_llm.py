"""LLM layer without a real model: the sqlite cache and the OpenAI-compatible backend."""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from audit.metrics.terms import Term
from audit.models.llm import ChatRequest, LLMError, ScriptedLLM
from audit.models.server import OpenAILLM
from audit.models.answer_cache import AnswerStore, CachedLLM, cache_key

MSG = [{"role": "user", "content": "hello"}]


def echo(req: ChatRequest) -> str:
    return f"{req.messages[-1][1]}|t={req.temperature}|s={req.seed}|n={req.max_tokens}"


def cached(tmp_path, script=echo, enabled=True, identity="scripted:a"):
    backend = ScriptedLLM(script, identity=identity)
    return backend, CachedLLM(backend, tmp_path / "c.sqlite", enabled=enabled)


def test_hit_and_miss(tmp_path):
    backend, llm = cached(tmp_path)
    first = llm.complete(MSG)
    assert llm.complete(MSG) == first
    assert len(backend.calls) == 1
    assert llm.stats == {"hits": 1, "misses": 1, "backend_calls": 1}


def test_persistent_across_instances(tmp_path):
    _, llm = cached(tmp_path)
    answer = llm.complete(MSG, temperature=0.7, seed=3)  # sampled but seeded: still cached
    backend2, llm2 = cached(tmp_path, script=lambda r: "DIFFERENT")
    assert llm2.complete(MSG, temperature=0.7, seed=3) == answer
    assert backend2.calls == [] and llm2.stats["backend_calls"] == 0


@pytest.mark.parametrize("change", [
    dict(temperature=0.5), dict(max_tokens=9), dict(seed=1), dict(stop=["\n"]),
    dict(json_schema={"type": "array"}), dict(messages=[{"role": "user", "content": "hello!"}]),
    dict(messages=[{"role": "system", "content": "x"}, *MSG]),
])
def test_key_changes_with_every_parameter(tmp_path, change):
    backend, llm = cached(tmp_path)
    llm.complete(MSG)
    kwargs = {"messages": MSG, **change}
    llm.complete(kwargs.pop("messages"), **kwargs)
    assert len(backend.calls) == 2


def test_key_changes_with_model_identity(tmp_path):
    _, a = cached(tmp_path, identity="llamacpp:m:sha256=aaa")
    b_backend, b = cached(tmp_path, identity="llamacpp:m:sha256=bbb")
    a.complete(MSG)
    b.complete(MSG)
    assert len(b_backend.calls) == 1
    req = ChatRequest.make(MSG).to_dict()
    assert cache_key("x", "chat", req) != cache_key("y", "chat", req)
    assert cache_key("x", "chat", req) != cache_key("x", "logprobs", req)


def test_batch_serves_hits_and_sends_only_misses_in_order(tmp_path):
    backend, llm = cached(tmp_path)
    reqs = [ChatRequest.make([{"role": "user", "content": f"q{i}"}]) for i in range(6)]
    llm.complete_batch([reqs[1], reqs[4]])
    backend.calls.clear()
    answers = llm.complete_batch([*reqs, reqs[0]])  # q0 twice: one backend call
    assert answers == [echo(r) for r in [*reqs, reqs[0]]]
    assert [r.messages[0][1] for r in backend.calls] == ["q0", "q2", "q3", "q5"]
    assert llm.stats == {"hits": 2, "misses": 7, "backend_calls": 6}  # 2+5 misses, q0 sent once


def test_no_cache_touches_no_file(tmp_path):
    backend, llm = cached(tmp_path, enabled=False)
    llm.complete(MSG)
    llm.complete(MSG)
    assert len(backend.calls) == 2 and not (tmp_path / "c.sqlite").exists()
    assert llm.stats == {"hits": 0, "misses": 2, "backend_calls": 2}


def test_failures_are_not_cached(tmp_path):
    answers = ["boom", "fine"]

    def flaky(req):
        a = answers.pop(0)
        if a == "boom":
            raise LLMError("server down")
        return a

    _, llm = cached(tmp_path, script=flaky)
    with pytest.raises(LLMError):
        llm.complete(MSG)
    assert llm.complete(MSG) == "fine"


def test_logprobs_cached(tmp_path):
    class Scorer(ScriptedLLM):
        n = 0

        def logprobs(self, prefix, continuation):
            self.n += 1
            return [-1.0] * len(continuation.split())

    backend = Scorer(echo, identity="s")
    llm = CachedLLM(backend, tmp_path / "c.sqlite")
    assert llm.logprobs("a", " b c") == [-1.0, -1.0]
    assert llm.logprobs("a", " b c") == [-1.0, -1.0] and backend.n == 1
    llm.logprobs("a ", "b c")  # same text, different split: a different question
    assert backend.n == 2


def test_threads_share_one_cache(tmp_path):
    backend, llm = cached(tmp_path, script=lambda r: (time.sleep(0.01), r.messages[0][1])[1])
    out: dict[int, str] = {}

    def work(i):
        out[i] = llm.complete([{"role": "user", "content": f"t{i % 5}"}])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(20)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert all(out[i] == f"t{i % 5}" for i in range(20))
    assert len(CachedLLM(backend, tmp_path / "c.sqlite").store) == 5


def _writer(args):
    path, start = args
    llm = CachedLLM(ScriptedLLM(echo, identity="p"), path)
    reqs = [ChatRequest.make([{"role": "user", "content": f"p{i}"}]) for i in range(start, start + 40)]
    return llm.complete_batch(reqs)


def test_concurrent_processes(tmp_path):
    path = str(tmp_path / "c.sqlite")
    with multiprocessing.get_context("spawn").Pool(2) as pool:
        pool.map(_writer, [(path, 0), (path, 20)])
    backend = ScriptedLLM(lambda r: "MISS", identity="p")
    llm = CachedLLM(backend, path)
    reqs = [ChatRequest.make([{"role": "user", "content": f"p{i}"}]) for i in range(60)]
    assert "MISS" not in llm.complete_batch(reqs) and backend.calls == []



def _open_store(path):
    store = AnswerStore(path)
    store.put_many({f"k{os.getpid()}": 1})
    return len(store)


def test_processes_creating_the_same_new_cache_at_once(tmp_path):
    # Switching a new file to WAL can fail with "database is locked" without sqlite waiting;
    # a parallel audit whose workers start together must not crash on it (CI caught it once).
    with multiprocessing.get_context("fork").Pool(6) as pool:
        for i in range(40):
            path = str(tmp_path / f"c{i}.sqlite")
            assert max(pool.map(_open_store, [path] * 6)) >= 1
            assert len(AnswerStore(path)) >= 1

# --------------------------------------------------------------------------- llama.cpp backend


class FakeLlamaServer:
    """Stands in for ``xllamacpp.Server`` and, like llama.cpp, is not batch-invariant: a prompt
    decoded while another request is being decoded (several slots), or evaluated on top of the
    KV cache of an earlier prompt (``cache_prompt``, llama.cpp's default), gets other logits
    than the same prompt alone on a fresh slot, which can change the answer. ``answer(body,
    disturbed)`` gives the answer; ``disturbed`` is True in either case. One slot serves one
    request at a time, as in llama.cpp."""

    def __init__(self, params):
        self.slots = params.n_parallel
        self._free = threading.Semaphore(self.slots)
        self._lock = threading.Lock()
        self._busy = 0
        self._last_prompt: str | None = None
        self.bodies: list[dict] = []

    @staticmethod
    def answer(body: dict, disturbed: bool) -> str:
        return body["messages"][-1]["content"] + (" (disturbed)" if disturbed else "")

    def handle_chat_completions(self, body: dict) -> dict:
        prompt = "".join(m["content"] for m in body["messages"])
        with self._free:
            with self._lock:
                self.bodies.append(body)
                self._busy += 1
                crowded = self._busy > 1
                reused = body.get("cache_prompt", True) and self._last_prompt is not None
                self._last_prompt = prompt
            time.sleep(0.02)  # decoding: neighbours sent from other threads overlap it
            with self._lock:
                crowded = crowded or self._busy > 1
                self._busy -= 1
        content = self.answer(body, crowded or reused)
        return {"choices": [{"message": {"role": "assistant", "content": content}}]}


@pytest.fixture
def fake_llama(monkeypatch):
    """LlamaCppLLM on :class:`FakeLlamaServer` (no model is loaded)."""
    xlc = pytest.importorskip("xllamacpp")
    monkeypatch.setattr(xlc, "Server", FakeLlamaServer)
    from audit.models.llamacpp import LlamaCppLLM

    def make(**kw):
        return LlamaCppLLM("/nonexistent/model.gguf", identity="llamacpp:fake", **kw)

    return make


def test_llamacpp_answers_do_not_depend_on_neighbours_or_on_the_cache(tmp_path, fake_llama):
    """Issue 13: the same requests gave other answers cold than from a warm cache, because the
    cached ones had been decoded beside other requests. Every answer must be the one the
    request gets alone on a fresh slot, whatever was sent with it or before it."""
    reqs = [ChatRequest.make([{"role": "system", "content": "Judge."},
                              {"role": "user", "content": f"fact {i}"}], seed=0) for i in range(8)]
    alone = [f"fact {i}" for i in range(8)]
    cold = CachedLLM(fake_llama(n_parallel=4), tmp_path / "cold.sqlite")
    assert cold.complete_batch(reqs) == alone
    assert cold.backend.n_parallel == 1 and cold.backend._server.slots == 1
    assert all(b["cache_prompt"] is False for b in cold.backend._server.bodies)
    # A warm cache filled by earlier runs with other neighbours, in another order.
    earlier = CachedLLM(fake_llama(n_parallel=4), tmp_path / "warm.sqlite")
    earlier.complete_batch(reqs[5:1:-1])
    earlier.complete_batch([reqs[7], reqs[0]])
    warm = CachedLLM(fake_llama(n_parallel=4), tmp_path / "warm.sqlite")
    assert warm.complete_batch(reqs) == alone
    assert warm.stats["hits"] == 6


def test_batched_llamacpp_answers_are_cached_apart(tmp_path, fake_llama):
    """deterministic=False decodes in several slots with prompt reuse: faster, but its answers
    depend on their neighbours, so a deterministic run never reads them from the cache."""
    reqs = [ChatRequest.make([{"role": "user", "content": f"q{i}"}]) for i in range(6)]
    batched = CachedLLM(fake_llama(n_parallel=4, deterministic=False), tmp_path / "c.sqlite")
    assert batched.backend._server.slots == 4
    assert any(a.endswith("(disturbed)") for a in batched.complete_batch(reqs))
    serial = CachedLLM(fake_llama(), tmp_path / "c.sqlite")
    assert serial.complete_batch(reqs) == [f"q{i}" for i in range(6)]
    assert serial.stats["hits"] == 0 and serial.identity == batched.identity == "llamacpp:fake"


class FakeKVServer(FakeLlamaServer):
    """One llama.cpp slot with its KV cache, for ``handle_completions`` on token ids: a prompt
    reuses the longest common prefix of the slot's tokens (all of it but the last token when
    the whole prompt is cached, as llama.cpp does) when ``cache_prompt``, and evaluates the
    rest from there. Like llama.cpp on a CPU, a token's numbers depend on where the evaluation
    it was part of started, so the answer is every prompt token with that start: two answers
    are equal only when their prompts were evaluated the same way."""

    def __init__(self, params):
        super().__init__(params)
        self.tokens: list[tuple[int, int]] = []  # (token, where its evaluation started)
        self.completions: list[dict] = []

    def handle_completions(self, body: dict) -> dict:
        self.completions.append(body)
        ids = list(body["prompt"])
        keep = 0
        if body.get("cache_prompt", True):
            while keep < min(len(ids), len(self.tokens)) and self.tokens[keep][0] == ids[keep]:
                keep += 1
            keep = min(keep, len(ids) - 1)
        self.tokens = self.tokens[:keep] + [(t, keep) for t in ids[keep:]]
        answer = "" if body.get("n_predict") == 0 else json.dumps(self.tokens)
        return {"choices": [{"text": answer}], "timings": {"prompt_n": len(ids) - keep, "cache_n": keep},
                "usage": {"prompt_tokens": len(ids), "completion_tokens": 1}}


class CharTokenizer:
    """A chat template (``<role>content|``) and one token per character."""

    eos_token_id, pad_token_id = 0, None

    def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=False):
        return "".join(f"<{m['role']}>{m['content']}|" for m in msgs) + ("<assistant>" if add_generation_prompt else "")

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}


@pytest.fixture
def kv_llama(monkeypatch):
    xlc = pytest.importorskip("xllamacpp")
    monkeypatch.setattr(xlc, "Server", FakeKVServer)
    from audit.models.llamacpp import LlamaCppLLM

    def make(**kw):
        llm = LlamaCppLLM("/nonexistent/model.gguf", identity="llamacpp:fake", **kw)
        llm._tok = CharTokenizer()
        return llm

    return make


def _guess_request(doc: str, question: str) -> ChatRequest:
    return ChatRequest.make([{"role": "system", "content": "Guess the hidden words."},
                             {"role": "user", "content": f"Document: {doc}"},
                             {"role": "user", "content": question}], shared=(1, 2))


def test_shared_prefixes_are_reused_and_answers_do_not_depend_on_the_order(kv_llama):
    """Issue 22: requests that share a document are answered with its prefix evaluated once, and
    every answer is the one the request gets alone on a fresh slot, in any order and after any
    other request: a resumed run, which sends fewer requests, gets the same answers."""
    reqs = [_guess_request(doc, f"What is [[{q}]]?") for doc in ("the court in Lyon", "a judge in Nice")
            for q in ("a city", "a country", "a person")]
    alone = []
    for req in reqs:
        llm = kv_llama()
        alone.append(llm.complete_batch([req])[0])
    llm = kv_llama()
    assert llm.complete_batch(reqs) == alone
    order = [4, 0, 5, 2, 1, 3]
    plain = ChatRequest.make([{"role": "user", "content": "an unrelated question"}])
    llm.complete_batch([plain])
    assert llm.complete_batch([reqs[i] for i in order]) == [alone[i] for i in order]
    assert llm.complete_batch([reqs[1], plain, reqs[1], reqs[1]]) == [alone[1], "an unrelated question", alone[1], alone[1]]
    # reuse: after the first request of a document, only its question is evaluated
    llm = kv_llama()
    llm.complete_batch(reqs[:3])
    tok = CharTokenizer()
    lengths = [len(tok.apply_chat_template(r.message_dicts, add_generation_prompt=True)) for r in reqs[:3]]
    questions = [n - len(tok.apply_chat_template(r.message_dicts[:2])) for n, r in zip(lengths, reqs)]
    assert llm.usage["prompt_tokens"] == sum(lengths)
    # the first: both prefixes and its question, each prefix with the one filler token; then,
    # per request, the filler that cuts the slot back to the document and the question
    assert llm.usage["prompt_evaluated"] == lengths[0] + 2 + sum(1 + q for q in questions[1:])


def test_shared_prefixes_need_a_template_that_renders_them_as_the_prompt_start(kv_llama):
    """A template that renders a partial chat otherwise (here: a different system line) gets the
    prompt evaluated whole through the chat endpoint, never a wrong reuse."""
    llm = kv_llama()

    class Odd(CharTokenizer):
        def apply_chat_template(self, msgs, tokenize=False, add_generation_prompt=False):
            head = "<sys>partial|" if not add_generation_prompt else "<sys>full|"
            return head + super().apply_chat_template(msgs, add_generation_prompt=add_generation_prompt)

    llm._tok = Odd()
    req = _guess_request("x", "y?")
    assert llm.complete_batch([req]) == ["y?"]  # FakeLlamaServer's chat answer: the last message
    assert llm._server.completions == []


def test_reuse_prefix_off_evaluates_whole_prompts_and_keys_answers_apart(kv_llama, tmp_path):
    req = _guess_request("the court in Lyon", "What is [[a city]]?")
    whole = ChatRequest.make(req.message_dicts)
    on, off = CachedLLM(kv_llama(), tmp_path / "c.sqlite"), CachedLLM(kv_llama(reuse_prefix=False), tmp_path / "c.sqlite")
    assert off.complete_batch([req]) == ["What is [[a city]]?"] and off.backend._server.completions == []
    # without reuse the answer is the whole prompt's, shared with the same request undeclared...
    assert off.complete_batch([whole]) == ["What is [[a city]]?"] and off.stats["hits"] == 1
    # ...and never served to a run that reuses the prefix, nor the other way round
    assert on.complete_batch([req]) != ["What is [[a city]]?"] and on.stats["hits"] == 0
    assert on.complete_batch([whole]) == ["What is [[a city]]?"] and on.stats["hits"] == 1
    assert "shared" not in whole.to_dict()  # the keys of requests that declare nothing stay as they were
    assert ScriptedLLM(echo).keyed(req) == whole
    with pytest.raises(ValueError, match="increasing"):
        ChatRequest.make(req.message_dicts, shared=(2, 1))
    with pytest.raises(ValueError, match="increasing"):
        ChatRequest.make(req.message_dicts, shared=(3,))


# --------------------------------------------------------------------------- OpenAI backend


class FakeServer:
    """An OpenAI-compatible server on 127.0.0.1 in a thread; ``plan`` scripts failures."""

    def __init__(self):
        self.requests: list[tuple[str, dict]] = []
        self.fail_first = 0
        self.status = 500
        self.delay = 0.0
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append((self.path, body, self.headers.get("Authorization")))
                if outer.fail_first > 0:
                    outer.fail_first -= 1
                    return self._send(outer.status, {"error": "busy"})
                time.sleep(outer.delay)
                if self.path.endswith("/chat/completions"):
                    text = "ANSWER:" + body["messages"][-1]["content"]
                    return self._send(200, {"choices": [{"message": {"role": "assistant", "content": text}}],
                                            "usage": {"prompt_tokens": 7, "completion_tokens": 3}})
                prompt = body["prompt"]  # echo + logprobs: one "token" per word
                offs, lps, pos = [], [], 0
                for i, w in enumerate(prompt.split(" ")):
                    offs.append(pos)
                    lps.append(None if i == 0 else -float(len(w)))
                    pos += len(w) + 1
                offs.append(len(prompt))
                lps.append(-0.5)  # the generated token (max_tokens=1) must be dropped
                return self._send(200, {"choices": [{"text": prompt, "logprobs": {
                    "text_offset": offs, "token_logprobs": lps}}]})

            def _send(self, code, payload):
                data = json.dumps(payload).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture
def server():
    s = FakeServer()
    yield s
    s.httpd.shutdown()


def test_openai_chat_schema_and_key(server, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_API_KEY", "sk-test")
    llm = OpenAILLM("tiny", server.url, backoff=0.01)
    schema = {"type": "array", "items": {"type": "string"}}
    assert llm.complete(MSG, json_schema=schema, seed=4, stop=["x"]) == "ANSWER:hello"
    path, body, auth = server.requests[-1]
    assert path == "/v1/chat/completions" and auth == "Bearer sk-test"
    assert body["response_format"]["json_schema"]["schema"] == schema
    assert (body["model"], body["seed"], body["stop"]) == ("tiny", 4, ["x"])


def test_tokens_spent_are_counted_and_cache_hits_cost_nothing(server, tmp_path):
    """Benchmarks report LLM tokens per document (comparable across machines) from ``usage``."""
    llm = CachedLLM(OpenAILLM("tiny", server.url, backoff=0.01), tmp_path / "c.sqlite")
    reqs = [ChatRequest.make([{"role": "user", "content": f"q{i}"}]) for i in range(3)]
    llm.complete_batch(reqs)
    assert llm.usage == {"prompt_tokens": 21, "prompt_evaluated": 21, "completion_tokens": 9}
    llm.complete_batch(reqs)  # answered from the cache
    assert llm.usage == {"prompt_tokens": 21, "prompt_evaluated": 21, "completion_tokens": 9}


def test_openai_retries_then_succeeds(server):
    server.fail_first = 2
    llm = OpenAILLM("tiny", server.url, backoff=0.01, max_retries=3)
    assert llm.complete(MSG) == "ANSWER:hello"
    assert len(server.requests) == 3


def test_openai_gives_up_with_a_clear_error(server):
    server.fail_first, server.status = 10, 503
    llm = OpenAILLM("tiny", server.url, backoff=0.01, max_retries=2)
    with pytest.raises(LLMError, match="failed after 3 attempts.*HTTP 503"):
        llm.complete(MSG)
    server.fail_first, server.status = 1, 400  # a client error is not retried
    with pytest.raises(LLMError, match="refused the request.*HTTP 400"):
        llm.complete(MSG)


def test_openai_timeout_and_connection_errors(server):
    server.delay = 1.0
    llm = OpenAILLM("tiny", server.url, timeout=0.2, backoff=0.01, max_retries=1)
    with pytest.raises(LLMError, match="ReadTimeout"):
        llm.complete(MSG)
    dead = OpenAILLM("tiny", "http://127.0.0.1:9/v1", backoff=0.01, max_retries=1)
    with pytest.raises(LLMError, match="failed after 2 attempts"):
        dead.complete(MSG)


def test_openai_batch_is_concurrent_and_ordered(server):
    server.delay = 0.2
    llm = OpenAILLM("tiny", server.url, max_workers=8)
    reqs = [ChatRequest.make([{"role": "user", "content": f"q{i}"}]) for i in range(8)]
    t = time.perf_counter()
    assert llm.complete_batch(reqs) == [f"ANSWER:q{i}" for i in range(8)]
    assert time.perf_counter() - t < 1.2  # sequential would take 1.6 s


def test_openai_logprobs_of_the_continuation_only(server):
    llm = OpenAILLM("tiny", server.url)
    assert llm.logprobs("the capital is", " Paris indeed") == [-5.0, -6.0]
    body = server.requests[-1][1]
    assert body["echo"] is True and body["logprobs"] == 1 and server.requests[-1][0] == "/v1/completions"


# --------------------------------------------------------------------------- transformers backend


@pytest.fixture(scope="module")
def tiny_hf_model(tmp_path_factory):
    """A tiny random Qwen2 causal LM with a small byte-level BPE tokenizer, saved as a HF folder."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    folder = tmp_path_factory.mktemp("tiny-hf")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["the cat sat on the mat", "a dog ran", "user assistant"] * 5, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    fast.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }} {% endfor %}assistant:"
    fast.save_pretrained(folder)
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    Qwen2ForCausalLM(cfg).save_pretrained(folder)
    return folder


def test_transformers_logprobs_follow_the_chain_rule(tiny_hf_model, tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path))
    from audit.models.specs import load_llm

    llm = load_llm(str(tiny_hf_model), cache_path=tmp_path / "c.sqlite")
    assert llm.identity.startswith("transformers:") and "sha256=" in llm.identity
    both = llm.logprobs("the cat", " sat on")
    assert len(both) == 2 and all(v < 0 for v in both)
    # P(sat on | the cat) = P(sat | the cat) * P(on | the cat sat)
    parts = llm.logprobs("the cat", " sat") + llm.logprobs("the cat sat", " on")
    assert both == pytest.approx(parts, abs=1e-5)
    assert llm.logprobs("the cat", " sat") != llm.logprobs("the dog", " sat")
    assert llm.count_tokens("the cat sat") == len(llm.backend.tokenizer("the cat sat")["input_ids"]) >= 3


def test_a_transformers_model_loads_on_first_use_and_a_warm_run_never_loads_it(tiny_hf_model, tmp_path,
                                                                                 monkeypatch, capsys):
    """The information content's scorer is loaded when something scores with it: not to name the
    estimator (its cache key), and not when every value comes from the IC cache."""
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path))
    from audit.core.data import Corpus, Document
    from audit.metrics.ic import CausalIC, ICCache, corpus_ic
    from audit.models.resources import Resources

    corpus = Corpus([Document("d0", "the cat sat on the mat"), Document("d1", "a dog ran")])
    extract = lambda text: [Term(m.start(), m.end(), m.group(), "word") for m in re.finditer(r"\w+", text)]  # noqa: E731

    def run(progress):
        with Resources(llm_cache_path=tmp_path / "c.sqlite", progress=progress) as res:
            est = CausalIC(res.llm(str(tiny_hf_model), what="the scorer"), context_tokens=16)
            assert est.uses_one_pass and "one-pass" in est.identity
            values = corpus_ic(corpus, est, extract, cache=ICCache(est.identity, tmp_path / "ic"))
            return values, est.llm.backend.loaded

    cold, loaded = run(progress=True)
    assert loaded and "loading the scorer" in capsys.readouterr().err  # scored here: loaded, and said so
    warm, loaded = run(progress=True)
    assert not loaded and "loading" not in capsys.readouterr().err  # every value from the cache
    assert all(np.array_equal(warm[d][1], cold[d][1]) and warm[d][0] == cold[d][0] for d in cold)


def test_a_gguf_file_is_dequantised_into_the_model_cache_once(tmp_path, monkeypatch, caplog, fake_transformers_read):
    """The copy's logic with transformers' reading and writing replaced (the real model's copy is
    checked bit for bit in test_utility): the first load reads the GGUF file and writes the copy,
    later loads read the copy, and a copy that cannot be written leaves the GGUF file read."""
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    import audit.models.backends as backends

    reads = fake_transformers_read

    def save(model, tokenizer, folder):
        folder.mkdir(parents=True)
        (folder / "config.json").write_text("{}")

    monkeypatch.setattr(backends, "_save_dequantised", save)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    make = lambda identity: backends.TransformersLLM(gguf, identity=identity)  # noqa: E731
    left = tmp_path / "home" / "models" / "transformers" / f".{backends.key_of('transformers:m:sha256=1')}.99.tmp"
    left.mkdir(parents=True)  # a copy half-written by a process that was killed
    assert make("transformers:m:sha256=1").tokenizer == "tok"
    assert not left.exists()
    assert reads == [(tmp_path.name, {"gguf_file": "m.gguf"}, False)]  # the file, once
    copies, key = tmp_path / "home" / "models" / "transformers", backends.key_of("transformers:m:sha256=1")
    assert [p.name for p in copies.iterdir() if not p.name.startswith(".")] == [key]
    make("transformers:m:sha256=1").model
    assert reads[-1] == (key, {}, True)  # the copy
    monkeypatch.setattr(backends, "_save_dequantised", lambda *a: (_ for _ in ()).throw(OSError(28, "No space left")))
    with caplog.at_level("WARNING"):
        assert make("transformers:m:sha256=2").model is not None  # other content: another copy, not written
    assert reads[-1] == (tmp_path.name, {"gguf_file": "m.gguf"}, False)
    assert "could not keep m.gguf dequantised" in caplog.text and "No space left" in caplog.text
    assert [p.name for p in copies.iterdir() if not p.name.startswith(".")] == [key]  # no half-written copy
    assert not [p for p in copies.iterdir() if p.name.endswith(".tmp")]


def test_a_transformers_folder_that_cannot_load_is_a_clear_error_on_first_use(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path))
    from audit.models.specs import load_llm

    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json")
    llm = load_llm(str(broken), cache=False)  # named, not loaded
    with pytest.raises(LLMError, match=f"transformers could not load {re.escape(str(broken))}"):
        llm.logprobs("the cat", " sat")


def test_transformers_chat_is_seeded_and_stops(tiny_hf_model, tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path))
    from audit.models.specs import load_llm

    llm = load_llm(str(tiny_hf_model), cache=False)
    msgs = [{"role": "user", "content": "the cat"}]
    a = llm.complete(msgs, temperature=1.0, seed=1, max_tokens=12)
    assert a == llm.complete(msgs, temperature=1.0, seed=1, max_tokens=12)
    assert len(a.split()) <= 12
    greedy = llm.complete(msgs, max_tokens=12)
    word = next((w for w in greedy.split() if w), None)
    if word is not None:
        assert word not in llm.complete(msgs, max_tokens=12, stop=[word])


def test_llm_chat_cli(tmp_path, monkeypatch):
    from click.testing import CliRunner

    import audit.models.specs as models
    from anonaudit.cli import main

    seen = []

    def fake_load_llm(spec=None, *, cache=True, **kw):
        seen.append((spec, cache))
        return CachedLLM(ScriptedLLM(lambda r: f"echo {r.message_dicts}", identity="fake"),
                         tmp_path / "c.sqlite", enabled=cache)

    monkeypatch.setattr(models, "load_llm", fake_load_llm)
    res = CliRunner().invoke(main, ["llm", "chat", "Hi there", "--system", "Be brief", "--llm", "x", "--no-cache"])
    assert res.exit_code == 0, res.output
    assert "'role': 'system', 'content': 'Be brief'" in res.output and "Hi there" in res.output
    assert seen == [("x", False)]
    monkeypatch.undo()  # the real loader: a bad spec is one readable error, exit code 1
    res = CliRunner().invoke(main, ["llm", "chat", "Hi", "--llm", "openai:broken"])
    assert res.exit_code == 2 and "openai:MODEL@" in res.output and "Traceback" not in res.output


def test_extract_json_list_finds_the_list_in_chatter_and_objects():
    from audit.models.llm import extract_json_list

    assert extract_json_list('["a", "b"]') == ["a", "b"]
    assert extract_json_list('Here are my guesses: ["Ankara", "Izmir"] — hope this helps') == ["Ankara", "Izmir"]
    assert extract_json_list('{"claims": ["x lives in y"], "n": 1}') == ["x lives in y"]
    assert extract_json_list('Sure! {"guesses": [1, 2]}') == [1, 2]
    assert extract_json_list("[]") == []  # the model said "nothing": not the same as no JSON
    assert extract_json_list("1. Ankara\n2. Izmir") is None
    assert extract_json_list('{"answer": "Ankara"}') is None
    assert extract_json_list("[unclosed") is None


def test_a_gguf_tokeniser_is_kept_with_the_model_it_was_rebuilt_from(tmp_path, monkeypatch):
    """llama.cpp's tokeniser, rebuilt from the GGUF file once (tens of seconds), is kept with a
    record of its model, so that `anonaudit models prune` can tell when it is no longer used."""
    import json

    import transformers

    import audit.models.backends as backends

    made = []

    class Tok:
        def save_pretrained(self, folder):
            folder.mkdir(parents=True)
            (folder / "tokenizer.json").write_text("{}")

    def from_pretrained(folder, gguf_file=None):
        made.append(gguf_file)
        return Tok()

    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", from_pretrained)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    folder = tmp_path / "tokenizers" / "key"
    backends.gguf_tokenizer(gguf, folder, f"llamacpp:{gguf.resolve()}")
    backends.gguf_tokenizer(gguf, folder, f"llamacpp:{gguf.resolve()}")
    assert made == ["m.gguf", None]  # rebuilt from the file once, then read from the folder
    assert json.loads((folder / backends.KEPT_RECORD).read_text()) == {
        "what": "the tokeniser of m.gguf", "source": f"llamacpp:{gguf.resolve()}"}
