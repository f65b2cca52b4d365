"""Tests of the TRIR attack (attackers/trir/).

Fast tests check the pure parts (window splitting, logit summing, ranks) and the
tokenizer windows. The slow tests fine-tune the embedded MiniLM on a tiny
synthetic population (anonaudit.demo.population) for a few epochs on short windows.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner

from attackers.trir import (TRIRAttack, TrainedTRIR, Windows, make_windows, rank_of, resolve_base, split_windows,
                            sum_window_logits)
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.errors import AnonauditError
from audit.core.registry import registry

# ---------------------------------------------------------------------------- pure functions


def test_split_windows_short_text_is_one_window():
    assert split_windows(0, 10, 3) == [(0, 0)]
    assert split_windows(7, 10, 3) == [(0, 7)]
    assert split_windows(10, 10, 3) == [(0, 10)]


def test_split_windows_overlap_and_last_window_ends_at_text_end():
    # size 10, overlap 3 -> step 7: 0-10, 7-17, 14-24, 21-25
    assert split_windows(25, 10, 3) == [(0, 10), (7, 17), (14, 24), (21, 25)]
    # no overlap: exact tiling
    assert split_windows(20, 5, 0) == [(0, 5), (5, 10), (10, 15), (15, 20)]
    # every token covered, consecutive windows share exactly `overlap` tokens (except the tail)
    wins = split_windows(1000, 98, 25)
    covered = set()
    for s, e in wins:
        covered.update(range(s, e))
    assert covered == set(range(1000))
    assert all(b[0] == a[1] - 25 for a, b in zip(wins, wins[1:]))
    assert all(e - s <= 98 for s, e in wins)


def test_split_windows_rejects_bad_parameters():
    with pytest.raises(ValueError):
        split_windows(10, 5, 5)
    with pytest.raises(ValueError):
        split_windows(10, 0, 0)


def test_sum_window_logits_groups_rows_by_document():
    logits = np.array([[1.0, 0.0, 0.0],
                       [0.0, 2.0, 0.0],
                       [0.5, 0.5, 3.0],
                       [-1.0, 1.0, 0.0]])
    out = sum_window_logits(logits, [0, 0, 2, 0], 4)
    np.testing.assert_allclose(out, [[0.0, 3.0, 0.0], [0, 0, 0], [0.5, 0.5, 3.0], [0, 0, 0]])
    # the summed prediction can differ from every single window's vote
    assert out[0].argmax() == 1
    with pytest.raises(ValueError):
        sum_window_logits(logits, [0, 1], 2)


def test_rank_of_true_subject():
    scores = np.array([0.1, 3.0, 2.0, 2.0, -1.0])
    assert rank_of(scores, 1) == 1
    assert rank_of(scores, 2) == 2 and rank_of(scores, 3) == 2  # ties count in its favour
    assert rank_of(scores, 4) == 5


def test_make_windows_adds_specials_and_maps_characters():
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve_base(None))
    text = " ".join(f"word{i}" for i in range(60))
    wins = make_windows(tok, [text, "short one"], window=20, overlap=5)
    assert all(len(ids) <= 20 for ids in wins.ids)
    assert all(ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id for ids in wins.ids)
    assert wins.doc.count(1) == 1 and wins.doc[-1] == 1
    first, last = wins.chars[0], wins.chars[wins.doc.count(0) - 1]
    assert first[0] == 0 and last[1] == len(text)
    # windows of one text overlap by exactly 5 content tokens
    a, b = wins.ids[0][1:-1], wins.ids[1][1:-1]
    assert a[-5:] == b[:5]


def test_minilm_has_no_mlm_head():
    from attackers.trir import has_mlm_head

    assert has_mlm_head(resolve_base(None)) is False


def test_ner_masking_and_curation_texts():
    from attackers.trir import curated, ner_masked
    from audit.models.nlp import Spacy

    nlp = Spacy()
    text = "Maria Jensen moved to Copenhagen in March 2004 and was working as a nurse."
    masked = ner_masked(nlp, [text])[0]
    assert "Maria Jensen" not in masked and "Copenhagen" not in masked
    assert masked.startswith("PERSON moved to ") and "DATE" in masked and "nurse" in masked
    cur = curated(nlp, [text])[0].split()
    assert "and" not in cur and "was" not in cur and "." not in cur
    assert "move" in cur and "work" in cur


def test_registered_with_parameters():
    cls = registry.get("attack", "trir")
    assert cls is TRIRAttack and cls.requires == frozenset({"background"})
    params = TRIRAttack(window=64, overlap=16, seed=3).get_params()
    assert params["window"] == 64 and params["overlap"] == 16 and params["seed"] == 3


def test_fit_needs_background_with_subjects(tmp_path):
    attack = TRIRAttack(cache_dir=str(tmp_path))
    with pytest.raises(AnonauditError, match="background"):
        attack.fit(Scenario())
    bg = Corpus([Document("a", "some text", subject=None)], source="bg.jsonl")
    with pytest.raises(AnonauditError, match="bg.jsonl.*no subject"):
        attack.fit(Scenario(background=bg))


def fake_trained(attack: TRIRAttack, labels: list[str], predicted: list[int]) -> TRIRAttack:
    """``attack`` as if trained on ``labels``: document i gets the largest logit for ``predicted[i]``
    (one window each, over its first 4 characters)."""
    attack.trained_ = TrainedTRIR(model=None, tokenizer=None, labels=labels, info={})

    def predict(texts):
        logits = np.zeros((len(texts), len(labels)))
        for i, j in enumerate(predicted):
            logits[i, j] = 2.0
            logits[i, (j + 1) % len(labels)] = 1.0
        return logits.copy(), Windows(ids=[[0]] * len(texts), doc=list(range(len(texts))),
                                      chars=[(0, 4)] * len(texts)), logits

    attack.predict = predict
    return attack


def test_findings_say_whether_the_subject_was_named_and_keep_names_private():
    people = ["p0", "p1", "p2", "p3"]
    docs = [Document(f"d{i}", f"text about p{i}", subject=f"p{i}") for i in range(4)]
    docs += [Document("x", "text about an outsider", subject="outsider"), Document("y", "about nobody")]
    rel = Release("rel", Corpus(docs, name="rel"))
    attack = fake_trained(TRIRAttack(progress=False), people, [0, 1, 3, 0, 2, 1])
    head, _ = attack.evaluate(Scenario(background=Corpus(docs[:4], name="bg"), releases=(rel,)), rel)
    by = {d.id: d for d in head.documents}
    assert [by[i].success for i in ("d0", "d1", "d2", "d3", "x", "y")] == [True, True, False, False, None, None]
    assert head.n == 4 and head.value == 0.5
    assert by["d0"].summary == "Predicted subject is the true person (rank 1 of 4)"
    assert by["d2"].summary == "Predicted subject is someone else; the true person ranks 3 of 4"
    assert by["x"].summary == "Not scored: its subject is not among the 4 people of the background"
    assert by["d2"].facts["predicted"] == "p3" and by["d2"].facts["subject"] == "p2"
    assert by["d2"].private == {"subject", "predicted", "top5"} and "p3" not in by["d2"].summary
    assert by["d2"].facts["status"] == "top-5" and by["d2"].facts["true_rank"] == 3
    (hl,) = by["d0"].highlights
    assert (hl.start, hl.end, hl.kind) == (0, 4, "trir_evidence") and by["d0"].highlights_in is None


# ---------------------------------------------------------------------------- real model (slow)

TINY = dict(budget="fast", window=40, overlap=8, epochs=3, batch_size=8, learning_rate=3e-4, num_threads=1,
            pretrain=True, progress=False)


@pytest.fixture(scope="module")
def demo():
    from anonaudit.demo.population import generate

    data = generate(8, seed=1, background_per_person=3, extra_people=4)
    releases = (Release("originals", data.originals), data.releases["suppressed"])
    return Scenario(originals=data.originals, background=data.background, releases=releases)


@pytest.fixture(scope="module")
def trained(demo, tmp_path_factory):
    cache = tmp_path_factory.mktemp("trir-cache")
    attack = TRIRAttack(seed=0, cache_dir=str(cache), **TINY).fit(demo)
    return attack, cache


@pytest.mark.slow
def test_trir_separates_unsanitized_from_suppressed_and_reuses_cache(demo, trained, monkeypatch):
    attack, cache = trained
    assert attack.trained_.info["loaded_from_cache"] is False
    population = len(set(demo.background.subjects))
    plain, plain5 = attack.evaluate(demo, demo.release("originals"))
    supp, _ = attack.evaluate(demo, demo.release("suppressed"))
    assert plain.name == "trir" and plain5.name == "trir.top5"
    assert plain.baseline == pytest.approx(1 / population)
    assert plain.n == len(demo.originals)
    assert plain.value >= 0.75 and plain.beats_baseline
    assert plain.value - supp.value >= 0.2

    def mean_true_probability(res):
        return np.mean([d.facts["true_probability"] for d in res.documents])

    assert mean_true_probability(plain) > mean_true_probability(supp)
    assert plain5.value >= plain.value
    doc = plain.documents[0]
    assert {"subject", "predicted", "probability", "true_rank", "top5"} <= set(doc.facts)
    assert doc.success == doc.facts["correct"] == (doc.facts["predicted"] == doc.facts["subject"]) \
        == (doc.facts["true_rank"] == 1)
    start, end = doc.highlights[0].start, doc.highlights[0].end
    assert 0 <= start < end <= len(demo.originals[doc.id].text)
    notes = " ".join(plain.details["notes"])
    assert "no dev release" in notes
    # the attacker learned its background: no under-training warning
    assert plain.details["fit_check_accuracy"] >= 0.5 and "warning" not in plain.details
    assert "of its own training windows" in notes
    assert "pretraining skipped: base has no MLM head" in notes  # MiniLM ships without its MLM head

    # A second attacker with the same configuration and background loads, never trains.
    def no_training(*args, **kwargs):
        raise AssertionError("retrained although a cached attacker exists")

    monkeypatch.setattr(TRIRAttack, "train_attacker", no_training)
    again = TRIRAttack(seed=0, cache_dir=str(cache), **TINY).fit(demo)
    assert again.trained_.info["loaded_from_cache"] is True
    plain_again, _ = again.evaluate(demo, demo.release("originals"))
    assert [d.facts["predicted"] for d in plain_again.documents] == [d.facts["predicted"] for d in plain.documents]
    # The cache hit is recorded for the provenance, never in the result, which must not depend on it.
    assert again.stats()["trained_attacker"]["loaded_from_cache"] is True
    assert "loaded_from_cache" not in plain_again.details and plain_again.details == plain.details
    saved = json.loads((next(cache.iterdir()) / "trir.json").read_text())
    assert saved["population"] == population and saved["params"]["window"] == TINY["window"]
    # A different configuration is a different key: it must train.
    with pytest.raises(AssertionError, match="retrained"):
        TRIRAttack(seed=1, cache_dir=str(cache), **TINY).fit(demo)
    # The cached attacker has learnt the background: its files are its owner's only (issue 46).
    assert all(not f.stat().st_mode & 0o077 for f in cache.rglob("*") if f.is_file())
    # --no-cache (every cache off for the run) retrains even with the same key.
    from audit.core.config import caches_off

    with caches_off(), pytest.raises(AssertionError, match="retrained"):
        TRIRAttack(seed=0, cache_dir=str(cache), **TINY).fit(demo)


@pytest.mark.slow
def test_same_seed_same_result_and_people_outside_background(demo, trained, tmp_path):
    attack, _ = trained
    other = TRIRAttack(seed=0, cache_dir=str(tmp_path), **TINY).fit(demo)  # trains again, elsewhere
    assert other.trained_.info["loaded_from_cache"] is False
    assert [h["loss"] for h in other.trained_.info["history"]] == [h["loss"] for h in attack.trained_.info["history"]]
    a = attack.evaluate(demo, demo.release("suppressed"))[0]
    b = other.evaluate(demo, demo.release("suppressed"))[0]
    assert a.value == b.value
    assert [(d.facts["predicted"], d.facts["probability"]) for d in a.documents] == \
        [(d.facts["predicted"], d.facts["probability"]) for d in b.documents]

    # A document about someone the attacker never saw is listed, not counted as a failure.
    stranger = Document("x-1", "A note about somebody else entirely.", subject="nobody-known")
    rel = Release("mixed", Corpus(list(demo.originals)[:3] + [stranger], name="mixed"))
    res = attack.evaluate(demo, rel)[0]
    assert res.n == 3 and res.details["not_in_background"] == 1
    assert [(d.facts["status"], d.success) for d in res.documents if d.id == "x-1"] == \
        [("subject not in background", None)]


@pytest.mark.slow
def test_cli_with_dev_release_selects_the_epoch_on_it(demo, tmp_path):
    from anonaudit.cli import main
    from anonaudit.demo.population import generate
    from audit.io.loaders import save_jsonl

    save_jsonl(demo.background, tmp_path / "bg.jsonl")
    save_jsonl(demo.originals, tmp_path / "orig.jsonl")
    save_jsonl(demo.release("suppressed").corpus, tmp_path / "supp.jsonl")
    # a dev release of 16 documents (two maskings of each record): 10 at least choose the epoch
    other = generate(8, seed=1, background_per_person=3, extra_people=4).releases
    dev_docs = [*other["labels"].corpus, *(dataclasses.replace(d, id=f"s-{d.id}") for d in other["suppressed"].corpus)]
    save_jsonl(Corpus(dev_docs, name="labels"), tmp_path / "labels.jsonl")
    out = tmp_path / "results.json"
    common = ["attack", "trir", "--background", str(tmp_path / "bg.jsonl"), "--epochs", "2", "--window", "40",
              "--overlap", "8", "--batch-size", "8", "--learning-rate", "3e-4", "--threads", "1",
              "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]
    args = common + ["--release", f"plain={tmp_path / 'orig.jsonl'}", "--release", f"supp={tmp_path / 'supp.jsonl'}",
                     "--dev", f"labels={tmp_path / 'labels.jsonl'}"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    names = {(r["name"], r["release"]) for r in data["results"]}
    assert names == {("trir", "plain"), ("trir.top5", "plain"), ("trir", "supp"), ("trir.top5", "supp")}
    run = data["provenance"]["components"]["attack:trir"]["stats"]["trained_attacker"]
    assert run["loaded_from_cache"] is False
    assert all("dev_accuracy" in h for h in run["history"])
    top = max(h["dev_accuracy"] for h in run["history"])
    best = max(h["epoch"] for h in run["history"] if h["dev_accuracy"] == top)  # a tie: the later epoch
    assert run["chosen_epoch"] == best and run["selection"]["selected_on_dev"]
    assert len(run["history"]) >= 2  # never before two passes (here one epoch a pass: nothing rotates)
    assert any("chosen by accuracy on the dev release 'labels'" in n for n in run["notes"])
    # the dev release may not be a release under test
    bad = CliRunner().invoke(main, common + ["--release", f"labels={tmp_path / 'labels.jsonl'}",
                                             "--dev", f"labels={tmp_path / 'labels.jsonl'}"])
    assert bad.exit_code == 2 and "also a release under test" in bad.output
    missing = CliRunner().invoke(main, ["attack", "trir", "--release", "x.jsonl", "--out", str(out)])
    assert missing.exit_code == 2 and "--background" in missing.output


@pytest.fixture(scope="module")
def tiny_mlm_base(tmp_path_factory):
    """A small BERT with its masked-LM head (random weights, MiniLM's tokenizer), saved as a
    local Hugging Face folder: the kind of base that further pre-training applies to."""
    from transformers import AutoTokenizer, BertConfig, BertForMaskedLM

    folder = tmp_path_factory.mktemp("tiny-mlm")
    tok = AutoTokenizer.from_pretrained(resolve_base(None))
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    import torch

    torch.manual_seed(0)
    BertForMaskedLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_mlm_base_is_further_pretrained_and_fine_tuning_starts_from_it(demo, tiny_mlm_base, tmp_path):
    import torch

    params = dict(TINY, epochs=1, pretrain_window=64, pretrain_overlap=16, pretrain_epochs=1, seed=0,
                  base=str(tiny_mlm_base))
    with_mlm = TRIRAttack(cache_dir=str(tmp_path / "a"), **params).fit(demo)
    info = with_mlm.trained_.info
    assert info["pretrained"] is True and len(info["pretrain_loss"]) == 1 and info["pretrain_loss"][0] > 0
    assert any("masked-LM further pre-training" in n for n in info["notes"])
    # the temporary pre-trained encoder is gone; only the trained attacker stays in the cache
    assert [p.name for p in (tmp_path / "a").iterdir() if p.name.startswith(".")] == []

    without = TRIRAttack(cache_dir=str(tmp_path / "b"), **dict(params, pretrain=False)).fit(demo)
    assert without.trained_.info["pretrained"] is False
    assert with_mlm.trained_.info["cache_key"] != without.trained_.info["cache_key"]

    # Same seed and data: the only difference is the starting encoder, so different weights
    # after fine-tuning show that fine-tuning started from the further pre-trained encoder.
    def query_weights(attack):
        return attack.trained_.model.bert.encoder.layer[0].attention.self.query.weight.detach()

    assert not torch.equal(query_weights(with_mlm), query_weights(without))
    res = with_mlm.evaluate(demo, demo.release("originals"))[0]
    assert res.n == len(demo.originals) and 0.0 <= res.value <= 1.0


@pytest.mark.slow
def test_an_attacker_that_did_not_learn_its_background_says_so(demo, tmp_path):
    """A TRIR near zero from an attacker that cannot even name the people in its own training
    text must not read as 'the release is safe'."""
    weak = TRIRAttack(seed=0, cache_dir=str(tmp_path), **dict(TINY, epochs=1, learning_rate=1e-9)).fit(demo)
    check = weak.trained_.info["fit_check"]
    assert check["accuracy"] < 0.5 and check["windows"] > 0
    res = weak.evaluate(demo, demo.release("originals"))[0]
    assert "under-trained" in res.details["warning"] and "--epochs" in res.details["warning"]
    # the check is saved with the attacker, so a cached attacker warns too
    again = TRIRAttack(seed=0, cache_dir=str(tmp_path), **dict(TINY, epochs=1, learning_rate=1e-9)).fit(demo)
    assert again.trained_.info["loaded_from_cache"] is True
    assert "under-trained" in again.evaluate(demo, demo.release("originals"))[0].details["warning"]


@pytest.mark.slow
def test_bf16_and_int8_on_the_real_minilm_name_whom_fp32_names(demo, trained, tmp_path):
    """Issue 48's arithmetic on the real model path: a bf16 training epoch of MiniLM runs and
    learns, and the trained attacker's bf16 and int8 predictions name the subject fp32 names."""
    attack, _ = trained
    rel = demo.release("originals")
    predicted, own = {}, attack.predict_precision
    for precision in ("fp32", "bf16", "int8"):
        attack.predict_precision = precision
        res = attack.evaluate(demo, rel)[0]
        assert res.details["precision"]["prediction"] == precision
        predicted[precision] = [d.facts["predicted"] for d in res.documents]
    attack.predict_precision = own
    for precision in ("bf16", "int8"):  # at most one document of the set named otherwise
        assert sum(a != b for a, b in zip(predicted[precision], predicted["fp32"])) <= 1, precision

    bf16 = TRIRAttack(seed=0, cache_dir=str(tmp_path), **dict(TINY, epochs=1, train_precision="bf16")).fit(demo)
    info = bf16.trained_.info
    assert info["settings"]["train_precision"] == "bf16" and np.isfinite(info["history"][0]["loss"])
    assert info["fit_check"]["accuracy"] > 2 * info["fit_check"]["chance"]  # it learnt something in one epoch
