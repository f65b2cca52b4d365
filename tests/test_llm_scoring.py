"""Fixed answers scored in one forward pass, shared prompt parts evaluated once (issue 57): the
LLM layer's ``answer_logprobs`` and the claim linker's judge on it (scripted servers; the real
model path is in test_llm_real.py)."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from attackers.claim_linker.judge import yesno_cuts, yesno_margin, yesno_prompt
from audit.models.answer_cache import CachedLLM
from audit.models.llm import LLM, ScriptedLLM
from tests.test_llm import CharTokenizer, FakeKVServer


class FakeScoringServer(FakeKVServer):
    """:class:`FakeKVServer` that also scores: with ``n_probs`` it returns the forced token's
    log-probability and those of the tokens ``a``..``e`` (and ``Y``, ``N``), each a function of
    every prompt token with where its evaluation started, so two scores are equal only when
    their prompts were evaluated the same way."""

    def handle_completions(self, body: dict) -> dict:
        result = super().handle_completions(body)
        if "n_probs" not in body:
            return result
        forced = [int(t) for t in re.findall(r"<\[(\d+)\]>", body["grammar"])]

        def lp(before: list[int], tok: int) -> float:
            digest = hashlib.sha256(json.dumps([self.tokens, before, tok]).encode()).digest()
            return -1 - digest[0] / 64

        top = [ord(c) for c in "abcdeYN"][: body["n_probs"]]
        content = [{"id": f, "logprob": lp(forced[:k], f),
                    "top_logprobs": [{"id": t, "logprob": lp(forced[:k], t)} for t in top]}
                   for k, f in enumerate(forced)]
        return {**result, "choices": [{"text": "".join(map(chr, forced)), "logprobs": {"content": content}}]}


class OffsetTokenizer(CharTokenizer):
    """:class:`CharTokenizer` with the character offsets of its tokens (for ``logprobs``)."""

    bos_token_id = None

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=False):
        out = super().__call__(text)
        return {**out, "offset_mapping": [(i, i + 1) for i in range(len(text))]} if return_offsets_mapping else out


@pytest.fixture
def scorer(monkeypatch):
    xlc = pytest.importorskip("xllamacpp")
    monkeypatch.setattr(xlc, "Server", FakeScoringServer)
    from audit.models.llamacpp import LlamaCppLLM

    def make(**kw):
        llm = LlamaCppLLM("/nonexistent/model.gguf", identity="llamacpp:fake", **kw)
        llm._tok = OffsetTokenizer()
        return llm

    return make


def _question(passage: str, fact: str) -> tuple[str, tuple[int, int]]:
    prefix = f"<system>Judge.|<user>Passage: {passage}\n\nFact: {fact}\n\nStated?|<assistant>"
    start = prefix.index("Passage: ")
    return prefix, (start, start + len(f"Passage: {passage}\n\n"))


def test_fixed_answers_come_from_one_pass_the_same_in_any_order(scorer):
    """Every answer of one token is read from one forward pass; a passage shared by several
    questions is evaluated once, and every value is the one the question gets alone on a fresh
    slot, whatever ran before it (a resumed run gets the same values)."""
    questions = [_question(p, f) for p in ("the court in Lyon", "a judge in Nice") for f in ("Lyon", "Paris", "Nice")]
    alone = []
    for prefix, cuts in questions:
        llm = scorer()
        alone.append(llm.answer_logprobs(prefix, ["Y", "N"], shared=cuts))
        assert len([b for b in llm._server.completions if "n_probs" in b]) == 1  # both answers, one pass
    llm = scorer()
    assert [llm.answer_logprobs(p, ["Y", "N"], shared=c) for p, c in questions] == alone
    for i in (4, 0, 5, 2, 1, 1, 3):
        assert llm.answer_logprobs(*questions[i][:1], ["Y", "N"], shared=questions[i][1]) == alone[i]
    # the passage is evaluated once: after the first question about it, only the fact
    llm = scorer()
    for prefix, cuts in questions[:3]:
        llm.answer_logprobs(prefix, ["Y", "N"], shared=cuts)
    tails = [len(p) - c[1] for p, c in questions[:3]]
    assert llm.usage["prompt_tokens"] == sum(len(p) for p, _ in questions[:3])
    assert llm.usage["prompt_evaluated"] == len(questions[0][0]) + 2 + sum(1 + t for t in tails[1:])
    # an answer outside the reported tokens costs a second pass, forced
    assert llm.answer_logprobs(*questions[0][:1], ["Y", "z"], shared=questions[0][1])[0] == alone[0][0]


def test_without_shared_parts_every_prompt_is_evaluated_whole(scorer):
    llm = scorer()
    prefix, _ = _question("the court in Lyon", "Lyon")
    first = llm.answer_logprobs(prefix, ["Y", "N"])
    assert llm.answer_logprobs(prefix, ["Y", "N"]) == first
    assert all(b["cache_prompt"] is False for b in llm._server.completions)
    with pytest.raises(ValueError, match="increasing"):
        llm.answer_logprobs(prefix, ["Y"], shared=(5, 3))
    # answers of several tokens: each through logprobs (the forced continuation), summed
    assert llm.answer_logprobs(prefix, ["Yes", "No"]) == [sum(llm.logprobs(prefix, a)) for a in ("Yes", "No")]


def test_answer_logprobs_are_cached_keyed_by_their_reuse(scorer, tmp_path):
    prefix, cuts = _question("the court in Lyon", "Lyon")
    cold = CachedLLM(scorer(), tmp_path / "c.sqlite")
    values = cold.answer_logprobs(prefix, ["Y", "N"], shared=cuts)
    warm = CachedLLM(scorer(), tmp_path / "c.sqlite")
    assert warm.answer_logprobs(prefix, ["Y", "N"], shared=cuts) == values
    assert warm.stats == {"hits": 1, "misses": 0, "backend_calls": 0}
    # evaluated whole, the same prompt has other values: never served from the reused entry
    assert warm.answer_logprobs(prefix, ["Y", "N"]) != values and warm.stats["misses"] == 1
    off = CachedLLM(scorer(reuse_prefix=False), tmp_path / "c.sqlite")
    assert off.answer_logprobs(prefix, ["Y", "N"], shared=cuts) == warm.answer_logprobs(prefix, ["Y", "N"])
    assert off.stats["hits"] == 1


def test_the_default_scores_each_answer_by_its_logprobs():
    class Scored(ScriptedLLM):
        def logprobs(self, prefix, continuation):
            return [-0.5] * len(continuation.split())

    llm = Scored([])
    assert llm.answer_logprobs("Is it?", [" yes", " no way"], shared=(2,)) == [-0.5, -1.0]
    assert llm.scoring_key("Is it?", ["a"], (2,)) == {"prefix": "Is it?", "answers": ["a"]}


class RecordingJudge(LLM):
    identity = "recording"

    def __init__(self):
        self.asked = []

    def _complete(self, request):
        raise AssertionError("the judge generates nothing")

    def chat_text(self, messages):
        return CharTokenizer().apply_chat_template(messages, add_generation_prompt=True)

    def answer_logprobs(self, prefix, answers, *, shared=()):
        self.asked.append((prefix, tuple(answers), tuple(shared)))
        return [-0.1, -2.0]


def test_the_judge_declares_its_instructions_shared_and_asks_once():
    llm = RecordingJudge()
    margin = yesno_margin(llm, "The court sat in Lyon.", "The court sat in Lyon.")
    assert margin == pytest.approx(1.9)
    ((prefix, answers, cuts),) = llm.asked
    assert answers == ("Yes", "No") and (prefix, "Yes", "No") == yesno_prompt(llm, "The court sat in Lyon.",
                                                                               "The court sat in Lyon.")
    assert len(cuts) == 1 and prefix[:cuts[0]].endswith("<user>") and prefix[cuts[0]:].startswith("Passage: ")
    both = yesno_cuts(prefix, "The court sat in Lyon.", "The court sat in Lyon.", passage=True)
    assert both[0] == cuts[0] and prefix[both[0]:both[1]] == "Passage: The court sat in Lyon.\n\n"
    assert prefix[both[1]:].startswith("Fact: The court sat in Lyon.\n\n")
    assert yesno_cuts("no question here", "x", "y") == ()
    assert yesno_margin(llm, "  ", "anything") == float("-inf") and len(llm.asked) == 1
    # the compact question: the passage and the fact only, the same instructions declared shared
    short, _, _ = yesno_prompt(llm, "The court sat in Lyon.", "It sat in Lyon.", compact=True)
    assert "Does the passage state" not in short and "Does the passage state" in prefix
    assert short.index("Fact: It sat in Lyon.") > short.index("Passage: ") and short.endswith("<assistant>")
    assert yesno_cuts(short, "The court sat in Lyon.", "It sat in Lyon.") == cuts
    yesno_margin(llm, "The court sat in Lyon.", "It sat in Lyon.", compact=True)
    assert llm.asked[-1] == (short, ("Yes", "No"), cuts)


def test_idle_llama_threads_sleep_by_default(monkeypatch):
    """llama.cpp's default poll level (50) has idle worker threads spin for work, which on a few
    shared cores takes the core the next step needs (benchmarks/README.md, the judge's LLM cost):
    the backend asks for 0 in both thread pools, and passes another level through."""
    xlc = pytest.importorskip("xllamacpp")
    seen = []

    class Capture(FakeScoringServer):
        def __init__(self, params):
            super().__init__(params)
            seen.append((params.cpuparams.poll, params.cpuparams_batch.poll))

    monkeypatch.setattr(xlc, "Server", Capture)
    from audit.models.llamacpp import LlamaCppLLM

    LlamaCppLLM("/nonexistent/model.gguf", identity="llamacpp:fake")
    LlamaCppLLM("/nonexistent/model.gguf", identity="llamacpp:fake", poll=50)
    assert seen == [(0, 0), (50, 50)]
