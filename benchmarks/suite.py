"""The benchmarks as one suite: a declared list of cases, each with a quick size (issue 71, item 3).

    python benchmarks/suite.py                     # the cases: what each measures, what it needs
    python benchmarks/suite.py run CASE [ARGS...]   # the case's script at full size (ARGS are its own)
    python benchmarks/suite.py run CASE --quick     # ... at its quick size (a smoke run, not a figure)
    python benchmarks/suite.py check [CASE...]      # every import resolves and the quick size's arguments parse
    python benchmarks/suite.py quick [--model-free] # every case's quick size in turn, in this process, timed

A case is a :class:`Case` in :data:`CASES`: a name, the script that measures it, one line on what
it measures, what its quick size needs (``tab``: the shared TAB data; ``llm``, ``embedder``,
``spacy``: a model; ``train``: TRIR trainings; ``ray``: a local Ray) and the quick size's arguments
(``{work}`` is a fresh folder). Like asv's benchmark functions, pytest-benchmark's fixtures and
lm-eval-harness's task registry, a case is declared, not discovered, so a script is either a case
or one of :data:`HELPERS`, and ``tests/test_benchmarks.py`` checks both, runs ``check`` on every
case, and runs every case's quick size, a smoke size (a person or two, one epoch, a document or
two), all of them in one process (:func:`quick_here`: each script's ``main()`` imported and called,
so the interpreter, torch and the shared modules start once). Each script keeps its own command
line; the figures in benchmarks/README.md come from full runs.

``check`` costs seconds: it imports every case's module, resolves every ``import`` of a project
module it makes (those inside functions too: a name that moved is found before anyone runs the
script) and hands the quick size's arguments to the script's own parser, stopping it there.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import io
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: Modules beside the cases that are not cases: {file: why}.
HELPERS = {
    "suite.py": "this runner",
    "tab.py": "the TAB helpers the cases import (data paths, gold spans, shared measurements)",
    "compare_results.py": "compares two results files a refactoring's before and after made (no size of its own)",
}
#: What a quick size may need. Cases that need none of the models run in CI.
NEEDS = {"tab": "the shared TAB data (../shared/data/tab)", "llm": "the embedded LLM",
         "embedder": "the sentence embedder (MiniLM)", "spacy": "spaCy's English model",
         "train": "TRIR trainings (a small encoder)", "ray": "a local Ray"}
MODEL_FREE = frozenset({"tab"})
#: The projects' own top-level packages: their imports are resolved by ``check``.
PROJECT = ("anonaudit", "audit", "attackers", "defenders", "reports", "tab")


@dataclass(frozen=True)
class Case:
    """One benchmark: ``name`` (``area.what``), its ``script`` beside this file, what it
    ``measures``, what its quick size ``needs`` (keys of :data:`NEEDS`), the quick size's
    arguments (``{work}``: a fresh folder) and its cost as measured (``quick_cost``)."""

    name: str
    script: str
    measures: str
    needs: frozenset[str] = frozenset()
    quick: tuple[str, ...] = ("--quick",)
    quick_cost: str = "not measured"

    @property
    def model_free(self) -> bool:
        return self.needs <= MODEL_FREE

    def quick_args(self, work: Path) -> list[str]:
        return [a.replace("{work}", str(work)) for a in self.quick]


def _case(name: str, script: str, measures: str, needs: str = "", quick: tuple[str, ...] = ("--quick",)) -> Case:
    cost = f"{QUICK_COSTS[name]} s" if name in QUICK_COSTS else "not measured"
    return Case(name, script, measures, frozenset(needs.split()), quick, cost)


#: What each quick size cost in tests/test_benchmarks.py's one-process run (all 16 in one pytest
#: process, seconds each; 2-core AMD EPYC VM, heavy lock, the 0.5B as the LLM; see that file's note).
QUICK_COSTS = {"phrase_search.index": 7.5, "phrase_search.tab": 3.1, "sampling.coverage": 0.1, "utility.tab": 13.7,
               "utility.tae": 2.4, "trir.tab": 5.0, "trir.fidelity": 4.9, "trir.release": 12.9, "trir.gpu": 9.4,
               "claim_linker.tab": 5.6, "claim_linker.ppi": 18.3, "claim_linker.paraphrase": 63.5,
               "claim_linker.judge_twin": 10.1, "span_guess.tab": 14.3, "sanitizers.bench": 6.3, "llm.prompt_rate": 3.5,
               "release.audit": 1.5}

#: The suite, by area.
CASES: tuple[Case, ...] = (
    _case("phrase_search.index", "phrase_search.py", "the n-gram index: build and query speed, memory",
          "tab"),
    _case("phrase_search.tab", "phrase_search_tab.py", "phrase-search linkage of TAB's sanitizations",
          "tab"),
    _case("sampling.coverage", "sequential_coverage.py", "what sampling to a precision costs in coverage"),
    _case("utility.tab", "utility_tab.py", "the utility metrics on TAB's sanitizations", "tab llm",
          quick=("--quick", "--docs", "1", "--metrics", "tpi,rouge", "--out", "{work}/utility.json")),
    _case("utility.tae", "tae_tab.py", "TAE's published Precision and Recall recomputed", "tab spacy",
          quick=("--docs", "1", "--out", "{work}/tae.json")),
    _case("trir.tab", "trir_tab.py", "TRIR on TAB beside the published figures", "tab train spacy",
          quick=("--quick", "--people", "2", "--epochs", "1", "--budget", "fast", "--no-augment", "--window", "32",
                 "--overlap", "8", "--max-chars", "1500", "--no-speed", "--out", "{work}/trir_tab.json")),
    _case("trir.fidelity", "trir_fidelity.py", "the default attacker against the paper's", "train spacy",
          quick=("--quick", "--configs", "default", "--out", "{work}/fidelity.json")),
    _case("trir.release", "trir_release.py", "TRIR at release scale, locally and on Ray (quick: locally)",
          "train spacy", quick=("--quick", "--modes", "local", "phrase", "--work", "{work}/run")),
    _case("trir.gpu", "trir_gpu.py", "TRIR on a GPU (the CPU where none)", "tab train spacy",
          quick=("--quick", "--parts", "tab", "--max-chars", "1500", "--out", "{work}/quick.json")),
    _case("claim_linker.tab", "claim_linker_tab.py", "the claim linker's linkage on TAB (quick: without the LLM)",
          "tab embedder spacy", quick=("--quick", "--docs", "1", "--no-llm", "--out", "{work}/claim_linker.json")),
    _case("claim_linker.ppi", "claim_linker_ppi.py", "the leakage, prediction-powered against every document judged",
          "llm embedder", quick=("--n", "4", "--releases", "labels", "--modes", "ppi", "--llm", "qwen2.5-coder-0.5b",
                                 "--out", "{work}/ppi.json")),
    _case("claim_linker.paraphrase", "claim_linker_paraphrase.py",
          "the attacker's paraphrases: one request a claim against one a document", "tab llm embedder",
          quick=("--docs", "1", "--llm", "qwen2.5-coder-0.5b", "--out", "{work}/paraphrase.json")),
    _case("claim_linker.judge_twin", "judge_masked_twin.py", "the leakage judge against the masked twin",
          "llm spacy", quick=("--quick", "--model", "0.5b", "--control", "1", "--docs", "1", "--releases",
                              "suppressed", "--demo-n", "8", "--out", "{work}/twin.json")),
    _case("span_guess.tab", "span_guess_tab.py", "span guessing's recovery on TAB", "tab spacy",
          quick=("--quick", "--no-dense", "--sample", "2", "--people", "1")),
    _case("sanitizers.bench", "bench_sanitizers.py", "`anonaudit bench` on TAB; what attack reuse saves",
          "tab spacy", quick=("tab", "--quick", "--docs", "2", "--out", "{work}/bench")),
    _case("llm.prompt_rate", "llm_prompt_rate.py", "the embedded LLM's prompt tokens per second, by setting", "llm",
          quick=("--quick", "--out", "{work}/rate.json")),
    _case("release.audit", "release_audit.py", "one TAB release audited whole, stage by stage",
          "tab", quick=("--quick", "--work", "{work}/run", "--stages", "phrase_search")),
)


def case(name: str) -> Case:
    for c in CASES:
        if c.name == name:
            return c
    raise SystemExit(f"no case {name!r}; the cases: {', '.join(c.name for c in CASES)}")


def _module(c: Case):
    """The case's script as a module (this folder first on ``sys.path``, as when it is run)."""
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    return importlib.import_module(Path(c.script).stem)


def unresolved_imports(path: Path) -> list[str]:
    """Each ``import`` of a project module in ``path`` (inside functions too) that does not resolve:
    a module that is not there, or a name the module does not define."""
    problems = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            wanted = [(a.name, None) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            wanted = [(node.module, a.name) for a in node.names]
        else:
            continue
        for module, name in wanted:
            if module.split(".")[0] not in PROJECT:
                continue
            problem = _resolve(module, name)
            if problem:
                problems.append(f"{path.name}:{node.lineno}: {problem}")
    return problems


def _resolve(module: str, name: str | None) -> str | None:
    try:
        mod = importlib.import_module(module)
    except ImportError as exc:
        return f"import {module}: {exc}"
    if name is None or name == "*" or hasattr(mod, name):
        return None
    try:
        importlib.import_module(f"{module}.{name}")
        return None
    except ImportError:
        return f"from {module} import {name}: {module} has no {name!r}"


class _Parsed(Exception):
    """Raised by the patched parser once the arguments parse: the script stops before any work."""


@contextlib.contextmanager
def _stop_after_parsing():
    """The scripts' parsers parse as they would (unknown arguments refused by ``parse_args``), then
    stop the script (:class:`_Parsed`); a parser inside another's parse (a subcommand's) goes on."""
    parser = argparse.ArgumentParser
    original_args, original_known = parser.parse_args, parser.parse_known_args
    depth = [0]

    def parse_args(self, args=None, namespace=None):
        depth[0] += 1
        try:
            parsed = original_args(self, args, namespace)
        finally:
            depth[0] -= 1
        if self.prog != "suite.py":
            raise _Parsed(parsed)
        return parsed

    def parse_known_args(self, args=None, namespace=None):
        parsed = original_known(self, args, namespace)
        if depth[0] == 0 and self.prog != "suite.py":
            raise _Parsed(parsed)
        return parsed

    parser.parse_args, parser.parse_known_args = parse_args, parse_known_args
    try:
        yield
    finally:
        parser.parse_args, parser.parse_known_args = original_args, original_known


def check(c: Case) -> list[str]:
    """What is wrong with ``c`` before it runs: its module does not import, an import of a project
    module does not resolve, or its script's parser refuses the quick size's arguments."""
    script = HERE / c.script
    if not script.is_file():
        return [f"{c.name}: {c.script} is not in benchmarks/"]
    try:
        module = _module(c)
    except Exception as exc:  # noqa: BLE001 - any failure to import is the finding
        return [f"{c.name}: importing {c.script}: {type(exc).__name__}: {exc}"]
    problems = [f"{c.name}: {p}" for p in unresolved_imports(script)]
    argv = sys.argv
    with tempfile.TemporaryDirectory() as work, _stop_after_parsing():
        sys.argv = [c.script, *c.quick_args(Path(work))]
        try:
            module.main()
            problems.append(f"{c.name}: main() returned without parsing its arguments")
        except _Parsed:
            pass
        except SystemExit as exc:
            problems.append(f"{c.name}: its parser refused {' '.join(c.quick)} (exit {exc.code})")
        except Exception as exc:  # noqa: BLE001
            problems.append(f"{c.name}: main() before parsing: {type(exc).__name__}: {exc}")
        finally:
            sys.argv = argv
    return problems


@contextlib.contextmanager
def _as_script(c: Case, argv: list[str], cwd: Path) -> Iterator[None]:
    """This process as ``c``'s script finds it when run (its ``sys.argv``, ``cwd``), and as it was
    after: the environment, the folder and torch's threads the script may have changed, restored."""
    env, old_argv, old_cwd = dict(os.environ), sys.argv, os.getcwd()
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    sys.argv = [c.script, *argv]
    os.chdir(cwd)
    try:
        yield
    finally:
        sys.argv = old_argv
        os.chdir(old_cwd)
        os.environ.clear()
        os.environ.update(env)
        if threads is not None:
            torch.set_num_threads(threads)


def run_here(c: Case, work: Path) -> str:
    """Run ``c``'s quick size in this process (its module's ``main()``, imported once: the
    interpreter, torch and the scripts' shared modules are started once for all the cases); what it
    printed. A failure raises: the script's own exception, or a ``RuntimeError`` for a non-zero exit
    or a run that printed and wrote nothing."""
    module = _module(c)
    work.mkdir(parents=True, exist_ok=True)
    out = io.StringIO()
    with _as_script(c, c.quick_args(work), work), contextlib.redirect_stdout(out):
        try:
            code = module.main()
        except SystemExit as exc:
            code = exc.code
    if isinstance(code, int) and code or isinstance(code, str):
        raise RuntimeError(f"{c.name}: exit {code}\n{out.getvalue()[-2000:]}")
    if not out.getvalue().strip() and not any(work.iterdir()):
        raise RuntimeError(f"{c.name}: it printed and wrote nothing")
    return out.getvalue()


def quick_here(cases: tuple[Case, ...] = CASES, work: Path | None = None) -> dict[str, float]:
    """Every case's quick size in turn in this process (:func:`run_here`), each in a fresh folder
    under ``work``; the seconds of each. Every case runs; then a ``RuntimeError`` names each that
    failed, with its error."""
    seconds: dict[str, float] = {}
    failed: list[str] = []
    with contextlib.ExitStack() as stack:
        root = work or Path(stack.enter_context(tempfile.TemporaryDirectory()))
        for c in cases:
            t0 = time.perf_counter()
            outcome = ""
            try:
                run_here(c, root / c.name)
            except Exception as exc:  # noqa: BLE001 - every case runs; the failures are said together
                failed.append(f"{c.name}: {type(exc).__name__}: {str(exc)[-1500:]}")
                outcome = " (failed)"
            seconds[c.name] = round(time.perf_counter() - t0, 1)
            print(f"{c.name}: {seconds[c.name]} s{outcome}", file=sys.stderr, flush=True)
    if failed:
        raise RuntimeError(f"{len(failed)} of {len(cases)} quick sizes failed:\n" + "\n".join(failed))
    return seconds


def run(c: Case, args: list[str], *, quick: bool, cwd: Path | None = None, timeout: float | None = None):
    """Run the case's script in a fresh interpreter: its quick size, or ``args`` as its own."""
    with tempfile.TemporaryDirectory() as work:
        argv = c.quick_args(Path(work)) + args if quick else args
        return subprocess.run([sys.executable, str(HERE / c.script), *argv], cwd=cwd, timeout=timeout,
                              capture_output=cwd is not None, text=True)


def _list() -> None:
    for c in CASES:
        needs = ", ".join(sorted(c.needs)) or "nothing"
        print(f"{c.name:28} {c.script:26} {c.measures}\n{'':28} quick: {' '.join(c.quick)} "
              f"(needs {needs}; {c.quick_cost})")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="suite.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command")
    r = sub.add_parser("run", help="run one case")
    r.add_argument("case")
    r.add_argument("--quick", action="store_true", help="its quick size")
    sub.add_parser("check", help="imports and the quick sizes' arguments").add_argument("cases", nargs="*")
    q = sub.add_parser("quick", help="every case's quick size in turn")
    q.add_argument("--model-free", action="store_true", help="only the cases that need no model")
    args, rest = ap.parse_known_args(argv)
    if args.command == "run":
        return run(case(args.case), rest, quick=args.quick).returncode
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "check":
        problems = [p for c in ([case(n) for n in args.cases] or CASES) for p in check(c)]
        print("\n".join(problems) or f"ok: {len(args.cases) or len(CASES)} cases")
        return 1 if problems else 0
    if args.command == "quick":
        seconds = quick_here(tuple(c for c in CASES if c.model_free or not args.model_free))
        print(f"ok: {len(seconds)} cases in {sum(seconds.values()):.1f} s")
        return 0
    _list()
    return 0


if __name__ == "__main__":
    sys.exit(main())
