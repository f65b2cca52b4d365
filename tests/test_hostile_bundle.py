"""Hostile input, issue 67 (items 1-4): outputs that never touch inputs, a bundle that cannot be
forged, a gate that cannot pass by omission, and one pseudonymisation rule for what CI publishes.

Each test forges what a hostile user (or a careless one) would, through the real command line
with the toy registry of tests/test_hostile.py (no model is loaded). Cost: the whole file runs in
a few seconds on 2 cores (one toy audit per test, each ~0.3 s).
"""

from __future__ import annotations

import hashlib
import json

import pytest

from audit.core.bundle import manifest_path
from tests.test_hostile import clear_error, demo, reg, run  # noqa: F401 (fixtures)


@pytest.fixture
def bundle(demo, reg):
    """A results bundle ``B/results.json`` of one toy attack and one toy metric on two releases."""
    for rel in ("labels", "suppressed"):
        res = run(reg, "attack", "toy-survives", "--originals", "demo/originals.jsonl", "--release",
                  f"{rel}=demo/releases/{rel}.jsonl", "--out", "B/results.json")
        assert res.exit_code == 0, res.output
    res = run(reg, "utility", "--metrics", "toy_kept", "--originals", "demo/originals.jsonl", "--release",
              "labels=demo/releases/labels.jsonl", "--out", "B/results.json")
    assert res.exit_code == 0, res.output
    return demo / "B"


def _snapshot(folder):
    return {p: p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(".lock")}


# --------------------------------------------------------------------------- 1. outputs never touch inputs


def test_no_output_replaces_a_part_of_the_bundle_being_read_even_forced(bundle, reg, monkeypatch):
    before = _snapshot(bundle)
    copy = sorted((bundle / "releases").iterdir())[0]
    cases = [
        # the report's findings CSV beside B/summary.html is B/summary.csv
        (["report", "B/results.json", "--out", "B/summary.html"], "summary.csv"),
        (["report", "B/results.json", "--out", "B/results.manifest.json"], "results.manifest.json"),
        (["report", "B", "--out", f"B/releases/{copy.name}"], copy.name),
        (["gate", "B/results.json", "--max", "toy_survives=1", "--junit", "B/results.manifest.json"],
         "results.manifest.json"),
        (["gate", "B/results.json", "--max", "toy_survives=1", "--codequality", "B/summary.csv"], "summary.csv"),
    ]
    for args, part in cases:
        for force in ([], ["--force"]):
            out = clear_error(run(reg, *args, *force), part, "this is also the command's input", "RESULTS.json's")
            assert out.count(part) >= 2, out  # names the output and the input it would destroy
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(bundle / "summary.csv"))
    clear_error(run(reg, "gate", "B/results.json", "--max", "toy_survives=1", "--format", "github"),
                "GITHUB_STEP_SUMMARY", "summary.csv", "this is also the command's input")
    assert _snapshot(bundle) == before


def test_two_outputs_of_one_command_at_one_path_are_refused(bundle, reg):
    before = _snapshot(bundle)
    out = clear_error(run(reg, "gate", "B/results.json", "--max", "toy_survives=1", "--junit", "x.json",
                          "--codequality", "x.json", "--force"), "--junit", "--codequality", "are one file")
    assert "x.json" in out and not (bundle.parent / "x.json").exists()
    # a report named like its CSV: the findings CSV beside x.csv is x.csv itself
    clear_error(run(reg, "report", "B/results.json", "--out", "x.csv", "--force"), "are one file")
    assert not (bundle.parent / "x.csv").exists()
    assert _snapshot(bundle) == before


SUFFIX_CASES = [  # (command line, option named, the ending it must have): every file and folder output
    (["attack", "toy-survives", "--originals", "demo/originals.jsonl", "--release", "demo/releases/labels.jsonl",
      "--out", "x.pdf"], "--out", ".json"),
    (["utility", "--metrics", "toy_kept", "--originals", "demo/originals.jsonl", "--release",
      "l=demo/releases/labels.jsonl", "--out", "x.csv"], "--out", ".json"),
    (["report", "B", "--out", "x.pdf"], "the report", ".html"),
    (["report", "B", "--out", "report"], "the report", ".html"),
    (["gate", "B", "--max", "toy_survives=1", "--junit", "j.json"], "--junit", ".xml"),
    (["gate", "B", "--max", "toy_survives=1", "--format", "gitlab", "--codequality", "cq.xml"], "--codequality",
     ".json"),
    (["sanitize", "suppression", "--input", "demo/originals.jsonl", "--out", "x.json"], "--out", ".jsonl"),
    (["data", "convert", "demo/originals.jsonl", "x.csv"], "DST", ".jsonl"),
    (["run", "s.yaml", "--out", "o.html"], "--out", "without it"),
    (["bench", "--originals", "demo/originals.jsonl", "--background", "demo/background.jsonl", "--release",
      "demo/releases/labels.jsonl", "--attacks", "toy_survives", "--out", "b.pdf"], "--out", "without it"),
    (["demo-data", "--out", "d.json"], "--out", "without it"),
    (["harden", "s.yaml", "--release", "labels", "--out", "h.jsonl", "--results-dir", "h.json"], "--results-dir",
     "without it"),
    (["harden", "s.yaml", "--release", "labels", "--out", "h.json"], "--out", ".jsonl"),
    (["demo", "--out", "d.zip"], "--out", "without it"),
]


@pytest.mark.parametrize("args,option,ending", SUFFIX_CASES, ids=[c[0][0] + ":" + c[0][-1] for c in SUFFIX_CASES])
def test_an_output_whose_name_is_not_its_format_is_refused_before_any_work(bundle, reg, args, option, ending):
    """One rule for every output (audit/pipeline/outputs.py, SUFFIXES): a file is written in the
    format its name ends in, or refused before any work, nothing written; a folder of outputs
    named like a file is refused too. Cost: ~0.1 s a case."""
    (bundle.parent / "s.yaml").write_text("originals: demo/originals.jsonl\nreleases: [demo/releases/labels.jsonl]\n"
                                         "attacks: [toy_survives]\n", encoding="utf-8")
    before = sorted(p for p in bundle.parent.rglob("*"))
    for force in ([], ["--force"]):
        clear_error(run(reg, *args, *force), option, args[-1], ending)
    assert sorted(p for p in bundle.parent.rglob("*")) == before  # nothing written, no folder made


def test_the_api_refuses_an_output_whose_name_is_not_its_format(bundle, tmp_path):
    import anonaudit

    tmp_path = tmp_path / "outputs"
    tmp_path.mkdir()
    rf = anonaudit.load_results(bundle)
    calls = [(lambda: rf.save(tmp_path / "r.csv"), ".json"), (lambda: rf.report(tmp_path / "r.pdf"), ".html"),
             (lambda: rf.gate(max={"toy_survives": 1}).write_junit(tmp_path / "j.json"), ".xml"),
             (lambda: anonaudit.attack("phrase_search", {"l": str(bundle.parent / "demo/releases/labels.jsonl")},
                                       originals=str(bundle.parent / "demo/originals.jsonl"),
                                       out=tmp_path / "r.txt", progress=False), ".json")]
    for call, ending in calls:
        with pytest.raises(anonaudit.AnonauditError, match=f"ending in {ending}"):
            call()
    assert list(tmp_path.iterdir()) == []


def test_the_api_refuses_an_output_over_a_part_of_the_bundle(bundle):
    import anonaudit

    rf = anonaudit.load_results(bundle)
    before = _snapshot(bundle)
    for target in ("summary.html", "results.manifest.json"):
        with pytest.raises(anonaudit.AnonauditError, match="this is also the command's input"):
            rf.report(bundle / target, force=True)
    assert _snapshot(bundle) == before


def test_two_benches_into_one_folder_never_mix(tmp_path):
    """A bench holds its folder for its whole run: a second one into it is refused, naming the
    folder (it used to mix the two benches' releases in one leaderboard)."""
    import filelock

    import anonaudit
    from audit.pipeline.bench_writer import BenchWriter

    out = tmp_path / "bench"
    BenchWriter(out, inputs=[]).close()  # made, then let go: the folder can be used again
    with filelock.FileLock(str(out / ".anonaudit-bench.lock")):  # held by another process's bench
        with pytest.raises(anonaudit.AnonauditError, match=str(out)):
            anonaudit.bench(release=str(tmp_path / "none.jsonl"), demo_people=4, out=out)
    with filelock.FileLock(str(out / ".anonaudit-bench.lock"), timeout=0):  # let go after the refusal
        pass


# --------------------------------------------------------------------------- 2. a bundle that cannot be forged


def _manifest(bundle):
    return json.loads(manifest_path(bundle / "results.json").read_text(encoding="utf-8"))


def _copy_part(m):
    return next(p for p in m["parts"] if p["role"] == "release copy")


FORGERIES = {  # name: (change to the parsed manifest, or the manifest's new text; what the error names)
    "null checksum": (lambda m: [p.update(sha256=None) for p in m["parts"] if p["role"] == "results"],
                      ["the results file", "sha256"]),
    "no parts": (lambda m: m.update(parts=[]), ["the results file must be listed once"]),
    "parts missing": (lambda m: m.pop("parts"), ['"parts" is missing']),
    "summary left out": (lambda m: m.update(parts=[p for p in m["parts"] if p["role"] != "summary"]),
                         ["the summary table must be listed once"]),
    "copy left out": (lambda m: m.update(parts=[p for p in m["parts"] if p["role"] != "release copy"][:2]
                                         + [p for p in m["parts"] if p["role"] == "release copy"][1:]),
                      ["is not listed in the manifest"]),
    "part listed twice": (lambda m: m["parts"].append(dict(_copy_part(m))), ["listed 2 times"]),
    "extra key": (lambda m: m.update(trusted=True), ['unknown key "trusted"']),
    "extra part key": (lambda m: _copy_part(m).update(verify=False), ['unknown key "verify"']),
    "checksum missing": (lambda m: _copy_part(m).pop("sha256"), ['"sha256" is missing', "the copy of release"]),
    "checksum not one": (lambda m: _copy_part(m).update(sha256="0" * 63), ["64 lowercase hex digits"]),
    "unknown role": (lambda m: _copy_part(m).update(role="other"), ['"role" must be one of']),
    "absolute path": (lambda m: _copy_part(m).update(path="/etc/hostname"), ["outside the bundle's folder"]),
    "another results file": (lambda m: m.update(results="other.json"), ['"results" must be \'results.json\'']),
    "wrong size": (lambda m: [p.update(bytes=p["bytes"] + 1) for p in m["parts"] if p["role"] == "summary"],
                   ["the summary table", "was changed after the audit wrote it"]),
    "copy the provenance does not know": (  # B/releases/ghost.jsonl is written by the test
        lambda m: m["parts"].append({**_copy_part(m), "release": "ghost", "path": "releases/ghost.jsonl",
                                     "sha256": hashlib.sha256(b"ghost\n").hexdigest()}),
        ["'ghost' is listed, but results.json records no such release"]),
    "key given twice": (lambda text: text.replace('"schema":', '"parts": [], "schema":', 1), ["'parts'", "twice"]),
}


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_forged_manifest_is_refused_by_report_gate_and_load_results(bundle, reg, tmp_path, forgery):
    """Each forgery of the manifest (the issue's null checksum, empty parts and duplicated key, and
    more), then an edited results.json and summary.csv, as the forger would: every reader refuses,
    naming the manifest and the part, before it reads the results."""
    import anonaudit

    change, needles = FORGERIES[forgery]
    (bundle / "releases" / "ghost.jsonl").write_bytes(b"ghost\n")
    target = manifest_path(bundle / "results.json")
    if forgery == "key given twice":
        target.write_text(change(target.read_text(encoding="utf-8")), encoding="utf-8")
    else:
        m = _manifest(bundle)
        change(m)
        target.write_text(json.dumps(m), encoding="utf-8")
    with pytest.raises(anonaudit.AnonauditError) as err:
        anonaudit.load_results(bundle)
    for needle in needles:
        assert needle in str(err.value), str(err.value)
    results = bundle / "results.json"
    results.write_text(results.read_text(encoding="utf-8").replace('"value": 0.', '"value": 0.0', 1), encoding="utf-8")
    with open(bundle / "summary.csv", "a", encoding="utf-8") as fh:
        fh.write("labels,attack,toy_survives,0.0,0.0,0.0,1,,,,\n")
    for args in (["gate", "B/results.json", "--max", "toy_survives=1"],
                 ["report", "B", "--out", tmp_path / "r.html"],
                 ["report", "B", "--out", tmp_path / "r.html", "--max", "toy_survives=1"]):
        clear_error(run(reg, *args), "results.manifest.json")
    assert not (tmp_path / "r.html").exists()


def test_a_manifest_deleted_from_a_bundle_written_with_one_is_refused(bundle, reg):
    """The results file records that a manifest goes with it: deleting the manifest does not
    switch the check off (a file written before manifests existed, without the record, still reads)."""
    manifest_path(bundle / "results.json").unlink()
    for args in (["gate", "B", "--max", "toy_survives=1"], ["report", "B", "--out", "r.html"]):
        clear_error(run(reg, *args), "results.manifest.json", "is missing")


def test_the_api_gate_publishes_a_release_named_after_its_file_by_its_pseudonym(by_file, tmp_path):
    import anonaudit

    outcome = anonaudit.load_results(by_file).gate(max={"toy_survives": 0.0})
    assert "labels" not in outcome.table() and "R1" in outcome.table() and "labels" in outcome.table(keep_ids=True)
    junit = outcome.write_junit(tmp_path / "j.xml").read_text(encoding="utf-8")
    assert "labels" not in junit and "R1" in junit


def test_a_whole_manifest_still_reads_and_lists_every_part_with_a_checksum(bundle):
    import anonaudit

    m = _manifest(bundle)
    assert {p["role"] for p in m["parts"]} == {"results", "summary", "release copy"}
    assert len([p for p in m["parts"] if p["role"] == "release copy"]) == 2
    assert all(isinstance(p["sha256"], str) and len(p["sha256"]) == 64 for p in m["parts"])
    assert anonaudit.load_results(bundle).file.releases == ["labels", "suppressed"]


# --------------------------------------------------------------------------- 3. a gate that cannot pass by omission


@pytest.fixture
def unattacked(bundle, reg):
    """The bundle plus a release ``other`` that only the utility metric ran on."""
    res = run(reg, "utility", "--metrics", "toy_kept", "--originals", "demo/originals.jsonl", "--release",
              "other=demo/releases/suppressed.jsonl", "--out", "B/results.json")
    assert res.exit_code == 0, res.output
    return bundle


def test_a_threshold_with_no_result_on_a_release_is_inconclusive_never_a_pass(unattacked, reg, tmp_path):
    res = run(reg, "gate", "B", "--max", "toy_survives=1", "--junit", tmp_path / "j.xml")
    assert res.exit_code == 3, res.output  # it used to say "all 2 check(s) passed", exit 0
    assert "passed" not in res.output.splitlines()[-1]
    row = next(line for line in res.output.splitlines() if " other " in f" {line} ")
    assert "no result" in row and "INCONCLUSIVE" in row, res.output
    junit = (tmp_path / "j.xml").read_text(encoding="utf-8")
    assert junit.count('type="inconclusive"') == 1 and "no result on this release" in junit
    # a utility threshold missing on two releases, beside one that fails: the failure decides (exit 1)
    res = run(reg, "gate", "B", "--min", "toy_kept=0", "--max", "toy_survives=0")
    assert res.exit_code == 1, res.output
    assert res.output.count("no result") >= 1


def test_the_report_never_says_no_risk_shown_for_a_release_no_attack_ran_on(unattacked, reg, tmp_path):
    from reports.context import build_context
    from audit.core.results import ResultsFile

    rf = ResultsFile.load(unattacked / "results.json")
    verdicts = {v["release"]: v for v in build_context(rf)["verdicts"]}
    assert verdicts["other"]["word"] == "INCONCLUSIVE", verdicts["other"]
    assert any("not run on this release" in d for d in verdicts["other"]["deciding"])
    gated = {v["release"]: v for v in build_context(rf, checks=_checks(rf, "toy_survives"))["verdicts"]}
    assert gated["other"]["word"] == "INCONCLUSIVE"
    html = tmp_path / "r.html"
    assert run(reg, "report", "B", "--out", html, "--max", "toy_survives=1").exit_code == 0
    assert "no result on this release" in html.read_text(encoding="utf-8")


def _checks(rf, name):
    from audit.pipeline.gate import evaluate, parse_threshold

    return evaluate(rf, [parse_threshold(f"{name}=1", "max")])


def test_a_recorded_gate_keeps_the_release_with_no_result_inconclusive(unattacked):
    """What a run records of its spec's gate (provenance.gate.checks) carries the missing check,
    and reads back as inconclusive."""
    from audit.core.results import ResultsFile
    from audit.pipeline.gate import recorded

    rf = ResultsFile.load(unattacked / "results.json")
    rf.provenance["gate"] = {"checks": recorded(rf, {"max": {"toy_survives": 1.0}})}
    rf.save(unattacked.parent / "G.json")
    checks = ResultsFile.load(unattacked.parent / "G.json").checks()
    assert {(c.release, c.status) for c in checks} == {("labels", "pass"), ("suppressed", "pass"),
                                                      ("other", "inconclusive")}


def _standalone(bundle, path, change):
    """``results.json`` of the bundle changed by ``change`` (its parsed data), written alone at
    ``path`` (no manifest: read as an older results file, so the change itself is what is judged)."""
    data = json.loads((bundle / "results.json").read_text(encoding="utf-8"))
    data["provenance"].pop("releases", None)  # no release copies to look for
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_two_values_for_one_result_and_release_are_refused_naming_both(bundle, reg, tmp_path):
    import anonaudit

    def twice(data):
        kept = next(r for r in data["results"] if r["name"] == "toy_kept")
        data["results"].append({**kept, "value": (kept["value"] + kept["ci"][0]) / 2})

    path = _standalone(bundle, tmp_path / "dup.json", twice)
    first = next(r for r in json.loads(path.read_text())["results"] if r["name"] == "toy_kept")["value"]
    with pytest.raises(anonaudit.AnonauditError, match="given twice, with two values") as err:
        anonaudit.load_results(path)
    assert f"{first:.6g}" in str(err.value)
    for args in (["gate", path, "--min", "toy_kept=0"], ["report", path, "--out", tmp_path / "r.html"]):
        clear_error(run(reg, *args), "toy_kept", "given twice", f"{first:.6g}")


# --------------------------------------------------------------------------- 4. one rule for what CI publishes


@pytest.mark.parametrize("name", ["labels\n::error::forged", "labels\rforged", "lab\x1b[2Jels", "lab\u202eels"])
def test_a_release_name_with_control_characters_is_refused_when_results_are_read(bundle, reg, tmp_path, name):
    def rename(data):
        for r in data["results"]:
            if r["release"] == "labels":
                r["release"] = name

    path = _standalone(bundle, tmp_path / "ctl.json", rename)
    res = run(reg, "gate", path, "--max", "toy_survives=1")
    out = clear_error(res, '"release"', "control characters")
    assert not any(line.startswith("::error") for line in out.splitlines())


@pytest.fixture
def by_file(demo, reg):
    """A bundle whose release is named after its file (``labels``, from labels.jsonl)."""
    res = run(reg, "attack", "toy-survives", "--originals", "demo/originals.jsonl", "--release",
              "demo/releases/labels.jsonl", "--out", "P/results.json")
    assert res.exit_code == 0, res.output
    return demo / "P"


def test_a_release_named_after_its_file_is_pseudonymised_in_everything_the_gate_publishes(by_file, reg, tmp_path):
    args = ["gate", "P", "--max", "toy_survives=0", "--junit", tmp_path / "j.xml", "--codequality",
            tmp_path / "cq.json"]
    res = run(reg, *args)
    assert res.exit_code == 1, res.output
    published = [res.output, (tmp_path / "j.xml").read_text(), (tmp_path / "cq.json").read_text()]
    for text in published:
        assert "labels" not in text and "R1" in text, text
    res = run(reg, *args, "--keep-ids", "--force")
    assert res.exit_code == 1 and "labels" in res.output and "labels" in (tmp_path / "j.xml").read_text()


def test_to_latex_names_a_release_named_after_its_file_by_its_pseudonym(by_file):
    pytest.importorskip("pandas", reason="to_latex() needs the [pandas] extra (installed by [test])")
    import anonaudit

    results = anonaudit.load_results(by_file)
    assert "labels" not in results.to_latex() and "R1" in results.to_latex()
    assert "labels" in results.to_latex(keep_ids=True)


def test_the_shareable_editions_never_quote_a_release_warning(demo, reg, tmp_path):
    """A release that leaves out a document and records a replaced span that is not the
    original's text: its warnings quote the originals and list the missing id. The shareable
    report and the shareable results (what MLflow logs by default) keep only their count."""
    from audit.core.results import ResultsFile
    from reports.shareable import shareable

    missing = _doubtful_release(demo)
    res = run(reg, "attack", "toy-survives", "--originals", "demo/originals.jsonl", "--release",
              "short=short.jsonl", "--out", "W/results.json")
    assert res.exit_code == 0, res.output
    rf = ResultsFile.load(demo / "W/results.json")
    assert any(missing in w for w in rf.provenance["releases"]["short"]["warnings"])  # the private edition has it
    shared = json.dumps(shareable(rf, keep_ids=True).to_dict())
    assert repr(missing) not in shared and "Quoted Original" not in shared and '"warnings_withheld": 2' in shared
    assert run(reg, "report", "W", "--shareable", "--keep-ids", "--out", tmp_path / "s.html").exit_code == 0
    html = (tmp_path / "s.html").read_text(encoding="utf-8")
    assert repr(missing) not in html and "Quoted Original" not in html


def _doubtful_release(demo) -> str:
    """``short.jsonl``: the demo's labels release less its last document, one recorded span
    claiming to have replaced ``'Quoted Original'``; the id it leaves out is returned."""
    lines = (demo / "demo/releases/labels.jsonl").read_text(encoding="utf-8").splitlines()
    docs = [json.loads(line) for line in lines]
    missing = docs.pop()["id"]
    span = next(s for d in docs for s in d.get("spans", []) if s.get("original"))
    span["original"] = "Quoted Original"
    (demo / "short.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    return missing


def test_the_log_counts_a_release_warning_and_quotes_it_only_when_asked(demo, reg, capsys):
    """What a CI log publishes (stdout and stderr of attack, utility and run, and the API's
    progress) says how many warnings a release has and where they are, never their text (it
    quotes the originals and lists missing ids); ``-v`` prints them whole."""
    import anonaudit

    missing = _doubtful_release(demo)
    (demo / "s.yaml").write_text("out: S\noriginals: demo/originals.jsonl\nreleases: [{name: short, path: short.jsonl}]"
                                 "\nattacks: [toy_survives]\n", encoding="utf-8")
    release = ["--originals", "demo/originals.jsonl", "--release", "short=short.jsonl"]
    for args in (["attack", "toy-survives", *release, "--out", "A/results.json"],
                 ["utility", "--metrics", "toy_kept", *release, "--out", "U/results.json"],
                 ["run", "s.yaml", "--no-report"]):
        res = run(reg, *args)
        assert res.exit_code == 0, res.output
        assert "Quoted Original" not in res.output and repr(missing) not in res.output, res.output
        assert "release 'short': 2 warning(s)" in res.output and "provenance" in res.output, res.output
        loud = run(reg, "-v", *args)
        assert loud.exit_code == 0 and "Quoted Original" in loud.output and repr(missing) in loud.output, loud.output
    anonaudit.attack("toy_survives", originals="demo/originals.jsonl", releases={"short": "short.jsonl"},
                     registry=reg, progress=True)
    err = capsys.readouterr().err
    assert "release 'short': 2 warning(s)" in err and "Quoted Original" not in err and repr(missing) not in err
