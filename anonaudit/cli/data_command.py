"""``anonaudit data``: check input files and convert them to JSONL.

``validate`` reports every problem of a file at once (file, line or document, and
what is wrong) so it can be fixed in one pass; ``convert`` writes the normalised
JSONL form that every other command reads fastest.
"""

from __future__ import annotations

from pathlib import Path

import click

from anonaudit.cli.driver_options import COLUMN_FIELDS
from anonaudit.cli.output_options import Output, check_outputs, force_option
from audit.core.data import Corpus
from audit.io.frames import check_columns
from audit.io.loaders import FORMATS, detect_format, load_corpus, load_releases, load_tri, save_jsonl

_format = click.option("--format", "fmt", type=click.Choice(list(FORMATS)), default=None,
                       help="Input format (default: detected from extension and content).")
_originals = click.option("--originals", type=click.Path(dir_okay=False), default=None,
                          help="Original documents a span file is applied to (also checks that a "
                               "release's ids exist in them).")
_annotator = click.option("--annotator", default=None, metavar="NAME",
                          help="TAB files: keep this annotator's mentions (default: merge all).")


def _columns(f):
    """``--text-column``, ``--id-column``, ``--subject-column``, ``--spans-column`` (CSV, Parquet, JSONL)."""
    for field, what in reversed(COLUMN_FIELDS):
        f = click.option(f"--{field}-column", f"{field}_column", default=field, show_default=True, metavar="NAME",
                         help=f"The column of a CSV, Parquet or JSONL file that holds the {what}.")(f)
    return f


def _column_map(**named: str) -> dict[str, str] | None:
    """The columns named for the fields (``text_column=``...); one column named for two is refused
    before any file is read."""
    return check_columns({key.removesuffix("_column"): column for key, column in named.items()}) or None


def _spec(path: str) -> str:
    """A release spec that names ``path`` unambiguously (file names may contain '=')."""
    return f"{Path(path).stem.replace('=', '_') or 'release'}={path}"


def _n_spans(corpus: Corpus) -> int:
    return sum(len(d.spans) for d in corpus)


@click.group("data")
def data() -> None:
    """Check and convert corpora and releases (JSONL, CSV, JSON map, TAB, TRI, span files)."""


@data.command("validate")
@click.argument("file", type=click.Path(dir_okay=False))
@_format
@_originals
@_annotator
@_columns
def validate(file: str, fmt: str | None, originals: str | None, annotator: str | None,
             **named_columns: str) -> None:
    """Check FILE and list every problem found (exit code 2), or print a summary (exit code 0).

    A span file {doc_id: [[start, end, replacement?], ...]} needs --originals. With
    --originals, FILE is checked as a release of those originals.
    """
    columns = _column_map(**named_columns)
    fmt = fmt or detect_format(file)
    if fmt == "tri":
        background, releases = load_tri(file)
        click.echo(f"OK: {file}: {len(background)} documents, {_n_spans(background)} spans, format tri")
        for r in releases:
            click.echo(f"  method {r.name}: {len(r)} documents")
        return
    if originals is not None:
        orig = load_corpus(originals, columns=columns)
        (release,) = load_releases(_spec(file), originals=orig, format=fmt, columns=columns)
        corpus = release.corpus
    else:
        corpus = load_corpus(file, fmt, annotator=annotator, columns=columns)
    click.echo(f"OK: {file}: {len(corpus)} documents, {_n_spans(corpus)} spans, format {fmt}")


@data.command("convert")
@click.argument("src", type=click.Path(dir_okay=False))
@click.argument("dst", type=click.Path(dir_okay=False))
@_format
@_originals
@_annotator
@_columns
@force_option
def convert(src: str, dst: str, fmt: str | None, originals: str | None, annotator: str | None, force: bool,
            **named_columns: str) -> None:
    """Convert SRC to JSONL at DST (one document per line, spans included), or a TAE config.json
    to an audit spec (DST ending in .yaml).

    A span file is applied to --originals: DST is the sanitized release, each
    document recording its replaced spans (offsets in the sanitized text and in
    the original). A TRI file gives several corpora: DST receives the background
    documents (public_knowledge) and each method column goes next to it as
    DST_STEM.METHOD.jsonl.
    """
    if Path(dst).suffix.lower() in (".yaml", ".yml"):
        return _convert_tae_config(src, dst, force)
    inputs = [("SRC", src), ("--originals", originals)]
    check_outputs([Output(Path(dst), "jsonl", "DST (JSONL; from a TAE config.json, an audit spec .yaml)")], inputs,
                  force=force)
    columns = _column_map(**named_columns)
    fmt = fmt or detect_format(src)
    if fmt == "tri":
        background, releases = load_tri(src)
        out = Path(dst)
        check_outputs([Output(out.with_name(f"{out.stem}.{r.name}{out.suffix}"), "jsonl", f"DST of method {r.name}")
                       for r in releases], inputs, force=force)
        save_jsonl(background, out)
        click.echo(f"wrote {out}: {len(background)} documents (background)")
        for r in releases:
            path = out.with_name(f"{out.stem}.{r.name}{out.suffix}")
            save_jsonl(r.corpus, path)
            click.echo(f"wrote {path}: {len(r)} documents (method {r.name})")
        return
    if fmt == "spans" or originals is not None:
        orig = load_corpus(originals, columns=columns) if originals is not None else None
        (release,) = load_releases(_spec(src), originals=orig, format=fmt, columns=columns)
        corpus = release.corpus
    else:
        corpus = load_corpus(src, fmt, annotator=annotator, columns=columns)
    save_jsonl(corpus, dst)
    click.echo(f"wrote {dst}: {len(corpus)} documents, {_n_spans(corpus)} spans (from {fmt})")


def _convert_tae_config(src: str, dst: str, force: bool) -> None:
    """A TAE ``config.json`` as an audit spec at DST: its corpus, anonymizations, background and
    metrics, checked as ``anonaudit run`` checks a spec; what is not run is said, with why."""
    import yaml

    from audit.io.taeconfig import read_tae_config
    from audit.pipeline.outputs import TAE_SPEC_HEADER
    from audit.pipeline.spec import parse_spec

    mapping, notes = read_tae_config(src)
    check_outputs([Output(Path(dst), "tae_spec", "DST")], [("SRC", src)], force=force)
    parse_spec(mapping, base=Path(dst).resolve().parent, source=dst)  # refuse what run would refuse
    text = yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True, width=100)
    Path(dst).write_text(f"{TAE_SPEC_HEADER} {src}\n# run it with: anonaudit run {dst}\n{text}", encoding="utf-8")
    click.echo(f"wrote {dst}: {len(mapping['releases'])} release(s), metrics "
               f"{', '.join(m['name'] for m in mapping.get('metrics', [])) or 'none'}, attacks "
               f"{', '.join(a['name'] for a in mapping.get('attacks', [])) or 'none'}")
    for note in notes:
        click.secho(f"note: {note}", fg="yellow", err=True)


def commands() -> list[click.Command]:
    return [data]
