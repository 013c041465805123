"""The OpenAI SDK's own retriever, ``vector_stores.search``, and the automatic root it opens, against
the loopback server (tests/loopback.py): an SDK app with ``ragtrace.instrument()`` and nothing else.

The store finds 3 chunks (two of one file); the app shows the first 2 as [1], [2] in its message;
the answer cites [1]. By hand: retrieved 3, in context 2 (located), cited 1: recall 1/3,
utilisation 1/2, cited position 1.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import threading
import uuid

import openai
import pytest
from openai._base_client import AsyncPaginator
from opentelemetry import trace

import ragtrace
from loopback import ANSWER, VECTOR_STORE, ChatCompletions
from ragtrace._internal.boundaries import auto_root
from ragtrace._internal.core import keyed

from .test_openai import client, instrumented  # noqa: F401 - the fixture: instrument("openai") for one test

QUESTION = "How long does a refund take?"


def messages(results) -> list[dict]:
    """The app's own prompt: the first two results, numbered."""
    sources = "\n".join(f"[{n}] {r.content[0].text}" for n, r in enumerate(results[:2], 1))
    return [
        {"role": "system", "content": "Answer from the numbered sources only and cite them as [1], [2]."},
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {QUESTION}"},
    ]


def chunk_id(file_id: str, text: str) -> str:
    return f"{file_id}#{keyed.content_digest(text)}"


IDS = [chunk_id(file_id, text) for file_id, _, _, text in VECTOR_STORE]


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def check_trace(spans, *, stream: bool = False) -> None:
    """One trace: root -> retrieve, assemble (located), generate, with the hand-computed figures."""
    root = spans.one("pipeline")
    assert root.parent is None and root.name == "invoke_workflow openai"
    assert "rag.root.abandoned" not in root.attributes
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert len({s.context.trace_id for s in spans.all()}) == 1
    assert retrieved.start_time < assembled.start_time < generated.start_time <= root.end_time
    assert retrieved.name == "retrieval vs_kb"
    assert retrieved.attributes["gen_ai.data_source.id"] == "vs_kb"
    assert retrieved.attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == IDS
    documents = json.loads(retrieved.attributes["gen_ai.retrieval.documents"])  # ids and scores once (issue 17)
    assert [(d["id"], d["score"]) for d in documents] == list(zip(IDS, [0.91, 0.74, 0.52]))
    assert "rag.retrieval.ranks" not in retrieved.attributes  # 1..3
    assert retrieved.attributes["retrieval.documents.1.document.content"] == VECTOR_STORE[1][3]
    assert assembled.attributes["rag.context.inclusion_method"] == "located"
    assert list(assembled.attributes["rag.context.chunk_ids"]) == IDS[:2]
    assert list(assembled.attributes["rag.context.labels"]) == ["1", "2"]
    assert list(generated.attributes["rag.citation.ids"]) == IDS[:1]
    assert generated.attributes.get("gen_ai.request.stream", False) is stream
    assert generated.attributes["rag.generation.context_span_id"] == format(assembled.context.span_id, "016x")
    got = metrics(root)
    assert got["inclusion_method"] == "located"
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 2, 1, [1])
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_utilization"] == 0.5
    assert root.attributes["output.value"] == ANSWER


def sync_app(url: str, *, stream: bool = False) -> str:
    """An SDK app as the OpenAI docs write one: search the vector store, answer from the results."""
    sdk = client(url)
    results = sdk.vector_stores.search("vs_kb", query=QUESTION, max_num_results=3)
    found = list(results)
    if not stream:
        return sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(found)).choices[0].message.content
    with sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(found), stream=True) as chunks:
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def async_app(url: str, *, stream: bool = False, iterate: bool = False) -> str:
    sdk = client(url, openai.AsyncOpenAI)
    search = sdk.vector_stores.search("vs_kb", query=QUESTION, max_num_results=3)
    found = [r async for r in search] if iterate else (await search).data
    if not stream:
        return (await sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(found))).choices[0].message.content
    response = await sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(found), stream=True)
    async with response:
        return "".join([c.choices[0].delta.content or "" async for c in response if c.choices])


# --- the span tree and the figures ------------------------------------------------------------
@pytest.mark.parametrize("stream", [False, True], ids=["completion", "stream"])
def test_a_search_and_the_answer_make_one_pipeline_with_located_figures(instrumented, chat_server, stream):
    url, received = chat_server
    assert sync_app(url, stream=stream) == ANSWER
    assert [r["path"] for r in received] == ["/v1/vector_stores/vs_kb/search", "/v1/chat/completions"]
    check_trace(instrumented, stream=stream)
    assert auto_root.open_count() == 0


@pytest.mark.parametrize("stream", [False, True], ids=["completion", "stream"])
@pytest.mark.parametrize("iterate", [False, True], ids=["awaited", "iterated"])
def test_an_async_client_awaited_or_iterated(instrumented, chat_server, stream, iterate):
    url, _ = chat_server
    assert asyncio.run(async_app(url, stream=stream, iterate=iterate)) == ANSWER
    check_trace(instrumented, stream=stream)


def test_the_page_reaches_the_app_as_the_sdk_made_it(instrumented, chat_server):
    url, _ = chat_server
    page = client(url).vector_stores.search("vs_kb", query=QUESTION)
    assert type(page).__name__ == "SyncPage[VectorStoreSearchResponse]" and isinstance(page, openai.pagination.SyncPage)
    assert [r.file_id for r in page] == [f for f, *_ in VECTOR_STORE]  # iterable, as before
    assert [r.score for r in page] == [s for _, _, s, _ in VECTOR_STORE]  # and again: nothing consumed
    async def fetch() -> list[str]:
        paginator = client(url, openai.AsyncOpenAI).vector_stores.search("vs_kb", query=QUESTION)
        assert isinstance(paginator, AsyncPaginator)  # the SDK's, behind a proxy that records when it is awaited
        page = await paginator
        assert type(page).__name__ == "AsyncPage[VectorStoreSearchResponse]"
        return [r.file_id async for r in page]

    assert asyncio.run(fetch()) == [f for f, *_ in VECTOR_STORE]
    assert [list(s.attributes["rag.retrieval.chunk_ids"]) for s in instrumented.by_stage("retrieve")] == [IDS, IDS]


def test_chunk_ids_are_per_chunk_and_stable(instrumented, chat_server):
    """Two chunks of one file get two ids; the same chunk found again gets the same id."""
    url, _ = chat_server
    sdk = client(url)
    for _ in range(2):
        sdk.vector_stores.search("vs_kb", query=QUESTION)
    first, second = (list(s.attributes["rag.retrieval.chunk_ids"]) for s in instrumented.by_stage("retrieve"))
    assert first == second == IDS and len(set(IDS)) == 3
    assert IDS[0].startswith("file-refunds#") and IDS[1].startswith("file-refunds#")


def test_without_a_hash_key_the_ids_warn_once_that_they_differ_between_processes(instrumented, chat_server, no_hash_key, caplog):
    url, _ = chat_server
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        for _ in range(2):
            client(url).vector_stores.search("vs_kb", query=QUESTION)
    (warning,) = [r.getMessage() for r in caplog.records if "hash key" in r.getMessage()]
    assert "OpenAI vector-store chunk ids (file_id#digest) differ between processes" in warning
    assert "RAGTRACE_HASH_KEY" in warning and "\n" not in warning


def test_several_searches_before_the_answer_join_one_root(instrumented, chat_server):
    """Multi-query: two searches (one gathered pair, async) then the answer: one pipeline."""
    url, _ = chat_server

    async def app() -> str:
        sdk = client(url, openai.AsyncOpenAI)
        first, second = await asyncio.gather(
            sdk.vector_stores.search("vs_kb", query=QUESTION, max_num_results=1),
            sdk.vector_stores.search("vs_kb", query="refund to card", max_num_results=3),
        )
        found = [*first.data, *second.data[1:]]
        completion = await sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(found))
        return completion.choices[0].message.content

    assert asyncio.run(app()) == ANSWER
    root = instrumented.one("pipeline")
    assert len(instrumented.by_stage("retrieve")) == 2
    assert {s.parent.span_id for s in instrumented.all() if s is not root} == {root.context.span_id}
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 2, 1)  # chunk 1 found twice counts once


def test_inside_the_users_pipeline_a_search_is_one_of_its_stages(instrumented, chat_server):
    url, _ = chat_server
    with ragtrace.rag_pipeline("mine", query=QUESTION) as run:
        assert sync_app(url) == ANSWER
    (root,) = instrumented.by_stage("pipeline")
    assert root.name == "invoke_workflow mine"
    assert instrumented.one("retrieve").parent.span_id == root.context.span_id
    assert not instrumented.by_stage("assemble")  # the app's own prompt: nothing recorded it
    assert run.metrics["retrieved"] == 3
    assert auto_root.open_count() == 0


def test_an_assembly_the_app_records_stands_instead_of_the_located_one(instrumented, chat_server):
    url, _ = chat_server
    sdk = client(url)
    found = list(sdk.vector_stores.search("vs_kb", query=QUESTION))
    with ragtrace.assemble() as ctx:
        sources = ctx.place_all([{"id": IDS[0], "content": found[0].content[0].text}])
    sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": sources}])
    (assembled,) = instrumented.by_stage("assemble")
    assert assembled.attributes["rag.context.inclusion_method"] == "declared"
    assert assembled.parent.span_id == instrumented.one("pipeline").context.span_id
    assert metrics(instrumented.one("pipeline"))["in_context"] == 1


# --- redaction ----------------------------------------------------------------------------------
def test_redact_mode_lets_no_content_out_and_holds_none_after(spans, chat_server, caplog):
    marker = "mk" + uuid.uuid4().hex
    ChatCompletions.store = [(f, n, s, f"{text} ({marker})") for f, n, s, text in VECTOR_STORE]
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    ragtrace.instrument("openai")
    caplog.set_level(logging.DEBUG, logger="ragtrace")
    try:
        url, _ = chat_server
        sdk = client(url)
        found = list(sdk.vector_stores.search("vs_kb", query=f"what does {marker} say?"))
        sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(found))
        del found
    finally:
        ragtrace.uninstrument("openai")
    exported = json.dumps([json.loads(s.to_json()) for s in spans.all()])
    assert marker not in exported and marker not in caplog.text
    assert metrics(spans.one("pipeline"))["in_context"] == 2  # the stages ran and were located
    ChatCompletions.store = VECTOR_STORE
    assert holders_of(marker) == []


def holders_of(marker: str) -> list[str]:
    """What still refers to a string holding ``marker`` (as tests/test_no_leak.py looks)."""
    gc.collect()
    return [type(o).__qualname__ for o in gc.get_objects() if any(type(r) is str and marker in r and r is not marker for r in gc.get_referents(o))]


# --- lifetimes: abandoned roots, threads, tasks -----------------------------------------------
def test_a_search_with_no_answer_ends_with_its_request_span(instrumented, chat_server):
    """Retrieval, then the app's exception, no model call: the root ends when the request's span
    does (at its end time), abandoned, with no answer figures and no text held; the next request
    is a root of its own."""
    url, _ = chat_server
    marker = "mk" + uuid.uuid4().hex
    ChatCompletions.store = [(f, n, s, f"{text} ({marker})") for f, n, s, text in VECTOR_STORE]
    tracer = instrumented.provider.get_tracer("app")
    sdk = client(url)
    with pytest.raises(RuntimeError), tracer.start_as_current_span("request 1"):
        sdk.vector_stores.search("vs_kb", query=QUESTION)
        assert auto_root.open_count() == 1 and not instrumented.by_stage("pipeline")
        raise RuntimeError("the app failed before asking the model")
    assert auto_root.open_count() == 0
    assert holders_of(marker) == []
    (first,) = instrumented.by_stage("pipeline")
    request = next(s for s in instrumented.all() if s.name == "request 1")
    assert first.parent.span_id == request.context.span_id and first.end_time == request.end_time
    assert first.attributes["rag.root.abandoned"] == "request_ended"
    assert "no_answer" in first.attributes["rag.metrics.status"]
    assert "rag.metrics.recall_proxy" not in first.attributes
    ChatCompletions.store = VECTOR_STORE
    with tracer.start_as_current_span("request 2"):
        assert sync_app(url) == ANSWER
    first, second = sorted(instrumented.by_stage("pipeline"), key=lambda s: s.start_time)
    assert "rag.root.abandoned" not in second.attributes and metrics(second)["cited"] == 1
    assert first.context.trace_id != second.context.trace_id
    assert auto_root.open_count() == 0


def test_an_idle_root_is_ended_at_the_next_opening_and_not_joined(instrumented, chat_server, monkeypatch):
    url, _ = chat_server
    sdk = client(url)
    sdk.vector_stores.search("vs_kb", query=QUESTION)
    monkeypatch.setattr(auto_root, "IDLE_SECONDS", 0.0)
    assert sync_app(url) == ANSWER
    first, second = sorted(instrumented.by_stage("pipeline"), key=lambda s: s.start_time)
    assert first.attributes["rag.root.abandoned"] in ("idle", "replaced")
    assert metrics(second)["retrieved"] == 3


def test_open_roots_are_bounded(instrumented, chat_server, monkeypatch):
    """Searches in threads that each keep their context alive: beyond CAPACITY, the oldest ends."""
    url, _ = chat_server
    ragtrace.configure(tracer_provider=instrumented.provider, max_open_roots=2)
    sdk = client(url)
    keep, go = [], threading.Event()

    def request() -> None:
        sdk.vector_stores.search("vs_kb", query=QUESTION)
        keep.append(1)
        go.wait(10)

    threads = [threading.Thread(target=request) for _ in range(3)]
    for thread in threads:
        thread.start()
        while len(keep) < threads.index(thread) + 1:
            go.wait(0.01)
    assert auto_root.open_count() == 2
    assert [s.attributes["rag.root.abandoned"] for s in instrumented.by_stage("pipeline")] == ["capacity"]
    go.set()
    for thread in threads:
        thread.join()


def test_a_root_whose_thread_is_gone_is_ended_when_the_thread_ends(instrumented, chat_server):
    url, _ = chat_server
    sdk = client(url)
    thread = threading.Thread(target=lambda: sdk.vector_stores.search("vs_kb", query=QUESTION))
    thread.start()
    thread.join()
    assert [s.attributes["rag.root.abandoned"] for s in instrumented.by_stage("pipeline")] == ["collected"]
    assert auto_root.open_count() == 0
    assert sync_app(url) == ANSWER
    first, second = sorted(instrumented.by_stage("pipeline"), key=lambda s: s.start_time)
    assert first.attributes["rag.root.abandoned"] == "collected"
    assert metrics(second)["cited"] == 1


def test_two_threads_at_once_keep_their_pipelines_apart(instrumented, chat_server):
    url, _ = chat_server
    both = threading.Barrier(2)
    answers: list[str] = []

    def request(question: str) -> None:
        sdk = client(url)
        found = list(sdk.vector_stores.search("vs_kb", query=question))
        both.wait(10)  # both searched before either asks the model
        answers.append(sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(found)).choices[0].message.content)

    threads = [threading.Thread(target=request, args=(q,)) for q in ("refund time?", "refund card?")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [ANSWER, ANSWER]
    roots = instrumented.by_stage("pipeline")
    assert len(roots) == 2
    for root in roots:
        stages = [s for s in instrumented.all() if s.context.trace_id == root.context.trace_id and s is not root]
        assert sorted(s.attributes["rag.stage"] for s in stages) == ["assemble", "generate", "retrieve"]
        (retrieved,) = [s for s in stages if s.attributes["rag.stage"] == "retrieve"]
        assert retrieved.attributes["gen_ai.retrieval.query.text"] == root.attributes["input.value"]
        got = metrics(root)
        assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 2, 1)


def test_asyncio_tasks_each_get_their_own_root(instrumented, chat_server):
    url, _ = chat_server

    async def main() -> list[str]:
        return await asyncio.gather(async_app(url), async_app(url, stream=True))

    assert asyncio.run(main()) == [ANSWER, ANSWER]
    roots = instrumented.by_stage("pipeline")
    assert len(roots) == 2 and len({r.context.trace_id for r in roots}) == 2
    for root in roots:
        assert metrics(root)["cited"] == 1
        assert len([s for s in instrumented.all() if s.context.trace_id == root.context.trace_id]) == 4


def test_a_failed_model_call_ends_the_root_with_its_error(instrumented, chat_server):
    url, _ = chat_server
    sdk = client(url)
    sdk.vector_stores.search("vs_kb", query=QUESTION)
    with pytest.raises(openai.NotFoundError):
        sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], extra_query={"fail": "1"}, timeout=5)
    root = instrumented.one("pipeline")
    assert root.status.status_code == trace.StatusCode.ERROR
    assert auto_root.open_count() == 0


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_a_responses_api_answer_joins_and_ends_the_root_too(instrumented, chat_server, asynchronous):
    url, _ = chat_server

    async def app() -> str:
        sdk = client(url, openai.AsyncOpenAI)
        found = (await sdk.vector_stores.search("vs_kb", query=QUESTION, max_num_results=3)).data
        system, user = messages(found)
        return (await sdk.responses.create(model="gpt-4o-mini", instructions=system["content"], input=user["content"])).output_text

    if asynchronous:
        assert asyncio.run(app()) == ANSWER
    else:
        sdk = client(url)
        system, user = messages(list(sdk.vector_stores.search("vs_kb", query=QUESTION, max_num_results=3)))
        assert sdk.responses.create(model="gpt-4o-mini", instructions=system["content"], input=user["content"]).output_text == ANSWER
    check_trace(instrumented)


def test_messages_with_content_parts_are_searched_too(instrumented, chat_server):
    """The SDK takes a message's content as a list of text parts as well as a string."""
    url, _ = chat_server
    sdk = client(url)
    system, user = messages(list(sdk.vector_stores.search("vs_kb", query=QUESTION, max_num_results=3)))
    parted = [system, {"role": "user", "content": [{"type": "text", "text": user["content"]}]}]
    sdk.chat.completions.create(model="gpt-4o-mini", messages=parted)
    check_trace(instrumented)


@pytest.mark.parametrize("asynchronous", [False, True], ids=["sync", "async"])
def test_embeddings_create_is_an_embed_span_in_the_root_a_search_opened(instrumented, chat_server, asynchronous):
    """``embeddings.create`` before any search is a span of its own (it opens no root); after one,
    made from the same call, a stage of its root."""
    url, _ = chat_server

    async def search_then_embed() -> list[float]:
        sdk = client(url, openai.AsyncOpenAI)
        assert (await sdk.embeddings.create(model="text-embedding-3-small", input=QUESTION)).data[0].embedding == [0.5, -0.25, 0.125, 1.0]
        await sdk.vector_stores.search("vs_kb", query=QUESTION)
        return (await sdk.embeddings.create(model="text-embedding-3-small", input="refund to card")).data[0].embedding

    if asynchronous:
        assert asyncio.run(search_then_embed()) == [0.5, -0.25, 0.125, 1.0]
    else:
        sdk = client(url)
        # the SDK's own response, decoded as without ragtrace
        assert sdk.embeddings.create(model="text-embedding-3-small", input=QUESTION).data[0].embedding == [0.5, -0.25, 0.125, 1.0]
        sdk.vector_stores.search("vs_kb", query=QUESTION)
        sdk.embeddings.create(model="text-embedding-3-small", input="refund to card")
    auto_root.end_open()
    alone, joined = sorted(instrumented.by_stage("embed"), key=lambda s: s.start_time)
    for span in (alone, joined):
        assert span.name == "embeddings text-embedding-3-small"
        assert span.attributes["gen_ai.provider.name"] == "openai"
        assert (span.attributes["gen_ai.embeddings.dimension.count"], span.attributes["gen_ai.usage.input_tokens"]) == (4, 7)
    assert alone.parent is None
    assert joined.parent.span_id == instrumented.one("pipeline").context.span_id
