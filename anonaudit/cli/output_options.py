"""Where the commands write: ``--force`` here; the guard itself is :mod:`audit.pipeline.outputs`,
shared with the API (:meth:`anonaudit.Results.report`), so the command line and the API refuse
the same outputs with the same messages."""

from __future__ import annotations

import click

from audit.pipeline.outputs import (KINDS, Output, check_outputs, findings_csv_path, report_outputs,
                                    results_outputs)

__all__ = ["KINDS", "Output", "check_outputs", "findings_csv_path", "force_option", "report_outputs",
           "results_outputs"]

force_option = click.option(
    "--force", is_flag=True,
    help="Write even where an output would replace an existing file of another kind (refused otherwise, "
         "with exit 2); never over an input of this command.")
