"""One in-memory path (issue 59, item 2): data given to the API in memory goes to the runner as
it is, and the results and release texts come back in memory; nothing is written to disk but
the outputs the caller asks for (and the model caches in ANONAUDIT_HOME)."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pandas as pd
import pytest

import anonaudit
import audit.io.loaders as loaders
from audit.core.data import Corpus, Document, Release


@pytest.fixture(scope="module")
def data():
    return anonaudit.sample_data(n=8, seed=0)


def test_a_dataframe_audit_writes_nothing_outside_the_caches(data, tmp_path, monkeypatch):
    home, cwd, tmp = (tmp_path / n for n in ("home", "cwd", "tmp"))
    for folder in (home, cwd, tmp):
        folder.mkdir()
    monkeypatch.setenv("ANONAUDIT_HOME", str(home))
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))
    made: list[str] = []  # every temporary file or folder made, wherever it was asked for
    for name in ("mkstemp", "mkdtemp"):
        real = getattr(tempfile, name)
        monkeypatch.setattr(tempfile, name, lambda *a, _real=real, **k: (made.append(str(k.get("dir"))), _real(*a, **k))[1])

    def no_jsonl(*args, **kwargs):
        raise AssertionError("an in-memory audit wrote a JSONL file")

    monkeypatch.setattr(loaders, "save_jsonl", no_jsonl)
    synthetic = Release("synthetic", Corpus([Document("s1", "A person lives somewhere.", None)]), aligned=False)
    spec = anonaudit.Spec(originals=pd.DataFrame(data["originals"]),
                          releases={"labels": pd.DataFrame(data["releases"]["labels"]),
                                    "suppressed": data["releases"]["suppressed"], "synthetic": synthetic},
                          background=data["background"], attacks=["phrase_search"], metrics=["rouge"], seed=0)
    results = anonaudit.audit(spec, progress=False, on_error="skip")
    assert not [d for d in made if not Path(d).resolve().is_relative_to(home.resolve())], made
    assert list(cwd.iterdir()) == [] and list(tmp.iterdir()) == []
    assert results.path is None and {"labels", "suppressed"} <= set(results.releases)
    prov = results.provenance
    assert prov["inputs"]["originals"]["path"] == "<in memory>: originals (DataFrame)"
    assert prov["inputs"]["background"]["path"] == "<in memory>: background (list)"
    assert prov["releases"]["labels"]["source"] == "<in memory>: releases['labels'] (DataFrame)"
    assert prov["releases"]["synthetic"]["aligned"] is False  # a Release is audited as it is
    # the release texts came back in memory, as the report needs them
    texts = results.texts()
    assert texts["labels"] == {r["id"]: r["text"] for r in data["releases"]["labels"]}
    monkeypatch.undo()
    # writing is the separate step; what it writes is what was in memory, byte for byte
    path = results.save(tmp_path / "out" / "results.json")
    for relative, raw in results.copies.items():
        assert (path.parent / relative).read_bytes() == raw
    assert anonaudit.load_results(path).texts() == texts


def test_out_writes_the_same_results_as_memory_then_save(data, tmp_path):
    df, df2 = pd.DataFrame(data["originals"]), pd.DataFrame(data["releases"]["labels"])
    kw = dict(attacks=["phrase_search"], metrics=["rouge"], seed=0, progress=False)
    written = anonaudit.audit(originals=df, releases={"labels": df2}, out=tmp_path / "a" / "results.json", **kw)
    kept = anonaudit.audit(originals=df, releases={"labels": df2}, **kw)
    assert written.path == (tmp_path / "a" / "results.json").resolve()
    assert [r.to_dict() for r in written.results] == [r.to_dict() for r in kept.results]
    assert written.copies == kept.copies and written.texts() == kept.texts()
    # the output guard holds for the separate writing step too: never over an input
    src = tmp_path / "originals.jsonl"
    loaders.save_jsonl(Corpus([Document(d["id"], d["text"], d["subject"]) for d in data["originals"]]), src)
    from_file = anonaudit.audit(originals=src, releases={"labels": df2}, **kw)
    with pytest.raises(anonaudit.AnonauditError, match="also the command's input"):
        from_file.save(src, force=True)
