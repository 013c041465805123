"""The check the ``*_beside_*`` modules run after their tests (left_behind.py) sees what another
instrumentor leaves behind, and the cleanup of openllmetry.py takes it away: OpenLLMetry 0.62.4's
LangChain wrappers after its own ``uninstrument()``, its LlamaIndex handlers (its
``uninstrument()`` does nothing), a context left current. Should a later OpenLLMetry clean up
after itself, the first two fail: then its cleanup here can go."""

from __future__ import annotations

from importlib.util import find_spec

from opentelemetry import context, trace

from integrations import left_behind
from integrations.openllmetry import (
    OPENLLMETRY_LANGCHAIN,
    OPENLLMETRY_LLAMA_INDEX,
    langchain_leftovers_off,
    llama_index_handlers_off,
)


def left_after_their_uninstrument(theirs, spans, cleanup, attributes: bool) -> tuple[list[str], list[str]]:
    """What the check finds after ``theirs.instrument()`` and ``theirs.uninstrument()``, and after
    openllmetry.py's ``cleanup`` too."""
    before = left_behind.snapshot(attributes)
    theirs.instrument(tracer_provider=spans.provider)
    try:
        theirs.uninstrument()
        found = left_behind.left_behind(before)
    finally:
        cleanup()
    return found, left_behind.left_behind(before)


def test_openllmetrys_langchain_wrappers_left_after_its_uninstrument_are_seen_and_taken_off(spans):
    import langchain_core.callbacks  # noqa: F401  loaded before, so compared attribute by attribute
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor

    found, after_cleanup = left_after_their_uninstrument(LangchainInstrumentor(), spans, langchain_leftovers_off, attributes=True)
    assert f"langchain_core.callbacks.base:BaseCallbackManager.__init__ is a wrapper from {OPENLLMETRY_LANGCHAIN}" in found
    if find_spec("langgraph") is not None:  # langchain 1.x and LangGraph: the 3.11 run
        assert f"langgraph.pregel.main:Pregel.stream is a wrapper from {OPENLLMETRY_LANGCHAIN}.patch" in found
        assert f"langchain.agents.middleware.types:AgentMiddleware.before_model is a wrapper from {OPENLLMETRY_LANGCHAIN}.patch" in found
    assert after_cleanup == []


def test_openllmetrys_llama_index_handlers_left_after_its_uninstrument_are_seen_and_taken_off(spans):
    import llama_index.core  # noqa: F401
    from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor

    found, after_cleanup = left_after_their_uninstrument(LlamaIndexInstrumentor(), spans, llama_index_handlers_off, attributes=False)
    assert [line.split(":")[0] for line in found] == ["llama_index dispatcher 'root' span_handlers", "llama_index dispatcher 'root' event_handlers"]
    assert all(f"'{OPENLLMETRY_LLAMA_INDEX}.dispatcher_wrapper.OpenLLMetry" in line.split(" (was ")[0] for line in found)
    assert after_cleanup == []


def test_a_span_left_current_is_seen():
    before = left_behind.snapshot(attributes=False)
    span = trace.NonRecordingSpan(trace.SpanContext(1, 2, is_remote=False))
    token = context.attach(trace.set_span_in_context(span))
    try:
        (found,) = left_behind.left_behind(before)
    finally:
        context.detach(token)
    assert found.startswith("context: {") and found.endswith("(was {})")
    assert left_behind.left_behind(before) == []
