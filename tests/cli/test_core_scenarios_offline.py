"""Offline == online for every scenario of the core test suite.

Each scenario of tests/test_scenarios.py and tests/test_pipeline.py runs again with a
JsonLinesExporter next to the in-memory one; the rows rebuilt from the jsonl must carry exactly
the figures the SDK recorded on each pipeline span (and, for stages used outside a pipeline, on
the single answer generation of the trace). A scenario the rebuild gets wrong fails here.
"""

from __future__ import annotations

import importlib
import inspect
import io
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from ragtrace._internal.setup import config
from ragtrace._internal import names
from ragtrace.cli.diagnostics import Diagnostics
from ragtrace.cli.reader import TraceReader
from ragtrace.cli.traces import rows_of
from ragtrace.exporters import JsonLinesExporter

MODULES = ("test_scenarios", "test_pipeline")


def _cases():
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        for name, function in sorted(vars(module).items()):
            if not name.startswith("test_") or not callable(function):
                continue
            parameters = list(inspect.signature(function).parameters)
            if not parameters or parameters[0] != "spans":
                continue
            marks = [m for m in getattr(function, "pytestmark", []) if m.name == "parametrize"]
            if len(parameters) == 1 and not marks:
                yield pytest.param(function, {}, id=f"{module_name}.{name}")
            elif len(marks) == 1:
                argnames, argvalues = marks[0].args[0], marks[0].args[1]
                argnames = [a.strip() for a in argnames.split(",")] if isinstance(argnames, str) else list(argnames)
                if argnames != parameters[1:]:
                    continue
                for index, values in enumerate(argvalues):
                    values = values.values if hasattr(values, "values") else values
                    values = values if len(argnames) > 1 else (values,)
                    yield pytest.param(function, dict(zip(argnames, values)), id=f"{module_name}.{name}[{index}]")


def _figures(span) -> dict:
    out = {}
    for key, value in span.attributes.items():
        if key.startswith(names.RAG_METRICS_PREFIX) and key not in (names.RAG_METRICS_STATUS, names.RAG_METRICS_INCLUSION_METHOD):
            out[key[len(names.RAG_METRICS_PREFIX) :]] = list(value) if isinstance(value, tuple) else value
    return out


@pytest.mark.parametrize(("scenario", "arguments"), list(_cases()))
def test_rows_rebuilt_offline_match_the_recorded_figures(spans, tmp_path: Path, scenario, arguments):
    path = tmp_path / "scenario.jsonl"
    spans.provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    config.configure(tracer_provider=spans.provider)
    scenario(spans, **arguments)
    spans.provider.force_flush()

    diagnostics = Diagnostics(io.StringIO())
    rows = {(row.trace_id, row.span_id): row for trace in TraceReader([path], diagnostics) for row in rows_of(trace)}
    checked = 0
    for pipeline in spans.by_stage(names.STAGE_PIPELINE):
        key = (f"{pipeline.context.trace_id:032x}", f"{pipeline.context.span_id:016x}")
        row = rows[key]
        assert row.mismatches == [], (scenario.__name__, row.mismatches)
        recorded = _figures(pipeline)
        assert {k: row.figures[k] for k in recorded if k in row.figures} == recorded
        assert set(recorded) == set(row.figures)
        checked += 1
    pipeline_traces = {p.context.trace_id for p in spans.by_stage(names.STAGE_PIPELINE)}
    for generation in spans.by_stage(names.STAGE_GENERATE):
        trace_id = generation.context.trace_id
        if trace_id in pipeline_traces or generation.attributes.get(names.RAG_GENERATION_ROLE) != names.ROLE_ANSWER:
            continue
        answers = [g for g in spans.by_stage(names.STAGE_GENERATE) if g.context.trace_id == trace_id and g.attributes.get(names.RAG_GENERATION_ROLE) == names.ROLE_ANSWER]
        recorded = _figures(generation)
        if len(answers) != 1 or not recorded:
            continue
        (row,) = [r for (t, _), r in rows.items() if t == f"{trace_id:032x}"]
        checked += 1
        if not any(s.context.trace_id == trace_id for s in spans.by_stage(names.STAGE_ASSEMBLE)) and "in_context" in recorded:
            # the context was passed in from another trace: offline it can't be rebuilt, and the
            # run must say so instead of scoring without it
            assert row.status[0] == "spans_missing" and not row.measurable
            continue
        assert {k: row.figures.get(k) for k in recorded} == recorded, scenario.__name__
    assert checked, "the scenario recorded no figures to compare"
    assert diagnostics.counts["figures differ"] == 0 or any(r.mismatches for r in rows.values() if r.status[:1] == ["spans_missing"])
