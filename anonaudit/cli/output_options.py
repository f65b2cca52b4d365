"""Where the commands write and what the shared outputs hold: ``--force`` and ``--keep-ids``
here; the guard itself is :mod:`audit.pipeline.outputs`,
shared with the API (:meth:`anonaudit.Results.report`), so the command line and the API refuse
the same outputs with the same messages."""

from __future__ import annotations

import click

from audit.pipeline.outputs import (KINDS, Output, check_outputs, findings_csv_path, report_outputs,
                                    results_outputs)

__all__ = ["KINDS", "Output", "check_outputs", "findings_csv_path", "force_option", "keep_ids_option",
           "report_outputs", "results_outputs"]

force_option = click.option(
    "--force", is_flag=True,
    help="Write even where an output would replace an existing file of another kind (refused otherwise, "
         "with exit 2); never over an input of this command.")


def keep_ids_option(help: str = "In the shareable edition, keep the documents' ids (by default each is a stable "
                                "pseudonym, D01, D02...: an id can be a person's name or a case number)."):
    """``--keep-ids``: name documents by their ids where an output shared outside would name
    them by pseudonym (the shareable report of ``run`` and ``report``; ``gate``'s CI outputs, with
    their own ``help``)."""
    return click.option("--keep-ids", is_flag=True, help=help)
