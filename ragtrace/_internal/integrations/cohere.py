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
  call: ``message`` is the query, a document's ``_excludes`` keys are not what the model reads, and
  a citation's ``document_ids`` resolve by the app's id or by the document the response's
  ``documents`` carries back under the API's id (``doc_1`` for an id-less one). No ``citations``
  field (or one ragtrace can't read) is not "cited nothing": not measurable (answer_unreadable).
  A stream's citations are its ``citation-generation`` events; its ``stream-end`` is its end.
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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import wrapt
from opentelemetry import trace

from .. import names
from ..stages.generation import Generate
from ..core import figures
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
_V1_MODULE = "cohere.base_client"
_V1_CLASSES = ("BaseCohere", "AsyncBaseCohere")
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
        v1, av1 = call_wrappers(lambda args, kwargs: _open_v1(kwargs, provider), _v1_chatted, _LABEL)
        v1_stream, _ = call_wrappers(lambda args, kwargs: _open_v1(kwargs, provider), lambda stage, kwargs, stream: _streamed(stage, kwargs, stream, _v1_stream_done), _LABEL)
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


# --- chat ---------------------------------------------------------------------------------------
def _open_chat(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    if inside_generation() or not _on():
        return None
    messages = kwargs.get("messages")
    request, given = _read(kwargs.get("documents"), messages)
    keys = [content_digest(source.text or "") for source in request.sources]
    return _opened(kwargs, provider, (request, given, keys), list(messages) if isinstance(messages, (list, tuple)) else None)


def _opened(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None, found: tuple[Request, list[str | None], list[str]], prompt: Any) -> Generate:
    """The generate stage of a chat (v1 or v2) whose request is ``found`` (its sources, the ids
    the app gave them, the key each resolves by when a citation carries its document back): with
    documents, the retrieve and assemble spans of the call's pipeline first."""
    request, given, keys = found
    root = None
    if request.sources:
        root = _provider.root_for(ROOT_NAME, request.query, provider)
        request = _provider.record_sources(request, root, provider)
    model = kwargs.get("model")
    stage = Generate(
        model if isinstance(model, str) else None,
        _PROVIDER,
        prompt=prompt,
        temperature=kwargs.get("temperature"),
        max_tokens=kwargs.get("max_tokens"),
        tracer_provider=provider,
    )
    stage.auto_root = root
    stage.provider_request = (request, given, keys) if request.sources else None  # type: ignore[attr-defined]
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
    _usage(stage, get(response, "usage"), get(response, "finish_reason"))
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


def _cite(
    stage: Generate,
    answer: str,
    offsets: Mapping[Any, int],
    citations: Sequence[Any],
    documents: Callable[[Any], Iterable[tuple[Any, Any]]] | None = None,
    keys: Callable[[Any], Iterable[str]] | None = None,
    unmeasured: str | None = None,
) -> None:
    """The answer's citations, resolved to the request's documents, and where the answer cites
    them. ``documents`` gives a citation's (id, document carried back) pairs, ``keys`` the keys
    such a document resolves by (v2's by default); ``unmeasured``: why they can't be scored."""
    found = getattr(stage, "provider_request", None)
    if found is None:
        return
    request, given, known = found
    by_id = {chunk_id: index for index, chunk_id in enumerate(given) if chunk_id is not None}
    by_key = {key: index for index, key in enumerate(known)}
    refs: list[tuple[str, Any]] = []
    unknown: list[str] = []
    segments: list[tuple[int, int, str]] = []
    for citation in citations:
        if get(citation, "type") not in _ANSWER_CITATIONS:
            continue
        place = _place(answer, offsets, citation)
        for cited, document in (documents or _sources)(citation):
            index = by_id.get(cited)
            if index is None:
                index = next((by_key[key] for key in (keys or _keys)(document) if key in by_key), None)
            if index is None:
                unknown.append(f"document_id={cited}")
                continue
            refs.append((DOCUMENT, index))
            if place is not None:
                segments.append((*place, request.sources[index].chunk_id))
    provided = _provider.provided_by_index(request, refs)
    invalid = tuple(dict.fromkeys((*provided.invalid, *unknown)))
    stage.provided = replace(provided, invalid=invalid, segments=tuple(segments), unmeasured=provided.unmeasured or unmeasured)


def _sources(citation: Any) -> list[tuple[Any, Any]]:
    """A v2 citation's document sources: (id, the document the source carries back)."""
    return [(get(s, "id"), get(s, "document")) for s in get(citation, "sources") or () if get(s, "type") == "document"]


def _keys(document: Any) -> list[str]:
    """The keys of the request's document a v2 source carries back: the same data (an ``id`` the
    API added aside), or, for a string document, which comes back as its one text field, that text."""
    found = [content_digest(_text(document))]
    if isinstance(document, Mapping):
        values = [v for k, v in document.items() if k != "id"]
        if len(values) == 1 and isinstance(values[0], str):
            found.append(content_digest(values[0]))
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


def _usage(stage: Generate, usage: Any, reason: Any) -> None:
    """Billed tokens (the tokens the model read and wrote, when no billed figure is given) from a
    v2 ``usage`` or a v1 ``meta``, and the finish reason."""
    billed, tokens = get(usage, "billed_units"), get(usage, "tokens")

    def count(key: str) -> int | None:
        value = get(tokens, key) if get(tokens, key) is not None else get(billed, key)
        return int(value) if isinstance(value, (int, float)) else None

    add_usage(stage, input_tokens=count("input_tokens"), output_tokens=count("output_tokens"), finish_reasons=[reason] if isinstance(reason, str) else None)


def _streamed(stage: Generate, kwargs: Mapping[str, Any], stream: Any, done: Callable[..., None] | None = None) -> Any:
    stage.detach()
    proxy = record_as_consumed(stream, stage, lambda events, error: (done or _stream_done)(stage, events, error))
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
                    _usage(stage, get(get(event, "delta"), "usage"), get(get(event, "delta"), "finish_reason"))
            pieces = [piece for index in texts for piece in texts[index]]
            offsets, length = {}, 0
            for index, found in texts.items():
                offsets[index] = length
                length += sum(map(len, found))
            _cite(stage, "".join(pieces), offsets, [c for c in citations if c is not None])
            stage.stream_done(pieces)
            stage.check_stream_end(events)
        stage.close(error)


# --- v1 chat ------------------------------------------------------------------------------------
def _on() -> bool:
    """Still instrumented? The SDK binds ``chat`` on a client when it is made (``validate_args``),
    so a client made while instrumented keeps ragtrace's wrapper after ``uninstrument()``."""
    return bool(CohereInstrumentor().is_instrumented_by_opentelemetry)


def _open_v1(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    """A v1 chat: ``message`` is the query; each document is a dict of strings, which an ``id``
    names and whose ``_excludes`` keys the model is not shown (``_v1_key`` resolves it when the
    response carries it back)."""
    if inside_generation() or not _on():
        return None
    documents, message = kwargs.get("documents"), kwargs.get("message")
    sources: list[Source] = []
    given: list[str | None] = []
    keys: list[str] = []
    for document in documents if isinstance(documents, (list, tuple)) else ():
        if not isinstance(document, Mapping):
            continue
        excluded = document.get("_excludes")
        hidden = {"_excludes", *(excluded if isinstance(excluded, (list, tuple)) else ())}
        text = _text({key: value for key, value in document.items() if key not in hidden})
        found = document.get("id") if isinstance(document.get("id"), str) and document.get("id") else None
        sources.append(Source(found or content_digest(text), text))
        given.append(found)
        keys.append(_v1_key(document))
    request = Request(tuple(sources), (DOCUMENT,) * len(sources), message if isinstance(message, str) else None)
    return _opened(kwargs, provider, (request, given, keys), _v1_prompt(kwargs))


def _v1_key(document: Any) -> str:
    """What a v1 document is known by when the response carries it back in ``documents``: all its
    fields but ``id`` (the API gives an id-less one its own) and ``_excludes`` (the excluded fields
    come back too)."""
    return content_digest(_text({k: v for k, v in document.items() if k != "_excludes"})) if isinstance(document, Mapping) else ""


def _v1_prompt(kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The v1 request as chat messages: the preamble, the history (``CHATBOT`` is the assistant), the message."""
    preamble, history = kwargs.get("preamble"), kwargs.get("chat_history")
    prompt = [{"role": "system", "content": preamble}] if isinstance(preamble, str) else []
    for turn in history if isinstance(history, (list, tuple)) else ():
        role = str(get(turn, "role") or "").lower()
        prompt.append({"role": "assistant" if role == "chatbot" else role, "content": get(turn, "message")})
    return [*prompt, {"role": "user", "content": kwargs.get("message")}]


def _v1_chatted(stage: Generate, kwargs: Mapping[str, Any], response: Any) -> Any:
    stage.detach()
    text = get(response, "text")
    _v1_cite(stage, text if isinstance(text, str) else "", get(response, "citations"), get(response, "documents"))
    stage.record(text if isinstance(text, str) else response)
    _usage(stage, get(response, "meta"), get(response, "finish_reason"))
    stage.close()
    return response


def _v1_cite(stage: Generate, answer: str, citations: Any, documents: Any) -> None:
    """v1 citations (``start`` / ``end`` in the answer, ``document_ids``), each id resolved by the
    app's id or by the document the response's ``documents`` carries back under it. No citations
    field, or one ragtrace can't read, is not "cited nothing": not measurable (answer_unreadable)."""
    readable = isinstance(citations, (list, tuple)) and all(isinstance(get(c, "document_ids"), (list, tuple)) for c in citations)
    carried = {get(d, "id"): d for d in documents} if isinstance(documents, (list, tuple)) else {}
    _cite(
        stage,
        answer,
        {0: 0},
        citations if readable else (),
        lambda citation: [(cited, carried.get(cited)) for cited in get(citation, "document_ids")],
        lambda document: [_v1_key(document)],
        None if readable else figures.STATUS_ANSWER_UNREADABLE,
    )


def _v1_stream_done(stage: Generate, events: list[Any] | None, error: BaseException | None) -> None:
    """The answer and citations of the v1 events the app read: ``text-generation`` text,
    ``citation-generation`` citations (none read: the ``stream-end`` response's), and
    ``stream-end``, whose response's documents resolve the ids the API gave id-less documents
    and whose meta holds the usage. A stream that ran out without ``stream-end`` was cut off."""
    with guard("cohere stream"):
        if events is not None:
            pieces: list[str] = []
            citations: Any = None
            end = None
            for event in events:
                kind = get(event, "event_type")
                if kind == "text-generation" and isinstance(get(event, "text"), str):
                    pieces.append(get(event, "text"))
                elif kind == "citation-generation":
                    found = get(event, "citations")  # one unreadable event: the stream's citations are not known
                    citations = [*(citations or ()), *found] if isinstance(found, (list, tuple)) and citations is not False else False
                elif kind == "stream-end":
                    end = event
            response = get(end, "response")
            _v1_cite(stage, "".join(pieces), get(response, "citations") if citations is None else citations, get(response, "documents"))
            _usage(stage, get(response, "meta"), get(end, "finish_reason"))
            stage.stream_done(pieces)
            if getattr(events, "ran_out", False) and end is None:
                stage.stream_cut_off()
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

