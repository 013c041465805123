"""The FlashRank integration against the real ``flashrank`` package: ``Ranker.rerank`` is FlashRank's
own code, run on ``OfflineRanker``, a ``Ranker`` subclass whose constructor loads no weights (the
real one downloads a model from a hub, out of reach here). It gets a real ``tokenizers`` word-level
tokenizer built in memory and, for the ONNX session, a stand-in whose "model" reads the token ids
FlashRank feeds it: one logit per pair, the number of passage tokens that are query tokens, minus 1.
FlashRank's own code then turns logits into scores (sigmoid), writes them into the passages and
sorts them in place. Heavy: flashrank needs onnxruntime, installed on 3.11 only.

Hand-worked truth for "refund days": p1 "refund card days" shares 2 tokens (logit 1, score
sigmoid(1) = 0.7311), p2 "shipping" none (logit -1, 0.2689), p3 "credit refund" 1 (logit 0, 0.5).
New order p1, p3, p2.
"""

from __future__ import annotations

import logging
import math
from pathlib import Path

import pytest

flashrank = pytest.importorskip("flashrank", reason="flashrank is not installed (pyproject's test extra installs it on Python 3.11 only)")
import numpy as np
from flashrank import Ranker, RerankRequest
from tokenizers import Tokenizer, models, pre_tokenizers

import ragtrace

from .test_sentence_transformers import reranker_documents

pytestmark = pytest.mark.heavy

VOCABULARY = ["[PAD]", "[UNK]", "refund", "card", "days", "credit", "shipping"]
QUERY = "refund days"


class SharedTokens:
    """The ONNX session's stand-in: logits from the token ids, no weights."""

    def run(self, output_names, inputs):
        ids, mask = inputs["input_ids"], inputs["attention_mask"]
        types = inputs.get("token_type_ids", np.zeros_like(ids))
        logits = []
        for row, kind, keep in zip(ids, types, mask):
            query = {t for t, k, m in zip(row, kind, keep) if k == 0 and m and t > 1}
            shared = sum(1 for t, k, m in zip(row, kind, keep) if k == 1 and m and t in query)
            logits.append([shared - 1.0])
        return [np.array(logits, dtype=np.float32)]


class OfflineRanker(Ranker):
    """FlashRank's ``Ranker`` with everything but the weights: ``rerank`` is the real one."""

    def __init__(self, model_name: str = "ms-marco-TinyBERT-L-2-v2") -> None:
        tokenizer = Tokenizer(models.WordLevel({word: i for i, word in enumerate(VOCABULARY)}, unk_token="[UNK]"))
        tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self.logger = logging.getLogger("flashrank-test")
        self.model_dir = Path("/nonexistent") / model_name
        self.llm_model = None
        self.session = SharedTokens()
        self.tokenizer = tokenizer


def passages() -> list[dict]:
    return [
        {"id": "p1", "text": "refund card days", "meta": {"source": "a"}},
        {"id": "p2", "text": "shipping"},
        {"id": "p3", "text": "credit refund"},
    ]


def rerank(ranker: Ranker) -> list[tuple[str, float]]:
    return [(p["id"], round(float(p["score"]), 6)) for p in ranker.rerank(RerankRequest(query=QUERY, passages=passages()))]


def test_a_rerank_records_the_candidates_as_given_and_the_new_order(spans):
    ranker = OfflineRanker()
    off = rerank(ranker)
    sigmoid = [round(1 / (1 + math.exp(-x)), 6) for x in (1.0, 0.0, -1.0)]
    assert off == [("p1", sigmoid[0]), ("p3", sigmoid[1]), ("p2", sigmoid[2])]
    assert ragtrace.instrument("flashrank") == ["flashrank"]
    try:
        with ragtrace.rag_pipeline("kb", query=QUERY) as run:
            with ragtrace.retrieve(QUERY, data_source="kb") as found:
                found.record(passages())
            on = rerank(ranker)
    finally:
        ragtrace.uninstrument("flashrank")
    assert on == off
    reranked = spans.one("rerank")
    attributes = reranked.attributes
    assert reranked.name == "rerank ms-marco-TinyBERT-L-2-v2" and attributes["gen_ai.provider.name"] == "flashrank"
    assert attributes["input.value"] == QUERY and "rag.rerank.top_n" not in attributes
    assert [i for i, _ in reranker_documents(reranked, "input")] == ["p1", "p2", "p3"]  # as given, before FlashRank sorted them
    outputs = reranker_documents(reranked, "output")
    assert [i for i, _ in outputs] == ["p1", "p3", "p2"]
    assert all(math.isclose(score, want, abs_tol=1e-6) for (_, score), want in zip(outputs, sigmoid))
    assert run.metrics["retrieved"] == 3


def test_id_less_passages_get_the_id_their_text_was_retrieved_under(spans):
    ragtrace.instrument("flashrank")
    try:
        with ragtrace.rag_pipeline("kb"):
            with ragtrace.retrieve(QUERY) as found:
                found.record([{"id": f"doc-{p['id']}", "content": p["text"]} for p in passages()])
            OfflineRanker().rerank(RerankRequest(query=QUERY, passages=[{"text": p["text"]} for p in passages()]))
    finally:
        ragtrace.uninstrument("flashrank")
    assert list(spans.one("rerank").attributes["rag.rerank.output_ids"]) == ["doc-p1", "doc-p3", "doc-p2"]


def test_the_rankers_error_passes_through_and_ends_the_span(spans):
    ragtrace.instrument("flashrank")
    try:
        with pytest.raises(KeyError):
            OfflineRanker().rerank(RerankRequest(query=QUERY, passages=[{"id": "no-text"}]))
    finally:
        ragtrace.uninstrument("flashrank")
    assert spans.one("rerank").status.status_code.name == "ERROR"


def test_redact_mode_exports_no_passage_text_or_query(spans):
    ragtrace.configure(tracer_provider=spans.provider, capture_content="redact")
    marker = "PLANTED-MARKER-3107"
    ragtrace.instrument("flashrank")
    try:
        result = OfflineRanker().rerank(RerankRequest(query=f"refund {marker}", passages=[{"id": "a", "text": f"refund {marker}"}, {"id": "b", "text": marker}]))
    finally:
        ragtrace.uninstrument("flashrank")
    assert [p["id"] for p in result] == ["a", "b"]
    exported = repr([(s.name, dict(s.attributes), [e.attributes for e in s.events]) for s in spans.all()])
    assert marker not in exported


def test_uninstrument_restores_the_ranker(spans):
    original = vars(Ranker)["rerank"]
    ragtrace.instrument("flashrank")
    assert vars(Ranker)["rerank"] is not original
    ragtrace.uninstrument("flashrank")
    assert vars(Ranker)["rerank"] is original
    rerank(OfflineRanker())
    assert spans.all() == []
