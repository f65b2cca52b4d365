"""The causal information content's token scoring (audit/metrics/token_scores.py): windows, the
output layer at the scored positions only, float32 exact and bfloat16 close (issue 69, item 4).

A tiny Qwen2 (one layer, 16 wide) stands in for the 0.5B scorer in the fast tests (~2 s in all);
the last test, marked slow, holds the real scorer's default against the reference scoring on three
short TAB judgments (~60 s: the reference reads every token twice in float32)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from audit.core.errors import AnonauditError
from audit.metrics import CausalIC
from audit.metrics.token_scores import token_logprobs, windows
from audit.models.llm import LLM
from tests.test_utility import _tiny_mlm

TAB = Path(__file__).resolve().parents[2] / "shared" / "data" / "tab"
TEXT = ("the applicant lodged an application against turkey on 3 may 1996 . the court dismissed the "
        "application in istanbul on 9 may 1997 , the applicant lodged an application against the court .")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(model, tokenizer) of a tiny random Qwen2 causal LM over a small word-piece vocabulary."""
    import torch
    from transformers import BertTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    path = tmp_path_factory.mktemp("tiny")
    _tiny_mlm(path)
    tok = BertTokenizerFast.from_pretrained(path)
    tok.bos_token = "[CLS]"
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                      num_key_value_heads=1, intermediate_size=32, max_position_embeddings=256)
    return Qwen2ForCausalLM(cfg).eval(), tok


def _reference(model, tok, ids, size):
    """log P(token | window) the plain way: the whole model's logits and a log-softmax at every
    position of every window (what the scoring did before it skipped the unscored positions)."""
    import torch

    out = np.zeros(len(ids))
    for w, first, at in windows(ids, size, tok.bos_token_id):
        with torch.no_grad():
            lp = torch.log_softmax(model(input_ids=torch.tensor([w])).logits[0].float(), dim=-1)
        for p in range(first, len(w)):
            out[at + p] = float(lp[p - 1, w[p]])
    return out


def test_windows_score_every_token_once_with_half_to_all_of_the_window_before_it():
    ids = list(range(100, 123))  # 23 tokens, windows of 8
    scored = []
    for w, first, at in windows(ids, 8, bos=1):
        assert len(w) <= 9 and (at == -1) == (w[0] == 1)
        scored += [at + p for p in range(first, len(w))]
        assert all(p - 1 >= min(first - 1, 4) for p in range(first, len(w)))  # >= 4 tokens before, or all
    assert scored == list(range(23))
    assert len(windows(ids, 64, bos=1)) == 1  # a text that fits is one window


def test_fp32_scoring_is_the_plain_forward_pass_at_the_positions_asked_for(tiny):
    model, tok = tiny
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    assert len(ids) > 24
    for size in (8, 64):  # many windows, and the whole text in one
        ref = _reference(model, tok, ids, size)
        got = token_logprobs(model, tok, ids, size=size, batch_size=3, precision="fp32")
        assert np.allclose(got, ref, atol=1e-5) and (got < 0).all()
        needed = np.arange(len(ids)) % 3 == 0
        part = token_logprobs(model, tok, ids, size=size, precision="fp32", needed=needed)
        assert np.allclose(part[needed], ref[needed], atol=1e-5) and (part[~needed] == 0).all()


def test_a_text_that_fits_the_window_is_one_forward_pass_of_the_body(tiny, monkeypatch):
    model, tok = tiny
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    calls = []
    forward = model.base_model.forward
    monkeypatch.setattr(model.base_model, "forward", lambda *a, **k: calls.append(1) or forward(*a, **k))
    token_logprobs(model, tok, ids, size=len(ids), precision="fp32")
    assert len(calls) == 1
    calls.clear()
    token_logprobs(model, tok, ids, size=8, batch_size=1, precision="fp32")
    assert len(calls) == len(windows(ids, 8, tok.bos_token_id)) > 1


def test_bf16_scoring_is_close_to_fp32(tiny):
    model, tok = tiny
    ids = tok(TEXT, add_special_tokens=False)["input_ids"]
    a = token_logprobs(model, tok, ids, size=64, precision="fp32")
    b = token_logprobs(model, tok, ids, size=64, precision="bf16")
    assert not np.array_equal(a, b) and np.allclose(a, b, atol=0.05)
    assert np.corrcoef(a, b)[0, 1] > 0.99


class _Local(LLM):
    identity = "tiny"

    def __init__(self, model, tok):
        self.model, self.tokenizer = model, tok

    def _complete(self, request):  # pragma: no cover - never asked
        return ""


def test_precision_is_checked_resolved_and_named_in_the_identity(tiny, monkeypatch):
    import torch

    llm = _Local(*tiny)
    with pytest.raises(AnonauditError, match="ic_precision must be one of auto, fp32, bf16, got 'fp16'"):
        CausalIC(llm, precision="fp16")
    assert CausalIC(llm, precision="bf16").identity.endswith(":one-pass:bf16")
    assert CausalIC(llm, precision="fp32").identity.endswith(":one-pass")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for native in (True, False):  # auto: bf16 only where the CPU computes it natively
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native, raising=False)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False, raising=False)
        assert CausalIC(llm).precision_of() == ("bf16" if native else "fp32")


@pytest.mark.slow
@pytest.mark.skipif(not (TAB / "bks").is_dir(), reason=f"needs the shared TAB data at {TAB}")
def test_the_default_scorer_follows_the_reference_scoring_on_three_tab_judgments():
    """The fidelity guard of the default causal IC (issue 69): on TAB's three shortest test
    judgments, each term's IC by the default (bfloat16 where the CPU computes it natively) against
    float32, the scoring before it (same windows). On 5 TAB judgments (6,279 tokens, 1,786 terms;
    benchmarks/README.md) bf16 gave Pearson 1.0000 against float32, terms 0.045 nats apart on
    average (0.45 at most), document totals within 0.02%; a whole-judgment context instead of 256
    tokens gave 0.91. So r >= 0.999 and totals within 0.5% hold bf16's rounding and catch a
    changed context or a broken cast. Where the CPU has no native bf16 the default is float32 and
    the two agree exactly. ~20 s (19.4 s measured with the scorer loaded)."""
    import json

    from audit.metrics.terms import TermExtractor
    from audit.models.nlp import Spacy
    from audit.models.specs import load_llm

    texts = sorted(json.loads((TAB / "bks" / "TAB_test_BK=Original.json").read_text()).values(), key=len)[:3]
    scorer = load_llm("scorer", cache=False)
    extract = TermExtractor(Spacy())
    default, reference = CausalIC(scorer), CausalIC(scorer, context_tokens=256, precision="fp32")
    a, b = [], []
    for text in texts:
        terms = extract(text)
        a.append(default.estimate(text, terms))
        b.append(reference.estimate(text, terms))
    new, old = np.concatenate(a), np.concatenate(b)
    assert len(new) > 200 and np.corrcoef(new, old)[0, 1] >= 0.999
    shares = [x.sum() / y.sum() for x, y in zip(a, b)]
    assert all(abs(s - 1) <= 0.005 for s in shares), shares
