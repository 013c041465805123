"""Request boundaries (``ragtrace._internal.boundaries.boundary``): no request ever lands in another's trace.

The real OpenAI SDK under ``ragtrace.instrument("openai")``, answered by an ``httpx.MockTransport``
in the API's own schema. Request ``r`` searches for ``req-r-`` and finds its own 4 chunks
(``file-req-r-``), shows the first 3 as [1]..[3], and the model cites [1] and [2]. By hand, for
every answered request: retrieved 4, in context 3, cited 2, recall 2/4 = 0.5, context precision
3/4 = 0.75, utilisation 2/3. Every exported trace is checked to hold one request's data only
(the ``req-r-`` marker in any attribute), with and without request spans, across thread pools,
``fork``, asyncio tasks and sequential requests.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import json
import math
import os
import re
import threading
import warnings
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest
from opentelemetry.trace import SpanKind

import ragtrace
from ragtrace._internal.boundaries import auto_root
from ragtrace._internal.core import keyed

from .test_openai import instrumented  # noqa: F401 - the fixture: instrument("openai") for one test

MARKER = re.compile(r"req-(\d+)-")
TRUTH = {"retrieved": 4, "in_context": 3, "cited": 2, "recall_proxy": 0.5, "context_precision": 0.75}


def texts(r: int) -> list[str]:
    return [f"req-{r}- fact {k}: refunds take {r + k} days." for k in range(1, 5)]


def chunk_ids(r: int) -> list[str]:
    return [f"file-req-{r}-#{keyed.content_digest(text)}" for text in texts(r)]


def answer_api(request: httpx.Request) -> httpx.Response:
    """``POST /v1/vector_stores/{id}/search`` and ``POST /v1/chat/completions`` as the API answers."""
    body = json.loads(request.content)
    if request.url.path.endswith("/search"):
        query = body["query"]
        r = int(MARKER.search(query).group(1))
        found = texts(r)[: body.get("max_num_results", 10)]
        data = [
            {"file_id": f"file-req-{r}-", "filename": f"r{r}.md", "score": 0.9 - k / 10, "attributes": {}, "content": [{"type": "text", "text": t}]}
            for k, t in enumerate(found)
        ]
        page = {"object": "vector_store.search_results.page", "search_query": [query], "data": data, "has_more": False, "next_page": None}
        return httpx.Response(200, json=page)
    assert request.url.path.endswith("/chat/completions")
    completion = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": body["model"],
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "It takes a few days [1][2]."}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 40, "completion_tokens": 8, "total_tokens": 48},
    }
    return httpx.Response(200, json=completion)


def sync_sdk() -> openai.OpenAI:
    return openai.OpenAI(api_key="sk-test", base_url="http://api.test/v1", max_retries=0, http_client=httpx.Client(transport=httpx.MockTransport(answer_api)))


def async_sdk() -> openai.AsyncOpenAI:
    transport = httpx.MockTransport(answer_api)
    return openai.AsyncOpenAI(api_key="sk-test", base_url="http://api.test/v1", max_retries=0, http_client=httpx.AsyncClient(transport=transport))


def prompt(r: int, found) -> list[dict]:
    """The app's own prompt: the first 3 results numbered, then the question."""
    sources = "\n".join(f"[{n}] {result.content[0].text}" for n, result in enumerate(found[:3], 1))
    return [{"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: what does req-{r}- say?"}]


def request(sdk: openai.OpenAI, r: int, *, answer: bool = True) -> str | None:
    """One request as the SDK's docs write one: search, then (unless search-only) answer."""
    found = list(sdk.vector_stores.search("vs_kb", query=f"what does req-{r}- say?", max_num_results=4))
    if not answer:
        return None
    return sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(r, found)).choices[0].message.content


async def arequest(sdk: openai.AsyncOpenAI, r: int, *, answer: bool = True) -> str | None:
    found = (await sdk.vector_stores.search("vs_kb", query=f"what does req-{r}- say?", max_num_results=4)).data
    if not answer:
        return None
    return (await sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(r, found))).choices[0].message.content


# --- checks -------------------------------------------------------------------------------------
def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def requests_in(spans) -> set[int]:
    """Every request whose marker appears in any attribute of ``spans`` (chunk ids, queries, prompts)."""
    found: set[int] = set()
    for span in spans:
        found.update(int(m) for m in MARKER.findall(json.dumps(dict(span.attributes), default=list)))
    return found


def check_isolation(spans: list, answered: set[int], search_only: set[int] = frozenset()) -> dict[int, object]:
    """0 traces with two requests' data; every retrieve span's parent exported; each root exported
    once; every answered request's root right or marked not measurable. Returns request -> root."""
    traces = defaultdict(list)
    for span in spans:
        traces[span.context.trace_id].append(span)
    mixed = [sorted(requests_in(found)) for found in traces.values() if len(requests_in(found)) > 1]
    assert mixed == [], f"{len(mixed)} traces hold two requests: {mixed[:5]}"
    by_id = {span.context.span_id: span for span in spans}
    roots = [s for s in spans if s.attributes.get("rag.stage") == "pipeline"]
    assert len(by_id) == len(spans) and len({r.context.span_id for r in roots}) == len(roots)  # each exported once
    for retrieved in (s for s in spans if s.attributes.get("rag.stage") == "retrieve"):
        assert retrieved.parent is not None and retrieved.parent.span_id in by_id, "a retrieve span without its parent"
    root_of: dict[int, object] = {}
    for root in roots:
        (r,) = requests_in(traces[root.context.trace_id])
        assert r not in root_of, f"request {r} has two roots"
        root_of[r] = root
    assert set(root_of) == answered | set(search_only)
    for r in answered:
        check_figures(root_of[r])
    for r in search_only:
        root = root_of[r]
        assert root.attributes["rag.root.abandoned"] in ("request_ended", "owner_gone", "replaced", "collected", "exit")
        assert "no_answer" in root.attributes["rag.metrics.status"] and "recall_proxy" not in metrics(root)
    return root_of


def check_figures(root) -> None:
    """The hand-worked truth, or every figure left out with the reason (never a partial figure)."""
    got = metrics(root)
    if "recall_proxy" not in got:
        assert got["status"] and not set(TRUTH) & set(got), f"a figure without its truth: {got}"
        return
    assert "rag.root.abandoned" not in root.attributes
    for name, truth in TRUTH.items():
        assert math.isclose(got[name], truth), (name, got[name], truth)


# --- 1. thread pools ----------------------------------------------------------------------------
@pytest.mark.parametrize("request_spans", [False, True], ids=["no_request_span", "request_span"])
def test_a_thread_pool_never_mixes_requests(instrumented, request_spans):
    """200 requests on 8 pool threads, every fifth one search-only: each request is a root of its
    own, and every answered one has its own figures, right."""
    sdk, tracer = sync_sdk(), instrumented.provider.get_tracer("app")

    def serve(r: int) -> str | None:
        if not request_spans:
            return request(sdk, r, answer=r % 5 != 0)
        with tracer.start_as_current_span(f"POST /ask {r}", kind=SpanKind.SERVER):
            return request(sdk, r, answer=r % 5 != 0)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(serve, range(200)))
    assert answers == [None if r % 5 == 0 else "It takes a few days [1][2]." for r in range(200)]
    # each root ended with its request span, or its call (the pool's later work, or its thread's end)
    assert auto_root.open_count() == 0
    roots = check_isolation(instrumented.all(), {r for r in range(200) if r % 5}, {r for r in range(200) if r % 5 == 0})
    assert all("status" not in metrics(roots[r]) for r in range(200) if r % 5)  # all measured: each request was a call of its own


# --- 2. pre-fork servers ------------------------------------------------------------------------
@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
@pytest.mark.parametrize("request_spans", [False, True], ids=["no_request_span", "request_span"])
def test_forked_workers_never_end_or_export_the_parents_root(instrumented, request_spans):
    """The master searches (warm-up, no answer) and forks two workers that each serve a request
    (with request spans: the warm-up's span still open at the fork, each worker's request in a span
    of its own): no child ends, exports or parents a span under the master's root; the master
    exports it once."""
    sdk, tracer = sync_sdk(), instrumented.provider.get_tracer("app")
    with contextlib.ExitStack() as warm_up:
        if request_spans:
            warm_up.enter_context(tracer.start_as_current_span("warm-up"))
        exported = fork_workers(sdk, instrumented.exporter, tracer if request_spans else None)
    auto_root.end_open()
    (master,) = instrumented.by_stage("pipeline")
    assert master.attributes["rag.root.abandoned"] == ("request_ended" if request_spans else "exit") and requests_in([master]) == {0}
    master_id = f"0x{master.context.span_id:016x}"
    for worker, spans in exported.items():
        assert isinstance(spans, list), spans
        assert {s["context"]["span_id"] for s in spans}.isdisjoint({master_id})
        assert all(s["parent_id"] != master_id for s in spans)
        (root,) = [s for s in spans if s["attributes"].get("rag.stage") == "pipeline"]
        served = [s["context"]["span_id"] for s in spans if s["name"] == f"request {worker}"]
        assert root["parent_id"] == (served[0] if request_spans else None) and "rag.root.abandoned" not in root["attributes"]
        assert {int(m) for s in spans for m in MARKER.findall(json.dumps(s["attributes"]))} == {worker}
        got = {k.removeprefix("rag.metrics."): v for k, v in root["attributes"].items() if k.startswith("rag.metrics.")}
        assert all(math.isclose(got[name], truth) for name, truth in TRUTH.items()), got


def fork_workers(sdk: openai.OpenAI, exporter, tracer) -> dict[int, list[dict]]:
    """Search (the master's warm-up), then fork two workers that each serve one request (in a
    span of its own when ``tracer`` is given) and send back what they exported."""
    request(sdk, 0, answer=False)
    assert auto_root.open_count() == 1
    exported: dict[int, list[dict]] = {}
    for worker in (1, 2):
        read, write = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork() with threads
            pid = os.fork()
        if pid == 0:  # the worker
            try:
                os.close(read)
                exporter.clear()
                assert auto_root.open_count() == 0
                with tracer.start_as_current_span(f"request {worker}") if tracer else contextlib.nullcontext():
                    request(sdk, worker)
                auto_root.end_open()  # the worker's exit
                out = json.dumps([json.loads(s.to_json()) for s in exporter.get_finished_spans()])
            except BaseException as error:  # noqa: BLE001 - reported to the parent
                out = json.dumps({"error": repr(error)})
            with os.fdopen(write, "w") as pipe:
                pipe.write(out)
            os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            exported[worker] = json.loads(pipe.read())
        os.waitpid(pid, 0)
    return exported


# --- 3. asyncio tasks, 6. lingering roots ---------------------------------------------------------
@pytest.mark.parametrize("request_spans", [False, True], ids=["no_request_span", "request_span"])
def test_tasks_created_after_a_search_only_root_never_join_it(instrumented, request_spans):
    tracer = instrumented.provider.get_tracer("app")

    async def serve(sdk, r: int, answer: bool = True) -> str | None:
        if not request_spans:
            return await arequest(sdk, r, answer=answer)
        with tracer.start_as_current_span(f"request {r}", kind=SpanKind.SERVER):
            return await arequest(sdk, r, answer=answer)

    async def main() -> list:
        sdk = async_sdk()
        await serve(sdk, 0, answer=False)  # its root stays in this task's context
        return await asyncio.gather(*(serve(sdk, r) for r in (1, 2, 3)))

    assert asyncio.run(main()) == ["It takes a few days [1][2]."] * 3
    assert auto_root.open_count() == 0  # the search-only root ended with its task (or span)
    roots = check_isolation(instrumented.all(), {1, 2, 3}, {0})
    assert roots[0].attributes["rag.root.abandoned"] == ("request_ended" if request_spans else "owner_gone")
    assert all("status" not in metrics(roots[r]) for r in (1, 2, 3))


def test_search_only_tasks_end_their_roots_with_the_tasks(instrumented):
    """40 concurrent search-only requests: 40 roots ended when their tasks did, none open after
    the run, and no retrieve span exported without its parent."""

    async def main() -> None:
        sdk = async_sdk()
        await asyncio.gather(*(arequest(sdk, r, answer=False) for r in range(40)))

    asyncio.run(main())
    assert auto_root.open_count() == 0
    roots = check_isolation(instrumented.all(), set(), set(range(40)))
    assert {root.attributes["rag.root.abandoned"] for root in roots.values()} == {"owner_gone"}


def test_a_fan_out_inside_one_request_span_is_one_root(instrumented):
    """Inside one request span: two searches one after the other, then the answer from a task it
    starts (the same request's work): one root with both searches, figures right."""
    tracer = instrumented.provider.get_tracer("app")

    async def main() -> str:
        sdk = async_sdk()
        with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER):
            first = (await sdk.vector_stores.search("vs_kb", query="what does req-5- say?", max_num_results=2)).data
            second = (await sdk.vector_stores.search("vs_kb", query="more on req-5-", max_num_results=4)).data
            found = [*first, *second[2:]]

            async def answer() -> str:
                return (await sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(5, found))).choices[0].message.content

            return await asyncio.create_task(answer())

    assert asyncio.run(main()) == "It takes a few days [1][2]."
    roots = check_isolation(instrumented.all(), {5})
    assert len(instrumented.by_stage("retrieve")) == 2 and "status" not in metrics(roots[5])
    assert metrics(roots[5])["duplicate_chunks"] == 2  # the first search's 2 chunks found again


# --- 4. sequential requests, and two searches in one request span --------------------------------
def test_sequential_requests_in_one_thread(instrumented):
    """Request 1 searches only; request 2 (another call) searches and answers: two roots, request
    2's figures its own, right."""
    sdk = sync_sdk()
    request(sdk, 1, answer=False)
    request(sdk, 2)
    auto_root.end_open()
    roots = check_isolation(instrumented.all(), {2}, {1})
    assert roots[1].attributes["rag.root.abandoned"] == "owner_gone" and "status" not in metrics(roots[2])


def test_sequential_searches_of_one_call_are_not_guessed_into_one_request(instrumented):
    """Two searches one after the other from the same function call, no request span: two
    requests in a loop, or one request searching twice? ragtrace can't tell, so it doesn't join:
    the second root's figures are marked not measured (request_split), never partial."""
    sdk = sync_sdk()
    sdk.vector_stores.search("vs_kb", query="what does req-1- say?", max_num_results=4)
    found = list(sdk.vector_stores.search("vs_kb", query="what does req-2- say?", max_num_results=4))
    sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(2, found))
    auto_root.end_open()
    roots = check_isolation(instrumented.all(), {2}, {1})
    assert roots[1].attributes["rag.root.abandoned"] == "replaced" and metrics(roots[2])["status"] == "request_split"
    generated = instrumented.one("generate")
    assert generated.attributes["rag.citation.status"] == "request_split" and "rag.citation.invalid_count" not in generated.attributes
    assert metrics(generated)["status"] == "request_split" and "recall_proxy" not in metrics(generated)


@pytest.mark.parametrize("with_pool", [False, True], ids=["inline", "thread_pool"])
def test_two_searches_and_one_completion_in_one_request_span_are_one_root(instrumented, with_pool):
    tracer = instrumented.provider.get_tracer("app")

    def serve(sdk) -> str:
        with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER):
            first = list(sdk.vector_stores.search("vs_kb", query="what does req-7- say?", max_num_results=2))
            second = list(sdk.vector_stores.search("vs_kb", query="and req-7- again?", max_num_results=4))
            return sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(7, [*first, *second[2:]])).choices[0].message.content

    if with_pool:
        with ThreadPoolExecutor(2) as pool:
            assert pool.submit(serve, sync_sdk()).result() == "It takes a few days [1][2]."
    else:
        assert serve(sync_sdk()) == "It takes a few days [1][2]."
    roots = check_isolation(instrumented.all(), {7})
    assert len(instrumented.by_stage("retrieve")) == 2 and "status" not in metrics(roots[7])
    server = next(s for s in instrumented.all() if s.name == "POST /ask")
    assert roots[7].parent.span_id == server.context.span_id and roots[7].end_time <= server.end_time


def test_a_stage_under_a_span_inside_the_request_span_joins(instrumented):
    """The model call under a span the app opened inside the request span is the request's."""
    sdk, tracer = sync_sdk(), instrumented.provider.get_tracer("app")
    with tracer.start_as_current_span("POST /ask", kind=SpanKind.SERVER):
        found = list(sdk.vector_stores.search("vs_kb", query="what does req-8- say?", max_num_results=4))
        with tracer.start_as_current_span("answer step"), tracer.start_as_current_span("llm call"):
            sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(8, found))
    roots = check_isolation(instrumented.all(), {8})
    assert "status" not in metrics(roots[8]) and instrumented.one("generate").parent.span_id == roots[8].context.span_id


def test_a_model_call_from_a_comprehension_in_the_same_function_joins(instrumented):
    sdk = sync_sdk()
    found = list(sdk.vector_stores.search("vs_kb", query="what does req-9- say?", max_num_results=4))
    [answer] = [sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(9, found)) for _ in range(1)]
    roots = check_isolation(instrumented.all(), {9})
    assert "status" not in metrics(roots[9])


def test_a_stage_beside_the_request_span_never_joins(instrumented):
    """A search under request span A; the model call of a sibling span B of the same trace (a
    second request handled inside one outer span) is not A's: A's root ends with A, unanswered."""
    sdk, tracer = sync_sdk(), instrumented.provider.get_tracer("app")
    with tracer.start_as_current_span("batch"):
        with tracer.start_as_current_span("item 1"):
            list(sdk.vector_stores.search("vs_kb", query="what does req-1- say?", max_num_results=4))
            with tracer.start_as_current_span("item 2"):  # under item 1's span: it may join
                pass
        with tracer.start_as_current_span("item 3"):
            sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(3, []))
    (root,) = instrumented.by_stage("pipeline")
    assert root.attributes["rag.root.abandoned"] == "request_ended"
    assert instrumented.one("generate").parent.span_id != root.context.span_id


# --- 5. concurrent answers inside one pipeline ---------------------------------------------------
def assemble_and_answer(sdk: openai.OpenAI, r: int, both: threading.Barrier) -> str:
    found = list(sdk.vector_stores.search("vs_kb", query=f"what does req-{r}- say?", max_num_results=4))
    with ragtrace.assemble() as ctx:
        sources = ctx.place_all([{"id": i, "content": result.content[0].text} for i, result in zip(chunk_ids(r)[:3], found)])
    both.wait(10)  # both assembled before either answers: the pipeline's latest assembly is the other's
    return sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": sources}]).choices[0].message.content


@pytest.mark.parametrize("where", ["tasks", "threads"])
def test_concurrent_answers_are_scored_against_their_own_assembly(instrumented, where):
    """Two answers in one rag_pipeline, each from its own task (or thread): each cites its own
    chunks, and the root's figures aggregate both. By hand: retrieved 8, in context 6 (3 + 3),
    cited 4 (2 + 2), recall 4/8 = 0.5, context precision 6/8 = 0.75, utilisation 4/6."""
    sdk = sync_sdk()
    both = threading.Barrier(2)
    with ragtrace.rag_pipeline("two-answers") as run:
        if where == "threads":
            with ThreadPoolExecutor(2) as pool:  # each call in a copy of the pipeline's context
                futures = [pool.submit(contextvars.copy_context().run, assemble_and_answer, sdk, r, both) for r in (1, 2)]
                answers = [f.result() for f in futures]
        else:

            async def main() -> list[str]:
                return await asyncio.gather(*(asyncio.to_thread(assemble_and_answer, sdk, r, both) for r in (1, 2)))

            answers = asyncio.run(main())
    assert answers == ["It takes a few days [1][2]."] * 2
    generated = sorted(instrumented.by_stage("generate"), key=lambda s: MARKER.search(json.dumps(dict(s.attributes))).group(1))
    for r, span in zip((1, 2), generated):
        assert list(span.attributes["rag.citation.ids"]) == chunk_ids(r)[:2]
        assert "rag.metrics.status" not in span.attributes and span.attributes["rag.metrics.cited"] == 2
    got = run.metrics
    assert (got["retrieved"], got["in_context"], got["cited"]) == (8, 6, 4)
    assert got["recall_proxy"] == 0.5 and got["context_precision"] == 0.75 and math.isclose(got["context_utilization"], 4 / 6)


def test_an_answer_whose_own_assembly_cannot_be_told_is_not_scored(instrumented):
    """Two tasks each assemble; the answer comes from the pipeline's own task, which made none:
    which context it was shown can't be known, so its citations and the root's citation figures
    are not measured (context_unknown); |C| still counts both assemblies."""
    sdk = sync_sdk()
    both = threading.Barrier(2)

    def assemble_only(r: int) -> str:
        both.wait(10)  # in two threads at once
        found = list(sdk.vector_stores.search("vs_kb", query=f"what does req-{r}- say?", max_num_results=4))
        with ragtrace.assemble() as ctx:
            return ctx.place_all([{"id": i, "content": res.content[0].text} for i, res in zip(chunk_ids(r)[:3], found)])

    async def main() -> list[str]:
        return await asyncio.gather(*(asyncio.to_thread(assemble_only, r) for r in (1, 2)))

    with ragtrace.rag_pipeline("unknown-context") as run:
        sources = asyncio.run(main())
        sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "\n".join(sources)}])
    generated = instrumented.one("generate")
    assert generated.attributes["rag.citation.status"] == "context_unknown"
    assert "context_unknown" in generated.attributes["rag.metrics.status"] and "rag.metrics.cited" not in generated.attributes
    assert "context_unknown" in run.status and "cited" not in run.metrics and "recall_proxy" not in run.metrics
    assert (run.metrics["retrieved"], run.metrics["in_context"]) == (8, 6)


@pytest.mark.parametrize("whose", ["ragtrace_own_global", "app_global_beside_ragtrace_own"])
def test_the_request_span_end_is_seen_on_whichever_provider_made_it(global_provider_slot, whose):
    """The request span comes from the global provider: ragtrace's own (``configure(exporter=)``
    installs it when the app has none), or the app's while ragtrace keeps its own private. Either
    way the search-only root ends with the request span, and the next request is its own root."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    ours, apps = InMemorySpanExporter(), InMemorySpanExporter()
    if whose == "app_global_beside_ragtrace_own":
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(apps))
        trace.set_tracer_provider(provider)
    ragtrace.configure(exporter=ours, batch=False)
    ragtrace.instrument("openai")
    try:
        sdk, tracer = sync_sdk(), trace.get_tracer("app")
        with tracer.start_as_current_span("request 1", kind=SpanKind.SERVER):
            request(sdk, 1, answer=False)
        assert auto_root.open_count() == 0
        with tracer.start_as_current_span("request 2", kind=SpanKind.SERVER):
            request(sdk, 2)
    finally:
        ragtrace.uninstrument("openai")
    spans = list(ours.get_finished_spans())
    roots = {requests_in([r]).pop(): r for r in spans if r.attributes.get("rag.stage") == "pipeline"}
    assert roots[1].attributes["rag.root.abandoned"] == "request_ended"
    check_figures(roots[2])
    check_isolation(spans + list(apps.get_finished_spans()), {2}, {1})  # the app's spans, when they went elsewhere


# --- 5. one long CONSUMER span around a consumer loop -------------------------------------------
def roots_by_request(spans) -> dict[int, object]:
    """Each root and the requests whose data is in its own subtree (the consumer span puts every
    root in one trace, so the check is per root): never two requests in one root."""
    children = defaultdict(list)
    for span in spans:
        if span.parent is not None:
            children[span.parent.span_id].append(span)
    found: dict[int, object] = {}
    for root in (s for s in spans if s.attributes.get("rag.stage") == "pipeline"):
        stack, subtree = [root], []
        while stack:
            span = stack.pop()
            subtree.append(span)
            stack += children[span.context.span_id]
        held = requests_in(subtree)
        assert len(held) == 1, f"a root holds {sorted(held)}"
        (r,) = held
        assert r not in found, f"request {r} has two roots"
        found[r] = root
    return found


def test_one_consumer_span_around_a_loop_never_merges_its_messages(instrumented):
    """A queue consumer with one CONSUMER span around its loop (a batch): message 1 is searched
    but not answered (filtered), messages 2 and 3 are handled concurrently, message 4 in turn.
    Joined by the span, message 1's and 2's retrievals would share one root and 2's recall read
    0.25 (2 cited of 8) where the truth is 0.5. A CONSUMER span may hold many messages, so the
    one rule takes the call that searched as the owner: every answered message's root holds its
    own data, right or not measured (request_split), never a figure of two messages."""
    tracer = instrumented.provider.get_tracer("app")

    async def consume(sdk) -> list:
        with tracer.start_as_current_span("orders process", kind=SpanKind.CONSUMER):
            await arequest(sdk, 1, answer=False)
            replies = list(await asyncio.gather(arequest(sdk, 2), arequest(sdk, 3)))
            found = (await sdk.vector_stores.search("vs_kb", query="what does req-4- say?", max_num_results=4)).data
            replies.append((await sdk.chat.completions.create(model="gpt-4o-mini", messages=prompt(4, found))).choices[0].message.content)
            return replies

    assert asyncio.run(consume(async_sdk())) == ["It takes a few days [1][2]."] * 3
    auto_root.end_open()
    roots = roots_by_request(instrumented.all())
    assert set(roots) == {1, 2, 3, 4}
    for r in (2, 3, 4):
        check_figures(roots[r])
    assert all("status" not in metrics(roots[r]) for r in (2, 3))  # their own tasks: measured, right
    assert "recall_proxy" not in metrics(roots[1])
