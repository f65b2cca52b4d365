"""``anonaudit.harden``: attack a release, repair exactly what the attacks used, attack again,
from Python; ``anonaudit harden`` is a thin user of it (the same checks, files and outcome).

The loop itself is :class:`audit.pipeline.harden.Harden`; this module is what a caller needs
around it: the spec read (a file or a mapping) with the caller's overrides, the outputs guarded
before any work (:func:`audit.pipeline.outputs.check_outputs`), the hardened release written
where asked, the report, and one typed answer, :class:`Hardened`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anonaudit.inputs import is_file
from anonaudit.outcome import Results, load_results
from audit.core.arguments import check_argument, checked
from audit.core.data import Release
from audit.core.errors import AnonauditError

__all__ = ["Hardened", "harden", "format_rounds"]


@dataclass(frozen=True)
class Hardened:
    """What :func:`harden` did.

    ``rounds``: one :class:`~audit.pipeline.harden.HardenRound` per release attacked (the input,
    then ``NAME.harden1``...: its gate, risks, utility, and what was repaired to make the next);
    ``final``: the last round's release (the hardened release, in memory); ``stopped``: why the
    loop stopped (``passed``, ``inconclusive``, ``max_rounds``, ``nothing_to_repair``,
    ``unchanged``); ``status``: the gate's verdict on the final release (``pass``, ``fail``,
    ``inconclusive``, or ``none`` when the spec has no gate); ``exit_code``: what ``anonaudit
    harden`` exits with (0 pass or no gate, 1 fail, 3 inconclusive); ``results``: every round's
    :class:`~anonaudit.outcome.Results` (read from ``results_path``, the spec's
    ``OUT/results.json``); ``out``: the hardened release file (``None`` unless asked);
    ``report``: the HTML report (``None`` unless asked); ``seconds``: the loop's wall time.
    ``str()`` is the table of rounds the command prints."""

    rounds: tuple[Any, ...]
    final: Release
    stopped: str
    status: str
    exit_code: int
    results: Results
    results_path: Path
    out: Path | None = None
    report: Path | None = None
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        """True when the gate passes on the final release (or the spec has no gate)."""
        return self.exit_code == 0

    def __str__(self) -> str:
        return format_rounds(self.rounds)


def format_rounds(rounds: Sequence[Any]) -> str:
    """One line per round: gate, risks, utility, and what was repaired to make the next."""
    lines = ["round  release                        gate          risks / utility / repaired"]
    for r in rounds:
        risks = ", ".join(f"{k}={v:.3f}" for k, v in r.risks.items())
        util = ", ".join(f"{k}={v:.3f}" for k, v in r.utility.items())
        fixed = ", ".join(f"{v} {k}" for k, v in r.targets.items()) if r.repair else "-"
        lines.append(f"{r.number:<6} {r.release[:30]:<30} {r.gate:<13} {risks or '-'} / {util or '-'} / {fixed}")
    return "\n".join(lines)


@checked
def harden(spec: Any, release: str, *, out: str | os.PathLike | None = None,
           max_rounds: int = 3, text_repairer: str = "delinker", span_repairer: str = "intact",
           attacks: Sequence[str] | None = None, metrics: Sequence[str] | None = None,
           repair_params: Mapping[str, Mapping[str, Any]] | None = None, detector: str | None = None,
           llm: str | None = None, results_dir: str | os.PathLike | None = None, report: bool = False,
           force: bool = False, progress: bool = True, registry: Any = None, command: str = "api") -> Hardened:
    """Harden the release ``release`` of an audit spec, as ``anonaudit harden`` does: attack it
    with the spec's attacks and metrics, repair exactly the evidence they found, and attack
    again, until the spec's ``gate`` passes or after ``max_rounds`` repairs.

    ``spec``: an audit spec file (YAML/TOML; relative paths from its folder) or a mapping with
    the spec's keys (relative paths from the working folder). Every round is recorded in the
    spec's ``OUT/results.json`` (``results_dir`` replaces ``out``) and ``OUT/harden/``, so a
    re-run resumes. ``out``: also write the hardened release there (JSONL, every change recorded
    as a span); ``report=True``: write ``OUT/report.html`` (and findings.csv) with every round as
    a release. ``text_repairer``/``span_repairer``: the sanitizers that reword visible words and
    generalise replacements an attack saw through; ``repair_params``: their parameters by name
    (``{"delinker": {"max_spans": 4}}``); ``attacks``: repair only these attacks' evidence;
    ``metrics``: utility metrics measured on every round besides the spec's own; ``detector``:
    the detector that labels the replacements of a release file that records none; ``llm``: the
    model of the attacks and repairers (replaces the spec's ``models.llm``).

    Every output is checked before any work: none may be an input of the spec (nor the spec
    file), and an existing file of another kind is refused unless ``force=True``. A gate that
    still fails does not raise: the returned :class:`Hardened` says so (``status``,
    ``exit_code``). ``command``: ``"harden"`` when the command line calls (its messages then name
    ``--out`` and ``--force``)."""
    from audit.core.registry import given_registry
    from audit.pipeline.harden import Harden
    from audit.pipeline.outputs import Output, check_outputs, replaces, report_outputs, results_outputs, spec_inputs
    from audit.pipeline.releases import write_release_jsonl

    check_argument("anonaudit.harden()", "spec", spec, str | os.PathLike | Mapping[str, Any])
    reg = given_registry(registry, "anonaudit.harden(): registry=")
    spec_file = spec if is_file(spec) else None
    parsed = _spec(spec, results_dir=results_dir, llm=llm, registry=reg)
    out_path = Path(out) if out is not None else None
    results_path = parsed.out / "results.json"
    cli = command == "harden"
    if out_path is not None and out_path.resolve() == results_path.resolve():
        raise AnonauditError(f"{'--out' if cli else 'out'} {out}: would overwrite the audit's results file")
    outputs = [Output(out_path, "jsonl", "--out" if cli else "out")] if out_path is not None else []
    outputs += [Output(parsed.out, "folder", "--results-dir (or the spec's out)" if cli else "results_dir="),
                *results_outputs(results_path, "OUT/results.json")]
    outputs += report_outputs(parsed.out / "report.html") if report else ()
    check_outputs(outputs, spec_inputs(parsed, spec_file), force=force, force_named="--force" if cli else "force=True")
    loop = Harden(parsed, release, max_rounds=max_rounds, registry=reg,
                  repairers={"text": text_repairer, "span": span_repairer}, repair_params=repair_params,
                  attacks=list(attacks or ()) or None, metrics=list(metrics or ()) or None, progress=progress,
                  echo=_echo if progress else None, detector=detector,
                  replace=force and replaces(results_path, "results"))
    outcome = loop.run()
    if out_path is not None:
        write_release_jsonl(outcome.final, out_path)
    results = load_results(outcome.path)
    page = None
    if report:
        note = (f"Rounds of `anonaudit harden --release {release}`: " + ", ".join(r.release for r in outcome.rounds)
                + f" (stopped: {outcome.stopped}).")
        page = results.report(parsed.out / "report.html", shareable=False, notes=[note], force=force)
    return Hardened(rounds=tuple(outcome.rounds), final=outcome.final, stopped=outcome.stopped,
                    status=outcome.rounds[-1].gate, exit_code=outcome.exit_code, results=results, results_path=outcome.path,
                    out=out_path, report=page, seconds=outcome.seconds)


def _spec(spec: Any, *, results_dir: Any, llm: str | None, registry: Any):
    """The parsed spec, with ``out`` and ``models.llm`` replaced when given."""
    from audit.pipeline.runner import parse_spec, read_spec_file

    data = dict(read_spec_file(spec) if is_file(spec) else spec)
    if results_dir is not None:
        data["out"] = str(Path(results_dir).resolve())
    if llm:
        models = data.get("models")
        data["models"] = {**(models if isinstance(models, dict) else {}), "llm": llm}
    base = Path(spec).resolve().parent if is_file(spec) else Path.cwd()
    source = str(spec) if is_file(spec) else "anonaudit.harden()"
    return parse_spec(data, base=base, source=source, registry=registry)


def _echo(msg: str) -> None:
    import sys

    print(msg, file=sys.stderr, flush=True)

