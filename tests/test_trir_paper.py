"""The TRI paper's attacker as TRIR's default (issue 19): budgets, the masking style the
augmented background imitates, curation as the paper's code does it, dev-release epoch
selection with early stopping, a TRI file's dev column, and the training speed-ups
(length-bucketed batches, de-duplicated windows, frozen lower layers). Scripted data only."""

from __future__ import annotations

import json

import numpy as np
import pytest

from attackers.trir import TRIRAttack, Windows
from attackers.trir.training_batches import dedup_windows, freeze_lower, length_batches
from attackers.trir.texts import curated_with_offsets, mask_styles, masked_copies, masking_style, original_range
from audit.core.data import Corpus, Document, Release, Scenario, Span
from audit.core.errors import AnonauditError

# ---------------------------------------------------------------------------- budget


def test_paper_budget_is_the_default_and_options_override_it():
    paper = TRIRAttack().settings()
    assert TRIRAttack().budget == "paper"
    assert (paper["epochs"], paper["patience"], paper["augment_ner"], paper["curate"], paper["pretrain"]) == \
        (15, 3, True, True, True)  # epochs and patience in passes (issue 55)
    assert (paper["fixed_passes"], TRIRAttack(budget="fast").settings()["fixed_passes"]) == (5, 5)
    fast = TRIRAttack(budget="fast").settings()
    assert (fast["epochs"], fast["augment_ner"], fast["curate"], fast["pretrain"]) == (5, True, False, False)
    mine = TRIRAttack(budget="fast", epochs=2, curate=True, augment_ner=False, patience=0).settings()
    assert (mine["epochs"], mine["curate"], mine["augment_ner"], mine["patience"]) == (2, True, False, None)
    with pytest.raises(AnonauditError, match="budget must be one of paper, fast"):
        TRIRAttack(budget="huge").settings()
    with pytest.raises(AnonauditError, match="mask_style"):
        TRIRAttack(mask_style="stars")._check_params()


def test_frozen_layers_freeze_every_epoch_unless_told_and_fused_adamw_is_in_the_key():
    """Issue 70's faster attacker is asked for, not the default (it passed the fidelity guard only
    at its tolerance): both budgets train every layer with AdamW's loop; frozen layers stay frozen
    in every epoch the training may run unless freeze_epochs says otherwise; the optimizer's kernel
    and the frozen layers are settings, so an attacker trained with others is not loaded from the
    cache."""
    from attackers.trir import resolve_base

    paper, fast = TRIRAttack(), TRIRAttack(budget="fast")
    assert (paper.freeze_layers, paper.freeze_epochs) == (0, 0) and (fast.freeze_layers, fast.freeze_epochs) == (0, 0)
    assert not paper.settings()["fused_adamw"] and not fast.settings()["fused_adamw"]
    quick = TRIRAttack(freeze_layers=3, fused_adamw=True)
    assert (quick.freeze_layers, quick.freeze_epochs) == (3, 15) and quick.settings()["fused_adamw"]
    assert (TRIRAttack(freeze_layers=3, window_rotation=3).freeze_epochs,
            TRIRAttack(freeze_layers=3, epochs=4).freeze_epochs) == (45, 4)
    assert TRIRAttack(freeze_layers=3, freeze_epochs=2).freeze_epochs == 2
    assert quick.get_params()["freeze_layers"] == 3
    bg = Corpus([Document("a", "Ann lives in Oslo.", subject="ann")], name="bg")
    base = resolve_base(None)
    key = quick.cache_key(bg, base, None)
    assert TRIRAttack(freeze_layers=3, fused_adamw=False).cache_key(bg, base, None) != key
    assert TRIRAttack(fused_adamw=True).cache_key(bg, base, None) != key
    assert paper.cache_key(bg, base, None) not in (key, TRIRAttack(fused_adamw=True).cache_key(bg, base, None))


def test_patience_0_never_stops_early_as_its_help_says_and_a_negative_one_is_refused():
    """Issue 70: the option's type and its help agree (0 is accepted by the command line and a
    spec, and means no plateau stop); a negative patience is refused before anything runs."""
    from audit.core.paramtypes import check_params

    assert check_params(TRIRAttack, {"patience": 0}) == {} and "0: never stop early" in TRIRAttack.__doc__
    assert TRIRAttack(patience=0).settings()["patience"] is None
    assert "patience" in check_params(TRIRAttack, {"patience": -1})
    with pytest.raises(AnonauditError, match="patience must be 0"):
        TRIRAttack(patience=-1)._check_params()


def test_cache_key_follows_the_settings_in_force_not_their_spelling(tmp_path):
    from attackers.trir import resolve_base

    bg = Corpus([Document("a", "Ann lives in Oslo.", subject="ann")], name="bg")
    base = resolve_base(None)
    key = lambda a: a.cache_key(bg, base, None)  # noqa: E731
    assert key(TRIRAttack(budget="fast")) == key(TRIRAttack(budget="paper", epochs=5, patience=2, curate=False,
                                                            pretrain=False, pretrain_epochs=1, freeze_layers=0,
                                                            fused_adamw=False))
    assert key(TRIRAttack(budget="fast")) != key(TRIRAttack(budget="paper"))
    a, b = TRIRAttack(), TRIRAttack()
    b._mask_styles = ("suppress",)
    assert key(a) != key(b)  # another masking style is another training set


def test_the_cli_takes_the_budget_as_a_choice():
    """--budget is the audit's budget now; TRIR's own (paper|fast) is --param budget=..., and the
    old spelling --budget fast still reaches it with a deprecation note (the test below)."""
    from click.testing import CliRunner

    from anonaudit.cli import main

    out = CliRunner().invoke(main, ["attack", "trir", "--help"])
    assert out.exit_code == 0
    text = " ".join(out.output.split())
    assert "--budget quick|standard|full" in text and "--param budget=VALUE" in text
    assert "--patience" in out.output and "--mask-style" in out.output


# ---------------------------------------------------------------------------- masking style


def _release(name: str, texts_and_spans) -> Release:
    docs = []
    for i, (text, spans) in enumerate(texts_and_spans):
        docs.append(Document(f"d{i}", text, subject=f"p{i}",
                             spans=tuple(Span(s, e, original="x", orig_start=0, orig_end=1) for s, e in spans)))
    return Release(name, Corpus(docs, name=name))


def test_masking_style_read_from_recorded_replacements():
    labels = _release("labels", [("[PERSON] met [ORG] in [GPE].", [(0, 8), (13, 18), (22, 27)])])
    assert masking_style(labels) == "label:[{}]"
    bare = _release("bare", [("PERSON met ORG today.", [(0, 6), (11, 14)])])
    assert masking_style(bare) == "label"
    suppressed = _release("supp", [(" met  in .", [(0, 0), (5, 5), (9, 9)])])
    assert masking_style(suppressed) == "suppress"
    sensitive = _release("sens", [("SENSITIVE met SENSITIVE.", [(0, 9), (14, 23)])])
    assert masking_style(sensitive) == "token:SENSITIVE"


def test_masking_style_read_from_plain_text_and_the_default():
    plain = Release("tri", Corpus([Document("a", "*** was born in *** and played for SENSITIVE.")], name="tri"))
    assert masking_style(plain).startswith("token:")
    labelled = Release("ner", Corpus([Document("a", "PERSON was born in GPE on DATE.")], name="ner"))
    assert masking_style(labelled) == "label"
    clean = Release("orig", Corpus([Document("a", "Ann was born in Oslo.")], name="orig"))
    assert masking_style(clean) is None
    assert mask_styles([clean]) == ["label"]  # nothing shown: the paper's spaCy labels
    sens = _release("sens", [("SENSITIVE met SENSITIVE.", [(0, 9), (14, 23)])])
    sens2 = _release("sens2", [("SENSITIVE left.", [(0, 9)])])
    # the most common style first (ties by name), each once, at most three
    assert mask_styles([clean, plain, sens, labelled, sens2]) == ["token:SENSITIVE", "label", "token:***"]


def test_masked_copies_imitate_each_style():
    from audit.models.nlp import Spacy

    text = "Maria Jensen moved to Copenhagen in March 2004."
    label, wrapped, supp, sens = masked_copies(Spacy(), [text], ["label", "label:[{}]", "suppress",
                                                                 "token:SENSITIVE"])
    assert label[0].startswith("PERSON moved to ") and "Copenhagen" not in label[0] and "DATE" in label[0]
    assert wrapped[0].startswith("[PERSON] moved to [") and "[DATE]" in wrapped[0]
    assert "Maria" not in supp[0] and "PERSON" not in supp[0] and "moved to" in supp[0]
    assert sens[0].startswith("SENSITIVE moved to SENSITIVE")


# ---------------------------------------------------------------------------- curation


def test_curation_as_the_paper_keeps_sentence_ends_and_maps_back_to_the_text():
    from audit.models.nlp import Spacy

    text = "The nurses were working in Oslo, Norway. She moved!"
    ((cur, pieces),) = curated_with_offsets(Spacy(), [text])
    words = cur.split()
    assert "The" not in words and "were" not in words and "in" not in words and "," not in cur
    assert "nurse" in words and "work" in words
    assert "Norway." in words  # the full stop stays, glued to its word
    assert "!" not in cur
    i = cur.index("Norway")
    start, end = original_range(pieces, i, i + len("Norway."))
    assert text[start:end] == "Norway."


# ---------------------------------------------------------------------------- speed-ups


def test_length_batches_hold_every_window_once_with_less_padding():
    rng = np.random.default_rng(0)
    lengths = [int(x) for x in rng.integers(5, 100, size=400)]
    order = list(rng.permutation(400))
    batches = length_batches(order, lengths, 16, seed=3)
    assert sorted(i for b in batches for i in b) == list(range(400))
    assert all(len(b) <= 16 for b in batches)
    assert batches == length_batches(order, lengths, 16, seed=3)  # seeded

    def padded(bs):
        return sum(max(lengths[i] for i in b) * len(b) for b in bs)

    plain = [order[b : b + 16] for b in range(0, 400, 16)]
    assert padded(batches) < 0.8 * padded(plain)


def test_dedup_keeps_one_window_per_text_and_person():
    w = Windows(ids=[[1, 2], [1, 2], [1, 2], [3]], doc=[0, 1, 2, 3], chars=[None] * 4)
    out, y = dedup_windows(w, [0, 0, 1, 0])
    assert out.ids == [[1, 2], [1, 2], [3]] and y == [0, 1, 0] and out.doc == [0, 2, 3]


def test_freeze_lower_layers_and_release_them():
    from transformers import BertConfig, BertForSequenceClassification

    model = BertForSequenceClassification(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=3,
                                                     num_attention_heads=2, intermediate_size=32, num_labels=3))
    assert freeze_lower(model, 2, True) > 0
    assert not any(p.requires_grad for p in model.bert.embeddings.parameters())
    assert not any(p.requires_grad for p in model.bert.encoder.layer[1].parameters())
    assert all(p.requires_grad for p in model.bert.encoder.layer[2].parameters())
    assert all(p.requires_grad for p in model.classifier.parameters())
    freeze_lower(model, 2, False)
    assert all(p.requires_grad for p in model.parameters())


# ---------------------------------------------------------------------------- epoch selection


def _scripted_fine_tune(dev_accuracies, dev_size=20, y=(0, 1, 0, 1), **params):
    """Run TRIR's training routine (:class:`FineTuning`, the one a local and a Ray Train training
    share) with scripted epochs: a linear model whose weights say which epoch they are from,
    ``dev_size`` dev documents and scripted dev accuracies per epoch (the last one repeated)."""
    import torch

    from attackers.trir.fine_tuning import FineTuning

    attack = TRIRAttack(progress=False, **params)
    model = torch.nn.Linear(2, 2)
    epochs_run = []

    class Scripted:
        def epoch(self, epoch, order):
            epochs_run.append(epoch)
            with torch.no_grad():
                model.weight.fill_(float(epoch))
            return {"epoch": epoch, "loss": 1.0 / epoch}

        def dev_accuracy(self):
            return dev_accuracies[min(len(dev_accuracies), int(model.weight[0, 0].item())) - 1]

        def snapshot(self):
            return {k: v.detach().clone() for k, v in model.state_dict().items()}

        def checkpoint(self, epoch, history, best):
            pass

    tuned = FineTuning(attack, list(y), dev_size).run(Scripted())
    if tuned.chosen != len(tuned.history):
        model.load_state_dict(tuned.best[2])
    dev = Release("dev", Corpus([Document("a", "x", subject="p")], name="dev"))
    return tuned.history, tuned.chosen, epochs_run, model, [tuned.note(dev)], tuned.selection


def test_dev_epoch_selection_stops_early_and_keeps_the_best_epoch():
    history, chosen, run, model, notes, _ = _scripted_fine_tune([0.2, 0.5, 0.4, 0.45, 0.5, 0.9, 0.95])
    # nothing rotates (one epoch a pass); patience 3 passes: epochs 3-5
    # bring nothing strictly better than epoch 2, and epoch 5 ties it, so the later one is kept
    assert run == [1, 2, 3, 4, 5] and chosen == 5 and len(history) == 5
    assert model.weight[0, 0].item() == 5.0  # the kept epoch's weights are back (here the last)
    assert "epoch 5 (5 passes over the windows) of at most 15" in notes[-1]
    assert "no better dev accuracy for 3 pass(es)" in notes[-1]
    _, chosen, run, model, _, _ = _scripted_fine_tune([0.2, 0.6, 0.5, 0.4, 0.3])
    assert run == [1, 2, 3, 4, 5] and chosen == 2 and model.weight[0, 0].item() == 2.0
    # a perfect dev accuracy stops only once every window was seen twice
    _, chosen, run, _, notes, _ = _scripted_fine_tune([1.0, 1.0, 0.4], budget="paper")
    assert run == [1, 2] and chosen == 2 and "every dev document named" in notes[-1]
    _, chosen, run, _, _, _ = _scripted_fine_tune([0.1, 0.2, 0.3, 0.2, 0.1, 0.1, 0.9], epochs=7, patience=0)
    assert run == [1, 2, 3, 4, 5, 6, 7] and chosen == 7  # patience 0: never stop early


def test_rotated_epochs_count_in_passes_issue_55():
    """Issue 55's curve: under a rotation of 3 epochs, counting patience in rotated epochs kept
    epoch 2 (two thirds of a pass, on a tie); counted in passes, with two passes at least and
    ties to the later epoch, the attacker trains through epoch 6 and stops three passes later."""
    curve = [0.2, 0.6, 0.533, 0.467, 0.6, 0.8, 0.7, 0.8, 0.733, 0.6]
    history, chosen, run, model, notes, sel = _scripted_fine_tune(curve, dev_size=15, y=(0, 0, 0, 1, 1, 1),
                                                                  batch_size=1, window_rotation=3)
    assert sel["rotation_period"] == 3 and sel["patience_epochs"] == 9 and sel["max_epochs"] == 45
    # epoch 8 ties epoch 6 (kept: later), but the patience counts from epoch 6's improvement
    assert run == list(range(1, 16)) and chosen == 8 and model.weight[0, 0].item() == 8.0
    assert [h["passes"] for h in history][:3] == [0.333, 0.667, 1.0] and sel["chosen_passes"] == 2.667
    assert sel["warnings"] == [] and "15 documents" in sel["cautions"][0]  # a small dev release: a caution
    # a lucky early reading is neither kept nor a reason to stop: the epochs of the first two
    # passes are not candidates, and the patience counts from the first one that is
    _, chosen, run, _, _, sel = _scripted_fine_tune([0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5], y=(0, 0, 0, 1, 1, 1),
                                                    batch_size=1, window_rotation=3)
    assert run == list(range(1, 16)) and chosen == 15 and sel["chosen_passes"] == 5.0 and sel["warnings"] == []
    # a training capped below two passes keeps what it has, and doubts it
    _, chosen, run, _, _, sel = _scripted_fine_tune([0.9, 0.5, 0.5], y=(0, 0, 0, 1, 1, 1), batch_size=1,
                                                    window_rotation=3, epochs=1)
    assert run == [1, 2, 3] and chosen == 3 and "fewer than 2" in sel["warnings"][0]


def test_a_dev_release_too_small_to_choose_trains_fixed_passes():
    history, chosen, run, _, notes, sel = _scripted_fine_tune([0.5, 0.9, 0.1, 0.1, 0.1], dev_size=5)
    assert run == [1, 2, 3, 4, 5] and chosen == 5 and not sel["selected_on_dev"]  # paper: 5 passes
    assert "too small to choose an epoch: trained a fixed 5 epoch(s)" in notes[-1]
    assert "5 document(s), too few to choose" in sel["cautions"][0]
    assert all("dev_accuracy" in h for h in history)  # still read, for the curve
    _, chosen, run, _, _, sel = _scripted_fine_tune([0.5], dev_size=5, budget="fast", y=(0, 0, 0, 1, 1, 1),
                                                    batch_size=1, window_rotation=2)
    assert run == list(range(1, 11)) and chosen == 10 and sel["chosen_passes"] == 5.0  # fast: 5 passes of 2 epochs


# ---------------------------------------------------------------------------- TRI dev column


def test_tri_dev_abstract_is_the_dev_release_not_a_release_under_test(tmp_path):
    from audit.io.loaders import load_dev, load_release_file, load_tri

    rows = [{"name": n, "public_knowledge": f"{n} is an actor from Oslo.", "spacy": "PERSON is an actor from GPE.",
             "manual": "*** is an actor.", "dev_abstract": f"PERSON acted in Oslo ({n})."} for n in ("ann", "bob")]
    f = tmp_path / "tri.json"
    f.write_text(json.dumps(rows))
    background, releases = load_tri(f)
    assert [r.name for r in releases] == ["spacy", "manual"]
    assert [r.name for r in load_release_file(f)] == ["spacy", "manual"]
    dev = load_dev(f)
    assert dev.name == "dev_abstract" and [d.subject for d in dev.corpus] == ["ann", "bob"]
    assert load_dev(tmp_path / "tri.json", format="tri") is not None
    plain = tmp_path / "bg.jsonl"
    plain.write_text(json.dumps({"id": "a", "text": "x", "subject": "ann"}) + "\n")
    assert load_dev(plain) is None
    # the attacker takes the scenario's dev release when none is given
    sc = Scenario(background=background, releases=tuple(releases), dev=dev)
    assert TRIRAttack()._dev_release(sc) is dev
    assert TRIRAttack()._dev_release(Scenario(background=background)) is None
    # by name: the scenario's dev release; a release under test never (it chose the epoch on the
    # release it then scored, overstating TRIR, without a word)
    assert TRIRAttack(dev="dev_abstract")._dev_release(sc) is dev
    with pytest.raises(AnonauditError, match="'spacy' is a release under test: choosing the epoch on it would "
                                             "overstate TRIR"):
        TRIRAttack(dev="spacy")._dev_release(sc)
    with pytest.raises(AnonauditError, match="'nope' is not in the scenario"):
        TRIRAttack(dev="nope")._dev_release(sc)


def test_runner_gives_the_tri_dev_column_to_the_scenario(tmp_path, monkeypatch):
    from audit.core.interfaces import Attack
    from audit.core.registry import Registry
    from audit.core.results import Result
    from audit.pipeline.runner import Audit, parse_spec

    rows = [{"name": n, "public_knowledge": f"{n} is an actor.", "spacy": "PERSON is an actor.",
             "dev_abstract": "PERSON acted."} for n in ("ann", "bob")]
    f = tmp_path / "tri.json"
    f.write_text(json.dumps(rows))
    seen = {}

    class Probe(Attack):
        name = "probe"
        requires = frozenset({"background"})

        def __init__(self, seed: int = 0, progress: bool = False):
            pass

        def evaluate(self, scenario, release):
            seen[release.name] = scenario.dev.name if scenario.dev else None
            return [Result("attack", "probe", release.name, 0.0, None, 1)]

    reg = Registry()
    reg._entry_points_loaded = True  # only the probe
    reg.register("attack")(Probe)
    spec = parse_spec({"out": str(tmp_path), "background": {"path": str(f), "format": "tri"},
                       "releases": [{"path": str(f), "format": "tri"}], "attacks": ["probe"]},
                      base=tmp_path, source="test", registry=reg)
    Audit(spec, registry=reg, progress=False).run()
    assert seen == {"spacy": "dev_abstract"}


def test_result_states_the_budget_the_base_and_whether_it_was_pretrained():
    from tests.test_trir import fake_trained

    docs = [Document(f"d{i}", f"text about p{i}", subject=f"p{i}") for i in range(3)]
    rel = Release("rel", Corpus(docs, name="rel"))
    attack = fake_trained(TRIRAttack(budget="fast", progress=False), ["p0", "p1", "p2"], [0, 1, 1])
    attack.trained_.info.update(budget="fast", pretrained=False, mask_styles=["suppress"], max_epochs=5,
                                settings={"curate": False}, base="/somewhere/all-minilm-folder")
    head, _ = attack.evaluate(Scenario(background=Corpus(docs, name="bg"), releases=(rel,)), rel)
    d = head.details
    assert d["budget"] == "fast" and d["pretrained"] is False and d["augmented_styles"] == ["suppress"]
    assert d["base"] == "all-minilm-folder" and d["max_epochs"] == 5 and d["curated"] is False
    assert d["attacker"].startswith("fast budget, base all-minilm-folder, not pre-trained further, "
                                     "background augmented with 1 masked copy")


def test_the_report_states_how_the_trir_attacker_was_built():
    from reports.context import _attack_row
    from audit.core.results import Result
    from audit.core.stats import risk

    r = Result.from_risk("trir", "rel", risk(3, 10, 0.1), details={"attacker": "paper budget, base <x>"})
    assert _attack_row(r)["setup"] == "paper budget, base <x>"
    assert _attack_row(Result.from_risk("trir", "rel", risk(3, 10, 0.1)))["setup"] == ""


# ---------------------------------------------------------------------------- a new MLM head (real model, tiny)


@pytest.fixture(scope="module")
def tiny_headless_base(tmp_path_factory):
    """A tiny BERT saved without its masked-LM head (as the embedded MiniLM ships), MiniLM's tokenizer."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertModel

    from attackers.trir import has_mlm_head, resolve_base

    folder = tmp_path_factory.mktemp("tiny-headless")
    tok = AutoTokenizer.from_pretrained(resolve_base(None))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(folder)
    tok.save_pretrained(folder)
    assert not has_mlm_head(str(folder))
    return folder


@pytest.mark.slow
def test_a_base_without_mlm_head_gets_one_and_is_pretrained(tiny_headless_base, tmp_path):
    texts = {"ann": "Ann grew up on a sheep farm near Tromso and won the silver lantern award.",
             "bob": "Bob studied violin at a conservatory in Ghent and toured with an orchestra.",
             "cy": "Cy was a lifeguard in Perth before acting in two films about the sea."}
    bg = Corpus([Document(f"{s}-{i}", t, subject=s) for s, t in texts.items() for i in range(2)], name="bg")
    params = dict(base=str(tiny_headless_base), budget="fast", augment_ner=False, epochs=1, window=32, overlap=8,
                  batch_size=4, pretrain=True, pretrain_window=64, pretrain_overlap=16, pretrain_epochs=1,
                  num_threads=1, progress=False, cache_dir=str(tmp_path))
    skipped = TRIRAttack(**params).fit(Scenario(background=bg))
    assert skipped.trained_.info["pretrained"] is False
    assert any("pretraining skipped" in n for n in skipped.trained_.info["notes"])
    made = TRIRAttack(new_mlm_head=True, **params).fit(Scenario(background=bg))
    info = made.trained_.info
    assert info["pretrained"] is True and len(info["pretrain_loss"]) == 2  # the head's epoch, then the whole model
    assert any("a new one trained on the background first" in n for n in info["notes"])
    assert info["cache_key"] != skipped.trained_.info["cache_key"]


def test_the_verdict_of_a_release_leads_with_the_stronger_re_identification_attacker():
    from audit.core.results import Result, ResultsFile
    from audit.core.stats import risk
    from reports.context import build_context

    rf = ResultsFile()
    rf.add(Result.from_risk("trir", "ner", risk(8, 40, 0.02)))
    rf.add(Result.from_risk("phrase_search_reid", "ner", risk(30, 40, 0.02)))
    rf.add(Result.from_risk("trir", "manual", risk(4, 40, 0.02)))
    rf.add(Result.from_risk("phrase_search_reid", "manual", risk(2, 40, 0.02)))
    verdicts = {v["release"]: v for v in build_context(rf)["verdicts"]}
    assert verdicts["ner"]["deciding"][0].startswith("Phrase search re-identification 75.0%")
    assert verdicts["ner"]["deciding"][1].startswith("TRIR 20.0%")
    assert verdicts["manual"]["deciding"][0].startswith("TRIR 10.0%")


@pytest.mark.slow
def test_cli_trir_on_a_tri_file_chooses_the_epoch_on_its_dev_column(tmp_path):
    from click.testing import CliRunner

    from anonaudit.cli import main

    facts = {"ann": "grew up on a sheep farm near Tromso and won the silver lantern award",
             "bob": "studied violin at a conservatory in Ghent and toured with an orchestra",
             "cy": "was a lifeguard in Perth before acting in two films about the sea",
             "dee": "ran a bakery in Lyon for ten years before her first stage role"}
    rows = [{"name": n, "public_knowledge": f"{n.title()} {f}. {n.title()} is an actor.",
             "spacy": f"PERSON {f}.", "dev_abstract": f"PERSON, an actor, {f}."} for n, f in facts.items()]
    tri = tmp_path / "tri.json"
    tri.write_text(json.dumps(rows))
    out = tmp_path / "results.json"
    res = CliRunner().invoke(main, ["attack", "trir", "--tri", str(tri), "--budget", "fast", "--epochs", "2",
                                    "--window", "32", "--overlap", "8", "--batch-size", "4", "--threads", "1",
                                    "--cache-dir", str(tmp_path / "cache"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert {(r["name"], r["release"]) for r in data["results"]} == {("trir", "spacy"), ("trir.top5", "spacy")}
    head = next(r for r in data["results"] if r["name"] == "trir")
    assert head["details"]["dev_release"] == "dev_abstract" and head["details"]["budget"] == "fast"
    run = data["provenance"]["components"]["attack:trir"]["stats"]["trained_attacker"]
    assert all("dev_accuracy" in h for h in run["history"])
