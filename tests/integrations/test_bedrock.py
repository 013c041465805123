"""The Bedrock integration against real boto3 clients answered offline (``bedrock_fake``: botocore's
``Stubber``, and a ``before-send`` answer for event streams). Each call is made first with
ragtrace off, on a client of its own, so a difference in what the app gets is ragtrace's.

Hand-worked truth for the main case: ``retrieve`` returns A, B, C (scores 0.9, 0.6, 0.3); the app
hands them to ``converse`` as search results 0, 1, 2; the answer's citations name results 0, 1
and 0 again. So retrieved 3, in context 3 (provider), cited 2 (A, B) at positions [1, 2],
recall 2/3, weighted recall (1 + 1/2) / (1 + 1/2 + 1/3) = 9/11, context precision 1,
utilisation 2/3, wasted tokens = C's 9 ("Shipping is free for orders over 50 euros." is 8 words
and a full stop). The answer is "Refunds take 5 days" (19 characters, cites A) + " and store
credit is immediate." (31, cites B and A) + " Anything else?": segments (0, 19) A, (19, 50) B and
(19, 50) A.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from botocore import handlers
from botocore.exceptions import ClientError, ParamValidationError
from botocore.stub import Stubber

import ragtrace
from ragtrace._internal.core.keyed import content_digest

from .bedrock_fake import KB, MODEL_ARN, MODEL_ID, answer_stream, citation, client, result

QUESTION = "How long does a refund take?"
A = ("s3://kb-bucket/refunds.txt", "Refunds reach the original card within 5 days.", 0.9)
B = ("s3://kb-bucket/credit.txt", "Store credit is issued immediately instead of a refund.", 0.6)
C = ("s3://kb-bucket/shipping.txt", "Shipping is free for orders over 50 euros.", 0.3)
RESULTS = [result(*A), result(*B), result(*C)]
PARTS = ["Refunds take 5 days", " and store credit is immediate.", " Anything else?"]
ANSWER = "".join(PARTS)
R_AND_G = {"type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {"knowledgeBaseId": KB, "modelArn": MODEL_ARN}}


def chunk_id(found: tuple[str, str, float]) -> str:
    """The documented id of a knowledge-base result: keyed digest of its location, '#', of its text."""
    return f"{content_digest(found[0])}#{content_digest(found[1])}"


def metrics(span: Any) -> dict[str, Any]:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


@pytest.fixture
def instrumented(spans):
    assert ragtrace.instrument("bedrock") == ["bedrock"]
    yield spans
    ragtrace.uninstrument("bedrock")


def off_then_on(spans, call):
    """``call()`` with ragtrace off (nothing exported), then on: both results, the app's view."""
    off = call()
    assert spans.all() == []
    assert ragtrace.instrument("bedrock") == ["bedrock"]
    try:
        on = call()
    finally:
        ragtrace.uninstrument("bedrock")
    return off, on


def search_blocks(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What a RAG app hands ``converse``: its retrieved results as search-result blocks."""
    return [
        {"searchResult": {"source": r["location"]["s3Location"]["uri"], "title": "Policy", "content": [{"text": r["content"]["text"]}], "citations": {"enabled": True}}}
        for r in results
    ]


def at_result(index: int) -> dict[str, Any]:
    return {"location": {"searchResultLocation": {"searchResultIndex": index, "start": 0, "end": 1}}, "source": "s", "title": "Policy", "sourceContent": [{"text": "cited"}]}


CONVERSE = {
    "output": {
        "message": {
            "role": "assistant",
            "content": [
                {"citationsContent": {"content": [{"text": PARTS[0]}], "citations": [at_result(0)]}},
                {"citationsContent": {"content": [{"text": PARTS[1]}], "citations": [at_result(1), at_result(0)]}},
                {"text": PARTS[2]},
            ],
        }
    },
    "stopReason": "end_turn",
    "usage": {"inputTokens": 120, "outputTokens": 17, "totalTokens": 137},
    "metrics": {"latencyMs": 40},
}
CONVERSE_EVENTS = [
    ("messageStart", {"role": "assistant"}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "Refunds take "}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "5 days"}}),
    ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": at_result(0)}}),
    ("contentBlockStop", {"contentBlockIndex": 0}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"text": PARTS[1]}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"citation": at_result(1)}}),
    ("contentBlockDelta", {"contentBlockIndex": 1, "delta": {"citation": at_result(0)}}),
    ("contentBlockStop", {"contentBlockIndex": 1}),
    ("contentBlockDelta", {"contentBlockIndex": 2, "delta": {"text": PARTS[2]}}),
    ("contentBlockStop", {"contentBlockIndex": 2}),
    ("messageStop", {"stopReason": "end_turn"}),
    ("metadata", {"usage": {"inputTokens": 120, "outputTokens": 17, "totalTokens": 137}, "metrics": {"latencyMs": 40}}),
]


def retrieve_then_converse(*, stream: bool = False) -> Any:
    """The app: search the knowledge base, hand the results to the model, return what it got."""
    agent, runtime = client("bedrock-agent-runtime"), client("bedrock-runtime")
    stub = Stubber(agent)
    stub.add_response("retrieve", {"retrievalResults": RESULTS}, {"knowledgeBaseId": KB, "retrievalQuery": {"text": QUESTION}, "retrievalConfiguration": {"vectorSearchConfiguration": {"numberOfResults": 3}}})
    with stub:
        found = agent.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": QUESTION}, retrievalConfiguration={"vectorSearchConfiguration": {"numberOfResults": 3}})
    messages = [{"role": "user", "content": [*search_blocks(found["retrievalResults"]), {"text": QUESTION}]}]
    if stream:
        answer_stream(runtime, CONVERSE_EVENTS)
        return [event for event in runtime.converse_stream(modelId=MODEL_ID, messages=messages)["stream"]]
    stub = Stubber(runtime)
    stub.add_response("converse", CONVERSE)
    with stub:
        return runtime.converse(modelId=MODEL_ID, messages=messages, inferenceConfig={"temperature": 0.0, "maxTokens": 256})


def check_main_case(spans, *, stream: bool, nested: bool = False) -> None:
    """``nested``: the root sits under another instrumentor's span of the call that opened it."""
    root = spans.one("pipeline")
    assert (root.parent is not None) is nested and root.name == "invoke_workflow bedrock" and "rag.root.abandoned" not in root.attributes
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")  # retrieved once
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    ids = [chunk_id(A), chunk_id(B), chunk_id(C)]
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ids
    assert retrieved.attributes["gen_ai.data_source.id"] == KB and retrieved.attributes["gen_ai.retrieval.top_k"] == 3
    assert retrieved.attributes["rag.retrieval.top_score"] == 0.9
    assert assembled.attributes["rag.context.inclusion_method"] == "provider"
    assert list(assembled.attributes["rag.context.chunk_ids"]) == ids  # the same chunks: the same ids
    attributes = generated.attributes
    assert generated.name == f"chat {MODEL_ID}" and attributes["gen_ai.provider.name"] == "aws.bedrock"
    assert list(attributes["rag.citation.ids"]) == ids[:2] and attributes["rag.citation.granularity"] == "chunk"
    assert list(attributes["rag.citation.segment_starts"]) == [0, 19, 19]
    assert list(attributes["rag.citation.segment_ends"]) == [19, 50, 50]
    assert list(attributes["rag.citation.segment_ids"]) == [ids[0], ids[1], ids[0]]
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (120, 17)
    assert list(attributes["gen_ai.response.finish_reasons"]) == ["end_turn"]
    assert attributes.get("gen_ai.request.stream", False) is stream
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 3, 2, [1, 2])
    assert math.isclose(got["recall_proxy"], 2 / 3) and math.isclose(got["recall_proxy_weighted"], 9 / 11)
    assert got["context_precision"] == 1.0 and math.isclose(got["context_utilization"], 2 / 3)
    assert got["wasted_context_tokens"] == 9 and got["invalid_citations"] == 0 and "status" not in got


def test_retrieve_then_converse_is_one_pipeline_with_exact_figures(spans):
    off, on = off_then_on(spans, retrieve_then_converse)
    assert on == off  # the app's response, unchanged
    check_main_case(spans, stream=False)
    assert spans.one("generate").attributes["gen_ai.request.temperature"] == 0.0


def test_a_streamed_converse_reads_the_events_the_app_read(spans):
    off, on = off_then_on(spans, lambda: retrieve_then_converse(stream=True))
    assert on == off and "".join(e["contentBlockDelta"]["delta"].get("text", "") for e in on if "contentBlockDelta" in e) == ANSWER
    check_main_case(spans, stream=True)
    assert spans.one("generate").attributes["gen_ai.response.time_to_first_chunk"] > 0


def test_a_converse_stream_closed_early_scores_what_the_app_read(instrumented):
    """The app reads the first block (its text and its citation of A) and closes the stream. By
    hand: answer "Refunds take 5 days", cited A only, recall 1/3, positions [1]."""
    runtime = client("bedrock-runtime")
    answer_stream(runtime, CONVERSE_EVENTS)
    messages = [{"role": "user", "content": [*search_blocks(RESULTS), {"text": QUESTION}]}]
    stream = runtime.converse_stream(modelId=MODEL_ID, messages=messages)["stream"]
    read = [event for _, event in zip(range(5), stream)]
    stream.close()
    assert "contentBlockStop" in read[-1]
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == [chunk_id(A)]
    assert list(generated.attributes["rag.citation.segment_ends"]) == [19]
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["cited"], list(got["cited_positions"])) == (3, 1, [1]) and math.isclose(got["recall_proxy"], 1 / 3)


def test_a_converse_stream_cut_off_before_message_stop_is_not_scored_as_a_whole_answer(instrumented):
    """The connection drops after the first block (5 events) and botocore's EventStream just
    ends: no messageStop. Scored as it stands: cited 1, recall 1/3 where the whole answer gives
    2/3; not measurable instead (answer_incomplete)."""
    runtime = client("bedrock-runtime")
    answer_stream(runtime, CONVERSE_EVENTS[:5])
    messages = [{"role": "user", "content": [*search_blocks(RESULTS), {"text": QUESTION}]}]
    read = list(runtime.converse_stream(modelId=MODEL_ID, messages=messages)["stream"])
    assert "contentBlockStop" in read[-1]
    assert instrumented.one("generate").attributes["rag.citation.status"] == "answer_incomplete"
    got = metrics(instrumented.one("pipeline"))
    assert got["status"] == "answer_incomplete" and "recall_proxy" not in got and got["retrieved"] == 3


def test_retrieve_alone_is_a_retrieve_span_with_scores(spans):
    def search() -> Any:
        agent = client("bedrock-agent-runtime")
        with Stubber(agent) as stub:
            stub.add_response("retrieve", {"retrievalResults": RESULTS})
            return agent.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": QUESTION})

    off, on = off_then_on(spans, search)
    assert on == off
    retrieved = spans.one("retrieve")
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == [chunk_id(A), chunk_id(B), chunk_id(C)]
    documents = json.loads(retrieved.attributes["gen_ai.retrieval.documents"])
    assert [d["score"] for d in documents] == [0.9, 0.6, 0.3] and [d["id"] for d in documents] == [chunk_id(A), chunk_id(B), chunk_id(C)]
    assert retrieved.attributes["gen_ai.retrieval.query.text"] == QUESTION


# --- retrieve_and_generate -----------------------------------------------------------------------
def reference(found: tuple[str, str, float]) -> dict[str, Any]:
    return result(found[0], found[1])  # no score: references carry none


GENERATED = "Refunds take 5 days. Store credit is immediate."
CITATIONS = [citation(GENERATED, "Refunds take 5 days.", [reference(A)]), citation(GENERATED, "Store credit is immediate.", [reference(B), reference(A)], inclusive=False)]


def check_retrieve_and_generate(spans, *, stream: bool, retrieved: int | None = None) -> None:
    """Only the cited references come back: the retrieval and the context are not measurable,
    and neither is anything that counts them; the cited ids and their places in the answer are
    exact ("Refunds take 5 days." is 0-20, "Store credit is immediate." 21-47)."""
    root, generated = spans.one("pipeline"), spans.one("generate")
    own = [s for s in spans.by_stage("retrieve") if s.attributes.get("rag.retrieval.status") == "cited_references_only"]
    assert len(own) == 1 and own[0].attributes["gen_ai.data_source.id"] == KB
    assert "rag.retrieval.chunk_ids" not in own[0].attributes
    assert spans.by_stage("assemble") == []
    attributes = generated.attributes
    assert generated.name == f"chat {MODEL_ARN}" and attributes["rag.citation.status"] == "cited_references_only"
    assert list(attributes["rag.citation.ids"]) == [chunk_id(A), chunk_id(B)]
    assert list(attributes["rag.citation.segment_starts"]) == [0, 21, 21]
    assert list(attributes["rag.citation.segment_ends"]) == [20, 47, 47]
    assert list(attributes["rag.citation.segment_ids"]) == [chunk_id(A), chunk_id(B), chunk_id(A)]
    assert attributes.get("gen_ai.request.stream", False) is stream
    got = metrics(root)
    assert "cited_references_only" in got["status"].split(",")
    for figure in ("in_context", "cited", "recall_proxy", "context_precision", "context_utilization", "wasted_context_tokens"):
        assert figure not in got
    assert got.get("retrieved") == retrieved


def ask_knowledge_base() -> Any:
    agent = client("bedrock-agent-runtime")
    with Stubber(agent) as stub:
        stub.add_response("retrieve_and_generate", {"sessionId": "session-1", "output": {"text": GENERATED}, "citations": CITATIONS})
        return agent.retrieve_and_generate(input={"text": QUESTION}, retrieveAndGenerateConfiguration=R_AND_G)


def test_retrieve_and_generate_is_a_pipeline_whose_retrieval_is_not_measurable(spans):
    off, on = off_then_on(spans, ask_knowledge_base)
    assert on == off
    check_retrieve_and_generate(spans, stream=False)
    assert "no_retrieval" in metrics(spans.one("pipeline"))["status"]


def test_retrieve_and_generate_stream(spans):
    events = [("output", {"text": "Refunds take 5 days. "}), ("output", {"text": "Store credit is immediate."}), *(("citation", c) for c in CITATIONS)]

    def ask() -> list[Any]:
        agent = client("bedrock-agent-runtime")
        answer_stream(agent, events, {"x-amz-bedrock-agent-session-id": "session-1"})
        return list(agent.retrieve_and_generate_stream(input={"text": QUESTION}, retrieveAndGenerateConfiguration=R_AND_G)["stream"])

    off, on = off_then_on(spans, ask)
    assert on == off and len(on) == 4
    check_retrieve_and_generate(spans, stream=True)


def test_the_pipelines_own_retrieve_gives_the_retrieval_and_the_ids_agree(instrumented):
    """retrieve (A, B, C) then retrieve_and_generate in one request: one pipeline; retrieved is
    the retrieve call's 3, the cited references carry the ids that call gave the same chunks,
    and what needs the context stays not measurable."""

    def app() -> None:
        agent = client("bedrock-agent-runtime")
        with Stubber(agent) as stub:
            stub.add_response("retrieve", {"retrievalResults": RESULTS})
            stub.add_response("retrieve_and_generate", {"sessionId": "session-1", "output": {"text": GENERATED}, "citations": CITATIONS})
            agent.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": QUESTION})
            agent.retrieve_and_generate(input={"text": QUESTION}, retrieveAndGenerateConfiguration=R_AND_G)

    app()
    check_retrieve_and_generate(instrumented, stream=False, retrieved=3)
    ids = [s for s in instrumented.by_stage("retrieve") if "rag.retrieval.chunk_ids" in s.attributes][0].attributes["rag.retrieval.chunk_ids"]
    assert set(instrumented.one("generate").attributes["rag.citation.ids"]) <= set(ids)


def test_references_repeating_a_location_are_chunks_of_one_document_not_a_file_citation(instrumented):
    """Two references at refunds.txt (A and A2, other text) and one at credit.txt: each reference
    carries its own text, so each is one chunk (granularity chunk, three distinct ids, two sharing
    the document part before '#'). No file-level figure is given: only the cited references come
    back, so neither the retrieved nor the in-context documents are known (cited_references_only)."""
    a2 = (A[0], "Refunds to a closed card go back as store credit.", 0.0)
    citations = [citation(GENERATED, "Refunds take 5 days.", [reference(A), reference(a2)]), citation(GENERATED, "Store credit is immediate.", [reference(B)], inclusive=False)]
    agent = client("bedrock-agent-runtime")
    with Stubber(agent) as stub:
        stub.add_response("retrieve_and_generate", {"sessionId": "session-1", "output": {"text": GENERATED}, "citations": citations})
        agent.retrieve_and_generate(input={"text": QUESTION}, retrieveAndGenerateConfiguration=R_AND_G)
    generated = instrumented.one("generate").attributes
    cited = list(generated["rag.citation.ids"])
    assert cited == [chunk_id(A), chunk_id(a2), chunk_id(B)]
    assert len({c.split("#")[0] for c in cited}) == 2 and generated.get("rag.citation.granularity", "chunk") == "chunk"
    assert "rag.citation.file_ids" not in generated
    got = metrics(instrumented.one("pipeline"))
    assert not {"retrieved_files", "in_context_files", "cited_files", "file_recall_proxy", "file_context_utilization"} & set(got)
    assert "cited_references_only" in got["status"].split(",") and "files_unknown" not in got["status"]


# --- failures, redaction, uninstrument -------------------------------------------------------------
def test_a_service_error_passes_through_and_ends_the_pipeline(instrumented):
    agent = client("bedrock-agent-runtime")
    with Stubber(agent) as stub:
        stub.add_client_error("retrieve_and_generate", service_error_code="ThrottlingException", http_status_code=429)
        with pytest.raises(ClientError) as raised:
            agent.retrieve_and_generate(input={"text": QUESTION}, retrieveAndGenerateConfiguration=R_AND_G)
    assert raised.value.response["Error"]["Code"] == "ThrottlingException"
    generated, root = instrumented.one("generate"), instrumented.one("pipeline")
    assert generated.status.status_code.name == "ERROR" and root.end_time is not None
    (event,) = [e for e in generated.events if e.name == "exception"]
    assert event.attributes["exception.type"].endswith("ClientError") and "ThrottlingException" in event.attributes["exception.message"]


def test_invalid_parameters_raise_before_any_span_opens(instrumented):
    agent = client("bedrock-agent-runtime")
    with pytest.raises(ParamValidationError):
        agent.retrieve(knowledgeBaseId="short", retrievalQuery={"text": QUESTION})
    assert instrumented.all() == []


def test_redact_mode_exports_no_text_uri_title_or_answer(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "PLANTED-MARKER-4411"
    planted = [(f"s3://bucket/{marker}-{n}.txt", f"{marker} passage {n}.", 0.5) for n in range(2)]
    answer = f"{marker} answer."
    ragtrace.instrument("bedrock")
    try:
        agent, runtime = client("bedrock-agent-runtime"), client("bedrock-runtime")
        with Stubber(agent) as stub:
            stub.add_response("retrieve", {"retrievalResults": [result(*p) for p in planted]})
            stub.add_response("retrieve_and_generate", {"sessionId": "session-1", "output": {"text": answer}, "citations": [citation(answer, answer, [result(*planted[0][:2])])]})
            found = agent.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": f"{marker} question"})
            agent.retrieve_and_generate(input={"text": f"{marker} question"}, retrieveAndGenerateConfiguration=R_AND_G)
        blocks = [{"searchResult": {**b["searchResult"], "title": f"{marker} title"}} for b in search_blocks(found["retrievalResults"])]
        reply = {"output": {"message": {"role": "assistant", "content": [{"citationsContent": {"content": [{"text": answer}], "citations": [at_result(0)]}}]}}, "stopReason": "end_turn", "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}, "metrics": {"latencyMs": 1}}
        messages = [{"role": "user", "content": [*blocks, {"text": f"{marker} question"}]}]
        with Stubber(runtime) as stub:
            stub.add_response("converse", reply)
            runtime.converse(modelId=MODEL_ID, messages=messages, system=[{"text": f"{marker} system"}])
        answer_stream(runtime, [("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": answer}}), ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"citation": at_result(1)}})])
        list(runtime.converse_stream(modelId=MODEL_ID, messages=messages)["stream"])
        answer_stream(agent, [("output", {"text": answer}), ("citation", citation(answer, answer, [result(*planted[1][:2])]))])
        list(agent.retrieve_and_generate_stream(input={"text": f"{marker} question"}, retrieveAndGenerateConfiguration=R_AND_G)["stream"])
    finally:
        ragtrace.uninstrument("bedrock")
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported and "s3://" not in exported
    assert [list(g.attributes["rag.citation.ids"]) for g in spans.by_stage("generate")] == [[chunk_id(p)] for p in (planted[0], planted[0], planted[1], planted[1])]


def test_uninstrument_removes_the_handlers(spans):
    before = list(handlers.BUILTIN_HANDLERS)
    ragtrace.instrument("bedrock")
    made_while_on = client("bedrock-agent-runtime")
    assert len(handlers.BUILTIN_HANDLERS) > len(before)
    ragtrace.uninstrument("bedrock")
    assert handlers.BUILTIN_HANDLERS == before
    for agent in (made_while_on, client("bedrock-agent-runtime")):  # the handlers it copied do nothing now
        with Stubber(agent) as stub:
            stub.add_response("retrieve", {"retrievalResults": RESULTS})
            agent.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": QUESTION})
    assert spans.all() == []


def test_other_services_are_left_alone(instrumented):
    s3 = client("s3")
    with Stubber(s3) as stub:
        stub.add_response("list_buckets", {"Buckets": []})
        assert s3.list_buckets()["Buckets"] == []
    assert instrumented.all() == []


def test_documents_and_search_results_are_indexed_apart(instrumented):
    """Search result 0 is A; document 0 is a text document D. The answer cites D by
    ``documentChar`` and search result 5, which names no block: R = C = 2, cited D only, one
    unknown citation; D's id is the keyed digest of its text."""
    handbook = "Refunds over 500 euros need a manager's approval."
    document = {"document": {"format": "txt", "name": "handbook", "source": {"text": handbook}, "citations": {"enabled": True}}}
    char = {"location": {"documentChar": {"documentIndex": 0, "start": 0, "end": 10}}}
    reply = dict(CONVERSE, output={"message": {"role": "assistant", "content": [{"citationsContent": {"content": [{"text": "Large ones need approval."}], "citations": [char, at_result(5)]}}]}})
    runtime = client("bedrock-runtime")
    with Stubber(runtime) as stub:
        stub.add_response("converse", reply)
        runtime.converse(modelId=MODEL_ID, messages=[{"role": "user", "content": [*search_blocks(RESULTS[:1]), document, {"text": QUESTION}]}])
    assert list(instrumented.one("assemble").attributes["rag.context.chunk_ids"]) == [chunk_id(A), content_digest(handbook)]
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == [content_digest(handbook)]
    assert list(generated.attributes["rag.citation.invalid_labels"]) == ["search_result_index=5"]
    got = metrics(instrumented.one("pipeline"))
    assert (got["retrieved"], got["in_context"], got["cited"], got["unknown_citations"], list(got["cited_positions"])) == (2, 2, 1, 1, [2])


def test_a_pdf_document_makes_the_citation_figures_not_measurable(instrumented):
    """A PDF's text, so its tokens, are unknown: the figures that count them would be made up."""
    pdf = {"document": {"format": "pdf", "name": "policy", "source": {"bytes": b"%PDF-1.7 ..."}, "citations": {"enabled": True}}}
    page = {"location": {"documentPage": {"documentIndex": 0, "start": 1, "end": 2}}}
    reply = dict(CONVERSE, output={"message": {"role": "assistant", "content": [{"citationsContent": {"content": [{"text": "See the policy."}], "citations": [page]}}]}})
    runtime = client("bedrock-runtime")
    with Stubber(runtime) as stub:
        stub.add_response("converse", reply)
        runtime.converse(modelId=MODEL_ID, messages=[{"role": "user", "content": [pdf, {"text": QUESTION}]}])
    generated = instrumented.one("generate")
    assert generated.attributes["rag.citation.status"] == "source_unreadable" and len(generated.attributes["rag.citation.ids"]) == 1
    got = metrics(instrumented.one("pipeline"))
    assert "source_unreadable" in got["status"] and "recall_proxy" not in got and "wasted_context_tokens" not in got


def test_a_botocore_outside_the_range_is_left_alone_with_one_log_line(monkeypatch, caplog, spans):
    from dataclasses import replace

    from ragtrace._internal import integrations

    monkeypatch.setitem(integrations.LIBRARIES, "bedrock", replace(integrations.LIBRARIES["bedrock"], requirements=("botocore >= 99",)))
    before = list(handlers.BUILTIN_HANDLERS)
    with caplog.at_level("WARNING", logger="ragtrace"):
        assert ragtrace.instrument("bedrock") == []
    assert [r.getMessage() for r in caplog.records if "bedrock" in r.getMessage()] == [
        f"ragtrace: not instrumenting bedrock: botocore {__import__('botocore').__version__} is outside the supported range >=99"
    ]
    assert handlers.BUILTIN_HANDLERS == before


def test_clients_of_boto3s_existing_default_session_are_covered(spans):
    """boto3's default session made before instrument() gets the handlers too (a client made
    from it afterwards is traced), and loses them at uninstrument()."""
    import boto3

    boto3.setup_default_session(aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret", region_name="us-east-1")
    try:
        for on in (True, False):
            if on:
                ragtrace.instrument("bedrock")
            agent = boto3.client("bedrock-agent-runtime")
            with Stubber(agent) as stub:
                stub.add_response("retrieve", {"retrievalResults": RESULTS})
                agent.retrieve(knowledgeBaseId=KB, retrievalQuery={"text": QUESTION})
            if on:
                ragtrace.uninstrument("bedrock")
                assert len(spans.by_stage("retrieve")) == 1
                spans.clear()
        assert spans.by_stage("retrieve") == []
    finally:
        boto3.DEFAULT_SESSION = None


def test_a_retrieve_and_generate_stream_closed_early_scores_what_the_app_read(instrumented):
    """The app reads the first text event and the first citation, then closes: the answer is that
    text and cites A only, placed at 0-20; the retrieval stays not measurable."""
    agent = client("bedrock-agent-runtime")
    answer_stream(agent, [("output", {"text": "Refunds take 5 days. "}), ("citation", CITATIONS[0]), ("output", {"text": "Store credit is immediate."}), ("citation", CITATIONS[1])])
    stream = agent.retrieve_and_generate_stream(input={"text": QUESTION}, retrieveAndGenerateConfiguration=R_AND_G)["stream"]
    read = [event for _, event in zip(range(2), stream)]
    stream.close()
    assert "citation" in read[-1]
    generated = instrumented.one("generate")
    assert list(generated.attributes["rag.citation.ids"]) == [chunk_id(A)]
    assert (list(generated.attributes["rag.citation.segment_starts"]), list(generated.attributes["rag.citation.segment_ends"])) == ([0], [20])
    assert "cited_references_only" in metrics(instrumented.one("pipeline"))["status"]
