"""Rows of traces from other instrumentations (OpenInference, OpenLLMetry, plain ``gen_ai.*``).

They record no inclusion: the retrieved chunk text is located in the prompt (``locate.locate``)
and citations are parsed from the output (``answer.score``, the rule the SDK applies), and every figure is marked
*inferred*. When even that is impossible the row says why, and is not measurable.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .._internal import names
from .._internal.core.assembly import Placement
from .._internal.core.locate import locate
from .._internal.core.chunks import Chunk, to_chunk
from .._internal.core.answer import score
from .._internal.core.figures import Answer, compute
from .row import (
    SOURCE_GEN_AI,
    SOURCE_OPENINFERENCE,
    SOURCE_OPENLLMETRY,
    SOURCE_UNKNOWN,
    STATUS_INCOMPLETE,
    STATUS_NO_CHUNK_TEXT,
    STATUS_NO_PROMPT,
    STATUS_PROMPT_TOO_LARGE,
    Row,
    end_order,
    not_measurable,
    retrieval_facts,
)
from .spans import Span, Trace

MAX_PROMPT_CHARS = 1_000_000  # larger prompts are not searched (locate is linear but not free)
_MAX_INDEXED = 10_000  # cap on flattened list attributes (retrieval.documents.{i}...)


@dataclass(slots=True)
class Inference:
    """A trace from another instrumentation: its row, and the inclusion its figures rest on."""

    row: Row
    answers: list[Answer]  # each with the placements located in its prompt and its cited ids
    contexts: list[list[Placement]]  # located contexts no answer was read for


def foreign_row(trace: Trace) -> Row | None:
    """The run of a trace from another instrumentation; None when the trace holds neither a
    retrieval nor a model call, so it is no pipeline run."""
    inference = infer(trace)
    return None if inference is None else inference.row


def infer(trace: Trace) -> Inference | None:
    """``foreign_row``'s row with the located placements and citations behind it (what
    ``bench/bench_accuracy.py`` scores the inferred method on)."""
    spans = trace.spans
    roots = [s for s in spans if s.local_root]
    anchor = min(roots or spans, key=lambda s: s.start or 0)
    row = Row(trace.trace_id, anchor.span_id, anchor.where, time=anchor.start, inferred=True)
    row.source = _source_of(spans)
    row.pipeline = (
        anchor.get_str(names.TRACELOOP_WORKFLOW_NAME) or anchor.get_str(names.GEN_AI_WORKFLOW_NAME) or anchor.name or None
    )
    query = anchor.get_str(names.OI_INPUT_VALUE) if roots else None

    ordered = sorted(spans, key=end_order)
    retrievals: list[list[Chunk]] = []
    unreadable = 0
    generations: list[Span] = []
    for span in ordered:
        documents = _documents(span)
        if documents is not None:
            chunks = []
            for item in documents:
                chunk = to_chunk(item, len(chunks) + 1)
                if chunk is None:
                    unreadable += 1
                else:
                    chunks.append(chunk)
            retrievals.append(chunks)
            top_k = span.get_int(names.GEN_AI_RETRIEVAL_TOP_K) or span.get_int(names.DB_VECTOR_QUERY_TOP_K)
            if top_k is not None:
                row.top_k = max(row.top_k or 0, top_k)
            if query is None:
                query = span.get_str(names.GEN_AI_RETRIEVAL_QUERY_TEXT) or span.get_str(names.OI_INPUT_VALUE)
        elif _is_generation(span):
            generations.append(span)
    if not retrievals and not generations:
        return None  # index building, embeddings alone, other work: not a pipeline run
    row.query = query

    answers, contexts, reason = _infer(retrievals, generations, row, {span.span_id: span for span in spans} if len(generations) > 1 else {})
    result = compute(retrievals, answers, contexts=contexts, unreadable=unreadable)
    retrieval_facts(row, retrievals, result, answers, contexts)
    row.figures, row.status = result.values, list(result.status)
    if answers or contexts:
        row.inclusion = names.INCLUSION_INFERRED
    if reason is not None:
        row.status = [s for s in row.status if s not in ("no_context", "no_answer")]
        not_measurable(row, reason)
    elif not trace.has_root:
        not_measurable(row, STATUS_INCOMPLETE)
    return Inference(row, answers, contexts)


def _source_of(spans: Iterable[Span]) -> str:
    found = SOURCE_UNKNOWN
    for span in spans:
        attrs = span.attrs
        if names.OI_SPAN_KIND in attrs:
            return SOURCE_OPENINFERENCE
        if names.TRACELOOP_SPAN_KIND in attrs or names.LLM_REQUEST_TYPE in attrs or names.indexed(names.GEN_AI_PROMPT, 0, names.LEGACY_MESSAGE_CONTENT) in attrs:
            found = SOURCE_OPENLLMETRY
        elif found == SOURCE_UNKNOWN and names.GEN_AI_OPERATION_NAME in attrs:
            found = SOURCE_GEN_AI
    return found


def _documents(span: Span) -> list[dict[str, Any]] | None:
    """The retrieved documents of a retrieval span of any known vocabulary, or None."""
    attrs = span.attrs
    kind = span.get(names.OI_SPAN_KIND)
    if kind == names.OI_KIND_RERANKER:
        return None
    first_id, _, first_content = names.document_keys(names.OI_RETRIEVAL_DOCUMENTS, 0)
    if kind == names.OI_KIND_RETRIEVER or first_id in attrs or first_content in attrs:
        documents = []
        for index in range(_MAX_INDEXED):
            id_key, score_key, content_key = names.document_keys(names.OI_RETRIEVAL_DOCUMENTS, index)
            if not (id_key in attrs or content_key in attrs or score_key in attrs):
                break
            documents.append({"id": span.get(id_key), "content": span.get(content_key), "score": span.get(score_key)})
        return documents
    operation = span.get(names.GEN_AI_OPERATION_NAME)
    if operation == names.OP_RERANK:  # its documents are the retrieved ones reordered, not more of them
        return None
    if names.GEN_AI_RETRIEVAL_DOCUMENTS in attrs or operation == names.OP_RETRIEVAL:
        raw = span.get(names.GEN_AI_RETRIEVAL_DOCUMENTS)
        parsed = _json(raw, span, names.GEN_AI_RETRIEVAL_DOCUMENTS) if isinstance(raw, str) else raw
        if isinstance(parsed, list):
            return [item for item in parsed if item is not None]
        return [] if raw is None and names.GEN_AI_RETRIEVAL_DOCUMENTS not in attrs else None
    if names.DB_SYSTEM in attrs and span.events:
        documents = []
        for event in span.event_attributes(names.DB_QUERY_RESULT_EVENT):
            ids, texts = event.get(names.DB_QUERY_RESULT_ID), event.get(names.DB_QUERY_RESULT_DOCUMENT)
            scores = event.get(names.DB_QUERY_RESULT_SCORE)
            if scores is None:
                scores = event.get(names.DB_QUERY_RESULT_DISTANCE)
            if isinstance(ids, list):  # one event holding parallel lists
                for index, chunk_id in enumerate(ids):
                    documents.append({"id": chunk_id, "content": _at(texts, index), "score": _at(scores, index)})
            else:
                documents.append({"id": ids, "content": texts, "score": scores})
        return documents if documents else None
    return None


def _at(values: Any, index: int) -> Any:
    return values[index] if isinstance(values, list) and index < len(values) else None


def _json(text: Any, span: Span, key: str) -> Any:
    if not isinstance(text, str):
        return None
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        span.source.diagnostics.warn("bad attribute", span.where, f"span {span.span_id}: {key} is not valid JSON; ignored")
        return None


def _is_generation(span: Span) -> bool:
    attrs = span.attrs
    if span.get(names.OI_SPAN_KIND) == names.OI_KIND_LLM:
        return True
    if span.get(names.GEN_AI_OPERATION_NAME) in names.GENERATION_OPERATIONS:
        return True
    if span.get(names.LLM_REQUEST_TYPE) in ("chat", "completion"):
        return True
    return (
        names.GEN_AI_INPUT_MESSAGES in attrs
        or names.indexed(names.GEN_AI_PROMPT, 0, names.LEGACY_MESSAGE_CONTENT) in attrs
        or names.indexed(names.OI_LLM_INPUT_MESSAGES, 0, names.OI_MESSAGE_CONTENT) in attrs
        or names.GEN_AI_PROMPT in attrs
        or names.AI_PROMPT in attrs
        or names.AI_PROMPT_MESSAGES in attrs
    )


def _messages_from_indexed(span: Span, prefix: str, role_key: str, content_key: str) -> list[dict[str, Any]] | None:
    messages = []
    for index in range(_MAX_INDEXED):
        content = span.get(names.indexed(prefix, index, content_key))
        role = span.get(names.indexed(prefix, index, role_key))
        if content is None and role is None:
            break
        messages.append({"role": role if isinstance(role, str) else "user", "content": content if isinstance(content, str) else ""})
    return messages or None


def _genai_messages(span: Span, key: str) -> list[dict[str, Any]] | None:
    """GenAI ``{role, parts: [{type: text, content}]}`` messages (or ``{role, content}``) as chat messages."""
    parsed = _json(span.get(key), span, key) if key in span.attrs else None
    return _chat(parsed)


def _chat(parsed: Any) -> list[dict[str, Any]] | None:
    """Parsed JSON messages as chat messages: ``{role, content}`` where content is a string, or
    text parts (GenAI ``parts: [{type, content}]``, the Vercel AI SDK's ``content: [{type, text}]``)."""
    if not isinstance(parsed, list):
        return None
    messages = []
    for message in parsed:
        if not isinstance(message, dict):
            continue
        content = message.get("content")
        if not isinstance(content, str):
            parts = content if isinstance(content, list) else message.get("parts") or ()
            pieces = []
            for part in parts:
                if isinstance(part, dict):
                    text = part.get("content") if isinstance(part.get("content"), str) else part.get("text")
                    if isinstance(text, str):
                        pieces.append(text)
            content = "\n".join(pieces)
        messages.append({"role": str(message.get("role") or "user"), "content": content})
    return messages or None


def _flat_prompt(span: Span) -> Any:
    """A prompt written as one string attribute: ``gen_ai.prompt`` (text, or JSON messages), the
    Vercel AI SDK's ``ai.prompt.messages`` (JSON messages) or ``ai.prompt`` (JSON ``{system,
    prompt, messages}``, or text). Chat messages or a string, or None."""
    for key in (names.AI_PROMPT_MESSAGES, names.GEN_AI_PROMPT, names.AI_PROMPT):
        value = span.get(key)
        if not isinstance(value, str):
            continue
        if value.lstrip()[:1] not in ("[", "{"):
            return value
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        if isinstance(parsed, dict):
            messages = [{"role": "system", "content": parsed["system"]}] if isinstance(parsed.get("system"), str) else []
            messages += _chat(parsed.get("messages")) or []
            prompt = parsed.get("prompt")
            if isinstance(prompt, str):
                messages.append({"role": "user", "content": prompt})
            else:
                messages += _chat(prompt) or []
            if messages:
                return messages
        elif (messages := _chat(parsed)) is not None:
            return messages
        return value
    return None


def _prompt(span: Span) -> Any:
    """The prompt of a model call: chat messages or a string, or None."""
    found = (
        _messages_from_indexed(span, names.OI_LLM_INPUT_MESSAGES, names.OI_MESSAGE_ROLE, names.OI_MESSAGE_CONTENT)
        or _genai_messages(span, names.GEN_AI_INPUT_MESSAGES)
        or _messages_from_indexed(span, names.GEN_AI_PROMPT, names.LEGACY_MESSAGE_ROLE, names.LEGACY_MESSAGE_CONTENT)
    )
    if found is not None:
        return found
    found = _flat_prompt(span)
    if found is not None:
        return found
    value = span.get(names.OI_INPUT_VALUE)
    if isinstance(value, str) and span.get(names.OI_INPUT_MIME_TYPE) == names.MIME_JSON:
        try:
            parsed = json.loads(value)
        except (ValueError, RecursionError):
            return value
        messages = parsed.get("messages") if isinstance(parsed, dict) else parsed
        if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
            return [{"role": str(m.get("role") or "user"), "content": m.get("content") if isinstance(m.get("content"), str) else ""} for m in messages]
    return value if isinstance(value, str) else None


def _output(span: Span) -> str | None:
    for messages in (
        _messages_from_indexed(span, names.OI_LLM_OUTPUT_MESSAGES, names.OI_MESSAGE_ROLE, names.OI_MESSAGE_CONTENT),
        _genai_messages(span, names.GEN_AI_OUTPUT_MESSAGES),
        _messages_from_indexed(span, names.GEN_AI_COMPLETION, names.LEGACY_MESSAGE_ROLE, names.LEGACY_MESSAGE_CONTENT),
    ):
        if messages:
            return "\n".join(m["content"] for m in messages if m["content"])
    for key in (names.OI_OUTPUT_VALUE, names.GEN_AI_COMPLETION, names.AI_RESPONSE_TEXT, names.AI_RESULT_TEXT):
        value = span.get(key)
        if isinstance(value, str):
            return value
    return None


def _prompt_size(prompt: Any) -> int:
    if isinstance(prompt, str):
        return len(prompt)
    return sum(len(m.get("content") or "") for m in prompt)


def _outermost_calls_dropped(located: list[tuple[Span, Any]], spans_by_id: dict[str, Span]) -> list[tuple[Span, Any]]:
    """One model call per chain of nested model-call spans (LlamaIndex's ``predict`` around
    ``complete``, the Vercel AI SDK's ``ai.generateText`` around ``doGenerate``): the innermost
    with an answer, else the innermost. Each inner span names the same call as the outer one."""
    ids = {span.span_id for span, _ in located}
    answered = {span.span_id for span, _ in located if _output(span) is not None}
    dropped: set[str] = set()
    for span, _ in located:
        parent, seen = span.parent_id, 0
        while parent and seen < 256:  # bounded: a parent cycle in bad input must not hang
            if parent in ids:
                dropped.add(parent if span.span_id in answered or parent not in answered else span.span_id)
            ancestor = spans_by_id.get(parent)
            parent, seen = (ancestor.parent_id if ancestor is not None else ""), seen + 1
    return [(span, record) for span, record in located if span.span_id not in dropped]


def _infer(
    retrievals: list[list[Chunk]], generations: list[Span], row: Row, spans_by_id: dict[str, Span]
) -> tuple[list[Answer], list[list[Placement]], str | None]:
    """Answers (and unanswered contexts) inferred by locating chunk text in the prompts.

    Returns the reason the figures can't be inferred, when they can't.
    """
    if not retrievals:
        return [], [], None  # compute says no_retrieval
    unique: dict[str, Chunk] = {}
    for retrieval in retrievals:
        for chunk in retrieval:
            if chunk.content and chunk.id not in unique:
                unique[chunk.id] = chunk
    # a retrieval of 0 chunks puts none in any prompt: the answer is still read and scored against
    # an empty context (compute says empty_retrieval, empty_context), as the SDK scores it
    if not unique and any(retrievals):
        return [], [], STATUS_NO_CHUNK_TEXT
    chunks = sorted(unique.values(), key=lambda c: c.rank)
    retrieved = {chunk.id for retrieval in retrievals for chunk in retrieval}

    located = []  # (generation span, record)
    too_large = False
    for span in generations:
        prompt = _prompt(span)
        if prompt is None:
            continue
        if _prompt_size(prompt) > MAX_PROMPT_CHARS:
            too_large = True
            span.source.diagnostics.warn(
                "huge attribute",
                span.where,
                f"span {span.span_id}: prompt of {_prompt_size(prompt):,} characters is too large to search for chunks; skipped",
            )
            continue
        located.append((span, locate(chunks, prompt)))
    if not located:
        return [], [], STATUS_PROMPT_TOO_LARGE if too_large else STATUS_NO_PROMPT
    if len(located) > 1:
        located = _outermost_calls_dropped(located, spans_by_id)

    with_chunks = [(span, record) for span, record in located if record.placements]
    # When some call shows the chunks as labelled sources, a call that shows them under no label at
    # all (an LLM grader given every chunk) is not the answer's: the rule locate applies to one
    # prompt's chunks (``outside_sources``), across calls.
    labelled = [(span, record) for span, record in with_chunks if any(p.label for p in record.placements)]
    chosen = labelled or with_chunks or [located[-1]]
    outputs = [_output(span) for span, _ in chosen]
    # a call that wrote no text (an agent's tool call) beside one that did is no answer: its
    # prompt (an earlier round) is not the answer's context
    spoke = any(text is not None and text.strip() for text in outputs)
    if _answer_call_ambiguous([record.placements for (_, record), text in zip(chosen, outputs) if text is not None and (text.strip() or not spoke)]):
        return [], [], names.STATUS_ANSWER_CALL_AMBIGUOUS
    answers: list[Answer] = []
    contexts: list[list[Placement]] = []
    for (span, record), text in zip(chosen, outputs):
        if text is None or (spoke and not text.strip()):
            if not record.not_located:  # a failed search is no empty context
                contexts.append(record.placements)
            continue
        scored = score(text, record, retrieved, None)  # the SDK's own rule: one prompt, one verdict
        citations = scored.citations
        answers.append(scored.answer)
        row.answers += 1
        if citations is not None and not citations.conformant:
            row.nonconformant += 1
    return answers, ([] if answers else contexts), None


def _answer_call_ambiguous(contexts: list[list[Placement]]) -> bool:
    """Whether two calls that wrote text show some of the same chunks but not the same ones.

    The answer and an LLM grader shown every retrieved chunk, or the answer and a relevance grader
    shown one chunk at a time, share chunks, and from the trace alone (no role, the same label
    style or none) either could be the answer: counting both would credit the grader's chunks as
    in context, picking one would be a guess. Calls showing the same chunks give the same context
    whichever answered; calls showing disjoint chunks (a refine or map step per window of chunks)
    are steps of one answer over their union.
    """
    shown = [frozenset(p.chunk_id for p in placements) for placements in contexts]
    return any(a & b and a != b for i, a in enumerate(shown) for b in shown[i + 1 :])
