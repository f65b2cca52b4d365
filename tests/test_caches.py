"""Private caches (issue 46): owner-only folders and files, ``--no-cache`` honoured by every
cache, and ``anonaudit cache info`` / ``clear``."""

from __future__ import annotations

import os
import sqlite3
import stat
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from audit.core import config
from audit.runtime import caches
from audit.core.data import Corpus, Document
from audit.core.errors import AnonauditError
from audit.core.files import atomic_write
from audit.models.answer_cache import AnswerStore, CachedLLM
from audit.models.llm import ChatRequest, ScriptedLLM


def mode(p: Path) -> int:
    return stat.S_IMODE(os.stat(p).st_mode)


@pytest.fixture
def home(tmp_path, monkeypatch):
    """A fresh ANONAUDIT_HOME that does not exist yet (never the session's, whose models/ is the
    machine's shared model folder)."""
    h = tmp_path / "home"
    monkeypatch.setenv("ANONAUDIT_HOME", str(h))
    monkeypatch.delenv(config.NO_CACHE_ENV, raising=False)
    return h


def test_cache_folders_and_files_are_owner_only(home):
    folder = config.subdir("cache")
    assert mode(home) == 0o700 and mode(folder) == 0o700
    atomic_write(folder / "x.json", "{}")
    assert mode(folder / "x.json") == 0o600
    store = AnswerStore(folder / "llm.sqlite")
    store.put_many({"k": "v"})
    for suffix in ("", "-wal", "-shm"):
        p = folder / f"llm.sqlite{suffix}"
        if p.exists():
            assert mode(p) == 0o600, p
    store.close()


def test_files_outside_the_caches_keep_the_umask(tmp_path):
    """A results file or report is the user's file, not a cache: 0666 less the umask, as before."""
    os.chmod(tmp_path, 0o755)
    atomic_write(tmp_path / "results.json", "{}")
    umask = os.umask(0o022)
    os.umask(umask)
    assert mode(tmp_path / "results.json") == 0o666 & ~umask


def test_an_older_cache_with_loose_permissions_is_tightened_when_opened(home):
    (home / "embeddings").mkdir(parents=True)
    os.chmod(home / "embeddings", 0o755)
    db = home / "cache" / "llm.sqlite"
    db.parent.mkdir()
    os.chmod(db.parent, 0o755)
    sqlite3.connect(db).close()
    os.chmod(db, 0o644)
    config.subdir("embeddings")
    AnswerStore(db).close()
    assert mode(home / "embeddings") == 0o700
    assert mode(db) == 0o600


def test_no_cache_is_honoured_by_the_llm_ic_and_lemma_caches(home):
    from attackers.span_guess.matcher import corpus_matcher
    from audit.metrics.ic import ICCache

    corpus = Corpus([Document("a", "Anna Berg lives in Oslo."), Document("b", "Carl Dahl works in Bergen.")],
                    name="c")
    with config.caches_off():
        assert not config.cache_enabled() and os.environ[config.NO_CACHE_ENV] == "1"
        llm = CachedLLM(ScriptedLLM(lambda r: "answer", identity="s"), home / "cache" / "llm.sqlite")
        assert llm.complete_batch([ChatRequest.make([{"role": "user", "content": "q"}])]) == ["answer"]
        assert not llm.enabled and llm.store is None
        ic = ICCache("est")
        ic.put_many([(corpus["a"].text, [], np.zeros(0), 0.1)])
        assert not ic.enabled
        corpus_matcher(corpus, top=5)
    assert config.cache_enabled() and config.NO_CACHE_ENV not in os.environ
    # nothing but the model store (checksums of the pinned model files) was written
    assert not [p for p in home.rglob("*") if p.is_file() and "models" not in p.relative_to(home).parts]
    # the same calls with the caches on do write
    ICCache("est").put_many([(corpus["a"].text, [], np.zeros(0), 0.1)])
    corpus_matcher(corpus, top=5)
    assert list((home / "utility").glob("ic-*.json")) and list((home / "span_guess").glob("*.json"))


def test_cache_info_and_clear(home):
    config.subdir("models")  # written as anonaudit writes them (recorded as its own: see test_hostile_bench_cache)
    atomic_write(home / "models" / "m.gguf", b"x" * 10)
    ic = config.subdir("utility")
    atomic_write(ic / "ic-old.json", "{}")
    atomic_write(ic / "ic-new.json", "{}")
    old = time.time() - 10 * 86400
    os.utime(ic / "ic-old.json", (old, old))
    store = AnswerStore(config.subdir("cache") / "llm.sqlite")
    store.put_many({"new": 1})
    con = sqlite3.connect(store.path)
    with con:
        con.execute("INSERT INTO answers (key, value, created) VALUES ('old', '1', ?)", (old,))
    con.close()
    store.close()
    trir = config.subdir("trir") / "abc"
    atomic_write(trir / "model.safetensors", b"w" * 100)

    res = CliRunner().invoke(main, ["cache", "info"])
    assert res.exit_code == 0, res.output
    rows = {line.split()[0]: line.split() for line in res.output.splitlines()[2:]}
    assert rows["ic"][1] == "2" and rows["trir"][1] == "1" and rows["trir"][3:5] == ["100", "B"]
    assert rows["ic"][5] == "10.0d" and rows["ic"][7] == "yes"  # oldest item; private

    res = CliRunner().invoke(main, ["cache", "clear", "--older-than", "7d"])
    assert res.exit_code == 0, res.output
    assert not (ic / "ic-old.json").exists() and (ic / "ic-new.json").exists()
    con = sqlite3.connect(home / "cache" / "llm.sqlite")
    assert [k for (k,) in con.execute("SELECT key FROM answers")] == ["new"]
    con.close()
    assert "1 LLM answer(s)" in res.output and trir.exists()

    res = CliRunner().invoke(main, ["cache", "clear", "--kind", "trir", "--dry-run"])
    assert "would remove trir: 1 item(s)" in res.output and trir.exists()
    res = CliRunner().invoke(main, ["cache", "clear"])
    assert res.exit_code == 0 and not trir.exists() and not (ic / "ic-new.json").exists()
    assert not (home / "cache" / "llm.sqlite").exists()
    assert (home / "models" / "m.gguf").exists()  # the models stay unless asked for
    res = CliRunner().invoke(main, ["cache", "clear", "--models"])
    assert res.exit_code == 0 and not (home / "models" / "m.gguf").exists()


def test_clear_leaves_a_shared_folder_and_its_content(home, tmp_path):
    """A kind's folder that is a link (a machine's shared models) is never followed nor removed:
    anonaudit did not make it; the line says so."""
    shared = tmp_path / "machine-models"
    shared.mkdir()
    (shared / "m.gguf").write_bytes(b"x")
    home.mkdir()
    (home / "models").symlink_to(shared, target_is_directory=True)
    res = CliRunner().invoke(main, ["cache", "clear", "--models"])
    assert res.exit_code == 0 and (shared / "m.gguf").exists() and (home / "models").is_symlink()
    assert "left models" in res.output and "links are never followed" in res.output


@pytest.mark.parametrize("age", ["7x", "-1d", "", "nan", "inf"])
def test_a_bad_age_is_exit_2(home, age):
    res = CliRunner().invoke(main, ["cache", "clear", "--older-than", age])
    assert res.exit_code == 2 and "--older-than" in res.output and "Traceback" not in res.output


def test_parse_age():
    assert caches.parse_age("90s") == 90 and caches.parse_age("2w") == 14 * 86400 and caches.parse_age("1") == 86400


def test_no_cache_on_the_run_commands():
    for cmd in (["run"], ["demo"], ["harden"]):
        res = CliRunner().invoke(main, [*cmd, "--help"])
        assert "--no-cache" in res.output, cmd


def test_run_no_cache_turns_every_cache_off_for_the_run(tmp_path, monkeypatch):
    """``anonaudit run --no-cache`` and an attack's ``--no-cache`` run the audit with every cache
    off (and only that run)."""
    from anonaudit.demo.population import write as write_demo
    from audit.pipeline import runner

    seen = []
    real = runner.Audit.run

    def spy(self, *a, **k):
        seen.append(config.cache_enabled())
        return real(self, *a, **k)

    monkeypatch.setattr(runner.Audit, "run", spy)
    write_demo(tmp_path / "data", n=4, seed=0)
    (tmp_path / "audit.yaml").write_text(
        "seed: 0\noriginals: data/originals.jsonl\nreleases:\n  - {name: labels, path: data/releases/labels.jsonl}\n"
        "attacks: [phrase_search]\nmetrics: [rouge]\n")
    for extra in ([], ["--no-cache"]):
        res = CliRunner().invoke(main, ["run", str(tmp_path / "audit.yaml"), "--no-report", *extra])
        assert res.exit_code == 0, res.output
    def stop(self, *a, **k):
        seen.append(config.cache_enabled())
        raise AnonauditError("stopped by the test")

    monkeypatch.setattr(runner.Audit, "run", stop)
    res = CliRunner().invoke(main, ["attack", "span-guess", "--originals", str(tmp_path / "data/originals.jsonl"),
                                    "--release", str(tmp_path / "data/releases/labels.jsonl"),
                                    "--out", str(tmp_path / "r.json"), "--no-cache"])
    assert res.exit_code == 2 and "stopped by the test" in res.output, res.output
    assert seen[:2] == [True, False] and seen[2:] == [False]
    assert config.cache_enabled()
