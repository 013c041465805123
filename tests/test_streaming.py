"""Streaming latency: time to first chunk and time per output chunk, on spans and as metrics.

A fake clock stands in for ``time.perf_counter`` in the stage modules, so the figures are checked
exactly (speed itself is measured in bench/, never here).
"""

from __future__ import annotations

import asyncio
import types
from collections.abc import Iterator

import pytest

import ragtrace
from ragtrace._internal.stages import generation, stage
from ragtrace._internal import names

from test_otel_metrics import points


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def perf_counter(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> Clock:
    found = Clock()
    fake = types.SimpleNamespace(perf_counter=found.perf_counter)
    monkeypatch.setattr(stage, "time", fake)
    monkeypatch.setattr(generation, "time", fake)
    return found


def timed_pieces(clock: Clock, delays: list[float]) -> Iterator[str]:
    for index, delay in enumerate(delays):
        clock.advance(delay)
        yield f"p{index} "


def check_latency(spans, metric_reader, first: float, gaps: list[float]) -> None:
    span = spans.one("generate")
    assert span.attributes[names.GEN_AI_REQUEST_STREAM] is True
    assert span.attributes[names.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK] == pytest.approx(first)
    found = points(metric_reader)
    (ttfc,) = found[names.METRIC_TIME_TO_FIRST_CHUNK]
    assert ttfc.count == 1 and ttfc.sum == pytest.approx(first)
    assert ttfc.attributes[names.GEN_AI_REQUEST_MODEL] == "m"
    assert ttfc.attributes[names.GEN_AI_WORKFLOW_NAME] == "qa"
    (per_chunk,) = found[names.METRIC_TIME_PER_OUTPUT_CHUNK]
    assert per_chunk.count == len(gaps) and per_chunk.sum == pytest.approx(sum(gaps))
    assert per_chunk.max == pytest.approx(max(gaps)) and per_chunk.min == pytest.approx(min(gaps))


def test_generate_stream_times_first_chunk_and_gaps(spans, metric_reader, clock):
    with ragtrace.rag_pipeline("qa"):
        with ragtrace.generate(model="m") as g:
            clock.advance(0.05)  # work inside the block before the stream starts counts too
            text = "".join(g.stream(timed_pieces(clock, [0.25, 0.01, 0.04])))
    assert text == "p0 p1 p2 "
    check_latency(spans, metric_reader, 0.30, [0.01, 0.04])


def test_add_piece_is_timed_for_integrations(spans, metric_reader, clock):
    with ragtrace.rag_pipeline("qa"):
        with ragtrace.generate(model="m") as g:
            for delay in (0.5, 0.02):
                clock.advance(delay)
                g.add_piece({"choices": [{"delta": {"content": "x"}}]})
    check_latency(spans, metric_reader, 0.5, [0.02])


def test_decorated_generator_is_timed_per_item_as_it_arrives(spans, metric_reader, clock):
    @ragtrace.generator(model="m")
    def answer(prompt: str):
        yield from timed_pieces(clock, [0.2, 0.1, 0.3])

    with ragtrace.rag_pipeline("qa"):
        pieces = []
        for piece in answer("prompt"):
            pieces.append(piece)
            clock.advance(1.0)  # the caller's own time between pulls is part of the next gap
    assert pieces == ["p0 ", "p1 ", "p2 "]
    check_latency(spans, metric_reader, 0.2, [1.1, 1.3])


def test_a_returned_iterator_is_timed_as_the_app_reads_it(spans, metric_reader, clock):
    @ragtrace.generator(model="m")
    def answer(prompt: str):
        return timed_pieces(clock, [0.2, 0.1, 0.3])  # a generator object, returned, not yielded from

    with ragtrace.rag_pipeline("qa"):
        pieces = []
        for piece in answer("prompt"):
            pieces.append(piece)
            clock.advance(1.0)
    assert pieces == ["p0 ", "p1 ", "p2 "]
    check_latency(spans, metric_reader, 0.2, [1.1, 1.3])


def test_decorated_async_generator_is_timed(spans, metric_reader, clock):
    @ragtrace.generator(model="m")
    async def answer(prompt: str):
        for delay in (0.4, 0.05):
            await asyncio.sleep(0)
            clock.advance(delay)
            yield "x"

    async def main() -> list[str]:
        async with ragtrace.rag_pipeline("qa"):
            return [piece async for piece in answer("prompt")]

    assert asyncio.run(main()) == ["x", "x"]
    check_latency(spans, metric_reader, 0.4, [0.05])


def test_astream_is_timed(spans, metric_reader, clock):
    async def source():
        for delay in (0.3, 0.2, 0.1):
            clock.advance(delay)
            yield "y"

    async def main() -> None:
        async with ragtrace.rag_pipeline("qa"):
            with ragtrace.generate(model="m") as g:
                async for _ in g.astream(source()):
                    pass

    asyncio.run(main())
    check_latency(spans, metric_reader, 0.3, [0.2, 0.1])


def test_a_plain_generation_has_no_streaming_figures(spans, metric_reader, clock):
    with ragtrace.rag_pipeline("qa"):
        with ragtrace.generate(model="m") as g:
            g.record("whole answer")
    span = spans.one("generate")
    assert names.GEN_AI_REQUEST_STREAM not in span.attributes
    assert names.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in span.attributes
    found = points(metric_reader)
    assert names.METRIC_TIME_TO_FIRST_CHUNK not in found and names.METRIC_TIME_PER_OUTPUT_CHUNK not in found


def test_a_stream_with_no_chunks_is_a_stream_without_a_first_chunk(spans, metric_reader, clock):
    with ragtrace.rag_pipeline("qa"):
        with ragtrace.generate(model="m") as g:
            assert list(g.stream(iter(()))) == []
    span = spans.one("generate")
    assert span.attributes[names.GEN_AI_REQUEST_STREAM] is True
    assert names.GEN_AI_RESPONSE_TIME_TO_FIRST_CHUNK not in span.attributes  # never a fake 0
    assert names.METRIC_TIME_TO_FIRST_CHUNK not in points(metric_reader)


def test_one_chunk_gives_a_first_chunk_time_and_no_gaps(spans, metric_reader, clock):
    with ragtrace.rag_pipeline("qa"):
        with ragtrace.generate(model="m") as g:
            list(g.stream(timed_pieces(clock, [0.7])))
    found = points(metric_reader)
    (ttfc,) = found[names.METRIC_TIME_TO_FIRST_CHUNK]
    assert ttfc.sum == pytest.approx(0.7)
    assert names.METRIC_TIME_PER_OUTPUT_CHUNK not in found
