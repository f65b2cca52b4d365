"""The benchmarks as one suite: a declared list of cases, each with a quick size (issue 71, item 3).

    python benchmarks/suite.py                     # the cases: what each measures, what it needs
    python benchmarks/suite.py run CASE [ARGS...]   # the case's script at full size (ARGS are its own)
    python benchmarks/suite.py run CASE --quick     # ... at its quick size (a smoke run, not a figure)
    python benchmarks/suite.py check [CASE...]      # every import resolves and the quick size's arguments parse
    python benchmarks/suite.py quick [--model-free] # every case's quick size in turn, timed

A case is a :class:`Case` in :data:`CASES`: a name, the script that measures it, one line on what
it measures, what its quick size needs (``tab``: the shared TAB data; ``llm``, ``embedder``,
``spacy``: a model; ``train``: TRIR trainings; ``ray``: a local Ray) and the quick size's arguments
(``{work}`` is a fresh folder). Like asv's benchmark functions, pytest-benchmark's fixtures and
lm-eval-harness's task registry, a case is declared, not discovered, so a script is either a case
or one of :data:`HELPERS`, and ``tests/test_benchmarks.py`` checks both, runs ``check`` on every
case and every case's quick size (those that need a model as ``slow`` tests, on the 0.5B), but for
those too costly for CI's two minutes, which say why with their cost (``not_in_ci``). Each script
keeps its own command line; the figures in benchmarks/README.md come from full runs.

``check`` costs seconds: it imports every case's module, resolves every ``import`` of a project
module it makes (those inside functions too: a name that moved is found before anyone runs the
script) and hands the quick size's arguments to the script's own parser, stopping it there.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib
import subprocess
import sys
import tempfile
import time
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
    arguments (``{work}``: a fresh folder), its cost as measured (``quick_cost``) and, for a quick
    size too costly for CI's budget, why it is not run there (``not_in_ci``)."""

    name: str
    script: str
    measures: str
    needs: frozenset[str] = frozenset()
    quick: tuple[str, ...] = ("--quick",)
    quick_cost: str = "not measured"
    #: Why its quick size does not run in CI (its measured cost); empty: it does.
    not_in_ci: str = ""

    @property
    def model_free(self) -> bool:
        return self.needs <= MODEL_FREE

    def quick_args(self, work: Path) -> list[str]:
        return [a.replace("{work}", str(work)) for a in self.quick]


def _case(name: str, script: str, measures: str, needs: str = "", quick: tuple[str, ...] = ("--quick",),
          cost: str = "not measured", not_in_ci: str = "") -> Case:
    return Case(name, script, measures, frozenset(needs.split()), quick, cost, not_in_ci)


#: The suite, by area. Costs: the quick size on the 2-core AMD EPYC VM, heavy lock, 2026-12-07: those CI runs
#: as tests/test_benchmarks.py's durations (22:36-22:41, load 1.5-2.1; the 0.5B as the LLM), the others
#: measured alone (22:09-22:19, load 2.4-2.7; "> 100 s": stopped there).
CASES: tuple[Case, ...] = (
    _case("phrase_search.index", "phrase_search.py", "the n-gram index: build and query speed, memory",
          "tab", cost="4.9 s"),
    _case("phrase_search.tab", "phrase_search_tab.py", "phrase-search linkage of TAB's sanitizations",
          "tab", cost="3.1 s"),
    _case("sampling.coverage", "sequential_coverage.py", "what sampling to a precision costs in coverage",
          cost="0.3 s"),
    _case("utility.tab", "utility_tab.py", "the utility metrics on TAB's sanitizations", "tab llm",
          quick=("--quick", "--metrics", "tpi,rouge", "--out", "{work}/utility.json"), cost="34.1 s"),
    _case("utility.tae", "tae_tab.py", "TAE's published Precision and Recall recomputed", "tab spacy",
          quick=("--docs", "3", "--out", "{work}/tae.json"), cost="4.9 s"),
    _case("trir.tab", "trir_tab.py", "TRIR on TAB beside the published figures", "tab train spacy",
          quick=("--quick", "--people", "3", "--epochs", "1", "--no-speed", "--out", "{work}/trir_tab.json"),
          cost="> 100 s", not_in_ci="> 100 s: one pass of 3 people is 53 rotated epochs of ~2 s"),
    _case("trir.fidelity", "trir_fidelity.py", "the default attacker against the paper's", "train spacy",
          quick=("--quick", "--configs", "default", "--out", "{work}/fidelity.json"), cost="11.5 s"),
    _case("trir.release", "trir_release.py", "TRIR at release scale, locally and on Ray (quick: locally)",
          "train spacy", quick=("--quick", "--modes", "local", "phrase", "--work", "{work}/run"), cost="13.4 s"),
    _case("trir.gpu", "trir_gpu.py", "TRIR on a GPU (the CPU where none)", "tab train spacy",
          quick=("--quick", "--parts", "tab", "--out", "{work}/quick.json"), cost="> 100 s",
          not_in_ci="> 100 s: its 2 epochs of 3 people are 462 rotated epochs"),
    _case("claim_linker.tab", "claim_linker_tab.py", "the claim linker's linkage on TAB", "tab llm embedder",
          quick=("--quick", "--docs", "3", "--paraphrase-docs", "1", "--llm-claims-docs", "1",
                 "--out", "{work}/claim_linker.json"), cost="143.4 s",
          not_in_ci="143.4 s: 5 releases of 3 documents, the LLM's claims and paraphrases"),
    _case("claim_linker.ppi", "claim_linker_ppi.py", "the leakage, prediction-powered against every document judged",
          "llm embedder", quick=("--n", "6", "--releases", "labels", "--modes", "ppi", "--llm", "qwen2.5-coder-0.5b",
                                 "--out", "{work}/ppi.json"), cost="26.0 s"),
    _case("claim_linker.judge_twin", "judge_masked_twin.py", "the leakage judge against the masked twin",
          "llm spacy", quick=("--quick", "--model", "0.5b", "--out", "{work}/twin.json"), cost="79.3 s",
          not_in_ci="79.3 s: 6 control claims, their masked twins and 6 documents judged"),
    _case("span_guess.tab", "span_guess_tab.py", "span guessing's recovery on TAB", "tab spacy",
          quick=("--quick", "--no-dense"), cost="61.4 s",
          not_in_ci="61.4 s: 12 spans of Manual_Entity against TAB's public background"),
    _case("sanitizers.bench", "bench_sanitizers.py", "`anonaudit bench` on TAB; what attack reuse saves",
          "tab spacy", cost="50.1 s", not_in_ci="50.1 s: two benches of 4 documents and 6 people"),
    _case("llm.prompt_rate", "llm_prompt_rate.py", "the embedded LLM's prompt tokens per second, by setting", "llm",
          quick=("--quick", "--out", "{work}/rate.json"), cost="2.8 s"),
    _case("release.audit", "release_audit.py", "one TAB release audited whole, stage by stage",
          "tab llm embedder spacy train", quick=("--quick", "--work", "{work}/run", "--stages", "estimate"),
          cost="> 100 s", not_in_ci="> 100 s: each stage's calibration on 6 judgments, the LLM's and TRIR's"),
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
              f"(needs {needs}; {c.quick_cost}{'; not in CI' if c.not_in_ci else ''})")


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
        failed = []
        for c in CASES:
            if args.model_free and not c.model_free:
                continue
            t0 = time.perf_counter()
            code = run(c, [], quick=True).returncode
            print(f"{c.name}: exit {code} in {time.perf_counter() - t0:.1f} s", flush=True)
            failed += [c.name] if code else []
        return 1 if failed else 0
    _list()
    return 0


if __name__ == "__main__":
    sys.exit(main())
