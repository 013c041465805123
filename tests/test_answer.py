"""Answers are scored honestly: two kinds of invalid citation, and no score when the citations can't be known."""

from __future__ import annotations

import logging

import pytest

import ragtrace
from ragtrace._internal import names

DOCS = [
    {"id": "d1", "content": "BM25 is a lexical ranking function."},
    {"id": "d2", "content": "Dense retrieval embeds queries and passages."},
    {"id": "d3", "content": "Rerankers reorder candidates with a cross-encoder."},
]


def _run(answer: str, *, pattern=None, placed=("d1", "d2")):
    with ragtrace.rag_pipeline("answers") as run:
        with ragtrace.retrieve("q") as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            for doc in DOCS:
                if doc["id"] in placed:
                    ctx.add(doc)
            prompt = ctx.render(question="q")
        with ragtrace.generate(model="m", prompt=prompt, citation_pattern=pattern) as g:
            g.record(answer)
    return run


def test_a_retrieved_chunk_cited_by_id_but_not_shown_is_out_of_context_and_a_made_up_label_unknown(spans):
    run = _run("Lexical [1]; rerankers [d3]; also [7] and [doc-9].")
    assert run.metrics["invalid_citations"] == 3
    assert run.metrics["out_of_context_citations"] == 1  # d3 was retrieved, never placed
    assert run.metrics["unknown_citations"] == 2  # [7] and [doc-9] name nothing retrieved
    generate = spans.one("generate").attributes
    assert generate[names.RAG_CITATION_OUT_OF_CONTEXT_COUNT] == 1
    assert generate[names.RAG_CITATION_UNKNOWN_COUNT] == 2
    root = spans.one("pipeline").attributes
    assert root["rag.metrics.out_of_context_citations"] == 1 and root["rag.metrics.unknown_citations"] == 2
    assert root[names.RAG_METRICS_INCLUSION_METHOD] == "recorded" and run.inclusion_method == "recorded"


def test_a_declared_label_whose_text_never_reached_the_prompt_is_out_of_context(spans):
    with ragtrace.rag_pipeline("declared") as run:
        with ragtrace.retrieve("q") as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            texts = [f"[{i}] {d['content']}" for i, d in enumerate(DOCS, 1)]
            for doc, text in zip(DOCS, texts):
                ctx.place(doc, text)
            prompt = "\n".join(texts[:2])  # the window cut the third source
            ctx.set_prompt(prompt)
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("Rerankers [3], lexical [1].")
    assert (run.metrics["cited"], run.metrics["out_of_context_citations"], run.metrics["unknown_citations"]) == (1, 1, 0)
    assert spans.one("pipeline").attributes[names.RAG_METRICS_INCLUSION_METHOD] == "declared"


def test_a_raising_citation_pattern_leaves_the_answer_not_measurable_and_names_the_callable(spans, caplog):
    def my_citations(text: str):
        raise KeyError("boom")

    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        run = _run("Lexical [1].", pattern=my_citations)
    assert "recall_proxy" not in run.metrics and "cited" not in run.metrics and "invalid_citations" not in run.metrics
    assert run.metrics["in_context"] == 2  # what does not depend on the citations is still right
    assert "citation_pattern_failed" in run.status
    assert spans.one("generate").attributes[names.RAG_CITATION_STATUS] == "citation_pattern_failed"
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "my_citations" in warnings[0] and "KeyError" in warnings[0]
    assert "internal error" not in warnings[0]


def test_a_citation_pattern_that_is_not_a_regex_is_refused_at_the_call_site():
    with pytest.raises(ValueError, match="not a valid regular expression"):
        ragtrace.generate(model="m", citation_pattern="[unclosed")
    with pytest.raises(TypeError, match="citation_pattern"):
        ragtrace.generate(model="m", citation_pattern=42)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a valid regular expression"):
        ragtrace.generator(citation_pattern="(")


def test_a_user_regex_pattern_still_works(spans):
    run = _run("Lexical <<1>>, made up <<9>>.", pattern=r"<<(\d+)>>")
    assert (run.metrics["cited"], run.metrics["invalid_citations"], run.metrics["unknown_citations"]) == (1, 1, 1)


def _located(prompt: str, answer: str):
    with ragtrace.rag_pipeline("answers") as run:
        with ragtrace.retrieve("q") as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            ctx.observe(DOCS[:2], prompt)
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record(answer)
    return run


def test_a_located_context_whose_labels_could_not_be_read_leaves_unresolved_citations_unscored(spans):
    """Both chunks are found, but the prompt labels them in a way the search can't read, so "[1]"
    may well be d1: counting it invalid and recall 0.0 would be a fake figure (issue 14: invalid
    only when ragtrace knows what the model was shown)."""
    prompt = "Use the passages.\n\n(one) " + DOCS[0]["content"] + "\n\n(two) " + DOCS[1]["content"] + "\n\nQ: what is BM25?"
    run = _located(prompt, "It ranks lexically [1].")
    assert run.metrics["in_context"] == 2 and run.inclusion_method == "located"
    assert "recall_proxy" not in run.metrics and "invalid_citations" not in run.metrics
    assert "citations_unresolved" in run.status
    labelled = _located("[1] " + DOCS[0]["content"] + "\n[2] " + DOCS[1]["content"], "It ranks lexically [1] [7].")
    assert labelled.metrics["invalid_citations"] == 1 and labelled.metrics["recall_proxy"] == pytest.approx(1 / 3)  # labels read: [7] is invalid
