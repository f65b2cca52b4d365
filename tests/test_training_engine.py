"""The engine owns where a training runs (issue 71): a component hands its executor a training
job (:mod:`audit.runtime.trainer`), the engine keeps its checkpoints (one format,
:mod:`audit.runtime.checkpoints`) and scratch folders (:mod:`audit.runtime.folders`), and refuses
bad input before any work. Model-free (a loop over two tensors; torch is imported, no model is
loaded): about 2 s. TRIR's loop on the real path is tested in tests/test_trir_scale.py (here) and
tests/test_scaleout.py (Ray Train)."""

from __future__ import annotations

import shutil
import sys

import pytest
import torch

from audit.core.errors import AnonauditError
from audit.runtime.checkpoints import STATE_FILE, Checkpoint
from audit.runtime.executor import LocalExecutor
from audit.runtime.folders import SCRATCH, scratch, sealed_folder
from audit.runtime.trainer import TrainingJob, Workspace, trainer_name

KEY_A, KEY_B = "a" * 64, "b" * 64


class Killed(Exception):
    pass


def _counting_loop(ctx, payload):
    """A loop of ``payload["epochs"]`` epochs adding 1 to a weight, a checkpoint after each, killed
    after ``payload["kill_after"]``; it returns the weight and the epochs it ran."""
    resume = ctx.resume()
    weight = torch.zeros(2) if resume is None else resume["model"]["w"].clone()
    first = 1 if resume is None else resume["epoch"] + 1
    ran = []
    for epoch in range(first, payload["epochs"] + 1):
        weight += 1
        ran.append(epoch)
        ctx.save({"epoch": epoch, "model": {"w": weight}, "history": [{"epoch": e} for e in range(1, epoch + 1)]},
                 {"epoch": epoch})
        if epoch == payload.get("kill_after"):
            raise Killed
    return {"final_model": {"w": weight}, "ran": ran, "resumed_from": None if resume is None else resume["epoch"]}


def _job(tmp_path, key=KEY_A, trainer="local", **payload):
    return TrainingJob(loop=_counting_loop, payload={"epochs": 3, **payload},
                       workspace=Workspace(key, tmp_path / "work", tmp_path / "ck"), trainer=trainer)


def test_the_local_executor_runs_a_job_and_a_killed_one_resumes_from_its_checkpoint(tmp_path):
    whole = LocalExecutor().train(_job(tmp_path / "whole"))
    assert whole["ran"] == [1, 2, 3] and whole["final_model"]["w"].tolist() == [3.0, 3.0]
    with pytest.raises(Killed):
        LocalExecutor().train(_job(tmp_path, kill_after=1))
    folder = tmp_path / "ck" / KEY_A[:24]
    assert (folder / STATE_FILE).is_file() and not folder.stat().st_mode & 0o077  # owner only
    resumed = LocalExecutor().train(_job(tmp_path))
    assert resumed["ran"] == [2, 3] and resumed["resumed_from"] == 1
    assert torch.equal(resumed["final_model"]["w"], whole["final_model"]["w"])
    assert (tmp_path / "ck").is_dir()  # the user's checkpoint folder stays
    Workspace(KEY_A, tmp_path / "work").finish()  # the default one (none here) goes; nothing else is touched
    assert folder.is_dir()


def test_a_checkpoint_of_another_training_or_of_the_other_path_is_refused(tmp_path):
    with pytest.raises(Killed):
        LocalExecutor().train(_job(tmp_path, kill_after=1))
    # the other path's trainer reads the same folder: refused, named, never resumed or replaced
    with pytest.raises(AnonauditError, match=r"written by a training on local and this one trains on "
                                             r"ray-train:2x1.*never resumed: remove that folder"):
        Checkpoint(tmp_path / "ck", KEY_A, "ray-train:2x1").load()
    # a checkpoint of another configuration (its key) where this one's would be
    shutil.copytree(tmp_path / "ck" / KEY_A[:24], tmp_path / "ck" / KEY_B[:24])
    with pytest.raises(AnonauditError, match="another configuration or on other data"):
        LocalExecutor().train(_job(tmp_path, key=KEY_B))
    assert (tmp_path / "ck" / KEY_B[:24] / STATE_FILE).is_file()  # left as it was


def test_a_corrupt_checkpoint_is_not_trusted_and_the_training_starts_again(tmp_path, capsys):
    with pytest.raises(Killed):
        LocalExecutor().train(_job(tmp_path, kill_after=2))
    (tmp_path / "ck" / KEY_A[:24] / STATE_FILE).write_bytes(b"not a checkpoint")
    again = LocalExecutor().train(_job(tmp_path))
    assert again["ran"] == [1, 2, 3] and "corrupt or was changed" in capsys.readouterr().err


def test_bad_checkpoint_folders_and_a_missing_ray_fail_before_any_work(tmp_path, monkeypatch):
    (tmp_path / "a-file").write_text("x")
    ran = []
    job = TrainingJob(loop=lambda ctx, p: ran.append(1) or {}, payload=None,
                      workspace=Workspace(KEY_A, None, tmp_path / "a-file" / "ck"))
    with pytest.raises(AnonauditError, match=r"checkpoint_dir .*a-file.*: name a folder this process can write to"):
        LocalExecutor().train(job)
    with pytest.raises(AnonauditError, match="checkpoint_dir"):
        LocalExecutor().check_training(job.workspace)
    assert ran == []

    from audit.pipeline.executors import RayExecutor

    monkeypatch.setitem(sys.modules, "ray", None)  # Ray not installed
    with pytest.raises(AnonauditError, match=r"pip install 'anonaudit\[ray\]'"):
        RayExecutor("local").check_training(Workspace(KEY_A, tmp_path / "work"))
    from audit.pipeline.ray_train import check_ray_train

    monkeypatch.setitem(sys.modules, "ray.train.torch", None)
    with pytest.raises(AnonauditError, match=r"needs Ray Train .*pip install 'anonaudit\[ray\]'"):
        check_ray_train()


def test_scratch_and_sealed_folders_belong_to_the_engine(tmp_path):
    with scratch("x-", tmp_path) as folder:
        assert folder.parent == tmp_path / SCRATCH and not folder.stat().st_mode & 0o077
        (folder / "f").write_text("1")
    assert not folder.exists() and not (tmp_path / SCRATCH).exists()  # removed, its parent too
    with pytest.raises(RuntimeError), sealed_folder(tmp_path / "saved") as tmp:
        (tmp / "half").write_text("1")
        raise RuntimeError("killed while saving")
    assert not (tmp_path / "saved").exists() and list(tmp_path.iterdir()) == []  # nothing half-written
    with sealed_folder(tmp_path / "saved") as tmp:
        (tmp / "whole").write_text("1")
    from audit.runtime.integrity import verify

    assert verify(tmp_path / "saved") is None and not (tmp_path / "saved").stat().st_mode & 0o077


def test_where_a_training_runs_names_it():
    assert trainer_name(None) == "local"
    assert trainer_name((2, 1, False)) == "ray-train:2x1" and trainer_name((4, 8, True)) == "ray-train:4xgpu"
    assert LocalExecutor().train_workers(3) == (1, 3, False)


def test_ray_train_giving_up_is_the_projects_error_naming_the_fix(tmp_path, monkeypatch):
    """Ray Train gives up once its workers failed more than MAX_FAILURES times: the user gets one
    AnonauditError with each worker's error in a line, where the last epoch is kept and what to do,
    not Ray's WorkerGroupError and its tracebacks. Ray Train's trainer is scripted (no Ray is
    started): importing it costs ~3 s."""
    ray = pytest.importorskip("ray", reason="the Ray Train path needs Ray (pip install 'anonaudit[ray]')")
    import ray.train
    import ray.train.torch

    from audit.pipeline import ray_train

    class GivesUp:
        def __init__(self, *args, **kwargs):
            pass

        def fit(self):
            raise ray.train.WorkerGroupError("worker 1 died\nTraceback (most recent call last): ...",
                                             {1: RuntimeError("out of memory\n  File ...")})

    monkeypatch.setattr(ray.train.torch, "TorchTrainer", GivesUp)
    monkeypatch.setattr(ray, "put", lambda value: value)
    job = TrainingJob(loop=_counting_loop, payload={"epochs": 3}, workspace=Workspace(KEY_A, None, tmp_path / "ck"),
                      workers=2, trainer="ray-train:2x1", label="TRIR training")
    with pytest.raises(AnonauditError) as caught:
        ray_train.train_on_ray(job)
    message = str(caught.value)
    assert message == (f"TRIR training: Ray Train gave up after {ray_train.MAX_FAILURES} restarts of its 2 worker(s) "
                       f"(worker 1: RuntimeError: out of memory); its last finished epoch is kept in "
                       f"{tmp_path / 'ck' / job.workspace.ray_name}: run the same command again (same "
                       "checkpoint_dir) to resume from it, or run with --executor local")
    caches_off = TrainingJob(loop=_counting_loop, payload={}, workspace=Workspace(KEY_A, None), label="t")
    with pytest.raises(AnonauditError, match=r"\(worker 1: RuntimeError: out of memory\); nothing is kept "
                                             r"\(caches off\): name a checkpoint_dir"):
        ray_train.train_on_ray(caches_off)
