"""ragtrace's Bedrock and Cohere integrations beside OpenInference's instrumentors of the same SDKs
(and OpenLLMetry's of Bedrock), each instrumented before and after ragtrace: the app gets what it
gets with neither, ragtrace's pipeline is one trace with the same figures as alone, and the other
instrumentor's spans are still exported.

OpenInference's Bedrock spans (``bedrock.retrieve``) are current around the call: ragtrace does
not take them for the app's request (which would end the automatic root when ``retrieve``
returns, before the model call that answers from it), so retrieve and converse stay one pipeline.
OpenLLMetry's Cohere instrumentor (0.62) pins cohere<6 and instruments nothing on cohere 7, so it
is not among them.
"""

from __future__ import annotations

import pytest

import ragtrace

from . import test_bedrock, test_cohere


def _other(name: str):
    if name == "openinference-bedrock":
        from openinference.instrumentation.bedrock import BedrockInstrumentor
    elif name == "openllmetry-bedrock":
        from opentelemetry.instrumentation.bedrock import BedrockInstrumentor
    else:
        from openinference.instrumentation.cohere import CohereInstrumentor

        return CohereInstrumentor()
    return BedrockInstrumentor()


@pytest.fixture(params=["first", "last"])
def order(request):
    return request.param


def both_on(spans, name: str, order: str, library: str):
    other = _other(name)
    if order == "first":
        other.instrument(tracer_provider=spans.provider)
    assert ragtrace.instrument(library) == [library]
    if order == "last":
        other.instrument(tracer_provider=spans.provider)
    return other


def ours(spans) -> list:
    return [s for s in spans.all() if "rag.stage" in s.attributes]


@pytest.mark.parametrize("name", ["openinference-bedrock", "openllmetry-bedrock"])
@pytest.mark.parametrize("stream", [False, True], ids=["converse", "converse_stream"])
def test_bedrock_beside(spans, name, order, stream):
    alone = test_bedrock.retrieve_then_converse(stream=stream)  # neither instrumented
    other = both_on(spans, name, order, "bedrock")
    try:
        got = test_bedrock.retrieve_then_converse(stream=stream)
    finally:
        other.uninstrument() if order == "last" else None
        ragtrace.uninstrument("bedrock")
        other.uninstrument() if order == "first" else None
    assert got == alone
    mine = ours(spans)
    assert len({s.context.trace_id for s in mine}) == 1  # one pipeline
    theirs = [s for s in spans.all() if "rag.stage" not in s.attributes]
    assert theirs, "the other instrumentor's spans are still there"
    spans.exporter.clear()
    for span in mine:
        spans.exporter.export([span])
    test_bedrock.check_main_case(spans, stream=stream, nested=name == "openinference-bedrock")


@pytest.mark.parametrize("stream", [False, True], ids=["chat", "chat_stream"])
def test_cohere_beside_openinference(spans, order, stream):
    server = test_cohere.fake()

    def call():
        client = server.client()
        options = {"model": test_cohere.MODEL, "messages": test_cohere.MESSAGES, "documents": test_cohere.DOCUMENTS}
        return list(client.chat_stream(**options)) if stream else client.chat(**options)

    alone = call()
    other = both_on(spans, "openinference-cohere", order, "cohere")
    try:
        got = call()
    finally:
        other.uninstrument() if order == "last" else None
        ragtrace.uninstrument("cohere")
        other.uninstrument() if order == "first" else None
    assert got == alone
    theirs = [s for s in spans.all() if "rag.stage" not in s.attributes]
    assert [s.name for s in theirs] == ["ClientV2.chat_stream" if stream else "ClientV2.chat"]
    assert len({s.context.trace_id for s in spans.all()}) == 1  # their span and ragtrace's pipeline: one trace
    mine = ours(spans)
    spans.exporter.clear()
    for span in mine:
        spans.exporter.export([span])
    test_cohere.check_main_case(spans, stream=stream, nested=order == "last")
