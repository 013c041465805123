"""Iterators a decorated function *returns* reach the app whole and are recorded as it consumes them."""

from __future__ import annotations

import asyncio
import gc
import inspect
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import ragtrace
from ragtrace._internal.setup import config
from ragtrace._internal import names

ROOT = Path(__file__).resolve().parent.parent

DOCS = [{"id": "a", "score": 0.9, "content": "alpha text"}, {"id": "b", "score": 0.5, "content": "beta text"}]


class Stream:
    """The shape of an OpenAI ``Stream``: an iterator that is also a context manager with its own
    attributes and a ``close()`` that ends the response."""

    def __init__(self, pieces: list[str]) -> None:
        self.response = "http-response"
        self.closed = False
        self._iterator = iter(pieces)

    def __iter__(self):
        yield from self._iterator  # like openai.Stream: a fresh generator over the same items

    def __next__(self) -> str:
        return self._iterator.__next__()

    def __enter__(self) -> Stream:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self.closed = True


class AsyncStream:
    """The shape of an OpenAI ``AsyncStream``."""

    def __init__(self, pieces: list[str]) -> None:
        self.closed = False
        self._pieces = list(pieces)

    def __aiter__(self) -> AsyncStream:
        return self

    async def __anext__(self) -> str:
        await asyncio.sleep(0)
        if not self._pieces:
            raise StopAsyncIteration
        return self._pieces.pop(0)

    async def __aenter__(self) -> AsyncStream:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        self.closed = True


def test_generator_returning_an_iterator_gives_the_app_every_piece(spans):
    @ragtrace.generator(model="m")
    def ask(prompt: str):
        return iter(["Hello ", "world"])

    returned = ask("p")
    assert spans.by_stage("generate") == []  # the stage stays open while the app reads
    assert list(returned) == ["Hello ", "world"]
    span = spans.one("generate")
    assert span.attributes[names.OI_OUTPUT_VALUE] == "Hello world"
    assert span.attributes[names.GEN_AI_REQUEST_STREAM] is True


@pytest.mark.parametrize("shape", ["genexpr", "map", "filter"])
def test_retriever_returning_an_iterator_is_recorded_as_consumed(spans, shape):
    @ragtrace.retriever
    def search(query: str):
        if shape == "genexpr":
            return (d for d in DOCS)
        if shape == "map":
            return map(dict, DOCS)
        return filter(None, DOCS)

    with ragtrace.rag_pipeline("p") as run:
        docs = list(search("q"))
        with ragtrace.assemble() as ctx:
            ctx.add(docs[0])
        with ragtrace.generate(model="m") as g:
            g.record("alpha [1]")
    assert [d["id"] for d in docs] == ["a", "b"]
    assert list(spans.one("retrieve").attributes[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["a", "b"]
    assert (run.metrics["retrieved"], run.metrics["cited"], run.metrics["recall_proxy"]) == (2, 1, 0.5)


def test_reranker_returning_an_iterator(spans):
    @ragtrace.reranker(model="r")
    def rerank(query: str, documents: list):
        return reversed(documents)

    assert [d["id"] for d in rerank("q", DOCS)] == ["b", "a"]
    assert list(spans.one("rerank").attributes[names.RAG_RERANK_OUTPUT_IDS]) == ["b", "a"]


def test_a_stream_that_is_a_context_manager_behaves_the_same(spans):
    streams: list[Stream] = []

    @ragtrace.generator(model="m")
    def ask(prompt: str):
        streams.append(Stream(["Hi ", "there"]))
        return streams[0]

    returned = ask("p")
    assert isinstance(returned, Stream)
    assert returned.response == "http-response"
    with returned as stream:
        pieces = [piece for piece in stream]
    assert pieces == ["Hi ", "there"]
    assert streams[0].closed
    assert spans.one("generate").attributes[names.OI_OUTPUT_VALUE] == "Hi there"


def test_closing_early_records_what_the_app_read(spans):
    @ragtrace.generator(model="m")
    def ask(prompt: str):
        return Stream(["a", "b", "c"])

    before = otel_context.get_current()
    with ask("p") as stream:
        for piece in stream:
            break
    assert otel_context.get_current() == before
    span = spans.one("generate")
    assert span.attributes[names.OI_OUTPUT_VALUE] == "a"
    assert span.status.status_code == StatusCode.UNSET


def test_an_iterator_read_some_other_way_records_no_result(spans):
    """A cursor read with fetchall() never passes through ragtrace: no figures, not an empty retrieval."""
    connection = sqlite3.connect(":memory:")
    connection.execute("create table docs (id text, content text)")
    connection.executemany("insert into docs values (?, ?)", [("a", "alpha"), ("b", "beta")])

    @ragtrace.retriever
    def search(query: str):
        return connection.execute("select id, content from docs")

    cursor = search("q")
    assert isinstance(cursor, sqlite3.Cursor)
    assert cursor.fetchall() == [("a", "alpha"), ("b", "beta")]
    cursor.close()
    span = spans.one("retrieve")
    assert names.RAG_RETRIEVAL_CHUNK_IDS not in span.attributes
    assert names.RAG_RETRIEVAL_RESULT_COUNT not in span.attributes


def test_a_dropped_iterator_ends_its_span(spans):
    @ragtrace.generator
    def ask(prompt: str):
        return iter(["x", "y"])

    returned = ask("p")
    assert next(returned) == "x"
    del returned
    gc.collect()
    assert spans.one("generate").attributes[names.OI_OUTPUT_VALUE] == "x"


def test_a_returned_generator_keeps_send_and_its_context(spans):
    seen: list[int] = []

    def echo():
        received = yield "start"
        for _ in range(3):  # finite: draining it whole (the old defect) must not hang the test
            seen.append(trace.get_current_span().get_span_context().span_id)
            received = yield f"got {received}"

    @ragtrace.generator
    def ask(prompt: str):
        return echo()

    returned = ask("p")
    assert next(returned) == "start"
    assert returned.send(1) == "got 1"
    assert returned.send(2) == "got 2"
    returned.close()
    span = spans.one("generate")
    assert span.attributes[names.OI_OUTPUT_VALUE] == "startgot 1got 2"
    assert set(seen) == {span.context.span_id}


def test_a_plain_iterator_gains_no_methods(spans):
    @ragtrace.generator
    def ask(prompt: str):
        return iter(["x"])

    returned = ask("p")
    assert not hasattr(returned, "close") and not hasattr(returned, "send")
    assert list(returned) == ["x"]


def test_an_iterator_raising_midway_passes_the_same_exception(spans):
    class Broken(Exception):
        pass

    def pieces():
        yield "a"
        raise Broken("mid-stream")

    @ragtrace.generator
    def ask(prompt: str):
        return pieces()

    returned = ask("p")
    with pytest.raises(Broken, match="mid-stream"):
        list(returned)
    span = spans.one("generate")
    assert span.status.status_code == StatusCode.ERROR


def test_async_function_returning_an_async_stream(spans):
    streams: list[AsyncStream] = []

    @ragtrace.generator(model="m")
    async def ask(prompt: str):
        streams.append(AsyncStream(["as", "ync"]))
        return streams[0]

    async def main() -> list[str]:
        async with await ask("p") as stream:
            return [piece async for piece in stream]

    assert asyncio.run(main()) == ["as", "ync"]
    assert streams[0].closed
    assert spans.one("generate").attributes[names.OI_OUTPUT_VALUE] == "async"


def test_tracing_off_returns_the_very_same_iterator():
    iterator = iter(["x"])

    @ragtrace.generator
    def ask(prompt: str):
        return iterator

    assert ask("p") is iterator


def test_a_proxy_that_wraps_itself_does_not_hang_the_choice_of_protocol():
    """An object with both iteration protocols whose ``__wrapped__`` is itself: the search for
    what it wraps stops, and it is read as the sync iterator it first offers."""
    from ragtrace._internal.stages.passthrough import _shape

    class Both:
        def __iter__(self):
            return self

        def __next__(self):
            raise StopIteration

        def __aiter__(self):
            return self

        async def __anext__(self):
            raise StopAsyncIteration

        @property
        def __wrapped__(self):
            return self

    both = Both()
    assert _shape(both) is both


# --- bounded: a stage keeps max_retrieved items of a stream, never every row ------------------
_MILLION_ROWS = r"""
import asyncio, json, resource, sys
import ragtrace
from ragtrace.testing import capture

N = 1_000_000

def rows():
    for i in range(N):
        yield {"id": f"row-{i}", "content": f"text of row {i}", "score": 1.0 / (i + 1)}

class Cursor:  # an async cursor, returned by an async retriever
    def __init__(self):
        self._rows = rows()
    def __aiter__(self):
        return self
    async def __anext__(self):
        try:
            return next(self._rows)
        except StopIteration:
            raise StopAsyncIteration from None

@ragtrace.retriever
def returns_an_iterator(query):
    return rows()

@ragtrace.retriever
def yields(query):
    yield from rows()

@ragtrace.retriever
async def returns_an_async_iterator(query):
    return Cursor()

@ragtrace.retriever
async def yields_async(query):
    for row in rows():
        yield row

def consumed(iterator):  # what the app does: read each row in order and throw it away
    seen = 0
    for row in iterator:
        assert row["id"] == f"row-{seen}"
        seen += 1
    return seen

async def consumed_async(make, awaited):
    seen = 0
    async for row in await make("q") if awaited else make("q"):
        assert row["id"] == f"row-{seen}"
        seen += 1
    return seen

def peak_kib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

traced = sys.argv[1] == "traced"
report = {}
with capture() as spans:
    for name, run in (
        ("iterator", lambda: consumed(returns_an_iterator("q") if traced else returns_an_iterator.__wrapped__("q"))),
        ("generator", lambda: consumed(yields("q") if traced else yields.__wrapped__("q"))),
        ("async iterator", lambda: asyncio.run(consumed_async(returns_an_async_iterator if traced else returns_an_async_iterator.__wrapped__, True))),
        ("async generator", lambda: asyncio.run(consumed_async(yields_async if traced else yields_async.__wrapped__, False))),
    ):
        before = peak_kib()
        count = run()
        report[name] = {"count": count, "added_mib": (peak_kib() - before) / 1024}
    report["spans"] = [
        {k: (list(v) if isinstance(v, tuple) else v) for k, v in s.attributes.items() if k.startswith("rag.")}
        for s in spans.spans
    ]
print(json.dumps(report))
"""


@pytest.mark.heavy  # two children reading a million rows four ways: about 12 CPU-seconds
def test_a_million_rows_through_a_decorated_retriever_add_under_64_mib(tmp_path):
    """The issue's case: a million rows streamed through a decorated retriever, read and thrown away
    by the app. Before, the proxy kept every row (+1 GB of peak RSS here); now it keeps the first
    max_retrieved (10,000). Measured as the growth of the child's peak RSS while it reads, next to a
    twin child that reads the same rows untraced, for every way a retriever can stream."""
    script = tmp_path / "million.py"
    script.write_text(_MILLION_ROWS)
    runs = {}
    for mode in ("traced", "untraced"):  # this worktree's ragtrace, not the installed one
        environment = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, timeout=600, env=environment)
        assert done.returncode == 0, done.stderr
        runs[mode] = json.loads(done.stdout)
    for kind in ("iterator", "generator", "async iterator", "async generator"):
        traced, untraced = runs["traced"][kind], runs["untraced"][kind]
        assert traced["count"] == untraced["count"] == 1_000_000, kind  # every row, in order (checked in the child)
        assert traced["added_mib"] - untraced["added_mib"] < 64, (kind, traced, untraced)
    retrieve_spans = [s for s in runs["traced"]["spans"] if s.get(names.RAG_STAGE) == "retrieve"]
    assert len(retrieve_spans) == 4 and runs["untraced"]["spans"] == []
    for attributes in retrieve_spans:
        assert attributes[names.RAG_RETRIEVAL_RESULT_COUNT] == 1_000_000
        assert attributes[names.RAG_OMITTED_ITEMS] == 990_000
        assert attributes[names.RAG_RETRIEVAL_CHUNK_IDS] == [f"row-{i}" for i in range(10_000)]


FIVE = [{"id": f"c{i}", "score": 1 - i / 10, "content": f"chunk {i} text"} for i in range(1, 6)]


def _five_from(shape: str):
    """A retriever of FIVE in each shape a retriever returns results in."""
    if shape == "list":
        return ragtrace.retriever(lambda query: list(FIVE))
    if shape == "iterator":
        return ragtrace.retriever(lambda query: iter(FIVE))
    if shape == "generator":

        def search(query: str):
            yield from FIVE

        return ragtrace.retriever(search)

    async def pieces():
        for item in FIVE:
            yield item

    if shape == "async iterator":

        async def search_async(query: str):
            return pieces()

        return ragtrace.retriever(search_async)

    async def search_yielding(query: str):
        async for item in pieces():
            yield item

    return ragtrace.retriever(search_yielding)


async def _read(returned):
    if hasattr(returned, "__aiter__"):
        return [item async for item in returned]
    if inspect.iscoroutine(returned):
        return await _read(await returned)
    return list(returned)


SHAPES = ["list", "iterator", "generator", "async iterator", "async generator"]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("max_retrieved", [3, 5])
def test_figures_of_a_retrieval_over_max_retrieved_say_it_was_truncated(spans, shape, max_retrieved):
    """Five chunks retrieved, c1 and c4 in context, both cited. With max_retrieved=5 all is known:
    retrieved 5, precision 2/5, recall 2/5, weighted (1 + 1/4) / (1 + 1/2 + 1/3 + 1/4 + 1/5).
    With 3, c4 and c5 reach the app but are only counted: |R| is unknown, so retrieved, precision,
    recall and duplicates are not measured (retrieval_truncated); C and K still are."""
    config.configure(tracer_provider=spans.provider, max_retrieved=max_retrieved)
    search = _five_from(shape)

    async def request():
        with ragtrace.rag_pipeline("p") as run:
            docs = await _read(search("q"))
            with ragtrace.assemble() as ctx:
                ctx.add(docs[0])
                ctx.add(docs[3])
            with ragtrace.generate(model="m") as g:
                g.record("see [1] and [2]")
        return docs, run

    docs, run = asyncio.run(request())
    assert docs == FIVE  # the app got every item, in order, whatever was kept
    retrieve = spans.one("retrieve").attributes
    assert retrieve[names.RAG_RETRIEVAL_RESULT_COUNT] == 5
    assert list(retrieve[names.RAG_RETRIEVAL_CHUNK_IDS]) == [d["id"] for d in FIVE[:max_retrieved]]
    assert (run.metrics["in_context"], run.metrics["cited"], run.metrics["context_utilization"]) == (2, 2, 1.0)
    status = spans.one("pipeline").attributes.get(names.RAG_METRICS_STATUS)
    if max_retrieved == 5:
        assert names.RAG_OMITTED_ITEMS not in retrieve and status is None
        assert (run.metrics["retrieved"], run.metrics["context_precision"], run.metrics["recall_proxy"]) == (5, 0.4, 0.4)
        assert run.metrics["recall_proxy_weighted"] == pytest.approx(1.25 / (1 + 1 / 2 + 1 / 3 + 1 / 4 + 1 / 5), rel=1e-12)
    else:
        assert retrieve[names.RAG_OMITTED_ITEMS] == 2
        assert status == "retrieval_truncated"
        for figure in ("retrieved", "duplicate_chunks", "context_precision", "recall_proxy", "recall_proxy_weighted"):
            assert figure not in run.metrics, figure


def test_a_reranker_over_max_retrieved_records_the_first_and_counts_the_rest(spans):
    config.configure(tracer_provider=spans.provider, max_retrieved=2)

    @ragtrace.reranker(model="r")
    def rerank(query: str, documents: list):
        return reversed(documents)

    assert [d["id"] for d in rerank("q", FIVE[:4])] == ["c4", "c3", "c2", "c1"]
    attributes = spans.one("rerank").attributes
    assert list(attributes[names.RAG_RERANK_OUTPUT_IDS]) == ["c4", "c3"]
    # 4 candidates and 4 results, of each 2 recorded and 2 counted
    assert (attributes[names.RAG_RERANK_INPUT_COUNT], attributes[names.RAG_RERANK_OUTPUT_COUNT], attributes[names.RAG_OMITTED_ITEMS]) == (4, 4, 4)
