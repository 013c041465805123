"""Cohere's v2 client (``cohere.ClientV2``, ``AsyncClientV2``, and ``client.v2`` of the v1 client):
chat with the app's documents, rerank and embed, as the same stage handles as an app's own code.

- ``chat(documents=[...])`` (and ``chat_stream``) is a RAG call with exact figures: a retrieve
  span of the documents the app's recorded retrievals don't already hold, an assemble span whose
  context the API states (``inclusion_method = "provider"``, each document once, in request
  order), and the generate span, whose citations are the response's ``message.citations``: each
  source of type ``document`` names a document by the id the app gave it (``ragtrace`` resolves
  an id-less document by the document the source carries back), and ``start`` / ``end`` place it
  in the answer. ``THINKING_CONTENT`` and ``PLAN`` citations cite the model's reasoning, not its
  answer: not counted. Tool sources (``type: "tool"``) are the results of tools the model called,
  not documents the app gave: not counted either. Without documents, a plain generate span.
- ``rerank`` is a rerank span: the documents as candidates, ``results[]{index,
  relevance_score}`` as the new order (a document whose text the pipeline retrieved keeps that
  chunk's id); ``meta.billed_units.search_units`` as ``rag.rerank.search_units``.
- ``embed`` is an embed span (dimensions, billed input tokens).
Outside a ``rag_pipeline`` a chat with documents is one pipeline (the automatic root); inside
one, its stages are the pipeline's.

Ids. A document's id is the app's (``{"id": ..., "data": ...}``); an id-less document (a string,
or data without an id) gets the keyed digest of its text, ragtrace's id for an id-less chunk. Its
text is its string, or its data's ``key: value`` lines (what the model reads of it): content,
recorded only under the content policy, as any chunk's.

Cohere has no callback system, so ``V2Client`` / ``AsyncV2Client`` methods are wrapped with
wrapt at class level (clients made before ``instrument()`` are covered). A stream reaches the app
behind the transparent recording proxy every traced stream gets (``passthrough``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import wrapt
from opentelemetry import trace

from .. import names
from ..stages.generation import Generate
from ..core.guard import guard
from ..core.keyed import content_digest
from ..core.outputs import get
from ..stages.passthrough import record_as_consumed
from ..core.provided import Source
from ..stages.retrieval import Embed, Rerank
from . import _provider
from ._anthropic_blocks import DOCUMENT, Request
from ._common import add_usage, call_wrappers, inside_generation, started, unwrap
from .base import RagtraceInstrumentor

_MODULE = "cohere.v2.client"
_CLASSES = ("V2Client", "AsyncV2Client")
_PROVIDER = "cohere"  # gen_ai.provider.name
ROOT_NAME = "cohere"  # the automatic root's name (gen_ai.workflow.name)
_LABEL = "cohere instrumentation"
_ANSWER_CITATIONS = frozenset({None, "TEXT_CONTENT"})


class CohereInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("cohere")``, or ``CohereInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "cohere"

    def _instrument(self, **kwargs: Any) -> None:
        provider = self.tracer_provider(kwargs)
        chat, achat = call_wrappers(lambda args, kwargs: _open_chat(kwargs, provider), _chatted, _LABEL)
        stream, _ = call_wrappers(lambda args, kwargs: _open_chat(kwargs, provider), _streamed, _LABEL)
        rerank, arerank = call_wrappers(lambda args, kwargs: _open_rerank(kwargs, provider), _reranked, _LABEL)
        embed, aembed = call_wrappers(lambda args, kwargs: _open_embed(kwargs, provider), _embedded, _LABEL)
        for cls, (chat_, rerank_, embed_) in zip(_CLASSES, ((chat, rerank, embed), (achat, arerank, aembed))):
            wrapt.wrap_function_wrapper(_MODULE, f"{cls}.chat", chat_)
            wrapt.wrap_function_wrapper(_MODULE, f"{cls}.chat_stream", stream)  # both return their stream at once
            wrapt.wrap_function_wrapper(_MODULE, f"{cls}.rerank", rerank_)
            wrapt.wrap_function_wrapper(_MODULE, f"{cls}.embed", embed_)

    def _uninstrument(self, **kwargs: Any) -> None:
        module = importlib.import_module(_MODULE)
        for name in _CLASSES:
            for method in ("chat", "chat_stream", "rerank", "embed"):
                unwrap(getattr(module, name), method)


# --- chat ---------------------------------------------------------------------------------------
def _open_chat(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    if inside_generation():
        return None
    messages = kwargs.get("messages")
    request, given = _read(kwargs.get("documents"), messages)
    root = None
    if request.sources:
        root = _provider.root_for(ROOT_NAME, request.query, provider)
        request = _provider.record_sources(request, root, provider)
    model = kwargs.get("model")
    stage = Generate(
        model if isinstance(model, str) else None,
        _PROVIDER,
        prompt=list(messages) if isinstance(messages, (list, tuple)) else None,
        temperature=kwargs.get("temperature"),
        max_tokens=kwargs.get("max_tokens"),
        tracer_provider=provider,
    )
    stage.auto_root = root
    stage.provider_request = (request, given) if request.sources else None  # type: ignore[attr-defined]
    return started(stage)


def _read(documents: Any, messages: Any) -> tuple[Request, list[str | None]]:
    """The request's documents as sources, in order, and the id the app gave each (None: none);
    the last user message's text is the query."""
    query = None
    for message in messages if isinstance(messages, (list, tuple)) else ():
        if get(message, "role") == "user":
            content = get(message, "content")
            text = content if isinstance(content, str) else "\n".join(t for t in (get(p, "text") for p in content or ()) if isinstance(t, str)) if isinstance(content, (list, tuple)) else None
            query = text or query
    sources: list[Source] = []
    given: list[str | None] = []
    for document in documents if isinstance(documents, (list, tuple)) else ():
        found = get(document, "id") if not isinstance(document, str) else None
        text = _text(document if isinstance(document, str) else get(document, "data"))
        sources.append(Source(found if isinstance(found, str) and found else content_digest(text), text))
        given.append(found if isinstance(found, str) and found else None)
    return Request(tuple(sources), (DOCUMENT,) * len(sources), query if isinstance(query, str) else None), given


def _text(data: Any) -> str:
    """A document's text: the string, or its data's ``key: value`` lines (an ``id`` key aside)."""
    if isinstance(data, str):
        return data
    if isinstance(data, Mapping):
        return "\n".join(f"{key}: {value}" for key, value in data.items() if key != "id")
    return ""


def _chatted(stage: Generate, kwargs: Mapping[str, Any], response: Any) -> Any:
    stage.detach()
    message = get(response, "message")
    text, offsets = _answer(get(message, "content"))
    _cite(stage, text, offsets, get(message, "citations") or ())
    stage.record(text if message is not None else response)
    _usage(stage, response)
    stage.close()
    return response


def _answer(content: Any) -> tuple[str, dict[Any, int]]:
    """The answer (the text items of the content, joined) and where each item starts in it."""
    pieces: list[str] = []
    offsets: dict[Any, int] = {}
    length = 0
    for index, item in enumerate(content if isinstance(content, (list, tuple)) else ()):
        text = get(item, "text") if get(item, "type") in (None, "text") else None
        if isinstance(text, str):
            offsets[index] = length
            pieces.append(text)
            length += len(text)
    return "".join(pieces), offsets


def _cite(stage: Generate, answer: str, offsets: Mapping[Any, int], citations: Sequence[Any]) -> None:
    """The answer's citations, resolved to the request's documents, and where the answer cites them."""
    found = getattr(stage, "provider_request", None)
    if found is None:
        return
    request, given = found
    by_id = {chunk_id: index for index, chunk_id in enumerate(given) if chunk_id is not None}
    by_text = {content_digest(source.text or ""): index for index, source in enumerate(request.sources)}
    refs: list[tuple[str, Any]] = []
    unknown: list[str] = []
    segments: list[tuple[int, int, str]] = []
    for citation in citations:
        if get(citation, "type") not in _ANSWER_CITATIONS:
            continue
        place = _place(answer, offsets, citation)
        for source in get(citation, "sources") or ():
            if get(source, "type") != "document":
                continue
            cited = get(source, "id")
            index = by_id.get(cited)
            if index is None:
                index = _by_document(by_text, get(source, "document"))
            if index is None:
                unknown.append(f"document_id={cited}")
                continue
            refs.append((DOCUMENT, index))
            if place is not None:
                segments.append((*place, request.sources[index].chunk_id))
    provided = _provider.provided_by_index(request, refs)
    stage.provided = replace(provided, invalid=tuple(dict.fromkeys((*provided.invalid, *unknown))), segments=tuple(segments))


def _by_document(by_text: Mapping[str, int], document: Any) -> int | None:
    """The request's document a source carries back: the same data (an ``id`` the API added
    aside), or, for a string document, which comes back as its one text field, that text."""
    found = by_text.get(content_digest(_text(document)))
    if found is None and isinstance(document, Mapping):
        values = [v for k, v in document.items() if k != "id"]
        if len(values) == 1 and isinstance(values[0], str):
            found = by_text.get(content_digest(values[0]))
    return found


def _place(answer: str, offsets: Mapping[Any, int], citation: Any) -> tuple[int, int] | None:
    """(start, end) of a citation in the answer: its content item's offset plus its own, checked
    against the text it quotes (a citation that does not match is not placed)."""
    start, end, text = get(citation, "start"), get(citation, "end"), get(citation, "text")
    index = get(citation, "content_index")
    base = offsets.get(index if isinstance(index, int) else 0)
    if base is None or not (isinstance(start, int) and isinstance(end, int)):
        return None
    start, end = base + start, base + end
    return (start, end) if not isinstance(text, str) or answer[start:end] == text else None


def _usage(stage: Generate, found: Any) -> None:
    """Billed tokens (the tokens the model read and wrote, when no billed figure is given) and
    the finish reason of a response or a stream's ``message-end`` delta."""
    usage = get(found, "usage")
    billed, tokens = get(usage, "billed_units"), get(usage, "tokens")
    reason = get(found, "finish_reason")

    def count(key: str) -> int | None:
        value = get(tokens, key) if get(tokens, key) is not None else get(billed, key)
        return int(value) if isinstance(value, (int, float)) else None

    add_usage(stage, input_tokens=count("input_tokens"), output_tokens=count("output_tokens"), finish_reasons=[reason] if isinstance(reason, str) else None)


def _streamed(stage: Generate, kwargs: Mapping[str, Any], stream: Any) -> Any:
    stage.detach()
    proxy = record_as_consumed(stream, stage, lambda events, error: _stream_done(stage, events, error))
    if proxy is None:
        stage.close()
        return stream
    return proxy


def _stream_done(stage: Generate, events: list[Any] | None, error: BaseException | None) -> None:
    """The answer and citations of the events the app read: ``content-delta`` text per content
    index, ``citation-start`` citations, ``message-end`` usage."""
    with guard("cohere stream"):
        if events is not None:
            texts: dict[Any, list[str]] = {}
            citations = []
            for event in events:
                kind, delta = get(event, "type"), get(get(event, "delta"), "message")
                if kind == "content-delta":
                    text = get(get(delta, "content"), "text")
                    if isinstance(text, str):
                        texts.setdefault(get(event, "index"), []).append(text)
                elif kind == "citation-start":
                    citations.append(get(delta, "citations"))
                elif kind == "message-end":
                    _usage(stage, get(event, "delta"))
            pieces = [piece for index in texts for piece in texts[index]]
            offsets, length = {}, 0
            for index, found in texts.items():
                offsets[index] = length
                length += sum(map(len, found))
            _cite(stage, "".join(pieces), offsets, [c for c in citations if c is not None])
            stage.stream_done(pieces)
            stage.check_stream_end(events)
        stage.close(error)


# --- rerank and embed ---------------------------------------------------------------------------
def _open_rerank(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Rerank:
    model, query, top_n = kwargs.get("model"), kwargs.get("query"), kwargs.get("top_n")
    return started(
        Rerank(
            model if isinstance(model, str) else None,
            provider=_PROVIDER,
            top_n=top_n if isinstance(top_n, int) else None,
            query=query if isinstance(query, str) else None,
            tracer_provider=provider,
        )
    )


def _reranked(stage: Rerank, kwargs: Mapping[str, Any], response: Any) -> Any:
    """The documents as candidates (id-less: each gets the id its text has in the pipeline) and
    the results in their new order."""
    stage.detach()
    documents = kwargs.get("documents")
    texts = [_text(d if isinstance(d, str) else get(d, "data") or d) for d in documents] if isinstance(documents, (list, tuple)) else []
    results = get(response, "results")
    if isinstance(results, list):
        kept = [{"content": texts[i], "score": get(r, "relevance_score")} for r in results for i in [get(r, "index")] if isinstance(i, int) and 0 <= i < len(texts)]
        stage.record(kept, candidates=[{"content": text} for text in texts])
        units = get(get(get(response, "meta"), "billed_units"), "search_units")
        if stage.attrs is not None and isinstance(units, (int, float)):
            stage.attrs.set(names.RAG_RERANK_SEARCH_UNITS, float(units))
    stage.close()
    return response


def _open_embed(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Embed:
    model = kwargs.get("model")
    return started(Embed(model if isinstance(model, str) else None, _PROVIDER, tracer_provider=provider))


def _embedded(stage: Embed, kwargs: Mapping[str, Any], response: Any) -> Any:
    stage.detach()
    embeddings = get(response, "embeddings")
    vectors = next((v for v in (get(embeddings, k) for k in ("float_", "float", "int8", "uint8", "binary", "ubinary", "base64")) if v), None)
    tokens = get(get(get(response, "meta"), "billed_units"), "input_tokens")
    texts = kwargs.get("texts")
    stage.record(
        vectors,
        input_tokens=int(tokens) if isinstance(tokens, (int, float)) else None,
        text=list(texts) if isinstance(texts, (list, tuple)) and all(isinstance(t, str) for t in texts) else None,
    )
    stage.close()
    return response

