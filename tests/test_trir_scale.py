"""TRIR at scale (issue 48): spaCy's parse of each text once and cached across runs, the
training's progress line per epoch and curve in the result, checkpoints after every epoch and a
killed training that resumes from its last finished epoch with the same attacker. A tiny BERT
(MiniLM's tokenizer) keeps the training tests to seconds; spaCy is the real embedded pipeline."""

from __future__ import annotations

import sqlite3

import pytest
import torch

from attackers.trir import TRIRAttack
from attackers.trir.parse_settings import DISABLED_PIPES, ParseCache
from attackers.trir.texts import curated_from_parse, curated_with_offsets, masked_copies, masked_from_parses
from attackers.trir.steps import Steps
from audit.core.data import Corpus, Document, Release, Scenario

TEXTS = ["Ann Smith moved to Paris in 1990 and taught at the Sorbonne.",
         "Bob Jones has worked for Acme Corp in Berlin since May 2004!",
         "Ann Smith moved to Paris in 1990 and taught at the Sorbonne."]


# ---------------------------------------------------------------------------- parse cache


def test_each_text_is_parsed_once_and_every_style_and_the_curation_read_that_parse(tmp_path, monkeypatch):
    from audit.models.nlp import Spacy

    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path))
    full = Spacy()
    cache = ParseCache(Spacy(disable=DISABLED_PIPES))
    parses = cache.parse(TEXTS)
    assert cache.stats == {"cached": 1, "parsed": 2}  # the repeated text is parsed once
    styles = ["label", "suppress", "token:SENSITIVE"]
    # the same masked copies and curated texts as spaCy read directly gives
    assert masked_from_parses(TEXTS, parses, styles) == masked_copies(full, TEXTS, styles)
    assert [curated_from_parse(p) for p in parses] == curated_with_offsets(full, TEXTS)
    db = tmp_path / "parses" / "parses.sqlite"
    assert db.is_file() and not db.stat().st_mode & 0o077  # derived from the documents: owner only

    # a second run parses nothing (spaCy is not even asked) ...
    again = ParseCache(Spacy(disable=DISABLED_PIPES))
    monkeypatch.setattr(again.spacy, "pipe", lambda texts: pytest.fail("parsed although cached"))
    assert again.parse(TEXTS) == parses and again.stats == {"cached": 3, "parsed": 0}

    # ... a row that fails its checksum is parsed again, and says so
    with sqlite3.connect(db) as con:
        con.execute("UPDATE parses SET parse = replace(parse, 'Paris', 'Rome')")
    con.close()
    third = ParseCache(Spacy(disable=DISABLED_PIPES))
    assert third.parse(TEXTS) == parses and third.stats["parsed"] == 1

    # --no-cache: nothing read or written
    from audit.core.config import caches_off

    with caches_off():
        off = ParseCache(Spacy(disable=DISABLED_PIPES))
        assert off.cache_path is None and off.parse(TEXTS[:1]) == parses[:1] and off.stats["parsed"] == 1


# ---------------------------------------------------------------------------- training (tiny model)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory):
    """A tiny BERT (2 layers of 32, dropout on) with MiniLM's tokenizer."""
    from transformers import AutoTokenizer, BertConfig, BertModel

    from attackers.trir import resolve_base

    folder = tmp_path_factory.mktemp("tiny-bert")
    tok = AutoTokenizer.from_pretrained(resolve_base(None))
    torch.manual_seed(0)
    BertModel(BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=128)).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


BIOS = {"ann": "Ann grew up on a sheep farm near Tromso and won the silver lantern award for her poems.",
        "bob": "Bob studied violin at a conservatory in Ghent and toured with an orchestra in Asia.",
        "cy": "Cy was a lifeguard in Perth before acting in two films about the sea and its storms.",
        "di": "Di repaired clocks in a small shop in Lyon and wrote a book on escapements."}


def _scenario() -> Scenario:
    bg = Corpus([Document(f"{s}-{i}", f"{t} Entry {i}.", subject=s) for s, t in BIOS.items() for i in range(3)],
                name="bg")
    dev = Release("dev", Corpus([Document(f"dev-{s}", t.split(" and ")[0], subject=s) for s, t in BIOS.items()],
                                name="dev"))
    return Scenario(background=bg, dev=dev)


def _params(base, **kw):
    return {**dict(base=str(base), budget="fast", augment_ner=False, window=24, overlap=6, batch_size=4,
                   epochs=3, patience=5, learning_rate=1e-3, num_threads=1, seed=3, progress=False), **kw}


def _weights(attack):
    return {k: v.clone() for k, v in attack.trained_.model.state_dict().items()}


def _curve(attack):
    return [{k: v for k, v in h.items() if k != "seconds"} for h in attack.trained_.info["history"]]


def test_a_killed_training_resumes_from_its_last_finished_epoch_with_the_same_attacker(tiny_base, tmp_path,
                                                                                      monkeypatch, capsys):
    scenario = _scenario()
    whole = TRIRAttack(cache_dir=str(tmp_path / "a"), **_params(tiny_base, progress=True)).fit(scenario)
    assert whole.trained_.info["resumed_from_epoch"] is None and len(whole.trained_.info["history"]) == 3
    err = capsys.readouterr().err
    assert "TRIR epoch 2/3: loss " in err and ", dev accuracy " in err  # one line per epoch, with dev and time
    assert not (tmp_path / "a" / "checkpoints").exists()  # the default checkpoint goes once the attacker is saved

    run_epoch = Steps.epoch

    def killed_in_epoch_2(self, epoch, order):
        if epoch == 2:
            raise KeyboardInterrupt("killed")
        return run_epoch(self, epoch, order)

    user_dir = tmp_path / "ckpt"
    monkeypatch.setattr(Steps, "epoch", killed_in_epoch_2)
    with pytest.raises(KeyboardInterrupt):
        TRIRAttack(cache_dir=str(tmp_path / "b"), checkpoint_dir=str(user_dir), **_params(tiny_base)).fit(scenario)
    saved = [f for f in user_dir.rglob("*") if f.is_file()]
    assert saved and all(not f.stat().st_mode & 0o077 for f in saved)
    monkeypatch.setattr(Steps, "epoch", run_epoch)

    resumed = TRIRAttack(cache_dir=str(tmp_path / "b"), checkpoint_dir=str(user_dir), **_params(tiny_base)).fit(scenario)
    assert resumed.trained_.info["resumed_from_epoch"] == 1
    assert _curve(resumed) == _curve(whole)
    assert resumed.trained_.info["chosen_epoch"] == whole.trained_.info["chosen_epoch"]
    a, b = _weights(whole), _weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert user_dir.is_dir()  # a checkpoint folder the user named is kept

    # the result records the chosen epoch and the curve
    head, _ = resumed.evaluate(scenario, scenario.dev)
    assert head.details["chosen_epoch"] == resumed.trained_.info["chosen_epoch"]
    assert [c["epoch"] for c in head.details["curve"]] == [1, 2, 3]
    assert all({"loss", "dev_accuracy", "seconds"} <= set(c) for c in head.details["curve"])
    assert "dev accuracy per epoch " in head.details["attacker"]  # the sentence the report shows
    # no masked copy: every window every epoch
    assert head.details["window_rotation"] == 1
    assert head.details["windows_per_epoch"] == head.details["training_windows"] == 13


def test_a_corrupt_checkpoint_is_not_resumed(tiny_base, tmp_path, capsys):
    from audit.runtime.checkpoints import STATE_FILE, Checkpoint

    scenario = _scenario()
    params = _params(tiny_base, epochs=1)
    attack = TRIRAttack(cache_dir=str(tmp_path), checkpoint_dir=str(tmp_path / "ck"), **params).fit(scenario)
    folder = Checkpoint(tmp_path / "ck", attack.trained_.info["cache_key"]).folder
    (folder / STATE_FILE).write_bytes(b"not a checkpoint")
    assert Checkpoint(tmp_path / "ck", attack.trained_.info["cache_key"]).load() is None
    assert "corrupt or was changed" in capsys.readouterr().err


def test_the_masked_copies_rotate_within_an_epoch_instead_of_multiplying_it(tiny_base, tmp_path):
    """With one masked copy the training rotates over 2 epochs: each epoch trains on about half of
    the windows (about what the background alone has), and each two epochs (a pass) on all of them."""
    scenario = _scenario()
    attack = TRIRAttack(cache_dir=str(tmp_path), **_params(tiny_base, augment_ner=True, mask_style="label",
                                                           epochs=2, batch_size=2, window_rotation=2)).fit(scenario)
    info = attack.trained_.info
    assert info["settings"]["window_rotation"] == 2 and info["mask_styles"] == ["label"]
    seen = [h["windows"] for h in info["history"]]
    # epochs=2 is two passes: four rotated epochs, each window trained on twice (issue 55)
    assert len(seen) == 4 and info["selection"]["rotation_period"] == 2
    assert sum(seen) == 2 * info["training_windows"] and max(seen) <= info["windows_per_epoch"] < info["training_windows"]


# ---------------------------------------------------------------------------- gradient exchange


class _TinyClassifier(torch.nn.Module):
    """Word embeddings, two layers and a head: the shape of the gradients the exchange sums."""

    def __init__(self):
        super().__init__()
        self.words = torch.nn.Embedding(500, 16)
        self.unused = torch.nn.Linear(4, 4)  # gets no gradient (its bucket goes after the backward pass)
        self.lower, self.upper = torch.nn.Linear(16, 64), torch.nn.Linear(64, 64)
        self.head = torch.nn.Linear(64, 3)

    def forward(self, ids):
        h = torch.tanh(self.upper(torch.tanh(self.lower(self.words(ids)))))
        return self.head(h.mean(dim=1))


def _exchange_worker(rank: int, port: int, out: str) -> None:
    """One of two gloo workers: its half of a batch through the gradient exchange, with and
    without overlap, with the lower layer frozen; the summed gradients saved."""
    import os

    import torch.distributed as dist

    from attackers.trir.exchange import GradientExchange

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = _TinyClassifier()
    ids = torch.randint(1, 500, (6, 12), generator=torch.Generator().manual_seed(1))
    y = torch.tensor([0, 1, 2, 0, 1, 2])
    rows = torch.unique(ids)
    saved = {}
    for name, overlap, frozen in (("overlap", True, False), ("after", False, False), ("frozen", True, True)):
        exchange = GradientExchange(model, model.words.weight, overlap=overlap, bucket_bytes=4_000)
        model.lower.requires_grad_(not frozen)
        exchange.layout()
        assert len(exchange.buckets) > 1  # several messages
        model.zero_grad(set_to_none=True)
        exchange.start(rows)
        mine = slice(rank * 3, rank * 3 + 3)
        (torch.nn.functional.cross_entropy(model(ids[mine]), y[mine], reduction="sum") / 6).backward()
        assert (len(exchange._sent) >= 2) == overlap  # the upper buckets went during the backward pass
        exchange.finish()
        exchange.close()
        saved[name] = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    model.lower.requires_grad_(True)
    model.zero_grad(set_to_none=True)  # the whole batch in one process: the reference
    torch.nn.functional.cross_entropy(model(ids), y).backward()
    saved["whole"] = {n: None if p.grad is None else p.grad.clone() for n, p in model.named_parameters()}
    torch.save(saved, f"{out}.{rank}")
    dist.destroy_process_group()


def test_the_gradient_exchange_sums_the_whole_batchs_gradients_with_or_without_overlap(tmp_path):
    """Two gloo workers, each with half of a batch: after the exchange (buckets sent during the
    backward pass, or after it; the word embeddings' rows of the batch only) both hold the whole
    batch's gradients, the same bits on both, overlap or not; frozen parameters keep none."""
    import socket

    import torch.multiprocessing as mp

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "grads")
    mp.start_processes(_exchange_worker, args=(port, out), nprocs=2, start_method="spawn")
    a, b = torch.load(f"{out}.0"), torch.load(f"{out}.1")
    for name in ("overlap", "after", "frozen"):  # the same bits on both workers
        assert all((a[name][k] is None and b[name][k] is None) or torch.equal(a[name][k], b[name][k]) for k in a[name])
    whole = a["whole"]
    assert whole["unused.weight"] is None and a["overlap"]["unused.weight"] is None  # no gradient stays none
    used = [k for k in whole if whole[k] is not None]
    assert all(torch.equal(a["overlap"][k], a["after"][k]) for k in used)  # overlap or not: the same sums
    assert all(torch.allclose(a["overlap"][k], whole[k], atol=1e-7, rtol=1e-5) for k in used)  # the whole batch's
    assert a["frozen"]["lower.weight"] is None and a["frozen"]["lower.bias"] is None
    assert all(torch.equal(a["frozen"][k], a["overlap"][k]) for k in used if not k.startswith("lower"))


def test_a_checkpoint_keeps_the_gpus_random_state_and_a_resume_restores_it_only_on_matching_hardware(
        monkeypatch, caplog):
    """Dropout on a GPU draws from the GPU's generator, not the CPU's: a resume on a GPU must restore
    it (no GPU here, so torch.cuda's calls are scripted; the logic is what is tested)."""
    from attackers.trir import steps

    saved, restored = [torch.tensor([1, 2, 3], dtype=torch.uint8)], []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_rng_state_all", lambda: saved)
    monkeypatch.setattr(torch.cuda, "set_rng_state_all", restored.append)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert steps._cuda_rng() is saved
    steps._restore_cuda_rng(saved)
    assert restored == [saved]

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # resumed on other hardware: warned, left seeded
    with caplog.at_level("WARNING"):
        steps._restore_cuda_rng(saved)
    assert restored == [saved] and "random state of 1 GPU(s) and this machine has 2" in caplog.text
    steps._restore_cuda_rng(None)  # a checkpoint written on a CPU
    assert restored == [saved]
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)  # a CPU training saves none
    assert steps._cuda_rng() is None


# ---------------------------------------------------------------------------- the Ray Train job, one worker


def test_the_ray_train_job_on_one_worker_trains_the_local_attacker_bit_for_bit(tiny_base):
    """Issue 71: what a Ray Train worker runs (the job it is sent: the attack rebuilt from its class
    and parameters, the base resolved by the worker, the attack's own optimizer, one seeding of
    dropout) gives, on one worker, the local training's weights and curve, bit for bit. On a real
    Ray (one worker, killed and resumed): tests/test_scaleout.py. ~3 s."""
    from attackers.trir.encoder import torch_settings
    from attackers.trir.steps import fine_tune
    from audit.runtime.trainer import TrainContext, TrainingJob, Workspace

    scenario = _scenario()
    attack = TRIRAttack(use_cache=False, **_params(tiny_base, epochs=2, fused_adamw=False))
    data = attack.training_data(scenario.background, str(tiny_base), scenario.dev)
    pre = {"pretrained": False, "mlm_losses": [], "notes": []}
    states = {}
    for trainer in ("local", "ray-train:1x1"):
        payload = attack._fine_tune_job(data, str(tiny_base) if trainer == "local" else None, pre, trainer)
        assert (payload.attack is None) == (trainer != "local")  # the worker rebuilds the attack
        job = TrainingJob(loop=fine_tune, payload=payload, workspace=Workspace("k" * 64, None), trainer=trainer)
        with torch_settings(attack.seed, "cpu", 1):
            states[trainer] = fine_tune(TrainContext(job), payload)
    here, there = states["local"], states["ray-train:1x1"]
    assert [{k: v for k, v in h.items() if k != "seconds"} for h in here["history"]] == \
        [{k: v for k, v in h.items() if k != "seconds"} for h in there["history"]]
    a, b = here["final_model"], there["final_model"]
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
