"""Iterators a decorated function *returns* reach the app whole and are recorded as it consumes them."""

from __future__ import annotations

import asyncio
import gc
import sqlite3

import pytest
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import StatusCode

import ragtrace
from ragtrace._internal import names

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
    from ragtrace._internal.passthrough import _shape

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
