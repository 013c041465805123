"""The ragtrace-context record: sealing, every reason a record is refused, and both API ends in one
process (the two-process runs are in test_cross_process.py)."""

from __future__ import annotations

import json
import logging
import zlib

import pytest
from opentelemetry import propagate, trace

import ragtrace
from ragtrace._internal.boundaries import carrier
from ragtrace._internal import names
from ragtrace._internal.core import keyed
from ragtrace._internal.boundaries.carrier import Unusable, seal, seal_too_large, unseal
from ragtrace._internal.core.chunks import Chunk
from ragtrace._internal.setup.redaction import ContentPolicy

KEY = b"the shared secret"
TRACE = "0af7651916cd43dd8448eb211c80319c"
DOCS = [{"id": f"d{i}", "content": f"Secret text number {i}.", "score": 0.9 - i / 10} for i in range(1, 5)]


def a_record(labels=None) -> carrier.Carried:
    retrieval = [Chunk("d1", 1, 0.91234567, content_hash="h1"), Chunk("d2", 2, None, content_hash="h1"), Chunk("d3", 3, 0.5)]
    return carrier.Carried(TRACE, labels or {names.GEN_AI_WORKFLOW_NAME: "qa", names.RAG_PIPELINE_VERSION: 3}, "redact", [retrieval], 2, None)


def test_a_sealed_record_comes_back_as_it_was_sent() -> None:
    token = seal(a_record(), KEY, ContentPolicy("redact"), expires=2000)
    back = unseal(token, KEY, TRACE, now=1000)
    assert back.labels == {names.GEN_AI_WORKFLOW_NAME: "qa", names.RAG_PIPELINE_VERSION: 3}
    assert back.mode == "redact" and back.unreadable == 2 and back.context is None
    chunks = back.retrievals[0]
    assert [(c.id, c.rank, c.score) for c in chunks] == [("d1", 1, 0.912346), ("d2", 2, None), ("d3", 3, 0.5)]
    # one duplicate class for the two chunks of one text; the unique one carries none
    assert chunks[0].content_hash == chunks[1].content_hash == "#0" and chunks[2].content_hash is None


@pytest.mark.parametrize(
    ("change", "status"),
    [
        (lambda t: t[:-2] + ("AA" if t[-2:] != "AA" else "BB"), "remote_context_invalid"),  # the mac
        (lambda t: t.replace("v1.", "v2.", 1), "remote_context_invalid"),  # a version this side doesn't read
        (lambda t: "not a token", "remote_context_invalid"),
        (lambda t: t + "A" * carrier.MAX_TOKEN_CHARS, "remote_context_too_large"),
    ],
)
def test_a_changed_token_is_refused(change, status) -> None:
    token = seal(a_record(), KEY, ContentPolicy("redact"), expires=2000)
    with pytest.raises(Unusable) as refused:
        unseal(change(token), KEY, TRACE, now=1000)
    assert refused.value.args == (status,)


def test_another_key_another_trace_or_a_late_arrival_is_refused() -> None:
    token = seal(a_record(), KEY, ContentPolicy("redact"), expires=2000)
    for key, trace_id, now in ((b"another key", TRACE, 1000), (KEY, "1" * 32, 1000), (KEY, None, 1000), (KEY, TRACE, 2001)):
        with pytest.raises(Unusable) as refused:
            unseal(token, key, trace_id, now=now)
        assert refused.value.args == ("remote_context_invalid",)
    assert unseal(token, KEY, TRACE, now=2000).trace_id == TRACE  # valid up to its expiry


def test_the_stand_in_for_a_record_too_large_says_so_only_on_its_own_trace() -> None:
    token = seal_too_large(TRACE, 9000, KEY, expires=2000)
    with pytest.raises(Unusable) as refused:
        unseal(token, KEY, TRACE, now=1000)
    assert refused.value.args == ("remote_context_too_large",)
    with pytest.raises(Unusable) as refused:
        unseal(token, KEY, "2" * 32, now=1000)
    assert refused.value.args == ("remote_context_invalid",)


def test_a_signed_record_of_the_wrong_shape_or_that_inflates_too_far_is_refused() -> None:
    for document in ({"t": TRACE, "e": 2000}, {"t": TRACE, "e": 2000, "p": [1, None, None], "m": "full", "r": [], "u": 0, "c": None}):
        with pytest.raises(Unusable):
            unseal(carrier._signed(document, KEY), KEY, TRACE, now=1000)
    huge = {"t": TRACE, "e": 2000, "pad": " " * (2 << 20)}
    body = f"v1.{carrier._b64(zlib.compress(json.dumps(huge).encode(), 9))}"
    with pytest.raises(Unusable) as refused:
        unseal(f"{body}.{carrier._b64(carrier._mac(KEY, body))}", KEY, TRACE, now=1000)
    assert refused.value.args == ("remote_context_invalid",)


def handed(headers: dict, *, labeller="index", mode: str | None = None):
    with ragtrace.rag_pipeline("qa", version="v1", capture_content=mode) as run:
        with ragtrace.retrieve("q") as found:
            found.record(DOCS)
        with ragtrace.assemble(labeller=labeller) as context:
            for doc in DOCS[:3]:
                context.add(doc)
            context.render(question="q")
        assert ragtrace.inject(headers)
    return run


def test_title_labels_travel_keyed_in_redact_mode_and_still_resolve(spans) -> None:
    titles = {doc["content"]: f"Title {doc['id']}" for doc in DOCS}
    headers: dict = {}
    handed(headers, labeller=lambda chunk, position: titles[chunk.content], mode="redact")
    record = zlib.decompress(carrier._unb64(headers[names.CARRIER_KEY].split(".")[1])).decode()
    assert "Title" not in record and "Secret" not in record
    with ragtrace.continue_pipeline(headers) as run:
        with ragtrace.generate("m") as generation:
            generation.record("It says so [title  D1], and [Title d3] [Title d9].")
    # d1 and d3 cited (case and spaces folded, as in one process); [Title d9] names nothing, so it is
    # not a citation (a plain phrase with a space), as in one process
    assert run.metrics["cited"] == 2 and run.metrics["invalid_citations"] == 0 and run.metrics["recall_proxy"] == 2 / 4
    assert generation.citations is not None and generation.citations.cited_ids == ("d1", "d3")


def test_the_receiving_side_keeps_the_stricter_content_mode(spans) -> None:
    headers: dict = {}
    handed(headers, mode="redact")
    with ragtrace.continue_pipeline(headers) as run:
        with ragtrace.generate("m", prompt="the prompt text") as generation:
            generation.record("An answer with a secret [1].")
    segment = spans.one(names.STAGE_SEGMENT)
    assert segment.attributes[names.RAG_CONTENT_MODE] == "redact" and run.metrics["cited"] == 1
    exported = json.dumps([dict(s.attributes) for s in spans.all()])
    assert "secret" not in exported and "the prompt text" not in exported


def test_the_segment_takes_the_stricter_of_both_modes_and_a_missing_record_redacts_unless_told(spans) -> None:
    headers: dict = {}
    handed(headers, mode="hash")
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")  # B stricter than A
    with ragtrace.continue_pipeline(headers):
        pass
    ragtrace.configure(tracer_provider=spans.provider, capture_content="full")
    with ragtrace.continue_pipeline({}, name="qa"):  # no record: redacted by default
        pass
    with ragtrace.continue_pipeline({}, name="qa", if_missing="own"):  # a sender without ragtrace: B's own mode
        pass
    assert [s.attributes[names.RAG_CONTENT_MODE] for s in spans.by_stage(names.STAGE_SEGMENT)] == ["redact", "redact", "full"]
    with pytest.raises(ValueError, match="if_missing"):
        ragtrace.continue_pipeline({}, if_missing="full")  # type: ignore[arg-type]


def test_inject_writes_the_current_trace_context_over_a_stale_one(spans) -> None:
    stale = "00-" + TRACE + "-00f067aa0ba902b7-01"
    given = {"Traceparent": stale, "tracestate": "vendor=stale", "baggage": "tenant=acme"}  # a reused dict
    run = handed(given)
    assert given["traceparent"].split("-")[1:3] == [run.trace_id, run.span_id]
    assert "Traceparent" not in given and "tracestate" not in given  # the stale trace's state went with it
    assert given["baggage"] == "tenant=acme"  # the app's baggage is the app's
    added: dict = {}
    run = handed(added)
    assert added["traceparent"].split("-")[1:3] == [run.trace_id, run.span_id]


def test_a_record_of_another_trace_never_joins_either_trace(spans) -> None:
    first: dict = {}
    handed(first)
    second: dict = {}
    handed(second)
    spans.clear()
    # the second hand-off's record under the first's trace context: a replay, or a stale traceparent
    with ragtrace.continue_pipeline({"traceparent": first["traceparent"], names.CARRIER_KEY: second[names.CARRIER_KEY]}) as run:
        with ragtrace.generate("m") as generation:
            generation.record("An answer [1].")
    segment = spans.one(names.STAGE_SEGMENT)
    assert run.status == "remote_context_invalid" and segment.parent is None
    assert run.trace_id not in (first["traceparent"].split("-")[1], second["traceparent"].split("-")[1])


def test_the_apps_middleware_span_is_the_parent_when_it_is_already_current(spans) -> None:
    headers: dict = {}
    handed(headers)
    server_context = propagate.extract(headers)
    with spans.provider.get_tracer("app").start_as_current_span("POST /answer", context=server_context, kind=trace.SpanKind.SERVER) as server:
        with ragtrace.continue_pipeline({names.CARRIER_KEY: headers[names.CARRIER_KEY]}) as run:  # no traceparent in it
            pass
    segment = spans.one(names.STAGE_SEGMENT)
    assert segment.parent.span_id == server.get_span_context().span_id and run.status == "no_answer"


def test_without_a_shared_key_the_request_goes_on_and_both_ends_say_missing(spans, monkeypatch, caplog) -> None:
    headers: dict = {}
    handed(headers)  # a record from a sender that has the key
    monkeypatch.delenv(keyed.ENV_KEY)
    keyed.set_key(None)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        for _ in range(3):  # every request: never a RuntimeError, one log line in all
            sent: dict = {}
            with ragtrace.rag_pipeline("qa") as origin:
                with ragtrace.retrieve("q") as found:
                    found.record(DOCS)
                assert ragtrace.inject(sent) is False
            assert names.CARRIER_KEY not in sent and sent["traceparent"].split("-")[1] == origin.trace_id
            assert origin.status == "remote_context_missing" and origin.metrics == {}
            with ragtrace.continue_pipeline(headers) as run:
                with ragtrace.generate("m") as generation:
                    generation.record("An answer [1].")
            assert run.status == "remote_context_missing" and run.metrics == {}
    said = [r.getMessage() for r in caplog.records if "set-up error" in r.getMessage()]
    assert len(said) == 1 and "RAGTRACE_HASH_KEY" in said[0]
    assert [s.attributes[names.RAG_CONTENT_MODE] for s in spans.by_stage(names.STAGE_SEGMENT)] == ["redact"] * 3  # fail closed


def test_misuse_raises_and_an_inject_outside_a_pipeline_changes_nothing(spans) -> None:
    with pytest.raises(TypeError):
        ragtrace.inject(("not", "a", "mapping"))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        ragtrace.inject({}, ttl=0)
    with pytest.raises(TypeError):
        ragtrace.continue_pipeline({})(lambda: None)
    headers: dict = {}
    assert ragtrace.inject(headers) is False and headers == {}


def test_a_missing_record_is_logged_once_and_not_measured(spans, caplog) -> None:
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        for _ in range(2):
            with ragtrace.continue_pipeline({}, name="qa") as run:
                with ragtrace.generate("m") as generation:
                    generation.record("An answer [1].")
    assert [r.getMessage() for r in caplog.records if "remote_context_missing" in r.getMessage()].__len__() == 1
    assert run.status == "remote_context_missing" and run.metrics == {}
    assert generation.citation_status == "remote_context_missing"
    assert spans.by_stage("generate")[0].attributes[names.RAG_METRICS_STATUS] == "remote_context_missing"


def test_the_delegated_root_records_no_figure_metric(spans, metric_reader) -> None:
    headers: dict = {}
    handed(headers)
    with ragtrace.continue_pipeline(headers) as run:
        with ragtrace.generate("m") as generation:
            generation.record("An answer [1].")
    assert run.metrics["recall_proxy"] == 1 / 4
    points = [
        (dict(p.attributes), p.count)
        for resource in metric_reader.get_metrics_data().resource_metrics
        for scope in resource.scope_metrics
        for metric in scope.metrics
        if metric.name == names.METRIC_RECALL_PROXY_HISTOGRAM
        for p in metric.data.data_points
    ]
    assert [(a[names.RAG_STAGE], a[names.GEN_AI_WORKFLOW_NAME], a[names.RAG_PIPELINE_VERSION], n) for a, n in points] == [
        (names.STAGE_SEGMENT, "qa", "v1", 1)
    ]


def test_a_located_context_keeps_the_resolution_rule_without_its_prompt(spans) -> None:
    """The prompt shows [2] as a source label, but its text was reworded so the search can't find
    it: a citation of [2] is unresolved (the search missed it), not made up, on both sides."""
    prompt = f"Sources:\n[1] {DOCS[0]['content']}\n[2] A reworded second text.\n\nQuestion: q"
    answer = "It says so [1] and [2]."

    def assembled(headers: dict | None):
        with ragtrace.rag_pipeline("qa") as run:
            with ragtrace.retrieve("q") as found:
                found.record(DOCS[:2])
            with ragtrace.assemble() as context:
                context.observe(DOCS[:2], prompt)
            if headers is None:
                with ragtrace.generate("m") as generation:
                    generation.record(answer)
            else:
                assert ragtrace.inject(headers)
        return run

    one = assembled(None)
    headers: dict = {}
    assembled(headers)
    with ragtrace.continue_pipeline(headers) as run:
        with ragtrace.generate("m") as generation:
            generation.record(answer)
    assert one.status is not None and "citations_unresolved" in one.status
    assert (run.metrics, run.status) == (one.metrics, one.status)
    assert "reworded" not in zlib.decompress(carrier._unb64(headers[names.CARRIER_KEY].split(".")[1])).decode()


def test_inject_carries_the_assembly_of_its_own_thread_or_says_it_cant_tell(spans) -> None:
    import contextvars
    import threading

    def assemble(docs, out, together):
        with ragtrace.assemble() as context:
            for doc in docs:
                context.add(doc)
            context.render(question="q")
        if out is not None:
            assert ragtrace.inject(out)
        together.wait(10)  # both threads alive at once: two tasks of one pipeline

    mine: dict = {}
    unknown: dict = {}
    for headers, inject_in_thread in ((mine, True), (unknown, False)):
        with ragtrace.rag_pipeline("qa"):
            with ragtrace.retrieve("q") as found:
                found.record(DOCS)
            together = threading.Barrier(2)
            threads = [
                threading.Thread(target=contextvars.copy_context().run, args=(assemble, DOCS[: i + 1], headers if inject_in_thread and i == 0 else None, together))
                for i in range(2)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            if not inject_in_thread:
                assert ragtrace.inject(headers)
    with ragtrace.continue_pipeline(mine) as run:
        with ragtrace.generate("m") as generation:
            generation.record("Yes [1].")
    assert run.metrics["in_context"] == 1 and run.metrics["cited"] == 1  # the first thread's one chunk, not the later two
    with ragtrace.continue_pipeline(unknown) as run:
        with ragtrace.generate("m") as generation:
            generation.record("Yes [1].")
    assert run.status == "context_unknown" and run.metrics == {}
