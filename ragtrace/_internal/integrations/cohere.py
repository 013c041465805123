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
- v1 ``Client.chat`` / ``chat_stream`` (and ``AsyncClient``'s) with ``documents`` is the same RAG
  call, read from v1's shapes (``_cohere_chat``, which holds what both chat APIs share).
Outside a ``rag_pipeline`` a chat with documents is one pipeline (the automatic root); inside
one, its stages are the pipeline's.

Ids. A document's id is the app's (``{"id": ..., "data": ...}``); an id-less document (a string,
or data without an id) gets the keyed digest of its text, ragtrace's id for an id-less chunk. Its
text is its string, or its data's ``key: value`` lines (what the model reads of it): content,
recorded only under the content policy, as any chunk's.

Cohere has no callback system, so ``V2Client`` / ``AsyncV2Client`` methods (and v1's
``BaseCohere`` / ``AsyncBaseCohere`` chat methods) are wrapped with wrapt at class level. The SDK
binds ``chat`` on a ``Client`` / ``ClientV2`` when it is made: one made before ``instrument()``
is not covered for ``chat``. A stream reaches the app
behind the transparent recording proxy every traced stream gets (``passthrough``).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import wrapt
from opentelemetry import trace

from .. import names
from ..core.guard import guard
from ..core.keyed import content_digest
from ..core.outputs import get
from ..core.provided import Source
from ..stages.generation import Generate
from ..stages.retrieval import Embed, Rerank
from ._anthropic_blocks import DOCUMENT, Request
from ._cohere_chat import (
    PROVIDER,
    cite,
    document_text,
    open_v1,
    opened,
    record_usage,
    streamed,
    v1_chatted,
    v1_stream_done,
)
from ._common import call_wrappers, inside_generation, started, unwrap
from .base import RagtraceInstrumentor

_MODULE = "cohere.v2.client"
_CLASSES = ("V2Client", "AsyncV2Client")
_LABEL = "cohere instrumentation"
_V1_MODULE = "cohere.base_client"
_V1_CLASSES = ("BaseCohere", "AsyncBaseCohere")


class CohereInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("cohere")``, or ``CohereInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "cohere"

    def _instrument(self, **kwargs: Any) -> None:
        provider = self.tracer_provider(kwargs)
        chat, achat = call_wrappers(lambda args, kwargs: _open_chat(kwargs, provider) if _on() else None, _chatted, _LABEL)
        stream, _ = call_wrappers(lambda args, kwargs: _open_chat(kwargs, provider) if _on() else None, lambda stage, kwargs, found: streamed(stage, found, _stream_done), _LABEL)
        rerank, arerank = call_wrappers(lambda args, kwargs: _open_rerank(kwargs, provider), _reranked, _LABEL)
        embed, aembed = call_wrappers(lambda args, kwargs: _open_embed(kwargs, provider), _embedded, _LABEL)
        for cls, (chat_, rerank_, embed_) in zip(_CLASSES, ((chat, rerank, embed), (achat, arerank, aembed))):
            wrapt.wrap_function_wrapper(_MODULE, f"{cls}.chat", chat_)
            wrapt.wrap_function_wrapper(_MODULE, f"{cls}.chat_stream", stream)  # both return their stream at once
            wrapt.wrap_function_wrapper(_MODULE, f"{cls}.rerank", rerank_)
            wrapt.wrap_function_wrapper(_MODULE, f"{cls}.embed", embed_)
        v1, av1 = call_wrappers(lambda args, kwargs: open_v1(kwargs, provider) if _on() else None, v1_chatted, _LABEL)
        v1_stream, _ = call_wrappers(lambda args, kwargs: open_v1(kwargs, provider) if _on() else None, lambda stage, kwargs, found: streamed(stage, found, v1_stream_done), _LABEL)
        for cls, chat_ in zip(_V1_CLASSES, (v1, av1)):
            wrapt.wrap_function_wrapper(_V1_MODULE, f"{cls}.chat", chat_)
            wrapt.wrap_function_wrapper(_V1_MODULE, f"{cls}.chat_stream", v1_stream)

    def _uninstrument(self, **kwargs: Any) -> None:
        module = importlib.import_module(_MODULE)
        for name in _CLASSES:
            for method in ("chat", "chat_stream", "rerank", "embed"):
                unwrap(getattr(module, name), method)
        module = importlib.import_module(_V1_MODULE)
        for name in _V1_CLASSES:
            for method in ("chat", "chat_stream"):
                unwrap(getattr(module, name), method)


def _on() -> bool:
    """Still instrumented? The SDK binds ``chat`` on a client when it is made (``validate_args``),
    so a client made while instrumented keeps ragtrace's wrapper after ``uninstrument()``."""
    return bool(CohereInstrumentor().is_instrumented_by_opentelemetry)


# --- chat ---------------------------------------------------------------------------------------
def _open_chat(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    if inside_generation():
        return None
    messages = kwargs.get("messages")
    request, given = _read(kwargs.get("documents"), messages)
    keys = [content_digest(source.text or "") for source in request.sources]
    return opened(kwargs, provider, (request, given, keys), list(messages) if isinstance(messages, (list, tuple)) else None)


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
        text = document_text(document if isinstance(document, str) else get(document, "data"))
        sources.append(Source(found if isinstance(found, str) and found else content_digest(text), text))
        given.append(found if isinstance(found, str) and found else None)
    return Request(tuple(sources), (DOCUMENT,) * len(sources), query if isinstance(query, str) else None), given


def _chatted(stage: Generate, kwargs: Mapping[str, Any], response: Any) -> Any:
    stage.detach()
    message = get(response, "message")
    text, offsets = _answer(get(message, "content"))
    cite(stage, text, offsets, get(message, "citations") or ())
    stage.record(text if message is not None else response)
    record_usage(stage, get(response, "usage"), get(response, "finish_reason"))
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
                    record_usage(stage, get(get(event, "delta"), "usage"), get(get(event, "delta"), "finish_reason"))
            pieces = [piece for index in texts for piece in texts[index]]
            offsets, length = {}, 0
            for index, found in texts.items():
                offsets[index] = length
                length += sum(map(len, found))
            cite(stage, "".join(pieces), offsets, [c for c in citations if c is not None])
            stage.stream_done(pieces)
            stage.check_stream_end(events)
        stage.close(error)


# --- rerank and embed ---------------------------------------------------------------------------
def _open_rerank(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Rerank:
    model, query, top_n = kwargs.get("model"), kwargs.get("query"), kwargs.get("top_n")
    return started(
        Rerank(
            model if isinstance(model, str) else None,
            provider=PROVIDER,
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
    texts = [document_text(d if isinstance(d, str) else get(d, "data") or d) for d in documents] if isinstance(documents, (list, tuple)) else []
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
    return started(Embed(model if isinstance(model, str) else None, PROVIDER, tracer_provider=provider))


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

