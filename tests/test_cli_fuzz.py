"""Property-based fuzzing of every command line: options, paths and values of every command.

The commands are found by walking the CLI itself (``anonaudit attack NAME`` and ``sanitize NAME``
for every registered component, ``utility``, ``data``, ``run``, ``report``, ``gate``, ``harden``,
``demo``...), so a new command or option is fuzzed without a change here. For each command
Hypothesis draws a command line from the command's own parameters: each option left out or
given, with a value drawn by its type from values a user could type (existing inputs of every
kind, missing files, folders, a path under a file, the command's own input as its output,
negative, zero and huge numbers, NaN, bad templates, unknown labels, ``NAME=FILE`` spellings).

The rule, for every command line: **a clear error (exit 2 with a message) or a correct
result**: never a traceback (any exception but ``SystemExit``), never an exit code outside
0/1/2/3, never an exit 0 whose ``--out`` was not written, never an input file changed by the
command, and never a sanitizer's exit 0 that left every document as it was.

Models are never loaded: every model load (LLM, embedder, spaCy, transformers, Presidio) and
Ray's start raise :class:`HeavyWork`, a ``BaseException`` no command catches, which counts as
success (the command validated its input and reached the real work). Runs in-process with
click's ``CliRunner``, each example in a fresh copy of a small workspace (the demo population
of 3 people, a results file, a spec), with ``ANONAUDIT_HOME`` an empty folder of its own.

Examples per command: ``ANONAUDIT_CLI_FUZZ_EXAMPLES`` (default 12, so the suite stays quick;
``ANONAUDIT_CLI_FUZZ_EXAMPLES=500 ANONAUDIT_FUZZ_RANDOM=1 pytest tests/test_cli_fuzz.py`` for a
long run).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path

import click
import pytest

hypothesis = pytest.importorskip("hypothesis", reason="the fuzz suite needs hypothesis: pip install -e '.[test]'")
from click.testing import CliRunner  # noqa: E402
from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from anonaudit.cli import main  # noqa: E402

EXAMPLES = int(os.environ.get("ANONAUDIT_CLI_FUZZ_EXAMPLES", "12"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None, derandomize=not os.environ.get("ANONAUDIT_FUZZ_RANDOM"),
                suppress_health_check=list(HealthCheck), database=None,
                # Each failure message shows the whole command line; shrinking one costs minutes.
                phases=[Phase.explicit, Phase.generate])


class HeavyWork(BaseException):
    """Raised where a model would load or Ray would start: the command got past validation."""


# --------------------------------------------------------------------------- the commands


def _walk(cmd: click.Command, path: tuple[str, ...], ctx: click.Context):
    if isinstance(cmd, click.Group):
        for name in cmd.list_commands(ctx):
            sub = cmd.get_command(ctx, name)
            if sub is not None:
                yield from _walk(sub, (*path, name), click.Context(sub, parent=ctx, info_name=name))
    else:
        yield path, [p for p in cmd.get_params(ctx)
                     if p.name not in ("help", "version") and not {"--help", "--version"} & set(p.opts)]


def commands() -> dict[tuple[str, ...], list[click.Parameter]]:
    """Every leaf command of the CLI with its parameters."""
    return dict(_walk(main, (), click.Context(main, info_name="anonaudit")))


COMMANDS = commands()

# --------------------------------------------------------------------------- values a user could type

INPUTS = ["originals.jsonl", "background.jsonl", "releases/labels.jsonl", "releases/suppressed.jsonl",
          "results.json", "audit.yaml", "spans.json", "originals.json", "empty.jsonl", "garbage.bin",
          "folder", "missing.jsonl", "originals.jsonl/child.json", "crossing.json"]
OUTPUTS = ["new.jsonl", "new.json", "new.html", "new.csv", "sub/new.json", "folder", "originals.jsonl/x.json",
           "results.json", "originals.jsonl", "audit.yaml", "newdir"]
RELEASES = [*INPUTS, "labels=releases/labels.jsonl", "x=missing.jsonl", "=releases/labels.jsonl",
            "a/b=releases/labels.jsonl", "../evil=releases/labels.jsonl", "labels"]
WORDS = ["", " ", "PERSON", "NOSUCHLABEL", "PERSON,DATE", "PERSN,DATEE", "../evil", "[{foo}]", "[{0}]",
         "[{label}]", "{", "x", "ünïcödé", "trir=0.2", "phrase_search=1.5", "tps=-1", "x=nan", "nan", "inf", "1e309",
         "qwen2.5-coder-0.5b", "default", "openai:m@http://127.0.0.1:9/v1", "k=3", "nosuch=1",
         "labels=[PERSON]", "template='[{foo}]'", "max_n=0", "auto", "local", "labels", "suppressed", "-1", "0"]
INTS = ["-1", "0", "1", "2", "3", "7", "1500", "1000000000000", "x", "1.5"]
FLOATS = ["-1", "0", "0.5", "1", "2", "nan", "inf", "-inf", "1e309", "x"]
OUT_NAMES = {"out", "out_dir", "dst", "junit", "results_dir"}
#: String options whose value names a file (a release, a corpus, an index folder).
FILE_STRINGS = {"releases", "release", "collection", "extra_corpus", "dev", "index_dir", "background", "base"}


def _text() -> st.SearchStrategy[str]:
    return st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), max_size=8)


def _values(p: click.Parameter) -> st.SearchStrategy[str]:
    t, name = p.type, p.name or ""
    if name in OUT_NAMES:
        return st.sampled_from(OUTPUTS + INPUTS[:3])
    if isinstance(t, click.Path):
        return st.sampled_from(INPUTS + OUTPUTS[:2])
    if isinstance(t, click.Choice):
        return st.sampled_from([*map(str, t.choices), "bogus"])
    if isinstance(t, (click.types.IntParamType, click.IntRange)):
        return st.sampled_from(INTS)
    if isinstance(t, (click.types.FloatParamType, click.FloatRange)):
        return st.sampled_from(FLOATS)
    if name in FILE_STRINGS:
        return st.sampled_from(RELEASES + ["idx", "folder"])
    return st.one_of(st.sampled_from(WORDS + INPUTS[:4]), _text())


def draw_argv(data: st.DataObject, path: tuple[str, ...],
              params: list[click.Parameter]) -> tuple[list[str], list[str], list[str]]:
    """A command line for ``path`` drawn from its parameters by type: ``(argv, outputs, inputs)``,
    the values given to output parameters (``--out``, ``--junit``, ``DST``...) and to the others."""
    argv: list[str] = list(path)
    args: list[str] = []
    outs: list[str] = []
    ins: list[str] = []
    for p in params:
        role = outs if p.name in OUT_NAMES else ins
        if isinstance(p, click.Argument):
            if p.required or data.draw(st.booleans()):
                n = 1 if p.nargs == 1 else data.draw(st.integers(0, 2))
                values = [data.draw(_values(p)) for _ in range(n)]
                args += values
                role += values
            continue
        if not isinstance(p, click.Option):
            continue
        wanted = data.draw(st.floats(0, 1)) < (0.9 if p.required else 0.35)
        if not wanted:
            continue
        if p.is_flag:
            argv.append(data.draw(st.sampled_from([*p.opts, *p.secondary_opts])))
            continue
        for _ in range(data.draw(st.integers(1, 2)) if p.multiple else 1):
            value = data.draw(_values(p))
            argv += [p.opts[0], value]
            role.append(value)
    if args and data.draw(st.booleans()):
        argv.append("--")  # so that an argument drawn as "-1" stays an argument
    return argv + args, outs, ins


# --------------------------------------------------------------------------- the workspace


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """Inputs of every kind: the demo population (3 people), a results file, a spec, a span file
    with its originals, TAB JSON with two annotators, an empty file, bytes, a folder."""
    from anonaudit.demo.population import write as write_demo

    root = tmp_path_factory.mktemp("cli-fuzz")
    write_demo(root, n=3, seed=0)
    (root / "empty.jsonl").write_bytes(b"")
    (root / "garbage.bin").write_bytes(bytes(range(256)))
    (root / "folder").mkdir()
    (root / "originals.json").write_text(json.dumps({"a": "Alice Smith lives in Oslo."}), encoding="utf-8")
    (root / "spans.json").write_text(json.dumps({"a": [[0, 11, "[PERSON]"]]}), encoding="utf-8")
    (root / "crossing.json").write_text(json.dumps([{
        "doc_id": "c", "text": "Alice Smith lives in Oslo.", "annotations": {
            "ann1": {"entity_mentions": [{"start_offset": 0, "end_offset": 11, "entity_type": "PERSON",
                                          "entity_id": "e1", "identifier_type": "DIRECT"}]},
            "ann2": {"entity_mentions": [{"start_offset": 6, "end_offset": 17, "entity_type": "PERSON",
                                          "entity_id": "e2", "identifier_type": "DIRECT"}]}}}]), encoding="utf-8")
    (root / "audit.yaml").write_text(
        "title: fuzz\nseed: 0\nout: run\noriginals: originals.jsonl\nbackground: background.jsonl\n"
        "releases:\n  - {name: ours, path: releases/suppressed.jsonl}\n"
        "attacks: [phrase_search]\nmetrics: [recall]\ngate: {max: {phrase_search: 0.5}}\n", encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(root)
    try:
        res = CliRunner().invoke(main, ["attack", "phrase-search", "--originals", "originals.jsonl", "--release",
                                        "releases/labels.jsonl", "--out", "results.json"])
        assert res.exit_code == 0, res.output
    finally:
        os.chdir(cwd)
    return root


@pytest.fixture(scope="module")
def no_models():
    """Every model load and Ray's start raise HeavyWork (see the module's docstring)."""
    import spacy
    import transformers

    import audit.models.embed as embed
    import audit.models.specs as specs

    def heavy(*args, **kwargs):
        raise HeavyWork()

    mp = pytest.MonkeyPatch()
    mp.setattr(specs, "load_llm", heavy)
    mp.setattr(specs, "assemble_parts", heavy)
    mp.setattr(embed, "_load", heavy)
    mp.setattr(spacy, "load", heavy)
    for cls in ("AutoTokenizer", "AutoModel", "AutoModelForSequenceClassification", "AutoModelForMaskedLM",
                "AutoModelForCausalLM"):
        mp.setattr(getattr(transformers, cls), "from_pretrained", heavy)
    try:
        import ray

        mp.setattr(ray, "init", heavy)
    except ImportError:
        pass
    try:
        import presidio_analyzer

        mp.setattr(presidio_analyzer.AnalyzerEngine, "__init__", heavy)
    except ImportError:
        pass
    yield
    mp.undo()


def _digest(path: Path) -> str | None:
    if path.is_file():
        return hashlib.sha256(path.read_bytes()).hexdigest()
    if path.is_dir():
        return "dir"
    return None


def _texts(path: Path) -> list[str] | None:
    try:
        return [json.loads(line).get("text") for line in path.read_text(encoding="utf-8").splitlines() if line]
    except (OSError, ValueError, AttributeError):
        return None


def check_command_line(template: Path, argv: list[str], outs: list[str], ins: list[str]) -> None:
    """Run ``argv`` in a fresh copy of the workspace and apply the rule of the module."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        shutil.copytree(template, ws, symlinks=True)
        home = Path(tmp) / "home"
        files = {p: _digest(p) for p in ws.rglob("*") if p.is_file()}
        mtimes = {p: p.stat().st_mtime_ns for p in files}
        cwd = os.getcwd()
        os.chdir(ws)
        try:
            res = CliRunner().invoke(main, argv, env={"ANONAUDIT_HOME": str(home),
                                                      "ANONAUDIT_PROGRESS_SECONDS": "600"})
        except HeavyWork:
            return  # validated, and got as far as the real work
        finally:
            os.chdir(cwd)
        shown = "anonaudit " + " ".join(argv)
        if isinstance(res.exception, HeavyWork):
            return
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            import traceback

            tb = "".join(traceback.format_exception(res.exception))
            raise AssertionError(f"traceback from: {shown}\n{res.output}\n{tb}")
        code = res.exit_code
        assert code in (0, 1, 2, 3), f"exit {code} from: {shown}\n{res.output}"
        if code == 2:
            assert res.output.strip(), f"exit 2 without a message from: {shown}"
            return
        for p in {ws / v for v in ins if (ws / v) in files}:  # no output may overwrite an input, --force or not
            assert _digest(p) == files[p], f"exit {code} and the input {p.name} changed: {shown}\n{res.output}"
        if code != 0:
            return
        for out in outs:
            p = ws / out
            assert p.exists(), f"exit 0 but --out {out} was not written: {shown}\n{res.output}"
            if p.is_file() and p in files:
                assert p.stat().st_mtime_ns != mtimes[p] or _digest(p) != files[p], \
                    f"exit 0 but --out {out} is unchanged: {shown}\n{res.output}"
        if argv[0] == "sanitize" and outs:
            given = argv[argv.index("--input") + 1] if "--input" in argv else None
            before, after = _texts(ws / given) if given else None, _texts(ws / outs[0])
            if before and after and before == after:
                raise AssertionError(f"exit 0 but the sanitizer changed no document: {shown}\n{res.output}")


# --------------------------------------------------------------------------- the tests


def test_every_command_is_fuzzed():
    names = {" ".join(p) for p in COMMANDS}
    for needed in ("attack trir", "attack phrase-search", "sanitize suppression", "sanitize delinker", "utility",
                   "data validate", "data convert", "run", "report", "gate", "harden", "demo", "demo-data",
                   "models list", "llm chat"):
        assert needed in names
    assert len(names) >= 20


@pytest.mark.parametrize("path", sorted(COMMANDS), ids=lambda p: "-".join(p))
def test_command_line_fuzz(path, template, no_models):
    params = COMMANDS[path]

    @FUZZ
    @given(data=st.data())
    def run(data):
        check_command_line(template, *draw_argv(data, path, params))

    run()
