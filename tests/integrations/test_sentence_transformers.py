"""The sentence-transformers integration (``CrossEncoder.rank`` / ``predict``) against a stand-in
package. The real one needs PyTorch (gigabytes) and model weights from a hub, neither within
reach here, so ``tests/integrations/standins`` holds a ``sentence_transformers`` package with a
distribution record (``sentence-transformers 5.1.2``) and a ``CrossEncoder`` of the real class's
path and contract whose scores are word counts. The fixture puts it on ``sys.path``, and
``ragtrace.instrument("sentence_transformers")`` takes it through the whole path a real install
takes: distribution found, version checked, class imported by its path, methods wrapped.

Hand-worked truth. Qdrant (local mode, Cosine) finds 1, 2, 3 for the query vector; the app
reranks their texts for "refund card days" with ``rank(top_k=2)``: 1 = "Refunds reach the original
card within 5 days." holds card and days (2), 2 = "Store credit ... instead of a refund." holds
refund (1), 3 = shipping holds none (0). So the rerank keeps 1, 2 (scores 2, 1) and drops 3; the
app shows them as [1], [2]; the answer cites [1]. Retrieved 3, in context 2, cited 1.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from loopback import ANSWER

import ragtrace

from .test_openai import client as openai_client
from .test_qdrant import QUERY, TEXTS, messages, qdrant

STANDINS = Path(__file__).parent / "standins"
RERANK_QUERY = "refund card days"


def _forget_package() -> dict:
    return {name: sys.modules.pop(name) for name in list(sys.modules) if name.split(".")[0] == "sentence_transformers"}


@contextmanager
def on_path() -> Iterator[None]:
    """The stand-in package importable as ``sentence_transformers`` (and its distribution found);
    afterwards, ragtrace off for it and whatever was imported before put back."""
    saved = _forget_package()
    sys.path.insert(0, str(STANDINS))
    try:
        yield
    finally:
        ragtrace.uninstrument("sentence_transformers")
        sys.path.remove(str(STANDINS))
        _forget_package()
        sys.modules.update(saved)


@pytest.fixture
def standin() -> Iterator[type]:
    with on_path():
        from sentence_transformers import CrossEncoder

        yield CrossEncoder


def app(url: str, cross_encoder: type) -> tuple[list, str]:
    """Retrieve with Qdrant, rerank with a CrossEncoder as sentence-transformers' docs do, answer."""
    points = qdrant().query_points("kb", query=QUERY, limit=3).points
    texts = [p.payload["text"] for p in points]
    ranked = cross_encoder("cross-encoder/ms-marco-MiniLM-L6-v2").rank(RERANK_QUERY, texts, top_k=2)
    kept = [texts[r["corpus_id"]] for r in ranked]
    answer = openai_client(url).chat.completions.create(model="gpt-4o-mini", messages=messages(kept)).choices[0].message.content
    return [(r["corpus_id"], float(r["score"])) for r in ranked], answer


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def reranker_documents(span, which: str) -> list[tuple[str, float | None]]:
    found, i = [], 0
    while f"reranker.{which}_documents.{i}.document.id" in span.attributes:
        found.append((span.attributes[f"reranker.{which}_documents.{i}.document.id"], span.attributes.get(f"reranker.{which}_documents.{i}.document.score")))
        i += 1
    return found


def test_retrieve_rerank_answer_is_one_pipeline_with_the_rerank_between(spans, chat_server, standin):
    url, _ = chat_server
    off = app(url, standin)
    assert off == ([(0, 2.0), (1, 1.0)], ANSWER)
    assert spans.all() == []
    assert ragtrace.instrument("qdrant", "sentence_transformers", "openai") == ["qdrant", "sentence_transformers", "openai"]
    try:
        on = app(url, standin)
    finally:
        ragtrace.uninstrument("qdrant", "sentence_transformers", "openai")
    assert on == off
    root = spans.one("pipeline")
    reranked = spans.one("rerank")  # one: rank's own predict call is part of it
    assert reranked.parent.span_id == root.context.span_id
    attributes = reranked.attributes
    assert reranked.name == "rerank cross-encoder/ms-marco-MiniLM-L6-v2"
    assert attributes["gen_ai.provider.name"] == "sentence_transformers" and attributes["rag.rerank.top_n"] == 2
    assert (attributes["rag.rerank.input_count"], attributes["rag.rerank.output_count"]) == (3, 2)
    assert list(attributes["rag.rerank.output_ids"]) == ["1", "2"]  # the retrieved points' ids, matched by text
    assert [i for i, _ in reranker_documents(reranked, "input")] == ["1", "2", "3"]
    assert reranker_documents(reranked, "output") == [("1", 2.0), ("2", 1.0)]
    assert attributes["input.value"] == RERANK_QUERY
    retrieved, generated = spans.one("retrieve"), spans.one("generate")
    assert retrieved.end_time <= reranked.start_time and reranked.end_time <= generated.start_time
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (3, 2, 1, [1])


def test_predict_on_pairs_of_one_query_is_a_rerank_of_all_by_score(spans, standin):
    model = standin("cross-encoder/ms-marco-MiniLM-L6-v2")
    pairs = [(RERANK_QUERY, TEXTS[i]) for i in (3, 1, 2)]
    off = model.predict(pairs).tolist()
    ragtrace.instrument("sentence_transformers")
    on = model.predict(pairs).tolist()
    assert on == off == [0.0, 2.0, 1.0]
    reranked = spans.one("rerank")
    by_text = {ragtrace_id_of(TEXTS[i]): i for i in TEXTS}
    assert [by_text[i] for i in reranked.attributes["rag.rerank.output_ids"]] == [1, 2, 3]  # all three, highest score first
    assert [score for _, score in reranker_documents(reranked, "output")] == [2.0, 1.0, 0.0]
    assert model.calls == ["predict", "predict"]


def ragtrace_id_of(text: str) -> str:
    """The id ragtrace gives an id-less text outside any retrieval: its keyed digest."""
    from ragtrace._internal.core.keyed import content_digest

    return content_digest(text)


@pytest.mark.parametrize(
    "call",
    [
        lambda model: model.predict([("what is a refund", TEXTS[1]), ("what is shipping", TEXTS[3])]),  # two queries: similarity
        lambda model: model.predict((RERANK_QUERY, TEXTS[1])),  # one pair
    ],
    ids=["pairs-of-different-queries", "a-single-pair"],
)
def test_predict_that_is_not_a_rerank_is_not_traced(spans, standin, call):
    ragtrace.instrument("sentence_transformers")
    call(standin("cross-encoder/stsb-roberta-base"))
    assert spans.all() == []


def test_a_model_with_several_labels_is_not_a_reranker(spans, standin):
    ragtrace.instrument("sentence_transformers")
    scores = standin("nli-deberta", num_labels=3).predict([(RERANK_QUERY, TEXTS[1]), (RERANK_QUERY, TEXTS[2])])
    assert scores.shape == (2, 2)
    assert spans.all() == []


def test_the_models_error_passes_through_and_ends_the_span(spans, standin):
    ragtrace.instrument("sentence_transformers")
    with pytest.raises(ValueError, match="one-label"):
        standin("nli-deberta", num_labels=3).rank(RERANK_QUERY, [TEXTS[1]])
    assert spans.one("rerank").status.status_code.name == "ERROR"


def test_redact_mode_exports_no_document_text_or_query(spans, standin):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "PLANTED-MARKER-7719"
    ragtrace.instrument("sentence_transformers")
    ranked = standin("m").rank(f"refund {marker}", [f"refund {marker} one", f"{marker} two"], return_documents=True)
    assert [r["corpus_id"] for r in ranked] == [0, 1] and marker in ranked[0]["text"]
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported
    assert spans.one("rerank").attributes["rag.rerank.output_count"] == 2


def test_uninstrument_restores_the_class(spans, standin):
    originals = {name: vars(standin)[name] for name in ("rank", "predict")}
    assert ragtrace.instrument("sentence_transformers") == ["sentence_transformers"]
    assert all(vars(standin)[name] is not original for name, original in originals.items())
    ragtrace.uninstrument("sentence_transformers")
    assert all(vars(standin)[name] is original for name, original in originals.items())
    standin("m").rank(RERANK_QUERY, [TEXTS[1]])
    assert spans.all() == []


def test_instrument_never_imports_it_the_class_is_wrapped_when_the_app_does(spans):
    """sentence-transformers imports PyTorch (seconds): ``instrument()`` leaves that to the app and
    wraps the class when the app imports it; an ``uninstrument()`` before that leaves it alone."""
    with on_path():
        assert ragtrace.instrument("sentence_transformers") == ["sentence_transformers"]
        assert "sentence_transformers" not in sys.modules
        from sentence_transformers import CrossEncoder

        CrossEncoder("m").rank(RERANK_QUERY, [TEXTS[1], TEXTS[3]])
        assert list(spans.one("rerank").attributes["rag.rerank.output_ids"]) == [ragtrace_id_of(TEXTS[1]), ragtrace_id_of(TEXTS[3])]
        ragtrace.uninstrument("sentence_transformers")
        _forget_package()
        spans.clear()
        ragtrace.instrument("sentence_transformers")
        ragtrace.uninstrument("sentence_transformers")  # before the app imports it: the pending hook wraps nothing
        from sentence_transformers import CrossEncoder as Again

        Again("m").rank(RERANK_QUERY, [TEXTS[1]])
        assert spans.all() == []
