"""The guide page each command's ``--help`` ends with (``Guide: docs/...``).

The pages are those of the user guide (``docs/``, built with mkdocs); ``tests/test_docs.py``
checks that every command's help names one and that the page exists. A command not listed here
reads its group's page, and a new top-level command without one reads the command reference.
"""

from __future__ import annotations

import click

#: command path (without ``anonaudit``) -> the guide page that explains it, under ``docs/``.
PAGES: dict[str, str] = {
    "attack": "how-to/run-an-audit.md",
    "sanitize": "how-to/run-an-audit.md",
    "utility": "how-to/run-an-audit.md",
    "run": "how-to/run-an-audit.md",
    "demo": "tutorials/officer.md",
    "demo-data": "tutorials/officer.md",
    "data": "how-to/input-formats.md",
    "report": "report.md",
    "gate": "tutorials/ci.md",
    "harden": "how-to/harden.md",
    "bench": "tutorials/researcher.md",
    "models": "reference/models.md",
    "llm": "how-to/llm-server.md",
    "cache": "how-to/caches.md",
}
#: What every other command reads.
DEFAULT = "reference/cli.md"


def page_for(path: list[str]) -> str:
    """The page for a command path (``["attack", "trir"]``): its own entry, else its group's."""
    for end in range(len(path), 0, -1):
        page = PAGES.get(" ".join(path[:end]))
        if page:
            return page
    return DEFAULT


def epilog(path: list[str]) -> str:
    return f"Guide: docs/{page_for(path)} (and every option: docs/reference/cli.md)"


def add_epilogs(cmd: click.Command, path: list[str]) -> None:
    """Give ``cmd`` and its sub-commands their guide line, unless one has an epilog of its own.
    Sub-commands built on demand (``attack NAME``) get theirs from :func:`epilog` when built."""
    if path and not cmd.epilog:
        cmd.epilog = epilog(path)
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            add_epilogs(sub, [*path, name])
