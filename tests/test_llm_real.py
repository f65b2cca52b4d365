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


def test_shared_prefix_answers_are_the_same_in_any_order(small_llm):
    """Issue 22: a document evaluated once and reused by every question about it. llama.cpp's
    numbers depend on how a prompt was cut into evaluation batches; the reuse keeps that cut
    fixed, so the log-probabilities of every answer are bit-identical whatever ran before it."""
    backend = small_llm.backend
    docs = [" ".join(f"Hearing {i} was held in {city} on day {i + 3}." for i in range(12)) for city in ("Lyon", "Nice")]
    reqs = [ChatRequest.make([{"role": "system", "content": "Answer with one word."},
                              {"role": "user", "content": f"Document:\n{doc}"},
                              {"role": "user", "content": f"Where was hearing {q} held?"}],
                             max_tokens=3, shared=(1, 2)) for doc in docs for q in (4, 9)]

    def probe(req):
        with backend._slot_lock:
            result, _ = backend._answer_shared(req, *backend._shared_prompt(req), n_probs=3)
        return json.dumps(result["choices"][0]["logprobs"]), result["timings"]["cache_n"]

    first = [probe(r) for r in reqs]
    assert first[1][1] > 150 and first[3][1] > 150  # the second question reused its document
    backend.complete_batch([ChatRequest.make([{"role": "user", "content": "Say hi."}], max_tokens=2)])
    again = {i: probe(reqs[i]) for i in (3, 0, 2, 1, 1)}
    assert [again[i][0] for i in range(4)] == [f[0] for f in first]
    assert "Lyon" in small_llm.complete_batch(reqs[:1])[0]


def test_fixed_answers_in_one_pass_with_the_passage_evaluated_once(small_llm):
    """Issue 57: the judge's Yes and No come from one forward pass, the instructions and the
    passage evaluated once in one fixed way for every question about them: the values agree
    with the forced continuation of each answer (other evaluation batches: last bits), and are
    bit-identical in any order."""
    from attackers.claim_linker.judge import yesno_cuts, yesno_prompt

    backend = small_llm.backend
    passage = " ".join(f"Hearing {i} was held in {city} on day {i + 3}." for i, city in enumerate(["Lyon", "Nice"] * 6))
    questions = []
    for fact in ("Hearing 4 was held in Lyon.", "Hearing 5 was held in Nice.", "The court sat in Berlin."):
        prefix, yes, no = yesno_prompt(backend, passage, fact)
        questions.append((prefix, [yes, no], yesno_cuts(prefix, passage, fact, passage=True)))
    spent = backend.usage["prompt_evaluated"]
    first = [backend.answer_logprobs(p, a, shared=c) for p, a, c in questions]
    evaluated = backend.usage["prompt_evaluated"] - spent
    whole = backend.count_tokens(questions[0][0])
    assert evaluated < whole + 2 * (whole - backend.count_tokens(questions[0][0][:questions[0][2][1]])) + 10
    for (prefix, answers, _), values in zip(questions, first):
        forced = [sum(backend.logprobs(prefix, a)) for a in answers]
        assert values == pytest.approx(forced, abs=0.1)
    backend.logprobs("The capital city of France is", " Paris")  # the slot holds something else
    assert [backend.answer_logprobs(p, a, shared=c) for p, a, c in reversed(questions)] == first[::-1]
    assert first[2][0] < first[2][1]  # a fact the passage does not state: No
