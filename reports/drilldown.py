"""The per-document drill-down: each release's documents with the findings of every attack,
and the sanitized text split into plain and highlighted segments."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.core.errors import AnonauditError
from audit.core.files import sha256_file
from audit.core.results import Finding, Highlight, ResultsFile
from reports.formatting import num, title_of, visible

MAX_TEXT = 20_000


@dataclass
class Segment:
    text: str
    cls: str = ""
    title: str = ""


def segments(text: str, highlights: Sequence[Highlight | Mapping[str, Any]], kinds: dict[str, str]) -> list[Segment]:
    """Split ``text`` at highlight offsets into plain and marked segments.

    Overlapping highlights are flattened: each piece of text is marked with the
    first highlight covering it, and its tooltip lists all of them. Offsets outside
    the text are clipped; empty or inverted ranges are ignored.
    """
    n = len(text)
    hs = []
    for h in highlights:
        get = (lambda k, h=h: getattr(h, k, None)) if isinstance(h, Highlight) else h.get
        try:
            s, e = int(get("start")), int(get("end"))
        except (TypeError, ValueError):
            continue
        s, e = max(0, min(s, n)), max(0, min(e, n))
        if e > s:
            kind = str(get("kind") or "finding")
            note = get("note")
            hs.append((s, e, kind, "" if note is None else str(note)))
    if not hs:
        return [Segment(visible(text))]
    cuts = sorted({0, n, *[h[0] for h in hs], *[h[1] for h in hs]})
    out: list[Segment] = []
    for a, b in zip(cuts, cuts[1:]):
        cover = [h for h in hs if h[0] <= a and b <= h[1]]
        piece = visible(text[a:b])
        if not cover:
            out.append(Segment(piece))
        else:
            first = cover[0][2]
            tip = "; ".join(f"{k}: {note}" if note else k for _, _, k, note in cover)
            out.append(Segment(piece, kinds.setdefault(first, f"hl{len(kinds) % 6}"), visible(tip)))
    # Merge neighbours with the same mark (fewer elements, same page).
    merged: list[Segment] = []
    for seg in out:
        if merged and merged[-1].cls == seg.cls and merged[-1].title == seg.title:
            merged[-1] = Segment(merged[-1].text + seg.text, seg.cls, seg.title)
        else:
            merged.append(seg)
    return merged


def _facts(finding: Finding, limit: int = 6) -> list[tuple[str, str]]:
    """The first short facts of a finding (numbers, booleans, short strings), for its cell."""
    out = []
    for k, v in finding.facts.items():
        if k in ("text", "sanitized_text"):
            continue
        if isinstance(v, (bool, int, float)) or (isinstance(v, str) and len(v) <= 200):
            out.append((k.replace("_", " "), visible(num(v))))
        if len(out) >= limit:
            break
    return out


def drilldown(rf: ResultsFile, release: str, texts: Mapping[str, str], limit: int, shareable: bool,
               kinds: dict[str, str]) -> dict[str, Any]:
    by_doc: dict[str, dict[str, Any]] = {}
    names: list[str] = []
    for r in rf.results:
        if r.release != release or not r.documents:
            continue
        if r.name not in names:
            names.append(r.name)
        for d in r.documents:
            doc_id = d.id
            if not doc_id:
                continue
            entry = by_doc.setdefault(doc_id, {"id": doc_id, "findings": {}, "highlights": [], "text": None})
            entry["findings"][r.name] = d
            # Evidence may lie in another released document (the claim linker marks the
            # document it linked to, which for a wrong link is not this one): it is drawn
            # on that document only, never on the finding's own.
            if d.highlights:
                target_id = d.highlights_in or doc_id
                target = by_doc.setdefault(target_id, {"id": target_id, "findings": {}, "highlights": [],
                                                       "text": None})
                target["highlights"].extend(d.highlights)
            t = d.facts.get("sanitized_text")
            if t is None and not shareable:
                t = d.facts.get("text")
            if entry["text"] is None and isinstance(t, str):
                entry["text"] = t
    if not by_doc:
        return {"release": release, "rows": [], "names": [], "total": 0}
    for doc_id, entry in by_doc.items():
        if doc_id in texts:
            entry["text"] = texts[doc_id]
        entry["hits"] = sum(1 for d in entry["findings"].values() if d.success)
    ordered = sorted(by_doc.values(), key=lambda e: (-e["hits"], -len(e["highlights"]), e["id"]))
    rows = []
    for e in ordered[:limit]:
        text = e["text"] or ""
        truncated = len(text) > MAX_TEXT
        cells = []
        for n in names:
            d = e["findings"].get(n)
            if d is None:
                cells.append({"state": "na", "word": "–", "facts": [], "summary": "", "sort": -1})
            else:
                s = d.success
                cells.append({"state": {True: "hit", False: "miss", None: "info"}[s],
                              "word": {True: "hit", False: "miss", None: "·"}[s], "facts": _facts(d),
                              "summary": visible(d.summary), "sort": {True: 2, False: 0, None: 1}[s]})
        rows.append({"id": visible(e["id"]), "hits": e["hits"], "cells": cells,
                     "n_highlights": len(e["highlights"]),
                     "segments": segments(text[:MAX_TEXT], e["highlights"], kinds) if text else [],
                     "truncated": truncated, "length": len(text)})
    return {"release": visible(release), "rows": rows, "names": [title_of(n) for n in names], "total": len(by_doc)}


def load_release_texts(results_path: str | os.PathLike, rf: ResultsFile) -> dict[str, dict[str, str]]:
    """Sanitized texts of each release, from the files the runner wrote beside the results
    (``provenance["releases"][NAME]["path"]``); releases whose file is gone are left out.
    A file whose sha256 is not the one recorded (edited, truncated, another release's) is
    refused with an :class:`AnonauditError`: its texts would not match the findings' offsets;
    so is a recorded path outside the results folder (a crafted results file must not pull
    other files of the machine into a report)."""
    base = Path(results_path).resolve().parent
    releases = rf.provenance.get("releases")
    out: dict[str, dict[str, str]] = {}
    if not isinstance(releases, Mapping):
        return out
    for name, info in releases.items():
        if not isinstance(info, Mapping) or not isinstance(info.get("path"), str):
            continue
        path = Path(os.path.normpath(base / info["path"]))  # lexically: a link inside the folder is fine
        if not path.is_relative_to(base):  # the runner writes copies beside the results, never elsewhere
            raise AnonauditError(f"{results_path}: the copy of release {name!r} is recorded at {info['path']!r}, "
                                 "outside the results folder; a results file never points there")
        if not path.is_file():
            continue
        recorded = info.get("sha256")
        if isinstance(recorded, str) and sha256_file(path) != recorded:
            raise AnonauditError(f"{path}: the copy of release {name!r} was changed after the audit wrote it "
                                 f"(its sha256 is not the one recorded in {results_path}); the report would "
                                 "show the wrong text. Run the audit again to rewrite it.")
        texts: dict[str, str] = {}
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    d = json.loads(line)
                    texts[str(d["id"])] = str(d["text"])
                except (ValueError, KeyError, TypeError) as exc:
                    raise AnonauditError(f"{path}:{n}: damaged copy of release {name!r} "
                                         f"({type(exc).__name__}: {exc}); run the audit again") from None
        out[str(name)] = texts
    return out
