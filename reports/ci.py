"""The gate's checks in the formats CI systems show: GitHub Actions workflow annotations and a
job summary, and a GitLab Code Quality report.

What goes out follows the shareable edition's rules (:mod:`reports.shareable`): a check names its
threshold, release, compared bound and status, and an inconclusive check the component's own
warning (a doubt about its figure that never quotes a document). Exposed documents are counted,
and named only by their shareable pseudonym (``D01``...) unless ``keep_ids``: an id can be a
person's name or a case number. A release named after its file (``john_smith.jsonl``) is named
by its pseudonym too (``R1``...: :func:`renamed`), as in the shareable report. No original text, span, guess or predicted identity, and no file
path but the results file's own as the user gave it (GitLab needs a location).

- :func:`github_annotations`: one ``::error`` line per failing check and one ``::warning`` per
  inconclusive check (GitHub turns them into annotations on the run and the pull request); the
  values are escaped as GitHub's workflow commands require, so a release name cannot end the
  command or start another one.
- :func:`markdown_summary`: a Markdown job summary (``$GITHUB_STEP_SUMMARY``), with every string
  from the results escaped for Markdown and HTML.
- :func:`gitlab_codequality`: GitLab's Code Quality JSON (``description``, ``check_name``,
  ``fingerprint``, ``severity``, ``location.path``/``location.lines.begin``), one issue per
  failing or inconclusive check, the fingerprint stable across runs so GitLab can tell a new
  finding from one that persists or was fixed.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from audit.core.checks import FAIL, INCONCLUSIVE, PASS, Check
from reports.formatting import title_of, visible

#: How many exposed documents a check names (by pseudonym) in the job summary.
MAX_NAMED = 10
#: Code Quality severity of each status (GitLab: info, minor, major, critical, blocker).
SEVERITY = {FAIL: "critical", INCONCLUSIVE: "minor"}


def renamed(checks: Sequence[Check], names: Mapping[str, str]) -> list[Check]:
    """The checks with each release named as the shareable edition names it (``names``:
    :func:`reports.shareable.release_pseudonyms`; empty keeps every name)."""
    from dataclasses import replace

    return [replace(c, release=names.get(c.release, c.release)) for c in checks]


def _interval(c: Check) -> str:
    r = c.result
    if r is None:
        return "no result on this release"
    ci = "" if r.ci is None else f", 95% CI [{r.ci[0]:.3g}, {r.ci[1]:.3g}]"
    return f"value {r.value:.3g}{ci}, n = {r.n}"


def _exposed(c: Check) -> list[str]:
    """The ids of the documents the check's attack succeeded on (none for a utility)."""
    if c.result is None or c.result.kind != "attack":
        return []
    return [d.id for d in c.result.documents if d.success]


def _names(ids: Sequence[str], names: Mapping[str, str] | None) -> list[str]:
    return [names.get(i, i) if names is not None else i for i in ids]


def describe(c: Check) -> str:
    """One sentence: the check's verdict with the figure's interval and n."""
    return visible(f"{c.message}; {_interval(c)}")


# --------------------------------------------------------------------------- GitHub Actions


def _data(text: str) -> str:
    """A workflow command's message, escaped as GitHub requires."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _prop(text: str) -> str:
    """A workflow command's property value (``title=...``), escaped as GitHub requires."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def github_annotations(checks: Sequence[Check]) -> list[str]:
    """``::error title=...::message`` per failing check, ``::warning`` per inconclusive one."""
    lines = []
    for c in checks:
        if c.status == PASS:
            continue
        level = "error" if c.status == FAIL else "warning"
        hits = _exposed(c)
        extra = f"; {len(hits)} of {len(c.result.documents)} documents exposed" if hits and c.result else ""
        title = f"anonaudit gate: {c.title} on {c.release}"
        lines.append(f"::{level} title={_prop(visible(title))}::{_data(describe(c) + extra)}")
    return lines


def _md(text: Any) -> str:
    """A Markdown table cell: HTML specials, pipes, backslashes, emphasis and line breaks escaped."""
    out = visible(str(text)).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for ch in "\\|*_`[]#":
        out = out.replace(ch, "\\" + ch)
    return " ".join(out.split())


def markdown_summary(checks: Sequence[Check], *, names: Mapping[str, str] | None = None,
                     title: str = "anonaudit gate") -> str:
    """A Markdown job summary: the verdict first, then one row per check, then the exposed
    documents of each failing check by pseudonym (``names``: id -> pseudonym; None keeps ids)."""
    failed = [c for c in checks if c.status == FAIL]
    unsure = [c for c in checks if c.status == INCONCLUSIVE]
    verdict = ("FAIL" if failed else "INCONCLUSIVE" if unsure else "PASS")
    icon = {"FAIL": ":x:", "INCONCLUSIVE": ":warning:", "PASS": ":white_check_mark:"}[verdict]
    lines = [f"## {_md(title)}: {icon} {verdict}", "",
             f"{len(failed)} failed, {len(unsure)} inconclusive, "
             f"{sum(c.status == PASS for c in checks)} passed, of {len(checks)} check(s). A risk fails when the "
             "cautious end of its 95% interval crosses the threshold.", "",
             "| status | check | release | compared | figure | documents exposed |",
             "|---|---|---|---|---|---|"]
    for c in checks:
        r = c.result
        hits = _exposed(c)
        exposed = f"{len(hits)} of {len(r.documents)}" if r and r.kind == "attack" and r.documents else "–"
        figure = "no result" if r is None else f"{r.value:.3g}" + \
            ("" if r.ci is None else f" [{r.ci[0]:.3g}, {r.ci[1]:.3g}]") + f", n = {r.n}"
        compared = c.bound if r is None else f"{c.compared:.3g} ({c.bound})"
        lines.append(f"| {c.status.upper()} | {_md(title_of(c.threshold.name))} {_md(c.threshold.symbol)} "
                     f"{c.threshold.value:g} | {_md(c.release)} | {compared} | {figure} | {exposed} |")
    for c in unsure:
        lines += ["", f"**Inconclusive**, {_md(c.threshold.name)} on {_md(c.release)}: {_md(c.reason)}"]
    for c in failed:
        hits = _names(_exposed(c), names)
        if hits:
            more = f" and {len(hits) - MAX_NAMED} more" if len(hits) > MAX_NAMED else ""
            lines += ["", f"Exposed by {_md(c.threshold.name)} on {_md(c.release)}: "
                          + ", ".join(_md(h) for h in hits[:MAX_NAMED]) + more]
    if names is not None:
        lines += ["", "_Documents are named by pseudonym (as in the shareable report); `--keep-ids` shows their "
                      "ids._"]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- GitLab Code Quality


def gitlab_codequality(checks: Sequence[Check], *, path: str) -> list[dict[str, Any]]:
    """GitLab Code Quality issues, one per failing or inconclusive check, located at ``path``
    (the results file, as the job names it)."""
    issues = []
    for c in checks:
        if c.status == PASS:
            continue
        check_name = f"anonaudit-gate/{c.threshold.name}"
        kind = "" if c.result is None else c.result.kind
        key = json.dumps([c.threshold.name, c.threshold.side, c.release, kind], ensure_ascii=True)
        hits = _exposed(c)
        extra = f"; {len(hits)} of {len(c.result.documents)} documents exposed" if hits and c.result else ""
        issues.append({"type": "issue", "check_name": check_name, "description": describe(c) + extra,
                       "categories": ["Security"], "severity": SEVERITY[c.status],
                       "fingerprint": hashlib.sha256(key.encode()).hexdigest(),
                       "location": {"path": path, "lines": {"begin": 1}}})
    return issues


def gitlab_json(checks: Sequence[Check], *, path: str) -> str:
    return json.dumps(gitlab_codequality(checks, path=path), indent=2, ensure_ascii=False) + "\n"
