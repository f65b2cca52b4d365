"""``anonaudit.bench``: a new sanitizer beside the comparison points, with paired significance.

    board = anonaudit.bench(command="python my_sanitizer.py {input} {output}")   # demo corpus
    board.to_pandas()          # the leaderboard, ranked by risk (published rows last)
    board.report("leaderboard.html")   # the page; leaderboard.csv and leaderboard.md beside it

The sanitizer under test is one of ``sanitizer=`` (a registered name), ``command=`` (an external
program in any language, ``{input}``/``{output}`` in its command line) or ``release=`` (a
release already made: a file in any input format (docs/how-to/input-formats.md), or data in memory). The corpus is the
synthetic demo population unless ``originals=`` (any input format (docs/how-to/input-formats.md) or table) or ``tri=`` (a TRI
file: its background and one release per method) is given; ``background=`` is what TRIR's
adversary knows. Work goes to ``out`` (resumable) when given; without it nothing is written to
disk: the corpus, the releases and the results stay in memory and come back in the
:class:`BenchResults` (one exception: an external ``command=`` is a program that reads and writes
files, so its input and output are written to a temporary folder of their own, deleted as soon
as it has run).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from anonaudit.typed_spec import Spec
from audit.core.arguments import PositiveInt, Seconds, Seed, checked
from audit.core.data import Corpus, Release
from audit.core.errors import AnonauditError
from audit.core.paramtypes import AtLeast, AtMost
from anonaudit.demo.population import MAX_RELEASED


#: The people of the demo population a bench runs on when given no corpus (``--demo-people``):
#: at least 3 (NMI clusters the documents).
BenchPeople = Annotated[int, AtLeast(3), AtMost(MAX_RELEASED)]


@dataclass
class BenchResults:
    """A bench's leaderboard (``leaderboard``: ranked rows, paired tests, published rows),
    the audit's :class:`~anonaudit.outcome.Results` (``results``) and what each contender cost."""

    leaderboard: Any
    results: Any
    costs: dict[str, dict[str, Any]]
    reused: list[str]
    seconds: float
    out: Path | None = None
    #: The bench's own input files, by how they were given (originals, background, the TRI file,
    #: the release under test, ``--also`` files, the reference table): :meth:`report` never writes
    #: over one of them, ``force=True`` included.
    sources: tuple[tuple[str, Path], ...] = ()

    def to_list(self) -> list[dict[str, Any]]:
        from reports.leaderboard_page import to_rows

        return to_rows(self.leaderboard)

    def to_pandas(self):
        """One row per release, ranked by risk, then the published figures (``role`` = published)."""
        from anonaudit.outcome import import_pandas
        from reports.leaderboard_page import columns

        return import_pandas().DataFrame(self.to_list(), columns=columns(self.leaderboard))

    def published(self, keep_ids: bool = False) -> Any:
        """The leaderboard as every published table names it (the Markdown and LaTeX tables, the
        CSV and the page): a release or a corpus named after its file by a pseudonym (``R1``...,
        "the corpus"), as in the shareable report, unless ``keep_ids``
        (:func:`reports.shareable.published_names`, the one rule)."""
        from reports.shareable import published_names, release_pseudonyms

        if keep_ids:
            return self.leaderboard
        names = release_pseudonyms(self.results.file)
        files = [Path(p).stem for role, p in self.sources if role in ("originals", "tri")]
        names.update({self.leaderboard.corpus: "the corpus"} if self.leaderboard.corpus in files else {})
        return published_names(self.leaderboard, names)

    def to_markdown(self, *, keep_ids: bool = False) -> str:
        """The leaderboard as a Markdown table; a release or corpus named after its file by a
        pseudonym unless ``keep_ids`` (:meth:`published`)."""
        from reports.leaderboard_page import markdown

        return markdown(self.published(keep_ids))

    def to_latex(self, *, label: str = "tab:leaderboard", keep_ids: bool = False) -> str:
        """The leaderboard as a LaTeX table for a paper (pandas' Styler; booktabs; 95% intervals;
        paired tests against the sanitizer under test as significance marks, named in the note);
        a release or corpus named after its file by a pseudonym unless ``keep_ids``."""
        from reports.latex import leaderboard_latex

        return leaderboard_latex(self.published(keep_ids), label=label)

    @checked
    def report(self, path: str | os.PathLike, *, notes: Sequence[str] = (), force: bool = False,
               keep_ids: bool = False) -> Path:
        """Write the page to ``path``, with ``leaderboard.csv``, ``leaderboard.md`` and (with
        pandas installed) ``leaderboard.tex`` beside it (``NAME.csv``... for a page named
        otherwise). Returns the page's path. None of them may be an input of the bench (its
        originals, background, TRI file, releases, reference table, the copies it made of them),
        whatever ``force`` says, nor an existing file of another kind unless ``force=True`` (the
        command line's guard, :class:`AnonauditError`). Releases and the corpus named after their
        files are named by pseudonym in all four unless ``keep_ids`` (:meth:`published`)."""
        import importlib.util

        from audit.core.files import atomic_write
        from audit.pipeline.outputs import Output, check_outputs
        from reports.leaderboard_page import write_csv, write_html

        path = Path(path)
        stem = "leaderboard" if path.name == "leaderboard.html" else path.stem
        csv, md, tex = (path.with_name(f"{stem}.{ext}") for ext in ("csv", "md", "tex"))
        latex = importlib.util.find_spec("pandas") is not None
        check_outputs([Output(path, "leaderboard", "the leaderboard"),
                       Output(csv, "leaderboard_csv", f"the CSV beside {path.name}"),
                       Output(md, "leaderboard_md", f"the Markdown table beside {path.name}"),
                       *([Output(tex, "leaderboard_tex", f"the LaTeX table beside {path.name}")] if latex else [])],
                      [*self.results.inputs(), *self.sources], force=force, force_named="force=True")
        board = self.published(keep_ids)
        write_csv(board, csv)
        atomic_write(md, self.to_markdown(keep_ids=keep_ids))
        if latex:
            atomic_write(tex, self.to_latex(keep_ids=keep_ids))
        return write_html(board, path, notes=list(notes))

    def _repr_html_(self) -> str:
        """The leaderboard with its Pareto chart, inline in a notebook (:mod:`reports.notebook`)."""
        from reports.notebook import leaderboard_html

        return leaderboard_html(self.leaderboard)

    def __repr__(self) -> str:
        rows = ", ".join(f"{r.rank or '-'}. {r.name}" for r in self.leaderboard.rows)
        return f"BenchResults({rows})"


@checked
def bench(sanitizer: str | None = None, spec: Spec | str | os.PathLike | None = None, *, command: str | None = None,
          release: Any = None, name: str | None = None, params: Mapping[str, Any] | None = None,
          originals: Any = None, attacks: Any = None, metrics: Any = None, seed: Seed | None = None,
          tri: Any = None, tri_originals: str | None = None, demo_people: BenchPeople = 20,
          documents: PositiveInt | Sequence[str] | None = None, comparisons: Iterable[str] | None = None,
          with_: Iterable[str] = (), sanitizer_sample: PositiveInt = 10,
          sanitizer_params: Mapping[str, Mapping[str, Any]] | None = None, reference: str | os.PathLike | None = None,
          format: str | None = None, command_timeout: Seconds | None = None,  # noqa: A002
          out: str | os.PathLike | None = None, force: bool = False, progress: bool = True, registry: Any = None,
          echo: Any = None) -> BenchResults:
    """Benchmark one sanitizer against the comparison points on one corpus (see the module doc).

    spec: an :class:`anonaudit.Spec` for what the bench shares with an audit: its ``background``,
        ``releases`` (``{name: file or data}``, releases already made to place on the board too),
        ``budget`` (level, ``sample``: a seeded sample of that many documents for the attacks that
        call a language model per document, ``time_limit``), ``models`` (``llm``), ``columns`` and
        ``title``; ``originals``, ``attacks``, ``metrics`` and ``seed`` are shortcuts for its fields.
    comparisons: registered sanitizers to compare with (default: suppression, labels, spacy_ner,
        presidio when installed); ``with_``: more, e.g. ``("intact", "prompt", "delinker")``, each
        run on a seeded sample of ``sanitizer_sample`` documents (they call a language model per
        document).
    sanitizer_params: ``{name: {param: value}}`` for comparison points (e.g. ``{"intact": {"candidates": 3}}``).
    documents: bench a seeded sample of this many originals, or the originals with these ids (the
        background stays whole; release files made for the whole corpus are cut to them).
    reference: a reference table of published figures (a CSV file, or ``"tab"``).
    out: the folder to write (``results.json``, the leaderboard, ``data/``, ``sanitized/``); none of
        its files may be an input, nor an existing file of another kind unless ``force`` (as
        ``--force``). Without it nothing is written to disk (but ``command=``'s two files, in a
        temporary folder deleted once it has run); shared caches (``ANONAUDIT_HOME``) are kept
        as in every run. A time limit (``Budget(time_limit=...)``): before any work, every
        sanitizer it must run, attack and metric is calibrated on 5 documents and extrapolated; an
        :class:`AnonauditError` with the estimate per stage when it exceeds the limit, nothing
        sanitized, attacked or written (docs/how-to/budgets.md); then enforced, the calibration
        included: at the limit the work stops (``command``'s processes too), what finished is kept,
        and a ``TimeLimitReached`` (an :class:`AnonauditError`) says so. ``command_timeout``: seconds
        ``command`` may run (default 3600, :data:`audit.pipeline.external.DEFAULT_COMMAND_TIMEOUT`).
    """
    from anonaudit.api import with_shortcuts
    from audit.core.registry import given_registry
    from audit.pipeline.budget import check_budget
    from audit.pipeline.external import check_timeout

    check_timeout(command_timeout, "command_timeout=")
    s = with_shortcuts(spec, originals=originals, attacks=attacks, metrics=metrics, seed=seed)
    if s.releases is not None and not isinstance(s.releases, Mapping):
        raise AnonauditError("bench: spec.releases: give {name: file or data} (releases to place on the board)")
    reg = given_registry(registry, "anonaudit.bench(): registry=")
    chosen = [k for k, v in (("sanitizer", sanitizer), ("command", command), ("release", release)) if v is not None]
    if len(chosen) != 1:
        raise AnonauditError("give the sanitizer under test as exactly one of sanitizer=, command= or release= "
                             f"(got {', '.join(chosen) or 'none'})")
    columns = {k: getattr(s.columns, k) for k in ("text", "id", "subject", "spans") if getattr(s.columns, k) != k}
    corpus = _corpus(s.originals, s.background, tri, tri_originals, demo_people, documents, s.seed, format, columns)
    extra = dict(s.releases or {})
    bspec = _spec(corpus, reg, sanitizer=sanitizer, command=command, release=release, name=name, params=params,
                  comparisons=comparisons, with_=with_, budget=check_budget(s.budget.level, "bench budget"),
                  sanitizer_sample=sanitizer_sample, extra=extra, attacks=s.attacks,
                  sanitizer_params=sanitizer_params or {}, metrics=s.metrics, sample=s.budget.sample,
                  reference=reference, seed=s.seed, llm=s.models.llm, title=s.title, columns=columns,
                  command_timeout=command_timeout)
    given = [("originals", s.originals), ("background", s.background), ("tri", tri), ("release", release),
             ("reference", reference), *((f"extra release {k}", v) for k, v in extra.items())]
    sources = tuple((k, Path(os.fspath(v)).expanduser().resolve()) for k, v in given
                    if isinstance(v, (str, os.PathLike)) and (k != "reference" or os.fspath(v) != "tab"))
    from audit.runtime.deadline import check_enforceable

    check_enforceable(s.budget.time_limit, "time_limit=")  # before the writer makes out=
    writer = None
    if out is not None:  # the one writer of out=, made before any work: it holds the output guard
        from audit.pipeline.bench_writer import BenchWriter

        writer = BenchWriter(Path(out).resolve(), inputs=sources, force=force, force_named="force=True")
    try:
        return _run(bspec, writer, reg, progress, echo, sources=sources, time_limit=s.budget.time_limit)
    finally:
        if writer is not None:
            writer.close()


@dataclass(frozen=True)
class _Corpus:
    name: str
    originals: Corpus | None
    background: Corpus | None
    releases: tuple[Release, ...] = ()
    population: Corpus | None = None


def _corpus(originals: Any, background: Any, tri: Any, tri_originals: str | None, demo_people: int,
            documents: int | None, seed: int, fmt: str | None, columns: Mapping[str, str]) -> _Corpus:
    """The corpus to bench on: the demo population, originals (+ background), or a TRI file."""
    from anonaudit.inputs import as_corpus, is_file
    from audit.io.loaders import load_corpus, load_tri

    def load(value: Any, role: str, format_: str | None = None) -> Corpus | None:
        if value is None:
            return None
        if is_file(value):
            return load_corpus(value, format=format_, name=role, columns=dict(columns) or None)
        return as_corpus(value, name=role, columns=columns)

    if tri is not None:
        if originals is not None:
            raise AnonauditError("give originals= or tri=, not both (a TRI file's originals are one of its columns: "
                                 "tri_originals=)")
        bg, rels = load_tri(tri)
        orig = None
        if tri_originals is not None:
            found = [r for r in rels if r.name == tri_originals]
            if not found:
                raise AnonauditError(f"{tri}: no method column {tri_originals!r}; columns: "
                                     f"{', '.join(r.name for r in rels)}")
            orig, rels = found[0].corpus.rename("originals"), [r for r in rels if r.name != tri_originals]
        data = _Corpus(Path(os.fspath(tri)).stem, orig, load(background, "background") or bg, tuple(rels))
    elif originals is not None:
        name = Path(os.fspath(originals)).stem if is_file(originals) else "originals"
        data = _Corpus(name, load(originals, "originals", fmt), load(background, "background"))
    else:
        from anonaudit.demo.population import generate

        demo = generate(n=demo_people, seed=seed)
        data = _Corpus(f"demo population ({demo_people} people, seed {seed})", demo.originals,
                       load(background, "background") or demo.background)
    if documents is None or data.originals is None:
        return data
    if isinstance(documents, int):
        if documents >= len(data.originals):
            return data
        from audit.pipeline.releases import sample_release

        kept = sample_release(Release("originals", data.originals), documents, seed).corpus
        what = f"a seeded sample of {documents}"
    else:
        wanted = {str(i) for i in documents}
        unknown = sorted(wanted - set(data.originals.ids))
        if unknown:
            raise AnonauditError(f"documents=: no original document has the id(s) {', '.join(map(repr, unknown[:5]))}")
        kept = Corpus([d for d in data.originals if d.id in wanted], name="originals", source=data.originals.source)
        what = f"{len(kept)} chosen"
    return _Corpus(f"{data.name} ({what} of {len(data.originals)} documents)", kept, data.background, data.releases,
                   population=data.originals)


def _spec(corpus: _Corpus, reg: Any, *, sanitizer, command, release, name, params, comparisons, with_, budget,
          sanitizer_sample, extra, sanitizer_params, attacks, metrics, sample, reference, seed, llm, title, columns,
          command_timeout):
    """The :class:`~audit.pipeline.bench.BenchSpec` of a call. Every name that will name a file
    (the sanitizer under test's, each comparison point's, ``--also``'s, a TRI file's method
    columns) is checked, and the names checked against one another, before any work."""
    import importlib.util

    from anonaudit.inputs import as_corpus, component_entries, is_file
    from audit.core.data import check_release_name
    from audit.pipeline.bench import CHEAP, BenchSpec, Contender
    from audit.pipeline.leaderboard import read_reference

    if name is not None:  # an empty name is no name: refused, not the default
        check_release_name(name, "--name (name=)")
    if release is not None:
        label = name or (Path(os.fspath(release)).stem if is_file(release) else "under_test")
        under = (Contender(label, "file", path=os.fspath(release), under_test=True, name_from_file=name is None)
                 if is_file(release) else
                 Contender(label, "release", release=release if isinstance(release, Release) else
                           Release(label, as_corpus(release, name=label, columns=columns)), under_test=True))
    elif command is not None:
        from audit.pipeline.external import check_command

        check_command(command)  # before any work
        under = Contender(name or "under_test", "command", command=command, under_test=True)
    else:
        reg.get("sanitizer", sanitizer)  # an unknown name is an error before any work
        under = Contender(name or sanitizer, "sanitizer", sanitizer=sanitizer, params=dict(params or {}),
                          under_test=True)
    for option, value in (("comparisons=", comparisons), ("with_=", with_)):
        if isinstance(value, (str, bytes)):  # would be read one character at a time
            raise AnonauditError(f"{option} give a list of sanitizer names, e.g. [{value!r}], not one string")
    default = comparisons is None
    if default:
        comparisons = [c for c in CHEAP if (c != "presidio" or importlib.util.find_spec("presidio_analyzer"))
                       and c != under.name  # the sanitizer under test is not compared with itself
                       and c in reg.names("sanitizer")]
    named: list[tuple[Any, str]] = [(under, _how_under(name, release))]
    for c in comparisons:
        _known_sanitizer(reg, c, "--compare (comparisons=)")
        named.append((Contender(c, "sanitizer", sanitizer=c, params=dict(sanitizer_params.get(c, {}))),
                      "the default comparison points" if default else "--compare (comparisons=)"))
    for c in with_:
        _known_sanitizer(reg, c, "--with (with_=)")
        named.append((Contender(c, "sanitizer", sanitizer=c, params=dict(sanitizer_params.get(c, {})),
                                budget=sanitizer_sample), "--with (with_=)"))
    named += [(Contender(r.name, "release", release=r), "a method column of the TRI file") for r in corpus.releases]
    for k, v in (extra or {}).items():
        named.append((Contender(str(k), "file", path=os.fspath(v), name_from_file=str(k) == Path(os.fspath(v)).stem)
                       if is_file(v) else
                      Contender(str(k), "release", release=Release(str(k), as_corpus(v, name=str(k), columns=columns))),
                      "--also (spec.releases)"))
    _check_names(named)
    for c, _ in named:
        _check_params(reg, c)
    return BenchSpec(originals=corpus.originals, background=corpus.background,
                     contenders=tuple(c for c, _ in named), attacks=tuple(_attacks(attacks, reg, sample, corpus)),
                     metrics=tuple(component_entries(metrics, "metrics") if metrics is not None else
                                   reg.names("metric")),
                     seed=seed, llm=llm, title=title or f"Benchmark of {under.name}", corpus=corpus.name,
                     reference=read_reference(reference) if reference is not None else (),
                     command_timeout=command_timeout, population=corpus.population, budget=budget)


def _how_under(name: str | None, release: Any) -> str:
    """How the user named the sanitizer under test, for the messages."""
    if name is not None:
        return "--name (name=)"
    if release is not None:
        return "the name taken from the --release file's name (give --name)"
    return "the default name of the sanitizer under test (give --name)"


def _known_sanitizer(reg: Any, name: Any, option: str) -> None:
    """A comparison point must be a registered sanitizer: refused before any work otherwise."""
    from audit.core.registry import normalise

    known = reg.names("sanitizer")
    if not isinstance(name, str) or normalise(name) not in known:
        raise AnonauditError(f"{option}: unknown sanitizer {name!r} (known: {', '.join(known) or 'none installed'})")


def _check_names(named: Sequence[tuple[Any, str]]) -> None:
    """Each release's name is a valid name (:func:`audit.core.data.check_release_name`: the one
    check of every name that becomes part of a file name), and no two releases share one (the
    message names the options that gave each)."""
    from audit.core.data import check_release_name

    seen: dict[str, str] = {}
    for c, how in named:
        check_release_name(c.name, how)
        if c.name in seen:
            first = seen[c.name]
            raise AnonauditError(f"two releases are named {c.name!r}: one by {first}, one by {how}; "
                                 + ("give one of them another name" if first != how else "name it once"))
        seen[c.name] = how


def _check_params(reg: Any, c: Any) -> None:
    """A registered sanitizer's parameters, checked against its constructor before any work."""
    from audit.core.paramtypes import check_params

    if c.kind != "sanitizer" or not c.params:
        return
    cls = reg.get("sanitizer", c.sanitizer)
    unknown = sorted(set(c.params) - set(cls.param_names()))
    if unknown:
        raise AnonauditError(f"sanitizer {c.sanitizer!r} has no parameter(s) {', '.join(unknown)} "
                             f"(it takes: {', '.join(cls.param_names())})")
    wrong = check_params(cls, dict(c.params))
    if wrong:
        raise AnonauditError("\n".join(f"sanitizer {c.sanitizer!r}: parameter {k!r} {why}" for k, why in wrong.items()))


def _attacks(attacks: Any, reg: Any, sample: int | None, corpus: _Corpus) -> list[Any]:
    """The attacks' spec entries: as given, or every registered attack the corpus allows (TRIR
    needs a background), those calling a language model per document on ``sample`` documents
    when given (else they sample to the budget's interval target)."""
    from anonaudit.inputs import component_entries

    if attacks is not None:
        return component_entries(attacks, "attacks")
    out: list[Any] = []
    for a in reg.names("attack"):
        if a == "trir" and corpus.background is None:
            continue
        entry: dict[str, Any] = {"name": a}
        try:
            if sample and "llm" in reg.get("attack", a).param_names():
                entry["sample"] = sample
        except AnonauditError:
            pass  # cannot be loaded: the runner skips it and says why
        out.append(entry)
    return out


def _run(spec: Any, writer: Any, reg: Any, progress: bool, echo: Any, *,
         sources: tuple[tuple[str, Path], ...] = (), time_limit: float | None = None) -> BenchResults:
    import sys

    from anonaudit.outcome import Results, read_copies
    from audit.pipeline.bench import run_bench

    say = echo or ((lambda m: print(m, file=sys.stderr, flush=True)) if progress else (lambda m: None))
    outcome = run_bench(spec, registry=reg, progress=progress, echo=say, writer=writer, time_limit=time_limit)
    a = outcome.audit
    copies = {**(read_copies(a.path, a.results, strict=False, skip=a.copies) if a.path else {}), **a.copies}
    results = Results(a.results, copies=copies, computed=a.computed,
                      reused=a.reused, skipped=a.skipped, errors=a.errors, keys=a.keys,
                      path=a.path, seconds=a.seconds)
    return BenchResults(leaderboard=outcome.leaderboard, results=results, costs=outcome.costs,
                        reused=outcome.reused, seconds=outcome.seconds, out=None if writer is None else writer.out,
                        sources=sources)
