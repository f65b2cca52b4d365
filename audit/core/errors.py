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


class ArgumentError(AnonauditError):
    """An argument of a Python call (or an option of the command line) of the wrong type or out
    of range; the message names the function and the argument (:mod:`audit.core.arguments`)."""


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


class Problems:
    """Collects the problems of one input so the user can fix them all in one pass.

    At most ``limit`` are kept; the rest are counted and summarised in one line.
    """

    def __init__(self, source: str, limit: int = 1000):
        self.source = source
        self.limit = limit
        self.items: list[Problem] = []
        self.dropped = 0

    def add(self, message: str, *, line: int | None = None, doc_id: str | None = None,
            where: str | None = None) -> None:
        """Record a problem; ``where`` (e.g. a key path in a config) prefixes the message."""
        if where:
            message = f"{where}: {message}"
        if len(self.items) < self.limit:
            self.items.append(Problem(self.source, message, line=line, doc_id=doc_id))
        else:
            self.dropped += 1

    def at(self, where: str, message: str) -> None:
        """Record a problem at a key path of a config (``attacks[1].params.k``)."""
        self.add(message, where=where)

    def __bool__(self) -> bool:
        return bool(self.items)

    def raise_if_any(self) -> None:
        if not self.items:
            return
        items = list(self.items)
        if self.dropped:
            items.append(Problem(self.source, f"... and {self.dropped} more problems not listed"))
        raise DataError(items)


def wide_encoding(head: bytes) -> str | None:
    """The name of the UTF-16/UTF-32 encoding that the first bytes of a file look like (a byte
    order mark, or NUL bytes in every other position of ASCII text), else ``None``. Such a file
    read as UTF-8 gives dozens of confusing errors; one message naming the encoding helps."""
    boms = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"),
            (b"\xff\xfe", "UTF-16"), (b"\xfe\xff", "UTF-16"))
    for bom, name in boms:
        if head.startswith(bom):
            return name
    sample = head[:512]
    if len(sample) >= 4:
        even, odd = sample[0::2], sample[1::2]
        if odd.count(0) >= 0.75 * len(odd) and even.count(0) <= 0.1 * len(even):
            return "UTF-16"
        if even.count(0) >= 0.75 * len(even) and odd.count(0) <= 0.1 * len(odd):
            return "UTF-16"
    return None


def not_utf8_message(encoding: str) -> str:
    return (f"not UTF-8 text: it looks like {encoding}; save it as UTF-8 "
            "(e.g. iconv -f UTF-16 -t UTF-8, or 'Save as UTF-8' in the editor)")
