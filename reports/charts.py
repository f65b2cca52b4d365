"""The charts of the report: the geometry of the inline SVG (privacy against utility, and
each attack's risk with its interval), computed here and drawn by the template."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from audit.core.results import Result
from reports.formatting import num, pct, title_of, visible


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
    #: Arrows from a release to its next hardening round (``NAME`` -> ``NAME.harden1`` -> ...).
    paths: list[dict[str, Any]] = field(default_factory=list)
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


# --------------------------------------------------------------------------- privacy–utility (Pareto)

#: Label geometry: a conservative width per character at the chart's 12px label font, so boxes
#: computed here contain the text a browser draws (the browser test measures the real boxes).
LABEL_FONT = 12
CHAR_W = 7.4
LABEL_H = 15
TIE_PX = 5.0  # points closer than this (in pixels) are a tie: spread and named together


@dataclass
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def overlaps(self, o: Box, pad: float = 2.0) -> bool:
        return not (self.x1 + pad <= o.x0 or o.x1 + pad <= self.x0 or self.y1 + pad <= o.y0 or o.y1 + pad <= self.y0)


def label_box(x: float, y: float, text: str, anchor: str) -> Box:
    """The box of a label drawn at baseline ``(x, y)`` with ``text-anchor`` ``anchor``."""
    w = CHAR_W * len(text)
    x0 = x - w if anchor == "end" else x
    return Box(x0, y - LABEL_H + 3, x0 + w, y + 4)


def place_labels(points: list[tuple[float, float, str]], area: tuple[float, float, float, float],
                 obstacles: Sequence[Box] = ()) -> list[dict[str, Any]]:
    """Positions for one label per point ``(x, y, text)`` such that no two labels overlap, no
    label covers a point or an ``obstacle`` (other drawn points), and every label stays inside
    ``area`` (left, top, right, bottom).
    Candidates are tried nearest first (right, left, above, below, then further out with a
    leader line); a label that finds no free place goes below the plot, stacked."""
    left, top, right, bottom = area
    placed: list[Box] = []
    marks = [Box(x - 6, y - 6, x + 6, y + 6) for x, y, _ in points] + list(obstacles)
    out: list[dict[str, Any]] = []
    order = sorted(range(len(points)), key=lambda i: (points[i][1], points[i][0]))
    chosen: dict[int, dict[str, Any]] = {}
    for i in order:
        x, y, text = points[i]
        cands = [(x + 9, y + 4, "start"), (x - 9, y + 4, "end"), (x - CHAR_W * len(text) / 2, y - 10, "start"),
                 (x - CHAR_W * len(text) / 2, y + 19, "start")]
        for step in range(1, 9):
            for dy in (-LABEL_H * step, LABEL_H * step):
                cands += [(x + 14, y + 4 + dy, "start"), (x - 14, y + 4 + dy, "end")]
        pick = None
        for cx, cy, anchor in cands:
            b = label_box(cx, cy, text, anchor)
            if b.x0 < left or b.x1 > right or b.y0 < top or b.y1 > bottom:
                continue
            if any(b.overlaps(p) for p in placed) or any(b.overlaps(m, 0) for m in marks):
                continue
            pick = (cx, cy, anchor, b)
            break
        if pick is None:  # below the plot, one per line
            cy = bottom + 60 + LABEL_H * sum(1 for c in chosen.values() if c.get("overflow"))
            pick = (left, cy, "start", label_box(left, cy, text, "start"))
        cx, cy, anchor, b = pick
        placed.append(b)
        far = abs(cy - 4 - y) > LABEL_H or abs((b.x0 if anchor == "start" else b.x1) - x) > 16
        chosen[i] = {"x": cx, "y": cy, "anchor": anchor, "text": text, "box": b,
                     "leader": far, "px": x, "py": y, "overflow": cy > bottom,
                     "lx": b.x0 if anchor == "start" else b.x1, "ly": cy - 4}
    out = [chosen[i] for i in range(len(points))]
    return out


def pareto_chart(heads: list[Result], utility: list[Result], metric: str, risk_of: str | None,
                 releases: list[str]) -> Chart | None:
    """One point per release: its risk (``risk_of`` = an attack's headline result, or ``None``
    for the highest headline risk of any attack on that release) against utility ``metric``.
    Releases with the same position are a tie: their points are spread side by side and
    named in one label. The Pareto front (no other release both safer and more useful) is
    joined by a line."""
    pts = _pareto_points(heads, utility, metric, risk_of, releases)
    if not pts:
        return None
    w, h = 900, 420
    left, top, right, bottom = 64, 16, w - 24, h - 64
    x_lo, x_hi, y_lo, y_hi = _pareto_ranges(pts)

    def sx(x: float) -> float:
        return left + (x - x_lo) / (x_hi - x_lo) * (right - left)

    def sy(y: float) -> float:
        return bottom - (max(y_lo, min(y, y_hi)) - y_lo) / (y_hi - y_lo) * (bottom - top)

    mname = metric.upper() if len(metric) <= 4 else title_of(metric)
    rname = "highest risk of any attack" if risk_of is None else title_of(risk_of)
    chart = Chart(w, h, "pareto", f"Utility: {mname} (further right keeps more)",
                  f"Risk: {rname} (lower is safer)", plot=(left, top, right, bottom))
    fmt_x = (lambda v: f"{v:.2f}") if x_hi - x_lo <= 1 else (lambda v: f"{v:.3g}")
    chart.x_ticks = [(sx(v), t) for v, t in _ticks(x_lo, x_hi, fmt_x)]
    chart.y_ticks = [(sy(v), pct(v, 0)) for v, _ in _ticks(y_lo, y_hi, str)]
    front = _pareto_front([(u.value, a.value) for _, a, u in pts])
    label_points = _pareto_items(chart, pts, _tie_groups(pts, sx, sy), front, metric, sx, sy)
    dots = [Box(it["cx"] - 6, it["cy"] - 6, it["cx"] + 6, it["cy"] + 6) for it in chart.items]
    chart.labels = place_labels(label_points, (left + 2, top, right, bottom - 2), dots)
    extra = max((lab["y"] for lab in chart.labels if lab["overflow"]), default=0)
    if extra:
        chart.height = int(extra + 64)
    fr = sorted((sx(pts[i][2].value), sy(pts[i][1].value)) for i in front)
    chart.rows = [{"x1": a[0], "y1": a[1], "x2": b[0], "y2": b[1]} for a, b in zip(fr, fr[1:])]
    chart.legend = [("Pareto front: no other release is both safer and more useful", "#1f5f8b"),
                    ("dominated", "#7d8790")]
    chart.paths = harden_paths({rel: (it["cx"], it["cy"]) for (rel, _, _), it in zip(pts, chart.items)})
    if chart.paths:
        chart.legend.append(("hardening rounds (anonaudit harden), from the input to the last round", PATH_COLOR))
    return chart


def _pareto_points(heads: list[Result], utility: list[Result], metric: str, risk_of: str | None,
                   releases: list[str]) -> list[tuple[str, Result, Result]]:
    """``(release, risk result, utility result)`` for each release that has both."""
    util = {r.release: r for r in utility if r.name == metric}
    pts: list[tuple[str, Result, Result]] = []
    for rel in releases:
        cand = [a for a in heads if a.release == rel and (risk_of is None or a.name == risk_of)]
        if rel not in util or not cand:
            continue
        a = max(cand, key=lambda r: (r.value, r.name))
        pts.append((rel, a, util[rel]))
    return pts


def _pareto_ranges(pts: list[tuple[str, Result, Result]]) -> tuple[float, float, float, float]:
    """``(x_lo, x_hi, y_lo, y_hi)``: the utility axis with a margin (kept within [0, 1] when
    every value is), and the risk axis from 0, zoomed in when every risk is above 30%."""
    xs = [u.value for _, _, u in pts] + [c for _, _, u in pts if u.ci for c in u.ci]
    lo, hi = min(xs), max(xs)
    pad = max(0.05, (hi - lo) * 0.15)
    x_lo, x_hi = lo - pad, hi + pad
    if all(0 <= x <= 1 for x in xs):
        x_lo, x_hi = max(0.0, x_lo), min(1.0, x_hi)
    y_hi = _nice_max([a.ci[1] if a.ci else a.value for _, a, _ in pts])
    # Zoom in on high risks (all above 30%) so that releases do not crowd the top edge; the
    # axis says where it starts.
    y_min = min([a.ci[0] if a.ci else a.value for _, a, _ in pts])
    y_lo = 0.0
    if y_min > 0.3:  # five ticks, each a multiple of 5%, with a margin below the lowest interval
        step = math.ceil((y_hi - y_min + 0.05) / 5 / 0.05 - 1e-9) * 0.05
        y_lo = max(0.0, round(y_hi - 5 * step, 4))
    return x_lo, x_hi, y_lo, y_hi


def _tie_groups(pts: list[tuple[str, Result, Result]], sx: Any, sy: Any) -> list[list[int]]:
    """Ties: the points that land on (almost) the same pixel, grouped, in order."""
    groups: list[list[int]] = []
    for i, (_, a, u) in enumerate(pts):
        for g in groups:
            _, a0, u0 = pts[g[0]]
            if abs(sx(u.value) - sx(u0.value)) < TIE_PX and abs(sy(a.value) - sy(a0.value)) < TIE_PX:
                g.append(i)
                break
        else:
            groups.append([i])
    return groups


def _pareto_items(chart: Chart, pts: list[tuple[str, Result, Result]], groups: list[list[int]], front: Any,
                  metric: str, sx: Any, sy: Any) -> list[tuple[float, float, str]]:
    """Add each point to ``chart.items`` (a tie's points spread side by side, with their
    intervals and a title); return one label point per group."""
    label_points = []
    for g in groups:
        cx0, cy0 = sx(pts[g[0]][2].value), sy(pts[g[0]][1].value)
        for k, i in enumerate(g):
            rel, a, u = pts[i]
            dx = (k - (len(g) - 1) / 2) * 11 if len(g) > 1 else 0.0
            item = {"cx": cx0 + dx, "cy": cy0, "release": visible(rel), "front": i in front,
                    "color": "#1f5f8b" if i in front else "#7d8790",
                    "title": visible(f"{rel}: {title_of(a.name)} {pct(a.value)}"
                                     + (f" (95% CI {pct(a.ci[0])}–{pct(a.ci[1])})" if a.ci else "")
                                     + f"; {metric} {num(u.value)}"
                                     + (f" (95% CI {num(u.ci[0])}–{num(u.ci[1])})" if u.ci else ""))}
            if a.ci:
                item["y1"], item["y2"] = sy(a.ci[0]), sy(a.ci[1])
            if u.ci:
                item["x1"], item["x2"] = sx(u.ci[0]) + dx, sx(u.ci[1]) + dx
            chart.items.append(item)
        names = [pts[i][0] for i in g]
        text = names[0] if len(g) == 1 else f"{', '.join(names)} (tied)"
        span = (len(g) - 1) * 11 / 2
        label_points.append((cx0 + span, cy0, visible(text)))
    return label_points


PATH_COLOR = "#c0692b"
_ROUND = re.compile(r"^(?P<base>.+)\.harden(?P<k>[1-9][0-9]*)$")


def harden_paths(at: dict[str, tuple[float, float]]) -> list[dict[str, Any]]:
    """Segments from each release to its next hardening round, ``NAME.harden{K}`` from
    ``NAME.harden{K-1}`` (``NAME`` for the first), where both are drawn at ``at``."""
    out = []
    for rel, (x2, y2) in at.items():
        m = _ROUND.match(rel)
        if not m:
            continue
        k = int(m["k"])
        prev = m["base"] if k == 1 else f"{m['base']}.harden{k - 1}"
        if prev in at and at[prev] != (x2, y2):
            x1, y1 = at[prev]
            out.append({"x1": x1, "y1": y1, "x2": x2, "y2": y2, "release": visible(rel)})
    return out


def _pareto_front(points: list[tuple[float, float]]) -> set[int]:
    """Indices of ``(utility, risk)`` points that no other point beats on both (ties kept)."""
    front = set()
    for i, (u, r) in enumerate(points):
        if not any((u2 >= u and r2 <= r) and (u2 > u or r2 < r) for j, (u2, r2) in enumerate(points) if j != i):
            front.add(i)
    return front
