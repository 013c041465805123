"""The fleet test's workload: a ragtrace app serving its metrics with configure(metrics=...).

Run as ``python workload.py PORT``. Each line on stdin names a phase, ``warm`` (one run of every
shape, so every series exists before the measured window opens) or ``run`` (the known workload,
``RUNS`` below); after each the process prints one JSON line with the runs' figures and statuses.
It exits at the end of stdin. The shapes' figures are worked out by hand in test_prometheus.py.
"""

from __future__ import annotations

import json
import sys
import time

from opentelemetry.sdk.trace import TracerProvider

import ragtrace
from ragtrace._internal.core.provided import by_file

FIRST_CHUNK_DELAY = 0.02  # seconds before a streamed answer's first piece: time to first chunk >= this
# Another GenAI instrumentation on the same meter provider (as when the app hands one provider to
# everything): the OpenTelemetry project's util that its GenAI instrumentations record through,
# under the scope of its LangChain one, timing the same calls again, its first chunk much later
OTHER_SCOPE = "opentelemetry.instrumentation.genai.langchain"
OTHER_FIRST_CHUNK_DELAY = 0.05
OTHER: list = []  # its TelemetryHandler, made once ragtrace's provider exists


def docs(*rows: tuple[str, float, str]) -> list[dict]:
    return [{"id": chunk_id, "score": score, "content": text} for chunk_id, score, text in rows]


# (word count = SimpleTokenizer tokens): d0 3, d1 2, d2 4, d3 1
V1_DOCS = docs(("d0", 0.95, "alpha beta gamma"), ("d1", 0.85, "delta epsilon"))
V2_DOCS = docs(("d0", 0.62, "alpha beta gamma"), ("d1", 0.3, "delta epsilon"), ("d2", 0.2, "zeta eta theta iota"), ("d3", 0.1, "kappa"))


def answer_stream(text: str):
    time.sleep(FIRST_CHUNK_DELAY)
    head, _, tail = text.partition(" ")
    yield head + " "
    yield tail


def run(version: str, found: list[dict], shown: int | None, answer: str, scores: dict[str, float]) -> ragtrace.RagPipeline:
    options = {"route": "faq"} if version == "v2" else {}
    with ragtrace.rag_pipeline("qa", version=version, **options) as pipeline:
        with ragtrace.retrieve(data_source="kb") as retrieval:
            retrieval.record(found)
        if shown is not None:
            with ragtrace.assemble() as context:
                for chunk in retrieval.chunks[:shown]:
                    context.add(chunk)
        with ragtrace.generate(model="m") as generation:
            for _ in generation.stream(answer_stream(answer)):
                pass
        other_instrumentation()
    for name, value in scores.items():
        ragtrace.record_score(pipeline, name=name, value=value, scorer="llm")
    return pipeline


def other_instrumentation() -> None:
    """The other instrumentation's retrieval and streamed chat, same model name, no rag.stage."""
    (handler,) = OTHER
    with handler.retrieval(data_source_id="kb", provider="kb"):
        pass
    with handler.inference("openai", request_model="m") as call:
        time.sleep(OTHER_FIRST_CHUNK_DELAY)
        call.record_stream_chunk()


# chunks of two files (lambda mu 2 tokens, nu xi omicron 3, pi 1)
FILE_DOCS = docs(("f1#a", 0.7, "lambda mu"), ("f1#b", 0.5, "nu xi omicron"), ("f2#a", 0.4, "pi"))


def file_level() -> ragtrace.RagPipeline:
    """v1: citations that name files, as a provider's (OpenAI file_search) are recorded through the
    same handles: the three chunks shown, file f1 cited. f1 has two chunks in context, so the chunk
    figures that count cited chunks are not measurable (citations_file_level); precision 1, file
    recall 1/2 (f1 of f1, f2)."""
    with ragtrace.rag_pipeline("qa", version="v1") as pipeline:
        with ragtrace.retrieve(data_source="kb") as retrieval:
            retrieval.record_files(FILE_DOCS, ["f1", "f1", "f2"])
        with ragtrace.assemble() as context:
            for chunk in retrieval.chunks:
                context.add(chunk)
        with ragtrace.generate(model="m") as generation:
            generation.provided = by_file(["f1"], [(c.id, c.file_id) for c in retrieval.chunks])
            generation.record("Refunds take 5 days.")
        other_instrumentation()
    return pipeline


def delegated() -> ragtrace.RagPipeline:
    """v2: retrieves and assembles, then hands the record to another process (ragtrace.inject): its
    root is "delegated", counted by the other side, so the fleet view leaves it out of runs."""
    with ragtrace.rag_pipeline("qa", version="v2", route="faq") as pipeline:
        with ragtrace.retrieve(data_source="kb") as retrieval:
            retrieval.record(V2_DOCS[:1])
        with ragtrace.assemble() as context:
            context.add(retrieval.chunks[0])
        assert ragtrace.inject({})
    return pipeline


SHAPES = {
    # v1: both chunks shown and cited: recall 1, precision 1, 2 valid citations, nothing wasted
    "A": lambda: run("v1", V1_DOCS, 2, "see [1] [2]", {"groundedness": 0.8, "relevance": 3.0}),
    # v2: two shown, one cited: recall 0.5, wasted d1 (2 tokens)
    "B": lambda: run("v2", V2_DOCS[:2], 2, "see [1]", {"groundedness": 0.4}),
    # v2: one shown; cites it, d1 (retrieved, not shown) and [7] (nothing): recall 0.5, precision 0.5
    "B2": lambda: run("v2", V2_DOCS[:2], 1, "see [1] [d1] [7]", {"groundedness": 0.4}),
    # v2: four shown, one cited: recall 0.25, wasted 2 + 4 + 1 tokens
    "B3": lambda: run("v2", V2_DOCS, 4, "see [1]", {"groundedness": 0.4}),
    # v2: no assembly: no_context, citations not scored
    "D": lambda: run("v2", V2_DOCS[:2], None, "see [1]", {}),
    # v2: nothing retrieved: empty_retrieval (then no_context)
    "E": lambda: run("v2", [], None, "nothing found", {}),
    # v2: delegated (d0 retrieved at 0.62 and placed: 3 context tokens)
    "F": delegated,
    # v1: file-level citations (6 context tokens, top score 0.7, file recall 0.5)
    "G": file_level,
}
RUNS = {"A": 10, "B": 3, "B2": 1, "B3": 2, "D": 1, "E": 1, "F": 1, "G": 1}


def main() -> None:
    # traced (spans go nowhere: a TracerProvider with no processor), so ragtrace.inject can hand off
    ragtrace.configure(
        service_name="fleet-workload", tracer_provider=TracerProvider(), metrics=f"prometheus:127.0.0.1:{int(sys.argv[1])}", hash_key="fleet-test-key"
    )
    from opentelemetry.util.genai.handler import TelemetryHandler

    from ragtrace._internal.setup import config

    OTHER.append(TelemetryHandler(tracer_provider=TracerProvider(), meter_provider=config.current().meter_provider, instrumentation_scope_name=OTHER_SCOPE))
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        counts = {shape: 1 for shape in SHAPES} if line.strip() == "warm" else RUNS
        figures = []
        for shape, count in counts.items():
            for _ in range(count):
                pipeline = SHAPES[shape]()
                figures.append({"shape": shape, "status": pipeline.status, "metrics": pipeline.metrics})
        print(json.dumps({"phase": line.strip(), "runs": figures}), flush=True)


if __name__ == "__main__":
    main()
