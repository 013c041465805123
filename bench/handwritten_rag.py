"""The overhead benchmark's workload instrumented by hand: the OpenTelemetry SDK and the standard
library only, every attribute computed at run time from the pipeline's own inputs.

This is what an engineer instrumenting this one pipeline by hand would write to get the spans
ragtrace emits (same names, kinds, parents, attribute keys and values, events): the prompt the
application needs anyway is built here and its bookkeeping (offsets, token counts, labels) is
taken along the way; ids, scores, ranks, the documents JSON, the OpenInference per-document keys,
dropped chunks, citations of the answer, the per-trace figures and their evaluation events are
worked out from the inputs. It is written for this pipeline, not in general: chunks are dicts
with ``id``/``score``/``content``, citations are ``[n]`` markers, the template is fixed and the
budget never truncates a chunk (one over the budget is dropped whole). No ragtrace imports: it is
the baseline ragtrace is measured against (``bench/bench_overhead.py`` checks the spans are
identical before timing anything).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from typing import Any

from opentelemetry import trace

CLIENT, INTERNAL = trace.SpanKind.CLIENT, trace.SpanKind.INTERNAL
TEXT = "text/plain"

WORKFLOW, VERSION = "support-qa", "v2"
EMBED_MODEL, EMBED_PROVIDER = "text-embedding-3-small", "openai"
DATA_SOURCE, TOP_K = "product-docs", 10
RERANK_MODEL, RERANK_PROVIDER, TOP_N = "bge-reranker-v2", "local", 5
CHAT_MODEL, CHAT_PROVIDER = "gpt-4o-mini", "openai"
MAX_TOKENS = 3000

# The key of rag.query.hash, given to ragtrace too (configure(hash_key=...)) so both sides agree.
HASH_KEY = b"bench-shared-hash-key"
REDACTED = "[redacted]"

# The prompt the application sends: sources as "[n] text" separated by a blank line.
TEMPLATE = (
    "Answer the question using only the sources below. Cite the sources you use as [n].\n\n"
    "Sources:\n{context}\n\nQuestion: {question}\nAnswer:"
)
PROMPT_HEAD, _, PROMPT_TAIL = TEMPLATE.partition("{context}")
SEPARATOR = "\n\n"

_TOKEN = re.compile(r"\w+|[^\w\s]")  # words and punctuation marks
_CITATION = re.compile(r"\[(\d+)\]")
# the ratios in [0, 1] reported as evaluations, in this order
EVALUATED = ("context_precision", "recall_proxy", "recall_proxy_weighted", "context_utilization")


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _label(score: float) -> str:
    if score <= 0.0:
        return "none"
    if score < 1 / 3:
        return "low"
    if score < 2 / 3:
        return "medium"
    return "high"


def query_hash(query: str) -> str:
    """Keyed BLAKE2b of the lower-cased, whitespace-collapsed query (joins redacted traces to a
    golden set): 8 bytes, the query purpose as personalisation, the shared key."""
    hasher = hashlib.blake2b(" ".join(query.lower().split()).encode(), digest_size=8, key=HASH_KEY, person=b"ragtrace-query")
    return hasher.hexdigest()


def run(
    tracer: trace.Tracer,
    query: str,
    docs: Sequence[dict[str, Any]],
    reranked: Sequence[dict[str, Any]],
    answer: str,
    vector: Sequence[float],
    *,
    content: bool = True,
    openinference: bool = True,
    tick: Callable[[], None] | None = None,
) -> str:
    """The six spans of one pipeline run; returns the prompt. ``content=False`` is redact mode (no
    query, chunk, prompt or answer text on spans). ``tick`` is called after each stage (the
    benchmark's per-stage clock)."""
    with tracer.start_as_current_span(f"invoke_workflow {WORKFLOW}", kind=INTERNAL) as root:
        attrs: dict[str, Any] = {
            "rag.stage": "pipeline",
            "gen_ai.operation.name": "invoke_workflow",
            "gen_ai.workflow.name": WORKFLOW,
            "rag.content_mode": "full" if content else "redact",
            "rag.pipeline.version": VERSION,
            "rag.query.hash": query_hash(query),
        }
        if openinference:
            attrs["openinference.span.kind"] = "CHAIN"
            if content:
                attrs["input.value"] = query
                attrs["input.mime_type"] = TEXT
        root.set_attributes(attrs)
        if tick:
            tick()

        _embed(tracer, vector, openinference)
        if tick:
            tick()
        retrieved = _retrieve(tracer, query, docs, content, openinference)
        if tick:
            tick()
        _rerank(tracer, docs, reranked, openinference)
        if tick:
            tick()
        prompt, placed, context_span_id = _assemble(tracer, query, docs, reranked, content, openinference)
        if tick:
            tick()
        figures = _generate(tracer, prompt, answer, placed, retrieved, context_span_id, content, openinference)
        if tick:
            tick()

        attrs = {"rag.metrics.inclusion_method": "recorded", **figures}
        if openinference and content:
            attrs["output.value"] = answer
            attrs["output.mime_type"] = TEXT
        root.set_attributes(attrs)
        for name in EVALUATED:
            score = figures[f"rag.metrics.{name}"]
            root.add_event(
                "gen_ai.evaluation.result",
                {"gen_ai.evaluation.name": "ragtrace." + name, "gen_ai.evaluation.score.value": score, "gen_ai.evaluation.score.label": _label(score)},
            )
    return prompt


def _embed(tracer: trace.Tracer, vector: Sequence[float], openinference: bool) -> None:
    with tracer.start_as_current_span(f"embeddings {EMBED_MODEL}", kind=CLIENT) as span:
        input_tokens = 12  # what the embedding API reported
        attrs: dict[str, Any] = {
            "rag.stage": "embed",
            "gen_ai.operation.name": "embeddings",
            "gen_ai.provider.name": EMBED_PROVIDER,
            "gen_ai.request.model": EMBED_MODEL,
            "gen_ai.embeddings.dimension.count": len(vector),
            "gen_ai.usage.input_tokens": input_tokens,
        }
        if openinference:
            attrs["openinference.span.kind"] = "EMBEDDING"
            attrs["llm.token_count.prompt"] = input_tokens
            attrs["llm.token_count.total"] = input_tokens
        span.set_attributes(attrs)


def _retrieve(
    tracer: trace.Tracer, query: str, docs: Sequence[dict[str, Any]], content: bool, openinference: bool
) -> list[tuple[str, int, str]]:
    """(id, rank, content hash) of each retrieved chunk, for the figures."""
    with tracer.start_as_current_span(f"retrieval {DATA_SOURCE}", kind=CLIENT) as span:
        attrs: dict[str, Any] = {
            "rag.stage": "retrieve",
            "gen_ai.operation.name": "retrieval",
            "gen_ai.data_source.id": DATA_SOURCE,
            "gen_ai.retrieval.top_k": TOP_K,
            "gen_ai.retrieval.documents": _json([{"id": doc["id"], "score": doc["score"]} for doc in docs]),
            "rag.retrieval.chunk_ids": [doc["id"] for doc in docs],
            "rag.retrieval.result_count": len(docs),
            "rag.retrieval.top_score": max(doc["score"] for doc in docs),
        }
        if content:
            attrs["gen_ai.retrieval.query.text"] = query
        if openinference:  # ids and scores are in gen_ai.retrieval.documents: the text only
            attrs["openinference.span.kind"] = "RETRIEVER"
            for index, doc in enumerate(docs):
                attrs[f"retrieval.documents.{index}.document.content"] = doc["content"] if content else REDACTED
        span.set_attributes(attrs)
        return [
            (doc["id"], rank, hashlib.blake2b(doc["content"].encode(), digest_size=8).hexdigest())
            for rank, doc in enumerate(docs, 1)
        ]


def _documents(attrs: dict[str, Any], key: str, docs: Sequence[dict[str, Any]]) -> None:
    """OpenInference's flattened document list: ``key.{i}.document.id/score``."""
    for index, doc in enumerate(docs):
        prefix = f"{key}.{index}.document."
        attrs[prefix + "id"] = doc["id"]
        attrs[prefix + "score"] = doc["score"]


def _rerank(tracer: trace.Tracer, docs: Sequence[dict[str, Any]], reranked: Sequence[dict[str, Any]], openinference: bool) -> None:
    with tracer.start_as_current_span(f"rerank {RERANK_MODEL}", kind=CLIENT) as span:
        attrs: dict[str, Any] = {
            "rag.stage": "rerank",
            "gen_ai.operation.name": "rerank",
            "gen_ai.provider.name": RERANK_PROVIDER,
            "gen_ai.request.model": RERANK_MODEL,
            "rag.rerank.top_n": TOP_N,
            "rag.rerank.input_count": len(docs),
            "rag.rerank.output_count": len(reranked),
            "rag.rerank.output_ids": [doc["id"] for doc in reranked],
        }
        if openinference:  # the documents carry the input ids and the output scores
            attrs["openinference.span.kind"] = "RERANKER"
            attrs["reranker.model_name"] = RERANK_MODEL
            attrs["reranker.top_k"] = TOP_N
            _documents(attrs, "reranker.input_documents", docs)
            _documents(attrs, "reranker.output_documents", reranked)
        else:
            attrs["rag.rerank.input_ids"] = [doc["id"] for doc in docs]
            attrs["rag.rerank.output_scores"] = [doc["score"] for doc in reranked]
        span.set_attributes(attrs)


def _assemble(
    tracer: trace.Tracer,
    query: str,
    docs: Sequence[dict[str, Any]],
    reranked: Sequence[dict[str, Any]],
    content: bool,
    openinference: bool,
) -> tuple[str, dict[str, tuple[int, int]], str]:
    """The prompt, the placed chunks (id -> (position, tokens)) and the span's hex id."""
    with tracer.start_as_current_span("assemble_context", kind=INTERNAL) as span:
        pieces: list[str] = []
        placed: dict[str, tuple[int, int]] = {}
        starts: list[int] = []
        ends: list[int] = []
        tokens: list[int] = []
        dropped_ids: list[str] = []
        dropped_reasons: list[str] = []
        offset, used = len(PROMPT_HEAD), 0
        for doc in reranked:
            count = len(_TOKEN.findall(doc["content"]))
            if used + count > MAX_TOKENS:
                dropped_ids.append(doc["id"])
                dropped_reasons.append("over_budget")
                continue
            used += count
            position = len(pieces) + 1
            piece = f"[{position}] {doc['content']}"
            if pieces:
                offset += len(SEPARATOR)
            starts.append(offset + len(piece) - len(doc["content"]))
            ends.append(offset + len(piece))
            offset += len(piece)
            pieces.append(piece)
            tokens.append(count)
            placed[doc["id"]] = (position, count)
        prompt = PROMPT_HEAD + SEPARATOR.join(pieces) + PROMPT_TAIL.format(question=query)
        reranked_ids = {doc["id"] for doc in reranked}
        for doc in docs:
            if doc["id"] not in placed and doc["id"] not in dropped_ids:
                dropped_ids.append(doc["id"])
                dropped_reasons.append("not_added" if doc["id"] in reranked_ids else "reranked_out")
        positions = list(range(1, len(placed) + 1))
        attrs: dict[str, Any] = {
            "rag.stage": "assemble",
            "rag.context.chunk_ids": list(placed),
            "rag.context.positions": positions,
            "rag.context.labels": [str(p) for p in positions],
            "rag.context.char_starts": starts,
            "rag.context.char_ends": ends,
            "rag.context.chunk_tokens": tokens,
            "rag.context.truncated_count": 0,
            "rag.context.total_tokens": used,
            "rag.context.max_tokens": MAX_TOKENS,
            "rag.context.dropped_ids": dropped_ids,
            "rag.context.dropped_reasons": dropped_reasons,
            "rag.context.inclusion_method": "recorded",
        }
        if openinference:
            attrs["openinference.span.kind"] = "PROMPT"
            if content:
                attrs["output.value"] = prompt
                attrs["output.mime_type"] = TEXT
                attrs["llm.prompt_template.template"] = TEMPLATE
                attrs["llm.prompt_template.variables"] = _json({"question": query})
        span.set_attributes(attrs)
        return prompt, placed, format(span.get_span_context().span_id, "016x")


def _generate(
    tracer: trace.Tracer,
    prompt: str,
    answer: str,
    placed: dict[str, tuple[int, int]],
    retrieved: list[tuple[str, int, str]],
    context_span_id: str,
    content: bool,
    openinference: bool,
) -> dict[str, Any]:
    """The chat span, with citations and the figures; returns the figures (the root gets them too)."""
    with tracer.start_as_current_span(f"chat {CHAT_MODEL}", kind=CLIENT) as span:
        by_label = {str(position): chunk_id for chunk_id, (position, _) in placed.items()}
        cited: dict[str, None] = {}
        invalid: dict[str, None] = {}
        for label in _CITATION.findall(answer):
            if label in by_label:
                cited[by_label[label]] = None
            else:
                invalid[label] = None
        figures = _figures(retrieved, placed, list(cited), len(invalid))
        attrs: dict[str, Any] = {
            "rag.stage": "generate",
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": CHAT_PROVIDER,
            "gen_ai.request.model": CHAT_MODEL,
            "rag.generation.role": "answer",
            "rag.metrics.inclusion_method": "recorded",
            "rag.generation.context_span_id": context_span_id,
            "rag.citation.ids": list(cited),
            "rag.citation.valid_count": len(cited),
            "rag.citation.format": "inline" if cited or invalid else "none",
            "rag.citation.conformant": bool(cited or invalid),
            "rag.citation.invalid_count": len(invalid),
            # "[n]" labels name placed chunks only: none is out of context or unknown here
            "rag.citation.out_of_context_count": 0,
            "rag.citation.unknown_count": 0,
            "rag.citation.invalid_labels": list(invalid) if content else [],
            **figures,
        }
        if content:
            attrs["gen_ai.input.messages"] = _json([{"role": "user", "parts": [{"type": "text", "content": prompt}]}])
            attrs["gen_ai.output.messages"] = _json(
                [{"role": "assistant", "parts": [{"type": "text", "content": answer}], "finish_reason": "stop"}]
            )
        if openinference:
            attrs["openinference.span.kind"] = "LLM"
            if content:  # the messages are in gen_ai.*.messages: the answer once more, as OpenInference's output
                attrs["output.value"] = answer
                attrs["output.mime_type"] = TEXT
            else:
                attrs["llm.input_messages.0.message.role"] = "user"
                attrs["llm.input_messages.0.message.content"] = REDACTED
                attrs["llm.output_messages.0.message.role"] = "assistant"
                attrs["llm.output_messages.0.message.content"] = REDACTED
        span.set_attributes(attrs)
        return figures


def _figures(
    retrieved: list[tuple[str, int, str]], placed: dict[str, tuple[int, int]], cited: list[str], invalid: int
) -> dict[str, Any]:
    """retrieved R (unique ids, best rank), in context C, validly cited K, and the ratios."""
    rank: dict[str, int] = {}
    hashes: set[str] = set()
    duplicates = 0
    for chunk_id, chunk_rank, digest in retrieved:
        if chunk_id in rank:
            duplicates += 1
            rank[chunk_id] = min(rank[chunk_id], chunk_rank)
        else:
            rank[chunk_id] = chunk_rank
            if digest in hashes:
                duplicates += 1
            hashes.add(digest)
    cited = [c for c in cited if c in placed]
    return {
        "rag.metrics.retrieved": len(rank),
        "rag.metrics.duplicate_chunks": duplicates,
        "rag.metrics.in_context": len(placed),
        "rag.metrics.context_precision": sum(1 for c in placed if c in rank) / len(rank),
        "rag.metrics.cited": len(cited),
        "rag.metrics.invalid_citations": invalid,
        "rag.metrics.out_of_context_citations": 0,
        "rag.metrics.unknown_citations": 0,
        "rag.metrics.recall_proxy": sum(1 for c in cited if c in rank) / len(rank),
        "rag.metrics.recall_proxy_weighted": math.fsum(1.0 / rank[c] for c in cited if c in rank)
        / math.fsum(1.0 / r for r in rank.values()),
        "rag.metrics.context_utilization": len(cited) / len(placed),
        "rag.metrics.wasted_context_tokens": sum(tokens for c, (_, tokens) in placed.items() if c not in cited),
        "rag.metrics.cited_positions": sorted(placed[c][0] for c in cited),
    }
