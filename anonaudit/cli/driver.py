"""The generic driver: ``anonaudit attack NAME``, ``anonaudit sanitize NAME`` and
``anonaudit utility`` for every registered component, built from its constructor.

A component is one class plus one registration; this module gives it its command. Each
simple constructor parameter becomes a typed option (see :mod:`anonaudit.cli.param_options`), any
other one is set with ``--param KEY=VALUE``, and the common options name the data
(``--originals``, ``--background``/``--tri``, ``--release NAME=FILE``, ``--format``), the
results file (``--out``), the seed, the models (``--llm``, ``--embedder``) and a document
budget (``--sample``). The commands then build an audit spec in memory and run it with the
pipeline's :class:`~audit.pipeline.runner.Audit`, the same loop as ``anonaudit run``:
results and provenance merge into the ``--out`` file, and release copies are written beside
it for the report (``releases/NAME-HASH.jsonl`` beside ``results.json``, ``X.releases/NAME-HASH.jsonl``
beside any other ``X.json``).

The registry comes from the click context: ``main(obj={"registry": reg})`` (tests, an
application embedding the CLI), else the process' registry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource

from anonaudit.cli.param_options import Checked
from audit.core.arguments import Seed
from anonaudit.cli.common import LLM_HELP
from anonaudit.cli.guide import epilog
from anonaudit.cli.driver_options import (
    COLUMN_KEYS,
    DATA,
    EMBEDDER_HELP,
    PARAMS,
    ComponentOptions,
    SectionedCommand,
    SectionOption,
    column_options,
    common_options,
    component_options,
    extra_param_option,
    merge_params,
    spellings,
)
from anonaudit.cli.output_options import Output, check_outputs, results_outputs
from anonaudit.cli.param_options import Param, parameters, parse_param_values, split_list, summary
from audit.core.errors import AnonauditError
from audit.core.registry import Registry, normalise


def registry_of(ctx: click.Context | None) -> Registry:
    """The registry of this command line: ``obj={"registry": reg}`` (or a :class:`Registry`
    as ``obj``) given to ``main``, else the process' registry."""
    from audit.core import registry as registry_module

    obj = ctx.find_root().obj if ctx is not None else None
    if isinstance(obj, Registry):
        return obj
    if isinstance(obj, Mapping) and isinstance(obj.get("registry"), Registry):
        return obj["registry"]
    return registry_module.registry


# --------------------------------------------------------------------------- the one loop


@dataclass
class DataArgs:
    """What the common options named."""

    originals: str | None
    background: str | None
    tri: str | None
    releases: Sequence[str]
    fmt: str | None
    out: str
    seed: int
    llm: str | None
    embedder: str | None
    sample: int | None
    force: bool = False
    budget: str | None = None
    time_limit: float | None = None
    #: text_column, id_column, subject_column, as the API takes them
    columns: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def of(cls, kw: Mapping[str, Any]) -> DataArgs:
        columns = {k: kw[k] for k in COLUMN_KEYS if kw.get(k)}
        return cls(kw.get("originals"), kw.get("background"), kw.get("tri"), tuple(kw.get("releases") or ()),
                   kw.get("fmt"), kw["out"], kw.get("seed", 0), kw.get("llm"), kw.get("embedder"),
                   kw.get("sample_documents"), bool(kw.get("force")), columns=columns, budget=kw.get("budget"),
                   time_limit=kw.get("time_limit"))


def _file_params(params: dict[str, Any], plist: Sequence[Param], corpora: dict[str, Any]) -> dict[str, Any]:
    """Corpus- and release-typed parameters given as ``NAME=FILE`` or ``FILE``: declared as
    corpora of the spec, the parameter refers to it (``corpus:NAME``)."""
    from audit.io.loaders import parse_release_spec
    from audit.pipeline.spec import CORPUS_REF

    kinds = {p.name: p.kind for p in plist}
    out = dict(params)
    for k, v in params.items():
        if kinds.get(k) not in ("corpus", "release") or not isinstance(v, str) or v.startswith(CORPUS_REF):
            continue
        name, path = parse_release_spec(v)
        if not Path(path).expanduser().exists():  # named by the option the user typed, not corpora.KEY
            raise AnonauditError(f"--{k.replace('_', '-')} {v}: file not found")
        key = name or Path(path).stem or k
        while key in corpora and corpora[key]["path"] != path:
            key += "_"
        corpora[key] = {"path": path}
        out[k] = f"{CORPUS_REF}{key}"
    return out


def _load_file_params(params: dict[str, Any], plist: Sequence[Param], *, fmt: str | None) -> dict[str, Any]:
    """Corpus- and release-typed parameters given as ``NAME=FILE`` or ``FILE`` loaded, for a
    command that runs a component directly rather than through an audit spec (``sanitize``):
    the same spellings as :func:`_file_params`, every missing file named with its option."""
    from audit.io.loaders import load_corpus, parse_release_spec

    kinds = {p.name: p.kind for p in plist}
    out = dict(params)
    for k, v in params.items():
        if kinds.get(k) not in ("corpus", "release") or not isinstance(v, str):
            continue
        name, path = parse_release_spec(v)
        option = "--" + k.replace("_", "-")
        if not Path(path).expanduser().is_file():
            raise AnonauditError(f"{option} {path}: file not found")
        out[k] = load_corpus(Path(path).expanduser(), format=fmt, name=name)
    return out


def run_components(ctx: click.Context, *, kind: str, entries: Sequence[dict[str, Any]], data: DataArgs,
                   corpora: Mapping[str, Any], command: str, on_error: str = "raise"):
    """Run ``entries`` (``{"name", "params", "sample"?}`` of ``kind``) on the releases of ``data``
    with the Python API's :func:`anonaudit.audit` (one code path, its run named ``command``), merging
    into ``data.out``."""
    from anonaudit.api import execute_audit
    from anonaudit.cli.common import echo_release_warnings, echo_summary
    from anonaudit.typed_spec import Budget, Columns, Models, Spec
    from audit.io.loaders import parse_release_spec

    reg = registry_of(ctx)
    if data.background and data.tri:
        raise AnonauditError("give the background with --background FILE, or --tri FILE (not both)")
    # Name the option the user typed, not the key of the audit spec built from it below.
    for option, value in (("--originals", data.originals), ("--background", data.background), ("--tri", data.tri),
                          *(("--release", parse_release_spec(r)[1]) for r in data.releases)):
        if value and not Path(value).expanduser().exists():
            raise AnonauditError(f"{option} {value}: file not found")
    releases: list[dict[str, Any]] = []
    for item in data.releases:
        name, path = parse_release_spec(item)
        releases.append({k: v for k, v in (("name", name), ("path", path), ("format", data.fmt)) if v is not None})
    if data.tri:
        releases.append({"path": data.tri, "format": "tri"})
    if not releases:
        raise AnonauditError("nothing to do: give at least one --release NAME=FILE")
    out = Path(data.out).resolve()
    inputs = [("--originals", data.originals), ("--background", data.background), ("--tri", data.tri),
              *(("--release", parse_release_spec(r)[1]) for r in data.releases),
              *((f"corpus {k}", v["path"]) for k, v in corpora.items())]
    check_outputs(results_outputs(out), inputs, force=data.force)
    originals = None if not data.originals else {
        "path": data.originals, "format": None if data.fmt in (None, "spans", "tri") else data.fmt}
    background = data.background or ({"path": data.tri, "format": "tri"} if data.tri else None)
    # A component's --no-cache (its `cache`/`use_cache` off) turns every cache off for the run: the API does it.
    columns = {k.removesuffix("_column"): v for k, v in data.columns.items()}
    spec = Spec(originals=originals, releases=releases, background=background, corpora=dict(corpora) or None,
                **{f"{kind}s": list(entries)}, seed=data.seed, models=Models(data.llm, data.embedder),
                budget=Budget(data.budget, time_limit=data.time_limit), columns=Columns(**columns))
    results = execute_audit(spec, out=out, force=data.force, on_error=on_error, registry=reg, command=command,
                            source="command line")
    keys = set(results.keys)
    echo_summary([r for r in results.results if r.key in keys])
    echo_release_warnings(results.provenance)
    for s in results.skipped:
        click.secho(f"not run: {s['component']}: {s['reason']}", fg="yellow", err=True)
    for s in results.errors:
        click.secho(f"failed: {s['component']}: {s['reason']}", fg="red", err=True)
    return results


def _budget(value: str | None, params: dict[str, Any], own: set[str], key: str) -> str | None:
    """The audit budget of ``--budget``. For an attack with a ``budget`` parameter of its own
    (TRIR's training recipe, ``--budget fast`` before the audit had one), a value that is not a
    level is that parameter, said to be deprecated."""
    from audit.pipeline.budget import BUDGETS

    if value is None or value in BUDGETS:
        return value
    if "budget" in own and "budget" not in params:
        click.secho(f"note: --budget {value} sets {key}'s own parameter, as it did before; that spelling is "
                    f"deprecated: write --param budget={value} (--budget is now the audit's budget: "
                    f"{', '.join(BUDGETS)})", fg="yellow", err=True)
        params["budget"] = value
        return None
    raise AnonauditError(f"--budget {value}: must be one of {', '.join(BUDGETS)}")


def _check_requires(label: str, requires: frozenset[str], data: DataArgs) -> None:
    if "originals" in requires and not data.originals:
        raise AnonauditError(f"{label} needs the original documents: --originals FILE")
    if "background" in requires and not (data.background or data.tri):
        raise AnonauditError(f"{label} needs background knowledge: public documents with a subject "
                             "(--background FILE, or --tri FILE)")


# --------------------------------------------------------------------------- attack NAME


def attack_command(reg: Registry, name: str) -> click.Command:
    """``anonaudit attack NAME`` for the registered attack ``name``."""
    cls = reg.get("attack", name)
    key = normalise(name)
    cli_name = key.replace("_", "-")
    own = {p.name for p in parameters(cls)}
    requires = frozenset(getattr(cls, "requires", frozenset()))
    accepts = frozenset(getattr(cls, "accepts", frozenset()))
    # The common options first (their spellings win), then the attack's own.
    draft = ComponentOptions({key: cls}, {key: parameters(cls)}, [], {}, {})
    common = common_options(requires=requires, comps=draft, own_sample="sample" in own, accepts=accepts)
    comps = component_options({key: cls}, taken=spellings(common) | {"param", "help", "h"})
    options = [*common, *comps.options, extra_param_option(comps)]

    def callback(**kw: Any) -> None:
        ctx = click.get_current_context()
        data = DataArgs.of(kw)
        _check_requires(key, requires, data)
        if accepts and not requires and not any(getattr(data, a, None) for a in accepts | {"tri"}):
            given = " or ".join(f"--{a}" for a in sorted(accepts))
            raise AnonauditError(f"{key} needs {given} FILE")
        params = merge_params(comps.given(ctx, kw, key), parse_param_values(kw["param_values"]), comps)
        data.budget = _budget(data.budget, params, own, key)
        corpora: dict[str, Any] = {}
        params = _file_params(params, comps.params[key], corpora)
        entry: dict[str, Any] = {"name": key, "params": params}
        if data.sample:
            entry["sample"] = data.sample
        run_components(ctx, kind="attack", entries=[entry], data=data, corpora=corpora,
                       command=f"attack {cli_name}")

    description = (getattr(cls, "description", "") or summary(cls)).strip()
    return SectionedCommand(cli_name, params=options, callback=callback, short_help=summary(cls),
                            help=description + "\n\nResults merge into the --out file; the same attack on the "
                                               "same release replaces its earlier result.")


# --------------------------------------------------------------------------- utility


class UtilityCommand(SectionedCommand):
    """``anonaudit utility``: its options are those of the metrics of the context's registry."""

    def __init__(self) -> None:
        super().__init__("utility", callback=self._run, params=[],
                         help="Measure how much utility each --release keeps, with every registered utility "
                              "metric (or those of --metrics); the metrics share one context, so the "
                              "information content and embeddings of the originals are computed once.",
                         short_help="Utility metrics of each release against the originals.")
        self._built: dict[int, tuple[list[click.Option], ComponentOptions]] = {}

    def _options(self, ctx: click.Context) -> tuple[list[click.Option], ComponentOptions]:
        reg = registry_of(ctx)
        if id(reg) not in self._built:
            classes, broken = {}, []
            for name in reg.names("metric"):
                try:
                    classes[name] = reg.get("metric", name)
                except AnonauditError:
                    broken.append(name)  # a broken plugin must not hide the others
            draft = ComponentOptions(classes, {n: parameters(c) for n, c in classes.items()}, [], {}, {})
            requires = frozenset().union(*(getattr(c, "requires", frozenset()) for c in classes.values())) \
                - {"background"}
            note = f" Registered but not loadable: {', '.join(broken)}." if broken else ""
            metrics = SectionOption(["--metrics", "metrics"], default=",".join(classes), show_default=True,
                                    metavar="A,B", section=PARAMS, help=f"Comma-separated metrics.{note}")
            common = common_options(requires=requires, comps=draft, own_sample=draft.takes("sample"))
            comps = component_options(classes, taken=spellings([*common, metrics]) | {"param", "help", "h"},
                                      label_users=True)
            self._built[id(reg)] = ([*common, metrics, *comps.options, extra_param_option(comps)], comps)
        return self._built[id(reg)]

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        return [*self._options(ctx)[0], *super().get_params(ctx)]

    def _run(self, **kw: Any) -> None:
        ctx = click.get_current_context()
        comps = self._options(ctx)[1]
        names = [normalise(m) for m in split_list(kw["metrics"])]
        unknown = [m for m in names if m not in comps.classes]
        if unknown or not names:
            raise click.BadParameter(f"unknown metric(s) {', '.join(unknown) or '(none)'}; "
                                     f"choose from {','.join(comps.classes)}", ctx=ctx, param_hint="--metrics")
        data = DataArgs.of(kw)
        extra = parse_param_values(kw["param_values"])
        for k in extra:
            if not any(k in comps.classes[n].param_names() for n in names):
                raise AnonauditError(f"--param {k}: none of the metrics {', '.join(names)} takes it")
        corpora: dict[str, Any] = {}
        entries = []
        for n in names:
            _check_requires(n, frozenset(getattr(comps.classes[n], "requires", frozenset())) - {"background"}, data)
            accepted = set(comps.classes[n].param_names())
            typed = comps.given(ctx, kw, n)
            params = merge_params(typed, {k: v for k, v in extra.items() if k in accepted}, comps)
            entry: dict[str, Any] = {"name": n, "params": _file_params(params, comps.params[n], corpora)}
            if data.sample:
                entry["sample"] = data.sample
            entries.append(entry)
        outcome = run_components(ctx, kind="metric", entries=entries, data=data, corpora=corpora,
                                 command="utility", on_error="skip")
        # A metric that could not be created, or failed, is not a success. Only when every registered
        # metric runs by default may one that does not suit the data (it says so with an
        # AnonauditError: no gold spans for recall) be left out without failing the command.
        named = ctx.get_parameter_source("metrics") != ParameterSource.DEFAULT
        failed = outcome.skipped + [e for e in outcome.errors if named or not e.get("input")]
        if not failed and len(outcome.errors) == len(entries):  # none ran at all: nothing was measured
            failed = list(outcome.errors)
        if failed:
            click.secho(f"error: {len(failed)} of {len(entries)} metric(s) did not run (reasons above); the "
                        "others' results are saved", fg="red", err=True)
            ctx.exit(2)


# --------------------------------------------------------------------------- sanitize NAME


def sanitize_command(reg: Registry, name: str) -> click.Command:
    """``anonaudit sanitize NAME`` for the registered sanitizer ``name``."""
    cls = reg.get("sanitizer", name)
    key = normalise(name)
    common: list[click.Option] = [
        SectionOption(["--input", "input_"], type=click.Path(dir_okay=False), required=True, metavar="FILE",
                      section=DATA, help="Documents to sanitize (JSONL, CSV, JSON map, TAB JSON)."),
        SectionOption(["--out", "out"], type=click.Path(dir_okay=False), required=True, metavar="FILE",
                      section=DATA, help="Released documents (JSONL); nothing else is written beside it (a "
                                         "temporary .NAME.*.tmp while it is written)."),
        SectionOption(["--force", "force"], is_flag=True, section=DATA,
                      help="Write --out even over an existing file that is not JSONL documents (refused "
                           "otherwise); never over the input."),
        SectionOption(["--format", "fmt"], default=None, metavar="FORMAT", section=DATA,
                      help="Input format (default: detected)."),
        *column_options(),
    ]
    draft = ComponentOptions({key: cls}, {key: parameters(cls)}, [], {}, {})
    if draft.takes("seed"):
        common.append(SectionOption(["--seed", "seed"], type=Checked(Seed), default=0, show_default=True, section=DATA,
                                    help="Seed for every random choice."))
    if draft.takes("llm"):
        common.append(SectionOption(["--llm", "llm"], default=None, metavar="SPEC", section=DATA, help=LLM_HELP))
    if draft.takes("embedder"):
        common.append(SectionOption(["--embedder", "embedder"], default=None, metavar="SPEC", section=DATA,
                                    help=EMBEDDER_HELP))
    comps = component_options({key: cls}, taken=spellings(common) | {"param", "help", "h"})

    def callback(**kw: Any) -> None:
        import time

        import anonaudit
        from audit.pipeline.releases import write_release_jsonl

        ctx = click.get_current_context()
        params = merge_params(comps.given(ctx, kw, key), parse_param_values(kw["param_values"]), comps)
        check_outputs([Output(Path(kw["out"]), "jsonl")],
                      [("--input", kw["input_"]), *((f"--{k}", v) for k, v in params.items()
                                                    if isinstance(v, str) and Path(v).is_file())],
                      force=kw["force"])
        params = _load_file_params(params, comps.params[key], fmt=None)  # --collection FILE: a loaded corpus
        t0 = time.time()
        # --no-cache (the sanitizer's `cache`/`use_cache` off) turns every cache off: the API does it.
        seed = None if ctx.get_parameter_source("seed") is click.core.ParameterSource.DEFAULT else kw.get("seed")
        release = anonaudit.sanitize(key, kw["input_"], params=params, seed=seed, llm=kw.get("llm"),  # None: 0
                                     embedder=kw.get("embedder"), progress=True, format=kw["fmt"],
                                     release_name=Path(kw["out"]).stem, registry=reg,
                                     **{k: kw[k] for k in COLUMN_KEYS})
        write_release_jsonl(release, Path(kw["out"]))
        spans = sum(len(d.spans) for d in release.corpus)
        click.echo(f"{key}: sanitized {len(release)} documents ({spans} spans replaced) in "
                   f"{time.time() - t0:.1f}s -> {kw['out']}")
        for warning in release.warnings:  # its sanitizer's self-check: a degenerate release says so
            click.secho(f"warning: {warning}", fg="yellow", err=True)

    description = (cls.__dict__.get("__doc__") or getattr(cls, "description", "") or "").strip()
    return SectionedCommand(key.replace("_", "-"), params=[*common, *comps.options, extra_param_option(comps)],
                            callback=callback, short_help=summary(cls),
                            help=(description + "\n\n" if description else "") +
                            "Each released document records its replaced spans (offsets in the new text, label, "
                            "replacement, original), so attacks and utility metrics can use them.")


# --------------------------------------------------------------------------- the groups


class ComponentGroup(click.Group):
    """A group with one sub-command per registered component of ``kind`` (``attack NAME``)."""

    def __init__(self, *args: Any, kind: str, make: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.kind = kind
        self.make = make

    def list_commands(self, ctx: click.Context) -> list[str]:
        reg = registry_of(ctx)
        names = []
        for name in reg.names(self.kind):
            try:
                reg.get(self.kind, name)
            except AnonauditError:
                continue  # a broken plugin must not hide the others
            names.append(name.replace("_", "-"))
        return names

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        reg = registry_of(ctx)
        if normalise(cmd_name) not in reg.names(self.kind):
            return None
        cmd = self.make(reg, cmd_name)
        cmd.epilog = cmd.epilog or epilog([self.name or "", cmd_name])  # the guide page, as for every command
        return cmd


def groups() -> list[click.Command]:
    """``attack``, ``sanitize`` and ``utility``."""
    attack = ComponentGroup("attack", kind="attack", make=attack_command,
                            help="Run one attack on one or more releases. Each attack's options come from its "
                                 "parameters: `anonaudit attack NAME --help`.")
    sanitize = ComponentGroup("sanitize", kind="sanitizer", make=sanitize_command,
                              help="Run a registered sanitizer on a corpus and write the release (JSONL). Each "
                                   "sanitizer's options come from its parameters: `anonaudit sanitize NAME --help`.")
    return [attack, sanitize, UtilityCommand()]
