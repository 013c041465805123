"""The OpenAI SDK beside OpenLLMetry's OpenAIInstrumentor, which wraps the same ``create`` (and
``parse``) methods as ragtrace (tests/integrations/openllmetry.py says what each test checks)."""

from __future__ import annotations

import asyncio
import math

import openai
import pytest

import ragtrace
from integrations.openllmetry import OPENLLMETRY_OPENAI, ORDERS, openai_both_on, parent_of, wrapper_modules
from integrations.test_openai import QUESTION, assembled_messages, check_trace, client
from loopback import ANSWER


async def _openai_app(url: str, stream: bool, asynchronous: bool) -> tuple[str, list[dict], type]:
    """The SDK app of test_openai.py: its answer, the chunks it read (as dicts) and the type it got."""
    options = {"model": "gpt-4o-mini", "temperature": 0}
    if stream:
        options.update(stream=True, stream_options={"include_usage": True})
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
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
    ``strip_wrappers``): ragtrace's figures are unchanged either way."""
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
        with ragtrace.rag_pipeline("openai-app", query=QUESTION) as run:
            messages = assembled_messages()
            with ragtrace.generate("gpt-4o-mini", "openai", prompt=messages) as g:
                g.record(client(url).chat.completions.create(model="gpt-4o-mini", messages=messages))
    generated = spans.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-refunds"]
    (theirs,) = [s for s in spans.all() if "rag.stage" not in s.attributes]
    assert parent_of(spans, theirs) is generated  # OpenLLMetry's span inside the user's generate span
    assert (run.metrics["retrieved"], run.metrics["in_context"], run.metrics["cited"]) == (3, 2, 1)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("call", ["responses.create", "responses.create stream", "chat.completions.parse"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_openai_responses_and_parse_beside_openllmetry(spans, chat_server, order, call, asynchronous):
    """The Responses API and ``parse`` (OpenLLMetry wraps both too): the same answer, one
    generate span, the figures of the ragtrace-alone tests."""
    url, _ = chat_server

    async def app() -> str:
        with ragtrace.rag_pipeline("openai-app", query=QUESTION):
            (message,) = assembled_messages()
            sdk = client(url, openai.AsyncOpenAI if asynchronous else openai.OpenAI)
            if call == "chat.completions.parse":
                result = sdk.chat.completions.parse(model="gpt-4o-mini", messages=[message])
                return (await result if asynchronous else result).choices[0].message.content
            stream = call.endswith("stream")
            result = sdk.responses.create(model="gpt-4o-mini", instructions="Cite.", input=message["content"], stream=stream)
            result = await result if asynchronous else result
            if not stream:
                return result.output_text
            if asynchronous:
                return "".join([e.delta async for e in result if e.type == "response.output_text.delta"])
            return "".join(e.delta for e in result if e.type == "response.output_text.delta")

    with openai_both_on(spans, order):
        assert asyncio.run(app()) == ANSWER
    generated, root = spans.one("generate"), spans.one("pipeline")
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-refunds"]
    assert (generated.attributes["gen_ai.usage.input_tokens"], generated.attributes["gen_ai.usage.output_tokens"]) == (42, 9)
    got = {k.removeprefix("rag.metrics."): v for k, v in root.attributes.items() if k.startswith("rag.metrics.")}
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 2, 1)
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_utilization"] == 0.5
    assert len({s.context.trace_id for s in spans.all()}) == 1


@pytest.mark.parametrize("order", ORDERS)
def test_openai_embeddings_beside_openllmetry(spans, chat_server, order):
    """``embeddings.create``, which both wrap: the same vectors, one embed span of ragtrace's, and
    uninstrumenting ragtrace leaves OpenLLMetry's wrapper alone."""
    url, _ = chat_server

    def embed() -> list[float]:
        return client(url).embeddings.create(model="text-embedding-3-small", input=QUESTION).data[0].embedding

    alone = embed()
    embeddings = openai.resources.embeddings.Embeddings
    with openai_both_on(spans, order):
        assert embed() == alone
        (embedded,) = spans.by_stage("embed")
        assert (embedded.attributes["gen_ai.embeddings.dimension.count"], embedded.attributes["gen_ai.usage.input_tokens"]) == (4, 7)
        (theirs,) = [s for s in spans.all() if s.instrumentation_scope.name.startswith(OPENLLMETRY_OPENAI)]
        inner, outer = (embedded, theirs) if order == "ragtrace-first" else (theirs, embedded)  # the last one on is outermost
        assert parent_of(spans, inner) is outer and outer.parent is None
        ragtrace.uninstrument("openai")
        assert [m.split(".")[0] for m in wrapper_modules(vars(embeddings)["create"])] == ["opentelemetry"]
