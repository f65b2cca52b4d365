"""The real path: the embedded Qwen2.5-Coder-0.5B through in-process llama.cpp (slow)."""

from __future__ import annotations

import json

import pytest

from audit.models.llm import ChatRequest

pytestmark = pytest.mark.slow


def test_chat_with_schema_then_cached_rerun(small_llm):
    schema = {"type": "array", "items": {"type": "string"}, "minItems": 3, "maxItems": 3}
    reqs = [ChatRequest.make([{"role": "user", "content": f"Name three {kind}. Answer as a JSON list."}],
                             max_tokens=48, json_schema=schema) for kind in ("fruits", "colours")]
    before, spent = dict(small_llm.stats), small_llm.usage
    answers = small_llm.complete_batch(reqs)
    for answer in answers:
        items = json.loads(answer)  # parseable by construction (grammar)
        assert isinstance(items, list) and len(items) == 3 and all(isinstance(x, str) and x for x in items)
    assert any(x.lower() in {"apple", "banana", "orange", "cherry", "grape", "mango", "pear"}
               for x in json.loads(answers[0]))
    assert small_llm.stats["backend_calls"] - before["backend_calls"] == 2
    tokens = {k: small_llm.usage[k] - spent[k] for k in spent}
    assert tokens["prompt_tokens"] > 2 * 10 and 2 * 3 <= tokens["completion_tokens"] <= 2 * 48
    again = small_llm.complete_batch(reqs)  # a re-run: same answers, no backend call
    assert again == answers
    assert small_llm.stats["backend_calls"] - before["backend_calls"] == 2
    assert small_llm.stats["hits"] - before["hits"] == 2


def test_logprobs_rank_likely_continuations_higher(small_llm):
    prefix = "The capital city of France is"
    likely = small_llm.logprobs(prefix, " Paris")
    unlikely = small_llm.logprobs(prefix, " Zagreb")
    assert likely and unlikely and all(v <= 0 for v in likely + unlikely)
    assert sum(likely) > sum(unlikely) + 3
    assert len(small_llm.logprobs(prefix, " Paris, the largest city")) == small_llm.count_tokens(
        " Paris, the largest city")
    calls = small_llm.stats["backend_calls"]
    assert small_llm.logprobs(prefix, " Paris") == likely and small_llm.stats["backend_calls"] == calls
