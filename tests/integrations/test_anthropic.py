"""The Anthropic integration against the real ``anthropic`` SDK over a fake transport that answers
in the Messages API's exact schema (``anthropic_fake``): an app that passes ``search_result`` (or
``document``) blocks gets exact figures from ``ragtrace.instrument()`` alone.

Hand-worked truth for the main case: three search results A, B, C (in that block order); the
answer's citation objects name result 0 (twice) and result 1. So retrieved 3, in context 3
(provider), cited 2 (A, B) at positions [1, 2], recall 2/3, weighted recall (1 + 1/2) /
(1 + 1/2 + 1/3) = 9/11, context precision 3/3, utilisation 2/3, wasted tokens = C's 9
("Shipping is free for orders over 50 euros." is 8 words and a full stop), no invalid citation.
"""

from __future__ import annotations

import asyncio
import math

import anthropic
import pytest
from anthropic.lib.streaming import MessageStream, MessageStreamManager

import ragtrace
from ragtrace._internal.core import keyed

from .anthropic_fake import MODEL, FakeAnthropic, at_chars, at_result, document, message, search_result

QUESTION = "How long does a refund take?"
A = ("https://kb.example/refunds", "Refunds reach the original card within 5 business days.")
B = ("kb-credit", "Store credit is issued immediately instead of a refund.")
C = ("kb-shipping", "Shipping is free for orders over 50 euros.")
RESULTS = [search_result(*A), search_result(*B), search_result(*C)]
ANSWER = [
    ("Refunds take 5 business days", [at_result(0, A[0], A[1])]),
    (" and store credit is immediate.", [at_result(1, B[0], B[1]), at_result(0, A[0], A[1])]),
    (" Anything else?", []),
]
TEXT = "".join(text for text, _ in ANSWER)


@pytest.fixture
def instrumented(spans):
    assert ragtrace.instrument("anthropic") == ["anthropic"]
    yield spans
    ragtrace.uninstrument("anthropic")


def ask(content: list[dict]) -> dict:
    return {"model": MODEL, "max_tokens": 512, "messages": [{"role": "user", "content": [*content, {"type": "text", "text": QUESTION}]}]}


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def check_main_case(spans, *, stream: bool, message_index: int = 0) -> None:
    root = spans.one("pipeline")
    assert root.parent is None and root.name == "invoke_workflow anthropic"
    assert "rag.root.abandoned" not in root.attributes  # ended by its answer
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert retrieved.end_time <= assembled.start_time and assembled.end_time <= generated.start_time
    ids = [A[0], B[0], C[0]]
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ids
    assert retrieved.attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert assembled.attributes["rag.context.inclusion_method"] == "provider"
    assert list(assembled.attributes["rag.context.chunk_ids"]) == ids
    assert list(assembled.attributes["rag.context.positions"]) == [1, 2, 3]
    assert list(assembled.attributes["rag.context.message_indexes"]) == [message_index] * 3
    assert list(assembled.attributes["rag.context.chunk_tokens"])[2] == 9
    attributes = generated.attributes
    assert generated.name == f"chat {MODEL}"
    assert attributes["gen_ai.provider.name"] == "anthropic"
    assert attributes["rag.citation.format"] == "provider"
    assert attributes["rag.citation.granularity"] == "chunk"
    assert list(attributes["rag.citation.ids"]) == [A[0], B[0]]
    assert attributes["rag.citation.invalid_count"] == 0
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (120, 17)
    assert attributes.get("gen_ai.request.stream", False) is stream
    assert (attributes.get("gen_ai.response.time_to_first_chunk") is not None) is stream
    got = metrics(root)
    assert got["inclusion_method"] == "provider"
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])
    assert math.isclose(got["recall_proxy"], 2 / 3) and math.isclose(got["recall_proxy_weighted"], 9 / 11)
    assert got["context_precision"] == 1.0 and math.isclose(got["context_utilization"], 2 / 3)
    assert got["wasted_context_tokens"] == 9 and got["invalid_citations"] == 0
    assert "status" not in got


def test_a_plain_call_with_search_results_is_one_pipeline_with_exact_figures(instrumented):
    fake = FakeAnthropic(message(ANSWER))
    reply = fake.client().messages.create(**ask(RESULTS))
    assert type(reply) is anthropic.types.Message and reply.content[1].citations[0].search_result_index == 1
    check_main_case(instrumented, stream=False)
    assert fake.requests[0]["messages"][0]["content"][0] == RESULTS[0]  # the request went out as the app built it


def test_a_streamed_call_reads_text_and_citations_from_the_events_the_app_read(instrumented):
    fake = FakeAnthropic(message(ANSWER))
    stream = fake.client().messages.create(**ask(RESULTS), stream=True)
    assert isinstance(stream, anthropic.Stream)
    with stream:
        deltas = [e.delta for e in stream if e.type == "content_block_delta"]
    assert "".join(d.text for d in deltas if d.type == "text_delta") == TEXT
    check_main_case(instrumented, stream=True)


def test_messages_stream_keeps_the_sdk_helpers(instrumented):
    fake = FakeAnthropic(message(ANSWER))
    manager = fake.client().messages.stream(**ask(RESULTS))
    assert type(manager) is MessageStreamManager
    with manager as stream:
        assert type(stream) is MessageStream
        assert "".join(stream.text_stream) == TEXT
        final = stream.get_final_message()
    assert [c.search_result_index for c in final.content[1].citations] == [1, 0]
    check_main_case(instrumented, stream=True)


def test_async_create_and_async_stream(instrumented):
    fake = FakeAnthropic(message(ANSWER))

    async def app() -> str:
        client = fake.async_client()
        reply = await client.messages.create(**ask(RESULTS))
        async with client.messages.stream(**ask(RESULTS)) as stream:
            text = await stream.get_final_text()
        events = await client.messages.create(**ask(RESULTS), stream=True)
        assert isinstance(events, anthropic.AsyncStream)
        async with events:
            deltas = [e.delta.text async for e in events if e.type == "content_block_delta" and e.delta.type == "text_delta"]
        return reply.content[0].text + "|" + text + "|" + "".join(deltas)

    assert asyncio.run(app()) == ANSWER[0][0] + "|" + TEXT + "|" + TEXT
    roots = instrumented.by_stage("pipeline")
    assert len(roots) == 3 and len({r.context.trace_id for r in roots}) == 3  # one pipeline per call
    for root in roots:
        got = metrics(root)
        assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 3, 2) and math.isclose(got["recall_proxy"], 2 / 3)
    assert sorted(bool(g.attributes.get("gen_ai.request.stream")) for g in instrumented.by_stage("generate")) == [False, True, True]


def test_search_results_inside_a_tool_result(instrumented):
    fake = FakeAnthropic(message(ANSWER))
    messages = [
        {"role": "user", "content": QUESTION},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "search_kb", "input": {"query": QUESTION}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": RESULTS}]},
    ]
    fake.client().messages.create(model=MODEL, max_tokens=512, messages=messages)
    check_main_case(instrumented, stream=False, message_index=2)


def test_documents_and_search_results_are_indexed_apart(instrumented):
    """Search result 0 is A; document 0 is D. By hand: R = C = 2, both cited, recall 1, positions [1, 2];
    a citation of search result 5 names no block: one invalid (unknown) citation."""
    handbook = "Refunds over 500 euros need a manager's approval."
    answer = [("Refunds take 5 days", [at_result(0, *A)]), (" and large ones need approval.", [at_chars(0, handbook), at_result(5, "kb-x", "?")])]
    FakeAnthropic(message(answer)).client().messages.create(**ask([search_result(*A), document(handbook)]))
    generated, root = instrumented.one("generate"), instrumented.one("pipeline")
    handbook_id = keyed.content_digest(handbook)
    assert list(instrumented.one("assemble").attributes["rag.context.chunk_ids"]) == [A[0], handbook_id]
    assert list(generated.attributes["rag.citation.ids"]) == [A[0], handbook_id]
    assert generated.attributes["rag.citation.invalid_count"] == 1
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (2, 2, 2, [1, 2])
    assert got["recall_proxy"] == 1.0 and (got["invalid_citations"], got["unknown_citations"]) == (1, 1)


def test_inside_the_apps_pipeline_its_own_ids_stand_and_nothing_is_retrieved_twice(instrumented):
    """The app retrieved 4 chunks itself (recorded) and passes 3 as search results under other
    sources. By hand: R = 4, C = 3, cited 2 -> recall 2/4, precision 3/4, utilisation 2/3."""
    with ragtrace.rag_pipeline("support"):
        with ragtrace.retrieve(QUESTION) as r:
            r.record([{"id": f"kb-{n}", "content": text} for n, text in enumerate([A[1], B[1], C[1], "Gift cards never expire."], 1)])
        FakeAnthropic(message(ANSWER)).client().messages.create(**ask(RESULTS))
    assert len(instrumented.by_stage("retrieve")) == 1
    assert list(instrumented.one("assemble").attributes["rag.context.chunk_ids"]) == ["kb-1", "kb-2", "kb-3"]
    assert list(instrumented.one("generate").attributes["rag.citation.ids"]) == ["kb-1", "kb-2"]
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"]) == (4, 3, 2)
    assert got["recall_proxy"] == 0.5 and got["context_precision"] == 0.75 and math.isclose(got["context_utilization"], 2 / 3)


def test_a_pdf_document_makes_the_citation_figures_not_measurable(instrumented):
    """A PDF's text, so its tokens, are unknown to ragtrace: the figures that count them would be
    made up. The blocks are still placed and the citations still resolved."""
    pdf = {"type": "document", "source": {"type": "url", "url": "https://kb.example/policy.pdf"}, "citations": {"enabled": True}}
    answer = [("Refunds take 5 days.", [{"type": "page_location", "document_index": 0, "document_title": "Policy", "cited_text": "5 days", "start_page_number": 1, "end_page_number": 2}])]
    FakeAnthropic(message(answer)).client().messages.create(**ask([search_result(*A), pdf]))
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == ["https://kb.example/policy.pdf"]
    assert generated.attributes["rag.citation.status"] == "source_unreadable"
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"]) == (2, 2) and "source_unreadable" in got["status"]
    assert "recall_proxy" not in got and "wasted_context_tokens" not in got


def test_a_call_without_sources_is_a_plain_generate_span(instrumented):
    FakeAnthropic(message([("Hello.", [])])).client().messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "Hi"}])
    assert [s.attributes["rag.stage"] for s in instrumented.all()] == ["generate"]
    assert "rag.citation.granularity" not in instrumented.one("generate").attributes


def test_a_free_text_source_is_replaced_by_its_keyed_digest_and_clashing_sources_are_told_apart(instrumented):
    free = "Internal memo from the refunds team"
    results = [search_result(free, A[1]), search_result("kb-dup", B[1]), search_result("kb-dup", C[1])]
    FakeAnthropic(message(ANSWER)).client().messages.create(**ask(results))
    ids = list(instrumented.one("assemble").attributes["rag.context.chunk_ids"])
    assert ids == ["source#" + keyed.content_digest(free), "kb-dup#" + keyed.content_digest(B[1]), "kb-dup#" + keyed.content_digest(C[1])]


def test_redact_mode_exports_no_source_text_title_or_cited_text(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    ragtrace.instrument("anthropic")
    try:
        marker = "PLANTED-MARKER-7731"
        results = [search_result(f"{marker} memo", f"{marker} text one.", title=f"{marker} title"), search_result("kb-2", "Plain two.")]
        answer = [(f"{marker} answer", [at_result(0, f"{marker} memo", f"{marker} text one.", title=f"{marker} title")])]
        FakeAnthropic(message(answer)).client().messages.create(model=MODEL, max_tokens=64, system=f"{marker} system", messages=[{"role": "user", "content": [*results, {"type": "text", "text": f"{marker} question"}]}])
    finally:
        ragtrace.uninstrument("anthropic")
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported and "memo" not in exported
    assert list(spans.one("generate").attributes["rag.citation.ids"]) == ["source#" + keyed.content_digest(f"{marker} memo")]
    assert metrics(spans.one("pipeline"))["cited"] == 1


def test_uninstrument_restores_the_sdk(spans):
    from anthropic.resources.messages import messages as module

    originals = (module.Messages.create, module.Messages.stream, module.AsyncMessages.create, module.AsyncMessages.stream)
    ragtrace.instrument("anthropic")
    assert module.Messages.create is not originals[0]
    ragtrace.uninstrument("anthropic")
    assert (module.Messages.create, module.Messages.stream, module.AsyncMessages.create, module.AsyncMessages.stream) == originals
    FakeAnthropic(message(ANSWER)).client().messages.create(**ask(RESULTS))
    assert spans.all() == []


def test_a_stream_closed_early_records_what_the_app_read(instrumented):
    """The app stops after the first block's events (message_start, block start, citation, text,
    block stop): the answer is the first block's text and cites A only. By hand: cited 1,
    recall 1/3, cited positions [1]; the span ends at close."""
    stream = FakeAnthropic(message(ANSWER)).client().messages.create(**ask(RESULTS), stream=True)
    with stream:
        for _, event in zip(range(5), stream):
            pass
    assert event.type == "content_block_stop"
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == [A[0]]
    got = metrics(instrumented.one("pipeline"))
    assert (got["cited"], list(got["cited_positions"])) == (1, [1]) and math.isclose(got["recall_proxy"], 1 / 3)


@pytest.mark.parametrize("helper", [False, True])
def test_a_stream_cut_off_before_message_stop_is_not_scored_as_a_whole_answer(instrumented, helper):
    """The connection drops after the first block (5 events) and the SDK's iterator just ends: the
    app read everything there was, but no message_stop came. Scored as it stands that would be
    cited 1, recall 1/3 (the whole answer gives 2/3): the citation figures are not measurable
    (answer_incomplete); what the model was shown is still known (retrieved 3, in context 3)."""
    fake = FakeAnthropic(message(ANSWER), cut_after=5)
    if helper:
        with fake.client().messages.stream(**ask(RESULTS)) as stream:
            assert "".join(stream.text_stream) == ANSWER[0][0]
    else:
        assert [e.type for e in fake.client().messages.create(**ask(RESULTS), stream=True)][-1] == "content_block_stop"
    generated = instrumented.one("generate")
    assert generated.attributes["rag.citation.status"] == "answer_incomplete"
    got = metrics(instrumented.one("pipeline"))
    assert got["status"] == "answer_incomplete" and "recall_proxy" not in got and "cited" not in got
    assert (got["retrieved"], got["in_context"]) == (3, 3)


def test_an_api_error_passes_through_and_ends_the_pipeline(instrumented):
    import httpx2

    def refuse(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(529, json={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})

    client = anthropic.Anthropic(api_key="sk-ant-test", max_retries=0, http_client=httpx2.Client(transport=httpx2.MockTransport(refuse)))
    with pytest.raises(anthropic.APIStatusError) as raised:
        client.messages.create(**ask(RESULTS))
    assert raised.value.status_code == 529
    generated, root = instrumented.one("generate"), instrumented.one("pipeline")
    assert generated.status.status_code.name == "ERROR" and root.end_time is not None
    assert len(instrumented.by_stage("retrieve")) == 1  # the sources were given, whatever the model did


def test_the_hash_key_line_is_given_only_when_a_digest_id_is_exported(instrumented, no_hash_key, caplog):
    """Without a hash key, ids made of a keyed digest differ between processes: said once, in
    one line. Search results whose sources are the app's URLs and ids have none: nothing to say."""
    import logging

    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        FakeAnthropic(message(ANSWER)).client().messages.create(**ask(RESULTS))
        said = [r.getMessage() for r in caplog.records if "no hash key is set" in r.getMessage()]
        assert said == [] and list(instrumented.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == [A[0], B[0], C[0]]
        FakeAnthropic(message([("The handbook says so.", [at_chars(0, "Refunds")])])).client().messages.create(**ask([document("Refunds take 5 days.")]))
        said = [r.getMessage() for r in caplog.records if "no hash key is set" in r.getMessage()]
    assert len(said) == 1 and "RAGTRACE_HASH_KEY" in said[0]
