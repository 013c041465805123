"""ragtrace's PhoenixExporter -> a real Arize Phoenix -> read back through Phoenix's own APIs.

The figures must come back as span annotations (``arize-phoenix-client``'s ``get_span_annotations``)
on the pipeline root and the answer generation, and each retriever and reranker document's marks
as document annotations, read through the GraphQL field the UI's document cards use
(``documentEvaluations``). Expected values come from the run (``run.metrics``) and from the spans
the SDK finished (an in-memory exporter on the same provider), never from the exporter itself.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from phoenix.client import Client

import ragtrace
from ragtrace._internal import names
from ragtrace.exporters import PhoenixExporter

from .phoenix import PhoenixServer
from .test_phoenix_roundtrip import DOCS, QUERY, TEMPLATE, Markers, run_marked, run_pipeline

pytestmark = pytest.mark.heavy

FIGURES = list(names.ALL_METRICS)


class Annotated:
    """A provider exporting through a PhoenixExporter (batched) and, beside it, to memory."""

    def __init__(self, server: PhoenixServer, project: str, **options: Any) -> None:
        self.server, self.project = server, project
        self.exporter = PhoenixExporter(server.base_url, project=project, **options)
        self.memory = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create(self.exporter.resource_attributes))
        self.provider.add_span_processor(BatchSpanProcessor(self.exporter, schedule_delay_millis=60_000))
        self.provider.add_span_processor(SimpleSpanProcessor(self.memory))
        self.client = Client(base_url=server.base_url)

    def flush(self) -> None:
        assert self.provider.force_flush(20_000), "export to Phoenix did not flush"

    def sdk_spans(self, stage: str) -> list[ReadableSpan]:
        return [s for s in self.memory.get_finished_spans() if (s.attributes or {}).get(names.RAG_STAGE) == stage]

    def span_annotations(self, span_ids: list[str], want: int, timeout: float = 20.0) -> list[dict]:
        return poll(lambda: self.client.spans.get_span_annotations(span_ids=span_ids, project_identifier=self.project, timeout=30), want, timeout)

    def filtered(self, condition: str) -> list[str]:
        """The span ids Phoenix's span filter (the UI's filter box, over GraphQL) gives for ``condition``."""
        projects = self.server.client.request("POST", "/graphql", body={"query": "{ projects { edges { node { id name } } } }"})
        project = next(e["node"]["id"] for e in projects["data"]["projects"]["edges"] if e["node"]["name"] == self.project)
        query = """query ($id: ID!, $condition: String) { node(id: $id) { ... on Project {
            spans(first: 100, filterCondition: $condition) { edges { node { context { spanId } } } } } } }"""
        answer = self.server.client.request("POST", "/graphql", body={"query": query, "variables": {"id": project, "condition": condition}})
        assert not answer.get("errors"), answer
        return [e["node"]["context"]["spanId"] for e in answer["data"]["node"]["spans"]["edges"]]

    def trace_annotations(self, trace_id: str) -> list[dict]:
        """Phoenix's REST ``/v1/projects/{p}/trace_annotations`` (the client only writes them)."""
        path = f"/v1/projects/{self.project}/trace_annotations"
        return self.server.client.request("GET", path, [("trace_ids", trace_id)])["data"]

    def document_marks(self, span_id: str, want: int, timeout: float = 20.0) -> list[dict]:
        return document_marks(self.server, self.project, span_id, want, timeout)

    def close(self) -> None:
        self.provider.shutdown()


def document_marks(server: PhoenixServer, project: str, span_id: str, want: int, timeout: float = 20.0) -> list[dict]:
    """What a span's document cards show: Phoenix's document annotations (GraphQL, as the UI reads them)."""

    def fetch() -> list[dict]:
        spans = server.get_spans(project, missing_ok=True)
        node_id = next((s["id"] for s in spans if s["context"]["span_id"] == span_id), None)
        if node_id is None:
            return []
        query = """query ($id: ID!) { node(id: $id) { ... on Span {
            documentEvaluations { name documentPosition score label explanation annotatorKind } } } }"""
        answer = server.client.request("POST", "/graphql", body={"query": query, "variables": {"id": node_id}})
        assert not answer.get("errors"), answer
        return answer["data"]["node"]["documentEvaluations"]

    return poll(fetch, want, timeout)


def poll(fetch: Callable[[], list[dict]], want: int, timeout: float) -> list[dict]:
    """``fetch()`` until it gives ``want`` items (Phoenix inserts asynchronously); 404 (the project
    before its first span is in) and a timed-out read count as nothing yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            got = fetch()
        except httpx.HTTPStatusError as error:
            if error.response.status_code != 404:
                raise
            got = []
        except httpx.TimeoutException:  # a loaded machine: Phoenix answers late; ask again until the deadline
            if time.monotonic() >= deadline:
                raise
            got = []
        if len(got) >= want or time.monotonic() >= deadline:
            return got
        time.sleep(0.1)


def hex_id(span: ReadableSpan | ragtrace.RagPipeline) -> str:
    context = span.span.get_span_context() if isinstance(span, ragtrace.RagPipeline) else span.get_span_context()
    return format(context.span_id, "016x")


@pytest.fixture
def annotated(phoenix_server: PhoenixServer, phoenix_project: str) -> Iterator[Annotated]:
    made: list[Annotated] = []

    def make(**options: Any) -> Annotated:
        made.append(Annotated(phoenix_server, phoenix_project, **options))
        ragtrace.configure(tracer_provider=made[-1].provider)
        return made[-1]

    yield make  # type: ignore[misc]
    for one in made:
        one.close()


def by_name(found: list[dict]) -> dict[str, dict]:
    out = {a["name"]: a for a in found}
    assert len(out) == len(found), "an annotation name twice on one span"
    return out


# --- figures ----------------------------------------------------------------------------------
def test_every_figure_is_an_annotation_on_the_root_and_the_answer(annotated) -> None:
    a = annotated()
    run = run_pipeline(session_id="sess-figures", user_id="user-7")
    a.flush()
    (answer,) = a.sdk_spans(names.STAGE_GENERATE)
    root_id, answer_id = hex_id(run), hex_id(answer)
    found = a.span_annotations([root_id, answer_id], 2 * len(FIGURES))
    assert len(found) == 2 * len(FIGURES)
    for span_id in (root_id, answer_id):
        on_span = by_name([x for x in found if x["span_id"] == span_id])
        assert set(on_span) == {f"ragtrace.{m}" for m in FIGURES}
        for metric in FIGURES:
            annotation = on_span[f"ragtrace.{metric}"]
            assert annotation["annotator_kind"] == "CODE"
            assert annotation["metadata"]["inclusion_method"] == "recorded"
            value, result = run.metrics[metric], annotation["result"]
            if metric == names.METRIC_CITED_POSITIONS:
                assert value == [1, 2] and result["label"] == "1, 2" and result["score"] is None
            else:
                assert result["score"] == float(value), metric
        assert on_span["ragtrace.recall_proxy"]["result"]["label"] == "medium"
        assert on_span["ragtrace.cited"]["result"]["label"] == "cited"
        assert on_span["ragtrace.invalid_citations"]["result"]["label"] == "none"
    # the proxies on the trace too, where Phoenix charts trace annotation scores
    trace_id = format(run.span.get_span_context().trace_id, "032x")
    on_trace = poll(lambda: a.trace_annotations(trace_id), len(names.PROXY_METRICS), 20.0)
    assert {x["name"]: x["result"]["score"] for x in on_trace} == {f"ragtrace.{m}": run.metrics[m] for m in names.PROXY_METRICS}
    assert {x["result"]["label"] for x in on_trace} <= {"none", "low", "medium", "high"}
    # Phoenix's span filter reads them as evaluations (it matched nothing before)
    assert sorted(a.filtered("evals['ragtrace.recall_proxy'].score < 0.6")) == sorted([root_id, answer_id])
    assert a.filtered("evals['ragtrace.recall_proxy'].score < 0.2") == []
    assert sorted(a.filtered("annotations['ragtrace.cited'].label == 'cited'")) == sorted([root_id, answer_id])
    # nothing else of the trace carries span annotations
    others = [hex_id(s) for s in a.memory.get_finished_spans() if hex_id(s) not in (root_id, answer_id)]
    assert a.client.spans.get_span_annotations(span_ids=others, project_identifier=a.project, timeout=30) == []
    assert a.exporter.dropped_annotations == 0 and a.exporter.failed_annotations == 0


def test_labels_where_they_help_and_figures_not_measured(annotated) -> None:
    """No citations, a hallucinated one, and a pipeline with no answer (figures not measurable)."""
    a = annotated()
    with ragtrace.rag_pipeline("labels", query=QUERY) as cited_nothing:
        with ragtrace.retrieve(QUERY) as r:
            r.record([{"id": "a", "score": 0.9, "content": "alpha"}, {"id": "b", "score": 0.5, "content": "beta"}])
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks)
            prompt = ctx.render("{context}\n\nQ: {question}", question=QUERY)
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("It is [7].")
    with ragtrace.rag_pipeline("unanswered", query=QUERY) as unanswered:
        with ragtrace.retrieve(QUERY) as r:
            r.record([{"id": "c", "score": 0.9, "content": "gamma"}])
    a.flush()
    first = by_name([x for x in a.span_annotations([hex_id(cited_nothing)], len(FIGURES))])
    assert cited_nothing.metrics["cited"] == 0 and cited_nothing.metrics["invalid_citations"] == 1
    assert first["ragtrace.cited"]["result"]["label"] == "no citations"
    assert first["ragtrace.invalid_citations"]["result"]["label"] == "hallucinated citation"
    assert first["ragtrace.unknown_citations"]["result"]["label"] == "hallucinated citation"
    assert first["ragtrace.cited_positions"]["result"]["label"] == "no citations"
    second = by_name(a.span_annotations([hex_id(unanswered)], len(FIGURES)))
    assert set(second) == {f"ragtrace.{m}" for m in FIGURES}
    measured = set(unanswered.metrics)
    assert measured and measured != set(FIGURES)
    for metric in FIGURES:
        result = second[f"ragtrace.{metric}"]["result"]
        if metric in measured:
            assert result["score"] == float(unanswered.metrics[metric])
        else:  # never a silent 0: said so, with the recorded reason
            assert result["score"] is None and result["label"] == "not measurable"
            assert "no_answer" in result["explanation"]


@pytest.mark.parametrize("mode", ["full", "redact"])
def test_a_judges_score_is_an_annotation_on_the_run_by_its_scorer(annotated, mode: str) -> None:
    a = annotated()
    ragtrace.configure(tracer_provider=a.provider, capture_content=mode)
    run = run_pipeline()
    ragtrace.record_score(run, name="groundedness", value=0.4, scorer="llm", label="partly", explanation="JUDGEMARK two of five claims")
    ragtrace.record_score(run, name="helpful", value=1.0, scorer="human")
    a.flush()
    found = by_name(a.span_annotations([hex_id(run)], len(FIGURES) + 2))
    judged, helpful = found["groundedness"], found["helpful"]
    assert (judged["annotator_kind"], judged["result"]["score"], judged["result"]["label"]) == ("LLM", 0.4, "partly")
    assert judged["result"]["explanation"] == ("JUDGEMARK two of five claims" if mode == "full" else None)  # content
    assert (helpful["annotator_kind"], helpful["result"]["score"]) == ("HUMAN", 1.0)
    assert len(found) == len(FIGURES) + 2


# --- document marks ---------------------------------------------------------------------------
def expected_marks(a: Annotated, stage: str) -> list[tuple[int, str, Any, str]]:
    """(position, name, score, label) for each document of ``stage``, joined by hand from the SDK spans."""
    (assemble,) = a.sdk_spans(names.STAGE_ASSEMBLE)
    (answer,) = a.sdk_spans(names.STAGE_GENERATE)
    (span,) = a.sdk_spans(stage)
    p = assemble.attributes
    placed = dict(zip(p[names.RAG_CONTEXT_CHUNK_IDS], p[names.RAG_CONTEXT_LABELS]))
    dropped = dict(zip(p[names.RAG_CONTEXT_DROPPED_IDS], p[names.RAG_CONTEXT_DROPPED_REASONS]))
    cited = set(answer.attributes[names.RAG_CITATION_IDS])
    outside = set(answer.attributes.get(names.RAG_CITATION_OUT_OF_CONTEXT_IDS, ()))
    key = names.RAG_RETRIEVAL_CHUNK_IDS if stage == names.STAGE_RETRIEVE else names.RAG_RERANK_OUTPUT_IDS
    out = []
    for position, chunk_id in enumerate(span.attributes[key]):
        out.append((position, "ragtrace.in_prompt", 1.0 if chunk_id in placed else 0.0, "placed" if chunk_id in placed else dropped[chunk_id]))
        said = "cited" if chunk_id in cited else "cited, not in prompt" if chunk_id in outside else "not cited"
        out.append((position, "ragtrace.cited", 1.0 if chunk_id in cited else 0.0, said))
    return sorted(out)


def test_each_document_card_says_whether_it_was_placed_and_cited(annotated) -> None:
    a = annotated()
    run_pipeline()
    a.flush()
    (retrieve,) = a.sdk_spans(names.STAGE_RETRIEVE)
    (rerank,) = a.sdk_spans(names.STAGE_RERANK)
    for span, stage, count in ((retrieve, names.STAGE_RETRIEVE, 4), (rerank, names.STAGE_RERANK, 3)):
        marks = a.document_marks(hex_id(span), 2 * count)
        assert sorted((m["documentPosition"], m["name"], m["score"], m["label"]) for m in marks) == expected_marks(a, stage)
        assert {m["annotatorKind"] for m in marks} == {"CODE"}
    # The example, on the retriever's cards: d1 (rank 1) went in as [2] and was cited; d4 was reranked out.
    marks = {(m["documentPosition"], m["name"]): m for m in a.document_marks(hex_id(retrieve), 8)}
    assert marks[(0, "ragtrace.in_prompt")]["explanation"] == "in the prompt at position 2 of 3 as [2]"
    assert marks[(0, "ragtrace.cited")]["explanation"] == "the answer cited it as [2]"
    assert marks[(3, "ragtrace.in_prompt")]["explanation"] == "not in the prompt: reranked_out"
    assert marks[(2, "ragtrace.cited")]["label"] == "not cited"


def test_a_document_cited_outside_the_context_says_so_on_its_card(annotated) -> None:
    """The answer cites d3 by its id, a retrieved chunk the prompt did not show: the root's
    out_of_context_citations counts it, and its card says so instead of ``not cited``."""
    a = annotated()
    with ragtrace.rag_pipeline("support-qa", query=QUERY) as run:
        with ragtrace.retrieve(QUERY, top_k=4) as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks[:2]:
                ctx.add(chunk)
            prompt = ctx.render(TEMPLATE, question=QUERY)
        with ragtrace.generate(model="gpt-4o-mini", provider="openai", prompt=prompt) as g:
            g.record("BM25 ranks documents lexically [1]; rerankers reorder them [d3].")
    a.flush()
    assert run.metrics["out_of_context_citations"] == 1
    (retrieve,) = a.sdk_spans(names.STAGE_RETRIEVE)
    marks = a.document_marks(hex_id(retrieve), 8)
    assert sorted((m["documentPosition"], m["name"], m["score"], m["label"]) for m in marks) == expected_marks(a, names.STAGE_RETRIEVE)
    cards = {(m["documentPosition"], m["name"]): m for m in marks}
    assert (cards[(0, "ragtrace.cited")]["label"], cards[(1, "ragtrace.cited")]["label"]) == ("cited", "not cited")
    assert (cards[(2, "ragtrace.cited")]["label"], cards[(2, "ragtrace.cited")]["score"]) == ("cited, not in prompt", 0.0)
    assert cards[(2, "ragtrace.in_prompt")]["label"] == "not_added"
    assert cards[(3, "ragtrace.cited")]["label"] == "not cited"


# --- sessions and templates -------------------------------------------------------------------
def test_sessions_are_listed_and_the_template_is_on_the_prompt_span(annotated) -> None:
    a = annotated()
    run = run_pipeline(session_id="sess-listed", user_id="user-9", tags=["beta"])
    run_pipeline(session_id="sess-listed", user_id="user-9")
    a.flush()
    trace_id = format(run.span.get_span_context().trace_id, "032x")
    spans = a.server.wait_for_spans(a.project, 12)
    sessions = poll(lambda: a.client.sessions.list(project_name=a.project), 1, 20.0)
    assert [s["session_id"] for s in sessions] == ["sess-listed"]
    turns = a.client.sessions.get_session_turns(session_id="sess-listed")
    assert len(turns) == 2 and {t["trace_id"] for t in turns} >= {trace_id}
    root = next(s for s in spans if s["context"]["span_id"] == hex_id(run))
    assert root["attributes"]["user.id"] == "user-9" and root["attributes"]["tag.tags"] == ["beta"]
    prompt_spans = [s for s in spans if s["span_kind"] == "PROMPT" and s["context"]["trace_id"] == trace_id]
    (assemble,) = prompt_spans
    # what the UI's prompt-template panel reads: the span's attributes as GraphQL gives them
    query = "query ($id: ID!) { node(id: $id) { ... on Span { attributes } } }"
    answer = a.server.client.request("POST", "/graphql", body={"query": query, "variables": {"id": assemble["id"]}})
    template = json.loads(answer["data"]["node"]["attributes"])["llm"]["prompt_template"]
    assert json.loads(template["template"]) == TEMPLATE
    assert template["variables"] == {"question": QUERY}


# --- redaction --------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_no_annotation_carries_content(annotated, mode: str) -> None:
    a = annotated()
    m = Markers()
    run, _failed = run_marked(m, mode)
    a.flush()
    found = a.span_annotations([hex_id(run)], len(FIGURES))
    assert len(found) == len(FIGURES)
    documents = []
    for span in [*a.sdk_spans(names.STAGE_RETRIEVE), *a.sdk_spans(names.STAGE_RERANK)]:
        count = len(span.attributes.get(names.RAG_RETRIEVAL_CHUNK_IDS) or span.attributes.get(names.RAG_RERANK_OUTPUT_IDS) or ())
        documents += a.document_marks(hex_id(span), 2 * count) if count else []
    assert len(documents) == 2 * (4 + 3)
    on_trace = poll(lambda: a.trace_annotations(format(run.span.get_span_context().trace_id, "032x")), len(names.PROXY_METRICS), 20.0)
    assert len(on_trace) == len(names.PROXY_METRICS)
    text = json.dumps([found, documents, on_trace], ensure_ascii=False)
    for marker in m.all():
        assert marker not in text, marker


# --- a full queue ------------------------------------------------------------------------------
def test_a_full_queue_drops_the_oldest_and_says_so_once(annotated, caplog: pytest.LogCaptureFixture) -> None:
    """Two pipelines exported in one batch into a queue that holds one pipeline's annotations:
    the first pipeline's are dropped, the second's all arrive."""
    per_pipeline = 2 * len(FIGURES) + len(names.PROXY_METRICS) + 2 * (4 + 3)
    a = annotated(max_queued=per_pipeline)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        older = run_pipeline()
        newer = run_pipeline()
        a.flush()
    assert a.exporter.dropped_annotations == per_pipeline
    full = [r for r in caplog.records if "annotation queue is full" in r.getMessage()]
    assert len(full) == 1
    newer_found = a.span_annotations([hex_id(newer)], len(FIGURES))
    assert len(newer_found) == len(FIGURES)
    assert a.client.spans.get_span_annotations(span_ids=[hex_id(older)], project_identifier=a.project, timeout=30) == []


# --- configure(exporter="phoenix:URL") in a fresh process ---------------------------------------
CONFIGURE_SCRIPT = """
import sys, ragtrace
provider = ragtrace.configure(exporter="phoenix:" + sys.argv[1])
with ragtrace.rag_pipeline("configured", query="q", session_id="sess-configured") as run:
    with ragtrace.retrieve("q", data_source="kb") as r:
        r.record([{"id": "e1", "score": 0.7, "content": "alpha"}])
provider.shutdown()
print(format(run.span.get_span_context().span_id, "016x"))
"""


def test_configure_with_a_phoenix_url(phoenix_server: PhoenixServer, phoenix_project: str, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGTRACE_", "PHOENIX_"))}
    env["PHOENIX_PROJECT_NAME"] = phoenix_project
    done = subprocess.run([sys.executable, "-c", CONFIGURE_SCRIPT, phoenix_server.base_url], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    root_id = done.stdout.strip()
    client = Client(base_url=phoenix_server.base_url)
    found = poll(lambda: client.spans.get_span_annotations(span_ids=[root_id], project_identifier=phoenix_project, timeout=30), len(FIGURES), 20.0)
    got = {x["name"]: x["result"] for x in found}
    assert got["ragtrace.retrieved"]["score"] == 1.0
    assert got["ragtrace.cited"]["label"] == "not measurable"  # no answer in this pipeline
    assert [s["session_id"] for s in client.sessions.list(project_name=phoenix_project)] == ["sess-configured"]


# --- make demo PHOENIX=URL -------------------------------------------------------------------------
def test_the_demo_with_phoenix(phoenix_server: PhoenixServer, tmp_path: Path) -> None:
    """The offline demo (real models) with --phoenix: figures, document marks, the session, the template."""
    demo = Path(__file__).resolve().parents[2] / "examples" / "demo" / "run_demo.py"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGTRACE_", "PHOENIX_"))}
    done = subprocess.run(
        [sys.executable, str(demo), "--questions", "1", "--out", str(tmp_path / "demo.jsonl"), "--phoenix", phoenix_server.base_url],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}"
    spans = phoenix_server.wait_for_spans("ragtrace-demo", 6)
    root = next(s for s in spans if s["parent_id"] is None)
    retrieve = next(s for s in spans if s["span_kind"] == "RETRIEVER")
    llm = next(s for s in spans if s["span_kind"] == "LLM")["attributes"]
    assert llm["llm.model_name"] == "SmolLM2-135M-Instruct" and llm["gen_ai.response.model"] == "SmolLM2-135M-Instruct-Q4_1"
    assert json.loads(llm["llm.invocation_parameters"]) == {"temperature": 0.0, "max_tokens": 64}
    client = Client(base_url=phoenix_server.base_url)
    found = poll(lambda: client.spans.get_span_annotations(span_ids=[root["context"]["span_id"]], project_identifier="ragtrace-demo", timeout=30), len(FIGURES), 30.0)
    assert {x["name"] for x in found} == {f"ragtrace.{m}" for m in FIGURES}
    assert next(x for x in found if x["name"] == "ragtrace.retrieved")["result"]["score"] == 6.0
    marks = document_marks(phoenix_server, "ragtrace-demo", retrieve["context"]["span_id"], 12, 30.0)
    placed = [m for m in marks if m["name"] == "ragtrace.in_prompt"]
    assert len(placed) == 6 and sum(m["score"] for m in placed) == 3.0  # 3 of the 6 reached the prompt
    assert [s["session_id"] for s in client.sessions.list(project_name="ragtrace-demo")] == [root["attributes"]["session.id"]]
