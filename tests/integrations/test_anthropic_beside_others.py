"""The Anthropic integration beside OpenInference's and OpenLLMetry's Anthropic instrumentors, which
wrap the same SDK methods, in both orders: the app gets what it gets with neither, and ragtrace's
figures are the hand-worked ones of test_anthropic.py (retrieved 3, in context 3, cited 2,
recall 2/3). docs/integrations.md says what is duplicated and what nests in what (checked here).
"""

from __future__ import annotations

import math

import pytest

import ragtrace
from integrations.openllmetry import strip_wrappers, wrapper_modules

from .anthropic_fake import FakeAnthropic, message
from .test_anthropic import A, ANSWER, B, RESULTS, ask, metrics

ORDERS = ["theirs-first", "ragtrace-first"]
MODES = ["create", "stream=True", "messages.stream"]


def theirs(tool: str):
    if tool == "openinference":
        from openinference.instrumentation.anthropic import AnthropicInstrumentor

        return AnthropicInstrumentor(), "openinference.instrumentation.anthropic"
    from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor

    return AnthropicInstrumentor(), "opentelemetry.instrumentation.anthropic"


def app(mode: str) -> tuple[str, list[list[int]]]:
    """The app: its answer text and each text block's cited search-result indexes."""
    client = FakeAnthropic(message(ANSWER)).client()
    if mode == "create":
        reply = client.messages.create(**ask(RESULTS))
    elif mode == "stream=True":
        with client.messages.create(**ask(RESULTS), stream=True) as events:
            for _ in events:
                pass
        reply = client.messages.create(**ask(RESULTS))  # the blocks to compare; the streamed text is checked below
    else:
        with client.messages.stream(**ask(RESULTS)) as stream:
            reply = stream.get_final_message()
    return "".join(b.text for b in reply.content), [[c.search_result_index for c in b.citations or ()] for b in reply.content]


@pytest.mark.parametrize("tool", ["openinference", "openllmetry"])
@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("mode", MODES)
def test_beside_another_anthropic_instrumentor_the_app_and_the_figures_are_unchanged(spans, tool, order, mode):
    alone = app(mode)
    instrumentor, module = theirs(tool)
    try:
        if order == "theirs-first":
            instrumentor.instrument(tracer_provider=spans.provider)
        assert ragtrace.instrument("anthropic") == ["anthropic"]
        if order == "ragtrace-first":
            instrumentor.instrument(tracer_provider=spans.provider)
        from anthropic.resources.messages.messages import Messages

        stacked = wrapper_modules(vars(Messages)["create"])
        assert "ragtrace._internal.integrations._common" in stacked
        got = app(mode)
    finally:  # in reverse order: OpenInference's uninstrument() puts back what it wrapped, ragtrace's wrapper included
        if order == "ragtrace-first":
            instrumentor.uninstrument()
        ragtrace.uninstrument("anthropic")
        if order == "theirs-first":
            instrumentor.uninstrument()
        strip_wrappers("anthropic.resources", module)
    from anthropic.resources.messages.messages import AsyncMessages, Messages

    assert [wrapper_modules(vars(cls)[name]) for cls in (Messages, AsyncMessages) for name in ("create", "stream")] == [[]] * 4
    assert got == alone
    roots = spans.by_stage("pipeline")
    assert len(roots) == (2 if mode == "stream=True" else 1)
    for root in roots:
        got_figures = metrics(root)
        assert (got_figures["retrieved"], got_figures["in_context"], got_figures["cited"]) == (3, 3, 2)
        assert math.isclose(got_figures["recall_proxy"], 2 / 3) and "status" not in got_figures
    for generated in spans.by_stage("generate"):
        assert list(generated.attributes["rag.citation.ids"]) == [A[0], B[0]]
    others = [s for s in spans.all() if "rag.stage" not in s.attributes]
    assert others and all(s.instrumentation_scope.name.startswith(module) for s in others), "their spans are recorded too"
    # one trace when their span is current where ragtrace's pipeline opens: OpenInference's always
    # for create, OpenLLMetry's only inside ragtrace's (it doesn't make its span current); never
    # for messages.stream(), whose span both start at .stream(), before the request is made
    nested = mode != "messages.stream" and (tool == "openinference" or order == "theirs-first")
    assert ({s.context.trace_id for s in others} <= {r.context.trace_id for r in roots}) is nested
