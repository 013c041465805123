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
import pydantic
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


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_a_stream_cut_off_without_its_final_event_is_not_scored_as_a_whole_answer(instrumented, chat_server, api):
    """The connection drops before the chunk with the finish_reason (chat) or response.completed
    (Responses) and the SDK's iterator just ends. The app read "Refunds take 5 business days ",
    no citation: scored as it stands that would be cited 0, recall 0.0 where the whole answer gives
    1/3. The citation figures are not measurable (answer_incomplete); retrieved and in context
    are still known (3, 2)."""
    from loopback import ChatCompletions

    url, _ = chat_server
    ChatCompletions.cut_after = 6 if api == "chat" else 8  # chat: role + 5 words; responses: 3 + 5 deltas
    with ragtrace.rag_pipeline("openai-app", query=QUESTION) as run:
        messages = assembled_messages()
        if api == "chat":
            stream = client(url).chat.completions.create(model="gpt-4o-mini", messages=messages, stream=True)
            text = "".join(c.choices[0].delta.content or "" for c in stream)
        else:
            stream = client(url).responses.create(model="gpt-4o-mini", input=messages[0]["content"], stream=True)
            text = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
    assert text == "Refunds take 5 business days "
    assert instrumented.one("generate").attributes["rag.citation.status"] == "answer_incomplete"
    assert run.status == "answer_incomplete" and "recall_proxy" not in run.metrics and "cited" not in run.metrics
    assert (run.metrics["retrieved"], run.metrics["in_context"]) == (3, 2)


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
    resources = openai.resources
    for cls in (resources.chat.completions.Completions, resources.chat.completions.AsyncCompletions, resources.responses.Responses, resources.responses.AsyncResponses):
        assert not any(isinstance(cls.__dict__[method], wrapt.ObjectProxy) for method in ("create", "parse")), cls
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


# --- responses.stream() and .parse() ------------------------------------------------------------
def check_generation(spans, *, response_id: str, stream: bool, roles: list[str]) -> dict:
    """One generate span under the app's pipeline with the request as given (no SDK placeholder
    read as a value), the server's usage, model and id, and the figures of ``assembled_messages``."""
    root, generated = spans.one("pipeline"), spans.one("generate")
    assert generated.parent.span_id == root.context.span_id
    attributes = generated.attributes
    assert (attributes["gen_ai.request.model"], attributes["gen_ai.request.temperature"]) == ("gpt-4o-mini", 0.0)
    assert "gen_ai.request.max_tokens" not in attributes  # the SDK's ``omit`` is no value
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (42, 9)
    assert (attributes["gen_ai.response.id"], attributes["gen_ai.response.model"]) == (response_id, "gpt-4o-mini-2024-07-18")
    assert attributes.get("gen_ai.request.stream", False) is stream
    assert [m["role"] for m in json.loads(attributes["gen_ai.input.messages"])] == roles
    assert list(attributes["rag.citation.ids"]) == ["kb-refunds"]
    metrics = {k.removeprefix("rag.metrics."): v for k, v in root.attributes.items() if k.startswith("rag.metrics.")}
    assert (metrics["retrieved"], metrics["in_context"], metrics["cited"]) == (3, 2, 1)
    assert math.isclose(metrics["recall_proxy"], 1 / 3) and metrics["context_utilization"] == 0.5
    return attributes


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_responses_stream_is_recorded_as_the_app_reads_its_events(instrumented, chat_server, caplog, asynchronous):
    """``responses.stream()`` builds its request through ``responses.create(stream=True)`` with every
    argument spelled out (``omit`` for the absent ones); the stream manager reaches the app as the
    SDK made it, and its events are recorded as the app reads them."""
    from openai.lib.streaming.responses import AsyncResponseStreamManager, ResponseStreamManager

    url, received = chat_server

    async def app() -> tuple[str, list[str]]:
        with ragtrace.rag_pipeline("openai-app", query=QUESTION):
            (message,) = assembled_messages()
            options = {"model": "gpt-4o-mini", "instructions": "Cite your sources.", "input": message["content"], "temperature": 0}
            if not asynchronous:
                manager = client(url).responses.stream(**options)
                assert type(manager) is ResponseStreamManager and not received
                with manager as stream:
                    first = next(iter(stream))
                    assert not instrumented.by_stage("generate"), "the span ends with the stream"
                    kinds = [first.type, *(event.type for event in stream)]
                    return stream.get_final_response().output_text, kinds
            manager = client(url, openai.AsyncOpenAI).responses.stream(**options)
            assert type(manager) is AsyncResponseStreamManager
            async with manager as stream:
                kinds = [event.type async for event in stream]
                return (await stream.get_final_response()).output_text, kinds

    answer, kinds = asyncio.run(app())
    assert answer == ANSWER
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed" and kinds.count("response.output_text.delta") == 6
    attributes = check_generation(instrumented, response_id="resp-test-1", stream=True, roles=["system", "user"])
    assert json.loads(attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == ANSWER
    assert not [r for r in caplog.records if r.name == "ragtrace"], [r.getMessage() for r in caplog.records]


class Answer(pydantic.BaseModel):
    text: str


@pytest.mark.parametrize("api", ["chat.completions", "responses"])
@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_parse_is_a_scored_generate_span_and_the_app_gets_the_parsed_object(instrumented, chat_server, monkeypatch, api, asynchronous):
    """``chat.completions.parse`` / ``responses.parse`` post the request themselves (not through
    ``create``): each is a generate span like ``create``'s, the answer the JSON the model wrote."""
    import loopback

    structured = json.dumps({"text": ANSWER})
    monkeypatch.setattr(loopback.ChatCompletions, "answer", structured)
    url, received = chat_server

    async def app() -> object:
        with ragtrace.rag_pipeline("openai-app", query=QUESTION):
            messages = assembled_messages()
            sdk = client(url, openai.AsyncOpenAI if asynchronous else openai.OpenAI)
            if api == "chat.completions":
                result = sdk.chat.completions.parse(model="gpt-4o-mini", messages=messages, temperature=0, response_format=Answer)
            else:
                result = sdk.responses.parse(model="gpt-4o-mini", input=messages[0]["content"], temperature=0, text_format=Answer)
            return await result if asynchronous else result

    parsed = asyncio.run(app())
    if api == "chat.completions":
        assert isinstance(parsed, openai.types.chat.ParsedChatCompletion) and parsed.choices[0].message.parsed == Answer(text=ANSWER)
        assert received[-1]["path"] == "/v1/chat/completions" and received[-1]["body"]["response_format"]["type"] == "json_schema"
    else:
        assert isinstance(parsed, openai.types.responses.ParsedResponse) and parsed.output_parsed == Answer(text=ANSWER)
        assert received[-1]["path"] == "/v1/responses"
    attributes = check_generation(
        instrumented, response_id="chatcmpl-test-1" if api == "chat.completions" else "resp-test-1", stream=False, roles=["user"]
    )
    assert json.loads(attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == structured


def test_redact_mode_exports_no_text_of_a_stream_or_a_parse(spans, chat_server):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    ragtrace.instrument("openai")
    url, _ = chat_server
    try:
        with ragtrace.rag_pipeline("openai-app", query=QUESTION):
            (message,) = assembled_messages()
            with client(url).responses.stream(model="gpt-4o-mini", input=message["content"]) as stream:
                assert stream.get_final_response().output_text == ANSWER
            assert client(url).chat.completions.parse(model="gpt-4o-mini", messages=[message]).choices[0].message.content == ANSWER
    finally:
        ragtrace.uninstrument("openai")
    assert len(spans.by_stage("generate")) == 2
    exported = repr([dict(s.attributes) for s in spans.all()]) + repr([e.attributes for s in spans.all() for e in s.events])
    for text in [*(d["content"] for d in DOCS), QUESTION, "5 business days"]:
        assert text not in exported


def test_chat_completions_stream_is_recorded_as_the_app_reads_it(instrumented, chat_server, caplog):
    """``chat.completions.stream()`` also calls ``create(stream=True)`` with every argument spelled out."""
    from openai.lib.streaming.chat import ChatCompletionStreamManager

    url, _ = chat_server
    with ragtrace.rag_pipeline("openai-app", query=QUESTION):
        messages = assembled_messages()
        manager = client(url).chat.completions.stream(model="gpt-4o-mini", messages=messages, temperature=0, stream_options={"include_usage": True})
        assert type(manager) is ChatCompletionStreamManager
        with manager as stream:
            kinds = [event.type for event in stream]
            assert stream.get_final_completion().choices[0].message.content == ANSWER
    assert kinds.count("content.delta") == 7  # the role chunk's empty content, then one per word
    attributes = check_generation(instrumented, response_id="chatcmpl-test-1", stream=True, roles=["user"])
    assert json.loads(attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == ANSWER
    assert not [r for r in caplog.records if r.name == "ragtrace"], [r.getMessage() for r in caplog.records]


def test_the_answering_side_of_a_cross_process_pipeline_scores_the_sdk_call(instrumented, chat_server):
    """The openai integration inside continue_pipeline: the same figures as in one process."""
    url, _ = chat_server
    headers: dict = {}
    with ragtrace.rag_pipeline("openai-app", query=QUESTION) as origin:
        messages = assembled_messages()
        assert ragtrace.inject(headers)
    with ragtrace.continue_pipeline(headers) as run:
        completion = client(url).chat.completions.create(model="gpt-4o-mini", messages=messages, temperature=0)
    assert completion.choices[0].message.content == ANSWER and origin.status == "delegated"
    generated = instrumented.one("generate")
    assert generated.parent.span_id == instrumented.one("pipeline_segment").context.span_id
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-refunds"]
    assert (run.metrics["retrieved"], run.metrics["in_context"], run.metrics["cited"]) == (3, 2, 1)
    assert math.isclose(run.metrics["recall_proxy"], 1 / 3) and run.metrics["context_utilization"] == 0.5
