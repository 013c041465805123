"""File-level figures from the Responses API's ``file_search`` tool, on the real ``openai`` SDK over
an ``httpx.MockTransport`` (``openai_responses_fake``), each call made with ragtrace off first.

``file_citation`` annotations name files, not chunks. The search returns RESULTS: two chunks of
file-refunds (R1, R2), then file-shipping (R3) and file-gifts (R4): F_R = F_C = {refunds, shipping,
gifts}. Hand-worked truth:
- citing file-refunds (two chunks in context): the chunk-counting figures are not measurable
  (citations_file_level), the file ones are: retrieved_files 3, in_context_files 3, cited_files 1,
  file_recall_proxy 1/3, file_context_utilization 1/3;
- citing file-shipping and file-gifts (one chunk each): chunk recall 2/4 and, F_K = {shipping,
  gifts}, file_recall_proxy 2/3, file_context_utilization 2/3;
- a result that names no file: its file is not known, so no file figure (files_unknown);
- ``vector_stores.search`` before the call in one pipeline: its chunks have the same ids and files.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

import ragtrace
from ragtrace._internal import names
from ragtrace.exporters import JsonLinesExporter

from .openai_responses_fake import STORE, FakeResponses, result
from .test_openai_file_search import EXACT, FILE_LEVEL, IDS, REQUEST, RESULTS, metrics

FILES = ["file-refunds", "file-refunds", "file-shipping", "file-gifts"]
FILE_FIGURES = ("retrieved_files", "in_context_files", "cited_files", "file_recall_proxy", "file_context_utilization")


def file_figures(span) -> tuple:
    got = metrics(span)
    return tuple(got.get(f) for f in FILE_FIGURES)


@pytest.fixture
def instrumented(spans):
    assert ragtrace.instrument("openai") == ["openai"]
    yield spans
    ragtrace.uninstrument("openai")


def off_then_on(fake: FakeResponses, **request) -> object:
    """The call with ragtrace off, then on: the app gets the same response either way."""
    ragtrace.uninstrument("openai")
    plain = fake.client().responses.create(**request)
    ragtrace.instrument("openai")
    traced = fake.client().responses.create(**request)
    assert traced.model_dump() == plain.model_dump()
    return traced


def test_a_file_cited_with_several_chunks_in_context_gives_the_file_figures(instrumented):
    off_then_on(FakeResponses(RESULTS, FILE_LEVEL), **REQUEST)
    root, generated, retrieved = instrumented.one("pipeline"), instrumented.one("generate"), instrumented.one("retrieve")
    assert list(retrieved.attributes["rag.retrieval.file_ids"]) == FILES
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == IDS
    got = metrics(root)
    assert got["status"] == "citations_file_level" and got["inclusion_method"] == "provider"
    assert "recall_proxy" not in got and "cited" not in got
    assert file_figures(root) == (3, 3, 1, 1 / 3, 1 / 3)
    assert file_figures(generated) == (3, 3, 1, 1 / 3, 1 / 3)  # the answer's own figures, as the root's
    events = {e.attributes["gen_ai.evaluation.name"]: e.attributes["gen_ai.evaluation.score.value"] for e in root.events}
    assert events == {"ragtrace.context_precision": 1.0, "ragtrace.file_recall_proxy": 1 / 3, "ragtrace.file_context_utilization": 1 / 3}


def test_exact_file_citations_give_chunk_and_file_figures_streamed_too(instrumented):
    FakeResponses(RESULTS, EXACT).client().responses.create(**REQUEST)
    with FakeResponses(RESULTS, EXACT).client().responses.create(**REQUEST, stream=True) as stream:
        for _ in stream:
            pass
    roots = instrumented.by_stage("pipeline")
    assert len(roots) == 2
    for root in roots:
        assert metrics(root)["recall_proxy"] == 0.5 and "status" not in metrics(root)
        assert file_figures(root) == (3, 3, 2, 2 / 3, 2 / 3)


def test_a_streamed_file_level_answer_the_app_read_whole(instrumented):
    with FakeResponses(RESULTS, FILE_LEVEL).client().responses.create(**REQUEST, stream=True) as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.completed"
    assert file_figures(instrumented.one("pipeline")) == (3, 3, 1, 1 / 3, 1 / 3)


def test_a_result_naming_no_file_leaves_the_file_figures_not_measurable(instrumented):
    results = [dict(r) for r in RESULTS]
    del results[3]["file_id"]  # the API may leave it out: R4's file is then unknown
    FakeResponses(results, FILE_LEVEL).client().responses.create(**REQUEST)
    root, retrieved = instrumented.one("pipeline"), instrumented.one("retrieve")
    assert list(retrieved.attributes["rag.retrieval.file_ids"]) == FILES[:3] + [""]
    assert metrics(root)["status"] == "citations_file_level,files_unknown"
    assert file_figures(root) == (None,) * 5
    assert metrics(root)["retrieved"] == 4  # what doesn't need files stays measured


def test_without_the_results_no_file_figure_is_made_up(instrumented):
    request = {k: v for k, v in REQUEST.items() if k != "include"}
    FakeResponses(RESULTS, FILE_LEVEL).client().responses.create(**request)
    root = instrumented.one("pipeline")
    assert file_figures(root) == (None,) * 5 and "results_not_included" in metrics(root)["status"]


def test_a_vector_store_search_before_the_call_keeps_its_chunks_files(instrumented):
    """search returns R3 and a chunk of file-faq (R5); the call then searches again (R1..R4) and
    cites file-refunds: F_R = {refunds, shipping, gifts, faq}, F_C = {refunds, shipping, gifts},
    F_K = {refunds}: file recall 1/4, utilisation 1/3; |R| = 5 chunks."""
    fake = FakeResponses(RESULTS, FILE_LEVEL)
    found = [("file-shipping", RESULTS[2]["text"], 0.8), ("file-faq", "Opening hours are 9 to 5.", 0.6)]

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path == f"/v1/vector_stores/{STORE}/search":
            data = [{"file_id": f, "filename": f"{f}.md", "score": s, "attributes": {}, "content": [{"type": "text", "text": t}]} for f, t, s in found]
            return httpx.Response(200, json={"object": "vector_store.search_results.page", "search_query": ["refund"], "data": data, "has_more": False, "next_page": None})
        return fake.handle(request)

    client = openai.OpenAI(api_key="sk-test", max_retries=0, http_client=httpx.Client(transport=httpx.MockTransport(handle)))
    with ragtrace.rag_pipeline("support"):
        client.vector_stores.search(STORE, query="refund")
        client.responses.create(**REQUEST)
    first = instrumented.by_stage("retrieve")[0]
    assert list(first.attributes["rag.retrieval.file_ids"]) == ["file-shipping", "file-faq"]
    got = metrics(instrumented.one("pipeline"))
    assert got["retrieved"] == 5 and got["status"] == "citations_file_level"
    assert file_figures(instrumented.one("pipeline")) == (4, 3, 1, 1 / 4, 1 / 3)


def test_the_file_recall_histogram_gets_the_runs_that_cite_files(metric_reader):
    ragtrace.instrument("openai")
    try:
        FakeResponses(RESULTS, FILE_LEVEL).client().responses.create(**REQUEST)
        FakeResponses(RESULTS, EXACT).client().responses.create(**REQUEST)
    finally:
        ragtrace.uninstrument("openai")
    data = metric_reader.get_metrics_data()
    found = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    (point,) = found[names.METRIC_FILE_RECALL_PROXY_HISTOGRAM].data.data_points
    assert point.count == 2 and point.sum == pytest.approx(1 / 3 + 2 / 3)
    (chunk,) = found[names.METRIC_RECALL_PROXY_HISTOGRAM].data.data_points
    assert chunk.count == 1 and chunk.sum == 0.5  # the file-level run has no chunk recall


def test_redact_mode_exports_file_ids_but_no_filename_or_text(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    ragtrace.instrument("openai")
    marker = "PLANTED-MARKER-7731"
    try:
        results = [result("file-a", f"{marker} one.", 0.9), result("file-a", f"{marker} two.", 0.8), result("file-b", "Other.", 0.5)]
        FakeResponses(results, [(f"{marker} answer", ["file-a"])]).client().responses.create(**dict(REQUEST, input=f"{marker} question"))
    finally:
        ragtrace.uninstrument("openai")
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported and ".md" not in exported  # result text, answer, question, filenames
    assert list(spans.one("retrieve").attributes["rag.retrieval.file_ids"]) == ["file-a", "file-a", "file-b"]
    assert file_figures(spans.one("pipeline")) == (2, 2, 1, 0.5, 0.5)


def test_the_report_recomputes_the_same_file_figures_from_the_export(tmp_path, capsys):
    """The exported spans alone (rag.retrieval.file_ids, rag.citation.file_ids) give the report the
    figures the SDK recorded: no mismatch, the same numbers in its JSON rows and summary."""
    from ragtrace.cli import main

    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    ragtrace.configure(tracer_provider=provider)
    ragtrace.instrument("openai")
    try:
        FakeResponses(RESULTS, FILE_LEVEL).client().responses.create(**REQUEST)
        FakeResponses(RESULTS, EXACT).client().responses.create(**REQUEST)
        FakeResponses(RESULTS[:3], [("Refunds.", ["file-refunds"])]).client().responses.create(**REQUEST)
    finally:
        ragtrace.uninstrument("openai")
    provider.shutdown()
    capsys.readouterr()
    assert main(["report", "--json", str(path)]) == 0
    document = json.loads(capsys.readouterr().out)
    rows = sorted(document["traces"], key=lambda r: r["file_recall_proxy"])
    assert [r["recorded_mismatch"] for r in rows] == [[], [], []]
    # the third: R1..R3 (F_R = {refunds, shipping}), file-refunds cited: 1/2
    assert [(r["retrieved_files"], r["cited_files"], r["file_recall_proxy"], r["file_context_utilization"]) for r in rows] == [
        (3, 1, 1 / 3, 1 / 3), (2, 1, 0.5, 0.5), (3, 2, 2 / 3, 2 / 3)
    ]
    assert [r["status"] for r in rows] == [["citations_file_level"], ["citations_file_level"], []]
    # nearest-rank percentiles of 1/3, 1/2, 2/3
    assert document["summary"]["figures"]["file_recall_proxy"] == {"p25": 1 / 3, "p50": 0.5, "p90": 2 / 3, "n": 3}
    assert main(["report", "--plain", str(path)]) == 0
    assert "  file_recall_proxy         0.33  0.50  0.67  3" in capsys.readouterr().out
    page = tmp_path / "report.html"
    assert main(["report", "--html", str(page), str(path)]) == 0
    assert "<td>file_recall_proxy</td>" in page.read_text()


def test_a_report_of_runs_citing_chunks_shows_no_file_rows(tmp_path, capsys):
    from ragtrace.cli import main

    path = tmp_path / "spans.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    with ragtrace.rag_pipeline("qa", tracer_provider=provider):
        with ragtrace.retrieve("q", tracer_provider=provider) as found:
            found.record([{"id": "a", "content": "Alpha."}])
        with ragtrace.assemble(tracer_provider=provider) as context:
            context.add(found.chunks[0])
        with ragtrace.generate(model="m", tracer_provider=provider) as answer:
            answer.record("Alpha [1].")
    provider.shutdown()
    capsys.readouterr()
    assert main(["report", "--json", str(path)]) == 0
    document = json.loads(capsys.readouterr().out)
    assert not set(names.FILE_METRICS) & (set(document["summary"]["figures"]) | set(document["traces"][0]))
