"""Assemble.render records its template and variables (llm.prompt_template.*), as content."""

from __future__ import annotations

import json

import pytest

import ragtrace
from ragtrace._internal import names

DOCS = [{"id": "d1", "content": "BM25 ranks lexically."}, {"id": "d2", "content": "Dense retrieval embeds."}]
TEMPLATE = "Answer from the sources.\n{context}\nQuestion: {question}"


def _assemble(template=TEMPLATE, mode: str | None = None, **variables):
    with ragtrace.rag_pipeline("p", capture_content=mode):
        with ragtrace.assemble() as ctx:
            for doc in DOCS:
                ctx.add(doc)
            prompt = ctx.render(template, **variables)
    return prompt


def test_string_template_and_variables_are_on_the_assemble_span(spans):
    prompt = _assemble(question="What is BM25?", tenant="acme", attempt=2)
    attrs = spans.one(names.STAGE_ASSEMBLE).attributes
    assert attrs[names.OI_PROMPT_TEMPLATE] == TEMPLATE
    assert json.loads(attrs[names.OI_PROMPT_TEMPLATE_VARIABLES]) == {"question": "What is BM25?", "tenant": "acme", "attempt": 2}
    assert attrs[names.OI_OUTPUT_VALUE] == prompt  # template + variables -> prompt


def test_chat_template_is_json_messages(spans):
    template = [{"role": "system", "content": "Use the sources:\n{context}"}, {"role": "user", "content": "{question}"}]
    _assemble(template, question="What is BM25?")
    attrs = spans.one(names.STAGE_ASSEMBLE).attributes
    assert json.loads(attrs[names.OI_PROMPT_TEMPLATE]) == template
    assert json.loads(attrs[names.OI_PROMPT_TEMPLATE_VARIABLES]) == {"question": "What is BM25?"}


def test_the_default_template_is_recorded_when_only_variables_are_given(spans):
    from ragtrace._internal.core.assembly import DEFAULT_TEMPLATE

    _assemble(None, question="q?")
    assert spans.one(names.STAGE_ASSEMBLE).attributes[names.OI_PROMPT_TEMPLATE] == DEFAULT_TEMPLATE


def test_no_template_no_variables_records_nothing(spans):
    _assemble(None)
    attrs = spans.one(names.STAGE_ASSEMBLE).attributes
    assert names.OI_PROMPT_TEMPLATE not in attrs and names.OI_PROMPT_TEMPLATE_VARIABLES not in attrs


def test_variables_pass_the_redactor(spans):
    ragtrace.configure(tracer_provider=spans.provider, redactor=lambda text: text.replace("acme", "[org]"))
    _assemble(question="for acme?")
    assert json.loads(spans.one(names.STAGE_ASSEMBLE).attributes[names.OI_PROMPT_TEMPLATE_VARIABLES]) == {"question": "for [org]?"}


@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_no_template_or_variable_content_without_full_mode(spans, mode):
    _assemble("SECRET-TEMPLATE {context} {question}", mode=mode, question="SECRET-QUESTION")
    for span in spans.all():
        assert names.OI_PROMPT_TEMPLATE not in span.attributes
        assert names.OI_PROMPT_TEMPLATE_VARIABLES not in span.attributes
        assert "SECRET" not in json.dumps(dict(span.attributes), default=str)
    assert spans.one(names.STAGE_ASSEMBLE).attributes[names.RAG_CONTEXT_CHUNK_IDS] == ("d1", "d2")  # ids still go out


def test_openinference_off_records_no_template(spans):
    ragtrace.configure(tracer_provider=spans.provider, openinference=False)
    _assemble(question="q?")
    assert names.OI_PROMPT_TEMPLATE not in spans.one(names.STAGE_ASSEMBLE).attributes
