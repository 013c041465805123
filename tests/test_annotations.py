"""Annotations derived from finished spans (ragtrace/_internal/export/annotations.py), on real SDK spans."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import ragtrace
from ragtrace._internal.export import annotations
from ragtrace._internal import names


def finished(pipeline) -> list:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    ragtrace.configure(tracer_provider=provider)
    pipeline()
    return list(memory.get_finished_spans())


def derive(spans, marks: annotations.DocumentMarks | None = None) -> list[annotations.Annotation]:
    marks = marks or annotations.DocumentMarks()
    out = []
    for span in spans:
        span_id = annotations.span_hex(span.context.span_id)
        out += annotations.figure_annotations(span_id, span.attributes, annotations.trace_hex(span.context.trace_id))
        out += marks.add(span.context.trace_id, span_id, span.attributes)
    return out


def two_assemblies() -> None:
    """The answer is shown the second assembly; the first (a draft) placed other chunks."""
    with ragtrace.rag_pipeline("two", query="q"):
        with ragtrace.retrieve("q") as r:
            r.record([{"id": "a", "score": 0.9, "content": "alpha"}, {"id": "b", "score": 0.5, "content": "beta"}])
        with ragtrace.assemble() as draft:
            draft.add(r.chunks[0])
            draft.render("{context}")
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks[1])
            prompt = ctx.render("{context}\nQ: {question}", question="q")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("B [1].")


def test_marks_follow_the_assembly_the_answer_was_shown() -> None:
    found = derive(finished(two_assemblies))
    marks = {(a.document_position, a.name): a.result for a in found if a.kind == annotations.DOCUMENT}
    assert marks[(0, annotations.IN_PROMPT)]["score"] == 0.0  # "a" was only in the draft
    assert marks[(1, annotations.IN_PROMPT)] == {"score": 1.0, "label": "placed", "explanation": "in the prompt at position 1 of 1 as [1]"}
    assert marks[(1, annotations.CITED)]["label"] == "cited" and marks[(0, annotations.CITED)]["label"] == "not cited"
    assert not any(names.RAG_CITATION_OUT_OF_CONTEXT_IDS in s.attributes for s in finished(two_assemblies))  # none: absent
    metadata = {(a.document_position, a.name): a.metadata for a in found if a.kind == annotations.DOCUMENT}
    assert metadata[(1, annotations.IN_PROMPT)] == {"source": "ragtrace", "chunk_id": "b", "stage": "retrieve", "prompt_position": 1, "citation_label": "1"}
    assert metadata[(0, annotations.IN_PROMPT)] == {"source": "ragtrace", "chunk_id": "a", "stage": "retrieve"}


def test_figures_on_the_root_and_the_answer_and_the_proxies_on_the_trace() -> None:
    spans = finished(two_assemblies)
    found = derive(spans)
    stages = {annotations.span_hex(s.context.span_id): s.attributes[names.RAG_STAGE] for s in spans}
    on_spans = [a for a in found if a.kind == annotations.SPAN]
    assert sorted(stages[a.target] for a in on_spans) == sorted(["pipeline", "generate"] * len(names.ALL_METRICS))
    assert {a.payload()["annotator_kind"] for a in found} == {"CODE"}
    on_trace = [a for a in found if a.kind == annotations.TRACE]
    assert [a.name for a in on_trace] == [f"ragtrace.{m}" for m in names.ALL_METRICS if m in names.PROXY_METRICS]
    assert {a.payload()["trace_id"] for a in on_trace} == {annotations.trace_hex(spans[0].context.trace_id)}
    assert all("span_id" not in a.payload() for a in on_trace)


def test_file_level_figures_are_annotated_where_measured() -> None:
    """A root whose citations named files: file-refunds cited of 3 retrieved and shown files, the
    chunk-counting figures not measurable (citations_file_level)."""
    root = {
        names.RAG_STAGE: names.STAGE_PIPELINE,
        names.RAG_METRICS_STATUS: names.STATUS_CITATIONS_FILE_LEVEL,
        names.RAG_METRICS_INCLUSION_METHOD: names.INCLUSION_PROVIDER,
        **{names.metric_attribute(m): v for m, v in (("retrieved", 4), ("in_context", 4), ("context_precision", 1.0))},
        **{names.metric_attribute(m): v for m, v in zip(names.FILE_METRICS, (3, 3, 1, 1 / 3, 1 / 3))},
    }
    found = annotations.figure_annotations("00000000000000f1", root, "0" * 31 + "1")
    by_name = {(a.kind, a.name): a.result for a in found}
    assert by_name[(annotations.SPAN, "ragtrace.file_recall_proxy")] == {"score": 1 / 3, "label": "medium", "explanation": "file_recall_proxy = 0.3333 (provider context)"}
    assert by_name[(annotations.SPAN, "ragtrace.cited_files")]["score"] == 1.0
    assert by_name[(annotations.SPAN, "ragtrace.recall_proxy")]["label"] == annotations.NOT_MEASURABLE
    on_trace = [a.name for a in found if a.kind == annotations.TRACE]
    assert on_trace == ["ragtrace.context_precision", "ragtrace.file_recall_proxy", "ragtrace.file_context_utilization"]
    chunk_level = annotations.figure_annotations("00000000000000f2", {k: v for k, v in root.items() if "file" not in k}, None)
    assert not any("file" in a.name for a in chunk_level)  # where they don't apply: no annotation at all


def test_traces_whose_root_never_ends_are_given_up_oldest_first() -> None:
    marks = annotations.DocumentMarks(max_pending=2)
    retrieve = {names.RAG_STAGE: names.STAGE_RETRIEVE, names.RAG_RETRIEVAL_CHUNK_IDS: ("x",)}
    for trace_id in (1, 2, 3):
        assert marks.add(trace_id, "00000000000000a1", retrieve) == []
    assert marks.given_up == 1
    root = {names.RAG_STAGE: names.STAGE_PIPELINE}
    assert marks.add(1, "00000000000000f1", root) == []  # trace 1 was given up
    (only,) = marks.add(3, "00000000000000f3", root)  # no assembly, no answer: placement unknown
    assert only.result == {"label": "not measurable", "explanation": "not measurable: no context assembly was recorded"}


def cites_outside_the_context() -> None:
    """The answer cites "doc-c" by its id and [3], a declared label whose text never reached the
    prompt: both retrieved chunks the model was not shown (out-of-context citations)."""
    with ragtrace.rag_pipeline("outside", query="q"):
        with ragtrace.retrieve("q") as r:
            r.record([{"id": "doc-" + i, "content": text} for i, text in (("a", "alpha"), ("b", "beta"), ("c", "gamma"), ("d", "delta"))])
        with ragtrace.assemble() as ctx:
            ctx.place(r.chunks[0], "alpha", label="1")
            ctx.place(r.chunks[3], "delta", label="3")  # declared, but the prompt below does not show it
            ctx.set_prompt("[1] alpha\nQ: q")
        with ragtrace.generate(model="m", prompt="[1] alpha\nQ: q") as g:
            g.record("Alpha [1], gamma [doc-c], delta [3].")


def test_a_document_cited_outside_the_context_says_so() -> None:
    spans = finished(cites_outside_the_context)
    root = next(s for s in spans if s.attributes[names.RAG_STAGE] == names.STAGE_PIPELINE)
    assert root.attributes[names.metric_attribute(names.METRIC_OUT_OF_CONTEXT_CITATIONS)] == 2
    answer = next(s for s in spans if s.attributes[names.RAG_STAGE] == names.STAGE_GENERATE)
    assert answer.attributes[names.RAG_CITATION_OUT_OF_CONTEXT_IDS] == ("doc-c", "doc-d")  # by id, by unshown label
    marks = {(a.document_position, a.name): a.result for a in derive(spans) if a.kind == annotations.DOCUMENT}
    assert marks[(0, annotations.CITED)]["label"] == "cited"
    assert marks[(1, annotations.CITED)]["label"] == "not cited"
    for position in (2, 3):  # doc-c and doc-d: the root's out_of_context_citations figure counts these two
        assert marks[(position, annotations.CITED)] == {
            "score": 0.0,
            "label": annotations.CITED_NOT_IN_PROMPT,
            "explanation": "the answer cited it, but it was not in the prompt (an out-of-context citation)",
        }
        assert marks[(position, annotations.IN_PROMPT)]["score"] == 0.0
