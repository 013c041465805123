"""The shipped dashboard and rules against a real Prometheus scraping a real ragtrace app.

A workload process (``workload.py``) serves its metrics through ``configure(metrics=...)``; Debian's
``prometheus`` scrapes it every second from a temp dir on 127.0.0.1 and loads the shipped rules.
The workload runs one warm-up run of every shape (so every series exists at the window's first
sample: Prometheus 2.x gives a series first seen at a non-zero count nothing in ``rate()``), then
the known workload. Every ``expr`` of the dashboard and of the recording rules is then evaluated at
the last scrape with the rate window set to exactly the span from the warm-up scrape to it, so
``rate()`` is (last - first) / window with no extrapolation: means, shares and rates are checked
exactly, quantiles against Prometheus's bucket interpolation (worked out below from the hand-worked
values). Prometheus missing fails the test: ``make test`` installs it.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import defaultdict
from pathlib import Path

import pytest

from fleet import workload
from ragtrace._internal.setup import otel_metrics
from ragtrace.cli import fleet_views

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
JOB = "ragtrace-workload"
WARM_RUNS, RUNS = 8, 20  # workload.SHAPES once; workload.RUNS
pytestmark = pytest.mark.heavy


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def binary(name: str) -> str:
    found = shutil.which(name) or (f"/usr/bin/{name}" if os.path.exists(f"/usr/bin/{name}") else None)
    if found is None:
        pytest.fail(f"{name} is not installed: `make test` installs Debian's prometheus package (apt-get install prometheus)")
    return found


class Fleet:
    def __init__(self, url: str) -> None:
        self.url = url
        self.at = 0.0
        self.window = ""
        self.figures: list[dict] = []

    def api(self, path: str, **params: str) -> dict:
        query = urllib.parse.urlencode(params, doseq=True)
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}?{query}", timeout=10) as response:
            body = json.load(response)
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str, at: float | None = None) -> dict[tuple, float]:
        data = self.api("query", query=expr, time=f"{at if at is not None else self.at:.3f}")
        assert data["resultType"] == "vector", data
        return {tuple(sorted(r["metric"].items())): float(r["value"][1]) for r in data["result"]}

    def scalar(self, expr: str) -> float | None:
        found = self.query(expr, at=time.time())
        return next(iter(found.values())) if found else None

    def wait(self, expr: str, value: float, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while self.scalar(expr) != value:
            assert time.monotonic() < deadline, f"{expr} never reached {value} (last {self.scalar(expr)})"
            time.sleep(0.2)


def _last_scrape(fleet: Fleet) -> float:
    return fleet.scalar("max(timestamp(rag_pipeline_runs_total))") or 0.0


@pytest.fixture(scope="module")
def fleet(tmp_path_factory) -> Fleet:
    prometheus = binary("prometheus")
    home = tmp_path_factory.mktemp("prometheus")
    app_port, prom_port = free_port(), free_port()
    workload = subprocess.Popen(
        [sys.executable, str(HERE / "workload.py"), str(app_port)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    (home / "prometheus.yml").write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(fleet_views.SHIPPED / fleet_views.RULES_FILE)],
        "scrape_configs": [{"job_name": JOB, "static_configs": [{"targets": [f"127.0.0.1:{app_port}"]}]}],
    }))
    log = open(home / "prometheus.log", "w")  # noqa: SIM115 - closed after the server
    server = subprocess.Popen(
        [prometheus, f"--config.file={home / 'prometheus.yml'}", f"--storage.tsdb.path={home / 'data'}",
         f"--web.listen-address=127.0.0.1:{prom_port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL, stderr=log,
    )
    try:
        assert json.loads(workload.stdout.readline()) == {"ready": True}
        fleet = Fleet(f"http://127.0.0.1:{prom_port}")
        deadline = time.monotonic() + 20
        while True:
            try:
                targets = fleet.api("targets")["activeTargets"]
                if targets and targets[0]["health"] == "up":
                    break
            except OSError:
                pass
            assert server.poll() is None, (home / "prometheus.log").read_text()
            assert time.monotonic() < deadline, "the workload's target never came up"
            time.sleep(0.2)

        def phase(name: str, total: int) -> float:
            workload.stdin.write(name + "\n")
            workload.stdin.flush()
            fleet.figures += json.loads(workload.stdout.readline())["runs"]
            fleet.wait("sum(rag_pipeline_runs_total)", total)
            return _last_scrape(fleet)

        first = phase("warm", WARM_RUNS)  # a scrape holding every series at its warm-up count
        fleet.at = phase("run", WARM_RUNS + RUNS)
        fleet.window = f"{round((fleet.at - first) * 1000)}ms"
        fleet.figures = fleet.figures[WARM_RUNS:]
        # the shipped recording rules ran on the live server
        fleet.wait('count(count by (__name__) ({__name__=~"ragtrace:.+"}))', len(fleet_views.RECORDING), timeout=10)
        # evaluated after the last scrape: the run phase may span scrapes, and an evaluation between
        # them saw only part of it (the rules are one group: evaluated together)
        deadline = time.monotonic() + 10
        while (fleet.scalar(f"min(timestamp({fleet_views.RECORDING[0][0]}))") or 0.0) < fleet.at:
            assert time.monotonic() < deadline, "the recording rules were never evaluated after the last scrape"
            time.sleep(0.2)
        yield fleet
    finally:
        workload.stdin.close()
        workload.wait(timeout=20)
        server.terminate()
        server.wait(timeout=20)
        log.close()


# --- the truth, worked out by hand from workload.SHAPES and workload.RUNS ------------------------
# v1: A x10, G x1 (citations name files: citations_file_level, no chunk recall, no wasted tokens
# nor citation counts; file recall 1/2). v2 (route faq): B x3, B2 x1, B3 x2, D x1 (no_context), E x1
# (empty_retrieval), and F x1 (delegated: left out of run counts and shares, but its retrieval and
# assembly are measured here)
RECALL = {"v1": [1.0] * 10, "v2": [0.5] * 3 + [0.5] + [0.25] * 2}
FILE_RECALL = {"v1": [0.5]}
PRECISION = {"v1": [1.0] * 11, "v2": [1.0] * 3 + [0.5] + [1.0] * 2}
WASTED = {"v1": [0] * 10, "v2": [2] * 3 + [0] + [7] * 2}
CONTEXT_TOKENS = {"v1": 5 * 10 + 6, "v2": 5 * 3 + 3 + 10 * 2 + 3}  # placed chunk tokens: d0 3, d1 2, d2 4, d3 1; G's 2 + 3 + 1
RUN_COUNT = {"v1": 11, "v2": 8}  # F not counted
NOT_MEASURED = {"v1": {"citations_file_level": 1}, "v2": {"no_context": 1, "empty_retrieval": 1}}
CITATIONS = {"v1": {"valid": 20, "out_of_context": 0, "unknown": 0}, "v2": {"valid": 6, "out_of_context": 1, "unknown": 1}}
TOP_SCORES = [0.95] * 10 + [0.7] + [0.62] * 8  # E retrieved nothing
RETRIEVALS, EMPTY = 20, 1
JUDGED = {("groundedness", "v1"): [0.8] * 10, ("groundedness", "v2"): [0.4] * 6, ("relevance", "v1"): [3.0] * 10}


def prometheus_quantile(q: float, bounds: tuple[float, ...], values: list[float]) -> float:
    """Prometheus 2.42's histogram_quantile (promql/quantile.go, bucketQuantile) over the cumulative
    buckets the values fill; the same on rates, which scale every bucket alike."""
    uppers = [*bounds, math.inf]
    cumulative = [sum(1 for v in values if v <= upper) for upper in uppers]
    return _interpolate(q, uppers, cumulative)


def _interpolate(q: float, uppers: list[float], cumulative: list[float]) -> float:
    rank = q * cumulative[-1]
    b = next(i for i, count in enumerate(cumulative[:-1] + [math.inf]) if count >= rank)
    if b == len(uppers) - 1:
        return uppers[-2]
    if b == 0 and uppers[0] <= 0:
        return uppers[0]
    start = 0.0 if b == 0 else uppers[b - 1]
    count, before = cumulative[b] - (cumulative[b - 1] if b else 0), cumulative[b - 1] if b else 0
    return start + (uppers[b] - start) * (rank - before) / count


def key(**labels: str) -> tuple:
    return tuple(sorted(labels.items()))


def judged(name: str, version: str) -> tuple:
    return key(rag_eval_name=name, gen_ai_workflow_name="qa", rag_pipeline_version=version)


def by_version(values: dict[str, float]) -> dict[tuple, float]:
    return {key(gen_ai_workflow_name="qa", rag_pipeline_version=v): x for v, x in values.items()}


def measured_from_raw(fleet: Fleet, histogram: str, label: str) -> dict[str, list[float]]:
    """A timing histogram's bucket increases over the window, read as raw samples (no PromQL
    function): the values a quantile of it is checked against, per ``label``."""
    data = fleet.api("query", query=f'{histogram}_bucket{{job="{JOB}", otel_scope_name="ragtrace"}}[{fleet.window}]', time=f"{fleet.at:.3f}")
    increases: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    for series in data["result"]:
        values = [float(v) for _, v in series["values"]]
        increases[series["metric"].get(label, "")][float(series["metric"]["le"])] += values[-1] - values[0]
    return {name: dict(sorted(buckets.items())) for name, buckets in increases.items()}


def quantile_of_raw(q: float, buckets: dict[float, float]) -> float:
    uppers = list(buckets)
    return _interpolate(q, uppers, [buckets[u] for u in uppers])


def expected_panels(fleet: Fleet) -> dict[tuple[str, str], dict[tuple, float]]:
    seconds = int(fleet.window[:-2]) / 1000
    ratio, score = otel_metrics.RATIO_BUCKETS, otel_metrics.SCORE_BUCKETS
    durations = measured_from_raw(fleet, "gen_ai_client_operation_duration_seconds", "rag_stage")
    first_chunk = measured_from_raw(fleet, "gen_ai_client_operation_time_to_first_chunk_seconds", "gen_ai_request_model")
    mean = lambda values: sum(values) / len(values)  # noqa: E731
    return {
        ("Recall proxy p10 / p50", "p10"): by_version({v: prometheus_quantile(0.1, ratio, x) for v, x in RECALL.items()}),
        ("Recall proxy p10 / p50", "p50"): by_version({v: prometheus_quantile(0.5, ratio, x) for v, x in RECALL.items()}),
        ("Recall proxy mean", ""): by_version({"v1": 1.0, "v2": 2.5 / 6}),
        ("Answers with recall proxy <= 0.5", ""): by_version({"v1": 0.0, "v2": 1.0}),
        ("Context precision p50 / mean", "p50"): by_version({v: prometheus_quantile(0.5, ratio, x) for v, x in PRECISION.items()}),
        ("Context precision p50 / mean", "mean"): by_version({"v1": 1.0, "v2": 5.5 / 6}),
        ("File recall proxy p50 / mean", "p50"): by_version({v: prometheus_quantile(0.5, ratio, x) for v, x in FILE_RECALL.items()}),
        ("File recall proxy p50 / mean", "mean"): by_version({v: mean(x) for v, x in FILE_RECALL.items()}),
        ("Not measurable, by reason", "all"): by_version({v: sum(NOT_MEASURED.get(v, {}).values()) / n for v, n in RUN_COUNT.items()}),
        ("Not measurable, by reason", ""): {
            key(gen_ai_workflow_name="qa", rag_pipeline_version=v, rag_metrics_status=s): n / RUN_COUNT[v]
            for v, reasons in NOT_MEASURED.items() for s, n in reasons.items()
        },
        ("Invalid citations, by kind", ""): {
            key(gen_ai_workflow_name="qa", rag_pipeline_version=v, rag_citation_kind=k): kinds[k] / sum(kinds.values())
            for v, kinds in CITATIONS.items() for k in ("out_of_context", "unknown")
        },
        ("Wasted context tokens per run", ""): by_version({v: mean(x) for v, x in WASTED.items()}),
        ("Wasted share of context tokens", ""): by_version({v: sum(x) / CONTEXT_TOKENS[v] for v, x in WASTED.items()}),
        ("Retrieval top score p50", ""): {key(gen_ai_data_source_id="kb"): prometheus_quantile(0.5, score, TOP_SCORES)},
        ("Empty retrievals", ""): {key(gen_ai_data_source_id="kb"): EMPTY / RETRIEVALS},
        ("Time to first chunk p50 / p95", "p50"): {key(gen_ai_request_model="m"): quantile_of_raw(0.5, first_chunk["m"])},
        ("Time to first chunk p50 / p95", "p95"): {key(gen_ai_request_model="m"): quantile_of_raw(0.95, first_chunk["m"])},
        ("Stage latency p95", ""): {key(rag_stage=s): quantile_of_raw(0.95, b) for s, b in durations.items()},
        ("Judge scores: $eval_name", "p50"): {judged(n, v): prometheus_quantile(0.5, score, x) for (n, v), x in JUDGED.items()},
        ("Judge scores: $eval_name", "mean"): {judged(n, v): mean(x) for (n, v), x in JUDGED.items()},
        ("Traffic by version", ""): by_version({v: n / seconds for v, n in RUN_COUNT.items()}),
    }


def filled(expr: str, fleet: Fleet, **chosen: str) -> str:
    for name in ("job", "pipeline", "version", "route", "eval_name"):
        expr = expr.replace(f"${name}", chosen.get(name, ".*"))
    return expr.replace("$__rate_interval", fleet.window)


def targets() -> list[tuple[str, str, str]]:
    """(panel title, legend's first word or "", expr) of every target of the shipped dashboard."""
    shipped = json.loads(fleet_views.shipped("grafana"))
    found = []
    for panel in shipped["panels"]:
        for target in panel["targets"]:
            legend = target["legendFormat"].split("{{")[0].strip()
            found.append((panel["title"], legend, target["expr"]))
    return found


def test_the_workload_ran_the_hand_worked_figures(fleet):
    by_shape = {r["shape"]: r for r in fleet.figures}
    assert [r["shape"] for r in fleet.figures].count("A") == 10 and len(fleet.figures) == RUNS
    assert by_shape["B2"]["metrics"]["out_of_context_citations"] == 1 and by_shape["B2"]["metrics"]["unknown_citations"] == 1
    assert by_shape["B3"]["metrics"]["recall_proxy"] == 0.25 and by_shape["B3"]["metrics"]["wasted_context_tokens"] == 7
    assert (by_shape["D"]["status"], by_shape["E"]["status"]) == ("no_context", "empty_retrieval,no_context")
    assert by_shape["F"]["status"] == "delegated"
    assert (by_shape["G"]["status"], by_shape["G"]["metrics"]["file_recall_proxy"]) == ("citations_file_level", 0.5)
    delegated = fleet.query(f'sum(increase(rag_pipeline_runs_total{{rag_metrics_status="delegated"}}[{fleet.window}]))')
    assert list(delegated.values()) == [1.0]  # counted under its own status, out of the panels' counts


def test_every_dashboard_expr_returns_the_expected_numbers(fleet):
    expected = expected_panels(fleet)
    seen = set()
    for title, legend, expr in targets():
        got = fleet.query(filled(expr, fleet))
        want = expected[(title, legend)]
        seen.add((title, legend))
        assert set(got) == set(want), (title, legend, got, want)
        for labels, value in want.items():
            assert got[labels] == pytest.approx(value, rel=1e-9, abs=1e-12), (title, legend, labels, got[labels], value)
    assert seen == set(expected)
    # the other GenAI instrumentation's points are there, on the same names (workload.OTHER_SCOPE),
    # and left out: its first chunks come 0.05 s in, ragtrace's 0.02 s
    other = f'{{job="{JOB}", otel_scope_name="{workload.OTHER_SCOPE}"}}'
    answered = RUNS - workload.RUNS["F"]  # every run but the delegated one: one retrieval and one chat of theirs
    assert fleet.query(f"sum(increase(gen_ai_client_operation_time_to_first_chunk_seconds_count{other}[{fleet.window}]))") == {(): pytest.approx(answered)}
    assert fleet.query(f"sum(increase(gen_ai_client_operation_duration_seconds_count{other}[{fleet.window}]))") == {(): pytest.approx(2 * answered)}
    assert expected[("Time to first chunk p50 / p95", "p95")][key(gen_ai_request_model="m")] < workload.OTHER_FIRST_CHUNK_DELAY
    # timing floors the workload guarantees: a streamed answer's first piece comes after its sleep
    assert expected[("Time to first chunk p50 / p95", "p50")][key(gen_ai_request_model="m")] >= 0.02
    assert set(expected[("Stage latency p95", "")]) == {key(rag_stage=s) for s in ("pipeline", "retrieve", "assemble", "generate")}


def test_the_variables_choose_among_what_ragtrace_emits_and_filter(fleet):
    shipped = json.loads(fleet_views.shipped("grafana"))
    found = {}
    for variable in shipped["templating"]["list"]:
        if variable["type"] != "query":
            continue
        selector, label = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["query"]["query"]).groups()
        found[variable["name"]] = set(fleet.api(f"label/{label}/values", **{"match[]": filled(selector, fleet)}))
    assert found == {"job": {JOB}, "pipeline": {"qa"}, "version": {"v1", "v2"}, "route": {"faq"}, "eval_name": {"groundedness", "relevance"}}
    (_, _, traffic), = [t for t in targets() if t[0] == "Traffic by version"]
    assert set(fleet.query(filled(traffic, fleet, version="v2"))) == set(by_version({"v2": 0}))
    assert set(fleet.query(filled(traffic, fleet, route="faq"))) == set(by_version({"v2": 0}))
    assert fleet.query(filled(traffic, fleet, job="another-job")) == {}


def test_every_recording_rule_returns_the_expected_numbers(fleet):
    labels = lambda v: key(job=JOB, gen_ai_workflow_name="qa", rag_pipeline_version=v)  # noqa: E731
    windows = (fleet_views.SHORT, fleet_views.LONG)
    expected = {
        **{f"ragtrace:pipeline_runs:increase{w}": {labels(v): n for v, n in RUN_COUNT.items()} for w in windows},
        **{f"ragtrace:not_measurable:share{w}": {labels("v1"): 1 / 11, labels("v2"): 2 / 8} for w in windows},
        **{f"ragtrace:invalid_citations:share{w}": {labels("v1"): 0.0, labels("v2"): 2 / 8} for w in windows},
        **{f"ragtrace:recall_proxy_runs:increase{w}": {labels(v): len(x) for v, x in RECALL.items()} for w in windows},
        **{f"ragtrace:recall_proxy:mean{w}": {labels(v): sum(x) / len(x) for v, x in RECALL.items()} for w in windows},
        f"ragtrace:recall_proxy:pipeline_mean{fleet_views.BASELINE}": {key(job=JOB, gen_ai_workflow_name="qa"): 12.5 / 16},
    }
    assert [record for record, _ in fleet_views.RECORDING] == list(expected)
    for record, expr in fleet_views.RECORDING:
        got = fleet.query(re.sub(r"\[\d+m\]", f"[{fleet.window}]", expr))
        assert set(got) == set(expected[record]), record
        for series, value in expected[record].items():
            assert got[series] == pytest.approx(value, rel=1e-9, abs=1e-12), (record, series)
        # and Prometheus itself evaluates the shipped rule into the same series
        assert set(fleet.query(record, at=time.time())) == {(("__name__", record), *s) for s in expected[record]}, record


def test_the_alerts_evaluate_on_the_live_rules(fleet):
    """With the run counts lowered to the workload's size, v2 is over every bar (recall 0.42 under
    80% of the pipeline's 0.78, not measurable 0.25, invalid citations 0.25) and v1 under them; with
    the shipped counts (10 in 5m, 30 in 15m) a workload this small pages nothing. No overflow series."""
    v2 = (("gen_ai_workflow_name", "qa"), ("job", JOB), ("rag_pipeline_version", "v2"))

    def firing(exprs: dict[str, str]) -> dict[str, set]:
        return {alert: {tuple(p for p in s if p[0] != "__name__") for s in fleet.query(expr, at=time.time())} for alert, expr in exprs.items()}

    assert firing(fleet_views.alert_exprs(1, 1)) == {
        "RagRecallProxyDrop": {v2}, "RagNotMeasurableHigh": {v2}, "RagInvalidCitationsHigh": {v2}, "RagMetricLabelOverflow": set(),
    }
    assert firing(fleet_views.alert_exprs()) == {alert: set() for alert, *_ in fleet_views.ALERTS}


def test_queries_use_only_names_and_labels_ragtrace_emits(fleet):
    names_seen = set(fleet.api("label/__name__/values"))
    labels_seen = set(fleet.api("labels"))
    exprs = [expr for *_, expr in targets()] + [expr for _, expr in fleet_views.RECORDING] + [a[1] for a in fleet_views.ALERTS]
    shipped = json.loads(fleet_views.shipped("grafana"))
    exprs += [v["query"]["query"] for v in shipped["templating"]["list"] if v["type"] == "query"]
    keywords = {"and", "or", "unless", "offset", "group_left", "group_right", "bool"}
    used_names, used_labels = set(), set()
    for expr in exprs:
        bare = re.sub(r'"[^"]*"', '""', expr)  # no label values
        # metric names: what is left without matchers, windows, groupings, calls and keywords
        names_only = re.sub(r"label_values\((.+), \w+\)", r"\1", bare)
        names_only = re.sub(r"\{[^}]*\}|\[[^\]]*\]|\b(?:by|on|ignoring) ?\([^)]*\)|\b\d+[smh]\b", " ", names_only)
        identifiers = re.findall(r"(?<![\w:.])[a-zA-Z_:][\w:]*(?![\w:])(?!\s*\()", names_only)
        used_names |= {n for n in identifiers if n not in keywords}
        for group in re.findall(r"\b(?:by|on|ignoring) ?\(([^)]*)\)", bare):
            used_labels |= {label.strip() for label in group.split(",")}
        used_labels |= set(re.findall(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!=|!~|=)\s*\"", bare))
        used_labels |= set(re.findall(r"label_values\(.*, (\w+)\)", expr))
    assert {"rag_pipeline_runs_total", "rag_citations_total", "rag_eval_score_bucket", "ragtrace:recall_proxy:mean5m"} <= used_names
    assert used_names - names_seen == set(), sorted(n for n in names_seen if n.startswith("ragtrace"))
    assert {"rag_metrics_status", "rag_citation_kind", "rag_eval_name", "gen_ai_workflow_name", "le", "job"} <= used_labels
    # otel_metric_overflow: on the SDK's overflow series only, which this workload never reaches
    assert used_labels - labels_seen == {"otel_metric_overflow"}
