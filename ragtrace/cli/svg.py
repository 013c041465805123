"""Small inline SVG charts (no scripts, no external resources): bars, lines, scatter.

Every text that reaches the SVG is escaped; numbers are formatted here, so a chart is a pure
function of its data.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

WIDTH, HEIGHT = 420, 220
_LEFT, _RIGHT, _TOP, _BOTTOM = 44, 12, 26, 40
PALETTE = ("#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#718096")


def _frame(title: str, body: list[str], width: int = WIDTH, height: int = HEIGHT) -> str:
    return (
        f'<svg class="chart" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(title)}" xmlns="http://www.w3.org/2000/svg">'
        f'<title>{escape(title)}</title>'
        f'<text x="{_LEFT}" y="16" class="t">{escape(title)}</text>' + "".join(body) + "</svg>"
    )


def _axes(width: int, height: int, y_max: float, y_label: str, ticks: int = 4, percent: bool = False) -> list[str]:
    plot_h = height - _TOP - _BOTTOM
    out = [
        f'<line x1="{_LEFT}" y1="{height - _BOTTOM}" x2="{width - _RIGHT}" y2="{height - _BOTTOM}" class="ax"/>',
        f'<line x1="{_LEFT}" y1="{_TOP}" x2="{_LEFT}" y2="{height - _BOTTOM}" class="ax"/>',
    ]
    for index in range(ticks + 1):
        value = y_max * index / ticks
        y = height - _BOTTOM - plot_h * index / ticks
        text = f"{value * 100:.0f}%" if percent else (f"{value:.2f}" if y_max <= 1 else f"{value:,.0f}")
        out.append(f'<line x1="{_LEFT - 3}" y1="{y:.1f}" x2="{width - _RIGHT}" y2="{y:.1f}" class="grid"/>')
        out.append(f'<text x="{_LEFT - 5}" y="{y + 3:.1f}" class="yl">{text}</text>')
    if y_label:
        out.append(f'<text x="10" y="{_TOP + plot_h / 2:.1f}" class="yl" transform="rotate(-90 10 {_TOP + plot_h / 2:.1f})">{escape(y_label)}</text>')
    return out


def bars(title: str, values: Sequence[float], labels: Sequence[str], *, y_label: str = "", percent: bool = False, notes: Sequence[str] | None = None, color: str = PALETTE[0]) -> str:
    """A bar chart; ``notes`` (e.g. counts) become hover titles."""
    width, height = WIDTH, HEIGHT
    if not values:
        return _frame(title, [f'<text x="{width / 2}" y="{height / 2}" class="empty">no data</text>'])
    y_max = max(values) or 1.0
    if percent:
        y_max = min(1.0, max(y_max, 0.05))
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    step = plot_w / len(values)
    body = _axes(width, height, y_max, y_label, percent=percent)
    label_every = max(1, len(values) // 12)
    for index, value in enumerate(values):
        bar_h = plot_h * (value / y_max if y_max else 0)
        x = _LEFT + index * step + step * 0.1
        y = height - _BOTTOM - bar_h
        hover = escape(f"{labels[index]}: {notes[index] if notes else value}")
        body.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{step * 0.8:.1f}" height="{bar_h:.1f}" fill="{color}"><title>{hover}</title></rect>')
        if index % label_every == 0:
            body.append(f'<text x="{x + step * 0.4:.1f}" y="{height - _BOTTOM + 14}" class="xl">{escape(labels[index])}</text>')
    return _frame(title, body)


def lines(title: str, series: Sequence[tuple[str, Sequence[float | None]]], x_labels: Sequence[str], *, y_max: float = 1.0) -> str:
    """Several series over the same x positions; None leaves a gap."""
    width, height = WIDTH + 120, HEIGHT
    count = len(x_labels)
    if not count:
        return _frame(title, [f'<text x="{width / 2}" y="{height / 2}" class="empty">no timestamps</text>'], width, height)
    plot_w, plot_h = width - _LEFT - _RIGHT - 120, height - _TOP - _BOTTOM
    body = _axes(width - 120, height, y_max, "")

    def x_at(index: int) -> float:
        return _LEFT + (plot_w * index / (count - 1) if count > 1 else plot_w / 2)

    for number, (name, values) in enumerate(series):
        color = PALETTE[number % len(PALETTE)]
        path: list[str] = []
        pen_up = True
        for index, value in enumerate(values):
            if value is None:
                pen_up = True
                continue
            y = height - _BOTTOM - plot_h * min(max(value / y_max, 0.0), 1.0)
            path.append(f"{'M' if pen_up else 'L'}{x_at(index):.1f},{y:.1f}")
            pen_up = False
            if count <= 60:
                body.append(f'<circle cx="{x_at(index):.1f}" cy="{y:.1f}" r="2" fill="{color}"><title>{escape(f"{name} {x_labels[index]}: {value:.3f}")}</title></circle>')
        if path:
            body.append(f'<path d="{" ".join(path)}" fill="none" stroke="{color}" stroke-width="1.5"/>')
        legend_y = _TOP + 14 * number + 6
        body.append(f'<rect x="{width - 126}" y="{legend_y - 8}" width="10" height="10" fill="{color}"/>')
        body.append(f'<text x="{width - 112}" y="{legend_y + 1}" class="lg">{escape(name)}</text>')
    for index in sorted({0, count - 1}):
        anchor = "start" if index == 0 and count > 1 else "end"
        body.append(f'<text x="{x_at(index):.1f}" y="{height - _BOTTOM + 14}" class="xl" text-anchor="{anchor}">{escape(x_labels[index])}</text>')
    return _frame(title, body, width, height)


def scatter(title: str, points: Sequence[tuple[float, float, str]], x_label: str, y_label: str, *, highlight: Sequence[bool] | None = None) -> str:
    """Points in the unit square; highlighted ones are drawn in the second colour."""
    width, height = WIDTH, HEIGHT + 20
    plot_w, plot_h = width - _LEFT - _RIGHT, height - _TOP - _BOTTOM
    body = _axes(width, height, 1.0, y_label)
    for index in range(5):
        x = _LEFT + plot_w * index / 4
        body.append(f'<text x="{x:.1f}" y="{height - _BOTTOM + 14}" class="xl">{index / 4:.2f}</text>')
    body.append(f'<text x="{_LEFT + plot_w / 2:.1f}" y="{height - 6}" class="xl">{escape(x_label)}</text>')
    if not points:
        body.append(f'<text x="{width / 2}" y="{height / 2}" class="empty">no data</text>')
    for index, (x_value, y_value, label) in enumerate(points):
        x = _LEFT + plot_w * min(max(x_value, 0.0), 1.0)
        y = height - _BOTTOM - plot_h * min(max(y_value, 0.0), 1.0)
        color = PALETTE[1] if highlight and highlight[index] else PALETTE[0]
        body.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{color}" fill-opacity="0.75"><title>{escape(f"{label}: {x_label} {x_value:.2f}, {y_label} {y_value:.2f}")}</title></circle>')
    return _frame(title, body, width, height)
