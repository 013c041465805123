"""The OpenAI SDK integration against a real chat-completions server on loopback (plain and SSE).

Each app is the SDK used as its docs show; ragtrace is turned on by one line. The retrieval and
the assembly are the app's own (the SDK has none), so the figures are hand-computed from them:
3 retrieved, 2 placed, the answer cites [1] -> recall 1/3, utilisation 1/2.
"""

from __future__ import annotations

import asyncio
import json
import math

import openai
import pytest
import wrapt
from opentelemetry.trace import StatusCode

import ragtrace
from loopback import ANSWER
from ragtrace._internal.integrations.openai import OpenAIInstrumentor

DOCS = [
    {"id": "kb-refunds", "content": "Refunds reach the original card within 5 business days."},
    {"id": "kb-credit", "content": "Store credit is issued immediately instead of a refund."},
    {"id": "kb-shipping", "content": "Shipping is free for orders over 50 euros."},
]
QUESTION = "How long does a refund take?"


@pytest.fixture
def instrumented(spans):
    ragtrace.instrument("openai")
    yield spans
    ragtrace.uninstrument("openai")


def client(url: str, cls: type = openai.OpenAI):
    return cls(base_url=f"{url}/v1", api_key="sk-test", max_retries=0)


def assembled_messages() -> list[dict]:
    """Retrieve and assemble with ragtrace's own handles, as an SDK app would."""
    with ragtrace.retrieve(QUESTION, data_source="kb") as r:
        r.record(DOCS)
    with ragtrace.assemble() as ctx:
        for chunk in r.chunks[:2]:
            ctx.add(chunk)
        return ctx.render([{"role": "user", "content": "Sources:\n{context}\n\nQuestion: {question}"}], question=QUESTION)


def check_trace(spans, *, stream: bool, parent=None) -> None:
    """The generate span (under ``parent``, by default the root) and the hand-computed figures."""
    root = spans.one("pipeline")
    generated = spans.one("generate")
    assert generated.parent.span_id == (parent or root).context.span_id
    attributes = generated.attributes
    assert generated.name == "chat gpt-4o-mini"
    assert attributes["gen_ai.provider.name"] == "openai"
    assert attributes["gen_ai.request.model"] == "gpt-4o-mini"
    assert attributes["gen_ai.request.temperature"] == 0.0
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (42, 9)
    assert attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert attributes["gen_ai.response.id"] == "chatcmpl-test-1"
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["stop"]
    assert attributes.get("gen_ai.request.stream", False) is stream
    assert list(attributes["rag.citation.ids"]) == ["kb-refunds"]
    (message,) = json.loads(attributes["gen_ai.input.messages"])
    assert "[1] Refunds reach the original card" in message["parts"][0]["content"]
    output = json.loads(attributes["gen_ai.output.messages"])
    assert output[0]["parts"][0]["content"] == ANSWER
    metrics = {k.removeprefix("rag.metrics."): v for k, v in root.attributes.items() if k.startswith("rag.metrics.")}
    assert (metrics["retrieved"], metrics["in_context"], metrics["cited"]) == (3, 2, 1)
    assert math.isclose(metrics["recall_proxy"], 1 / 3) and metrics["context_utilization"] == 0.5


def test_a_completion_becomes_a_scored_generate_span(instrumented, chat_server):
    url, received = chat_server
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
        messages = assembled_messages()
        completion = client(url).chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0)
    assert isinstance(completion, openai.types.chat.ChatCompletion)  # the SDK's own object, unchanged
    assert completion.choices[0].message.content == ANSWER
    assert received[0]["body"]["messages"] == messages
    check_trace(instrumented, stream=False)


def test_a_stream_reaches_the_app_unread_and_is_recorded_as_it_is_read(instrumented, chat_server):
    url, _ = chat_server
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
        messages = assembled_messages()
        stream = client(url).chat.completions.create(
            model="gpt-4o-mini", messages=messages, temperature=0, stream=True, stream_options={"include_usage": True}
        )
        assert isinstance(stream, openai.Stream)
        assert not instrumented.by_stage("generate"), "the span ends with the stream, not before"
        with stream as same:
            assert same is stream
            chunks = list(same)
    assert chunks[-1].choices == [] and chunks[-1].usage.prompt_tokens == 42  # the usage chunk reached the app
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == ANSWER
    check_trace(instrumented, stream=True)


def test_an_async_client_plain_and_streamed(instrumented, chat_server):
    url, _ = chat_server

    async def app(stream: bool) -> str:
        async with ragtrace.rag_pipeline("openai-app", query=QUESTION):
            messages = assembled_messages()
            create = client(url, openai.AsyncOpenAI).chat.completions.create
            if not stream:
                return (await create(model="gpt-4o-mini", messages=messages, temperature=0)).choices[0].message.content
            response = await create(model="gpt-4o-mini", messages=messages, temperature=0, stream=True, stream_options={"include_usage": True})
            assert isinstance(response, openai.AsyncStream)
            async with response:
                return "".join([c.choices[0].delta.content or "" async for c in response if c.choices])

    for stream in (False, True):
        instrumented.clear()
        assert asyncio.run(app(stream)) == ANSWER
        check_trace(instrumented, stream=stream)


def test_a_stream_closed_early_ends_its_span(instrumented, chat_server):
    url, _ = chat_server
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
        messages = assembled_messages()
        with client(url).chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True) as stream:
            read = [next(stream), next(stream)]
    assert [c.choices[0].delta.content for c in read] == ["", "Refunds "]
    generated = instrumented.one("generate")  # ended when the app closed the stream
    assert json.loads(generated.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == "Refunds "


def test_a_stream_the_app_drops_unfinished_ends_its_span_with_what_was_read(instrumented, chat_server):
    import gc

    url, _ = chat_server
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
        stream = client(url).chat.completions.create(model="gpt-4o-mini", messages=assembled_messages(), stream=True)
        read = [next(stream), next(stream)]
        del stream
        gc.collect()
        generated = instrumented.one("generate")  # the shared passthrough proxy ends it when dropped
    assert [c.choices[0].delta.content for c in read] == ["", "Refunds "]
    assert json.loads(generated.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == "Refunds "


def test_the_apps_error_passes_through_and_is_recorded(instrumented):
    with pytest.raises(openai.APIConnectionError):
        with ragtrace.rag_pipeline("openai-app"):
            openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="sk-test", max_retries=0).chat.completions.create(
                model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}]
            )
    generated = instrumented.one("generate")
    assert generated.status.status_code is StatusCode.ERROR
    assert generated.attributes["error.type"] == "APIConnectionError"


def test_a_call_inside_the_users_own_generate_span_is_not_recorded_twice(instrumented, chat_server):
    url, _ = chat_server
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
        messages = assembled_messages()
        with ragtrace.generate("gpt-4o-mini", "openai", prompt=messages) as g:
            g.record(client(url).chat.completions.create(model="gpt-4o-mini", messages=messages))
    assert len(instrumented.by_stage("generate")) == 1
    assert list(instrumented.one("generate").attributes["rag.citation.ids"]) == ["kb-refunds"]


def test_uninstrument_restores_the_sdk(spans, chat_server):
    url, _ = chat_server
    OpenAIInstrumentor().instrument()
    OpenAIInstrumentor().uninstrument()
    for cls in (openai.resources.chat.completions.Completions, openai.resources.chat.completions.AsyncCompletions):
        assert not isinstance(cls.__dict__["create"], wrapt.ObjectProxy)
    client(url).chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}])
    assert spans.all() == []


def test_beside_openinference_nothing_breaks_and_the_figures_hold(instrumented, chat_server):
    from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInferenceOpenAI

    url, _ = chat_server
    OpenInferenceOpenAI().instrument(tracer_provider=instrumented.provider)
    try:
        with ragtrace.rag_pipeline("openai-app", query=QUESTION):
            messages = assembled_messages()
            client(url).chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0)
    finally:
        OpenInferenceOpenAI().uninstrument()
    others = [s for s in instrumented.all() if "rag.stage" not in s.attributes]
    assert [s.name for s in others] == ["ChatCompletion"]  # OpenInference's span of the HTTP request
    assert others[0].parent.span_id == instrumented.one("generate").context.span_id  # nested, one trace
    check_trace(instrumented, stream=False)


def test_a_stream_records_its_time_to_first_chunk_through_the_generate_stage(instrumented, chat_server, metric_reader):
    url, _ = chat_server
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
        with client(url).chat.completions.create(model="gpt-4o-mini", messages=assembled_messages(), stream=True) as stream:
            chunks = list(stream)
    generated = instrumented.one("generate")
    first = generated.attributes["gen_ai.response.time_to_first_chunk"]
    assert 0 < first <= (generated.end_time - generated.start_time) / 1e9
    data = metric_reader.get_metrics_data()
    found = {m.name: m.data.data_points for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    (ttfc,) = found["gen_ai.client.operation.time_to_first_chunk"]
    assert ttfc.count == 1 and ttfc.sum == pytest.approx(first)
    (per_chunk,) = found["gen_ai.client.operation.time_per_output_chunk"]
    assert per_chunk.count == len(chunks) - 1  # one per chunk after the first


def test_a_raw_response_is_passed_through_and_its_answer_not_guessed(instrumented, chat_server):
    url, _ = chat_server
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
        messages = assembled_messages()
        raw = client(url).chat.completions.with_raw_response.create(model="gpt-4o-mini", messages=messages)
    assert raw.parse().choices[0].message.content == ANSWER  # the app's object, unread by ragtrace
    generated = instrumented.one("generate").attributes
    assert "gen_ai.output.messages" not in generated and "rag.citation.ids" not in generated
    assert "recall_proxy" not in {k.removeprefix("rag.metrics.") for k in instrumented.one("pipeline").attributes}


# --- the Responses API ----------------------------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True], ids=["response", "stream"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_responses_create_is_a_scored_generate_span(instrumented, chat_server, stream, asynchronous):
    url, received = chat_server

    async def app() -> str:
        with ragtrace.rag_pipeline("openai-app", query=QUESTION):
            (message,) = assembled_messages()
            options = {"model": "gpt-4o-mini", "instructions": "Cite your sources.", "input": message["content"], "temperature": 0}
            create = client(url, openai.AsyncOpenAI if asynchronous else openai.OpenAI).responses.create
            result = create(**options, stream=stream)
            result = await result if asynchronous else result
            if not stream:
                assert type(result) is openai.types.responses.Response
                return result.output_text
            assert isinstance(result, openai.AsyncStream if asynchronous else openai.Stream)
            assert not instrumented.by_stage("generate"), "the span ends with the stream"
            if asynchronous:
                return "".join([e.delta async for e in result if e.type == "response.output_text.delta"])
            return "".join(e.delta for e in result if e.type == "response.output_text.delta")

    assert asyncio.run(app()) == ANSWER
    assert received[-1]["path"] == "/v1/responses"
    root, generated = instrumented.one("pipeline"), instrumented.one("generate")
    assert generated.parent.span_id == root.context.span_id
    attributes = generated.attributes
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (42, 9)
    assert attributes["gen_ai.response.id"] == "resp-test-1"
    assert attributes["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert attributes.get("gen_ai.request.stream", False) is stream
    assert [m["role"] for m in json.loads(attributes["gen_ai.input.messages"])] == ["system", "user"]
    assert json.loads(attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == ANSWER
    assert list(attributes["rag.citation.ids"]) == ["kb-refunds"]
    metrics = {k.removeprefix("rag.metrics."): v for k, v in root.attributes.items() if k.startswith("rag.metrics.")}
    assert (metrics["retrieved"], metrics["in_context"], metrics["cited"]) == (3, 2, 1)
