"""Render a results file as one self-contained HTML audit report.

The page is built with Jinja2 with autoescaping on (documents are untrusted): every
string from the results reaches the page as escaped text, highlights are drawn by
splitting the sanitized text at their offsets (never by injecting markup), and the
charts are inline SVG whose geometry is computed here. There is no external
resource: CSS and the few lines of table-sorting script are inline, so the file
opens offline and can be attached to an e-mail.

Sections: verdict (gate checks when thresholds are given, else the highest risks in
plain words), the privacy–utility picture, one section per attack, utility, a
bounded per-document drill-down per release, provenance and limitations.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, StrictUndefined

from audit import __version__
from audit.core.files import atomic_write
from audit.core.registry import Registry, normalise
from audit.core.registry import registry as default_registry
from audit.core.results import Finding, Highlight, Result, ResultsFile, grouped_warnings
from reports.shareable import shareable as make_shareable

TEMPLATES = Path(__file__).parent / "templates"
PALETTE = ("#1f5f8b", "#b5542d", "#3a7d44", "#7a4f9a", "#8a6d1d", "#4a5560", "#2b8a8a", "#a23b62")
PREFERRED_UTILITY = ("tpi", "tps")
MAX_TEXT = 20_000
# Bidirectional-text controls would reorder what surrounds them: show them as visible codes.
BIDI_CONTROLS = {c: f"[U+{ord(c):04X}]" for c in
                 "\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"}
_BIDI_TABLE = str.maketrans(BIDI_CONTROLS)


# --------------------------------------------------------------------------- small helpers


def pct(x: float | None, digits: int = 1) -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    return f"{100 * x:.{digits}f}%"


def num(x: Any, digits: int = 3) -> str:
    if x is None:
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return f"{x:.{digits}g}" if abs(x) < 1e4 else f"{x:.3e}"
    return str(x)


_ACRONYMS = {"trir": "TRIR", "tpi": "TPI", "tps": "TPS", "nmi": "NMI", "bm25": "BM25", "llm": "LLM",
             "ner": "NER", "rouge": "ROUGE-L", "top5": "top-5", "ngram": "n-gram"}


def title_of(name: str) -> str:
    """``span_guess`` -> ``Span guess``, ``trir.top5`` -> ``TRIR: top-5`` (how result names are shown)."""
    parts = []
    for part in name.split("."):
        words = [_ACRONYMS.get(w.lower(), w) for w in part.replace("-", "_").split("_") if w]
        parts.append(" ".join(words))
    t = ": ".join(p for p in parts if p)
    return t[:1].upper() + t[1:] if t else name


def visible(text: str) -> str:
    """Text with bidirectional controls made visible (so they cannot reorder the page)."""
    return text.translate(_BIDI_TABLE)


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


# --------------------------------------------------------------------------- charts


@dataclass
class Chart:
    """Geometry of an inline SVG chart, computed here and drawn by the template."""

    width: int
    height: int
    kind: str
    x_label: str
    y_label: str
    x_ticks: list[tuple[float, str]] = field(default_factory=list)
    y_ticks: list[tuple[float, str]] = field(default_factory=list)
    items: list[dict[str, Any]] = field(default_factory=list)
    legend: list[tuple[str, str]] = field(default_factory=list)
    labels: list[dict[str, Any]] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    plot: tuple[int, int, int, int] = (0, 0, 0, 0)  # left, top, right, bottom


def _nice_max(values: Sequence[float]) -> float:
    top = max([v for v in values if v is not None] or [0.0])
    if top <= 0:
        return 0.1
    if top > 1:
        return float(math.ceil(top))
    return min(1.0, math.ceil(top * 10 + 1e-9) / 10)


def _ticks(lo: float, hi: float, fmt) -> list[tuple[float, str]]:
    step = (hi - lo) / 5
    return [(lo + i * step, fmt(lo + i * step)) for i in range(6)]


def scatter_chart(attacks: list[Result], utility: list[Result], metric: str, colors: dict[str, str]) -> Chart | None:
    """Risk of each attack (y) against one utility metric (x), one point per release."""
    util = {r.release: r for r in utility if r.name == metric}
    pts = [(a, util[a.release]) for a in attacks if a.release in util]
    if not pts:
        return None
    w, h = 900, 400
    left, top, right, bottom = 64, 20, w - 20, h - 52
    xs = [u.value for _, u in pts] + [c for _, u in pts if u.ci for c in u.ci]
    x_lo, x_hi = (0.0, 1.0) if all(0 <= x <= 1 for x in xs) else (min(xs), max(xs) or 1.0)
    if x_hi - x_lo < 1e-9:
        x_lo, x_hi = x_lo - 0.5, x_hi + 0.5
    y_hi = _nice_max([a.ci[1] if a.ci else a.value for a, _ in pts])

    def sx(x: float) -> float:
        return left + (x - x_lo) / (x_hi - x_lo) * (right - left)

    def sy(y: float) -> float:
        return bottom - max(0.0, min(y, y_hi)) / y_hi * (bottom - top)

    chart = Chart(w, h, "scatter", f"Utility: {metric.upper() if len(metric) <= 4 else title_of(metric)} (higher keeps more)", "Risk (higher is worse)",
                  plot=(left, top, right, bottom))
    fmt_x = (lambda v: f"{v:.1f}") if x_hi - x_lo <= 1 else (lambda v: f"{v:.3g}")
    chart.x_ticks = [(sx(v), t) for v, t in _ticks(x_lo, x_hi, fmt_x)]
    chart.y_ticks = [(sy(v), pct(v, 0)) for v, t in _ticks(0.0, y_hi, str)]
    seen_labels: dict[str, tuple[float, float]] = {}
    for a, u in pts:
        cx, cy = sx(u.value), sy(a.value)
        item = {"cx": cx, "cy": cy, "color": colors[a.name],
                "title": f"{a.name} on {a.release}: risk {pct(a.value)}"
                         f"{' (95% CI ' + pct(a.ci[0]) + '–' + pct(a.ci[1]) + ')' if a.ci else ''}; "
                         f"{metric} {num(u.value)}"}
        if a.ci:
            item["y1"], item["y2"] = sy(a.ci[0]), sy(a.ci[1])
        if u.ci:
            item["x1"], item["x2"] = sx(u.ci[0]), sx(u.ci[1])
        chart.items.append(item)
        if a.release not in seen_labels or cy < seen_labels[a.release][1]:
            seen_labels[a.release] = (cx, cy)
    chart.labels = [{"x": x + 7, "y": y - 7, "text": visible(rel)} for rel, (x, y) in seen_labels.items()]
    chart.legend = [(title_of(n), c) for n, c in colors.items() if any(a.name == n for a, _ in pts)]
    return chart


def forest_chart(attacks: list[Result], releases: list[str], colors: dict[str, str]) -> Chart | None:
    """Each attack's risk with its CI and baseline, grouped by release (always drawable)."""
    if not attacks:
        return None
    names = list(colors)
    row_h, gap = 16, 12
    w = 900
    left, right = 190, w - 30
    rows: list[dict[str, Any]] = []
    y = 24
    x_hi = _nice_max([a.ci[1] if a.ci else a.value for a in attacks] + [a.baseline or 0 for a in attacks])

    def sx(x: float) -> float:
        return left + max(0.0, min(x, x_hi)) / x_hi * (right - left)

    for rel in releases:
        group = [a for n in names for a in attacks if a.name == n and a.release == rel]
        if not group:
            continue
        rows.append({"group": visible(rel), "y": y + 4})
        y += row_h
        for a in group:
            row = {"label": title_of(a.name), "y": y + row_h / 2, "cx": sx(a.value), "color": colors[a.name],
                   "title": f"{a.name} on {rel}: {pct(a.value)}"
                            + (f" (95% CI {pct(a.ci[0])}–{pct(a.ci[1])})" if a.ci else "")
                            + (f", baseline {pct(a.baseline, 2)}" if a.baseline is not None else "")}
            if a.ci:
                row["x1"], row["x2"] = sx(a.ci[0]), sx(a.ci[1])
            if a.baseline is not None:
                row["bx"] = sx(a.baseline)
            rows.append(row)
            y += row_h
        y += gap
    h = int(y + 34)
    chart = Chart(w, h, "forest", "Risk (95% CI); tick = chance baseline", "", plot=(left, 14, right, h - 34))
    chart.x_ticks = [(sx(v), pct(v, 0)) for v, _ in _ticks(0.0, x_hi, str)]
    chart.rows = rows
    chart.legend = [(title_of(n), c) for n, c in colors.items()]
    return chart


# --------------------------------------------------------------------------- report model


def _risk_level(r: Result) -> tuple[str, str]:
    """(css class, words) for an attack result."""
    if r.n == 0:
        return "none", "no trials"
    if r.beats_baseline is False:
        return "none", "not shown"
    v = r.value
    if r.beats_baseline is None and r.baseline is None:
        level = "high" if v >= 0.5 else "elevated" if v >= 0.2 else "low"
        return level, {"high": "high", "elevated": "elevated", "low": "low"}[level]
    if v >= 0.5:
        return "high", "high"
    if v >= 0.2:
        return "elevated", "elevated"
    return "low", "low but real"


def _sentence(r: Result) -> str:
    ci = f" (95% CI {pct(r.ci[0])}–{pct(r.ci[1])})" if r.ci else ""
    if "successes" in r.details:  # a success rate (Result.from_risk)
        unit = str(r.details.get("unit") or "trials")
        s = f"{title_of(r.name)} succeeded on {pct(r.value)} of {r.n} {unit} in release “{visible(r.release)}”{ci}"
    else:  # a score averaged over documents (leakage, similarity): not a count of successes
        unit = str(r.details.get("unit") or "documents")
        s = f"{title_of(r.name)} averaged {pct(r.value)} over {r.n} {unit} in release “{visible(r.release)}”{ci}"
    if r.baseline is not None:
        s += f", against {pct(r.baseline, 2)} by chance" if r.beats_baseline else \
             f": not distinguishable from chance ({pct(r.baseline, 2)})"
    samp = r.details.get("sampled")
    if isinstance(samp, Mapping) and samp.get("of"):
        s += f" — measured on a sample of {samp.get('documents')} of {samp.get('of')} documents"
    return s + "."


def _descriptions(names: list[str], rf: ResultsFile, registry: Registry) -> dict[str, str]:
    comps = rf.provenance.get("components") if isinstance(rf.provenance.get("components"), Mapping) else {}
    out: dict[str, str] = {}
    for name in names:
        desc = ""
        try:
            desc = getattr(registry.get("attack", name), "description", "") or ""
        except Exception:  # not installed or broken: fall back to what the results say
            desc = ""
        if not desc:
            for c in comps.values():
                if isinstance(c, Mapping) and normalise(str(c.get("name", ""))) == normalise(name):
                    desc = str(c.get("description") or "")
        if not desc:
            desc = next((str(r.details["description"]) for r in rf.results
                         if r.name == name and isinstance(r.details.get("description"), str)), "")
        out[name] = desc
    return out


def _is_headline(name: str) -> bool:
    """An attack's headline result is named after the attack; its further measures are
    ``attack.measure`` (see ``Attack.evaluate``: the headline comes first)."""
    return "." not in name


def _attack_groups(attacks: list[Result]) -> list[str]:
    """Result names in first-seen order (each attack's headline result comes first)."""
    seen: dict[str, None] = {}
    for r in attacks:
        seen.setdefault(r.name, None)
    return list(seen)


def _drilldown(rf: ResultsFile, release: str, texts: Mapping[str, str], limit: int, shareable: bool,
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
    (``provenance["releases"][NAME]["path"]``); releases whose file is gone are left out."""
    base = Path(results_path).resolve().parent
    releases = rf.provenance.get("releases")
    out: dict[str, dict[str, str]] = {}
    if not isinstance(releases, Mapping):
        return out
    for name, info in releases.items():
        if not isinstance(info, Mapping) or not isinstance(info.get("path"), str):
            continue
        path = base / info["path"]
        if not path.is_file():
            continue
        texts: dict[str, str] = {}
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    d = json.loads(line)
                    texts[str(d["id"])] = str(d["text"])
        out[str(name)] = texts
    return out


def build_context(rf: ResultsFile, *, shareable: bool = False, checks: Sequence[Any] | None = None,
                  texts: Mapping[str, Mapping[str, str]] | None = None, max_documents: int = 50,
                  title: str | None = None, registry: Registry | None = None,
                  notes: Sequence[str] = ()) -> dict[str, Any]:
    """Everything the template shows, as plain data (strings still unescaped)."""
    registry = registry or default_registry
    if shareable:
        rf = make_shareable(rf)
    prov = rf.provenance
    attacks = [r for r in rf.results if r.kind == "attack"]
    utility = [r for r in rf.results if r.kind == "utility"]
    releases = rf.releases
    names = _attack_groups(attacks)
    colors = {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}
    # Headline of each attack = its results, one per release.
    util_names = sorted({r.name for r in utility}, key=lambda n: (n not in PREFERRED_UTILITY,
                                                                  PREFERRED_UTILITY.index(n) if n in PREFERRED_UTILITY else 0, n))
    metric = util_names[0] if util_names else None
    scatter = scatter_chart(attacks, utility, metric, colors) if metric else None
    forest = forest_chart(attacks, releases, colors)
    descriptions = _descriptions(names, rf, registry)

    sections = []
    for n in names:
        rows = []
        for r in [r for r in attacks if r.name == n]:
            level, words = _risk_level(r)
            samp = r.details.get("sampled")
            rows.append({"release": visible(r.release), "value": pct(r.value), "raw": r.value,
                         "ci": f"{pct(r.ci[0])} – {pct(r.ci[1])}" if r.ci else "–",
                         "baseline": pct(r.baseline, 2) if r.baseline is not None else "–", "n": r.n,
                         "beats": r.beats_baseline, "level": level, "words": words,
                         "residual": pct(r.details.get("residual_risk")) if isinstance(
                             r.details.get("residual_risk"), (int, float)) else "–",
                         "sampled": f"{samp.get('documents')} of {samp.get('of')}"
                         if isinstance(samp, Mapping) and samp.get("of") else "",
                         "extra": [(k.replace("_", " "), num(v)) for k, v in r.details.items()
                                   if isinstance(v, (int, float)) and not isinstance(v, bool)
                                   and k not in ("residual_risk", "successes")][:6]})
        sections.append({"name": visible(n), "title": title_of(n), "description": visible(descriptions.get(n, "")),
                         "color": colors[n], "rows": rows, "anchor": "attack-" + _anchor(n)})

    util_rows = [{"name": visible(u.name), "release": visible(u.release), "value": num(u.value),
                  "ci": f"{num(u.ci[0])} – {num(u.ci[1])}" if u.ci else "–", "n": u.n} for u in utility]

    # The verdict speaks of each attack's headline risk; the measures an attack adds beside it
    # (``trir.top5``, ``claim_linker.leakage``, ``phrase_search.ngram_residual``) stay in its section.
    headline = [r for r in attacks if _is_headline(r.name)]
    risky = sorted([r for r in headline if r.beats_baseline or (r.baseline is None and r.value > 0)],
                   key=lambda r: (-r.value, r.name, r.release))
    findings = [{"level": _risk_level(r)[0], "words": _risk_level(r)[1], "sentence": _sentence(r)} for r in risky[:8]]
    quiet = [r for r in headline if r.beats_baseline is False]
    secondary = [visible(title_of(n)) for n in names if not _is_headline(n)]

    gate = None
    if checks:
        failed = [c for c in checks if not c.passed]
        gate = {"passed": not failed, "failed": len(failed), "total": len(checks),
                "rows": [{"title": visible(c.title), "release": visible(c.release), "bound": c.bound,
                          "compared": num(c.compared, 4), "passed": c.passed} for c in checks]}

    kinds: dict[str, str] = {}
    release_texts = texts or {}
    drill = [_drilldown(rf, rel, release_texts.get(rel, {}), max_documents, shareable, kinds) for rel in releases]
    drill = [d for d in drill if d["rows"]]

    # A component that doubts its own figure says so in ``details["warning"]``; the reader
    # sees it beside the verdict, not only in results.json.
    warnings = [f"{title_of(name)} on {', '.join(rels)}: {text}" for name, text, rels in grouped_warnings(rf.results)]
    skipped = [*(prov.get("skipped") or []), *(prov.get("errors") or [])]
    sampled_any = any(isinstance(r.details.get("sampled"), Mapping) for r in rf.results)
    return {
        "title": visible(title or str(prov.get("title") or "Privacy audit")),
        "generated": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "version": __version__, "shareable": shareable,
        "n_releases": len(releases), "n_attacks": len(names), "n_metrics": len(util_names),
        "releases": [visible(r) for r in releases],
        "gate": gate, "findings": findings, "n_quiet": len(quiet), "n_attack_results": len(attacks),
        "secondary": secondary,
        "scatter": scatter, "forest": forest, "metric": metric, "sections": sections, "util_rows": util_rows,
        "drill": drill, "max_documents": max_documents,
        "kinds": [{"kind": visible(k), "cls": c} for k, c in kinds.items()],
        "skipped": [{"component": visible(str(s.get("component", ""))), "reason": visible(str(s.get("reason", "")))}
                    for s in skipped if isinstance(s, Mapping)],
        "sampled_any": sampled_any, "notes": [visible(n) for n in [*notes, *warnings]],
        "prov": _provenance_view(prov),
    }


def _anchor(name: str) -> str:
    return "".join(c if c.isalnum() else "-" for c in name.lower())


def _short(h: Any) -> str:
    return f"{h[:12]}…" if isinstance(h, str) and len(h) > 12 else num(h)


def _provenance_view(prov: Mapping[str, Any]) -> dict[str, Any]:
    """Provenance as tables (runner layout) plus the full JSON for anything else."""
    facts = [(k, visible(num(prov.get(k)))) for k in ("tool", "version", "command", "started", "seconds", "seed",
                                                        "python", "platform") if prov.get(k) is not None]
    models = prov.get("models") if isinstance(prov.get("models"), Mapping) else {}
    facts += [(f"model: {k}", visible(str(v))) for k, v in models.items() if v]
    inputs = [{"role": visible(str(k)), "path": visible(str(v.get("path", ""))), "sha": _short(v.get("sha256")),
               "documents": num(v.get("documents"))}
              for k, v in (prov.get("inputs") or {}).items() if isinstance(v, Mapping)]
    releases = [{"name": visible(str(k)), "source": visible(str(v.get("sanitizer") or v.get("source") or "")),
                 "documents": num(v.get("documents")), "sha": _short(v.get("sha256"))}
                for k, v in (prov.get("releases") or {}).items() if isinstance(v, Mapping)]
    comps = [{"label": visible(str(k)), "params": visible(json.dumps(v.get("params", {}), sort_keys=True)[:400]),
              "fit": num(v.get("fit_seconds")),
              "stats": visible(json.dumps(v.get("stats"), sort_keys=True)[:300]) if v.get("stats") else "",
              "info": visible(json.dumps(v.get("provenance"), sort_keys=True)[:300]) if v.get("provenance") else ""}
             for k, v in (prov.get("components") or {}).items() if isinstance(v, Mapping)]
    pairs = [{"component": visible(str(v.get("component", ""))), "release": visible(str(v.get("release", ""))),
              "seconds": num(v.get("seconds")), "documents": num(v.get("documents"))}
             for v in (prov.get("pairs") or {}).values() if isinstance(v, Mapping)]
    return {"facts": facts, "inputs": inputs, "releases": releases, "components": comps, "pairs": pairs,
            "json": visible(json.dumps(prov, indent=1, ensure_ascii=False, default=str)[:200_000])}


# --------------------------------------------------------------------------- rendering


def environment() -> Environment:
    # finalize: every value printed by the template has its bidi controls made visible.
    env = Environment(loader=FileSystemLoader(str(TEMPLATES)), autoescape=True, undefined=StrictUndefined,
                      trim_blocks=True, lstrip_blocks=True,
                      finalize=lambda v: visible(v) if isinstance(v, str) else v)
    env.filters["f1"] = lambda x: f"{x:.1f}"
    return env


def render(rf: ResultsFile, **kwargs: Any) -> str:
    """The report as an HTML string (see :func:`build_context` for the options)."""
    return environment().get_template("report.html").render(**build_context(rf, **kwargs))


def write_report(path: str | os.PathLike, rf: ResultsFile, **kwargs: Any) -> Path:
    """Render and write atomically."""
    return atomic_write(path, render(rf, **kwargs))


__all__ = ["render", "write_report", "build_context", "load_release_texts", "segments"]
