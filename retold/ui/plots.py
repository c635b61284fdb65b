"""Inline SVG charts, drawn on the server: no plotting library, no script, nothing fetched.

Three shapes cover what the inspector plots: stacked columns (per-stage latency of recent
searches, records per day by status), horizontal bars (one search's stages), and rate
columns with their mean (gate pass rate). Every text that comes from the store is escaped;
the output is a string a template inserts as is.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from html import escape

__all__ = ["PALETTE", "hbars", "rate_columns", "stacked_columns"]

PALETTE = (
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
    "#9c755f", "#bab0ac", "#1f3347", "#d37295", "#86bcb6", "#a0cbe8", "#8cd17d", "#f1ce63",
)  # fmt: skip
MAX_COLUMN = 48  # a column's widest, in pixels, so that a few columns do not look like a wall
LABEL_WIDTH = 64  # room one x-axis label needs; columns narrower than this share labels
_FONT = 'font-family="system-ui, sans-serif" font-size="11"'


def _num(value: float) -> str:
    return f"{value:.3g}" if value < 1000 else f"{value:,.0f}"


def _open(width: int, height: int, title: str) -> list[str]:
    label = escape(title)
    return [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" width="{width}" '
        f'height="{height}" role="img" aria-label="{label}" class="plot">',
        f"<title>{label}</title>",
        f'<text x="4" y="14" {_FONT} font-weight="bold">{label}</text>',
    ]


def _legend(keys: Sequence[str], colors: Mapping[str, str], x: int, y: int) -> list[str]:
    out = []
    for i, key in enumerate(keys):
        top = y + i * 15
        out.append(f'<rect x="{x}" y="{top}" width="10" height="10" fill="{colors[key]}"/>')
        out.append(f'<text x="{x + 14}" y="{top + 9}" {_FONT}>{escape(key)}</text>')
    return out


def stacked_columns(
    columns: Sequence[tuple[str, Mapping[str, float]]],
    keys: Sequence[str],
    *,
    title: str,
    unit: str,
    colors: Mapping[str, str] | None = None,
    width: int = 760,
    height: int = 280,
) -> str:
    """One column per item, stacked by ``keys`` in order; a legend on the right.

    ``columns`` are ``(label, {key: value})``; a label is printed under every few columns.
    ``colors`` maps keys to colours (default: the palette in order).
    """
    colors = {key: (colors or {}).get(key) or PALETTE[i % len(PALETTE)] for i, key in enumerate(keys)}
    out = _open(width, height, title)
    if not columns:
        out.append(f'<text x="4" y="40" {_FONT}>nothing to plot yet</text></svg>')
        return "".join(out)
    left, right, top, bottom = 48, 140, 24, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    peak = max(sum(max(0.0, v.get(k, 0.0)) for k in keys) for _, v in columns) or 1.0
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - frac)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(
            f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" {_FONT}>{_num(peak * frac)}</text>'
        )
    out.append(
        f'<text x="{left - 4}" y="{top + plot_h + 28}" text-anchor="end" {_FONT}>{escape(unit)}</text>'
    )
    step = min(plot_w / len(columns), MAX_COLUMN)
    every = max(1, math.ceil(LABEL_WIDTH / step))
    for i, (label, values) in enumerate(columns):
        x = left + i * step + step * 0.1
        y = top + plot_h
        parts = []
        for key in keys:
            value = max(0.0, values.get(key, 0.0))
            h = plot_h * value / peak
            if h > 0:
                y -= h
                parts.append(
                    f'<rect x="{x:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" height="{h:.1f}" '
                    f'fill="{colors[key]}"><title>{escape(label)}: {escape(key)} {_num(value)} '
                    f"{escape(unit)}</title></rect>"
                )
        out += parts
        if i % every == 0:
            out.append(
                f'<text x="{x + step * 0.4:.1f}" y="{top + plot_h + 14}" text-anchor="middle" '
                f"{_FONT}>{escape(label)}</text>"
            )
    out += _legend(keys, colors, width - right + 10, top)
    out.append("</svg>")
    return "".join(out)


def hbars(items: Sequence[tuple[str, float]], *, title: str, unit: str, width: int = 560) -> str:
    """One labelled horizontal bar per item, its value printed at its end."""
    row = 16
    height = 26 + row * max(1, len(items))
    out = _open(width, height, title)
    left, right = 110, 70
    peak = max((v for _, v in items), default=0.0) or 1.0
    for i, (label, value) in enumerate(items):
        y = 22 + i * row
        w = (width - left - right) * max(0.0, value) / peak
        color = PALETTE[i % len(PALETTE)]
        out.append(f'<text x="{left - 4}" y="{y + 10}" text-anchor="end" {_FONT}>{escape(label)}</text>')
        out.append(f'<rect x="{left}" y="{y}" width="{w:.1f}" height="{row - 4}" fill="{color}"/>')
        out.append(f'<text x="{left + w + 4:.1f}" y="{y + 10}" {_FONT}>{_num(value)} {escape(unit)}</text>')
    out.append("</svg>")
    return "".join(out)


def rate_columns(
    columns: Sequence[tuple[str, float, str]], *, title: str, width: int = 760, height: int = 220
) -> str:
    """Rates from 0 to 1, one column each (``(label, rate, hover text)``), with a dashed mean line."""
    out = _open(width, height, title)
    if not columns:
        out.append(f'<text x="4" y="40" {_FONT}>nothing to plot yet</text></svg>')
        return "".join(out)
    left, right, top, bottom = 48, 20, 24, 40
    plot_w, plot_h = width - left - right, height - top - bottom
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h * (1 - frac)
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end" {_FONT}>{frac:.0%}</text>')
    step = min(plot_w / len(columns), MAX_COLUMN)
    every = max(1, math.ceil(LABEL_WIDTH / step))
    for i, (label, rate, hover) in enumerate(columns):
        rate = min(1.0, max(0.0, rate))
        x = left + i * step + step * 0.1
        h = plot_h * rate
        out.append(
            f'<rect x="{x:.1f}" y="{top + plot_h - h:.1f}" width="{step * 0.8:.1f}" height="{h:.1f}" '
            f'fill="{PALETTE[0]}"><title>{escape(hover)}</title></rect>'
        )
        if i % every == 0:
            out.append(
                f'<text x="{x + step * 0.4:.1f}" y="{top + plot_h + 14}" text-anchor="middle" '
                f"{_FONT}>{escape(label)}</text>"
            )
    mean = sum(min(1.0, max(0.0, r)) for _, r, _ in columns) / len(columns)
    y = top + plot_h * (1 - mean)
    out.append(
        f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="{PALETTE[2]}" '
        'stroke-dasharray="4 3"/>'
    )
    out.append(
        f'<text x="{left + plot_w - 2}" y="{y - 3:.1f}" text-anchor="end" {_FONT}>mean {mean:.0%}</text>'
    )
    out.append("</svg>")
    return "".join(out)
