"""Renders docs/attributes.md from the ``ATTRIBUTES`` and ``METRICS`` tables in names/tables.py.

Regenerate with ``python -m ragtrace._internal.names.reference > docs/attributes.md``; a test fails when
the page and the constants drift apart.
"""

from __future__ import annotations

from . import prometheus_names
from . import ATTRIBUTES, METRICS, METRICS_STATUS_MEASURED, METRICS_STATUS_OTHER, METRICS_STATUS_REASONS, MetricInfo

HEADER = """# Attribute reference

Generated from `ragtrace/_internal/names/` (`python -m ragtrace._internal.names.reference > docs/attributes.md`);
a test fails when this page and the code drift apart.

*Content* attributes carry user text (queries, chunks, prompts, completions). They pass through the
content policy: recorded in `full` mode (after the optional redactor), never in `redact` or `hash`
mode. Everything else is ids, scores, counts, positions, names or figures and is always recorded.

| attribute | type | stages | content | meaning |
|---|---|---|---|---|
"""


METRICS_HEADER = """
## Metrics

Recorded for every pipeline, sampled-out traces included, through the configured (or global)
MeterProvider. Labels are bounded: the pipeline's name, `version` and `route` (`gen_ai.workflow.name`,
`rag.pipeline.version`, `rag.pipeline.route`), and for stage metrics the operation, stage, model,
provider, data source and error type; `rag.metrics.status` on `rag.pipeline.runs` (`measured` or a
reason of the list below), `rag.citation.kind` on `rag.citations` (`valid`, `out_of_context`,
`unknown`) and `rag.eval.name` (the name given to `record_score`) on `rag.eval.score`. Never ids or
text, in any content mode. The Prometheus column is the series name the OpenTelemetry Prometheus
exporter, the Collector and Prometheus's OTLP receiver (default translation) all give; labels
become `gen_ai_workflow_name`, `rag_pipeline_version`, `rag_metrics_status` and so on. The shipped
dashboard and rules query these names (docs/fleet.md).

| metric | Prometheus | instrument | unit | meaning |
|---|---|---|---|---|
"""


def render() -> str:
    rows = [
        f"| `{a.key}` | {a.type} | {a.stages} | {'yes' if a.content else ''} | {a.description} |"
        for a in ATTRIBUTES
    ]
    metrics = [f"| `{m.name}` | `{_prometheus(m)}` | {m.instrument} | `{m.unit}` | {m.description} |" for m in METRICS]
    reasons = ", ".join(f"`{r}`" for r in sorted(METRICS_STATUS_REASONS))
    return (
        HEADER + "\n".join(rows) + "\n" + METRICS_HEADER + "\n".join(metrics) + "\n"
        + REASONS.format(measured=METRICS_STATUS_MEASURED, other=METRICS_STATUS_OTHER, reasons=reasons)
    )


REASONS = """
The not-measurable reasons (`rag.metrics.status`; `names.METRICS_STATUS_REASONS`, the one list the
metric label is checked against): {reasons}. A run counts in `rag.pipeline.runs` once, under
`{measured}` when every figure was measured, else under its first reason (the most upstream); a
reason missing from the list would count as `{other}`.
"""


def _prometheus(info: MetricInfo) -> str:
    name = prometheus_names.metric(info.name)
    return f"{name}_bucket`, `_sum`, `_count" if info.instrument == "histogram" else name


if __name__ == "__main__":
    print(render(), end="")
