"""The fleet view as data: the Grafana dashboard and the Prometheus rules ``ragtrace dashboard`` prints.

Every query is spelled from ``ragtrace._internal.names`` through ``prometheus_names``, so it selects only on metric
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
from .._internal.names.prometheus_names import label, metric

SHIPPED = Path(__file__).resolve().parent.parent / "dashboards"
DASHBOARD_FILE = "ragtrace-rag-quality.json"
RULES_FILE = "ragtrace.rules.yml"

PIPELINE, VERSION, ROUTE = label(names.GEN_AI_WORKFLOW_NAME), label(names.RAG_PIPELINE_VERSION), label(names.RAG_PIPELINE_ROUTE)
STAGE, MODEL, SOURCE = label(names.RAG_STAGE), label(names.GEN_AI_REQUEST_MODEL), label(names.GEN_AI_DATA_SOURCE_ID)
STATUS, KIND, EVAL_NAME = label(names.RAG_METRICS_STATUS), label(names.RAG_CITATION_KIND), label(names.RAG_EVAL_NAME)
RUNS, CITATIONS, EMPTY = metric(names.METRIC_PIPELINE_RUNS), metric(names.METRIC_CITATIONS), metric(names.METRIC_EMPTY_RETRIEVALS)
RECALL, PRECISION = metric(names.METRIC_RECALL_PROXY_HISTOGRAM), metric(names.METRIC_CONTEXT_PRECISION_HISTOGRAM)
FILE_RECALL = metric(names.METRIC_FILE_RECALL_PROXY_HISTOGRAM)
WASTED, TOKENS, TOP_SCORE = metric(names.METRIC_CONTEXT_WASTED_TOKENS), metric(names.METRIC_CONTEXT_TOKENS), metric(names.METRIC_RETRIEVAL_TOP_SCORE)
DURATION, FIRST_CHUNK, SCORE = metric(names.METRIC_OPERATION_DURATION), metric(names.METRIC_TIME_TO_FIRST_CHUNK), metric(names.METRIC_EVAL_SCORE)
MEASURED, VALID = names.METRICS_STATUS_MEASURED, names.CITATION_KIND_VALID

# the dashboard's selector and grouping; Grafana fills the variables and the rate window
FILTER = f'job=~"$job", {PIPELINE}=~"$pipeline", {VERSION}=~"$version", {ROUTE}=~"$route"'
# ragtrace's own points on the GenAI convention's instruments: another GenAI instrumentation on the
# same meter provider (the OpenTelemetry project's, OpenLLMetry's) records the same calls on the same
# names, without rag.stage, which every ragtrace point carries (and "All" is ".*", which matches a
# missing label)
OWN = f'{FILTER}, {STAGE}!=""'
BY_VERSION = f"{PIPELINE}, {VERSION}"
WINDOW = "$__rate_interval"

# Alerts are multi-window: a share (or mean) over SHORT must cross its bar, confirmed by the same
# over LONG, each window with a minimum run count. A clear regression pages within about 5 minutes
# (LONG crosses about 3 minutes in, then FOR); a blip too short to move LONG, or a quiet service,
# doesn't. Edit the printed rules to change a bar.
SHORT, LONG, BASELINE, FOR = "5m", "15m", "60m", "1m"
MIN_SHORT_RUNS, MIN_LONG_RUNS = 10, 30  # runs in SHORT and in LONG
RECALL_DROP = 0.8  # a version's recall proxy mean below 80% of its pipeline's mean over BASELINE
NOT_MEASURABLE_SHARE = 0.2
INVALID_CITATION_SHARE = 0.1


def rate(series: str, selector: str, window: str, extra: str = "", function: str = "rate") -> str:
    inner = ", ".join(part for part in (selector, extra) if part)
    return f"{function}({series}{{{inner}}}[{window}])" if inner else f"{function}({series}[{window}])"


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
# Past the SDK's cardinality limit, later label sets go to one series with every label empty and
# otel_metric_overflow="true": a selector that only says "not measured" or "not valid" would count
# it as 100% not measurable, so each also asks for a non-empty status or kind. Runs another process
# measures and counts (delegated) are left out of run counts and shares. A reason added to
# names.METRICS_STATUS_REASONS needs no change here.
COUNTED = f'{STATUS}!="", {STATUS}!~{json.dumps("|".join(names.METRICS_STATUS_ELSEWHERE))}'
NOT_MEASURED = f'{STATUS}!="", {STATUS}!~{json.dumps("|".join((MEASURED, *names.METRICS_STATUS_ELSEWHERE)))}'
INVALID = f'{KIND}!="", {KIND}!="{VALID}"'
KINDS = f'{KIND}!=""'
JUDGED = f'{FILTER}, {EVAL_NAME}=~"$eval_name"'
RETRIEVALS = f"sum by ({SOURCE}) ({rate(DURATION + '_count', FILTER, WINDOW, STAGE + '=' + json.dumps(names.STAGE_RETRIEVE))})"


@dataclass(frozen=True)
class Panel:
    title: str
    description: str
    unit: str
    targets: tuple[tuple[str, str], ...]  # (legend, expr)
    ratio: bool = False  # a share or figure in [0, 1]
    repeat: str = ""  # one panel per value of this variable (each with its own axis)


LEGEND = "{{%s}} {{%s}}" % (PIPELINE, VERSION)
PANELS: tuple[Panel, ...] = (
    Panel(
        "Recall proxy p10 / p50", "Cited-chunk recall proxy per run (rag.recall_proxy): the 10th and 50th percentile, by pipeline and version.", "percentunit",
        (("p10 " + LEGEND, quantile(0.1, RECALL, BY_VERSION)), ("p50 " + LEGEND, quantile(0.5, RECALL, BY_VERSION))), ratio=True,
    ),
    Panel("Recall proxy mean", "Exact mean of the recall proxy (sum / count).", "percentunit", ((LEGEND, mean(RECALL, BY_VERSION)),), ratio=True),
    Panel("Answers with recall proxy <= 0.5", "Share of measured runs whose recall proxy is at most 0.5 (a bucket bound: exact).", "percentunit",
          ((LEGEND, f"sum by ({BY_VERSION}) ({rate(RECALL + '_bucket', FILTER, WINDOW, LOW_RECALL)}) / sum by ({BY_VERSION}) ({rate(RECALL + '_count', FILTER, WINDOW)})"),),
          ratio=True),
    Panel("Context precision p50 / mean",
          "In-context retrieved chunks over retrieved chunks (rag.context_precision): how much of what retrieval returned the prompt used. "
          "It sees truncation and assembly dropping chunks; it can't see whether the chunks were relevant or cited, so it stays flat "
          "while answer quality degrades. Read it beside the recall proxy and invalid citations.", "percentunit",
          (("p50 " + LEGEND, quantile(0.5, PRECISION, BY_VERSION)), ("mean " + LEGEND, mean(PRECISION, BY_VERSION))), ratio=True),
    Panel("File recall proxy p50 / mean",
          "Runs whose citations name files, not chunks (OpenAI file_search): cited files over retrieved files "
          "(rag.file_recall_proxy). Measured also where a cited file has several chunks in context and the chunk "
          "recall proxy is not. Empty while no run cites files.", "percentunit",
          (("p50 " + LEGEND, quantile(0.5, FILE_RECALL, BY_VERSION)), ("mean " + LEGEND, mean(FILE_RECALL, BY_VERSION))), ratio=True),
    Panel("Not measurable, by reason",
          "Share of runs with a figure not measurable, in all (0 while every run is measured) and by the run's first reason "
          "(rag.metrics.status; docs/attributes.md lists them).", "percentunit",
          (("all " + LEGEND, share(RUNS, NOT_MEASURED, BY_VERSION, among=COUNTED)),
           ("%s {{%s}}" % (LEGEND, STATUS), share(RUNS, NOT_MEASURED, BY_VERSION, split=STATUS, among=COUNTED))), ratio=True),
    Panel("Invalid citations, by kind", "Share of citations that name no in-context chunk: out_of_context (a retrieved chunk the model was not shown) or unknown (nothing retrieved).", "percentunit",
          (("%s {{%s}}" % (LEGEND, KIND), share(CITATIONS, INVALID, BY_VERSION, split=KIND, among=KINDS)),), ratio=True),
    Panel("Wasted context tokens per run", "Tokens of in-context chunks the answer never cited, per run (mean).", "short",
          ((LEGEND, mean(WASTED, BY_VERSION)),)),
    Panel("Wasted share of context tokens", "The wasted tokens' share of all context tokens placed in prompts.", "percentunit",
          ((LEGEND, f"sum by ({BY_VERSION}) ({rate(WASTED + '_sum', FILTER, WINDOW)}) / sum by ({BY_VERSION}) ({rate(TOKENS + '_sum', FILTER, WINDOW)})"),),
          ratio=True),
    Panel("Retrieval top score p50", "Score of the top-ranked chunk, by data source: in the retriever's own scale (cosine, BM25...).", "short",
          (("{{%s}}" % SOURCE, quantile(0.5, TOP_SCORE, SOURCE)),)),
    Panel("Empty retrievals", "Share of retrievals that returned nothing, by data source (0 until the first).", "percentunit",
          (("{{%s}}" % SOURCE, f"(sum by ({SOURCE}) ({rate(EMPTY, FILTER, WINDOW)}) or {RETRIEVALS} * 0) / {RETRIEVALS}"),), ratio=True),
    Panel("Time to first chunk p50 / p95", "Streamed generations, by model.", "s",
          (("p50 {{%s}}" % MODEL, quantile(0.5, FIRST_CHUNK, MODEL, OWN)), ("p95 {{%s}}" % MODEL, quantile(0.95, FIRST_CHUNK, MODEL, OWN)))),
    Panel("Stage latency p95",
          "Duration of each stage and of the whole pipeline (rag.stage). Buckets from 0.5 ms (0.5, 1, 2.5, 5 ms, then the GenAI "
          "convention's 10 ms to 82 s), so fast retrievals read true; within a bucket the value is interpolated.", "s",
          (("{{%s}}" % STAGE, quantile(0.95, DURATION, STAGE, OWN)),)),
    Panel("Judge scores: $eval_name", "record_score's scores (rag.eval.score) of one name, p50 and mean: one panel per name, each on its own scale.", "short",
          (("p50 {{%s}} %s" % (EVAL_NAME, LEGEND), quantile(0.5, SCORE, f"{EVAL_NAME}, {BY_VERSION}", JUDGED)),
           ("mean {{%s}} %s" % (EVAL_NAME, LEGEND), mean(SCORE, f"{EVAL_NAME}, {BY_VERSION}", JUDGED))), repeat="eval_name"),
    Panel("Traffic by version", "Pipeline runs per second, by pipeline and version: a canary's share.", "reqps",
          ((LEGEND, f"sum by ({BY_VERSION}) ({rate(RUNS, FILTER, WINDOW, COUNTED)})"),)),
)


# --- rules ----------------------------------------------------------------------------------------
ALERT_BY = f"job, {PIPELINE}, {VERSION}"
PIPELINE_BY = f"job, {PIPELINE}"
NAMED = f'{PIPELINE}!=""'  # every pipeline's series has its name; the overflow series has none


def increase(series: str, window: str, extra: str = "", by: str = ALERT_BY) -> str:
    return f"sum by ({by}) ({rate(series, NAMED, window, extra, 'increase')})"


RECORDING: tuple[tuple[str, str], ...] = (
    *((f"ragtrace:pipeline_runs:increase{w}", increase(RUNS, w, COUNTED)) for w in (SHORT, LONG)),
    *((f"ragtrace:not_measurable:share{w}", share(RUNS, NOT_MEASURED, ALERT_BY, NAMED, w, among=COUNTED)) for w in (SHORT, LONG)),
    *((f"ragtrace:invalid_citations:share{w}", share(CITATIONS, INVALID, ALERT_BY, NAMED, w, among=KINDS)) for w in (SHORT, LONG)),
    *((f"ragtrace:recall_proxy_runs:increase{w}", increase(RECALL + "_count", w)) for w in (SHORT, LONG)),
    *((f"ragtrace:recall_proxy:mean{w}", mean(RECALL, ALERT_BY, NAMED, w)) for w in (SHORT, LONG)),
    (f"ragtrace:recall_proxy:pipeline_mean{BASELINE}", mean(RECALL, PIPELINE_BY, NAMED, BASELINE)),
)


def confirmed(short: str, long: str, volume: str, min_short: int = MIN_SHORT_RUNS, min_long: int = MIN_LONG_RUNS) -> str:
    """``short`` over SHORT, confirmed by ``long`` over LONG, each with its minimum run count."""
    on = f"and on ({ALERT_BY})"
    return f"{short} {on} {long} {on} {volume}{SHORT} >= {min_short} {on} {volume}{LONG} >= {min_long}"


def alert_exprs(min_short: int = MIN_SHORT_RUNS, min_long: int = MIN_LONG_RUNS) -> dict[str, str]:
    """Each alert's expression (the live Prometheus test lowers the run counts to its workload's)."""
    runs, recall_runs = "ragtrace:pipeline_runs:increase", "ragtrace:recall_proxy_runs:increase"
    baseline = f"on ({PIPELINE_BY}) group_left {RECALL_DROP} * ragtrace:recall_proxy:pipeline_mean{BASELINE}"
    return {
        "RagRecallProxyDrop": confirmed(
            f"ragtrace:recall_proxy:mean{SHORT} < {baseline}", f"ragtrace:recall_proxy:mean{LONG} < {baseline}", recall_runs, min_short, min_long
        ),
        "RagNotMeasurableHigh": confirmed(
            f"ragtrace:not_measurable:share{SHORT} > {NOT_MEASURABLE_SHARE}", f"ragtrace:not_measurable:share{LONG} > {NOT_MEASURABLE_SHARE}",
            runs, min_short, min_long,
        ),
        "RagInvalidCitationsHigh": confirmed(
            f"ragtrace:invalid_citations:share{SHORT} > {INVALID_CITATION_SHARE}", f"ragtrace:invalid_citations:share{LONG} > {INVALID_CITATION_SHARE}",
            runs, min_short, min_long,
        ),
        "RagMetricLabelOverflow": 'count by (job) ({__name__=~"rag_.+|gen_ai_client_operation_.+", otel_metric_overflow="true"}) > 0',
    }


ALERTS: tuple[tuple[str, str, str, str, str], ...] = tuple(  # name, expr, for, summary, description
    (name, alert_exprs()[name], wait, summary, description) for name, wait, summary, description in (
        (
            "RagRecallProxyDrop", FOR,
            "Recall proxy of {{ $labels.%s }} {{ $labels.%s }} fell below %d%% of the pipeline's last hour" % (PIPELINE, VERSION, RECALL_DROP * 100),
            "The recall proxy mean over %s is {{ $value | humanizePercentage }}, and over %s too, under %d%% of the pipeline's mean "
            "over the last hour (all versions): a deploy or data regression; compare versions on the ragtrace dashboard." % (SHORT, LONG, RECALL_DROP * 100),
        ),
        (
            "RagNotMeasurableHigh", FOR,
            "{{ $value | humanizePercentage }} of {{ $labels.%s }} {{ $labels.%s }} runs have figures not measurable" % (PIPELINE, VERSION),
            "Over %s and %s. Often a framework upgrade that broke context inclusion; the dashboard's 'Not measurable, by reason' "
            "panel names the reason." % (SHORT, LONG),
        ),
        (
            "RagInvalidCitationsHigh", FOR,
            "{{ $value | humanizePercentage }} of {{ $labels.%s }} {{ $labels.%s }} citations name no chunk in context" % (PIPELINE, VERSION),
            "Over %s and %s. The model cites chunks it was not shown (out_of_context) or that don't exist (unknown); see "
            "'Invalid citations, by kind'." % (SHORT, LONG),
        ),
        (
            "RagMetricLabelOverflow", "5m",
            "A metric of job {{ $labels.job }} reached its label-set limit",
            "Series past the SDK's cardinality limit go to one series with every label empty (otel_metric_overflow=\"true\"): a "
            "label is unbounded, usually request data in route= or version=. Its runs are in no pipeline's panels. "
            "See docs/fleet.md#bounded-labels.",
        ),
    )
)


def rules_text() -> str:
    """The Prometheus rules file (YAML; every string JSON-quoted, which YAML reads as is)."""
    q = json.dumps
    lines = ["# ragtrace: recording rules and alerts for RAG quality (ragtrace dashboard rules; docs/fleet.md)", "groups:"]
    # one group: Prometheus evaluates a group's rules in order, so each alert reads the values its
    # recording rules wrote at the same evaluation, not the previous one's (a minute late, at random)
    lines += ["  - name: ragtrace", "    rules:"]
    for record, expr in RECORDING:
        lines += [f"      - record: {record}", f"        expr: {q(expr)}"]
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
        _variable("eval_name", f'label_values({SCORE}_count{{{job}, {PIPELINE}=~"$pipeline"}}, {EVAL_NAME})', "score"),
    ]


def _panel(index: int, panel: Panel) -> dict:
    defaults: dict = {"unit": panel.unit, "custom": {"drawStyle": "line", "lineWidth": 1, "fillOpacity": 0, "spanNulls": True}}
    if panel.ratio:
        defaults.update(min=0, max=1)
    repeat = {"repeat": panel.repeat, "repeatDirection": "h"} if panel.repeat else {}
    return {
        "id": index + 1, "type": "timeseries", "title": panel.title, "description": panel.description, "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {"legend": {"displayMode": "list", "placement": "bottom", "showLegend": True}, "tooltip": {"mode": "multi", "sort": "none"}},
        "targets": [
            {"refId": chr(ord("A") + n), "datasource": DATASOURCE, "expr": expr, "legendFormat": legend, "range": True}
            for n, (legend, expr) in enumerate(panel.targets)
        ],
        **repeat,
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
