"""Trace fixtures for the CLI tests: real SDK pipelines exported to jsonl, and reshaped copies.

``write_known`` runs five pipelines whose figures are worked out by hand in ``KNOWN``; the other
helpers turn an export into the Collector's batched shape or Phoenix's otlpv1 shape, split it
across files, or gzip it.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import ragtrace
from ragtrace.exporters import JsonLinesExporter

DATA = Path(__file__).parent / "data"
TOKENS = ragtrace.SimpleTokenizer()

DOCS = {
    f"d{i}": {"id": f"d{i}", "score": round(1 - i / 20, 2), "content": text}
    for i, text in enumerate(
        [
            "BM25 is a lexical ranking function used by search engines.",
            "Dense retrieval embeds queries and documents into one vector space.",
            "Rerankers reorder candidate documents with a cross-encoder.",
            "Chunking splits long documents into overlapping passages.",
            "Hybrid search merges lexical and dense results with reciprocal rank fusion.",
            "A reranker scores each query and passage pair jointly.",
            "Cross-encoders are slower than bi-encoders but more precise.",
            "Late interaction models such as ColBERT keep one vector per token.",
            "Query rewriting expands short questions before retrieval.",
            "Metadata filters restrict retrieval to one tenant or product.",
        ],
        start=1,
    )
}


def docs(*ids: str) -> list[dict[str, Any]]:
    return [DOCS[i] for i in ids]


def tokens(*ids: str) -> int:
    return sum(TOKENS.count(DOCS[i]["content"]) for i in ids)


def provider_to(path: Path, service: str = "rag-service") -> TracerProvider:
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    return provider


def pipeline(
    provider: TracerProvider,
    name: str,
    query: str,
    retrieved: list[str],
    placed: list[str],
    answer: str | None,
    *,
    top_k: int | None = None,
    query_id: str | None = None,
    capture_content: str | None = None,
    **labels: Any,
) -> dict[str, Any]:
    """retrieve -> assemble(placed) -> generate(answer); returns run.metrics."""
    with ragtrace.rag_pipeline(name, query=query, query_id=query_id, tracer_provider=provider, capture_content=capture_content, **labels) as run:
        with ragtrace.retrieve(query, data_source="kb", top_k=top_k, tracer_provider=provider) as r:
            r.record(docs(*retrieved))
        with ragtrace.assemble(tracer_provider=provider) as ctx:
            for chunk_id in placed:
                ctx.add(DOCS[chunk_id])
            prompt = ctx.render(question=query)
        if answer is not None:
            with ragtrace.generate(model="m", provider="p", prompt=prompt, tracer_provider=provider) as g:
                g.record(answer)
    return run.metrics


# The five runs of write_known() and their figures, worked out by hand.
WEIGHTED_T1 = (1 + 1 / 2) / (1 + 1 / 2 + 1 / 3 + 1 / 4)
KNOWN = {
    "What is BM25?": {
        "retrieved": 4, "in_context": 3, "cited": 2, "context_precision": 0.75, "recall_proxy": 0.5,
        "recall_proxy_weighted": WEIGHTED_T1, "context_utilization": 2 / 3, "wasted_context_tokens": tokens("d3"),
        "cited_positions": [1, 2], "verdict": "ok",
    },
    "How does dense retrieval work?": {
        "retrieved": 4, "in_context": 2, "cited": 0, "context_precision": 0.5, "recall_proxy": 0.0,
        "recall_proxy_weighted": 0.0, "context_utilization": 0.0, "wasted_context_tokens": tokens("d1", "d2"),
        "cited_positions": [], "verdict": "check",
    },
    "How do rerankers work?": {
        "retrieved": 2, "in_context": 2, "cited": 1, "context_precision": 1.0, "recall_proxy": 0.5,
        "recall_proxy_weighted": (1 / 2) / (1 + 1 / 2), "context_utilization": 0.5,
        "wasted_context_tokens": tokens("d5"), "cited_positions": [2], "verdict": "ok",
    },
    "What is a metadata filter?": {"retrieved": 0, "verdict": "not measurable"},
    "hello": {"verdict": "not measurable"},
}


def write_known(path: Path) -> list[dict[str, Any]]:
    """Five runs: three measurable, one empty retrieval, one without retrieval. Returns run.metrics."""
    provider = provider_to(path)
    metrics = [
        pipeline(provider, "support-qa", "What is BM25?", ["d1", "d2", "d3", "d4"], ["d1", "d2", "d3"],
                 "BM25 ranks lexically [1]; dense retrieval embeds [2].", top_k=4, version="v1", route="faq"),
        pipeline(provider, "support-qa", "How does dense retrieval work?", ["d1", "d2", "d3", "d4"], ["d1", "d2"],
                 "It embeds queries and documents.", top_k=4, query_id="q-2", version="v2", route="faq"),
        pipeline(provider, "support-qa", "How do rerankers work?", ["d5", "d6"], ["d5", "d6"],
                 "A reranker scores pairs jointly [2].", top_k=2, version="v2", route="search"),
        pipeline(provider, "support-qa", "What is a metadata filter?", [], [], "Sorry, I don't know.", top_k=4, version="v1", route="search"),
    ]
    with ragtrace.rag_pipeline("chat-only", query="hello", tracer_provider=provider) as run:
        with ragtrace.generate(model="m", tracer_provider=provider) as g:
            g.record("Hi there.")
    metrics.append(run.metrics)
    provider.shutdown()
    return metrics


# --- reshaping an export ------------------------------------------------------------------------
def lines(path: Path) -> list[str]:
    opener = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt", encoding="utf-8") as handle:  # type: ignore[operator]
        return [line for line in handle if line.strip()]


def spans_of(path: Path) -> list[tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """(resource, scope, span) for every span of a ragtrace jsonl export."""
    out = []
    for line in lines(path):
        for resource in json.loads(line)["resourceSpans"]:
            for scope in resource["scopeSpans"]:
                for span in scope["spans"]:
                    out.append((resource["resource"], scope["scope"], span))
    return out


def to_collector(source: Path, target: Path, *, per_line: int = 7, seed: int = 5, shuffle_all: bool = False) -> None:
    """The Collector's file-exporter shape: batches of spans from several traces in arrival order,
    each line grouping its spans (shuffled within the line) under two resources and their scopes,
    so a root often precedes its children in a line and traces straddle lines. ``shuffle_all``
    shuffles across lines too (children after their root: needs --grace-spans)."""
    triples = spans_of(source)
    randomizer = random.Random(seed)
    if shuffle_all:
        randomizer.shuffle(triples)
    with open(target, "w", encoding="utf-8") as handle:
        for start in range(0, len(triples), per_line):
            batch = triples[start : start + per_line]
            randomizer.shuffle(batch)
            resources: dict[str, dict[str, Any]] = {}
            for index, (resource, scope, span) in enumerate(batch):
                name = "collector-a" if index % 2 else "collector-b"
                entry = resources.setdefault(
                    name,
                    {
                        "resource": {"attributes": resource.get("attributes", []) + [{"key": "collector.pod", "value": {"stringValue": name}}]},
                        "scopeSpans": [{"scope": scope, "spans": []}],
                        "schemaUrl": "https://opentelemetry.io/schemas/1.26.0",
                    },
                )
                entry["scopeSpans"][0]["spans"].append(span)
            handle.write(json.dumps({"resourceSpans": list(resources.values())}, separators=(",", ":")) + "\n")


_VALUE_KINDS = ("string_value", "bool_value", "int_value", "double_value", "array_value", "kvlist_value", "bytes_value")


def _snake_value(value: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = dict.fromkeys(_VALUE_KINDS)
    ((kind, item),) = value.items()
    if kind == "intValue":
        out["int_value"] = int(item)
    elif kind == "arrayValue":
        out["array_value"] = {"values": [_snake_value(v) for v in item.get("values", [])]}
    elif kind == "kvlistValue":
        out["kvlist_value"] = {"values": [{"key": kv["key"], "value": _snake_value(kv["value"])} for kv in item.get("values", [])]}
    else:
        out[{"stringValue": "string_value", "boolValue": "bool_value", "doubleValue": "double_value", "bytesValue": "bytes_value"}[kind]] = item
    return out


def to_phoenix(source: Path, target: Path, *, pretty: bool = True) -> None:
    """Phoenix's /v1/projects/{p}/spans/otlpv1 page: snake_case, nulls, ints as numbers, newest first."""
    data = []
    for _, _, span in reversed(spans_of(source)):
        data.append(
            {
                "attributes": [{"key": kv["key"], "value": _snake_value(kv["value"])} for kv in span.get("attributes", [])],
                "dropped_attributes_count": None,
                "end_time_unix_nano": int(span["endTimeUnixNano"]),
                "events": [],
                "flags": None,
                "kind": "SPAN_KIND_INTERNAL",
                "links": None,
                "name": span["name"],
                "parent_span_id": span.get("parentSpanId"),
                "span_id": span["spanId"],
                "start_time_unix_nano": int(span["startTimeUnixNano"]),
                "status": {"code": 0, "message": None},
                "trace_id": span["traceId"],
                "trace_state": None,
            }
        )
    with open(target, "w", encoding="utf-8") as handle:
        json.dump({"data": data, "next_cursor": None}, handle, indent=1 if pretty else None)


def split(source: Path, targets: Iterable[Path], *, interleave: bool = False) -> None:
    """The lines of ``source`` over several files: consecutive halves, or round-robin."""
    all_lines = lines(source)
    targets = list(targets)
    parts: list[list[str]] = [[] for _ in targets]
    for index, line in enumerate(all_lines):
        slot = index % len(targets) if interleave else min(index * len(targets) // len(all_lines), len(targets) - 1)
        parts[slot].append(line)
    for target, part in zip(targets, parts):
        target.write_text("".join(part))


def gzip_file(source: Path, target: Path) -> None:
    with open(source, "rb") as src, gzip.open(target, "wb") as dst:
        dst.write(src.read())
