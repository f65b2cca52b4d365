"""Issue 43, part B: corpus-typed options of the driver, integrity of index folders and caches,
crossing annotator mentions, the shareable edition's pseudonyms, and leftovers of killed runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from anonaudit.cli import main
from anonaudit.demo.population import write as write_demo


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


# --------------------------------------------------------------------------- sealed folders


def _phrase_search(demo, out, index_dir, *extra):
    return CliRunner().invoke(main, ["attack", "phrase-search", "--originals", str(demo / "originals.jsonl"),
                                     "--release", str(demo / "releases" / "labels.jsonl"), "--out", str(out),
                                     "--index-dir", str(index_dir), *extra])


def _risk(out):
    return [r["value"] for r in json.loads(out.read_text())["results"] if r["name"] == "phrase_search"]


def test_a_sealed_folder_names_what_changed(tmp_path):
    from audit.runtime.integrity import CHECKSUMS, seal, verify

    folder = tmp_path / "f"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.bin").write_bytes(b"abc")
    (folder / "sub" / "b.json").write_text("{}")
    assert "no checksums" in verify(folder)
    seal(folder)
    assert verify(folder) is None
    (folder / "a.bin").write_bytes(b"abd")
    assert "a.bin changed" in verify(folder)
    seal(folder)
    (folder / "sub" / "b.json").unlink()
    assert "sub/b.json is missing" in verify(folder)
    seal(folder)
    (folder / "c.txt").write_text("x")
    assert "c.txt was added" in verify(folder)
    (folder / CHECKSUMS).write_text("[1, 2")
    assert "unreadable" in verify(folder)


@pytest.mark.parametrize("tamper", ["docs", "array", "config", "truncate", "unsealed"])
def test_a_tampered_or_corrupt_index_folder_is_rebuilt_with_a_message(demo, tmp_path, tamper):
    """The probe's case: a changed ``--index-dir`` was reused (risk 0.000 instead of 1.000), a
    corrupt one gave a traceback. Now it is verified, rebuilt with a message, and gives the risk
    of a fresh index."""
    from audit.runtime.integrity import CHECKSUMS

    idx = tmp_path / "idx"
    first = _phrase_search(demo, tmp_path / "a.json", idx)
    assert first.exit_code == 0, first.output
    assert (idx / CHECKSUMS).is_file()
    again = _phrase_search(demo, tmp_path / "a2.json", idx)
    assert again.exit_code == 0 and "rebuilding" not in again.output  # a sound folder is reused quietly
    if tamper == "docs":  # another collection's documents under the same fingerprint
        docs = json.loads((idx / "docs.json").read_text())
        docs["ids"] = list(reversed(docs["ids"]))
        (idx / "docs.json").write_text(json.dumps(docs))
    elif tamper == "array":
        data = bytearray((idx / "multi_docs.npy").read_bytes())
        data[-8:] = b"\xff" * 8
        (idx / "multi_docs.npy").write_bytes(bytes(data))
    elif tamper == "config":
        (idx / "config.json").write_text((idx / "config.json").read_text().replace('"max_n"', '"max_m"'))
    elif tamper == "truncate":
        (idx / "keys.npy").write_bytes((idx / "keys.npy").read_bytes()[:40])
    else:
        (idx / CHECKSUMS).unlink()
    res = _phrase_search(demo, tmp_path / "b.json", idx)
    assert res.exit_code == 0 and "Traceback" not in res.output, res.output
    assert "is corrupt or was changed" in res.output and "rebuilding it" in res.output
    assert _risk(tmp_path / "b.json") == _risk(tmp_path / "a.json")
    third = _phrase_search(demo, tmp_path / "c.json", idx)  # rebuilt and sealed again: reused quietly
    assert third.exit_code == 0 and "rebuilding" not in third.output


class _FakeSentenceModel:
    """Stands in for MiniLM (the cache's logic is under test, not the vectors)."""

    calls: list = []
    # where a real SentenceTransformer computes (the embedder's precision reads it since 6c71ac0)
    device = __import__("torch").device("cpu")

    def get_embedding_dimension(self):
        return 4

    def encode(self, texts, **kw):
        import numpy as np

        _FakeSentenceModel.calls.append(list(texts))
        return np.array([[len(t), 1.0, 2.0, float(ord(t[0]))] for t in texts], dtype=np.float32)


@pytest.fixture
def fake_embedder(monkeypatch):
    import audit.models.embed as embed

    monkeypatch.setattr(embed, "_load", lambda path, device: _FakeSentenceModel())
    _FakeSentenceModel.calls = []
    return embed.Embedder


def test_a_changed_row_of_the_embeddings_cache_is_embedded_again(tmp_path, fake_embedder, capfd):
    import sqlite3

    path = tmp_path / "emb.sqlite"
    first = fake_embedder("minilm", cache=path).encode(["one sentence", "another one"])
    db = sqlite3.connect(path)
    with db:
        db.execute("UPDATE vectors SET vec = ? WHERE key = (SELECT min(key) FROM vectors)", (b"\0" * 16,))
    db.close()
    e = fake_embedder("minilm", cache=path)
    again = e.encode(["one sentence", "another one"])
    assert e.stats == {"hits": 1, "misses": 1}
    assert (again == first).all()
    assert "failed their checksum: embedding them again" in capfd.readouterr().err
    third = fake_embedder("minilm", cache=path)
    third.encode(["one sentence", "another one"])
    assert third.stats == {"hits": 2, "misses": 0}  # the row was written again, with its checksum


@pytest.mark.parametrize("damage", [b"not a database at all" * 100, b"SQLite format 3\0" + b"\xff" * 4000])
def test_a_corrupt_embeddings_cache_is_set_aside_and_started_anew(tmp_path, fake_embedder, capfd, damage):
    """The probe's case: a metric failed on a corrupt embeddings cache ("not run", exit 0)."""
    path = tmp_path / "emb.sqlite"
    fake_embedder("minilm", cache=path).encode(["one sentence"])
    path.write_bytes(damage)
    e = fake_embedder("minilm", cache=path)
    vec = e.encode(["one sentence", "two"])
    assert vec.shape == (2, 4) and e.stats == {"hits": 0, "misses": 2}
    err = capfd.readouterr().err
    assert "the embeddings cache in" in err and "is corrupt or was changed" in err
    assert list(tmp_path.glob("emb.sqlite.corrupt-*"))  # kept for a look, never deleted
    again = fake_embedder("minilm", cache=path)
    again.encode(["one sentence", "two"])
    assert again.stats == {"hits": 2, "misses": 0}


def test_a_trained_attacker_is_sealed_when_stored(tmp_path):
    from attackers.trir.attacker_cache import TrainedTRIR
    from audit.runtime.integrity import verify

    class Saves:
        def save_pretrained(self, folder):
            (Path(folder) / f"{type(self).__name__}.bin").write_bytes(b"weights")

    folder = tmp_path / "cache" / "key"
    folder.parent.mkdir()
    TrainedTRIR(model=Saves(), tokenizer=Saves(), labels=["a", "b"], info={}).store(folder)
    assert verify(folder) is None
    (folder / "Saves.bin").write_bytes(b"weightz")
    assert "Saves.bin changed" in verify(folder)


# --------------------------------------------------------------------------- leftovers of killed runs

_WRITER = """
import sys, time
from audit.core.files import atomic_open
with atomic_open(sys.argv[1], "w") as fh:
    fh.write("half")
    fh.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("signal_name", ["SIGKILL", "SIGTERM"])
def test_temporaries_of_a_killed_writer_are_removed_by_the_next_write(tmp_path, signal_name):
    import signal
    import subprocess
    import sys

    target = tmp_path / "results.json"
    killed = subprocess.Popen([sys.executable, "-c", _WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    live = subprocess.Popen([sys.executable, "-c", _WRITER, str(tmp_path / "other.json")], stdout=subprocess.PIPE,
                            text=True)
    try:
        assert killed.stdout.readline().strip() == "writing" and live.stdout.readline().strip() == "writing"
        killed.send_signal(getattr(signal, signal_name))
        killed.wait(timeout=30)
        left = sorted(p.name for p in tmp_path.glob(".*.tmp"))
        assert len(left) == 2 and all(f".p{killed.pid}." in n or f".p{live.pid}." in n for n in left)
        unrelated = tmp_path / ".notes.tmp"  # not a temporary of ours: never touched
        unrelated.write_text("mine")
        from audit.core.files import atomic_write, sweep_temporaries

        sweep_temporaries(tmp_path, force=True)  # this process may have swept the folder before
        atomic_write(target, "whole")
        rest = sorted(p.name for p in tmp_path.glob(".*.tmp"))
        assert rest == sorted([".notes.tmp", *[n for n in left if f".p{live.pid}." in n]])  # the live one stays
        assert target.read_text() == "whole"
    finally:
        live.kill()
        live.wait()


def test_an_old_temporary_is_stale_whatever_its_pid(tmp_path):
    import os

    from audit.core.files import STALE_SECONDS, sweep_temporaries

    old = tmp_path / f".x.json.p{os.getpid()}.abc123.tmp"
    legacy = tmp_path / ".x.json.abcd1234.tmp"
    fresh_legacy = tmp_path / ".y.json.abcd1234.tmp"
    for p in (old, legacy, fresh_legacy):
        p.write_text("?")
    os.utime(old, (0, 0))
    os.utime(legacy, (1, 1))
    assert sorted(sweep_temporaries(tmp_path, force=True)) == sorted([old, legacy])
    assert fresh_legacy.exists() and STALE_SECONDS >= 3600


# --------------------------------------------------------------------------- the shareable edition

PEOPLE = [("Alice Marwood", "Alice Marwood is a lighthouse keeper in Tromso who restores old boats and sings.",
           "[PERSON] is a lighthouse keeper in [LOC] who restores old boats and sings."),
          ("Bertil Quandt", "Bertil Quandt taught chemistry at the Uppsala gymnasium and wrote two books on bees.",
           "[PERSON] taught chemistry at the [ORG] and wrote two books on bees."),
          ("Chiara Vessel", "Chiara Vessel designs bridges for a firm in Genoa and races dinghies every summer.",
           "[PERSON] designs bridges for a firm in [LOC] and races dinghies every summer.")]


@pytest.fixture
def tri_case(tmp_path):
    """A TRI file in a folder named after a case: its document ids are the people's names."""
    folder = tmp_path / "case-Marwood-v-Norway"
    folder.mkdir()
    tri = folder / "Alice_Marwood_dossier.json"
    tri.write_text(json.dumps([{"name": n, "public_knowledge": bk, "spacy_abstract": rel} for n, bk, rel in PEOPLE]))
    return tri


def _private_strings(tri: Path) -> list[str]:
    return [n for n, _, _ in PEOPLE] + ["Marwood-v-Norway", tri.name, str(tri.parent)]


def test_the_shareable_report_names_no_person_and_no_path(tri_case, tmp_path):
    out = tmp_path / "share"
    res = CliRunner().invoke(main, ["attack", "phrase-search", "--tri", str(tri_case), "--out", str(out / "r.json")])
    assert res.exit_code == 0, res.output
    assert "Alice Marwood" in (out / "r.json").read_text()  # the internal results keep the ids
    html_path = out / "public" / "report.html"
    res = CliRunner().invoke(main, ["report", str(out / "r.json"), "--out", str(html_path), "--shareable"])
    assert res.exit_code == 0, res.output
    html, csv = html_path.read_text(), (out / "public" / "findings.csv").read_text()
    for private in _private_strings(tri_case):
        assert private not in html and private not in csv, private
    rows = csv.splitlines()[1:]
    assert {r.split(",")[3] for r in rows} == {"D01", "D02", "D03"}  # every document, by pseudonym
    import re

    assert "[PERSON] is a lighthouse keeper" in re.sub(r"<[^>]+>", "", html)  # the sanitized text is still shown
    # stable: the same results give the same pseudonyms, byte for byte in the CSV
    again = out / "public2" / "report.html"
    assert CliRunner().invoke(main, ["report", str(out / "r.json"), "--out", str(again), "--shareable"]).exit_code == 0
    assert (out / "public2" / "findings.csv").read_text() == csv
    # --keep-ids: the user's explicit choice
    kept = out / "kept" / "report.html"
    res = CliRunner().invoke(main, ["report", str(out / "r.json"), "--out", str(kept), "--shareable", "--keep-ids"])
    assert res.exit_code == 0 and "Alice Marwood" in (out / "kept" / "findings.csv").read_text()


def test_run_shareable_names_no_person_and_no_path(tri_case, tmp_path):
    spec = tmp_path / "audit.yaml"
    spec.write_text(f"seed: 0\nout: {tmp_path / 'run'}\nbackground: {{path: {tri_case}, format: tri}}\n"
                    f"releases:\n  - {{path: {tri_case}, format: tri}}\nattacks: [phrase_search]\n")
    res = CliRunner().invoke(main, ["run", str(spec), "--shareable"])
    assert res.exit_code == 0, res.output
    shared = tmp_path / "run" / "shareable"
    files = [p for p in shared.iterdir() if p.is_file()]
    assert {p.suffix for p in files} == {".html", ".csv"}
    for p in files:
        text = p.read_text()
        for private in _private_strings(tri_case):
            assert private not in text, (p.name, private)


def test_a_release_named_after_its_file_is_pseudonymised_in_the_shareable_edition(tmp_path):
    """The default release name is the input's file stem, often a person's name: the shareable
    edition (HTML and CSV, and the gate's lines) names it R1, R2...; a name the user gave stays,
    and --keep-ids keeps both. The same results give the same names."""
    import anonaudit
    from reports.shareable import release_pseudonyms

    data = anonaudit.sample_data(n=4, seed=0)
    orig = tmp_path / "originals.jsonl"
    orig.write_text("".join(json.dumps(d) + "\n" for d in data["originals"]), encoding="utf-8")
    person = tmp_path / "Jane_Marwood.jsonl"
    person.write_text("".join(json.dumps(d) + "\n" for d in data["releases"]["suppressed"]), encoding="utf-8")
    chosen = tmp_path / "Bertil_Quandt.jsonl"
    chosen.write_text("".join(json.dumps(d) + "\n" for d in data["releases"]["labels"]), encoding="utf-8")
    res = anonaudit.audit(originals=orig, releases=[str(person), {"name": "masked", "path": str(chosen)}],
                          attacks=["phrase_search"], metrics=["rouge"], progress=False, out=tmp_path / "run.json")
    assert res.file.provenance["releases"]["Jane_Marwood"]["name_from"] == "file"
    assert "name_from" not in res.file.provenance["releases"]["masked"]
    gate = res.gate(max={"phrase_search": 0.99})
    page = res.report(tmp_path / "share" / "report.html", shareable=True, gate=gate)
    for path in (page, page.with_name("findings.csv")):
        text = path.read_text(encoding="utf-8")
        assert "Jane_Marwood" not in text and "Marwood" not in text, path.name
        assert "R1" in text and "masked" in text, path.name
    assert release_pseudonyms(res.file) == {"Jane_Marwood": "R1"} == release_pseudonyms(res.file)
    kept = res.report(tmp_path / "kept" / "report.html", shareable=True, keep_ids=True).read_text(encoding="utf-8")
    assert "Jane_Marwood" in kept and "masked" in kept


def test_pseudonyms_reach_every_id_a_finding_carries():
    from audit.core.results import Finding, Result, ResultsFile
    from reports.shareable import shareable

    docs = [Finding(id="Alice Marwood", success=True, summary="Linked to Bertil Quandt's record by mistake",
                    highlights_in="Bertil Quandt", facts={"evidence": [{"docs": ["Bertil Quandt"]}], "linked_to":
                                                          "Bertil Quandt"}),
            Finding(id="Bertil Quandt", success=False)]
    rf = ResultsFile(results=[Result(kind="attack", name="x", release="r", value=0.5, ci=(0.1, 0.9), n=2,
                                     baseline=0.5, details={"per_document": {"Alice Marwood": 1.0}},
                                     documents=docs)],
                     provenance={"inputs": {"originals": {"path": "/cases/Marwood.jsonl", "sha256": "ab"}},
                                 "releases": {"r": {"source": "C:\\cases\\Marwood.jsonl", "documents": 2}},
                                 "models": {"llm": "/home/me/Marwood-model.gguf"}})
    text = json.dumps(shareable(rf).to_dict())
    for private in ("Alice", "Bertil", "Marwood", "cases"):
        assert private not in text, private
    assert '"D01"' in text and '"D02"' in text and '"sha256": "ab"' in text and '"documents": 2' in text


# --------------------------------------------------------------------------- crossing mentions of two annotators


def _tab_with_crossing(tmp_path) -> Path:
    text = "The applicant, Mr Hakan Yilmaz Ozturk, was born in Izmir in 1961."
    a, b = text.index("Hakan"), text.index("Ozturk")
    path = tmp_path / "tab.json"
    path.write_text(json.dumps([{"doc_id": "001-1", "text": text, "annotations": {
        "ann1": {"entity_mentions": [  # "Mr Hakan Yilmaz"
            {"start_offset": a - 3, "end_offset": a + len("Hakan Yilmaz"), "entity_type": "PERSON",
             "entity_id": "e1", "identifier_type": "DIRECT"}]},
        "ann2": {"entity_mentions": [  # "Yilmaz Ozturk": crosses the first
            {"start_offset": a + len("Hakan "), "end_offset": b + len("Ozturk"), "entity_type": "PERSON",
             "entity_id": "e2", "identifier_type": "DIRECT"},
            {"start_offset": text.index("Izmir"), "end_offset": text.index("Izmir") + 5, "entity_type": "LOC",
             "entity_id": "e3", "identifier_type": "QUASI"}]}}}]))
    return path


@pytest.mark.parametrize("sanitizer,expected", [
    ("suppression", "The applicant, , was born in  in 1961."),
    ("labels", "The applicant, [PERSON], was born in [LOC] in 1961."),
])
def test_crossing_mentions_of_two_annotators_are_masked_as_their_union(tmp_path, sanitizer, expected):
    """The probe's case: suppression left part of one of two crossing mentions in the clear."""
    src = _tab_with_crossing(tmp_path)
    out = tmp_path / f"{sanitizer}.jsonl"
    res = CliRunner().invoke(main, ["sanitize", sanitizer, "--input", str(src), "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(out.read_text().splitlines()[0])
    assert doc["text"] == expected
    for name in ("Hakan", "Yilmaz", "Ozturk", "Izmir"):
        assert name not in doc["text"]
    assert doc["spans"][0]["original"] == "Mr Hakan Yilmaz Ozturk"  # the union, recorded as what was replaced


def test_crossing_mentions_pass_validation_and_a_label_filter_masks_their_union(tmp_path):
    src = _tab_with_crossing(tmp_path)
    res = CliRunner().invoke(main, ["data", "validate", str(src)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "one.jsonl"
    res = CliRunner().invoke(main, ["sanitize", "suppression", "--input", str(src), "--format", "tab",
                                    "--out", str(out), "--param", "labels=[PERSON]"])
    assert res.exit_code == 0, res.output
    assert "Hakan" not in json.loads(out.read_text())["text"]
