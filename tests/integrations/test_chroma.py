"""The Chroma integration against the real ``chromadb`` (``EphemeralClient()``, Chroma's own in-process
engine) with an explicit embedding function (the default one downloads an ONNX model), and the
OpenAI SDK answering through the loopback chat server. Each app runs first with ragtrace off, so a
difference in what it gets is ragtrace's. Heavy: chromadb is large, installed on 3.11 only.

Hand-worked truth. The embedding function maps a text to counts of three words (refund, credit,
shipping), so "refund" embeds as (1, 0, 0); the records: a = "refund refund" (2, 0, 0),
b = "credit refund" (1, 1, 0), c = "shipping" (0, 0, 1).
- cosine: distances 1 - cos = 0, 1 - 1/sqrt(2), 1: similarities 1, 1/sqrt(2), 0;
- ip: distances 1 - a.b = -1, 0, 1: similarities (inner products) 2, 1, 0;
- l2 (squared): distances 1, 1, 2: kept as distances.
The app shows a and b as [1], [2]; the answer "Refunds take 5 business days [1]." cites [1] = a.
So retrieved 3, in context 2 (located), cited 1: recall 1/3, utilisation 1/2.
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

chromadb = pytest.importorskip("chromadb", reason="chromadb is not installed (pyproject's test extra installs it on Python 3.11 only)")
from chromadb.api.models.Collection import Collection
from chromadb.utils.embedding_functions import EmbeddingFunction
from loopback import ANSWER

import ragtrace
from ragtrace._internal.boundaries import auto_root

from .test_openai import client as openai_client
from .test_qdrant import check_answered_pipeline, metrics

pytestmark = pytest.mark.heavy

QUESTION = "refund"
WORDS = ("refund", "credit", "shipping")
RECORDS = {"a": "refund refund", "b": "credit refund", "c": "shipping"}


class WordCounts(EmbeddingFunction):
    """Counts of three words: a deterministic embedding, no model."""

    def __init__(self) -> None:
        pass

    def __call__(self, input):
        return [[float(text.split().count(word)) for word in WORDS] for text in input]

    @staticmethod
    def name() -> str:
        return "word-counts"

    def get_config(self) -> dict:
        return {}

    @staticmethod
    def build_from_config(config: dict) -> WordCounts:
        return WordCounts()


def collection(space: str = "cosine", name: str = "kb_cosine") -> Collection:
    found = chromadb.EphemeralClient().get_or_create_collection(name, embedding_function=WordCounts(), configuration={"hnsw": {"space": space}})
    found.upsert(ids=list(RECORDS), documents=list(RECORDS.values()))
    return found


def messages(texts: list[str]) -> list[dict]:
    sources = "\n".join(f"[{n}] {text}" for n, text in enumerate(texts[:2], 1))
    return [{"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: how long does a {QUESTION} take?"}]


def app(url: str) -> tuple[dict, str]:
    """An app as Chroma's docs write one: query by text, answer from the documents."""
    result = collection("cosine", "kb_app").query(query_texts=[QUESTION], n_results=3)
    texts = result["documents"][0]
    answer = openai_client(url).chat.completions.create(model="gpt-4o-mini", messages=messages(texts)).choices[0].message.content
    return {k: result[k] for k in ("ids", "documents", "distances")}, answer


def scores(span) -> list[float]:
    return [d["score"] for d in json.loads(span.attributes["gen_ai.retrieval.documents"])]


@pytest.fixture
def on(spans):
    assert ragtrace.instrument("chroma") == ["chroma"]
    yield spans
    ragtrace.uninstrument("chroma")


def test_a_query_and_the_answer_make_one_pipeline_with_exact_figures(spans, chat_server):
    url, _ = chat_server
    off = app(url)
    assert spans.all() == []
    assert ragtrace.instrument("chroma", "openai") == ["chroma", "openai"]
    try:
        on = app(url)
    finally:
        ragtrace.uninstrument("chroma", "openai")
    assert on == off and off[1] == ANSWER  # the app's result dict and answer, unchanged
    retrieved = check_answered_pipeline(spans, "chroma", ["a", "b", "c"])
    attributes = retrieved.attributes
    assert retrieved.name == "retrieval kb_app" and attributes["gen_ai.data_source.id"] == "kb_app"
    assert attributes["gen_ai.retrieval.top_k"] == 3 and attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert all(math.isclose(s, want, abs_tol=1e-5) for s, want in zip(scores(retrieved), [1.0, 1 / math.sqrt(2), 0.0]))
    assert attributes["rag.retrieval.score_kind"] == "similarity"


@pytest.mark.parametrize(
    ("space", "kind", "expected"),
    [("ip", "similarity", [2.0, 1.0, 0.0]), ("l2", "distance", [1.0, 1.0, 2.0])],
)
def test_each_space_says_what_its_scores_are(on, space, kind, expected):
    result = collection(space, f"kb_{space}").query(query_texts=QUESTION)
    retrieved = on.one("retrieve")
    assert retrieved.attributes["rag.retrieval.score_kind"] == kind
    assert all(math.isclose(s, want, abs_tol=1e-5) for s, want in zip(scores(retrieved), expected))
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == result["ids"][0]
    assert retrieved.attributes["gen_ai.retrieval.top_k"] == 10  # Chroma's default n_results
    if space == "l2":  # the raw distances, as Chroma gave them
        assert scores(retrieved) == pytest.approx(result["distances"][0])


def test_several_queries_in_one_call_are_one_retrieve_each(on):
    result = collection().query(query_embeddings=[[0.0, 0.0, 1.0], [0.0, 1.0, 0.0]], n_results=1, include=["distances"])
    assert result["ids"] == [["c"], ["b"]]
    first, second = on.by_stage("retrieve")
    assert [list(first.attributes["rag.retrieval.chunk_ids"]), list(second.attributes["rag.retrieval.chunk_ids"])] == [["c"], ["b"]]
    auto_root.end_open()  # no answer came: the root the queries opened ends unanswered
    root = on.one("pipeline")
    assert first.parent.span_id == second.parent.span_id == root.context.span_id
    assert metrics(root)["retrieved"] == 2
    assert not [k for s in (first, second) for k in s.attributes if k.endswith("document.content")]  # documents not included


def test_a_single_embedding_is_one_query(on):
    collection().query(query_embeddings=[1.0, 0.0, 0.0], n_results=2)
    assert list(on.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == ["a", "b"]


def test_inside_the_users_pipeline_a_query_is_one_of_its_stages(on):
    with ragtrace.rag_pipeline("mine", query=QUESTION) as run:
        collection().query(query_texts=[QUESTION], n_results=3)
    (root,) = on.by_stage("pipeline")
    assert root.name == "invoke_workflow mine" and on.one("retrieve").parent.span_id == root.context.span_id
    assert run.metrics["retrieved"] == 3


def test_chromas_error_passes_through_and_ends_the_span(on):
    found = collection()
    with pytest.raises(Exception) as off:
        Collection.query.__wrapped__(found, query_embeddings=[[1.0, 0.0]], n_results=1)  # wrong dimension
    on.clear()
    with pytest.raises(type(off.value)) as raised:
        found.query(query_embeddings=[[1.0, 0.0]], n_results=1)
    assert str(raised.value) == str(off.value)
    assert on.one("retrieve").status.status_code.name == "ERROR"


def test_redact_mode_exports_no_document_text_or_query(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "PLANTED-MARKER-5583"
    found = chromadb.EphemeralClient().get_or_create_collection("kb_redact", embedding_function=WordCounts())
    found.upsert(ids=["a", "b"], documents=[f"refund {marker}", f"credit {marker}"])
    ragtrace.instrument("chroma")
    try:
        result = found.query(query_texts=[f"refund {marker}"], n_results=2)
    finally:
        ragtrace.uninstrument("chroma")
    assert all(marker in text for text in result["documents"][0])
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported
    assert list(spans.one("retrieve").attributes["rag.retrieval.chunk_ids"]) == ["a", "b"]


@pytest.fixture(scope="module")
def chroma_server(tmp_path_factory) -> Iterator[int]:
    """A real Chroma server (``chroma run``, what chromadb installs) on a free loopback port, for
    the async client, which has no in-process mode."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    path = tmp_path_factory.mktemp("chroma")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "chroma"), "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=(path / "server.log").open("w"),
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    pytest.fail(f"chroma run did not start: {(path / 'server.log').read_text()[-2000:]}")
                time.sleep(0.2)
        yield port
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_the_async_client_records_each_query_at_its_await(spans, chroma_server):
    """``AsyncHttpClient`` against a real server: two queries gathered join one root (opened at
    the call, in the caller's context); the app gets the same results as with ragtrace off."""

    async def run() -> list:
        client = await chromadb.AsyncHttpClient(host="127.0.0.1", port=chroma_server)
        found = await client.get_or_create_collection("kb_async", configuration={"hnsw": {"space": "cosine"}}, embedding_function=None)
        await found.upsert(ids=list(RECORDS), embeddings=[WordCounts()([text])[0] for text in RECORDS.values()], documents=list(RECORDS.values()))
        first, second = await asyncio.gather(
            found.query(query_embeddings=[[1.0, 0.0, 0.0]], n_results=2),
            found.query(query_embeddings=[[0.0, 0.0, 1.0]], n_results=1),
        )
        return [first["ids"], first["distances"], second["ids"]]

    off = asyncio.run(run())
    assert ragtrace.instrument("chroma") == ["chroma"]
    try:
        on = asyncio.run(run())
    finally:
        ragtrace.uninstrument("chroma")
    assert on == off and off[0] == [["a", "b"]] and off[2] == [["c"]]
    auto_root.end_open()
    root = spans.one("pipeline")
    retrievals = spans.by_stage("retrieve")
    assert sorted(list(r.attributes["rag.retrieval.chunk_ids"]) for r in retrievals) == [["a", "b"], ["c"]]
    assert {r.parent.span_id for r in retrievals} == {root.context.span_id}
    first = next(r for r in retrievals if len(r.attributes["rag.retrieval.chunk_ids"]) == 2)
    assert all(math.isclose(s, want, abs_tol=1e-5) for s, want in zip(scores(first), [1.0, 1 / math.sqrt(2)]))
    assert first.attributes["rag.retrieval.score_kind"] == "similarity"


def test_uninstrument_restores_chroma(spans):
    from chromadb.api.models.AsyncCollection import AsyncCollection

    originals = {cls: vars(cls)["query"] for cls in (Collection, AsyncCollection)}
    ragtrace.instrument("chroma")
    assert all(vars(cls)["query"] is not original for cls, original in originals.items())
    ragtrace.uninstrument("chroma")
    assert all(vars(cls)["query"] is original for cls, original in originals.items())
    collection().query(query_texts=[QUESTION])
    assert spans.all() == []
