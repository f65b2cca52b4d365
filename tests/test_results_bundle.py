"""A results bundle that renders alone (issue 59, item 3): the results file, its summary and its
release copies, with a manifest listing each part's sha256. Moved anywhere, the report, the gate
and load_results work from it alone; a part missing or altered is an error naming it."""

from __future__ import annotations

import hashlib
import json
import shutil

import pandas as pd
import pytest
from click.testing import CliRunner

import anonaudit
from anonaudit.cli import main
from audit.core.bundle import manifest_path


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    data = anonaudit.sample_data(n=8, seed=0)
    results = anonaudit.audit(originals=pd.DataFrame(data["originals"]),
                              releases={k: pd.DataFrame(v) for k, v in data["releases"].items()},
                              attacks=["phrase_search"], metrics=["rouge"], seed=0, progress=False)
    folder = tmp_path_factory.mktemp("bundle") / "audit"
    results.save(folder / "results.json")
    return folder, results


@pytest.fixture
def bundle(saved, tmp_path):
    """A fresh copy of the saved bundle, moved to another folder (the original one removed from
    sight: nothing of the run is beside it)."""
    target = tmp_path / "elsewhere" / "moved"
    shutil.copytree(saved[0], target)
    return target


def test_the_manifest_lists_every_part_with_its_sha256(bundle):
    manifest = json.loads(manifest_path(bundle / "results.json").read_text(encoding="utf-8"))
    assert manifest["schema"] == "anonaudit.bundle/1" and manifest["results"] == "results.json"
    parts = {p["path"]: p for p in manifest["parts"]}
    copies = sorted(f"releases/{p.name}" for p in (bundle / "releases").iterdir())
    assert sorted(parts) == sorted(["results.json", "summary.csv", *copies])
    for path, part in parts.items():
        assert part["sha256"] == hashlib.sha256((bundle / path).read_bytes()).hexdigest()
    assert {p["release"] for p in parts.values() if p["role"] == "release copy"} == {"labels", "suppressed"}


def test_report_gate_and_load_results_work_from_the_moved_bundle_alone(bundle, saved, tmp_path):
    loaded = anonaudit.load_results(bundle)  # the folder, or its results.json
    assert loaded.texts() == saved[1].texts() and loaded.texts()["labels"]
    pd.testing.assert_frame_equal(loaded.to_pandas(), saved[1].to_pandas())
    out = CliRunner().invoke(main, ["report", str(bundle / "results.json"), "--out", str(tmp_path / "r.html")])
    assert out.exit_code == 0, out.output
    some_text = next(iter(loaded.texts()["labels"].values()))
    assert some_text.split()[0] in (tmp_path / "r.html").read_text(encoding="utf-8")  # the drill-down's texts
    gate = CliRunner().invoke(main, ["gate", str(bundle / "results.json"), "--max", "phrase_search=1.0"])
    assert gate.exit_code == 0, gate.output
    # the folder names the bundle as well as its results.json does
    gate = CliRunner().invoke(main, ["gate", str(bundle), "--max", "phrase_search=0.0"])
    assert gate.exit_code == 1 and "phrase_search" in gate.output, gate.output
    out = CliRunner().invoke(main, ["report", str(bundle)])
    assert out.exit_code == 0 and (bundle / "report.html").is_file(), out.output
    empty = tmp_path / "empty"
    empty.mkdir()
    for argv in (["report", str(empty)], ["gate", str(empty), "--max", "phrase_search=1.0"]):
        res = CliRunner().invoke(main, argv)
        assert res.exit_code == 2 and "results.json" in res.output and "Traceback" not in res.output, res.output


@pytest.mark.parametrize("part, what", [("releases", "the copy of release 'labels'"),
                                        ("summary.csv", "the summary table")])
def test_a_missing_or_altered_part_is_an_error_naming_it(bundle, tmp_path, part, what):
    target = (sorted((bundle / "releases").glob("labels-*.jsonl"))[0] if part == "releases"
              else bundle / part)
    original = target.read_bytes()
    for damage, said in ((lambda: target.unlink(), "is missing"),
                         (lambda: target.write_bytes(original.replace(b"a", b"e", 1)), "was changed after")):
        damage()
        with pytest.raises(anonaudit.AnonauditError, match=f"{what}.*{said}|{said}.*{what}") as caught:
            anonaudit.load_results(bundle / "results.json")
        assert target.name in str(caught.value)
        for argv in (["report", str(bundle / "results.json"), "--out", str(tmp_path / "r.html")],
                     ["gate", str(bundle / "results.json"), "--max", "phrase_search=1.0"]):
            res = CliRunner().invoke(main, argv)
            assert res.exit_code == 2 and target.name in res.output and "Traceback" not in res.output, res.output
        target.write_bytes(original)
    anonaudit.load_results(bundle / "results.json")  # whole again


def test_an_edited_results_file_is_named_and_an_old_one_without_manifest_still_loads(bundle):
    path = bundle / "results.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["provenance"]["title"] = "edited by hand"  # still a valid results file
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(anonaudit.AnonauditError, match="results.json: the results file was changed after"):
        anonaudit.load_results(path)
    manifest_path(path).unlink()  # a manifest gone from a file written with one: refused
    with pytest.raises(anonaudit.AnonauditError, match="results.manifest.json: the manifest of results.json is missing"):
        anonaudit.load_results(path)
    del data["provenance"]["bundle"]  # as written before bundles had a manifest: read, copies checked
    path.write_text(json.dumps(data), encoding="utf-8")
    assert anonaudit.load_results(path).provenance["title"] == "edited by hand"
    shutil.rmtree(bundle / "releases")
    with pytest.raises(anonaudit.AnonauditError, match="the copy of release '(labels|suppressed)' is missing"):
        anonaudit.load_results(path)


def test_a_file_of_the_user_where_the_manifest_goes_is_never_written_over(saved, tmp_path):
    theirs = tmp_path / "results.manifest.json"
    theirs.write_text('{"name": "my web app"}', encoding="utf-8")
    with pytest.raises(anonaudit.AnonauditError, match="not one anonaudit wrote"):
        saved[1].save(tmp_path / "results.json")
    assert theirs.read_text(encoding="utf-8") == '{"name": "my web app"}'


def test_a_reader_waits_for_a_writer_between_the_results_file_and_its_manifest(bundle):
    """A writer holds the results file's lock from results.json to its manifest
    (ResultsFile.update); load_results and the gate read both under the same lock, so a reader
    never meets one write's results with another's manifest."""
    import threading

    from audit.core.files import locked

    done: list[object] = []
    with locked(bundle / "results.json"):  # a writer between results.json and the manifest
        reader = threading.Thread(target=lambda: done.append(anonaudit.load_results(bundle)))
        reader.start()
        reader.join(0.5)
        assert reader.is_alive() and not done  # it waits ...
    reader.join(30)
    assert len(done) == 1 and done[0].texts()  # ... and reads the whole bundle once the writer is done
