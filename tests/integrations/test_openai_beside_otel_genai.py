"""The OpenAI SDK beside the OpenTelemetry project's own OpenAI instrumentor
(``opentelemetry-instrumentation-genai-openai`` 1.3b0, module ``opentelemetry.instrumentation.genai.openai``),
which wraps the same ``create`` as ragtrace, in both orders, with test_openai.py's SDK app (a
``rag_pipeline`` with its retrieval and assembly, then ``chat.completions.create``, plain and
streamed, sync and async, against the loopback server): the app gets the same completion or chunks,
every ``rag.*`` attribute is what ragtrace alone writes, one trace, and their ``chat`` span is the
one duplicate, inside ragtrace's generate span or around it (the wrapper added last runs
outermost). Uninstrumenting either leaves the other as it is alone; both off, ``create`` is bare.
"""

from __future__ import annotations

import asyncio

import openai
import pytest

import ragtrace
from integrations import openllmetry
from integrations.openllmetry import parent_of, ragtraces, wrapper_modules
from integrations.test_openai import check_trace
from integrations.test_openai_beside_openllmetry import _openai_app
from loopback import ANSWER

THEIRS = "opentelemetry.instrumentation.genai.openai"
ORDERS = ["theirs-first", "ragtrace-first"]


def both_on(spans, order: str):
    from opentelemetry.instrumentation.genai.openai import OpenAIInstrumentor

    return openllmetry.both_on(spans, order, "openai", OpenAIInstrumentor(), lambda: None)


def theirs_of(spans) -> list:
    return [s for s in spans.all() if s.instrumentation_scope.name == THEIRS]


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_openai_beside_the_official_instrumentor_the_app_and_the_figures_are_unchanged(spans, chat_server, order, stream, asynchronous):
    url, received = chat_server
    plain = asyncio.run(_openai_app(url, stream, asynchronous))  # neither on
    ragtrace.instrument("openai")
    try:
        spans.clear()
        assert asyncio.run(_openai_app(url, stream, asynchronous))[1:] == plain[1:]
        alone = ragtraces(spans)
    finally:
        ragtrace.uninstrument("openai")
    spans.clear()
    with both_on(spans, order):
        got = asyncio.run(_openai_app(url, stream, asynchronous))
    assert got[0] == ANSWER and got[1:] == plain[1:], "the same completion or chunks, of the same type"
    assert received[-1]["body"] == received[0]["body"], "the same request"
    assert ragtraces(spans) == alone  # every rag.* attribute as with ragtrace alone
    assert len({s.context.trace_id for s in spans.all()}) == 1
    (theirs,) = theirs_of(spans)
    assert (theirs.name, theirs.attributes["gen_ai.operation.name"]) == ("chat gpt-4o-mini", "chat")
    assert len(spans.all()) == 5  # root, retrieve, assemble, generate, and theirs
    generated, root = spans.one("generate"), spans.one("pipeline")
    if order == "ragtrace-first":
        assert parent_of(spans, theirs) is root
    else:
        assert parent_of(spans, theirs) is generated
    check_trace(spans, stream=stream, parent=theirs if order == "ragtrace-first" else root)


def create_wrappers() -> list[str]:
    """Who wraps ``Completions.create``, outermost first."""
    return [m.split(".")[0] for m in wrapper_modules(vars(openai.resources.chat.completions.Completions)["create"])]


def wrapped_anywhere() -> dict[str, list[str]]:
    """Every method of the SDK's resource classes either tool wraps that still has a wrapper."""
    from openai.resources import embeddings
    from openai.resources.chat import completions
    from openai.resources.responses import responses

    owners = (completions.Completions, completions.AsyncCompletions, embeddings.Embeddings, embeddings.AsyncEmbeddings, responses.Responses, responses.AsyncResponses)
    found = {f"{o.__name__}.{n}": wrapper_modules(v) for o in owners for n, v in vars(o).items()}
    return {k: v for k, v in found.items() if v}


@pytest.mark.parametrize("order", ORDERS)
def test_openai_uninstrumenting_ragtrace_leaves_theirs_on_alone(spans, chat_server, order):
    url, _ = chat_server
    assert wrapped_anywhere() == {}
    with both_on(spans, order) as theirs:
        assert create_wrappers() == (["opentelemetry", "ragtrace"] if order == "ragtrace-first" else ["ragtrace", "opentelemetry"])
        ragtrace.uninstrument("openai")  # ragtrace's own wrapper, wherever it sits
        assert create_wrappers() == ["opentelemetry"]
        assert asyncio.run(_openai_app(url, stream=False, asynchronous=False))[0] == ANSWER
        assert [s.name for s in theirs_of(spans)] == ["chat gpt-4o-mini"] and spans.by_stage("generate") == []
        theirs.uninstrument()
        assert create_wrappers() == []
    assert wrapped_anywhere() == {}


@pytest.mark.parametrize("order", ORDERS)
def test_openai_uninstrumenting_theirs_in_reverse_order_leaves_ragtrace_as_alone(spans, chat_server, order):
    """Their ``uninstrument()`` takes off the outermost wrapper (OpenTelemetry's ``unwrap``), so it
    takes theirs off only when it was instrumented last; instrumented first, it takes ragtrace's
    (docs/integrations.md: uninstrument in reverse order)."""
    url, _ = chat_server
    with both_on(spans, order) as theirs:
        theirs.uninstrument()
        if order == "theirs-first":  # theirs was first, so it is inside ragtrace's: ragtrace's goes
            assert create_wrappers() == ["opentelemetry"]
            ragtrace.uninstrument("openai")  # what the wrong order leaves: theirs, ragtrace's where theirs weren't
            theirs._uninstrument()  # takes the outermost again: theirs now
            assert wrapped_anywhere() == {}
            return
        assert create_wrappers() == ["ragtrace"]
        for stream in (False, True):
            spans.clear()
            assert asyncio.run(_openai_app(url, stream=stream, asynchronous=False))[0] == ANSWER
            assert theirs_of(spans) == []
            check_trace(spans, stream=stream)
    assert wrapped_anywhere() == {}
