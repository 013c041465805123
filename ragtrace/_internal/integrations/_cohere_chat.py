"""What Cohere's two chat APIs share, and the v1 chat (``cohere.Client`` / ``AsyncClient``):
the ``cohere`` integration module wraps both APIs' methods and calls these.

A chat with documents opens the same stage handles whichever API it is (``opened``): the retrieve
and assemble spans of the call's pipeline (``_provider.record_sources``), then the generate span,
whose citations ``cite`` resolves to the request's documents: by the id the app gave a document,
else by the document the response carries back under the id the API gave it (each API's
documents are known by their own key: v2's ``_keys``, v1's ``_v1_key``).

v1 (``chat(message=..., documents=[{...}])``): ``message`` is the query; a document is a dict of
strings whose ``id`` names it and whose ``_excludes`` keys the model is not shown (they come back
in the response's ``documents`` all the same). A citation is ``{start, end, text, document_ids,
type}``; ``PLAN`` citations are not the answer's. No ``citations`` field, or one ragtrace can't
read, is not "cited nothing": not measurable (answer_unreadable). ``prompt_truncation="AUTO"`` /
``"AUTO_PRESERVE_ORDER"`` may drop documents and ``connectors`` add the API's own: then what the
model saw is not known, so no assemble span is recorded and the citation figures are not
measurable (context_unknown). A stream's text is its ``text-generation`` events, its citations
its ``citation-generation`` events (none read: the ``stream-end`` response's), and
``stream-end`` its end (its response holds the carried documents and the usage).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from opentelemetry import trace

from .. import names
from ..core.assembly import ContextRecord
from ..core.guard import guard
from ..core.keyed import content_digest
from ..core.outputs import get
from ..core.provided import Source
from ..stages.generation import Generate
from ..stages.passthrough import record_as_consumed
from . import _provider
from ._anthropic_blocks import DOCUMENT, Request
from ._common import add_usage, inside_generation, started

PROVIDER = "cohere"  # gen_ai.provider.name
ROOT_NAME = "cohere"  # the automatic root's name (gen_ai.workflow.name)
_ANSWER_CITATIONS = frozenset({None, "TEXT_CONTENT"})
_TRUNCATING = frozenset({"AUTO", "AUTO_PRESERVE_ORDER"})  # v1 prompt_truncation modes that drop documents


def opened(
    kwargs: Mapping[str, Any],
    provider: trace.TracerProvider | None,
    found: tuple[Request, list[str | None], list[str]],
    prompt: Any,
    unseen: str | None = None,
) -> Generate:
    """The generate stage of a chat (v1 or v2) whose request is ``found`` (its sources, the ids
    the app gave them, the key each resolves by when a citation carries its document back): with
    documents, the retrieve and assemble spans of the call's pipeline first. ``unseen``: why what
    the model saw of them is not known (no assemble span then)."""
    request, given, keys = found
    root = None
    if request.sources:
        root = _provider.root_for(ROOT_NAME, request.query, provider)
        request = _provider.record_sources(request, root, provider, context=unseen is None)
    model = kwargs.get("model")
    unknown = unseen is not None and bool(request.sources)
    stage = Generate(
        model if isinstance(model, str) else None,
        PROVIDER,
        prompt=None if unknown else prompt,  # not searched for the documents when the root opens it
        temperature=kwargs.get("temperature"),
        max_tokens=kwargs.get("max_tokens"),
        tracer_provider=provider,
    )
    stage.auto_root = root
    if unknown:  # what the model saw is not known: no context of the pipeline's is the answer's
        stage.context = ContextRecord(method=names.INCLUSION_PROVIDER)
        stage._context_unknown = unseen
    stage.provider_request = (request, given, keys, unseen) if request.sources else None  # type: ignore[attr-defined]
    started(stage)
    stage.prompt = prompt
    return stage


def document_text(data: Any) -> str:
    """A document's text: the string, or its data's ``key: value`` lines (an ``id`` key aside)."""
    if isinstance(data, str):
        return data
    if isinstance(data, Mapping):
        return "\n".join(f"{key}: {value}" for key, value in data.items() if key != "id")
    return ""


def cite(
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
    request, given, known, unseen = found
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
    stage.provided = replace(provided, invalid=invalid, segments=tuple(segments), unmeasured=unseen or provided.unmeasured or unmeasured)


def _sources(citation: Any) -> list[tuple[Any, Any]]:
    """A v2 citation's document sources: (id, the document the source carries back)."""
    return [(get(s, "id"), get(s, "document")) for s in get(citation, "sources") or () if get(s, "type") == "document"]


def _keys(document: Any) -> list[str]:
    """The keys of the request's document a v2 source carries back: the same data (an ``id`` the
    API added aside), or, for a string document, which comes back as its one text field, that text."""
    found = [content_digest(document_text(document))]
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


def record_usage(stage: Generate, usage: Any, reason: Any) -> None:
    """Billed tokens (the tokens the model read and wrote, when no billed figure is given) from a
    v2 ``usage`` or a v1 ``meta``, and the finish reason."""
    billed, tokens = get(usage, "billed_units"), get(usage, "tokens")

    def count(key: str) -> int | None:
        value = get(tokens, key) if get(tokens, key) is not None else get(billed, key)
        return int(value) if isinstance(value, (int, float)) else None

    add_usage(stage, input_tokens=count("input_tokens"), output_tokens=count("output_tokens"), finish_reasons=[reason] if isinstance(reason, str) else None)


def streamed(stage: Generate, stream: Any, done: Callable[[Generate, list[Any] | None, BaseException | None], None]) -> Any:
    """The app's stream behind the recording proxy; ``done`` reads the events the app read."""
    stage.detach()
    proxy = record_as_consumed(stream, stage, lambda events, error: done(stage, events, error))
    if proxy is None:
        stage.close()
        return stream
    return proxy



# --- v1 chat ------------------------------------------------------------------------------------
def open_v1(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    """A v1 chat: ``message`` is the query; each document is a dict of strings, which an ``id``
    names and whose ``_excludes`` keys the model is not shown (``_v1_key`` resolves it when the
    response carries it back). Truncation or connectors leave what the model saw unknown."""
    if inside_generation():
        return None
    documents, message, truncation = kwargs.get("documents"), kwargs.get("message"), kwargs.get("prompt_truncation")
    sources: list[Source] = []
    given: list[str | None] = []
    keys: list[str] = []
    for document in documents if isinstance(documents, (list, tuple)) else ():
        if not isinstance(document, Mapping):
            continue
        excluded = document.get("_excludes")
        hidden = {"_excludes", *(excluded if isinstance(excluded, (list, tuple)) else ())}
        text = document_text({key: value for key, value in document.items() if key not in hidden})
        found = document.get("id") if isinstance(document.get("id"), str) and document.get("id") else None
        sources.append(Source(found or content_digest(text), text))
        given.append(found)
        keys.append(_v1_key(document))
    request = Request(tuple(sources), (DOCUMENT,) * len(sources), message if isinstance(message, str) else None)
    unseen = names.STATUS_CONTEXT_UNKNOWN if kwargs.get("connectors") or (isinstance(truncation, str) and truncation.upper() in _TRUNCATING) else None
    return opened(kwargs, provider, (request, given, keys), _v1_prompt(kwargs), unseen)


def _v1_key(document: Any) -> str:
    """What a v1 document is known by when the response carries it back in ``documents``: all its
    fields but ``id`` (the API gives an id-less one its own) and ``_excludes`` (the excluded fields
    come back too)."""
    return content_digest(document_text({k: v for k, v in document.items() if k != "_excludes"})) if isinstance(document, Mapping) else ""


def _v1_prompt(kwargs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The v1 request as chat messages: the preamble, the history (``CHATBOT`` is the assistant), the message."""
    preamble, history = kwargs.get("preamble"), kwargs.get("chat_history")
    prompt = [{"role": "system", "content": preamble}] if isinstance(preamble, str) else []
    for turn in history if isinstance(history, (list, tuple)) else ():
        role = str(get(turn, "role") or "").lower()
        prompt.append({"role": "assistant" if role == "chatbot" else role, "content": get(turn, "message")})
    return [*prompt, {"role": "user", "content": kwargs.get("message")}]


def v1_chatted(stage: Generate, kwargs: Mapping[str, Any], response: Any) -> Any:
    stage.detach()
    text = get(response, "text")
    _v1_cite(stage, text if isinstance(text, str) else "", get(response, "citations"), get(response, "documents"))
    stage.record(text if isinstance(text, str) else response)
    record_usage(stage, get(response, "meta"), get(response, "finish_reason"))
    stage.close()
    return response


def _v1_cite(stage: Generate, answer: str, citations: Any, documents: Any) -> None:
    """v1 citations (``start`` / ``end`` in the answer, ``document_ids``), each id resolved by the
    app's id or by the document the response's ``documents`` carries back under it. No citations
    field, or one ragtrace can't read, is not "cited nothing": not measurable (answer_unreadable)."""
    readable = isinstance(citations, (list, tuple)) and all(isinstance(get(c, "document_ids"), (list, tuple)) for c in citations)
    carried = {get(d, "id"): d for d in documents} if isinstance(documents, (list, tuple)) else {}
    cite(
        stage,
        answer,
        {0: 0},
        citations if readable else (),
        lambda citation: [(cited, carried.get(cited)) for cited in get(citation, "document_ids")],
        lambda document: [_v1_key(document)],
        None if readable else names.STATUS_ANSWER_UNREADABLE,
    )


def v1_stream_done(stage: Generate, events: list[Any] | None, error: BaseException | None) -> None:
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
            record_usage(stage, get(response, "meta"), get(end, "finish_reason"))
            stage.stream_done(pieces)
            if getattr(events, "ran_out", False) and end is None:
                stage.stream_cut_off()
        stage.close(error)
