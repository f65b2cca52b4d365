"""User-facing errors.

Anything raised as :class:`AnonauditError` is printed by the CLI as a readable
message (never a traceback) and exits with code 1. :class:`DataError` carries every
problem found in an input, each naming the file, the line or document and what is
wrong, so a user can fix them all in one pass.
"""

from __future__ import annotations

from dataclasses import dataclass


class AnonauditError(Exception):
    """An error caused by the user's input or environment, with a message to show."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with an input: where it is and what it is."""

    source: str
    message: str
    line: int | None = None
    doc_id: str | None = None

    def __str__(self) -> str:
        where = self.source
        if self.line is not None:
            where += f":{self.line}"
        if self.doc_id is not None:
            where += f" (document {self.doc_id!r})"
        return f"{where}: {self.message}"


class DataError(AnonauditError):
    """One or more problems in an input file; ``str()`` lists all of them."""

    def __init__(self, problems: list[Problem] | Problem):
        if isinstance(problems, Problem):
            problems = [problems]
        self.problems = list(problems)
        super().__init__(self._format())

    def _format(self) -> str:
        if len(self.problems) == 1:
            return str(self.problems[0])
        lines = [f"{len(self.problems)} problems found:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)
