"""mkdocs hooks of the user guide (mkdocs.yml names this file; it is not a page of the site).

- The command-line reference is generated from the click definitions: a page holding the line
  ``<!-- cli-reference -->`` gets every command, its usage, help and options, walked from
  ``anonaudit.cli.main`` at build time (so nothing is kept by hand and a new option or command
  appears on the next build). :func:`cli_reference` is the generator; the tests call it too.
- The measured figures (``benchmarks/README.md``, outside ``docs/``) join the site as
  ``figures.md``, and a guide page's link to ``../benchmarks/README.md#anchor`` (the link that
  works when the page is read on a code host) points there in the site, so mkdocs checks the
  anchor like any other. Any other link that leaves ``docs/`` fails the build.
"""

from __future__ import annotations

import inspect
import logging
import re
from pathlib import Path

import click

ROOT = Path(__file__).resolve().parents[2]
MARKER = "<!-- cli-reference -->"
LOG = logging.getLogger("mkdocs.hooks.guide")  # a warning fails `mkdocs build --strict`
FIGURES = "figures.md"
_OUTSIDE = re.compile(r"\]\(((?:\.\./)+)([^)#\s]*)(#[^)\s]*)?\)")


def _option_row(param: click.Parameter) -> str:
    if isinstance(param, click.Argument):
        return f"| `{param.human_readable_name}` (argument) | {'required' if param.required else 'optional'} | |"
    names = ", ".join(f"`{n}`" for n in [*param.opts, *param.secondary_opts])
    value = param.default
    shown = not (param.is_flag or param.multiple or callable(value) or param.show_default is False
                 or value is None or value in ((), [], "") or type(value).__name__ == "Sentinel")
    default = f"default `{value}`" if shown else ""
    text = (param.help or "").replace("|", "\\|").replace("\n", " ")
    return f"| {names} | {default} | {text} |"


def _command_markdown(path: list[str], cmd: click.Command, ctx: click.Context) -> list[str]:
    name = " ".join(path)
    lines = [f"## {name}", ""]
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    lines += [f"```text\n{name} {usage}\n```", ""]
    if cmd.help:  # click's docstring, dedented (an indented line would be a code block in Markdown)
        lines += [inspect.cleandoc(click.unstyle(cmd.help).replace("\b\n", "")), ""]
    params = [p for p in cmd.params if not getattr(p, "hidden", False)]
    if params:
        lines += ["| option | default | what it does |", "| --- | --- | --- |", *map(_option_row, params), ""]
    if isinstance(cmd, click.Group):
        names = cmd.list_commands(ctx)
        lines += ["Sub-commands: " + ", ".join(f"`{name} {n}`" for n in names) + ".", ""]
        for sub_name in names:
            sub = cmd.get_command(ctx, sub_name)
            if sub is not None and not sub.hidden:
                sub_ctx = click.Context(sub, info_name=sub_name, parent=ctx)
                lines += _command_markdown([*path, sub_name], sub, sub_ctx)
    return lines


def cli_reference() -> str:
    """Every command of ``anonaudit`` as Markdown: usage, help, options (from click itself)."""
    from anonaudit.cli import main

    return "\n".join(_command_markdown(["anonaudit"], main, click.Context(main, info_name="anonaudit")))


def on_files(files, config):
    from mkdocs.structure.files import File

    source = ROOT / "benchmarks" / "README.md"
    files.append(File.generated(config, FIGURES, content=source.read_text(encoding="utf-8")))
    return files


def on_page_markdown(markdown: str, page, config, files):
    if MARKER in markdown:
        markdown = markdown.replace(MARKER, cli_reference())
    depth = page.file.src_uri.count("/")

    def outside(m: re.Match) -> str:
        ups, target, anchor = m.group(1), m.group(2), m.group(3) or ""
        if len(ups) // 3 <= depth:  # a page of the guide, checked by mkdocs
            return m.group(0)
        if len(ups) // 3 == depth + 1 and target == "benchmarks/README.md":
            return f"]({'../' * depth}{FIGURES}{anchor})"
        LOG.warning(f"{page.file.src_uri}: the link to {ups}{target} leaves docs/; the site holds only docs/ "
                    f"and the figures (../benchmarks/README.md): link a guide page instead")
        return m.group(0)

    return _OUTSIDE.sub(outside, markdown)
