"""Anthropic Messages requests and responses, read for their sources and citations (never parsed
from text): the ``search_result`` and ``document`` blocks of the request, and the ``citations`` of
the response's text blocks (or of a stream's ``citations_delta`` events).

Indexes. A ``search_result_location`` names a search result by its 0-based index among all
``search_result`` blocks of the request, in order across messages and tool results; a
``char_location`` / ``page_location`` / ``content_block_location`` names a document by its index
among the ``document`` blocks, counted apart (the SDK's ``CitationsSearchResultLocation``
docstring). So the request is read once, in that order, and each citation resolves to exactly the
block it names. ``web_search_result_location`` names the server's web search, not the app's
sources: not counted.

Ids (docs/integrations.md). A search result is recorded under its ``source`` when that is an id or
a URL (no whitespace, at most 256 characters); a ``source`` that looks like free text is content,
and is replaced by its keyed digest (``source#<digest>``). Two search results with one ``source``
and different text are two chunks: each gets ``<source>#<digest of its text>``. A text document
is recorded under the keyed digest of its text (ragtrace's id for an id-less chunk), a file
document under its ``file_id``, a URL document under its URL. Titles, ``cited_text`` and the
blocks' text are content: they are never recorded outside the content policy.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any

from ..core.keyed import content_digest
from ..core.outputs import get
from ..core.provided import Source

SEARCH_RESULT = "search_result_index"
DOCUMENT = "document_index"
_DOCUMENT_CITATIONS = frozenset({"char_location", "page_location", "content_block_location"})
_MAX_ID = 256


@dataclass(frozen=True, slots=True)
class Request:
    """The request's sources in block order, each with its kind (search result or document)."""

    sources: tuple[Source, ...] = ()
    kinds: tuple[str, ...] = ()
    query: str | None = None  # the last user message's text

    def by_kind(self) -> dict[str, list[Source]]:
        """Each kind's sources in its own index order (what a citation's index counts)."""
        found: dict[str, list[Source]] = {SEARCH_RESULT: [], DOCUMENT: []}
        for kind, source in zip(self.kinds, self.sources):
            found[kind].append(source)
        return found

    @property
    def unreadable(self) -> bool:
        """A document ragtrace can't read the text of (a PDF, a file): its tokens are unknown."""
        return any(source.text is None for source in self.sources)


def read_request(messages: Any) -> Request:
    """The sources of a ``messages`` list (or tuple): anything else is not read, since an
    iterator would be consumed."""
    if not isinstance(messages, (list, tuple)):
        return Request()
    found: list[tuple[str, Source]] = []
    query = None
    for index, message in enumerate(messages):
        content = get(message, "content")
        if get(message, "role") == "user":
            query = content if isinstance(content, str) else _texts(content) or query
        if not isinstance(content, (list, tuple)):
            continue
        for block in content:
            inner = get(block, "content") if get(block, "type") == "tool_result" else None
            for part in inner if isinstance(inner, (list, tuple)) else (block,):
                source = _source(part, index)
                if source is not None:
                    found.append(source)
    return Request(tuple(distinct([s for _, s in found])), tuple(kind for kind, _ in found), query)


def _source(block: Any, message_index: int) -> tuple[str, Source] | None:
    kind = get(block, "type")
    if kind == "search_result":
        source = get(block, "source")
        text = _texts(get(block, "content"))
        return SEARCH_RESULT, Source(source_id(source) or content_digest(text or ""), text, message_index)
    if kind == "document":
        return DOCUMENT, _document(get(block, "source"), message_index)
    return None


def _document(source: Any, message_index: int) -> Source:
    kind = get(source, "type")
    if kind == "text":
        text = get(source, "data")
        text = text if isinstance(text, str) else None
    elif kind == "content":
        content = get(source, "content")
        text = content if isinstance(content, str) else _texts(content)
    else:  # a PDF (base64, url) or an uploaded file: ragtrace can't read its text
        given = get(source, "file_id") if kind == "file" else get(source, "url") if kind == "url" else None
        named = source_id(given)
        data = get(source, "data")
        return Source(named or content_digest(data if isinstance(data, str) else repr(kind)), None, message_index)
    return Source(content_digest(text or ""), text, message_index)


def source_id(source: Any) -> str | None:
    """``source`` as a chunk id: itself when it is an id or URL, else its keyed digest (content)."""
    if not isinstance(source, str) or not source:
        return None
    if len(source) <= _MAX_ID and not any(c.isspace() for c in source):
        return source
    return "source#" + content_digest(source)


def distinct(sources: list[Source]) -> list[Source]:
    """Sources that share an id but not their text get ``<id>#<digest of the text>``."""
    texts: dict[str, set[str | None]] = {}
    for source in sources:
        texts.setdefault(source.chunk_id, set()).add(source.text)
    clashing = {chunk_id for chunk_id, found in texts.items() if len(found) > 1}
    if not clashing:
        return sources
    return [replace(s, chunk_id=f"{s.chunk_id}#{content_digest(s.text or '')}") if s.chunk_id in clashing else s for s in sources]


def _texts(content: Any) -> str | None:
    """The text of a list of content blocks, joined by line breaks (None: no text block)."""
    if not isinstance(content, (list, tuple)):
        return None
    texts = [get(b, "text") for b in content if get(b, "type") == "text"]
    texts = [t for t in texts if isinstance(t, str)]
    return "\n".join(texts) if texts else None


# --- the response ------------------------------------------------------------------------------
def citation_ref(citation: Any) -> tuple[str, Any] | None:
    """A citation object as (kind, index) into the request's sources; None for the server's web search."""
    kind = get(citation, "type")
    if kind == "search_result_location":
        return SEARCH_RESULT, get(citation, "search_result_index")
    if kind in _DOCUMENT_CITATIONS:
        return DOCUMENT, get(citation, "document_index")
    return None


def message_refs(content: Any) -> list[tuple[str, Any]]:
    """Every citation of a message's text blocks, in order."""
    refs = []
    for block in content if isinstance(content, (list, tuple)) else ():
        if get(block, "type") == "text":
            refs.extend(r for r in map(citation_ref, get(block, "citations") or ()) if r is not None)
    return refs


def event_refs(events: Iterable[Any]) -> list[tuple[str, Any]]:
    """Every citation of a stream's events: ``citations_delta`` deltas, and any a text block
    started with (``content_block_start``), in the order the app read them."""
    refs = []
    for event in events:
        kind = get(event, "type")
        if kind == "content_block_delta":
            delta = get(event, "delta")
            if get(delta, "type") == "citations_delta":
                ref = citation_ref(get(delta, "citation"))
                if ref is not None:
                    refs.append(ref)
        elif kind == "content_block_start":
            refs.extend(message_refs([get(event, "content_block")]))
    return refs
