"""The options of the generic driver's commands (:mod:`anonaudit.cli.driver`): help listed under
headings, the typed options of one or more components, and the common options that name the
data, the output, the seed, the models and the document budget."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click
from click.core import ParameterSource

from anonaudit.cli.param_options import Checked
from audit.core.arguments import PositiveInt, Seed
from anonaudit.cli.common import BUDGET_HELP, LLM_HELP, TIME_LIMIT_HELP
from anonaudit.cli.param_options import Param, flag, param_option, parameters, simple, split_list
from audit.core.errors import AnonauditError
from audit.core.registry import normalise

EMBEDDER_HELP = "Sentence embedder: a local sentence-transformers folder (default: the embedded MiniLM)."
DATA, PARAMS, OTHER = "Inputs and output", "Parameters", "Other options"


# --------------------------------------------------------------------------- help layout


class SectionOption(click.Option):
    """An option listed under a heading of the help (``section``)."""

    def __init__(self, *args: Any, section: str = OTHER, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.section = section


def in_section(option: click.Option, section: str) -> click.Option:
    option.section = section  # type: ignore[attr-defined]
    return option


class SectionedCommand(click.Command):
    """A command whose options are listed under headings (inputs, parameters, other)."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        sections: dict[str, list[tuple[str, str]]] = {}
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is not None:
                sections.setdefault(getattr(param, "section", OTHER), []).append(record)
        order = [s for s in sections if s != OTHER] + ([OTHER] if OTHER in sections else [])
        for title in order:
            with formatter.section(title):
                formatter.write_dl(sections[title])


# --------------------------------------------------------------------------- options of a component


@dataclass
class ComponentOptions:
    """The typed options of one or more components (``utility``: every metric)."""

    classes: dict[str, type]  # registry name -> class
    params: dict[str, list[Param]]  # registry name -> its parameters
    options: list[click.Option]
    dest: dict[str, str]  # parameter name -> option destination
    flags: dict[str, str]  # parameter name -> its main spelling

    def params_names(self) -> set[str]:
        return {p.name for ps in self.params.values() for p in ps}

    def takes(self, param: str) -> bool:
        return any(param in cls.param_names() for cls in self.classes.values())

    def given(self, ctx: click.Context, values: Mapping[str, Any], name: str) -> dict[str, Any]:
        """The parameters of component ``name`` given on the command line (typed options only)."""
        out: dict[str, Any] = {}
        for p in self.params[name]:
            dest = self.dest.get(p.name)
            if dest is None or ctx.get_parameter_source(dest) not in (ParameterSource.COMMANDLINE,
                                                                         ParameterSource.ENVIRONMENT):
                continue
            value = values[dest]
            out[p.name] = split_list(value) if p.kind == "list" and isinstance(value, str) else value
        return out


def component_options(classes: Mapping[str, type], *, taken: set[str], label_users: bool = False) -> ComponentOptions:
    """Options for the simple parameters of ``classes`` (the first class to declare a name
    decides its type). Spellings in ``taken`` (the driver's own options) are left to ``--param``.
    ``label_users``: say which components take a parameter when not all do."""
    params = {name: parameters(cls) for name, cls in classes.items()}
    seen: dict[str, Param] = {}
    users: dict[str, list[str]] = {}
    aliases: dict[str, dict[str, str]] = {}
    for name, cls in classes.items():
        for p in params[name]:
            if not simple(p):
                continue
            users.setdefault(p.name, []).append(name)
            if p.name not in seen:
                seen[p.name] = p
                aliases[p.name] = {a: t for a, t in (getattr(cls, "cli_aliases", None) or {}).items()
                                   if normalise(t).removeprefix("no_") in (p.name, flag(p).replace("-", "_"))}
    options, dest, flags = [], {}, {}
    spelled = set(taken)
    for pname, p in seen.items():
        if flag(p) in spelled or pname.replace("_", "-") in spelled:
            continue  # e.g. a parameter called "out": settable with --param only
        used_by = ", ".join(users[pname]) if label_users and len(users[pname]) < len(classes) else ""
        opt = param_option(p, aliases[pname], used_by=used_by, taken=frozenset(spelled))
        opt.name = f"param__{pname}"  # never collides with the driver's own destinations
        options.append(in_section(opt, PARAMS))
        spelled.update(o.lstrip("-") for o in opt.opts + opt.secondary_opts)
        dest[pname] = opt.name
        flags[pname] = flag(p)
    return ComponentOptions(dict(classes), params, options, dest, flags)


def common_options(*, requires: frozenset[str], comps: ComponentOptions, own_sample: bool,
                   accepts: frozenset[str] = frozenset()) -> list[click.Option]:
    """The data, output, seed, model and budget options of ``attack``/``utility`` commands
    (``accepts``: inputs the component can use without requiring them)."""
    needs_orig = "originals" in requires
    opts = [
        SectionOption(["--originals", "originals"], type=click.Path(dir_okay=False), default=None,
                      metavar="FILE", section=DATA,
                      help=("The original (private) documents" + (" (required)" if needs_orig else "")
                            + ": JSONL, CSV, Parquet, JSON map, TAB JSON. Span-file releases are applied to them.")),
    ]
    if "background" in requires | accepts:
        opts += [
            SectionOption(["--background", "background"], type=click.Path(dir_okay=False), default=None,
                          metavar="FILE", section=DATA,
                          help="Public documents with a subject: the attacker's background knowledge"
                               + (" (required, or --tri)." if "background" in requires else " (or --tri).")),
            SectionOption(["--tri", "--tri-file", "tri"], type=click.Path(dir_okay=False), default=None,
                          metavar="FILE", section=DATA,
                          help="A TRI dataframe file: the background and one release per method column."),
        ]
    opts += [
        SectionOption(["--release", "releases"], multiple=True, metavar="NAME=FILE", section=DATA,
                      help="A sanitized release, as NAME=FILE or FILE (name = file stem). Repeatable. A span "
                           "file {doc_id: [[start, end, replacement?], ...]} is applied to --originals."),
        SectionOption(["--format", "fmt"], default=None, metavar="FORMAT", section=DATA,
                      help="Format of the release files (default: detected from extension and content; the "
                           "originals take it when it is a corpus format)."),
        *column_options(),
        SectionOption(["--out", "out"], type=click.Path(dir_okay=False), required=True, metavar="FILE",
                      section=DATA, help="Results JSON to write (merged into it if it exists). Written beside "
                                         "it: summary.csv (X.summary.csv beside X.json), one row per release x "
                                         "result with its interval, n and baseline; copies of the releases for "
                                         "the report (releases/NAME-HASH.jsonl beside results.json, X.releases/ "
                                         "beside any other X.json) and the lock file .X.json.lock."),
        SectionOption(["--force", "force"], is_flag=True, section=DATA,
                      help="Write --out even over an existing file that is not a results file (refused "
                           "otherwise); never over an input of this command."),
        SectionOption(["--sample-documents" if own_sample else "--sample", "sample_documents"],
                      type=Checked(PositiveInt), default=None, metavar="N", section=DATA,
                      help="Run on a seeded sample of N documents of each release (the same ids in every "
                           "release; default: all)."),
        SectionOption(["--seed", "seed"], type=Checked(Seed), default=0, show_default=True, section=DATA,
                      help="Seed for every random choice."),
        SectionOption(["--budget", "budget"], default=None, metavar="quick|standard|full", section=DATA,
                      help=BUDGET_HELP + (" (--budget paper|fast, this attack's own parameter before, is read "
                                          "as --param budget=VALUE, with a deprecation note)"
                                          if "budget" in comps.params_names() else "")),
        SectionOption(["--time-limit", "time_limit"], type=click.FloatRange(min=0, min_open=True), default=None,
                      metavar="MINUTES", section=DATA, help=TIME_LIMIT_HELP),
    ]
    if comps.takes("llm"):
        opts.append(SectionOption(["--llm", "llm"], default=None, metavar="SPEC", section=DATA, help=LLM_HELP))
    if comps.takes("embedder"):
        opts.append(SectionOption(["--embedder", "embedder"], default=None, metavar="SPEC", section=DATA,
                                  help=EMBEDDER_HELP))
    return opts


#: The fields of a document whose column a user may name, with what each holds (the API's
#: ``text_column=``..., an audit spec's ``columns:``).
COLUMN_FIELDS = (("text", "text"), ("id", "document id"), ("subject", "subject (the person a document is about)"),
                 ("spans", "annotation spans (a list, or a JSON string)"))
#: The keyword arguments the column options give a command, as the API takes them.
COLUMN_KEYS = tuple(f"{field}_column" for field, _ in COLUMN_FIELDS)


def column_options() -> list[click.Option]:
    """``--text-column``, ``--id-column``, ``--subject-column``, ``--spans-column``: the columns
    of CSV, Parquet or JSONL inputs that hold each field (the API's ``text_column=``...). A
    column named that a file lacks is an error naming the option, never ignored."""
    return [SectionOption([f"--{field}-column", f"{field}_column"], default=field, show_default=True, metavar="NAME",
                          section=DATA, help=f"The column of CSV, Parquet or JSONL inputs that holds the {what}.")
            for field, what in COLUMN_FIELDS]


def extra_param_option(comps: ComponentOptions) -> click.Option:
    rest = sorted({p.name for ps in comps.params.values() for p in ps if p.name not in comps.dest
                   and p.name not in ("seed", "llm", "embedder", "progress")})
    more = f" Parameters without an option of their own: {', '.join(rest)}." if rest else ""
    return SectionOption(["--param", "param_values"], multiple=True, metavar="KEY=VALUE", section=OTHER,
                         help="Set any parameter; VALUE is read as YAML (e.g. labels=[PERSON,DATE]). "
                              f"Repeatable.{more}")


def spellings(options: Sequence[click.Option]) -> set[str]:
    return {o.lstrip("-") for opt in options for o in opt.opts + opt.secondary_opts}


def merge_params(typed: dict[str, Any], extra: Mapping[str, Any], comps: ComponentOptions) -> dict[str, Any]:
    for k in extra:
        if k in typed:
            raise AnonauditError(f"parameter {k!r} is given twice: --{comps.flags.get(k, k)} and --param")
    return {**typed, **extra}
