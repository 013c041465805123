"""The fleet view as data: the Grafana dashboard and the Prometheus rules ``ragtrace dashboard`` prints.

Every query is spelled from ``names.py`` through ``prometheus_names``, so it selects only on metric
names and labels ragtrace emits, plus ``job`` (never ``service_name``, ``otel_scope_*`` or another
label that differs between the scrape endpoint, the Collector and Prometheus's OTLP receiver).
The files shipped in ``ragtrace/dashboards/`` are this module's output; regenerate them with
``python -m ragtrace.cli.fleet_views`` (a test fails when they drift). tests/fleet runs every
``expr`` on a real Prometheus scraping a ragtrace workload, and ``promtool test rules`` on each alert.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from .._internal import names
from .._internal.prometheus_names import label, metric

SHIPPED = Path(__file__).resolve().parent.parent / "dashboards"
DASHBOARD_FILE = "ragtrace-rag-quality.json"
RULES_FILE = "ragtrace.rules.yml"

PIPELINE, VERSION, ROUTE = label(names.GEN_AI_WORKFLOW_NAME), label(names.RAG_PIPELINE_VERSION), label(names.RAG_PIPELINE_ROUTE)
STAGE, MODEL, SOURCE = label(names.RAG_STAGE), label(names.GEN_AI_REQUEST_MODEL), label(names.GEN_AI_DATA_SOURCE_ID)
STATUS, KIND, EVAL_NAME = label(names.RAG_METRICS_STATUS), label(names.RAG_CITATION_KIND), label(names.RAG_EVAL_NAME)
RUNS, CITATIONS, EMPTY = metric(names.METRIC_PIPELINE_RUNS), metric(names.METRIC_CITATIONS), metric(names.METRIC_EMPTY_RETRIEVALS)
RECALL, PRECISION = metric(names.METRIC_RECALL_PROXY_HISTOGRAM), metric(names.METRIC_CONTEXT_PRECISION_HISTOGRAM)
WASTED, TOKENS, TOP_SCORE = metric(names.METRIC_CONTEXT_WASTED_TOKENS), metric(names.METRIC_CONTEXT_TOKENS), metric(names.METRIC_RETRIEVAL_TOP_SCORE)
DURATION, FIRST_CHUNK, SCORE = metric(names.METRIC_OPERATION_DURATION), metric(names.METRIC_TIME_TO_FIRST_CHUNK), metric(names.METRIC_EVAL_SCORE)
MEASURED, VALID = names.METRICS_STATUS_MEASURED, names.CITATION_KIND_VALID

# the dashboard's selector and grouping; Grafana fills the variables and the rate window
FILTER = f'job=~"$job", {PIPELINE}=~"$pipeline", {VERSION}=~"$version", {ROUTE}=~"$route"'
BY_VERSION = f"{PIPELINE}, {VERSION}"
WINDOW = "$__rate_interval"

# alert thresholds (edit the printed rules to change them); volume guards in runs per second
RECALL_DROP = 0.8  # p50 below 80% of the pipeline's p50 an hour earlier
NOT_MEASURABLE_SHARE = 0.2
INVALID_CITATION_SHARE = 0.1
MIN_RUNS_PER_SECOND = 0.01  # 18 runs in 30 minutes: one slow hour doesn't page


def rate(series: str, selector: str, window: str, extra: str = "") -> str:
    inner = ", ".join(part for part in (selector, extra) if part)
    return f"rate({series}{{{inner}}}[{window}])" if inner else f"rate({series}[{window}])"


def quantile(q: float, histogram: str, by: str, selector: str = FILTER, window: str = WINDOW) -> str:
    return f"histogram_quantile({q}, sum by (le, {by}) ({rate(histogram + '_bucket', selector, window)}))"


def mean(histogram: str, by: str, selector: str = FILTER, window: str = WINDOW) -> str:
    return f"sum by ({by}) ({rate(histogram + '_sum', selector, window)}) / sum by ({by}) ({rate(histogram + '_count', selector, window)})"


def share(series: str, part: str, by: str, selector: str = FILTER, window: str = WINDOW, split: str = "", among: str = "") -> str:
    """The share of ``series`` matching ``part`` among those matching ``among``, per ``by`` (and per
    ``split``, the part's label). ``or ... * 0`` gives 0, not an empty result, while no series
    matches ``part`` yet."""
    whole = f"sum by ({by}) ({rate(series, selector, window, among)})"
    if split:
        return f"sum by ({by}, {split}) ({rate(series, selector, window, part)}) / ignoring({split}) group_left {whole}"
    return f"(sum by ({by}) ({rate(series, selector, window, part)}) or {whole} * 0) / {whole}"


LOW_RECALL = 'le="0.5"'  # a bucket bound: the share at or below it is exact
# runs another process measures and counts (delegated) are left out of run counts and shares
COUNTED = f"{STATUS}!~{json.dumps('|'.join(names.METRICS_STATUS_ELSEWHERE))}"
NOT_MEASURED = f"{STATUS}!~{json.dumps('|'.join((MEASURED, *names.METRICS_STATUS_ELSEWHERE)))}"
RETRIEVALS = f"sum by ({SOURCE}) ({rate(DURATION + '_count', FILTER, WINDOW, STAGE + '=' + json.dumps(names.STAGE_RETRIEVE))})"


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    unit: str
    targets: tuple[tuple[str, str], ...]  # (legend, expr)
    ratio: bool = False  # a share or figure in [0, 1]


PANELS: tuple[Panel, ...] = (
    Panel(
        "Recall proxy p10 / p50", "Cited-chunk recall proxy per run (rag.recall_proxy): the 10th and 50th percentile, by pipeline and version.", "percentunit",
        (("p10 {{%s}} {{%s}}" % (PIPELINE, VERSION), quantile(0.1, RECALL, BY_VERSION)),
         ("p50 {{%s}} {{%s}}" % (PIPELINE, VERSION), quantile(0.5, RECALL, BY_VERSION))), ratio=True,
    ),
    Panel("Recall proxy mean", "Exact mean of the recall proxy (sum / count).", "percentunit",
          (("{{%s}} {{%s}}" % (PIPELINE, VERSION), mean(RECALL, BY_VERSION)),), ratio=True),
    Panel("Answers with recall proxy <= 0.5", "Share of measured runs whose recall proxy is at most 0.5 (a bucket bound: exact).", "percentunit",
          (("{{%s}} {{%s}}" % (PIPELINE, VERSION),
            f"sum by ({BY_VERSION}) ({rate(RECALL + '_bucket', FILTER, WINDOW, LOW_RECALL)}) / sum by ({BY_VERSION}) ({rate(RECALL + '_count', FILTER, WINDOW)})"),), ratio=True),
    Panel("Context precision p50 / mean", "In-context retrieved chunks over retrieved chunks (rag.context_precision).", "percentunit",
          (("p50 {{%s}} {{%s}}" % (PIPELINE, VERSION), quantile(0.5, PRECISION, BY_VERSION)),
           ("mean {{%s}} {{%s}}" % (PIPELINE, VERSION), mean(PRECISION, BY_VERSION))), ratio=True),
    Panel("Not measurable, by reason", "Share of runs with a figure not measurable, by the run's first reason (rag.metrics.status; docs/attributes.md lists them).", "percentunit",
          (("{{%s}} {{%s}} {{%s}}" % (PIPELINE, VERSION, STATUS), share(RUNS, NOT_MEASURED, BY_VERSION, split=STATUS, among=COUNTED)),), ratio=True),
    Panel("Invalid citations, by kind", "Share of citations that name no in-context chunk: out_of_context (a retrieved chunk the model was not shown) or unknown (nothing retrieved).", "percentunit",
          (("{{%s}} {{%s}} {{%s}}" % (PIPELINE, VERSION, KIND), share(CITATIONS, f'{KIND}!="{VALID}"', BY_VERSION, split=KIND)),), ratio=True),
    Panel("Wasted context tokens", "Tokens of in-context chunks the answer never cited: the mean per run, and their share of the context tokens placed.", "short",
          (("per run {{%s}} {{%s}}" % (PIPELINE, VERSION), mean(WASTED, BY_VERSION)),
           ("share {{%s}} {{%s}}" % (PIPELINE, VERSION),
            f"sum by ({BY_VERSION}) ({rate(WASTED + '_sum', FILTER, WINDOW)}) / sum by ({BY_VERSION}) ({rate(TOKENS + '_sum', FILTER, WINDOW)})"))),
    Panel("Retrieval top score p50 and empty retrievals", "Score of the top-ranked chunk (p50), and the share of retrievals that returned nothing, by data source.", "short",
          (("top score p50 {{%s}}" % SOURCE, quantile(0.5, TOP_SCORE, SOURCE)),
           ("empty share {{%s}}" % SOURCE,
            f"(sum by ({SOURCE}) ({rate(EMPTY, FILTER, WINDOW)}) or {RETRIEVALS} * 0) / {RETRIEVALS}"))),
    Panel("Time to first chunk p50 / p95", "Streamed generations, by model.", "s",
          (("p50 {{%s}}" % MODEL, quantile(0.5, FIRST_CHUNK, MODEL)), ("p95 {{%s}}" % MODEL, quantile(0.95, FIRST_CHUNK, MODEL)))),
    Panel("Stage latency p95", "Duration of each stage and of the whole pipeline (rag.stage).", "s",
          (("{{%s}}" % STAGE, quantile(0.95, DURATION, STAGE)),)),
    Panel("Judge scores by name", "record_score's scores (rag.eval.score), by rag.eval.name: p50 and mean.", "short",
          (("p50 {{%s}}" % EVAL_NAME, quantile(0.5, SCORE, EVAL_NAME)), ("mean {{%s}}" % EVAL_NAME, mean(SCORE, EVAL_NAME)))),
    Panel("Traffic by version", "Pipeline runs per second, by pipeline and version: a canary's share.", "reqps",
          (("{{%s}} {{%s}}" % (PIPELINE, VERSION), f"sum by ({BY_VERSION}) ({rate(RUNS, FILTER, WINDOW, COUNTED)})"),)),
)


# --- rules ----------------------------------------------------------------------------------------
ALERT_BY = f"job, {PIPELINE}, {VERSION}"
RECORDING: tuple[tuple[str, str], ...] = (
    ("ragtrace:recall_proxy:p50_30m", quantile(0.5, RECALL, ALERT_BY, "", "30m")),
    ("ragtrace:recall_proxy_runs:rate30m", f"sum by ({ALERT_BY}) ({rate(RECALL + '_count', '', '30m')})"),
    ("ragtrace:pipeline_runs:rate15m", f"sum by ({ALERT_BY}) ({rate(RUNS, '', '15m', COUNTED)})"),
    ("ragtrace:not_measurable:share15m", share(RUNS, NOT_MEASURED, ALERT_BY, "", "15m", among=COUNTED)),
    ("ragtrace:invalid_citations:share15m", share(CITATIONS, f'{KIND}!="{VALID}"', ALERT_BY, "", "15m")),
)
ALERTS: tuple[tuple[str, str, str, str, str], ...] = (  # name, expr, for, summary, description
    (
        "RagRecallProxyDropAfterDeploy",
        f"ragtrace:recall_proxy:p50_30m < on (job, {PIPELINE}) group_left {RECALL_DROP} * max by (job, {PIPELINE}) (ragtrace:recall_proxy:p50_30m offset 1h)"
        f" and on ({ALERT_BY}) ragtrace:recall_proxy_runs:rate30m > {MIN_RUNS_PER_SECOND}",
        "10m",
        "Recall proxy of {{ $labels.%s }} {{ $labels.%s }} fell below %d%% of its level an hour ago" % (PIPELINE, VERSION, RECALL_DROP * 100),
        "The p50 recall proxy (30 m) is {{ $value | humanizePercentage }}. A deploy regression: compare versions on the ragtrace dashboard.",
    ),
    (
        "RagNotMeasurableHigh",
        f"ragtrace:not_measurable:share15m > {NOT_MEASURABLE_SHARE} and on ({ALERT_BY}) ragtrace:pipeline_runs:rate15m > {MIN_RUNS_PER_SECOND}",
        "15m",
        "{{ $value | humanizePercentage }} of {{ $labels.%s }} {{ $labels.%s }} runs have figures not measurable" % (PIPELINE, VERSION),
        "Often a framework upgrade that broke context inclusion; the dashboard's 'Not measurable, by reason' panel names the reason.",
    ),
    (
        "RagInvalidCitationsHigh",
        f"ragtrace:invalid_citations:share15m > {INVALID_CITATION_SHARE} and on ({ALERT_BY}) ragtrace:pipeline_runs:rate15m > {MIN_RUNS_PER_SECOND}",
        "15m",
        "{{ $value | humanizePercentage }} of {{ $labels.%s }} {{ $labels.%s }} citations name no chunk in context" % (PIPELINE, VERSION),
        "The model cites chunks it was not shown (out_of_context) or that don't exist (unknown); see 'Invalid citations, by kind'.",
    ),
)


def rules_text() -> str:
    """The Prometheus rules file (YAML; every string JSON-quoted, which YAML reads as is)."""
    q = json.dumps
    lines = ["# ragtrace: recording rules and alerts for RAG quality (ragtrace dashboard rules; docs/fleet.md)", "groups:"]
    lines += ["  - name: ragtrace.recording", "    rules:"]
    for record, expr in RECORDING:
        lines += [f"      - record: {record}", f"        expr: {q(expr)}"]
    lines += ["  - name: ragtrace.alerts", "    rules:"]
    for alert, expr, wait, summary, description in ALERTS:
        lines += [
            f"      - alert: {alert}", f"        expr: {q(expr)}", f"        for: {wait}", "        labels:", "          severity: warning",
            "        annotations:", f"          summary: {q(summary)}", f"          description: {q(description)}",
        ]
    return "\n".join(lines) + "\n"


# --- dashboard ------------------------------------------------------------------------------------
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


def _variable(name: str, query: str, label_text: str) -> dict:
    return {
        "type": "query", "name": name, "label": label_text, "datasource": DATASOURCE,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2, "includeAll": True, "allValue": ".*", "multi": True, "sort": 1,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
    }


def variables() -> list[dict]:
    job = 'job=~"$job"'
    return [
        {"type": "datasource", "name": "datasource", "label": "Prometheus", "query": "prometheus", "refresh": 1,
         "current": {"selected": False, "text": "default", "value": "default"}},
        _variable("job", f"label_values({RUNS}, job)", "job"),
        _variable("pipeline", f"label_values({RUNS}{{{job}}}, {PIPELINE})", "pipeline"),
        _variable("version", f'label_values({RUNS}{{{job}, {PIPELINE}=~"$pipeline"}}, {VERSION})', "version"),
        _variable("route", f'label_values({RUNS}{{{job}, {PIPELINE}=~"$pipeline"}}, {ROUTE})', "route"),
    ]


def _panel(index: int, panel: Panel) -> dict:
    defaults: dict = {"unit": panel.unit, "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0, "spanNulls": True}}
    if panel.ratio:
        defaults.update(min=0, max=1)
    return {
        "id": index + 1, "type": "timeseries", "title": panel.title, "description": panel.description, "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}, "tooltip": {"mode": "multi", "sort": "none"}},
        "targets": [
            {"refId": chr(ord("A") + n), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "range": True}
            for n, (legend, expr) in enumerate(panel.targets)
        ],
    }


def dashboard() -> dict:
    return {
        "uid": "ragtrace-rag-quality", "title": "ragtrace: RAG quality", "tags": ["ragtrace", "rag", "genai"],
        "description": "RAG quality by pipeline and version from ragtrace's metrics (docs/fleet.md).",
        "editable": True, "graphTooltip": 1, "schemaVersion": 36, "version": 1, "refresh": "1m", "timezone": "browser",
        "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": variables()},
        "annotations": {"list": []},
        "panels": [_panel(i, p) for i, p in enumerate(PANELS)],
    }


def dashboard_text() -> str:
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def shipped(kind: str) -> str:
    """The shipped file ``ragtrace dashboard KIND`` prints: ``grafana`` or ``rules``."""
    from importlib.resources import files

    name = {"grafana": DASHBOARD_FILE, "rules": RULES_FILE}[kind]
    return files("ragtrace").joinpath("dashboards", name).read_text(encoding="utf-8")


def write() -> None:
    SHIPPED.mkdir(exist_ok=True)
    (SHIPPED / DASHBOARD_FILE).write_text(dashboard_text(), encoding="utf-8")
    (SHIPPED / RULES_FILE).write_text(rules_text(), encoding="utf-8")


if __name__ == "__main__":
    write()
