"""The content policy: ``full`` / ``redact`` / ``hash``, where it is set, and what it lets through.

Every test plants unique markers in the content it feeds ragtrace and looks for them in what the
OpenTelemetry SDK received: the finished spans, what span processors saw at start and end, and
(strongest) every value passed to the SDK's span API at all.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor, Tracer
from opentelemetry.trace import StatusCode

import ragtrace
from ids import keyed_digest
from ragtrace._internal.core import chunks, keyed
from ragtrace._internal.setup import config, redaction
from ragtrace._internal import names

ROOT = Path(__file__).resolve().parent.parent


# --- helpers ---------------------------------------------------------------------------------
def marker(kind: str) -> str:
    return f"MARK{kind}{uuid.uuid4().hex}"


def _pattern(template: str) -> re.Pattern[str]:
    """An ATTRIBUTES key template as a regex; a ``{a,b}`` group keeps only its content member."""
    key = re.escape(template).replace(re.escape("{i}"), r"\d+").replace(re.escape("<key>"), r"\w+")
    key = re.sub(r"\\\{([\w,]+)\\\}", lambda m: "content" if "content" in m.group(1).split(",") else "(" + "|".join(m.group(1).split(",")) + ")", key)
    return re.compile(key)


CONTENT_PATTERNS = [_pattern(info.key) for info in names.ATTRIBUTES if info.content] + [
    re.compile(re.escape(names.GEN_AI_SYSTEM_INSTRUCTIONS))
]
HASH_ONLY = {names.RAG_RETRIEVAL_CONTENT_HASHES, names.RAG_CONTEXT_CONTENT_HASHES}


def is_content_key(key: str) -> bool:
    return any(p.fullmatch(key) for p in CONTENT_PATTERNS)


PLACEHOLDER_SLOTS = [
    re.compile(names.OI_LLM_INPUT_MESSAGES + r"\.\d+\." + re.escape(names.OI_MESSAGE_CONTENT)),
    re.compile(names.OI_LLM_OUTPUT_MESSAGES + r"\.\d+\." + re.escape(names.OI_MESSAGE_CONTENT)),
    re.compile(r"(retrieval\.documents|reranker\.(input|output)_documents)\.\d+\.document\.content"),
]


MESSAGE_ROLE = re.compile(r"llm\.(input|output)_messages\.\d+\." + re.escape(names.OI_MESSAGE_ROLE))


def is_placeholder(span: ReadableSpan, key: str) -> bool:
    """A content slot Phoenix shows, carrying only the fixed redaction placeholder."""
    return span.attributes[key] == names.REDACTED and any(p.fullmatch(key) for p in PLACEHOLDER_SLOTS)


def exported_text(span: ReadableSpan) -> str:
    """Everything a span carries that an exporter would send, as one searchable string."""
    parts: list[Any] = [span.name, span.status.description, dict(span.attributes or {})]
    for event in span.events:
        parts += [event.name, dict(event.attributes or {})]
    for link in span.links:
        parts.append(dict(link.attributes or {}))
    parts.append(dict(span.resource.attributes))
    return repr(parts)


class Sniffer(SpanProcessor):
    """A span processor that keeps a text copy of every span at start and at end."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_start(self, span: Span, parent_context: Any = None) -> None:
        self.seen.append(repr((span.name, dict(span.attributes or {}))))

    def on_end(self, span: ReadableSpan) -> None:
        self.seen.append(exported_text(span))


@pytest.fixture
def sdk_inputs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every value handed to the SDK's span API (start_span, set_attribute(s), add_event...)."""
    received: list[str] = []

    def wrap(cls: type, name: str) -> None:
        original = getattr(cls, name)

        def recording(self: Any, *args: Any, **kwargs: Any) -> Any:
            received.append(repr((name, args, kwargs)))
            return original(self, *args, **kwargs)

        monkeypatch.setattr(cls, name, recording)

    for method in ("set_attribute", "set_attributes", "add_event", "set_status", "update_name", "record_exception", "add_link"):
        wrap(Span, method)
    wrap(Tracer, "start_span")
    return received


def leaked(marks: dict[str, str], texts: list[str]) -> dict[str, str]:
    joined = "\n".join(texts)
    return {kind: mark for kind, mark in marks.items() if mark in joined or mark[:16] in joined}


class Boom(Exception):
    pass


def new_marks() -> dict[str, str]:
    kinds = ("query", "chunk1", "chunk2", "chunk3", "meta", "system", "template", "answer", "label", "error", "embed")
    return {kind: marker(kind) for kind in kinds}


def marked_pipeline(marks: dict[str, str], **pipeline_kwargs: Any) -> tuple[ragtrace.RagPipeline, BaseException]:
    """Every stage, every kind of content, a failing stage and a failing pipeline."""
    query = f"What is {marks['query']}?"
    docs = [
        {"id": "d1", "score": 0.9, "content": f"BM25 ranks {marks['chunk1']}", "metadata": {"title": marks["meta"]}},
        {"id": "d2", "score": 0.8, "content": f"Dense retrieval {marks['chunk2']}"},
        {"id": "d3", "score": 0.4, "content": f"Rerankers {marks['chunk3']}"},
        {"id": "d4", "score": 0.3, "content": f"BM25 ranks {marks['chunk1']}"},  # same text as d1
    ]
    error = Boom(f"lookup failed for {marks['error']}")
    with pytest.raises(Boom) as caught:
        with ragtrace.rag_pipeline("qa", query=query, query_id="q-1", **pipeline_kwargs) as run:
            with ragtrace.embed(model="e5", provider="local") as e:
                e.record([[0.1, 0.2, 0.3]], input_tokens=5, text=f"embed {marks['embed']}")
            with ragtrace.retrieve(query, data_source="kb", top_k=4) as r:
                r.record(docs)
            with ragtrace.rerank(model="bge", query=query, top_n=2) as rr:
                rr.record([docs[1], docs[0]])
            with ragtrace.assemble(max_tokens=500) as ctx:
                for chunk in rr.chunks:
                    ctx.add(chunk)
                ctx.drop(docs[2], reason="filtered")
                prompt = ctx.render(
                    [
                        {"role": "system", "content": f"Be brief {marks['system']}"},
                        {"role": "user", "content": f"{marks['template']}\nSources:\n{{context}}\nQ: {{question}}"},
                    ],
                    question=query,
                )
            with ragtrace.generate(model="gpt", provider="openai", prompt=prompt) as g:
                g.record(f"{marks['answer']} [1] [2] [{marks['label']}]", input_tokens=50, output_tokens=9)
            try:
                with ragtrace.generate(model="judge", role="grader", prompt=f"grade {marks['answer']}"):
                    raise Boom(f"grader crashed on {marks['error']}")
            except Boom:
                pass
            raise error
    assert caught.value is error
    return run, error


def by_stage(spans: list[ReadableSpan]) -> dict[str, list[ReadableSpan]]:
    found: dict[str, list[ReadableSpan]] = {}
    for span in spans:
        found.setdefault(span.attributes[names.RAG_STAGE], []).append(span)
    return found


# --- the three modes -------------------------------------------------------------------------
def test_full_mode_records_content(spans):
    marks = new_marks()
    ragtrace.configure(tracer_provider=spans.provider, capture_content="full")
    marked_pipeline(marks)
    found = leaked(marks, [exported_text(s) for s in spans.all()])
    # metadata values are never exported, not even in full mode; everything else is
    assert set(found) == set(marks) - {"meta"}
    stage = by_stage(spans.all())
    root = stage["pipeline"][0]
    assert root.attributes[names.RAG_CONTENT_MODE] == "full"
    assert marks["query"] in root.attributes[names.OI_INPUT_VALUE]
    retrieve = stage["retrieve"][0].attributes
    assert marks["query"] in retrieve[names.GEN_AI_RETRIEVAL_QUERY_TEXT]
    assert marks["chunk1"] in retrieve["retrieval.documents.0.document.content"]
    answer = next(s for s in stage["generate"] if s.attributes[names.RAG_GENERATION_ROLE] == "answer").attributes
    assert marks["system"] in answer[names.GEN_AI_INPUT_MESSAGES]
    assert marks["answer"] in json.loads(answer[names.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"]
    assert list(answer[names.RAG_CITATION_INVALID_LABELS]) == [marks["label"]]
    event = next(e for e in root.events if e.name == "exception")
    assert marks["error"] in event.attributes["exception.message"]
    assert marks["error"] in event.attributes["exception.stacktrace"]
    assert names.RAG_RETRIEVAL_CONTENT_HASHES not in retrieve


@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_redact_and_hash_modes_record_no_content(spans, sdk_inputs, mode):
    sniffer = Sniffer()
    spans.provider.add_span_processor(sniffer)
    marks = new_marks()
    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
    marked_pipeline(marks)
    exported = [exported_text(s) for s in spans.all()]
    assert len(exported) == 7
    assert leaked(marks, exported) == {}
    assert leaked(marks, sniffer.seen) == {}  # processors never see it, at start or at end
    assert leaked(marks, sdk_inputs) == {}  # it is never even handed to the SDK
    for span in spans.all():
        content = [k for k in span.attributes if is_content_key(k) and not is_placeholder(span, k)]
        assert content == [], span.name
        if mode == "redact":
            assert not HASH_ONLY & set(span.attributes)
    root = spans.one("pipeline")
    assert root.attributes[names.RAG_CONTENT_MODE] == mode
    assert len(root.attributes[names.RAG_QUERY_HASH]) == 16  # golden-set joins still work


@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_redaction_removes_content_keys_and_nothing_else(spans, mode):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="full")
    marked_pipeline(new_marks())
    full = {s.name + "/" + s.attributes.get(names.RAG_GENERATION_ROLE, ""): s for s in spans.all()}
    spans.clear()
    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
    marked_pipeline(new_marks())
    redacted = {s.name + "/" + s.attributes.get(names.RAG_GENERATION_ROLE, ""): s for s in spans.all()}
    assert set(full) == set(redacted)
    for name, span in full.items():
        kept = {k for k in redacted[name].attributes if not is_placeholder(redacted[name], k)} - HASH_ONLY
        # full mode's gen_ai.*.messages are content; Phoenix derives the OpenInference messages from
        # them. Without them (redact, hash) the OpenInference messages carry the roles and placeholders
        stand_ins = {k for k in kept if MESSAGE_ROLE.fullmatch(k)}
        assert bool(stand_ins) == any(k in span.attributes for k in (names.GEN_AI_INPUT_MESSAGES, names.GEN_AI_OUTPUT_MESSAGES)), name
        kept -= stand_ins
        assert kept == {k for k in span.attributes if not is_content_key(k)}, name
        # per-run values (span ids, the query hash, the mode) differ between the two runs by nature
        per_run = {names.RAG_CONTENT_MODE, names.RAG_QUERY_HASH, names.RAG_CITATION_INVALID_LABELS, names.RAG_GENERATION_CONTEXT_SPAN_ID}
        for key in kept - per_run:
            assert redacted[name].attributes[key] == span.attributes[key], (name, key)
        assert [e.name for e in redacted[name].events] == [e.name for e in span.events]
        assert redacted[name].status.status_code == span.status.status_code


@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_exception_message_becomes_its_type_name(spans, mode):
    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
    error = Boom("patient alice@example.com not found")
    with pytest.raises(Boom) as caught:
        with ragtrace.rag_pipeline("p"):
            with ragtrace.retrieve("q"):
                raise error
    assert caught.value is error
    for span in spans.all():
        assert span.status.status_code == StatusCode.ERROR
        assert span.status.description == "Boom"
        (event,) = [e for e in span.events if e.name == "exception"]
        assert event.attributes["exception.type"] == "Boom"
        assert event.attributes["exception.message"] == "Boom"
        assert "exception.stacktrace" not in event.attributes
        assert span.attributes[names.ERROR_TYPE] == "Boom"
    assert str(error) == "patient alice@example.com not found"  # the user's exception is untouched


def test_hash_mode_adds_short_content_hashes_and_duplicates_stay_visible(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="hash")
    docs = [
        {"id": "a", "content": "same text"},
        {"id": "b", "content": "other text"},
        {"id": "c", "content": "same text"},  # duplicate content under another id
    ]
    with ragtrace.rag_pipeline("dups") as run:
        with ragtrace.retrieve("q") as r:
            r.record(docs)
        with ragtrace.assemble() as ctx:
            for d in docs:
                ctx.add(d)
    retrieve = spans.one("retrieve").attributes
    hashes = list(retrieve[names.RAG_RETRIEVAL_CONTENT_HASHES])
    assert list(retrieve[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["a", "b", "c"]
    assert hashes == [chunks.content_hash(d["content"]) for d in docs]
    assert all(re.fullmatch(r"[0-9a-f]{16}", h) for h in hashes)
    assert hashes[0] == hashes[2] != hashes[1]
    assemble = spans.one("assemble").attributes
    # c is a duplicate of a by content, so it does not land
    assert list(assemble[names.RAG_CONTEXT_CHUNK_IDS]) == ["a", "b"]
    assert list(assemble[names.RAG_CONTEXT_CONTENT_HASHES]) == hashes[:2]
    assert list(assemble[names.RAG_CONTEXT_DROPPED_REASONS]) == ["duplicate"]
    assert run.metrics["duplicate_chunks"] == 1
    assert spans.one("pipeline").attributes["rag.metrics.duplicate_chunks"] == 1
    assert not any(is_content_key(k) and not is_placeholder(s, k) for s in spans.all() for k in s.attributes)


def test_proxies_are_the_same_in_every_mode(spans):
    results = {}
    for mode in ("full", "redact", "hash"):
        spans.clear()
        ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
        run, _ = marked_pipeline(new_marks())
        root = spans.one("pipeline")
        figures = {k: v for k, v in root.attributes.items() if k.startswith(names.RAG_METRICS_PREFIX)}
        evaluations = sorted(
            (e.attributes["gen_ai.evaluation.name"], e.attributes["gen_ai.evaluation.score.value"])
            for e in root.events
            if e.name == "gen_ai.evaluation.result"
        )
        results[mode] = (run.metrics, figures, evaluations)
    assert results["full"][0]["cited"] == 2 and results["full"][0]["recall_proxy"] == 0.5
    assert results["full"][0]["duplicate_chunks"] == 1
    assert len(results["full"][2]) == 4
    assert results["redact"] == results["full"]
    assert results["hash"] == results["full"]


# --- where the policy is set -----------------------------------------------------------------
def test_per_pipeline_override_both_ways(spans):
    q1, q2, q3 = marker("q"), marker("q"), marker("q")
    ragtrace.configure(tracer_provider=spans.provider, capture_content="full")
    with ragtrace.rag_pipeline("strict", query=q1, capture_content="redact"):
        with ragtrace.retrieve(q1) as r:
            r.record([{"id": "a", "content": q1}])
    assert leaked({"q1": q1}, [exported_text(s) for s in spans.all()]) == {}
    spans.clear()
    with ragtrace.retrieve(q2) as r:  # outside the pipeline: the configured policy again
        r.record([q2])
    assert q2 in spans.one("retrieve").attributes[names.GEN_AI_RETRIEVAL_QUERY_TEXT]
    spans.clear()
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    with ragtrace.rag_pipeline("open", query=q3, capture_content="full") as run:
        with ragtrace.retrieve(q3) as r:
            r.record([q3])
    assert run.config.content.mode == "full"
    assert spans.one("pipeline").attributes[names.RAG_CONTENT_MODE] == "full"
    assert spans.one("retrieve").attributes[names.GEN_AI_RETRIEVAL_QUERY_TEXT] == q3


def test_per_pipeline_override_reaches_decorated_stages(spans):
    secret = marker("q")

    @ragtrace.retriever(data_source="kb")
    def search(query: str) -> list[dict]:
        return [{"id": "a", "content": f"chunk about {query}"}]

    @ragtrace.generator(model="m")
    def answer(prompt: str) -> str:
        return f"{prompt} [1]"

    @ragtrace.rag_pipeline("decorated", capture_content="hash")
    def pipeline(query: str) -> str:
        docs = search(query)
        with ragtrace.assemble() as ctx:
            ctx.add(docs[0])
        return answer(ctx.prompt)

    ragtrace.configure(tracer_provider=spans.provider, capture_content="full")
    result = pipeline(secret)
    assert secret in result
    assert len(spans.all()) == 4
    assert leaked({"q": secret}, [exported_text(s) for s in spans.all()]) == {}
    assert spans.one("pipeline").attributes[names.RAG_CONTENT_MODE] == "hash"
    assert spans.one("retrieve").attributes[names.RAG_RETRIEVAL_CONTENT_HASHES]


@pytest.mark.parametrize(
    ("ragtrace_env", "otel_env", "expected"),
    [
        ("redact", None, "redact"),
        ("HASH", None, "hash"),
        (" full ", None, "full"),
        (None, "NO_CONTENT", "redact"),
        (None, "false", "redact"),
        (None, "False", "redact"),
        (None, "SPAN_ONLY", "full"),
        (None, "SPAN_AND_EVENT", "full"),
        (None, "true", "full"),
        (None, "EVENT_ONLY", "redact"),  # ragtrace emits no content events: nothing on spans
        ("hash", "SPAN_ONLY", "hash"),  # ragtrace's own variable comes first
        (None, None, "full"),
    ],
)
def test_environment_sets_the_mode(monkeypatch, ragtrace_env, otel_env, expected):
    for variable, value in (("RAGTRACE_CAPTURE_CONTENT", ragtrace_env), ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", otel_env)):
        if value is None:
            monkeypatch.delenv(variable, raising=False)
        else:
            monkeypatch.setenv(variable, value)
    config.reset()  # the state at import time
    assert config.current().content.mode == expected
    ragtrace.configure()  # configure() without the argument reads the environment too
    assert config.current().content.mode == expected
    assert ragtrace.rag_pipeline("p").config.content.mode == expected


@pytest.mark.parametrize("env", [("RAGTRACE_CAPTURE_CONTENT", "redact"), ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "NO_CONTENT")])
def test_explicit_argument_wins_over_environment(spans, monkeypatch, env):
    monkeypatch.setenv(*env)
    config.reset()
    assert config.current().content.mode == "redact"
    ragtrace.configure(tracer_provider=spans.provider, capture_content="full")
    assert config.current().content.mode == "full"
    ragtrace.configure(tracer_provider=spans.provider)
    assert config.current().content.mode == "redact"
    secret = marker("q")
    with ragtrace.rag_pipeline("p", query=secret, capture_content="full"):
        pass
    assert spans.one("pipeline").attributes[names.OI_INPUT_VALUE] == secret


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        *[(alias, "redact") for alias in ("off", "OFF", "none", "redacted", "no", "false", "0", "no_content", "event_only")],
        *[(alias, "full") for alias in ("on", "true", "1", "yes", "span_only", "span_and_event")],
        ("hashed", "hash"),
    ],
)
@pytest.mark.parametrize("variable", ["RAGTRACE_CAPTURE_CONTENT", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"])
def test_every_documented_alias_works_in_either_variable(monkeypatch, caplog, variable, value, expected):
    monkeypatch.delenv("RAGTRACE_CAPTURE_CONTENT", raising=False)
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    monkeypatch.setenv(variable, value)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        config.reset()
    assert config.current().content.mode == expected
    assert not [r for r in caplog.records if r.name == "ragtrace"]


def test_documented_aliases_are_the_ones_accepted():
    page = (ROOT / "docs" / "redaction.md").read_text()
    for alias in redaction.ENVIRONMENT_ALIASES:
        assert f"`{alias}`" in page, alias


@pytest.mark.parametrize(
    ("ragtrace_env", "otel_env", "variable"),
    [
        ("everything-please", None, "RAGTRACE_CAPTURE_CONTENT"),
        ("everything-please", "SPAN_ONLY", "RAGTRACE_CAPTURE_CONTENT"),  # never falls through to full
        (None, "everything-please", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"),
    ],
)
def test_unknown_environment_value_fails_closed_with_a_warning(monkeypatch, caplog, spans, ragtrace_env, otel_env, variable):
    """A value ragtrace doesn't know means "no content", with a warning naming the variable."""
    for name, value in (("RAGTRACE_CAPTURE_CONTENT", ragtrace_env), ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", otel_env)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        config.reset()
        ragtrace.configure(tracer_provider=spans.provider)
    assert config.current().content.mode == "redact"
    warnings = [r.getMessage() for r in caplog.records if r.name == "ragtrace"]
    assert warnings and all(variable in w and "redact" in w for w in warnings)
    secret = marker("q")
    with ragtrace.rag_pipeline("p", query=secret):
        pass
    assert leaked({"q": secret}, [exported_text(s) for s in spans.all()]) == {}


@pytest.mark.parametrize(("value", "error"), [("none", ValueError), ("", ValueError), ("redacted", ValueError), (True, TypeError), (0, TypeError), (["redact"], TypeError)])
def test_bad_capture_content_raises_at_the_call_site(value, error):
    with pytest.raises(error):
        ragtrace.configure(capture_content=value)
    assert config.current() == config.Config()
    with pytest.raises(error):
        ragtrace.rag_pipeline("p", capture_content=value)  # the call, not the `with`
    with pytest.raises(error):

        @ragtrace.rag_pipeline("p", capture_content=value)
        def pipeline() -> None:  # pragma: no cover - never defined
            pass


def test_mode_strings_are_normalised(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content=" Redact ")
    assert config.current().content.mode == "redact"
    assert ragtrace.rag_pipeline("p", capture_content="HASH").config.content.mode == "hash"


# --- the custom redactor ---------------------------------------------------------------------
EMAIL = re.compile(r"[\w.+-]+@[\w-]+\.[\w.]+")


def scrub(text: str) -> str:
    return EMAIL.sub("[email]", text)


@pytest.mark.parametrize("where", ["configure", "pipeline"])
def test_redactor_scrubs_every_content_value_in_full_mode(spans, sdk_inputs, where):
    emails = [f"user{uuid.uuid4().hex[:8]}@example.com" for _ in range(6)]
    if where == "configure":
        ragtrace.configure(tracer_provider=spans.provider, redactor=scrub)
        pipeline_kwargs: dict[str, Any] = {}
    else:
        ragtrace.configure(tracer_provider=spans.provider)
        pipeline_kwargs = {"redactor": scrub}
    error = Boom(f"no account for {emails[5]}")
    with pytest.raises(Boom):
        with ragtrace.rag_pipeline("support", query=f"reset password for {emails[0]}", **pipeline_kwargs):
            with ragtrace.retrieve(f"account {emails[0]}") as r:
                r.record([{"id": "a", "content": f"contact {emails[1]}"}, {"id": "b", "content": "no email here"}])
            with ragtrace.rerank(query=emails[0]) as rr:
                rr.record(r.chunks)
            with ragtrace.assemble() as ctx:
                for c in rr.chunks:
                    ctx.add(c)
                prompt = ctx.render([{"role": "system", "content": f"escalate to {emails[2]}"}, {"role": "user", "content": "{context}"}])
            with ragtrace.generate(prompt=prompt) as g:
                g.record(f"Write to {emails[3]} [1] [{emails[4]}]")
            raise error
    assert str(error).endswith(emails[5])  # the application's exception is not rewritten
    texts = [exported_text(s) for s in spans.all()]
    assert not [e for e in emails if any(e in t for t in texts)]
    assert not [e for e in emails if any(e in t for t in sdk_inputs)]
    joined = "\n".join(texts)
    assert "reset password for [email]" in joined
    assert "contact [email]" in joined
    assert "no email here" in joined  # the rest of the content is still recorded
    event = next(e for e in spans.one("pipeline").events if e.name == "exception")
    assert event.attributes["exception.message"] == "no account for [email]"
    assert "exception.stacktrace" not in event.attributes or "[email]" in event.attributes["exception.stacktrace"]
    assert spans.one("pipeline").status.description == "no account for [email]"


def test_redactor_that_raises_fails_closed_with_one_warning(spans, sdk_inputs, caplog):
    calls = []

    def broken(text: str) -> str:
        calls.append(text)
        raise RuntimeError("redactor bug")

    secret = marker("q")
    ragtrace.configure(tracer_provider=spans.provider, redactor=broken)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        for _ in range(3):
            with ragtrace.rag_pipeline("p", query=secret) as run:
                with ragtrace.retrieve(secret) as r:
                    r.record([{"id": "a", "content": secret}, {"id": "b", "content": secret + "b"}])
                with ragtrace.assemble() as ctx:
                    for c in r.chunks:
                        ctx.add(c)
                with ragtrace.generate(prompt=ctx.prompt) as g:
                    g.record(f"{secret} [1]")
    assert calls  # it was asked
    assert leaked({"q": secret}, [exported_text(s) for s in spans.all()]) == {}
    assert leaked({"q": secret}, sdk_inputs) == {}
    warnings = [r for r in caplog.records if r.name == "ragtrace"]
    assert len(warnings) == 1
    assert "redactor" in warnings[0].getMessage()
    # only the content was dropped: the structure and the figures are intact
    assert run.metrics["cited"] == 1 and run.metrics["retrieved"] == 2
    assert list(spans.by_stage("retrieve")[0].attributes[names.RAG_RETRIEVAL_CHUNK_IDS]) == ["a", "b"]


def test_redactor_returning_a_non_string_drops_the_value(spans):
    secret = marker("q")
    ragtrace.configure(tracer_provider=spans.provider, redactor=lambda text: None)  # type: ignore[arg-type, return-value]
    with ragtrace.rag_pipeline("p", query=secret):
        with ragtrace.retrieve(secret) as r:
            r.record([secret])
    assert leaked({"q": secret}, [exported_text(s) for s in spans.all()]) == {}
    assert len(spans.all()) == 2


def test_redactor_is_not_used_outside_full_mode(spans):
    def never(text: str) -> str:
        raise AssertionError("the redactor must not see content that is not exported")

    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact", redactor=never)
    with ragtrace.rag_pipeline("p", query="q"):
        with ragtrace.retrieve("q") as r:
            r.record(["text"])
    assert len(spans.all()) == 2


# --- content that hides in non-content attributes ------------------------------------------------
@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_invalid_citation_labels_are_not_exported_without_content(spans, mode):
    """An invalid label is a piece of the completion (``[123-45-6789]``), so it is content."""
    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
    with ragtrace.rag_pipeline("p") as run:
        with ragtrace.retrieve() as r:
            r.record([{"id": "a", "content": "alpha"}])
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks[0])
        with ragtrace.generate() as g:
            g.record("alpha [1] [123-45-6789] [acct-4111111111111111]")
    generate = spans.one("generate").attributes
    assert list(generate[names.RAG_CITATION_IDS]) == ["a"]
    assert generate[names.RAG_CITATION_INVALID_COUNT] == 2  # still counted
    assert run.metrics["invalid_citations"] == 2
    text = "\n".join(exported_text(s) for s in spans.all())
    assert "123-45-6789" not in text and "4111111111111111" not in text


@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_located_labels_taken_from_the_prompt_are_content(spans, mode):
    """A prompt the user built may label chunks with their titles; those are prompt text."""
    title = marker("title")
    docs = [{"id": "a", "content": "alpha beta gamma"}, {"id": "b", "content": "delta epsilon zeta"}]

    @ragtrace.assembler
    def build(question: str, documents: list[dict]) -> str:
        return f"[{title}] {documents[0]['content']}\n[2] {documents[1]['content']}\n\nQ: {question}"

    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
    with ragtrace.rag_pipeline("p") as run:
        with ragtrace.retrieve() as r:
            r.record(docs)
        prompt = build("why?", docs)
        with ragtrace.generate(prompt=prompt) as g:
            g.record(f"gamma [{title}] zeta [2]")
    assemble = spans.one("assemble").attributes
    assert assemble[names.RAG_CONTEXT_INCLUSION_METHOD] == "located"
    assert list(assemble[names.RAG_CONTEXT_CHUNK_IDS]) == ["a", "b"]
    assert list(assemble[names.RAG_CONTEXT_LABELS])[1] == "2"  # a positional label is not content
    assert run.metrics["cited"] == 2  # the labels were used in-process before being dropped
    assert leaked({"title": title}, [exported_text(s) for s in spans.all()]) == {}


def test_located_labels_are_kept_in_full_mode(spans):
    docs = [{"id": "a", "content": "alpha beta gamma"}]

    @ragtrace.assembler
    def build(documents: list[dict]) -> str:
        return f"[Guide] {documents[0]['content']}"

    ragtrace.configure(tracer_provider=spans.provider)
    with ragtrace.rag_pipeline("p"):
        with ragtrace.retrieve() as r:
            r.record(docs)
        build(docs)
    assert list(spans.one("assemble").attributes[names.RAG_CONTEXT_LABELS]) == ["Guide"]


# --- the documentation -------------------------------------------------------------------------
# Keys whose ATTRIBUTES row says "not content" but which can carry user text, so the policy gates
# them: invalid citation labels are pieces of the answer; a located label is prompt text.
POLICY_GATED = {
    names.RAG_CITATION_INVALID_LABELS: ("yes", "no", "no"),
    names.RAG_CONTEXT_LABELS: ("yes", "positions and ids", "positions and ids"),
}


def mode_marks(info: names.AttributeInfo) -> tuple[str, str, str]:
    if info.key in POLICY_GATED:
        return POLICY_GATED[info.key]
    if info.key in HASH_ONLY:
        return ("no", "no", "yes")
    if not info.content:
        return ("yes", "yes", "yes")
    members = re.search(r"\{([\w,]+)\}$", info.key)
    if members and set(members.group(1).split(",")) - {"content"}:
        return ("yes", "no content", "no content")
    return ("yes", "no", "no")


def test_redaction_page_lists_every_attribute_with_its_modes():
    page = (ROOT / "docs" / "redaction.md").read_text()
    table = page.split("| attribute | full | redact | hash |", 1)[1].split("\n\n", 1)[0]
    rows = {m.group(1): tuple(c.strip() for c in m.group(2).split("|")) for m in re.finditer(r"^\| `([^`]+)` \|(.*?)\|\s*$", table, re.M)}
    # the page lists the attributes some mode leaves out; every other one is recorded in all modes
    expected = {info.key: mode_marks(info) for info in names.ATTRIBUTES if mode_marks(info) != ("yes", "yes", "yes")}
    assert rows == expected
    assert "every other attribute" in page.lower()


def test_a_redactor_sees_each_prompt_message_once_and_every_attribute_shows_its_result(spans):
    """The prompt's texts go through a custom redactor once, for gen_ai.input.messages (from which
    Phoenix derives its per-message keys); a message without a role is a user's. The answer's
    shows in gen_ai.output.messages and output.value."""
    seen: list[str] = []

    def upper(text: str) -> str:
        seen.append(text)
        return text.upper()

    ragtrace.configure(tracer_provider=spans.provider, redactor=upper)
    prompt = [{"role": "system", "content": "be brief"}, {"content": "what is bm25?"}]
    with ragtrace.generate(model="m", prompt=prompt) as g:
        g.record("lexical ranking")
    attrs = spans.one("generate").attributes
    assert sorted(seen) == ["be brief", "lexical ranking", "what is bm25?"]
    assert [(m["role"], m["parts"][0]["content"]) for m in json.loads(attrs[names.GEN_AI_INPUT_MESSAGES])] == [("system", "BE BRIEF"), ("user", "WHAT IS BM25?")]
    assert attrs[names.OI_OUTPUT_VALUE] == "LEXICAL RANKING"
    assert json.loads(attrs[names.GEN_AI_OUTPUT_MESSAGES])[0]["parts"][0]["content"] == "LEXICAL RANKING"
    # written once: no second copy of the prompt or the answer
    assert names.OI_INPUT_VALUE not in attrs and not [k for k in attrs if k.startswith(("llm.input_messages.", "llm.output_messages."))]


@pytest.mark.parametrize("mode", ["redact", "hash"])
def test_redacted_slots_phoenix_shows_carry_the_placeholder(spans, mode):
    """Message bars and document cards say the content was withheld, rather than showing empty."""
    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
    docs = [{"id": "d1", "score": 0.9, "content": "SECRET chunk"}]
    with ragtrace.rag_pipeline("p", query="SECRET q"):
        with ragtrace.retrieve("SECRET q") as r:
            r.record(docs)
        with ragtrace.rerank(model="m") as rr:  # d2 was never retrieved
            rr.record([*docs, {"id": "d2", "score": 0.5, "content": "SECRET other"}])
        with ragtrace.generate(model="m", prompt=[{"role": "system", "content": "SECRET sys"}, {"role": "user", "content": "SECRET q"}]) as g:
            g.record("SECRET answer [1]")
    retrieve, rerank, generate = (spans.one(s).attributes for s in ("retrieve", "rerank", "generate"))
    assert retrieve["retrieval.documents.0.document.content"] == names.REDACTED
    # the retrieve span already shows d1's placeholder; the reranker's own chunk carries one
    assert "reranker.output_documents.0.document.content" not in rerank
    assert rerank["reranker.output_documents.1.document.content"] == names.REDACTED
    assert generate["llm.input_messages.0.message.content"] == generate["llm.input_messages.1.message.content"] == names.REDACTED
    assert generate["llm.output_messages.0.message.content"] == names.REDACTED
    assert all("SECRET" not in exported_text(s) for s in spans.all())


def test_full_mode_has_no_placeholder(spans):
    ragtrace.configure(tracer_provider=spans.provider)
    with ragtrace.generate(model="m", prompt="hello") as g:
        g.record("hi")
    assert names.REDACTED not in exported_text(spans.one("generate"))


# --- content-derived values are keyed (threat model in docs/redaction.md) ---------------------------
def unkeyed_digests(text: str) -> set[str]:
    """What an attacker with a list of guesses computes: common unkeyed hashes of the text as given
    and normalised, whole and cut to the lengths ragtrace exports."""
    found = set()
    for variant in {text, " ".join(text.lower().split())}:
        data = variant.encode("utf-8")
        for digest in (
            hashlib.blake2b(data, digest_size=8).hexdigest(),
            hashlib.blake2b(data).hexdigest(),
            hashlib.sha256(data).hexdigest(),
            hashlib.sha1(data).hexdigest(),
            hashlib.md5(data).hexdigest(),
        ):
            found |= {digest, digest[:16]}
    return found


class LangChainDocument:
    def __init__(self, page_content: str) -> None:
        self.page_content, self.metadata, self.id = page_content, {}, None


@pytest.mark.parametrize("mode", ["redact", "hash", "full"])
def test_no_unkeyed_content_derived_value_is_exported(spans, mode):
    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
    query = "my PIN is 4821"
    contents = ["4821", "short chunk", "tuple chunk"]
    with ragtrace.rag_pipeline("pin", query=query):
        with ragtrace.retrieve(query) as r:
            r.record([contents[0], LangChainDocument(contents[1]), (contents[2], 0.5)])
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks:
                ctx.add(chunk)
        with ragtrace.generate(model="m", prompt=ctx.prompt) as g:
            g.record("It is [1].")
    exported = "\n".join(exported_text(s) for s in spans.all())
    guesses = {text: unkeyed_digests(text) for text in (query, *contents)}
    assert {text for text, digests in guesses.items() if any(d in exported for d in digests)} == set()
    pipeline = spans.one("pipeline").attributes
    assert pipeline[names.RAG_QUERY_HASH] == keyed_digest(" ".join(query.lower().split()), b"ragtrace-query")
    assert list(spans.one("retrieve").attributes[names.RAG_RETRIEVAL_CHUNK_IDS]) == [keyed_digest(c) for c in contents]


def test_a_dictionary_attack_on_the_query_hash_finds_nothing(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    with ragtrace.rag_pipeline("pin", query="my PIN is 4821"):
        pass
    exported = spans.one("pipeline").attributes[names.RAG_QUERY_HASH]
    candidates = (f"my pin is {n:04d}" for n in range(10_000))
    assert not any(
        hashlib.sha256(c.encode()).hexdigest()[:16] == exported or hashlib.blake2b(c.encode(), digest_size=8).hexdigest() == exported
        for c in candidates
    )


def _ids_in_a_fresh_process(tmp_path, env: dict[str, str], code: str = "") -> tuple[list[str], str]:
    script = tmp_path / "ids.py"
    script.write_text(
        "import json, ragtrace\n"
        "from opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter\n"
        "exporter = InMemorySpanExporter(); provider = TracerProvider(); provider.add_span_processor(SimpleSpanProcessor(exporter))\n"
        f"ragtrace.configure(tracer_provider=provider, capture_content='redact'{code})\n"
        "with ragtrace.rag_pipeline('p', query='Where is Paris?'):\n"
        "    with ragtrace.retrieve() as r:\n"
        "        r.record(['Paris is in France.'])\n"
        "found = {s.attributes['rag.stage']: dict(s.attributes) for s in exporter.get_finished_spans()}\n"
        "print(json.dumps([found['pipeline']['rag.query.hash'], *found['retrieve']['rag.retrieval.chunk_ids']]))\n"
    )
    environment = {k: v for k, v in os.environ.items() if k != "RAGTRACE_HASH_KEY"} | env
    environment["PYTHONPATH"] = os.path.dirname(os.path.dirname(ragtrace.__file__))  # the ragtrace under test
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environment, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stderr


def test_a_shared_key_keeps_ids_stable_across_processes(tmp_path):
    first, _ = _ids_in_a_fresh_process(tmp_path, {"RAGTRACE_HASH_KEY": "shared secret"})
    second, _ = _ids_in_a_fresh_process(tmp_path, {}, ", hash_key='shared secret'")
    other, _ = _ids_in_a_fresh_process(tmp_path, {"RAGTRACE_HASH_KEY": "another secret"})
    assert first == second
    assert not set(first) & set(other)


def test_without_a_key_each_process_gets_its_own_random_key_and_one_warning(tmp_path):
    first, log = _ids_in_a_fresh_process(tmp_path, {})
    second, _ = _ids_in_a_fresh_process(tmp_path, {})
    assert not set(first) & set(second)
    (line,) = log.splitlines()  # redact mode with an id-less chunk: one warning, one line, with the fix
    assert line.startswith("ragtrace: no hash key is set:") and "differ" in line and "set RAGTRACE_HASH_KEY" in line


def test_without_a_key_the_random_key_is_kept_for_the_process(spans, no_hash_key):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    first = chunks.content_hash("text")
    ragtrace.configure(tracer_provider=spans.provider)  # reconfiguring keeps the process's key
    assert chunks.content_hash("text") == first != keyed_digest("text")


@pytest.mark.parametrize(("key", "error"), [(123, TypeError), ("", ValueError), (b"", ValueError), (["k"], TypeError)])
def test_a_bad_hash_key_raises_at_the_call_site(key, error):
    with pytest.raises(error):
        ragtrace.configure(hash_key=key)
    assert config.current() == config.Config()
