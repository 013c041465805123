"""ragtrace -> OTLP/HTTP -> a real Arize Phoenix -> read back: what Phoenix users actually see.

Every test exports through a ``BatchSpanProcessor(OTLPSpanExporter)`` to the session's Phoenix server
(``tests/backend/conftest.py``), into a project of its own, and reads the spans back through Phoenix's
REST API (``/spans`` and ``/spans/otlpv1``) and, for what the UI shows (token totals, document counts,
input/output), its GraphQL API. An in-memory exporter on the same provider keeps what ragtrace handed to
the SDK, so "what ragtrace emitted" and "what Phoenix stored" can be told apart.

The redaction tests plant unique marker strings in every piece of content (query, chunk texts, metadata,
prompt template, completion, exception messages) and search every byte Phoenix returns for them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragtrace
from ragtrace._internal import names

from .phoenix import PROJECT_NAME_ATTRIBUTE, PhoenixServer, otlp_attributes

pytestmark = pytest.mark.heavy

QUERY = "What is BM25?"
DOCS = [
    {"id": "d1", "score": 0.91, "content": "BM25 is a lexical ranking function.", "metadata": {"src": "a.md"}},
    {"id": "d2", "score": 0.83, "content": "Dense retrieval embeds queries and documents.", "metadata": {"src": "b.md"}},
    {"id": "d3", "score": 0.52, "content": "Rerankers reorder candidate documents.", "metadata": {"src": "c.md"}},
    {"id": "d4", "score": 0.41, "content": "Chunking splits documents into passages.", "metadata": {"src": "d.md"}},
]
# The reranker keeps three, in a new order, with its own scores.
RERANKED = [dict(DOCS[1], score=0.97), dict(DOCS[0], score=0.88), dict(DOCS[2], score=0.12)]
SYSTEM_PROMPT = "Answer from the numbered sources and cite them like [1]."
TEMPLATE = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "{context}\n\nQuestion: {question}"}]
ANSWER = "BM25 ranks documents lexically [2]; dense retrieval embeds text [1]."
COMPLETION = {
    "id": "chatcmpl-rt-1",
    "model": "gpt-4o-mini-2024-07-18",
    "choices": [{"message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 120, "completion_tokens": 14},
}
SPAN_NAMES = {
    "pipeline": "invoke_workflow support-qa",
    "embed": "embeddings all-MiniLM-L6-v2",
    "retrieve": "retrieval product-docs",
    "rerank": "rerank ms-marco-MiniLM",
    "assemble": "assemble_context",
    "generate": "chat gpt-4o-mini",
}
KINDS = {
    "pipeline": "CHAIN",
    "embed": "EMBEDDING",
    "retrieve": "RETRIEVER",
    "rerank": "RERANKER",
    "assemble": "PROMPT",
    "generate": "LLM",
}
PROXIES = ["context_precision", "recall_proxy", "recall_proxy_weighted", "context_utilization"]


# --- plumbing ---------------------------------------------------------------------------------
class Export:
    """A provider exporting to Phoenix (batched, OTLP/HTTP) and, in parallel, to memory."""

    def __init__(self, server: PhoenixServer, project: str) -> None:
        self.server, self.project = server, project
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(
            resource=Resource.create({PROJECT_NAME_ATTRIBUTE: project, "service.name": "ragtrace-roundtrip"})
        )
        self.provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=server.otlp_http_endpoint)))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))

    def configure(self, **options: Any) -> None:
        ragtrace.configure(tracer_provider=self.provider, **options)

    def flush(self) -> None:
        assert self.provider.force_flush(10_000), "OTLP export to Phoenix did not flush"

    def sdk_spans(self) -> list[ReadableSpan]:
        return list(self.memory.get_finished_spans())

    def read_trace(self, run: ragtrace.RagPipeline, expected: set[str]) -> dict[str, dict]:
        """The REST spans of ``run``'s trace once every expected name arrived, keyed by name."""
        self.flush()
        trace_id = format(run.span.get_span_context().trace_id, "032x")

        def arrived(spans: list[dict]) -> bool:
            return {s["name"] for s in spans} >= expected

        spans = self.server.wait_for_spans(self.project, arrived, trace_id=trace_id)
        assert sorted(s["name"] for s in spans) == sorted(expected), "unexpected or duplicate spans in Phoenix"
        return {s["name"]: s for s in spans}

    def graphql_span(self, rest_span: dict) -> dict:
        """What the Phoenix UI reads for a span (the REST ``id`` is its GraphQL node id)."""
        query = """query ($id: ID!) { node(id: $id) { ... on Span {
            name spanKind statusMessage tokenCountPrompt tokenCountCompletion tokenCountTotal
            cumulativeTokenCountTotal numDocuments attributes
            input { value mimeType } output { value mimeType }
            events { name message }
            spanAnnotations { name } trace { traceAnnotations { name } }
        } } }"""
        answer = self.server.client.request("POST", "/graphql", body={"query": query, "variables": {"id": rest_span["id"]}})
        assert not answer.get("errors"), answer
        node = answer["data"]["node"]
        assert node["name"] == rest_span["name"]
        return node

    def close(self) -> None:
        self.provider.shutdown()


@pytest.fixture
def export(phoenix_server: PhoenixServer, phoenix_project: str) -> Iterator[Export]:
    exporting = Export(phoenix_server, phoenix_project)
    yield exporting
    exporting.close()  # tests/conftest.py resets ragtrace's configuration afterwards


def run_pipeline(**pipeline_options: Any) -> ragtrace.RagPipeline:
    """embed -> retrieve (scored) -> rerank -> assemble (chat template) -> generate (cites [2] and [1])."""
    with ragtrace.rag_pipeline("support-qa", query=QUERY, query_id="q-0001", version="v2", **pipeline_options) as run:
        with ragtrace.embed(model="all-MiniLM-L6-v2", provider="local") as e:
            e.record([[0.1] * 384], input_tokens=7, text=QUERY)
        with ragtrace.retrieve(QUERY, data_source="product-docs", top_k=4) as r:
            r.record(DOCS)
        with ragtrace.rerank(model="ms-marco-MiniLM", provider="local", top_n=3, query=QUERY) as rr:
            rr.record(RERANKED)
        with ragtrace.assemble(max_tokens=2000) as ctx:
            for chunk in rr.chunks:
                ctx.add(chunk)
            prompt = ctx.render(TEMPLATE, question=QUERY)
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt, temperature=0.0, max_tokens=64) as g:
            g.record(COMPLETION)
    return run


def expected_figures() -> dict[str, Any]:
    wasted = ragtrace.SimpleTokenizer().count(DOCS[2]["content"])  # d3 was placed, never cited
    return {
        "retrieved": 4,
        "in_context": 3,
        "cited": 2,
        "invalid_citations": 0,
        "out_of_context_citations": 0,
        "unknown_citations": 0,
        "context_precision": 0.75,
        "recall_proxy": 0.5,
        "recall_proxy_weighted": (1 + 1 / 2) / (1 + 1 / 2 + 1 / 3 + 1 / 4),
        "context_utilization": 2 / 3,
        "wasted_context_tokens": wasted,
        "duplicate_chunks": 0,
        "cited_positions": [1, 2],
    }


def label(score: float) -> str:
    return "none" if score <= 0 else "low" if score < 1 / 3 else "medium" if score < 2 / 3 else "high"


def keys_under(attributes: dict, prefix: str) -> set[str]:
    return {k for k in attributes if k.startswith(prefix)}


def assert_figures_on_root(root: dict, run: ragtrace.RagPipeline) -> None:
    """rag.metrics.* and the gen_ai.evaluation.result events, as Phoenix stored them."""
    a = root["attributes"]
    expected = expected_figures()
    assert set(run.metrics) == set(expected)
    for key, value in expected.items():
        assert run.metrics[key] == pytest.approx(value), key
        stored = a[f"rag.metrics.{key}"]
        assert stored == run.metrics[key], key  # exactly what the SDK computed, not just close
        assert type(stored) is type(run.metrics[key]), (key, type(stored))
    # no status: all measured; and the context they rest on was recorded
    assert keys_under(a, "rag.metrics.") == {f"rag.metrics.{k}" for k in expected} | {"rag.metrics.inclusion_method"}
    assert a["rag.metrics.inclusion_method"] == "recorded"
    # written once: no trace.evaluations.* copy of the proxies (Phoenix never read them as evaluations)
    assert keys_under(a, "trace.evaluations.") == set()
    events = [e for e in root["events"] if e["name"] == "gen_ai.evaluation.result"]
    assert [
        (e["attributes"]["gen_ai.evaluation.name"], e["attributes"]["gen_ai.evaluation.score.value"], e["attributes"]["gen_ai.evaluation.score.label"])
        for e in events
    ] == [(f"ragtrace.{p}", run.metrics[p], label(run.metrics[p])) for p in PROXIES]


def assert_structure(by_name: dict[str, dict], run: ragtrace.RagPipeline) -> dict[str, dict]:
    """Names, kinds and parent links; returns the spans keyed by stage."""
    by_stage = {stage: by_name[name] for stage, name in SPAN_NAMES.items()}
    root = by_stage["pipeline"]
    root_context = run.span.get_span_context()
    assert root["context"] == {"trace_id": format(root_context.trace_id, "032x"), "span_id": format(root_context.span_id, "016x")}
    assert root["parent_id"] is None
    for stage, span in by_stage.items():
        assert span["span_kind"] == KINDS[stage], stage
        assert span["attributes"]["rag.stage"] == stage
        assert "openinference.span.kind" not in span["attributes"]  # REST moves it into span_kind
        assert span["context"]["trace_id"] == root["context"]["trace_id"]
        if span is not root:
            assert span["parent_id"] == root["context"]["span_id"], stage
    starts = [by_stage[s]["start_time"] for s in ("embed", "retrieve", "rerank", "assemble", "generate")]
    assert starts == sorted(starts)
    return by_stage


# --- full content -----------------------------------------------------------------------------
def test_full_pipeline_as_phoenix_sees_it(export: Export) -> None:
    export.configure()
    run = run_pipeline()
    by_stage = assert_structure(export.read_trace(run, set(SPAN_NAMES.values())), run)
    root, embed, retrieve, rerank, assemble, generate = (
        by_stage[s] for s in ("pipeline", "embed", "retrieve", "rerank", "assemble", "generate")
    )

    # The OTLP-shaped endpoint keeps openinference.span.kind as an attribute, as ragtrace set it.
    otlp = export.server.get_spans_otlp(export.project, root["context"]["trace_id"])
    assert {s["name"]: otlp_attributes(s)["openinference.span.kind"] for s in otlp} == {
        SPAN_NAMES[stage]: kind for stage, kind in KINDS.items()
    }
    assert {s["name"]: s["parent_span_id"] or None for s in otlp} == {n: s["parent_id"] for n, s in ((s["name"], s) for s in by_stage.values())}

    # Root: the workflow, the question and answer, the figures.
    r = root["attributes"]
    assert r["gen_ai.operation.name"] == "invoke_workflow"
    assert r["gen_ai.workflow.name"] == "support-qa"
    assert r["rag.pipeline.version"] == "v2"
    assert r["rag.query.id"] == "q-0001"
    assert r["rag.content_mode"] == "full"
    assert r["input.value"] == QUERY
    assert r["output.value"] == ANSWER
    assert root["status_code"] == "UNSET"
    assert_figures_on_root(root, run)

    # Embedding.
    e = embed["attributes"]
    assert e["embedding.model_name"] == "all-MiniLM-L6-v2"
    assert e["gen_ai.request.model"] == "all-MiniLM-L6-v2"
    assert e["gen_ai.embeddings.dimension.count"] == 384
    assert e["llm.token_count.prompt"] == 7 and e["llm.token_count.total"] == 7
    assert e["input.value"] == QUERY

    # Retriever: ids, scores and text in rank order, nothing beyond the four documents.
    a = retrieve["attributes"]
    for i, doc in enumerate(DOCS):
        assert a[f"retrieval.documents.{i}.document.id"] == doc["id"]
        assert a[f"retrieval.documents.{i}.document.score"] == doc["score"]
        assert type(a[f"retrieval.documents.{i}.document.score"]) is float
        assert a[f"retrieval.documents.{i}.document.content"] == doc["content"]
    assert keys_under(a, "retrieval.documents.") == {
        f"retrieval.documents.{i}.document.{f}" for i in range(4) for f in ("id", "score", "content")
    }
    assert a["rag.retrieval.chunk_ids"] == ["d1", "d2", "d3", "d4"]
    # ids and scores went out once, as gen_ai.retrieval.documents: Phoenix filled the documents'
    # id/score above from it; ranks 1..n and scores are not repeated in rag.retrieval.*
    sdk_retrieve = next(s for s in export.sdk_spans() if s.attributes.get("rag.stage") == "retrieve")
    assert not [k for k in sdk_retrieve.attributes if k.endswith((".document.id", ".document.score"))]
    assert "rag.retrieval.scores" not in a and "rag.retrieval.ranks" not in a
    assert a["gen_ai.retrieval.top_k"] == 4 and type(a["gen_ai.retrieval.top_k"]) is int
    assert a["gen_ai.data_source.id"] == "product-docs"
    assert json.loads(a["gen_ai.retrieval.documents"]) == [{"id": d["id"], "score": d["score"]} for d in DOCS]
    assert a["input.value"] == QUERY and a["input.mime_type"] == "text/plain"

    # Reranker: candidates in retrieval order, results in the new order with the reranker's scores.
    rr = rerank["attributes"]
    assert [rr[f"reranker.input_documents.{i}.document.id"] for i in range(4)] == ["d1", "d2", "d3", "d4"]
    assert [rr[f"reranker.input_documents.{i}.document.score"] for i in range(4)] == [0.91, 0.83, 0.52, 0.41]
    assert [rr[f"reranker.output_documents.{i}.document.id"] for i in range(3)] == ["d2", "d1", "d3"]
    assert [rr[f"reranker.output_documents.{i}.document.score"] for i in range(3)] == [0.97, 0.88, 0.12]
    # the reranked chunks' text is on the retrieve span (above), written once: none here
    assert keys_under(rr, "reranker.output_documents.") == {f"reranker.output_documents.{i}.document.{f}" for i in range(3) for f in ("id", "score")}
    sdk_rerank = next(s for s in export.sdk_spans() if s.attributes.get("rag.stage") == "rerank")
    assert not [k for k in sdk_rerank.attributes if k.endswith(".document.content")]
    assert keys_under(rr, "reranker.output_documents.3.") == set() and keys_under(rr, "reranker.input_documents.4.") == set()
    assert rr["reranker.model_name"] == "ms-marco-MiniLM"
    assert rr["reranker.top_k"] == 3
    assert rr["reranker.query"] == QUERY
    assert rr["rag.rerank.output_ids"] == ["d2", "d1", "d3"]

    # Assembly (PROMPT): the prompt itself, and where each chunk sits in it.
    p = assemble["attributes"]
    assert p["rag.context.chunk_ids"] == ["d2", "d1", "d3"]
    assert p["rag.context.positions"] == [1, 2, 3]
    assert p["rag.context.labels"] == ["1", "2", "3"]
    assert p["rag.context.message_indexes"] == [1, 1, 1]
    assert p["rag.context.dropped_ids"] == ["d4"] and p["rag.context.dropped_reasons"] == ["reranked_out"]
    assert p["output.mime_type"] == "application/json"
    messages = json.loads(p["output.value"])
    assert [m["role"] for m in messages] == ["system", "user"] and messages[0]["content"] == SYSTEM_PROMPT
    for chunk_id, start, end in zip(p["rag.context.chunk_ids"], p["rag.context.char_starts"], p["rag.context.char_ends"]):
        assert messages[1]["content"][start:end] == next(d["content"] for d in DOCS if d["id"] == chunk_id)

    # LLM: model names, provider, tokens, messages, citations.
    g = generate["attributes"]
    assert g["llm.model_name"] == "gpt-4o-mini"
    assert g["gen_ai.request.model"] == "gpt-4o-mini"
    assert g["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert g["llm.provider"] == "openai"
    assert g["llm.system"] == "openai"  # added by Phoenix's gen_ai.provider.name mapping
    assert (g["llm.token_count.prompt"], g["llm.token_count.completion"], g["llm.token_count.total"]) == (120, 14, 134)
    assert all(type(g[f"llm.token_count.{k}"]) is int for k in ("prompt", "completion", "total"))
    assert json.loads(g["llm.invocation_parameters"]) == {"temperature": 0.0, "max_tokens": 64}
    assert g["llm.finish_reason"] == "stop"
    # Phoenix derives the OpenInference messages from gen_ai.input/output.messages: ragtrace sends one copy
    sdk_generate = next(s for s in export.sdk_spans() if s.attributes.get("rag.stage") == "generate")
    assert not [k for k in sdk_generate.attributes if k.startswith(("llm.input_messages.", "llm.output_messages.", "input."))]
    assert g["llm.input_messages.0.message.role"] == "system"
    assert g["llm.input_messages.0.message.content"] == SYSTEM_PROMPT
    assert g["llm.input_messages.1.message.role"] == "user"
    assert g["llm.input_messages.1.message.content"] == messages[1]["content"]
    assert g["llm.output_messages.0.message.role"] == "assistant"
    assert g["llm.output_messages.0.message.content"] == ANSWER
    assert g["output.value"] == ANSWER
    assert g["rag.citation.ids"] == ["d1", "d2"]
    assert g["rag.metrics.recall_proxy"] == 0.5

    # What the Phoenix UI computes from it (GraphQL): token totals count LLM spans only, document counts.
    ui = {stage: export.graphql_span(span) for stage, span in by_stage.items()}
    assert {stage: node["spanKind"] for stage, node in ui.items()} == {s: k.lower() for s, k in KINDS.items()}
    assert (ui["generate"]["tokenCountPrompt"], ui["generate"]["tokenCountCompletion"], ui["generate"]["tokenCountTotal"]) == (120, 14, 134)
    assert ui["embed"]["tokenCountTotal"] == 0  # Phoenix counts tokens on LLM spans only
    assert ui["pipeline"]["cumulativeTokenCountTotal"] == 134
    assert ui["retrieve"]["numDocuments"] == 4
    assert ui["rerank"]["numDocuments"] == 3
    assert ui["pipeline"]["input"] == {"value": QUERY, "mimeType": "text"}
    assert ui["pipeline"]["output"] == {"value": ANSWER, "mimeType": "text"}
    assert ui["retrieve"]["input"] == {"value": QUERY, "mimeType": "text"}
    assert ui["assemble"]["output"]["mimeType"] == "json"
    # Phoenix keeps the figures as attributes and events; it does not turn them into annotations.
    assert ui["pipeline"]["spanAnnotations"] == [] and ui["pipeline"]["trace"] == {"traceAnnotations": []}


def test_llm_input_and_output_mime_types_match_their_values(export: Export) -> None:
    export.configure()
    run = run_pipeline()
    by_stage = assert_structure(export.read_trace(run, set(SPAN_NAMES.values())), run)
    node = export.graphql_span(by_stage["generate"])
    # the prompt travels once, as gen_ai.input.messages: Phoenix shows it as the LLM's messages
    # (derived), with no separate input.value; the answer is the LLM's text output
    assert node["input"] is None
    assert by_stage["generate"]["attributes"]["llm.input_messages.0.message.content"] == SYSTEM_PROMPT
    assert node["output"] == {"value": ANSWER, "mimeType": "text"}


ENV_SCRIPT = """
import ragtrace
provider = ragtrace.configure(service_name="ragtrace-env", exporter="otlp")
with ragtrace.rag_pipeline("env-configured", query="q") as run:
    with ragtrace.retrieve("q", data_source="kb") as r:
        r.record([{"id": "e1", "score": 0.7, "content": "alpha"}])
provider.shutdown()
print(format(run.span.get_span_context().trace_id, "032x"))
"""


def test_configure_exporter_otlp_from_the_environment(export: Export, tmp_path: Path) -> None:
    """The zero-code route: configure(exporter="otlp") with the standard OTEL_* variables, in a fresh process
    (it installs a global provider, which must not leak into this one)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGTRACE_"))}
    env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] = export.server.otlp_http_endpoint
    env["OTEL_RESOURCE_ATTRIBUTES"] = f"{PROJECT_NAME_ATTRIBUTE}={export.project}"
    done = subprocess.run([sys.executable, "-c", ENV_SCRIPT], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    trace_id = done.stdout.strip()
    spans = export.server.wait_for_spans(export.project, 2, trace_id=trace_id)
    assert {s["name"]: s["span_kind"] for s in spans} == {"invoke_workflow env-configured": "CHAIN", "retrieval kb": "RETRIEVER"}
    retrieve = next(s for s in spans if s["span_kind"] == "RETRIEVER")
    assert retrieve["attributes"]["retrieval.documents.0.document.id"] == "e1"

# --- the per-document cap and configure(openinference=False) ------------------------------------
def test_document_cap_and_what_phoenix_fills_in(export: Export) -> None:
    export.configure(max_documents=2)
    run = run_pipeline()
    by_stage = assert_structure(export.read_trace(run, set(SPAN_NAMES.values())), run)

    # ragtrace emitted OpenInference text for the first two documents only...
    sdk_retrieve = next(s for s in export.sdk_spans() if s.attributes.get("rag.stage") == "retrieve")
    assert keys_under(dict(sdk_retrieve.attributes), "retrieval.documents.") == {
        f"retrieval.documents.{i}.document.content" for i in range(2)
    }
    # ...and every id and score once, in gen_ai.retrieval.documents, from which Phoenix fills in
    # every document's id and score (the rest without text), keeping rank order.
    a = by_stage["retrieve"]["attributes"]
    assert [a[f"retrieval.documents.{i}.document.id"] for i in range(4)] == ["d1", "d2", "d3", "d4"]
    assert [a[f"retrieval.documents.{i}.document.score"] for i in range(4)] == [0.91, 0.83, 0.52, 0.41]
    assert [a.get(f"retrieval.documents.{i}.document.content") for i in range(4)] == [DOCS[0]["content"], DOCS[1]["content"], None, None]
    assert export.graphql_span(by_stage["retrieve"])["numDocuments"] == 4
    # Reranker lists have no gen_ai counterpart: Phoenix shows the capped lists as emitted.
    rr = by_stage["rerank"]["attributes"]
    assert {k.split(".")[2] for k in keys_under(rr, "reranker.input_documents.")} == {"0", "1"}
    assert {k.split(".")[2] for k in keys_under(rr, "reranker.output_documents.")} == {"0", "1"}
    assert export.graphql_span(by_stage["rerank"])["numDocuments"] == 2
    # The ragtrace arrays are never capped (the reranker's candidates beyond the cap are in
    # rag.rerank.input_ids), and the figures are unaffected.
    assert a["rag.retrieval.chunk_ids"] == ["d1", "d2", "d3", "d4"]
    assert rr["rag.rerank.input_ids"] == ["d1", "d2", "d3", "d4"]
    assert_figures_on_root(by_stage["pipeline"], run)


def test_openinference_off_leaves_phoenix_the_gen_ai_attributes(export: Export) -> None:
    export.configure(openinference=False)
    run = run_pipeline()
    by_name = export.read_trace(run, set(SPAN_NAMES.values()))
    by_stage = {stage: by_name[name] for stage, name in SPAN_NAMES.items()}

    oi_prefixes = ("openinference.", "input.", "output.", "retrieval.", "reranker.", "embedding.", "llm.", "trace.evaluations.")
    for span in export.sdk_spans():
        assert not [k for k in span.attributes if k.startswith(oi_prefixes)], span.name

    # Phoenix infers kinds from gen_ai.operation.name for embeddings, retrieval and chat only.
    assert {stage: span["span_kind"] for stage, span in by_stage.items()} == {
        "pipeline": "UNKNOWN",
        "embed": "EMBEDDING",
        "retrieve": "RETRIEVER",
        "rerank": "UNKNOWN",
        "assemble": "UNKNOWN",
        "generate": "LLM",
    }
    for stage, span in by_stage.items():
        assert span["parent_id"] == (None if stage == "pipeline" else by_stage["pipeline"]["context"]["span_id"])
    a = by_stage["retrieve"]["attributes"]
    assert [a[f"retrieval.documents.{i}.document.id"] for i in range(4)] == ["d1", "d2", "d3", "d4"]
    assert [a[f"retrieval.documents.{i}.document.score"] for i in range(4)] == [0.91, 0.83, 0.52, 0.41]
    assert keys_under(a, "retrieval.documents.") == {f"retrieval.documents.{i}.document.{f}" for i in range(4) for f in ("id", "score")}
    assert a["input.value"] == QUERY  # mapped from gen_ai.retrieval.query.text
    g = by_stage["generate"]["attributes"]
    assert g["llm.model_name"] == "gpt-4o-mini"
    assert (g["llm.token_count.prompt"], g["llm.token_count.completion"], g["llm.token_count.total"]) == (120, 14, 134)
    assert g["llm.output_messages.0.message.content"] == ANSWER  # mapped from gen_ai.output.messages
    assert keys_under(by_stage["rerank"]["attributes"], "reranker.") == set()
    assert keys_under(by_stage["pipeline"]["attributes"], "trace.evaluations.") == set()
    # The figures travel regardless.
    root = by_stage["pipeline"]["attributes"]
    assert {k: root[f"rag.metrics.{k}"] for k in run.metrics} == run.metrics


def test_unscored_document_makes_phoenix_drop_the_gen_ai_list(export: Export) -> None:
    """Phoenix validates gen_ai.retrieval.documents against v1.41.1 (score: float, required): one unscored
    document drops the whole list, so nothing is filled in beyond the cap. The OpenInference keys ragtrace
    emits are unaffected."""
    export.configure(max_documents=1)
    docs = [{"id": "s0", "score": 0.9, "content": "a"}, {"id": "s1", "content": "b"}, {"id": "s2", "score": 0.4, "content": "c"}]
    with ragtrace.rag_pipeline("unscored", query=QUERY) as run:
        with ragtrace.retrieve(QUERY) as r:
            r.record(docs)
    by_name = export.read_trace(run, {"invoke_workflow unscored", "retrieval"})
    a = by_name["retrieval"]["attributes"]
    assert json.loads(a["gen_ai.retrieval.documents"]) == [{"id": "s0", "score": 0.9}, {"id": "s1", "score": None}, {"id": "s2", "score": 0.4}]
    assert keys_under(a, "retrieval.documents.") == {f"retrieval.documents.0.document.{f}" for f in ("id", "score", "content")}
    assert export.graphql_span(by_name["retrieval"])["numDocuments"] == 1
    assert a["rag.retrieval.chunk_ids"] == ["s0", "s1", "s2"]


def test_provider_given_to_the_pipeline_carries_every_stage(export: Export) -> None:
    run = run_pipeline(tracer_provider=export.provider)  # no ragtrace.configure()
    export.flush()
    assert sorted(s.name for s in export.sdk_spans()) == sorted(SPAN_NAMES.values())
    assert_structure(export.read_trace(run, set(SPAN_NAMES.values())), run)

# --- no content in redact / hash mode -----------------------------------------------------------
class Markers:
    """Unique strings planted in every kind of content; none may reach Phoenix when content is off."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:12]
        self.query = f"QRYMARK{tag}"
        self.chunks = [f"CHUNKMARK{i}{tag}" for i in range(4)]
        self.meta_value = f"METAVALMARK{tag}"
        self.meta_key = f"METAKEYMARK{tag}"
        self.prompt = f"PROMPTMARK{tag}"
        self.completion = f"COMPLETIONMARK{tag}"
        self.caught_error = f"CAUGHTEXCMARK{tag}"
        self.escaped_error = f"ESCAPEDEXCMARK{tag}"

    def emitted_in_full_mode(self) -> list[str]:
        return [self.query, *self.chunks, self.prompt, self.completion, self.caught_error, self.escaped_error]

    def all(self) -> list[str]:
        return [*self.emitted_in_full_mode(), self.meta_value, self.meta_key]


MARKED_SPANS = {
    "invoke_workflow marked-qa",
    "embeddings all-MiniLM-L6-v2",
    "retrieval product-docs",  # twice: the first attempt fails
    "rerank ms-marco-MiniLM",
    "assemble_context",
    "chat gpt-4o-mini",
}


def run_marked(m: Markers, mode: str) -> tuple[ragtrace.RagPipeline, ragtrace.RagPipeline]:
    question = f"What is BM25? {m.query}"
    docs = [
        {"id": f"m{i}", "score": 0.9 - i / 10, "content": f"Passage {i} {m.chunks[i]}", "metadata": {"source": m.meta_value, m.meta_key: i}}
        for i in range(4)
    ]
    template = [{"role": "system", "content": f"Cite sources. {m.prompt}"}, {"role": "user", "content": "{context}\n\nQ: {question}"}]
    with ragtrace.rag_pipeline("marked-qa", query=question, capture_content=mode, version="v2") as run:
        with ragtrace.embed(model="all-MiniLM-L6-v2", provider="local") as e:
            e.record([[0.5] * 8], input_tokens=9, text=question)
        try:
            with ragtrace.retrieve(question, data_source="product-docs", top_k=4):
                raise ConnectionError(f"index unreachable: {m.caught_error}")
        except ConnectionError:
            pass
        with ragtrace.retrieve(question, data_source="product-docs", top_k=4) as r:
            r.record(docs)
        with ragtrace.rerank(model="ms-marco-MiniLM", provider="local", top_n=3, query=question) as rr:
            rr.record([docs[2], docs[0], docs[1]])
        with ragtrace.assemble(max_tokens=500) as ctx:
            for chunk in rr.chunks:
                ctx.add(chunk)
            prompt = ctx.render(template, question=question)
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            g.record({**COMPLETION, "choices": [{"message": {"role": "assistant", "content": f"It ranks [1][2]. {m.completion}"}, "finish_reason": "stop"}]})
    with pytest.raises(ValueError, match=m.escaped_error):
        with ragtrace.rag_pipeline("marked-failing", query=question, capture_content=mode) as failed:
            with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=question):
                raise ValueError(f"model refused: {m.escaped_error}")
    return run, failed


def everything_phoenix_returns(export: Export, expected_spans: int) -> list[str]:
    """Every span of the project, as JSON text: REST, OTLP-shaped REST, and GraphQL (attributes, I/O, events, status)."""
    rest = export.server.wait_for_spans(export.project, expected_spans)
    assert len(rest) == expected_spans
    otlp = export.server.get_spans_otlp(export.project)
    assert len(otlp) == expected_spans
    ui = [export.graphql_span(s) for s in rest]
    # The events (exception, evaluation results) are in every source that is searched.
    events = sum(len(s["events"]) for s in rest)
    assert events >= 4 + 3  # four evaluation results, three exceptions
    assert sum(len(s["events"] or []) for s in otlp) == events == sum(len(n["events"]) for n in ui)
    assert sorted(s["status"]["message"] or "" for s in otlp) == sorted(s["status_message"] for s in rest)
    return [json.dumps(s, ensure_ascii=False) for s in [*rest, *otlp, *ui]]


def sdk_texts(export: Export) -> list[str]:
    return [
        json.dumps(
            {
                "name": s.name,
                "attributes": dict(s.attributes),
                "events": [(e.name, dict(e.attributes)) for e in s.events],
                "status": s.status.description,
            },
            ensure_ascii=False,
            default=str,
        )
        for s in export.sdk_spans()
    ]


def test_markers_reach_phoenix_in_full_mode(export: Export) -> None:
    """The control for the redaction test: the same planted content is found when capture is on."""
    m = Markers()
    export.configure()
    run_marked(m, "full")
    export.flush()
    dump = "\n".join(everything_phoenix_returns(export, 9))
    for marker in m.emitted_in_full_mode():
        assert marker in dump, marker
    # Chunk metadata is never exported by ragtrace, whatever the mode.
    assert m.meta_value not in dump and m.meta_key not in dump


@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_no_content_reaches_phoenix(export: Export, mode: str) -> None:
    m = Markers()
    export.configure()
    run, failed = run_marked(m, mode)
    export.flush()

    texts = everything_phoenix_returns(export, 9)
    for marker in m.all():
        leaks = [t[:300] for t in texts if marker in t]
        assert not leaks, f"{marker} reached Phoenix: {leaks}"
        assert not [t for t in sdk_texts(export) if marker in t], f"{marker} reached the OpenTelemetry SDK"

    # What remains: ids, scores, positions, figures, token counts, model names, error types.
    spans = export.server.get_spans(export.project)
    by_name: dict[str, list[dict]] = {}
    for span in spans:
        by_name.setdefault(span["name"], []).append(span)
    assert {n: len(s) for n, s in by_name.items()} == {
        **{n: 1 for n in MARKED_SPANS},
        "retrieval product-docs": 2,
        "invoke_workflow marked-failing": 1,
        "chat gpt-4o-mini": 2,
    }
    root = by_name["invoke_workflow marked-qa"][0]
    r = root["attributes"]
    assert r["rag.content_mode"] == mode
    assert len(r["rag.query.hash"]) == 16
    assert "input.value" not in r and "output.value" not in r
    assert r["rag.metrics.retrieved"] == 4 and r["rag.metrics.in_context"] == 3 and r["rag.metrics.cited"] == 2
    assert {k: r[f"rag.metrics.{k}"] for k in run.metrics} == run.metrics
    assert keys_under(r, "trace.evaluations.") == set()

    failed_retrieve, retrieve = sorted(by_name["retrieval product-docs"], key=lambda s: s["start_time"])
    assert failed_retrieve["status_code"] == "ERROR" and failed_retrieve["status_message"] == "ConnectionError"
    assert failed_retrieve["attributes"]["error.type"] == "ConnectionError"
    (event,) = failed_retrieve["events"]
    assert event["name"] == "exception"
    assert event["attributes"] == {"exception.type": "ConnectionError", "exception.message": "ConnectionError", "exception.escaped": True}

    a = retrieve["attributes"]
    assert retrieve["span_kind"] == "RETRIEVER" and retrieve["status_code"] == "UNSET"
    assert [a[f"retrieval.documents.{i}.document.id"] for i in range(4)] == ["m0", "m1", "m2", "m3"]
    assert [a[f"retrieval.documents.{i}.document.score"] for i in range(4)] == pytest.approx([0.9, 0.8, 0.7, 0.6])
    # the document cards say the text was withheld (names.REDACTED), rather than showing empty
    assert keys_under(a, "retrieval.documents.") == {f"retrieval.documents.{i}.document.{f}" for i in range(4) for f in ("id", "score", "content")}
    assert {a[f"retrieval.documents.{i}.document.content"] for i in range(4)} == {names.REDACTED}
    assert a["rag.retrieval.chunk_ids"] == ["m0", "m1", "m2", "m3"]
    assert "input.value" not in a and "gen_ai.retrieval.query.text" not in a
    if mode == "hash":
        assert len(a["rag.retrieval.content_hashes"]) == 4
        assert all(len(h) == 16 and int(h, 16) >= 0 for h in a["rag.retrieval.content_hashes"])
    else:
        assert "rag.retrieval.content_hashes" not in a

    rr = by_name["rerank ms-marco-MiniLM"][0]["attributes"]
    assert [rr[f"reranker.output_documents.{i}.document.id"] for i in range(3)] == ["m2", "m0", "m1"]
    # their placeholders are on the retrieve span's cards (above), written once
    assert keys_under(rr, "reranker.output_documents.") == {f"reranker.output_documents.{i}.document.{f}" for i in range(3) for f in ("id", "score")}
    assert "reranker.query" not in rr and "input.value" not in rr

    p = by_name["assemble_context"][0]["attributes"]
    assert p["rag.context.chunk_ids"] == ["m2", "m0", "m1"] and p["rag.context.positions"] == [1, 2, 3]
    assert "output.value" not in p

    answer, refused = sorted(by_name["chat gpt-4o-mini"], key=lambda s: s["start_time"])
    g = answer["attributes"]
    assert answer["span_kind"] == "LLM"
    assert g["rag.citation.ids"] == ["m2", "m0"]
    assert (g["llm.token_count.prompt"], g["llm.token_count.completion"], g["llm.token_count.total"]) == (120, 14, 134)
    assert g["llm.model_name"] == "gpt-4o-mini" and g["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    assert [g[f"llm.input_messages.{i}.message.role"] for i in range(2)] == ["system", "user"]
    assert keys_under(g, "llm.input_messages.") == {f"llm.input_messages.{i}.message.{f}" for i in range(2) for f in ("role", "content")}
    assert keys_under(g, "llm.output_messages.") == {f"llm.output_messages.0.message.{f}" for f in ("role", "content")}
    assert {g[f"llm.{d}_messages.{i}.message.content"] for d, i in (("input", 0), ("input", 1), ("output", 0))} == {names.REDACTED}
    assert "gen_ai.input.messages" not in g and "gen_ai.output.messages" not in g and "input.value" not in g
    # Phoenix fills the LLM output from gen_ai.response.id/model when ragtrace sends no text: not content.
    assert json.loads(g["output.value"]) == {"id": "chatcmpl-rt-1", "model": "gpt-4o-mini-2024-07-18"}
    assert refused["status_code"] == "ERROR" and refused["status_message"] == "ValueError"

    failed_root = by_name["invoke_workflow marked-failing"][0]
    assert failed_root["status_code"] == "ERROR" and failed_root["status_message"] == "ValueError"
    assert refused["parent_id"] == failed_root["context"]["span_id"]
    assert failed.metrics == {}

