"""The Qdrant integration against the real ``qdrant-client`` in its local mode (``QdrantClient(":memory:")``,
the client's own in-process engine) with explicit vectors, and the OpenAI SDK answering through
the loopback chat server (tests/loopback.py). Each app runs first with ragtrace off, so a
difference in what it gets is ragtrace's.

Hand-worked truth. Collection ``kb``, Cosine, three points: 1 = [1, 0, 0] (refunds), 2 = [0.8, 0.6, 0]
(store credit), 3 = [0, 0, 1] (shipping). The query [1, 0, 0] scores them 1.0, 0.8, 0.0: best
first, falling, so similarities. The app shows the first two as [1], [2]; the answer
"Refunds take 5 business days [1]." cites [1]. So retrieved 3, in context 2 (located), cited 1:
recall 1/3, utilisation 1/2, cited position 1. In a Euclid collection the same query finds them
at distances 0, sqrt(0.4), sqrt(2): rising, so distances.
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from loopback import ANSWER
from qdrant_client import AsyncQdrantClient, QdrantClient, models

import ragtrace
from ragtrace._internal.boundaries import auto_root

from .test_openai import client as openai_client

QUESTION = "How long does a refund take?"
TEXTS = {
    1: "Refunds reach the original card within 5 days.",
    2: "Store credit is issued immediately instead of a refund.",
    3: "Shipping is free for orders over 50 euros.",
}
VECTORS = {1: [1.0, 0.0, 0.0], 2: [0.8, 0.6, 0.0], 3: [0.0, 0.0, 1.0]}
QUERY = [1.0, 0.0, 0.0]


def points() -> list[models.PointStruct]:
    return [models.PointStruct(id=i, vector=VECTORS[i], payload={"text": TEXTS[i], "source": f"kb/{i}"}) for i in TEXTS]


def qdrant(distance: models.Distance = models.Distance.COSINE) -> QdrantClient:
    found = QdrantClient(":memory:")
    found.create_collection("kb", vectors_config=models.VectorParams(size=3, distance=distance))
    found.upsert("kb", points=points())
    return found


async def async_qdrant() -> AsyncQdrantClient:
    found = AsyncQdrantClient(":memory:")
    await found.create_collection("kb", vectors_config=models.VectorParams(size=3, distance=models.Distance.COSINE))
    await found.upsert("kb", points=points())
    return found


def messages(texts: list[str]) -> list[dict]:
    sources = "\n".join(f"[{n}] {text}" for n, text in enumerate(texts[:2], 1))
    return [
        {"role": "system", "content": "Answer from the numbered sources only and cite them as [1], [2]."},
        {"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {QUESTION}"},
    ]


def app(url: str) -> tuple[list, str]:
    """An app as Qdrant's docs write one: query the collection, answer from the payloads' text."""
    found = qdrant().query_points("kb", query=QUERY, limit=3, with_payload=True).points
    texts = [point.payload["text"] for point in found]
    answer = openai_client(url).chat.completions.create(model="gpt-4o-mini", messages=messages(texts)).choices[0].message.content
    return [(p.id, round(p.score, 6), p.payload) for p in found], answer


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def instrumented_run(call):
    assert ragtrace.instrument("qdrant", "openai") == ["qdrant", "openai"]
    try:
        return call()
    finally:
        ragtrace.uninstrument("qdrant", "openai")


@pytest.fixture
def on(spans):
    assert ragtrace.instrument("qdrant") == ["qdrant"]
    yield spans
    ragtrace.uninstrument("qdrant")


def check_answered_pipeline(spans, name: str, ids: list[str]) -> tuple:
    """The trace of a query answered by the model: one root (the automatic one, ``name``) over
    retrieve, assemble (located: the first two results) and generate (citing the first), with
    retrieved 3, in context 2, cited 1. Returns the retrieve span."""
    root = spans.one("pipeline")
    assert root.parent is None and root.name == f"invoke_workflow {name}" and "rag.root.abandoned" not in root.attributes
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ids
    assert assembled.attributes["rag.context.inclusion_method"] == "located"
    assert list(assembled.attributes["rag.context.chunk_ids"]) == ids[:2]
    assert list(generated.attributes["rag.citation.ids"]) == ids[:1]
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 2, 1, [1])
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_utilization"] == 0.5
    assert auto_root.open_count() == 0
    return retrieved


def test_a_query_and_the_answer_make_one_pipeline_with_exact_figures(spans, chat_server):
    url, _ = chat_server
    off = app(url)
    assert spans.all() == []
    assert instrumented_run(lambda: app(url)) == off  # the app's points and answer, unchanged
    assert off[1] == ANSWER
    retrieved = check_answered_pipeline(spans, "qdrant", ["1", "2", "3"])
    assert retrieved.name == "retrieval kb"
    attributes = retrieved.attributes
    assert attributes["gen_ai.data_source.id"] == "kb" and attributes["gen_ai.retrieval.top_k"] == 3
    documents = json.loads(attributes["gen_ai.retrieval.documents"])
    assert [d["id"] for d in documents] == ["1", "2", "3"]
    assert all(math.isclose(d["score"], want, abs_tol=1e-6) for d, want in zip(documents, [1.0, 0.8, 0.0]))
    assert attributes["rag.retrieval.score_kind"] == "similarity"
    assert attributes["retrieval.documents.1.document.content"] == TEXTS[2]
    assert "gen_ai.retrieval.query.text" not in attributes  # a vector is no text


def test_a_euclid_collection_records_distances_and_says_so(on):
    result = qdrant(models.Distance.EUCLID).query_points("kb", query=QUERY)
    assert [p.id for p in result.points] == [1, 2, 3]
    retrieved = on.one("retrieve")
    documents = json.loads(retrieved.attributes["gen_ai.retrieval.documents"])
    assert all(math.isclose(d["score"], want, abs_tol=1e-6) for d, want in zip(documents, [0.0, math.sqrt(0.4), math.sqrt(2)]))
    assert retrieved.attributes["rag.retrieval.score_kind"] == "distance"
    assert retrieved.attributes["gen_ai.retrieval.top_k"] == 10  # the client's default limit


def test_one_result_cant_tell_the_kind(on):
    qdrant(models.Distance.EUCLID).query_points("kb", query=QUERY, limit=1)
    retrieved = on.one("retrieve")
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ["1"]
    assert retrieved.attributes["rag.retrieval.score_kind"] == "unknown"


def test_without_payloads_the_ids_and_scores_stay_exact(on):
    qdrant().query_points("kb", query=QUERY, limit=2, with_payload=False)
    retrieved = on.one("retrieve")
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ["1", "2"]
    assert not [k for k in retrieved.attributes if k.endswith("document.content")]


def test_gathered_async_queries_join_one_root(spans, chat_server):
    """Multi-query with the async client: two queries gathered, then the answer: one pipeline;
    point 1, found by both, counts once."""
    url, _ = chat_server

    async def run() -> str:
        db = await async_qdrant()
        first, second = await asyncio.gather(
            db.query_points("kb", query=QUERY, limit=1),
            db.query_points("kb", query=VECTORS[2], limit=2),
        )
        texts = [p.payload["text"] for p in (*first.points, *second.points[:1])]  # points 1 and 2
        sdk = openai_client(url, __import__("openai").AsyncOpenAI)
        completion = await sdk.chat.completions.create(model="gpt-4o-mini", messages=messages(texts))
        await db.close()
        return completion.choices[0].message.content

    assert asyncio.run(run()) == ANSWER
    spans.clear()
    assert instrumented_run(lambda: asyncio.run(run())) == ANSWER
    root = spans.one("pipeline")
    retrievals = spans.by_stage("retrieve")
    assert sorted(list(r.attributes["rag.retrieval.chunk_ids"]) for r in retrievals) == [["1"], ["2", "1"]]
    assert {s.parent.span_id for s in spans.all() if s is not root} == {root.context.span_id}
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)


def test_inside_the_users_pipeline_a_query_is_one_of_its_stages(on):
    with ragtrace.rag_pipeline("mine", query=QUESTION) as run:
        qdrant().query_points("kb", query=QUERY, limit=3)
    (root,) = on.by_stage("pipeline")
    assert root.name == "invoke_workflow mine"
    assert on.one("retrieve").parent.span_id == root.context.span_id
    assert run.metrics["retrieved"] == 3
    assert auto_root.open_count() == 0


def test_the_clients_error_passes_through_and_ends_the_span(on):
    db = qdrant()
    with pytest.raises(ValueError) as off:
        QdrantClient.query_points.__wrapped__(db, "missing", query=QUERY)
    on.clear()
    with pytest.raises(ValueError) as raised:
        db.query_points("missing", query=QUERY)
    assert str(raised.value) == str(off.value)
    retrieved = on.one("retrieve")
    assert retrieved.status.status_code.name == "ERROR" and retrieved.attributes["gen_ai.data_source.id"] == "missing"


def test_redact_mode_exports_no_document_text(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "PLANTED-MARKER-4471"
    db = QdrantClient(":memory:")
    db.create_collection("kb", vectors_config=models.VectorParams(size=3, distance=models.Distance.COSINE))
    db.upsert("kb", points=[models.PointStruct(id=i, vector=VECTORS[i], payload={"text": f"{marker} {TEXTS[i]}"}) for i in TEXTS])
    ragtrace.instrument("qdrant")
    try:
        found = db.query_points("kb", query=QUERY, limit=3).points
    finally:
        ragtrace.uninstrument("qdrant")
    assert [p.payload["text"].startswith(marker) for p in found] == [True] * 3  # the app still gets its payloads
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported
    assert list(spans.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == ["1", "2", "3"]


@pytest.mark.skipif(not hasattr(QdrantClient, "search"), reason="qdrant-client 1.16 removed search(); query_points is tested above")
def test_search_on_clients_that_still_have_it(on):
    found = qdrant().search("kb", query_vector=QUERY, limit=2)
    assert [p.id for p in found] == [1, 2]
    retrieved = on.one("retrieve")
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ["1", "2"]
    assert retrieved.attributes["gen_ai.retrieval.top_k"] == 2 and retrieved.attributes["rag.retrieval.score_kind"] == "similarity"


def test_uninstrument_restores_the_client(spans):
    originals = {cls: vars(cls)["query_points"] for cls in (QdrantClient, AsyncQdrantClient)}
    ragtrace.instrument("qdrant")
    assert all(vars(cls)["query_points"] is not original for cls, original in originals.items())
    ragtrace.uninstrument("qdrant")
    assert all(vars(cls)["query_points"] is original for cls, original in originals.items())
    qdrant().query_points("kb", query=QUERY)
    assert spans.all() == []


def test_a_lone_query_is_a_pipeline_of_its_own_ended_when_its_call_is_over(on):
    """A search endpoint: each request queries and returns, no model call. The first request's
    root is ended as abandoned (owner_gone) when the next one's opens."""
    db = qdrant()

    def lookup() -> list[int]:
        return [p.id for p in db.query_points("kb", query=QUERY, limit=2).points]

    assert lookup() == [1, 2]
    assert on.by_stage("pipeline") == [] and auto_root.open_count() == 1
    assert lookup() == [1, 2]
    (first,) = on.by_stage("pipeline")
    assert first.attributes["rag.root.abandoned"] == "owner_gone"
    assert metrics(first)["retrieved"] == 2
    assert on.by_stage("retrieve")[0].parent.span_id == first.context.span_id


def test_a_version_outside_the_range_is_left_alone_with_one_line(spans, monkeypatch, caplog):
    from dataclasses import replace
    from importlib import metadata

    from ragtrace._internal import integrations

    monkeypatch.setitem(integrations.LIBRARIES, "qdrant", replace(integrations.LIBRARIES["qdrant"], requirements=("qdrant-client >= 99",)))
    original = vars(QdrantClient)["query_points"]
    with caplog.at_level("WARNING", logger="ragtrace"):
        assert ragtrace.instrument("qdrant") == []
    assert [r.getMessage() for r in caplog.records if "qdrant" in r.getMessage()] == [
        f"ragtrace: not instrumenting qdrant: qdrant-client {metadata.version('qdrant-client')} is outside the supported range >=99"
    ]
    assert vars(QdrantClient)["query_points"] is original


@pytest.mark.parametrize("nested", [False, True], ids=["document", "nearest-document"])
def test_a_text_query_is_the_spans_query(on, nested):
    """A ``models.Document`` query is text Qdrant embeds (with fastembed, not installed here: the
    client raises ImportError, which passes through); its text is the retrieve span's query."""
    document = models.Document(text=QUESTION, model="sentence-transformers/all-MiniLM-L6-v2")
    with pytest.raises(ImportError, match="fastembed"):
        qdrant().query_points("kb", query=models.NearestQuery(nearest=document) if nested else document)
    retrieved = on.one("retrieve")
    assert retrieved.attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert retrieved.status.status_code.name == "ERROR"
