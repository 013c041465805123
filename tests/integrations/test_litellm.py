"""LiteLLM through its own callback interface (ragtrace's ``CustomLogger``), run the way its docs
teach: ``litellm.vector_stores.search`` then ``litellm.completion``, against the loopback server
(tests/loopback.py, which speaks the OpenAI API), ``completion(mock_response=...)`` inside a
``rag_pipeline``, and ``litellm.rerank`` against a loopback Cohere stub (``rerank(mock_response=)``
is ignored for Cohere and would go to the network).

By hand, for the search-then-answer app: the store finds 3 chunks (two of one file), the app shows
the first 2 as [1], [2], the answer "Refunds take 5 business days [1]." cites [1]: retrieved 3, in
context 2 (located), cited 1, recall 1/3, utilisation 1/2. Usage 42 + 9 tokens on gpt-4o-mini, at
LiteLLM's bundled prices (0.15 and 0.60 USD per million): 42 * 0.15e-6 + 9 * 0.6e-6 = 1.17e-05 USD.

LiteLLM logs a call's end after the call returned, from its own threads: each test waits for
LiteLLM's logging (``settled``) before reading the spans, as an exporter would see them.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import os
import subprocess
import sys
import threading
import time

import pytest

import ragtrace
from fresh_interpreter import RAGTRACE_IN_MEMORY
from loopback import ANSWER, VECTOR_STORE, QuietHandler, serve, serve_chat
from ragtrace._internal.core import keyed
from ragtrace._internal.integrations import _litellm_calls

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # LiteLLM's bundled prices, no download

pytestmark = pytest.mark.heavy  # LiteLLM takes about 3 s to import: run once, on 3.11 (Makefile)

QUESTION = "How long does a refund take?"
IDS = [f"{file_id}#{keyed.content_digest(text)}" for file_id, _, _, text in VECTOR_STORE]
COST = 42 * 0.15e-6 + 9 * 0.6e-6


@pytest.fixture
def litellm(spans):
    """``ragtrace.instrument("litellm")`` (LiteLLM is imported first, as the app does), undone after."""
    import litellm as module

    assert ragtrace.instrument("litellm") == ["litellm"]
    yield module
    ragtrace.uninstrument("litellm")
    assert not any(type(c).__name__ == "RagtraceLogger" for name in ("callbacks", "success_callback", "input_callback") for c in getattr(module, name))


@pytest.fixture
def server():
    yield from serve_chat()


def settled(spans, stage: str = "pipeline", count: int = 1, timeout: float = 10.0) -> None:
    """Wait until LiteLLM's logging has made ``count`` spans of ``stage`` and no call awaits its end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(spans.by_stage(stage)) >= count and _litellm_calls.pending_count() == 0:
            return
        time.sleep(0.02)
    raise AssertionError(f"LiteLLM's logging did not end: {[s.name for s in spans.all()]}")


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def prompt(page) -> list[dict]:
    sources = "\n".join(f"[{n}] {r['content'][0]['text']}" for n, r in enumerate(page["data"][:2], 1))
    return [
        {"role": "system", "content": "Answer from the numbered sources only and cite them as [1], [2]."},
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {QUESTION}"},
    ]


def app(litellm, url: str, **options) -> object:
    """The LiteLLM docs' shape: search the vector store, answer from the results."""
    page = litellm.vector_stores.search(vector_store_id="vs_kb", query=QUESTION, max_num_results=3, api_base=f"{url}/v1", api_key="k")
    return litellm.completion(model="openai/gpt-4o-mini", messages=prompt(page), api_base=f"{url}/v1", api_key="k", **options)


async def async_app(litellm, url: str) -> object:
    page = await litellm.vector_stores.asearch(vector_store_id="vs_kb", query=QUESTION, max_num_results=3, api_base=f"{url}/v1", api_key="k")
    response = await litellm.acompletion(model="openai/gpt-4o-mini", messages=prompt(page), api_base=f"{url}/v1", api_key="k")
    await logged()
    return response


async def logged() -> None:
    """LiteLLM logs an async call's end in a task of the app's loop: a loop closed at once would
    never run it (the app's own callbacks would miss it too). Keep it running, as a server's does."""
    for _ in range(500):
        if _litellm_calls.pending_count() == 0:
            return
        await asyncio.sleep(0.01)


def check_trace(spans, *, stream: bool = False, usage: bool = True) -> None:
    root = spans.one("pipeline")
    assert root.parent is None and root.name == "invoke_workflow litellm"
    assert "rag.root.abandoned" not in root.attributes
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert len({s.context.trace_id for s in spans.all()}) == 1
    assert retrieved.start_time < retrieved.end_time <= generated.start_time < generated.end_time <= root.end_time
    assert retrieved.name == "retrieval vs_kb" and retrieved.attributes["gen_ai.retrieval.top_k"] == 3
    assert retrieved.attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == IDS
    assert [d["score"] for d in json.loads(retrieved.attributes["gen_ai.retrieval.documents"])] == [0.91, 0.74, 0.52]
    assert assembled.attributes["rag.context.inclusion_method"] == "located"
    assert list(assembled.attributes["rag.context.chunk_ids"]) == IDS[:2]
    assert generated.name == "chat gpt-4o-mini"
    assert generated.attributes["gen_ai.provider.name"] == "openai"
    if usage:
        assert generated.attributes["gen_ai.usage.input_tokens"] == 42 and generated.attributes["gen_ai.usage.output_tokens"] == 9
        assert math.isclose(generated.attributes["llm.cost.total"], COST)
    else:  # a stream without the provider's usage: LiteLLM's own token estimate is no figure
        assert not {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens", "llm.cost.total"} & set(generated.attributes)
    assert list(generated.attributes["rag.citation.ids"]) == IDS[:1]
    assert generated.attributes.get("gen_ai.request.stream", False) is stream
    got = metrics(root)
    assert got["inclusion_method"] == "located"
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 2, 1, [1])
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_utilization"] == 0.5
    assert root.attributes["output.value"] == ANSWER


def test_search_then_completion_is_one_pipeline_with_exact_figures(litellm, server, spans):
    url, _ = server
    response = app(litellm, url)
    assert response.choices[0].message.content == ANSWER
    settled(spans)
    check_trace(spans)


def test_async_search_then_acompletion(litellm, server, spans):
    url, _ = server
    response = asyncio.run(async_app(litellm, url))
    assert response.choices[0].message.content == ANSWER
    settled(spans)
    check_trace(spans)


@pytest.mark.parametrize("include_usage", [True, False])
def test_a_stream_is_one_generation_with_its_time_to_first_chunk(litellm, server, spans, include_usage):
    url, _ = server
    options = {"stream_options": {"include_usage": True}} if include_usage else {}
    pieces = [chunk.choices[0].delta.content or "" for chunk in app(litellm, url, stream=True, **options) if chunk.choices]
    assert "".join(pieces) == ANSWER
    settled(spans)
    check_trace(spans, stream=True, usage=include_usage)
    generated = spans.one("generate")
    assert generated.attributes["gen_ai.request.stream"] is True
    ttfc = generated.attributes["gen_ai.response.time_to_first_chunk"]
    assert 0 <= ttfc <= (generated.end_time - generated.start_time) / 1e9
    got = metrics(spans.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 2, 1)


def test_identical_outputs_with_ragtrace_on_and_off(spans, server):
    import litellm

    url, _ = server

    def run(rerank_url: str) -> tuple:
        plain = app(litellm, url)
        streamed = [c.choices[0].delta.content for c in app(litellm, url, stream=True)]
        page = litellm.vector_stores.search(vector_store_id="vs_kb", query=QUESTION, api_base=f"{url}/v1", api_key="k")
        with ragtrace.rag_pipeline("rerank"):
            reranked = litellm.rerank(model="cohere/rerank-english-v3.0", query=QUESTION, documents=["a", "b", "c"], api_base=rerank_url, api_key="k")
        return plain.choices[0].message.model_dump(), plain.usage.model_dump(), plain.model, streamed, page, reranked.results, reranked.meta

    for rerank_url in serve(CohereRerank):
        off = run(rerank_url)
        ragtrace.instrument("litellm")
        try:
            on = run(rerank_url)
            settled(spans, count=4)
        finally:
            ragtrace.uninstrument("litellm")
    assert on == off
    assert len(spans.by_stage("rerank")) == 1 and len(spans.by_stage("retrieve")) == 3  # it was on


def test_inside_a_rag_pipeline_the_root_waits_for_the_answer_logged_after_the_call(litellm, spans):
    """LiteLLM logs the answer from its own thread after ``completion`` returned, usually after the
    block ended: the root still has the answer's figures, and ends when the block did."""
    with ragtrace.rag_pipeline("support", query=QUESTION) as run:
        with ragtrace.retrieve(QUESTION) as found:
            found.record([{"id": "refunds", "content": "Refunds take 5 days."}, {"id": "shipping", "content": "Shipping is free."}])
        with ragtrace.assemble() as context:
            text = context.place_all(found.chunks) + f"\n\n{QUESTION}"
            context.set_prompt(text)
        answer = litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": text}], mock_response="5 days [1].", temperature=0.2, max_tokens=50)
    block_end = time.time_ns()
    assert answer.choices[0].message.content == "5 days [1]."
    settled(spans)
    root, generated = spans.one("pipeline"), spans.one("generate")
    assert root.end_time <= block_end and generated.parent.span_id == root.context.span_id
    assert generated.attributes["gen_ai.request.temperature"] == 0.2 and generated.attributes["gen_ai.request.max_tokens"] == 50
    got = metrics(root)
    # by hand: 2 retrieved, both declared in context, [1] = refunds cited: recall 1/2, utilisation 1/2
    assert (got["inclusion_method"], got["retrieved"], got["in_context"], got["cited"]) == ("declared", 2, 2, 1)
    assert got["recall_proxy"] == 0.5 and got["context_utilization"] == 0.5
    assert run.metrics["cited"] == 1  # filled once LiteLLM logged the answer


def test_pipelines_in_threads_each_get_their_own_answer(litellm, spans):
    """Eight requests at once, each its own pipeline: LiteLLM logs their ends from its pool in any
    order; each answer lands in the pipeline of the thread that made the call."""

    def request(n: int) -> None:
        with ragtrace.rag_pipeline(f"req-{n}", query=f"q{n}"):
            with ragtrace.retrieve(f"q{n}") as found:
                found.record([{"id": f"doc-{n}", "content": f"Fact number {n}."}])
            with ragtrace.assemble() as context:
                text = context.place_all(found.chunks)
                context.set_prompt(text)
            litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": text}], mock_response=f"Fact {n} [1].")

    threads = [threading.Thread(target=request, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    settled(spans, count=8)
    roots = {s.context.span_id: s for s in spans.by_stage("pipeline")}
    for generated in spans.by_stage("generate"):
        root = roots[generated.parent.span_id]
        n = root.name.removeprefix("invoke_workflow req-")
        assert json.loads(generated.attributes["gen_ai.output.messages"])[0]["parts"][0]["content"] == f"Fact {n} [1]."
        assert list(generated.attributes["rag.citation.ids"]) == [f"doc-{n}"]
        assert metrics(root)["cited"] == 1


class CohereRerank(QuietHandler):
    """``POST /v2/rerank`` like Cohere's: the third and the first document, in that order."""

    received: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.received.append(json.loads(self.body()))
        results = [{"index": 2, "relevance_score": 0.93}, {"index": 0, "relevance_score": 0.41}]
        self.reply(json.dumps({"id": "rr-1", "results": results, "meta": {"billed_units": {"search_units": 1}}}).encode(), "application/json")


def test_rerank_is_a_rerank_stage_with_search_units(litellm, spans):
    documents = ["Shipping is free.", "Gift cards never expire.", "Refunds take 5 days."]
    for url in serve(CohereRerank):
        with ragtrace.rag_pipeline("rerank", query=QUESTION):
            with ragtrace.retrieve(QUESTION) as found:
                found.record([{"id": f"d{n}", "content": text} for n, text in enumerate(documents)])
            result = litellm.rerank(model="cohere/rerank-english-v3.0", query=QUESTION, documents=documents, top_n=2, api_base=url, api_key="k")
    assert [r["index"] for r in result.results] == [2, 0]
    assert CohereRerank.received[-1]["documents"] == documents
    settled(spans)
    reranked = spans.one("rerank")
    assert reranked.name == "rerank rerank-english-v3.0" and reranked.attributes["gen_ai.provider.name"] == "cohere"
    assert reranked.attributes["rag.rerank.top_n"] == 2
    assert list(reranked.attributes["rag.rerank.output_ids"]) == ["d2", "d0"]  # the retrieved ids, by their text
    assert reranked.attributes["rag.rerank.input_count"] == 3 and reranked.attributes["rag.rerank.output_count"] == 2
    assert reranked.attributes["rag.rerank.search_units"] == 1.0
    assert math.isclose(reranked.attributes["llm.cost.total"], 0.002)  # 1 search unit at 2 USD per 1000


def test_the_apps_own_callbacks_keep_every_event_and_uninstrument_restores_the_lists(spans):
    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    class Mine(CustomLogger):
        def __init__(self) -> None:
            super().__init__()
            self.events: list[str] = []

        def log_pre_api_call(self, model, messages, kwargs):
            self.events.append("pre")

        def log_success_event(self, kwargs, response_obj, start_time, end_time):
            self.events.append("success")

        def log_failure_event(self, kwargs, response_obj, start_time, end_time):
            self.events.append("failure")

    mine = Mine()
    names = ("callbacks", "input_callback", "success_callback", "failure_callback", "_async_success_callback", "_async_failure_callback")
    saved = {name: list(getattr(litellm, name)) for name in names}
    litellm.callbacks.append(mine)
    before = {name: list(getattr(litellm, name)) for name in names}
    ragtrace.instrument("litellm")
    try:
        litellm.callbacks = [mine]  # the app assigns its list after instrument(): ragtrace's logger stays on
        with ragtrace.rag_pipeline("p"):
            litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], mock_response="hello")
        with pytest.raises(Exception, match="boom"):
            litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], mock_response=Exception("boom"), num_retries=0)
        settled(spans, "generate", count=2)
        assert mine.events.count("pre") == 2 and mine.events.count("success") == 1 and mine.events.count("failure") == 1
        failed = [s for s in spans.by_stage("generate") if s.status.status_code.name == "ERROR"]
        assert len(failed) == 1
        during = {name: list(getattr(litellm, name)) for name in names}
        assert {name: sum(type(c).__name__ == "RagtraceLogger" for c in during[name]) for name in names} == {**dict.fromkeys(names, 1), "callbacks": 0}  # the app replaced that one
    finally:
        ragtrace.uninstrument("litellm")
    # only ragtrace's logger is taken out: every list holds what it held, in the same order
    assert {name: list(getattr(litellm, name)) for name in names} == {name: [c for c in during[name] if type(c).__name__ != "RagtraceLogger"] for name in names}
    assert before["callbacks"][-1] is mine and mine in litellm.success_callback
    for name, value in saved.items():
        setattr(litellm, name, value)


def test_redact_mode_leaks_nothing(litellm, server, spans):
    url, _ = server
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    secret_question, secret_answer = "MARKER-QUESTION-7f3a", "MARKER-ANSWER-9c1d [1]."
    page = litellm.vector_stores.search(vector_store_id="vs_kb", query=secret_question, api_base=f"{url}/v1", api_key="k")
    litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": f"{page['data'][0]['content'][0]['text']} MARKER-PROMPT-55e0"}], mock_response=secret_answer)
    for rerank_url in serve(CohereRerank):
        with ragtrace.rag_pipeline("p"):
            litellm.rerank(model="cohere/rerank-english-v3.0", query="MARKER-RERANK-Q", documents=["MARKER-DOC-A", "MARKER-DOC-B", "MARKER-DOC-C"], api_base=rerank_url, api_key="k")
    settled(spans, count=2)
    exported = json.dumps([{"name": s.name, "attributes": dict(s.attributes), "events": [dict(e.attributes) for e in s.events]} for s in spans.all()], default=str)
    for marker in ("MARKER-QUESTION", "MARKER-ANSWER", "MARKER-PROMPT", "MARKER-RERANK", "MARKER-DOC", *(text for *_, text in VECTOR_STORE)):
        assert marker not in exported
    assert {s.attributes.get("rag.stage") for s in spans.all()} >= {"retrieve", "generate", "rerank", "pipeline"}


def test_a_mock_search_has_no_pre_call_event_and_is_not_recorded(litellm, spans, caplog):
    """LiteLLM skips its pre-call logging for ``vector_stores.search(mock_response=[rows])``: its end
    can't be tied to a request, so it is not recorded (said once)."""
    rows = [{"score": 0.9, "content": [{"type": "text", "text": "Refunds take 5 days."}], "file_id": "f1", "filename": "a", "attributes": {}}]
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        page = litellm.vector_stores.search(vector_store_id="vs", query=QUESTION, mock_response=rows)
        deadline = time.monotonic() + 10
        while "no pre-call event" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
    assert page["data"][0]["file_id"] == "f1"
    assert "LiteLLM logged a search with no pre-call event" in caplog.text
    assert spans.by_stage("retrieve") == []


def test_instrument_never_imports_litellm_and_hooks_it_when_the_app_does(tmp_path):
    code = (
        "import time, os\n"
        "os.environ['LITELLM_LOCAL_MODEL_COST_MAP'] = 'True'\n"
        + RAGTRACE_IN_MEMORY
        + "print('INSTRUMENTED', 'litellm' in ragtrace.instrument(), 'litellm' in sys.modules)\n"
        "import litellm\n"
        "litellm.completion(model='gpt-4o-mini', messages=[{'role': 'user', 'content': 'hi'}], mock_response='hello')\n"
        "deadline = time.time() + 10\n"
        "while not exporter.get_finished_spans() and time.time() < deadline: time.sleep(0.02)\n"
        "print('SPANS', [s.name for s in exporter.get_finished_spans()])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "INSTRUMENTED True False" in done.stdout  # instrumented, LiteLLM not imported by ragtrace
    assert "SPANS ['chat gpt-4o-mini']" in done.stdout


@pytest.mark.parametrize("stream", [False, True])
def test_with_the_openai_integration_on_too_the_call_is_recorded_once(litellm, server, spans, stream):
    """LiteLLM calls the OpenAI SDK for an ``openai/`` model: that SDK call is left to LiteLLM's
    generation (one generate span), plain and streamed, and a later LiteLLM call is recorded too."""
    url, received = server
    ragtrace.instrument("openai")
    try:
        response = app(litellm, url, stream=stream)
        if stream:
            assert "".join(c.choices[0].delta.content or "" for c in response) == ANSWER
        settled(spans)
        assert len(spans.by_stage("generate")) == 1
        check_trace(spans, stream=stream, usage=not stream)
        assert received[-1]["path"] == "/v1/chat/completions"  # it went through the SDK to the server
        spans.clear()
        litellm.completion(model="gpt-4o-mini", messages=[{"role": "user", "content": "again"}], mock_response="ok")
        settled(spans, "generate")
        assert len(spans.by_stage("generate")) == 1
    finally:
        ragtrace.uninstrument("openai")


class AnthropicMessages(QuietHandler):
    """``POST /v1/messages`` like Anthropic's: a text block citing the first document (``char_location``)
    and a text block citing nothing."""

    def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
        self.body()
        cited = {"type": "char_location", "document_title": "Refunds", "cited_text": "Refunds take 5 days.", "document_index": 0, "start_char_index": 0, "end_char_index": 20}
        message = {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "stop_reason": "end_turn", "stop_sequence": None,
            "usage": {"input_tokens": 120, "output_tokens": 12},
            "content": [{"type": "text", "text": "Refunds take 5 days.", "citations": [cited]}, {"type": "text", "text": " Anything else?"}],
        }
        self.reply(json.dumps(message).encode(), "application/json")


def test_claudes_citations_through_litellm_are_the_providers(litellm, spans):
    """Document blocks with citations enabled, through ``completion(model="anthropic/...")``:
    LiteLLM passes the blocks on as given and returns Claude's citation objects in
    ``provider_specific_fields["citations"]``. By hand: 2 documents given (provider context), the
    answer cites document 0: retrieved 2, in context 2, cited 1, recall 1/2, utilisation 1/2."""
    documents = ["Refunds take 5 days.", "Shipping is free."]
    blocks = [{"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}, "title": f"doc {n}", "citations": {"enabled": True}} for n, text in enumerate(documents)]
    for url in serve(AnthropicMessages):
        response = litellm.completion(
            model="anthropic/claude-sonnet-4-5", messages=[{"role": "user", "content": [*blocks, {"type": "text", "text": QUESTION}]}], api_base=url, api_key="k", max_tokens=100
        )
    assert response.choices[0].message.provider_specific_fields["citations"][0][0]["document_index"] == 0
    settled(spans)
    ids = [keyed.content_digest(text) for text in documents]
    root, assembled, generated = spans.one("pipeline"), spans.one("assemble"), spans.one("generate")
    assert root.name == "invoke_workflow litellm" and "rag.root.abandoned" not in root.attributes
    assert list(spans.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == ids
    assert assembled.attributes["rag.context.inclusion_method"] == "provider" and list(assembled.attributes["rag.context.chunk_ids"]) == ids
    assert generated.attributes["rag.citation.format"] == "provider" and list(generated.attributes["rag.citation.ids"]) == ids[:1]
    got = metrics(root)
    assert (got["inclusion_method"], got["retrieved"], got["in_context"], got["cited"]) == ("provider", 2, 2, 1)
    assert got["recall_proxy"] == 0.5 and got["context_utilization"] == 0.5 and got["context_precision"] == 1.0


def test_a_call_whose_end_is_never_logged_is_given_up_and_its_pipeline_ends(litellm, server, spans):
    """A stream the app abandons after one chunk: LiteLLM never logs its end. The pipeline waits,
    then the call is given up (at exit, or after STALE_SECONDS at the next LiteLLM event): the
    generate span is made without a result and the root ends, its figures saying no answer."""
    url, _ = server
    with ragtrace.rag_pipeline("abandoned", query=QUESTION):
        stream = litellm.completion(model="openai/gpt-4o-mini", messages=[{"role": "user", "content": QUESTION}], api_base=f"{url}/v1", api_key="k", stream=True)
        next(iter(stream))
    del stream
    time.sleep(0.5)
    assert _litellm_calls.pending_count() == 1 and spans.by_stage("pipeline") == []  # the root waits for it
    _litellm_calls.give_up_all()
    root, generated = spans.one("pipeline"), spans.one("generate")
    assert generated.parent.span_id == root.context.span_id and "gen_ai.output.messages" not in generated.attributes
    assert "rag.metrics.cited" not in root.attributes and root.attributes["rag.metrics.status"]


def test_a_router_call_is_one_generation_in_its_pipeline(litellm, spans):
    """``litellm.Router`` (sync and async): one generate span per call, in the pipeline that made it."""
    router = litellm.Router(model_list=[{"model_name": "support", "litellm_params": {"model": "gpt-4o-mini", "mock_response": "5 days."}}])

    async def asynchronous() -> None:
        with ragtrace.rag_pipeline("async-route"):
            await router.acompletion(model="support", messages=[{"role": "user", "content": QUESTION}])
        await logged()

    with ragtrace.rag_pipeline("route"):
        router.completion(model="support", messages=[{"role": "user", "content": QUESTION}])
    asyncio.run(asynchronous())
    settled(spans, count=2)
    roots = {s.context.span_id: s.name for s in spans.by_stage("pipeline")}
    assert sorted(roots[g.parent.span_id] for g in spans.by_stage("generate")) == ["invoke_workflow async-route", "invoke_workflow route"]
    assert {g.name for g in spans.by_stage("generate")} == {"chat gpt-4o-mini"}
