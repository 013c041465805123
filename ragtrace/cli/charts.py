"""The HTML pages' charts, drawn by plotly (the ``cli`` extra): hover, zoom and pan in the browser.

plotly.js is inlined once per page (``script``), so a page works offline and alone. Each chart
gets a fixed element id, so the same input gives the same page byte for byte. All text from
traces reaches the page inside plotly's JSON, which escapes ``<``, ``>`` and ``/``.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Sequence
from html import escape
from typing import Any

PALETTE = ("#2b6cb0", "#c05621", "#2f855a", "#6b46c1", "#b83280", "#718096")
_HEIGHT = 340
_CONFIG = {"displaylogo": False, "responsive": True, "modeBarButtonsToRemove": ["select2d", "lasso2d"]}
_NEEDS = "--html needs plotly, part of the cli extra: pip install 'ragtrace[cli]'"


class ChartsUnavailable(RuntimeError):
    """plotly is not installed."""


def _go() -> Any:
    try:
        from plotly import graph_objects
    except ImportError:
        raise ChartsUnavailable(_NEEDS) from None
    return graph_objects


def check_available() -> None:
    """Raise ChartsUnavailable before any work is done, when the page could not be drawn."""
    _go()


def script() -> str:
    """plotly.js itself, inline: the page fetches nothing."""
    from plotly.offline import get_plotlyjs

    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def _layout(title: str, **axes: Any) -> dict[str, Any]:
    """The title is the chart's accessible name only: the page prints it above the chart, where it
    can't collide with the legend (plotly places both in the top margin)."""
    return {
        "meta": {"title": title},
        "template": "plotly_white",
        "height": _HEIGHT,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 60},
        "legend": {"orientation": "h", "x": 0, "y": 1.0, "yanchor": "bottom"},
        "font": {"family": "system-ui, -apple-system, Segoe UI, Roboto, sans-serif", "size": 12},
        "hoverlabel": {"namelength": -1},
        **axes,
    }


def _count_axis(title: str, largest: float) -> dict[str, Any]:
    """A y axis of whole counts: never a fractional tick that rounds to a repeated label."""
    axis: dict[str, Any] = {"title": {"text": title}, "rangemode": "tozero", "tickformat": ",d", "automargin": True}
    if largest <= 5:
        axis["dtick"] = 1
    return axis


def _div(figure: Any, element_id: str) -> str:
    title = escape(figure.layout.meta["title"])
    chart = figure.to_html(full_html=False, include_plotlyjs=False, div_id=element_id, config=_CONFIG)
    return f'<figure class="chart" aria-label="{title}"><figcaption>{title}</figcaption>{chart}</figure>'


def histogram(element_id: str, title: str, series: Sequence[tuple[str, Sequence[int]]], unit: str) -> str:
    """Counts per tenth of [0, 1], one bar series per figure, grouped."""
    go = _go()
    bins = len(series[0][1]) if series else 10
    centres = [(index + 0.5) / bins for index in range(bins)]
    labels = [f"{index / bins:.1f}–{(index + 1) / bins:.1f}" for index in range(bins)]
    figure = go.Figure()
    for number, (name, counts) in enumerate(series):
        figure.add_trace(
            go.Bar(
                name=name, x=centres, y=list(counts), customdata=labels, marker_color=PALETTE[number % len(PALETTE)],
                hovertemplate=f"{name}<br>%{{customdata}}: %{{y:,d}} {unit}<extra></extra>",
            )
        )
    largest = max((max(counts, default=0) for _, counts in series), default=0)
    figure.update_layout(
        **_layout(title, barmode="group", bargap=0.15),
        xaxis={"range": [0, 1], "dtick": 0.1, "tickformat": ".1f", "title": {"text": "value"}},
        yaxis=_count_axis(unit, largest),
    )
    return _div(figure, element_id)


def over_time(
    element_id: str, title: str, points: Sequence[dict[str, Any]], metrics: Sequence[str], runs: Sequence[tuple[int, int, float, str, str]], run_metric: str
) -> str:
    """Mean per time bucket as lines; ``runs`` (index, start ns, value of ``run_metric``, trace id,
    label) as markers one can hover (trace and value) and click (the run's chunks)."""
    go = _go()
    figure = go.Figure()
    times = [_when(p["start_ns"]) for p in points]
    for number, metric in enumerate(metrics):
        figure.add_trace(
            go.Scatter(
                name=f"{metric} (mean)", x=times, y=[p[metric] for p in points], mode="lines+markers",
                customdata=[p["traces"] for p in points], line={"color": PALETTE[number % len(PALETTE)]},
                hovertemplate=f"{metric} mean %{{y:.3f}}<br>%{{x}}, %{{customdata:,d}} runs<extra></extra>",
            )
        )
    if runs:
        figure.add_trace(
            go.Scatter(
                name=f"{run_metric} of a listed run (click for its chunks)", x=[_when(r[1]) for r in runs], y=[r[2] for r in runs],
                mode="markers", marker={"color": "#c53030", "size": 9, "symbol": "diamond"},
                customdata=[[r[0], r[3], r[4]] for r in runs],
                hovertemplate=f"trace %{{customdata[1]}}<br>%{{customdata[2]}}<br>{run_metric} %{{y:.3f}}<extra></extra>",
            )
        )
    figure.update_layout(
        **_layout(title, hovermode="closest"),
        xaxis={"title": {"text": "time (UTC)"}, "automargin": True},
        yaxis={"title": {"text": "value"}, "range": [-0.02, 1.02], "tickformat": ".1f"},
    )
    return _div(figure, element_id)


def shares(element_id: str, title: str, labels: Sequence[str], values: Sequence[float], notes: Sequence[str], x_title: str) -> str:
    """One bar per label, the value a share (0 to 100%)."""
    go = _go()
    figure = go.Figure(
        go.Bar(
            x=list(labels), y=list(values), customdata=list(notes), marker_color=PALETTE[2],
            hovertemplate=f"{x_title} %{{x}}: %{{y:.0%}}<br>%{{customdata}}<extra></extra>",
        )
    )
    figure.update_layout(
        **_layout(title),
        xaxis={"title": {"text": x_title}, "type": "category", "automargin": True},
        yaxis={"title": {"text": "share"}, "range": [0, 1.05], "tickformat": ".0%"},
    )
    return _div(figure, element_id)


def grouped(element_id: str, title: str, categories: Sequence[str], series: Sequence[tuple[str, Sequence[float | None]]], notes: Sequence[str], x_title: str) -> str:
    """Figures (0 to 1) per category, one bar series per figure, grouped."""
    go = _go()
    figure = go.Figure()
    for number, (name, values) in enumerate(series):
        figure.add_trace(
            go.Bar(
                name=name, x=list(categories), y=list(values), customdata=list(notes), marker_color=PALETTE[number % len(PALETTE)],
                hovertemplate=f"{x_title} %{{x}}<br>{name} %{{y:.3f}}<br>%{{customdata}}<extra></extra>",
            )
        )
    figure.update_layout(
        **_layout(title, barmode="group"),
        xaxis={"title": {"text": x_title}, "type": "category", "automargin": True},
        yaxis={"title": {"text": "p50"}, "range": [0, 1.05], "tickformat": ".1f"},
    )
    return _div(figure, element_id)


def scatter(element_id: str, title: str, points: Sequence[tuple[float, float, str, bool]], x_title: str, y_title: str) -> str:
    """(x, y, label, highlighted) points in [0, 1]², highlighted ones drawn apart."""
    go = _go()
    figure = go.Figure()
    for highlighted, name, color in ((False, "query", PALETTE[0]), (True, "blind spot", PALETTE[1])):
        chosen = [p for p in points if p[3] is highlighted]
        figure.add_trace(
            go.Scatter(
                name=name, x=[p[0] for p in chosen], y=[p[1] for p in chosen], customdata=[p[2] for p in chosen], mode="markers",
                marker={"color": color, "size": 9, "opacity": 0.8},
                hovertemplate=f"%{{customdata}}<br>{x_title} %{{x:.3f}}<br>{y_title} %{{y:.3f}}<extra></extra>",
            )
        )
    figure.update_layout(
        **_layout(title, hovermode="closest"),
        xaxis={"title": {"text": x_title}, "range": [-0.02, 1.02], "tickformat": ".1f"},
        yaxis={"title": {"text": y_title}, "range": [-0.02, 1.02], "tickformat": ".1f"},
    )
    return _div(figure, element_id)


def _when(time_ns: int) -> str:
    return _dt.datetime.fromtimestamp(time_ns / 1e9, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
