"""The charts of the report: the geometry of the inline SVG (privacy against utility, and
each attack's risk with its interval), computed here and drawn by the template."""

from __future__ import annotations

import math
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
