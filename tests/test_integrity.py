"""Issue 43, part B: corpus-typed options of the driver, integrity of index folders and caches,
crossing annotator mentions, the shareable edition's pseudonyms, and leftovers of killed runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from audit.cli import main
from audit.demo.data import write as write_demo


@pytest.fixture
def demo(tmp_path):
    write_demo(tmp_path / "demo", n=6, seed=0)
    return tmp_path / "demo"


# --------------------------------------------------------------------------- corpus-typed parameters


def test_sanitize_loads_a_corpus_typed_option_given_as_a_file(demo, tmp_path, monkeypatch):
    """``sanitize delinker --collection FILE`` (the README's command) hands the delinker a loaded
    corpus; any corpus-typed parameter of any sanitizer goes the same way."""
    from audit.core.data import Corpus
    from defenders.delinker.sanitizer import Delinker

    seen = {}

    def fake_sanitize(self, corpus, *, name=None):
        seen["collection"] = self.collection
        from defenders.baselines import Suppression

        return Suppression().sanitize(corpus, name=name)

    monkeypatch.setattr(Delinker, "sanitize", fake_sanitize)
    out = tmp_path / "delinked.jsonl"
    res = CliRunner().invoke(main, ["sanitize", "delinker", "--input", str(demo / "releases" / "labels.jsonl"),
                                    "--collection", str(demo / "originals.jsonl"), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert isinstance(seen["collection"], Corpus) and len(seen["collection"]) == 6
    assert out.exists()


def test_sanitize_names_a_missing_corpus_file_with_its_option(demo, tmp_path):
    res = CliRunner().invoke(main, ["sanitize", "delinker", "--input", str(demo / "originals.jsonl"),
                                    "--collection", str(tmp_path / "nope.jsonl"), "--out", str(tmp_path / "o.jsonl")])
    assert res.exit_code == 2 and "Traceback" not in res.output
    assert "--collection" in res.output and "nope.jsonl: file not found" in res.output
