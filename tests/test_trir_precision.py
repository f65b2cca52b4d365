"""TRIR's arithmetic (issue 48): bf16 autocast for the training steps and prediction, dynamic int8
for prediction. What ``auto`` resolves to, what reaches the cache key, the command line and the
result, and that each precision really changes the arithmetic while staying deterministic. A tiny
BERT (MiniLM's tokenizer) keeps these to seconds; the real MiniLM is in tests/test_trir.py."""

from __future__ import annotations

import pickle

import numpy as np
import pytest
import torch

from attackers.trir import TRIRAttack, make_windows, predict_logits, resolve_base
from attackers.trir import encoder
from attackers.trir.encoder import PREDICT_PRECISIONS, TRAIN_PRECISIONS, inference_model, resolve_precision
from attackers.trir.token_windows import WindowLogits
from audit.core.data import Corpus, Document, Release, Scenario
from audit.core.errors import AnonauditError
from tests.test_trir_scale import _params, _scenario, _weights, tiny_base  # noqa: F401  (the tiny BERT fixture)


def test_auto_is_bf16_only_where_the_device_computes_it_natively(monkeypatch):
    monkeypatch.setattr(encoder, "native_bf16", lambda device: True)
    assert resolve_precision("auto", "cpu", TRAIN_PRECISIONS, "train_precision") == "bf16"
    assert resolve_precision(None, "cpu", PREDICT_PRECISIONS, "predict_precision") == "bf16"
    monkeypatch.setattr(encoder, "native_bf16", lambda device: False)
    assert resolve_precision("auto", "cpu", TRAIN_PRECISIONS, "train_precision") == "fp32"
    assert resolve_precision("bf16", "cpu", TRAIN_PRECISIONS, "train_precision") == "bf16"  # asked: given
    assert resolve_precision("int8", "cpu", PREDICT_PRECISIONS, "predict_precision") == "int8"
    with pytest.raises(AnonauditError, match="train_precision must be one of auto, fp32, bf16, got 'int8'"):
        resolve_precision("int8", "cpu", TRAIN_PRECISIONS, "train_precision")
    with pytest.raises(AnonauditError, match="CPU only"):
        resolve_precision("int8", "cuda", PREDICT_PRECISIONS, "predict_precision")
    assert isinstance(encoder.native_bf16("cpu"), bool)


def test_the_options_reach_the_command_line_and_only_training_arithmetic_reaches_the_cache_key(monkeypatch):
    from click.testing import CliRunner

    from anonaudit.cli import main
    from audit.core.params import parameters

    params = {p.name: p for p in parameters(TRIRAttack)}
    assert params["train_precision"].choices == TRAIN_PRECISIONS
    assert params["predict_precision"].choices == PREDICT_PRECISIONS
    help_text = CliRunner().invoke(main, ["attack", "trir", "--help"]).output
    assert "--train-precision [auto|fp32|bf16]" in help_text and "--predict-precision [auto|fp32|bf16|int8]" in help_text

    monkeypatch.setattr(encoder, "native_bf16", lambda device: True)
    bg = Corpus([Document("a", "Ann plays the harp.", subject="ann")], name="bg")

    def key(**kw):
        return TRIRAttack(device="cpu", **kw).cache_key(bg, resolve_base(None), None)

    fp32 = key(train_precision="fp32")
    assert key(train_precision="bf16") != fp32  # another attacker: trained again, cached apart
    assert key(train_precision="auto") == key(train_precision="bf16")  # the setting in force, not its spelling
    assert key(train_precision="fp32", predict_precision="int8") == fp32  # prediction only: the same attacker


def test_ray_train_workers_agree_on_one_arithmetic_from_their_own_hardware(monkeypatch):
    """Issue 48: on Ray Train each worker resolves ``auto`` on its own device, the workers
    all-gather their answers, and all train in bf16 only when every one has it natively, else in
    fp32. The driver's hardware plays no part (a laptop driving GPU workers trains in bf16).
    Scripted answers stand in for the other workers; the real Ray run is in
    tests/test_scaleout.py."""
    import torch.distributed as dist

    from attackers.trir.steps import agree_precision, cluster_precision

    assert agree_precision(["bf16", "bf16"]) == "bf16"
    assert agree_precision(["bf16", "fp32", "bf16"]) == "fp32"
    assert agree_precision(["fp32"] * 4) == "fp32"
    assert agree_precision(["int8", "int8"]) == "int8" and agree_precision(["int8", "bf16"]) == "fp32"

    monkeypatch.setattr(encoder, "native_bf16", lambda device: device.startswith("cuda"))  # CPUs without it
    gathered: list[list[str]] = []

    def cluster(others):
        def all_gather_object(out, obj):
            gathered.append([obj, *others])
            out[:] = [obj, *others]
        monkeypatch.setattr(dist, "all_gather_object", all_gather_object)

    def agreed(value, device, world, what="train_precision", choices=TRAIN_PRECISIONS):
        return cluster_precision(value, device, choices, what, world)

    cluster(["bf16", "bf16"])
    assert agreed("auto", "cuda:0", 3) == "bf16"  # GPU workers: bf16, whatever the driver has
    cluster(["bf16", "fp32"])  # one worker is a CPU without native bf16
    assert agreed("auto", "cuda:0", 3) == "fp32"
    cluster(["bf16"])
    assert agreed("auto", "cpu", 2) == "fp32"  # this worker is that CPU
    assert gathered[-1] == ["fp32", "bf16"]
    cluster(["bf16"])
    assert agreed("bf16", "cpu", 2) == "bf16"  # asked for: every worker gives it
    assert agreed("auto", "cpu", 2, "predict_precision", PREDICT_PRECISIONS) == "fp32"  # the dev release too
    n = len(gathered)
    assert agreed("auto", "cuda", 1) == "bf16" and len(gathered) == n  # one worker: nothing to gather


def test_bf16_training_changes_the_weights_is_repeatable_and_is_recorded(tiny_base, tmp_path):  # noqa: F811
    scenario = _scenario()
    runs = {}
    for name, precision in (("fp32", "fp32"), ("bf16", "bf16"), ("bf16 again", "bf16")):
        runs[name] = TRIRAttack(cache_dir=str(tmp_path / name), **_params(tiny_base, epochs=2,
                                                                           train_precision=precision)).fit(scenario)
    a, b, c = (_weights(runs[n]) for n in ("fp32", "bf16", "bf16 again"))
    assert any(not torch.equal(a[k], b[k]) for k in a)  # autocast really ran
    assert all(torch.equal(b[k], c[k]) for k in b)  # deterministic given the seed
    assert all(v.dtype == a[k].dtype for k, v in b.items())  # the weights stay fp32 (autocast, not a cast)
    assert runs["bf16"].trained_.info["settings"]["train_precision"] == "bf16"

    rel = Release("rel", Corpus([Document(f"r-{d.subject}", d.text, subject=d.subject)
                                 for d in scenario.dev.corpus], name="rel"))
    attack = runs["bf16"]
    attack.predict_precision = "int8"
    head, _ = attack.evaluate(Scenario(background=scenario.background, releases=(rel,)), rel)
    assert head.details["precision"] == {"training": "bf16", "prediction": "int8"}
    assert "trained in bf16, predicting in int8" in head.details["attacker"]  # the report's attacker line
    assert head.details["device"] == {"training": "cpu", "prediction": "cpu"}  # where it ran, in the result
    assert ", on cpu," in head.details["attacker"]


def test_device_auto_takes_a_gpu_that_torch_sees_and_its_bf16(monkeypatch):
    # the device option as a GPU machine resolves it (the package never needs one: CI has none;
    # benchmarks/trir_gpu.py runs it for real on one)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    attack = TRIRAttack()
    assert attack.torch_device() == "cuda"
    assert attack.settings()["train_precision"] == "bf16" and attack.prediction_precision("cuda") == "bf16"
    assert TRIRAttack(device="cpu").torch_device() == "cpu"
    with pytest.raises(AnonauditError, match="device must be auto, cpu, cuda or cuda:N"):
        TRIRAttack(device="gpu").torch_device()


def test_each_prediction_precision_is_close_to_fp32_and_the_same_on_an_executors_workers(tiny_base):  # noqa: F811
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_pretrained(tiny_base, num_labels=4)
    tok = AutoTokenizer.from_pretrained(tiny_base)
    windows = make_windows(tok, [d.text for d in _scenario().background], 24, 6)
    pad = tok.pad_token_id
    torch.set_num_threads(1)
    ref = predict_logits(model, windows, pad_id=pad, device="cpu", progress=False)
    for precision in ("bf16", "int8"):
        out = predict_logits(model, windows, pad_id=pad, device="cpu", progress=False, precision=precision)
        assert out.dtype == np.float32 and out.shape == ref.shape
        assert not np.array_equal(out, ref)  # another arithmetic ...
        assert np.abs(out - ref).max() < 0.1 * np.abs(ref).max() + 0.05  # ... close to fp32
        again = predict_logits(model, windows, pad_id=pad, device="cpu", progress=False, precision=precision)
        assert np.array_equal(out, again)  # repeatable
        # an executor's worker rebuilds the model from the fp32 weights and applies the same precision
        worker = pickle.loads(pickle.dumps(WindowLogits(model, pad, precision)))
        rows = worker([windows.ids[i] for i in range(len(windows))])
        ordered = predict_logits(model, windows, pad_id=pad, device="cpu", progress=False, precision=precision,
                                 batch_size=len(windows))
        assert np.allclose(np.stack(rows), ordered, atol=1e-5)
    assert all(isinstance(m, torch.nn.Linear) and m.weight.dtype == torch.float32
               for m in model.modules() if type(m) is torch.nn.Linear)  # int8 quantized a copy
    assert inference_model(model, "fp32") is model and inference_model(model, "bf16") is model
