"""Test helpers for applications instrumented with ragtrace: capture the spans, read the figures.

With pytest (the plugin is registered through the ``pytest11`` entry point; ``-p ragtrace.testing``
loads it explicitly)::

    def test_recall_did_not_drop(ragtrace_spans):
        answer_question("What is BM25?")              # your code, instrumented with ragtrace
        ragtrace_spans.assert_figure("recall_proxy", at_least=0.5)
        assert ragtrace_spans.last_pipeline()["cited"] >= 1
        assert len(ragtrace_spans.by_stage("retrieve")) == 1

    @pytest.mark.ragtrace(capture_content="redact")  # any ragtrace.configure() option but exporters
    def test_no_text_is_recorded(ragtrace_spans): ...

Without pytest::

    from ragtrace.testing import capture

    with capture() as captured:
        answer_question("What is BM25?")
    print(captured.last_pipeline()["recall_proxy"])

While a capture is active, ragtrace sends its spans to an in-memory exporter (through
``ragtrace.configure(tracer_provider=...)``; the rest of the configuration is kept unless overridden);
afterwards the previous configuration is restored. Code under test that calls ``ragtrace.configure()``
itself, or passes ``tracer_provider=`` to a stage, bypasses the capture.

The figures of a pipeline are the ``rag.metrics.*`` attributes of its root span, the same values as
``run.metrics``; a figure that could not be measured is absent and the reason is in ``status``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ._internal.setup import config as _config
from ._internal import names as _names

__all__ = ["CapturedSpans", "PipelineFigures", "capture"]


@dataclass(frozen=True, eq=False)
class PipelineFigures(Mapping[str, Any]):
    """The figures of one pipeline run, read from its root span: ``figures["recall_proxy"]``.

    A read-only mapping of the measured figures (it compares equal to a plain dict of them), plus
    the pipeline's name, the reasons figures are missing, its query id and the root span.
    """

    name: str
    """The ``rag_pipeline`` name."""
    measured: Mapping[str, Any]
    """Every measured figure (``retrieved``, ``recall_proxy``...); lists come back as lists."""
    status: tuple[str, ...] = ()
    """Why figures are missing (``no_retrieval``, ``no_answer``...); empty when all were measured."""
    query_id: str | None = None
    """The ``query_id=`` given to ``rag_pipeline``, for joining with a golden set."""
    inclusion_method: str | None = None
    """How the context the figures rest on was known: ``recorded``, ``declared``, ``provider`` or ``located``."""
    span: ReadableSpan | None = field(default=None, repr=False, compare=False)
    """The root span itself."""

    def __getitem__(self, figure: str) -> Any:
        try:
            return self.measured[figure]
        except KeyError:
            why = f" (status: {', '.join(self.status)})" if self.status else ""
            raise KeyError(f"figure {figure!r} was not measured for pipeline {self.name!r}{why}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(self.measured)

    def __len__(self) -> int:
        return len(self.measured)

    @classmethod
    def from_span(cls, span: ReadableSpan) -> PipelineFigures:
        attributes = span.attributes or {}
        prefix = _names.RAG_METRICS_PREFIX
        values = {
            key[len(prefix) :]: list(value) if isinstance(value, tuple) else value
            for key, value in attributes.items()
            if key.startswith(prefix) and key not in (_names.RAG_METRICS_STATUS, _names.RAG_METRICS_INCLUSION_METHOD)
        }
        status = attributes.get(_names.RAG_METRICS_STATUS)
        reasons = tuple(r for r in str(status).split(",") if r) if status else ()
        name = attributes.get(_names.GEN_AI_WORKFLOW_NAME)
        query_id = attributes.get(_names.RAG_QUERY_ID)
        return cls(
            name=str(name) if name is not None else span.name,
            measured=values,
            status=reasons,
            query_id=str(query_id) if query_id is not None else None,
            inclusion_method=method if isinstance(method := attributes.get(_names.RAG_METRICS_INCLUSION_METHOD), str) else None,
            span=span,
        )


class CapturedSpans:
    """The spans ragtrace produced while a capture was active, with lookups and figure assertions."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> list[ReadableSpan]:
        """Every finished span, in the order the spans ended (stages before their pipeline)."""
        return list(self.exporter.get_finished_spans())

    def by_stage(self, stage: str) -> list[ReadableSpan]:
        """The spans of one stage: ``pipeline``, ``embed``, ``retrieve``, ``rerank``, ``assemble``, ``generate``."""
        return [s for s in self.spans if (s.attributes or {}).get(_names.RAG_STAGE) == stage]

    def one(self, stage: str) -> ReadableSpan:
        """The only span of ``stage``; fails when there are none or several."""
        found = self.by_stage(stage)
        if len(found) != 1:
            raise AssertionError(f"expected one {stage!r} span, found {len(found)} among {[s.name for s in self.spans]}")
        return found[0]

    def figures(self, pipeline: str | None = None) -> list[PipelineFigures]:
        """The figures of every finished pipeline (or of those named ``pipeline``), oldest first."""
        roots = [PipelineFigures.from_span(s) for s in self.by_stage(_names.STAGE_PIPELINE)]
        return [r for r in roots if pipeline is None or r.name == pipeline]

    def last_pipeline(self, pipeline: str | None = None) -> PipelineFigures:
        """The figures of the pipeline that finished last (optionally: the last one named ``pipeline``)."""
        found = self.figures(pipeline)
        if not found:
            which = f"named {pipeline!r} " if pipeline is not None else ""
            seen = sorted({f.name for f in self.figures()})
            raise AssertionError(f"no ragtrace pipeline {which}finished while capturing (pipelines seen: {seen})")
        return found[-1]

    def assert_figure(
        self,
        figure: str,
        *,
        at_least: float | None = None,
        at_most: float | None = None,
        equals: Any = None,
        pipeline: str | None = None,
        every: bool = False,
    ) -> Any:
        """Assert a figure of the last pipeline (``every=True``: of every pipeline) and return it.

        Without a bound it only asserts that the figure was measured. Floats compare with a relative
        tolerance of 1e-9 for ``equals``. ``pipeline=`` restricts to pipelines of that name.
        """
        runs = self.figures(pipeline) if every else [self.last_pipeline(pipeline)]
        if not runs:
            raise AssertionError(f"no ragtrace pipeline{f' named {pipeline!r}' if pipeline else ''} finished while capturing")
        values = [_check(run, figure, at_least, at_most, equals) for run in runs]
        return values if every else values[0]

    def clear(self) -> None:
        """Forget the spans captured so far."""
        self.exporter.clear()


def _check(run: PipelineFigures, figure: str, at_least: float | None, at_most: float | None, equals: Any) -> Any:
    where = f"pipeline {run.name!r}" + (f" (query_id {run.query_id!r})" if run.query_id else "")
    if figure not in run.measured:
        why = f"; status: {', '.join(run.status)}" if run.status else ""
        raise AssertionError(f"ragtrace figure {figure!r} was not measured for {where}{why}; measured: {dict(run.measured)}")
    value = run.measured[figure]
    if equals is not None and not _same(value, equals):
        raise AssertionError(f"ragtrace figure {figure} = {value!r} for {where}, expected {equals!r}")
    if at_least is not None or at_most is not None:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise AssertionError(f"ragtrace figure {figure} = {value!r} for {where} is not a number; use equals=")
        if at_least is not None and not value >= at_least:
            raise AssertionError(f"ragtrace figure {figure} = {value!r} for {where} is below the minimum {at_least!r}")
        if at_most is not None and not value <= at_most:
            raise AssertionError(f"ragtrace figure {figure} = {value!r} for {where} is above the maximum {at_most!r}")
    return value


def _same(value: Any, expected: Any) -> bool:
    if isinstance(value, float) or isinstance(expected, float):
        if isinstance(value, (int, float)) and isinstance(expected, (int, float)):
            return math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-12)
    if isinstance(expected, tuple):
        expected = list(expected)
    return bool(value == expected)


# --- installing and restoring the configuration -------------------------------------------------
def _options(previous: _config.Config) -> dict[str, Any]:
    """``configure()`` keyword arguments that rebuild ``previous`` (a frozen Config) exactly."""
    return {
        "tracer_provider": previous.tracer_provider,
        "meter_provider": previous.meter_provider,
        "capture_content": previous.content.mode,
        "redactor": previous.content.redactor,
        "openinference": previous.openinference,
        "max_documents": previous.max_documents,
        "max_content_chars": previous.max_content_chars,
        "tokenizer": previous.tokenizer,
        "max_retrieved": previous.max_retrieved,
    }


@contextmanager
def capture(**configure_options: Any) -> Iterator[CapturedSpans]:
    """Send ragtrace's spans to memory for the duration of the block, then restore the configuration.

    ``configure_options`` are ``ragtrace.configure()`` keyword arguments (``capture_content=``,
    ``openinference=``, ``max_documents=``...); options not given keep their current values.
    """
    for forbidden in ("tracer_provider", "exporter", "service_name", "batch"):
        if forbidden in configure_options:
            raise TypeError(f"capture() installs its own span exporter; {forbidden}= can't be combined with it")
    captured = CapturedSpans()
    previous = _config.current()
    options = {**_options(previous), **configure_options, "tracer_provider": captured.provider}
    _config.configure(**options)
    try:
        yield captured
    finally:
        _config.restore(previous)
        captured.provider.shutdown()


# --- the pytest plugin ------------------------------------------------------------------------
try:
    import pytest
except ImportError:  # ragtrace.testing works without pytest; only the fixture needs it
    pytest = None  # type: ignore[assignment]

if pytest is not None:

    def pytest_configure(config: pytest.Config) -> None:
        config.addinivalue_line(
            "markers", "ragtrace(**options): ragtrace.configure() options for the ragtrace_spans fixture"
        )

    @pytest.fixture
    def ragtrace_spans(request: pytest.FixtureRequest) -> Iterator[CapturedSpans]:
        """Captures ragtrace's spans for this test; restores the configuration afterwards.

        Options for ``ragtrace.configure()`` come from ``@pytest.mark.ragtrace(...)``.
        """
        marker = request.node.get_closest_marker("ragtrace")
        options = dict(marker.kwargs) if marker is not None else {}
        if marker is not None and marker.args:
            raise TypeError("@pytest.mark.ragtrace takes keyword arguments only, e.g. capture_content='redact'")
        with capture(**options) as captured:
            yield captured
