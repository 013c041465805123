"""What the tests beside OpenLLMetry's (Traceloop's) instrumentors share: both tools on in either
order, OpenLLMetry's leftovers taken away afterwards, and ways to read the span tree.

Each test turns on OpenLLMetry's instrumentor and ``ragtrace.instrument()`` in both orders and
checks that the app gets what it gets with neither, that ragtrace's figures are the hand-computed
ones of the ragtrace-alone tests, which spans are duplicated and what nests inside what
(docs/integrations.md, "Beside other instrumentors"), and that uninstrumenting either one leaves
the other working.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

from opentelemetry import context

import ragtrace

ORDERS = ["openllmetry-first", "ragtrace-first"]
OPENLLMETRY_OPENAI = "opentelemetry.instrumentation.openai"
OPENLLMETRY_LANGCHAIN = "opentelemetry.instrumentation.langchain"
OPENLLMETRY_LLAMA_INDEX = "opentelemetry.instrumentation.llamaindex"


def _wrapper_module(value: object) -> str:
    """The module of the function a wrapt function wrapper calls, or '' for anything else."""
    wrapper = getattr(value, "_self_wrapper", None)
    return (getattr(wrapper, "__module__", None) or "") if hasattr(value, "__wrapped__") else ""


def wrapper_modules(value: object) -> list[str]:
    """The modules of the wrappers stacked on a patched method, outermost first."""
    found = []
    while _wrapper_module(value):
        found.append(_wrapper_module(value))
        value = value.__wrapped__
    return found


def parent_of(spans, span):
    (found,) = [s for s in spans.all() if span.parent is not None and s.context.span_id == span.parent.span_id]
    return found



def ragtraces(spans) -> dict[str, dict]:
    """ragtrace's record of a run, stage by stage: every rag.* attribute but span ids."""
    return {
        s.attributes["rag.stage"]: {k: v for k, v in s.attributes.items() if k.startswith("rag.") and not k.endswith("span_id")}
        for s in spans.all()
        if "rag.stage" in s.attributes
    }


def strip_wrappers(modules: str | tuple[str, ...], wrappers: str) -> None:
    """OpenLLMetry 0.62.4's ``uninstrument()`` leaves its wrappers on (it hands OpenTelemetry's
    ``unwrap`` "Completions.create" as one attribute name, which it never finds): take the ones
    from ``wrappers`` (a module prefix) off every class of the ``modules`` loaded, so that later
    tests get the library as it was."""
    for name, module in list(sys.modules.items()):
        if not name.startswith(modules):
            continue
        for owner in [v for v in vars(module).values() if isinstance(v, type)]:
            for attribute, value in list(vars(owner).items()):
                while _wrapper_module(value).startswith(wrappers):
                    value = value.__wrapped__
                    setattr(owner, attribute, value)


@contextmanager
def both_on(spans, order: str, library: str, theirs, leftovers: Callable[[], None], **options: object) -> Iterator[object]:
    """The other instrumentor ``theirs`` (OpenLLMetry's here; ``options`` go to its ``instrument()``)
    and ``ragtrace.instrument(library)`` in ``order`` ("ragtrace-first" or theirs first); both off
    afterwards, and what OpenLLMetry's ``uninstrument()`` leaves behind taken away.

    The OpenTelemetry context of before is put back too: LlamaIndex's dispatcher ends its span
    handlers' spans in the order it started them, so two handlers that each attach a context
    (OpenLLMetry's and ragtrace's) don't nest, and the last detach puts back the first one's
    context: ragtrace's ended pipeline stage, with its released span (``_CurrentSpan``), stays
    current in the thread after the query."""
    token = context.attach(context.get_current())
    try:
        if order != "ragtrace-first":
            theirs.instrument(tracer_provider=spans.provider, **options)
        assert ragtrace.instrument(library) == [library]
        if order == "ragtrace-first":
            theirs.instrument(tracer_provider=spans.provider, **options)
        yield theirs
    finally:
        ragtrace.uninstrument(library)
        theirs.uninstrument()
        leftovers()
        context.detach(token)


def openai_both_on(spans, order: str):
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryOpenAI

    return both_on(spans, order, "openai", OpenLLMetryOpenAI(), partial(strip_wrappers, "openai.resources", OPENLLMETRY_OPENAI))


# OpenLLMetry 0.62.4's LangChain ``uninstrument()`` leaves on: the callback manager's __init__
# (which adds its handler to every callback manager), ChatOpenAI's and OpenAI's calls, LangGraph's
# Pregel.stream/astream and Command.__init__, and the agent middleware hooks (it hands each to
# ``unwrap`` as "Class.method", which it never finds). Left on, they parent later tests' spans under
# spans of a provider shut down: test_langchain_agents failed after this file.
langchain_leftovers_off = partial(strip_wrappers, ("langchain_core.callbacks", "langchain_openai", "langgraph", "langchain.agents"), OPENLLMETRY_LANGCHAIN)


def langchain_both_on(spans, order: str):
    from opentelemetry.instrumentation.langchain import LangchainInstrumentor as OpenLLMetryLangChain

    return both_on(spans, order, "langchain", OpenLLMetryLangChain(), langchain_leftovers_off)


def llama_index_handlers_off() -> None:
    """OpenLLMetry 0.62.4's LlamaIndex ``uninstrument()`` does nothing (its core instrumentor's
    ``_uninstrument`` is empty): take its handlers off the dispatcher for the tests after this one."""
    from llama_index.core.instrumentation import get_dispatcher

    dispatcher = get_dispatcher()
    for found in (dispatcher.span_handlers, dispatcher.event_handlers):
        found[:] = [h for h in found if not type(h).__module__.startswith(OPENLLMETRY_LLAMA_INDEX)]


def llama_index_both_on(spans, order: str):
    from opentelemetry.instrumentation.llamaindex import LlamaIndexInstrumentor as OpenLLMetryLlamaIndex

    return both_on(spans, order, "llama_index", OpenLLMetryLlamaIndex(), llama_index_handlers_off)
