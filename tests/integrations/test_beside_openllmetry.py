"""ragtrace beside OpenLLMetry's (Traceloop's) instrumentors, on the apps the framework tests build.

Each test turns on OpenLLMetry's instrumentor and ``ragtrace.instrument()`` in both orders and
checks that the app gets what it gets with neither, that ragtrace's figures are the hand-computed
ones of the ragtrace-alone tests, which spans are duplicated and what nests inside what
(docs/integrations.md, "Beside other instrumentors"), and that uninstrumenting either one leaves
the other working.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import openai
import pytest

import ragtrace
from loopback import ANSWER

ORDERS = ["openllmetry-first", "ragtrace-first"]


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


def roots_and_children(spans) -> dict[str, list[str]]:
    """Each span's name -> its children's names: the span tree, one level at a time."""
    everything = spans.all()
    return {
        s.name: sorted(c.name for c in everything if c.parent is not None and c.parent.span_id == s.context.span_id)
        for s in everything
    }


def parent_of(spans, span):
    (found,) = [s for s in spans.all() if span.parent is not None and s.context.span_id == span.parent.span_id]
    return found


# --- the OpenAI SDK: OpenLLMetry wraps the same chat.completions.create as ragtrace ---------------
from integrations.test_openai import QUESTION as OPENAI_QUESTION  # noqa: E402
from integrations.test_openai import assembled_messages, check_trace, client  # noqa: E402

OPENLLMETRY_OPENAI = "opentelemetry.instrumentation.openai"


def _strip_openllmetry_openai() -> None:
    """OpenLLMetry's OpenAI ``uninstrument()`` (0.62.4) leaves its wrappers on the SDK's classes (it
    hands OpenTelemetry's ``unwrap`` "Completions.create" as one attribute, which it never finds):
    take them off so that later tests get the SDK as it was."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("openai.resources"):
            continue
        for owner in [v for v in vars(module).values() if isinstance(v, type)]:
            for attribute, value in list(vars(owner).items()):
                while _wrapper_module(value).startswith(OPENLLMETRY_OPENAI):
                    value = value.__wrapped__
                    setattr(owner, attribute, value)


@contextmanager
def openai_both_on(spans, order: str) -> Iterator[object]:
    """OpenLLMetry's OpenAIInstrumentor and ragtrace's, in ``order``; both off afterwards."""
    from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryOpenAI

    theirs = OpenLLMetryOpenAI()
    try:
        if order == "openllmetry-first":
            theirs.instrument(tracer_provider=spans.provider)
        assert ragtrace.instrument("openai") == ["openai"]
        if order == "ragtrace-first":
            theirs.instrument(tracer_provider=spans.provider)
        yield theirs
    finally:
        ragtrace.uninstrument("openai")
        theirs.uninstrument()
        _strip_openllmetry_openai()


async def _openai_app(url: str, stream: bool, asynchronous: bool) -> tuple[str, list[dict], type]:
    """The SDK app of test_openai.py: its answer, the chunks it read (as dicts) and the type it got."""
    options = {"model": "gpt-4o-mini", "temperature": 0}
    if stream:
        options.update(stream=True, stream_options={"include_usage": True})
    with ragtrace.rag_pipeline("openai-app", query=OPENAI_QUESTION):
        messages = assembled_messages()
        create = client(url, openai.AsyncOpenAI if asynchronous else openai.OpenAI).chat.completions.create
        result = create(messages=messages, **options)
        result = await result if asynchronous else result
        if not stream:
            return result.choices[0].message.content, [result.model_dump()], type(result)
        assert isinstance(result, openai.AsyncStream if asynchronous else openai.Stream)
        if asynchronous:
            async with result:
                chunks = [c async for c in result]
        else:
            with result:
                chunks = list(result)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    return text, [c.model_dump() for c in chunks], None  # a stream reaches the app behind proxies


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_openai_beside_openllmetry_the_app_and_the_figures_are_unchanged(spans, chat_server, order, stream, asynchronous):
    url, received = chat_server
    alone = asyncio.run(_openai_app(url, stream, asynchronous))  # neither instrumentor on
    spans.clear()
    with openai_both_on(spans, order):
        got = asyncio.run(_openai_app(url, stream, asynchronous))
    assert got[0] == ANSWER
    assert got[1:] == alone[1:], "the same completion or chunks, of the same type"
    assert received[-1]["body"] == received[0]["body"], "the same request"

    (theirs,) = [s for s in spans.all() if s.instrumentation_scope.name.startswith(OPENLLMETRY_OPENAI)]
    assert theirs.name == "openai.chat"  # the one duplicated span: the same call as ragtrace's generate span
    generated, root = spans.one("generate"), spans.one("pipeline")
    assert len(spans.all()) == 5  # root, retrieve, assemble, generate, and OpenLLMetry's
    if order == "ragtrace-first":  # the wrapper added last runs outermost: OpenLLMetry's span holds ragtrace's
        assert parent_of(spans, generated) is theirs and parent_of(spans, theirs) is root
    else:
        assert parent_of(spans, theirs) is generated
    check_trace(spans, stream=stream, parent=theirs if order == "ragtrace-first" else root)


@pytest.mark.parametrize("order", ORDERS)
def test_openai_uninstrumenting_ragtrace_leaves_openllmetry_on_alone(spans, chat_server, order):
    url, _ = chat_server
    completions = openai.resources.chat.completions.Completions
    with openai_both_on(spans, order):
        ragtrace.uninstrument("openai")
        assert [m.split(".")[0] for m in wrapper_modules(vars(completions)["create"])] == ["opentelemetry"]
        text, _, _ = asyncio.run(_openai_app(url, stream=False, asynchronous=False))
        assert text == ANSWER
        assert [s.name for s in spans.all() if "rag.stage" not in s.attributes] == ["openai.chat"]
        assert spans.by_stage("generate") == []  # ragtrace's retrieve/assemble are the app's own handles
        spans.clear()
        assert ragtrace.instrument("openai") == ["openai"]  # on again: wrapped once, outermost
        assert [m.split(".")[0] for m in wrapper_modules(vars(completions)["create"])] == ["ragtrace", "opentelemetry"]
        asyncio.run(_openai_app(url, stream=False, asynchronous=False))
        assert len(spans.by_stage("generate")) == 1


@pytest.mark.parametrize("order", ORDERS)
def test_openai_uninstrumenting_openllmetry_leaves_ragtrace_working(spans, chat_server, order):
    """OpenLLMetry 0.62.4's ``uninstrument()`` leaves its wrapper on and recording (see
    ``_strip_openllmetry_openai``): ragtrace's figures are unchanged either way."""
    url, _ = chat_server
    with openai_both_on(spans, order) as theirs:
        theirs.uninstrument()
        for stream in (False, True):
            spans.clear()
            text, _, _ = asyncio.run(_openai_app(url, stream=stream, asynchronous=False))
            assert text == ANSWER
            generated = spans.one("generate")
            theirs_left = [s for s in spans.all() if "rag.stage" not in s.attributes]
            assert [s.name for s in theirs_left] == ["openai.chat"]  # still there: OpenLLMetry's, not ragtrace's, doing
            check_trace(spans, stream=stream, parent=theirs_left[0] if order == "ragtrace-first" else spans.one("pipeline"))
            assert generated.attributes["rag.citation.ids"]


@pytest.mark.parametrize("order", ORDERS)
def test_openai_a_call_inside_the_users_generate_span_is_recorded_once(spans, chat_server, order):
    """OpenLLMetry's span, current between the user's ``ragtrace.generate()`` and ragtrace's
    wrapper (ragtrace-first), must not hide the open generate stage: one generation, not two."""
    url, _ = chat_server
    with openai_both_on(spans, order):
        with ragtrace.rag_pipeline("openai-app", query=OPENAI_QUESTION) as run:
            messages = assembled_messages()
            with ragtrace.generate("gpt-4o-mini", "openai", prompt=messages) as g:
                g.record(client(url).chat.completions.create(model="gpt-4o-mini", messages=messages))
    generated = spans.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-refunds"]
    (theirs,) = [s for s in spans.all() if "rag.stage" not in s.attributes]
    assert parent_of(spans, theirs) is generated  # OpenLLMetry's span inside the user's generate span
    assert (run.metrics["retrieved"], run.metrics["in_context"], run.metrics["cited"]) == (3, 2, 1)
