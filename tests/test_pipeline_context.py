"""rag_pipeline(session_id=, user_id=, metadata=, tags=): OpenInference's session and user keys."""

from __future__ import annotations

import json

import pytest

import ragtrace
from ragtrace._internal import names

CONTEXT = {"session_id": "sess-42", "user_id": "u-7", "tags": ["prod", "canary"]}


def _run(**kwargs):
    with ragtrace.rag_pipeline("support-qa", query="What is BM25?", **kwargs) as run:
        with ragtrace.retrieve("What is BM25?") as r:
            r.record([{"id": "d1", "content": "BM25 ranks lexically."}])
    return run


@pytest.mark.parametrize("mode", ["full", "redact", "hash"])
def test_session_user_and_tags_are_on_the_root_in_every_mode(spans, mode):
    _run(capture_content=mode, **CONTEXT)
    root = spans.one(names.STAGE_PIPELINE).attributes
    assert root[names.OI_SESSION_ID] == "sess-42"
    assert root[names.GEN_AI_CONVERSATION_ID] == "sess-42"  # the GenAI semconv's key for the same id
    assert root[names.OI_USER_ID] == "u-7"
    assert list(root[names.OI_TAG_TAGS]) == ["prod", "canary"]
    assert not [k for k in root if k.startswith(names.RAG_PIPELINE_ATTRIBUTE_PREFIX)]  # not rag.pipeline.session_id
    assert not {names.OI_SESSION_ID, names.GEN_AI_CONVERSATION_ID} & set(spans.one(names.STAGE_RETRIEVE).attributes)  # the root only


def test_metadata_is_a_json_object_in_full_mode(spans):
    _run(metadata={"tenant": "acme", "attempt": 2, "beta": True, "ratio": float("nan"), "extra": {"k": [1]}, "bad": [float("inf")]})
    value = spans.one(names.STAGE_PIPELINE).attributes[names.OI_METADATA]
    assert json.loads(value) == {"tenant": "acme", "attempt": 2, "beta": True, "extra": '{"k":[1]}'}


def test_metadata_strings_pass_the_redactor(spans):
    ragtrace.configure(tracer_provider=spans.provider, redactor=lambda text: text.replace("acme", "[org]"))
    _run(metadata={"tenant": "acme", "attempt": 2})
    assert json.loads(spans.one(names.STAGE_PIPELINE).attributes[names.OI_METADATA]) == {"tenant": "[org]", "attempt": 2}


@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_metadata_is_not_exported_without_full_content(spans, mode):
    _run(capture_content=mode, metadata={"tenant": "SECRET-acme"}, **CONTEXT)
    for span in spans.all():
        assert names.OI_METADATA not in span.attributes
        assert "SECRET" not in json.dumps(dict(span.attributes), default=str)


def test_the_decorator_takes_them_too(spans):
    @ragtrace.rag_pipeline("decorated", session_id="s-1", user_id="u-1", tags=["t"], metadata={"a": "b"})
    def answer(question: str) -> str:
        return "ok"

    answer("q?")
    root = spans.one(names.STAGE_PIPELINE).attributes
    assert (root[names.OI_SESSION_ID], root[names.OI_USER_ID], list(root[names.OI_TAG_TAGS])) == ("s-1", "u-1", ["t"])
    assert json.loads(root[names.OI_METADATA]) == {"a": "b"}


def test_omitted_they_are_absent(spans):
    _run()
    root = spans.one(names.STAGE_PIPELINE).attributes
    assert not {names.OI_SESSION_ID, names.GEN_AI_CONVERSATION_ID, names.OI_USER_ID, names.OI_TAG_TAGS, names.OI_METADATA} & set(root)


@pytest.mark.parametrize(
    "kwargs",
    [{"session_id": 42}, {"user_id": b"u"}, {"metadata": ["a"]}, {"tags": "prod"}, {"tags": ["ok", 3]}],
)
def test_wrong_types_raise_at_the_call_site(kwargs):
    with pytest.raises(TypeError, match="rag_pipeline"):
        ragtrace.rag_pipeline("p", **kwargs)
