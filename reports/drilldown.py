"""The per-document drill-down: each release's most exposed documents, with every attack's
outcome (hit or miss, from the typed findings) in a sentence, and the sanitized text marked with
the evidence of one attack at a time (the reader toggles between attacks)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from audit.core.errors import AnonauditError
from audit.core.results import Finding, Highlight, ResultsFile
from reports.formatting import title_of, visible

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
    marks = []
    for h in highlights:
        get = (lambda k, h=h: getattr(h, k, None)) if isinstance(h, Highlight) else h.get
        kind = str(get("kind") or "finding")
        note = get("note")
        marks.append((get("start"), get("end"), kinds.setdefault(kind, f"hl{len(kinds) % 6}"),
                      f"{kind}: {note}" if note else kind))
    return marked_segments(text, marks, first_only=True)


def marked_segments(text: str, marks: Sequence[tuple[Any, Any, str, str]], *,
                    first_only: bool = False) -> list[Segment]:
    """Split ``text`` at the offsets of ``marks`` = ``(start, end, css class, tooltip)``.

    A piece covered by several marks carries all their classes (or the first one's with
    ``first_only``) and all their tooltips. Offsets outside the text are clipped; empty or
    inverted ranges are ignored; neighbours marked alike are merged.
    """
    n = len(text)
    hs = []
    for s, e, cls, tip in marks:
        try:
            s, e = int(s), int(e)
        except (TypeError, ValueError):
            continue
        s, e = max(0, min(s, n)), max(0, min(e, n))
        if e > s:
            hs.append((s, e, cls, tip))
    if not hs:
        return [Segment(visible(text))]
    cuts = sorted({0, n, *[h[0] for h in hs], *[h[1] for h in hs]})
    out: list[Segment] = []
    for a, b in zip(cuts, cuts[1:]):
        cover = [h for h in hs if h[0] <= a and b <= h[1]]
        piece = visible(text[a:b])
        if not cover:
            out.append(Segment(piece))
            continue
        classes = [cover[0][2]] if first_only else list(dict.fromkeys(c for _, _, c, _ in cover))
        tips = list(dict.fromkeys(t for _, _, _, t in cover if t))
        out.append(Segment(piece, " ".join(classes), visible("; ".join(tips))))
    merged: list[Segment] = []
    for seg in out:
        if merged and merged[-1].cls == seg.cls and merged[-1].title == seg.title:
            merged[-1] = Segment(merged[-1].text + seg.text, seg.cls, seg.title)
        else:
            merged.append(seg)
    return merged


def _base(name: str) -> str:
    return name.split(".", 1)[0]


def drilldown(rf: ResultsFile, release: str, texts: Mapping[str, str], limit: int,
              attacks: Sequence[str]) -> dict[str, Any]:
    """The drill-down of one release: its ``limit`` most exposed documents (most attacks that
    succeeded first), each with one cell per attack in ``attacks`` (headline names, in the
    order that fixes their colours) and its text marked with every attack's evidence, each
    attack's marks carrying the class ``a<i>`` (``x<i>`` when the evidence was found while
    attacking another document)."""
    index = {a: i for i, a in enumerate(attacks)}
    by_doc: dict[str, dict[str, Any]] = {}

    def entry(doc_id: str) -> dict[str, Any]:
        return by_doc.setdefault(doc_id, {"id": doc_id, "head": {}, "sub": {}, "marks": [], "foreign": {},
                                          "text": None})

    for r in rf.results:
        if r.kind != "attack" or r.release != release or _base(r.name) not in index:
            continue
        i = index[_base(r.name)]
        for d in r.documents:
            if not d.id:
                continue
            e = entry(d.id)
            if r.name == attacks[i]:
                e["head"][i] = d
                target = d.highlights_in or d.id
                if d.highlights:
                    t = entry(target)
                    foreign = target != d.id
                    cls = f"x{i}" if foreign else f"a{i}"
                    for h in d.highlights:
                        note = h.note or h.kind
                        if foreign:
                            note = f"from the attack on {d.id}: {note}"
                        t["marks"].append((h.start, h.end, cls, f"{title_of(attacks[i])}: {note}"))
                    if foreign:
                        t["foreign"].setdefault(i, []).append(d)
            else:
                e["sub"].setdefault(i, []).append((r.name, d))
            t = d.facts.get("sanitized_text", d.facts.get("text"))  # the shareable edition has dropped "text"
            if e["text"] is None and isinstance(t, str):
                e["text"] = t
    if not by_doc:
        return {"release": visible(release), "rows": [], "total": 0, "shown": 0}
    for doc_id, e in by_doc.items():
        if doc_id in texts:
            e["text"] = texts[doc_id]
        e["hits"] = sum(1 for d in e["head"].values() if d.success)
    # Attacked documents, and documents that only hold evidence found while attacking another one.
    attacked = [e for e in by_doc.values() if e["head"] or e["marks"]]
    ordered = sorted(attacked, key=lambda e: (-e["hits"], -len(e["marks"]), e["id"]))
    rows = [_row(e, attacks) for e in ordered[:limit]]
    return {"release": visible(release), "rows": rows, "total": len(attacked), "shown": len(rows),
            "exposed": sum(1 for e in attacked if e["hits"])}


def _row(e: dict[str, Any], attacks: Sequence[str]) -> dict[str, Any]:
    text = e["text"] or ""
    cells = []
    marked = {int(c[1:]) for _, _, c, _ in e["marks"]}
    for i, name in enumerate(attacks):
        d: Finding | None = e["head"].get(i)
        state = "na" if d is None else {True: "hit", False: "miss", None: "info"}[d.success]
        word = {"na": "not attacked", "hit": "hit", "miss": "miss", "info": "not scored"}[state]
        sentence = "" if d is None else (d.summary or {True: "The attack succeeded on this document.",
                                                        False: "The attack did not succeed on this document.",
                                                        None: "Not scored."}[d.success])
        more = [f"{title_of(sub)}: {f.summary}" for sub, f in e["sub"].get(i, []) if f.summary]
        foreign = [f.id for f in e["foreign"].get(i, [])]
        cells.append({"i": i, "name": title_of(name), "state": state, "word": word, "sentence": visible(sentence),
                      "more": [visible(m) for m in more], "foreign": [visible(f) for f in foreign],
                      "marked": i in marked})
    show = next((c["i"] for c in cells if c["marked"] and c["state"] == "hit"),
                next((c["i"] for c in cells if c["marked"]), 0))
    return {"id": visible(e["id"]), "hits": e["hits"], "cells": cells, "show": show, "open": False,
            "n_marks": len(e["marks"]), "segments": marked_segments(text[:MAX_TEXT], e["marks"]) if text else [],
            "truncated": len(text) > MAX_TEXT, "length": len(text)}


def load_release_texts(results_path: str | os.PathLike, rf: ResultsFile) -> dict[str, dict[str, str]]:
    """Sanitized texts of each release, from the copies the runner wrote beside the results
    (``provenance["releases"][NAME]["path"]``), read and checked by
    :func:`audit.core.bundle.release_copies`: a copy that is missing, or whose sha256 is not the
    one recorded (edited, truncated, another release's), is refused with an
    :class:`AnonauditError` naming it (its texts would not match the findings' offsets); so is a
    recorded path outside the results folder (a crafted results file must not pull other files
    of the machine into a report)."""
    from audit.core.bundle import release_copies

    copies = release_copies(results_path, rf.provenance)
    base = Path(results_path).resolve().parent
    out: dict[str, dict[str, str]] = {}
    for name, info in (rf.provenance.get("releases") or {}).items():
        data = copies.get(info.get("path")) if isinstance(info, Mapping) else None
        if data is None:
            continue
        path = Path(os.path.normpath(base / info["path"]))
        texts: dict[str, str] = {}
        for n, line in enumerate(data.decode("utf-8", errors="replace").split("\n"), 1):
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
