"""The google-genai integration beside the OpenTelemetry project's own instrumentor for the SDK
(``opentelemetry-instrumentation-google-genai``), which wraps the same four methods, in both
orders: the app gets what it gets with neither, the call is one trace, its span is still there,
and ragtrace's figures are the hand-worked ones of test_google_genai.py (retrieved 3, in context
3, cited 2 at [1, 2], recall 2/3).

Their 1.3b0 declares ``google-genai>=1.32.0,<3`` and instruments nothing on 3.x unless told to
skip that check: the test tells it (``skip_dep_check=True``), since 3.x is what ragtrace is tested
with, and their wrappers run unchanged on it.
"""

from __future__ import annotations

import asyncio
import math

import pytest

import ragtrace

from .gemini_fake import MODEL, FakeGemini, file_search_config
from .test_google_genai import BODY, PIECES, QUESTION, a_id, dumped, metrics

THEIRS = "opentelemetry.instrumentation.google_genai"


def app(mode: str) -> list[dict]:
    fake = FakeGemini(BODY, PIECES)
    if mode == "generate_content":
        return [dumped(fake.client().models.generate_content(model=MODEL, contents=QUESTION, config=file_search_config()))]
    if mode == "generate_content_stream":
        return [dumped(c) for c in fake.client().models.generate_content_stream(model=MODEL, contents=QUESTION, config=file_search_config())]

    async def streamed() -> list[dict]:
        stream = await fake.async_client().aio.models.generate_content_stream(model=MODEL, contents=QUESTION, config=file_search_config())
        return [dumped(c) async for c in stream]

    return asyncio.run(streamed())


@pytest.mark.parametrize("order", ["theirs-first", "ragtrace-first"])
@pytest.mark.parametrize("mode", ["generate_content", "generate_content_stream", "aio stream"])
def test_beside_the_official_instrumentor_one_trace_and_the_same_figures(spans, order, mode):
    from opentelemetry.instrumentation.google_genai import GoogleGenAiSdkInstrumentor

    alone = app(mode)
    theirs = GoogleGenAiSdkInstrumentor()
    try:
        if order == "theirs-first":
            theirs.instrument(tracer_provider=spans.provider, skip_dep_check=True)
        assert ragtrace.instrument("google_genai") == ["google_genai"]
        if order == "ragtrace-first":
            theirs.instrument(tracer_provider=spans.provider, skip_dep_check=True)
        assert app(mode) == alone
    finally:  # in reverse order: theirs puts back what it found, which may be ragtrace's wrapper
        if order == "theirs-first":
            ragtrace.uninstrument("google_genai")
            theirs.uninstrument()
        else:
            theirs.uninstrument()
            ragtrace.uninstrument("google_genai")
    found = spans.all()
    assert len({s.context.trace_id for s in found}) == 1, "one trace"
    other = [s for s in found if s.instrumentation_scope.name == THEIRS]
    assert len(other) == 1 and other[0].name.endswith(MODEL)
    assert len(spans.by_stage("pipeline")) == 1 and len(spans.by_stage("generate")) == 1
    assert list(spans.one("generate").attributes["rag.citation.ids"]) == [a_id(), "kb-credit-1"]
    got = metrics(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])
    assert math.isclose(got["recall_proxy"], 2 / 3) and "status" not in got
