"""AWS Bedrock's shapes, read for sources, citations and ids (never parsed from text).

Knowledge-base results (``bedrock-agent-runtime``). ``retrieve`` returns ``retrievalResults[]``
and ``retrieve_and_generate`` returns the references its answer cites, both as ``{content,
location, metadata}``: a location and a text, no id. So a result's chunk id is derived from them,
the same way on both paths, so that one chunk has one id whichever call returned it:
``<keyed digest of its location>#<keyed digest of its text>``. The location is the first of
``customDocumentLocation.id``, ``s3Location.uri``, the ``url`` / ``uri`` of the web, Confluence,
SharePoint, Salesforce, Kendra, Google Drive and OneDrive locations, and ``sqlLocation.query``;
both are content (an S3 key names a document), so only their keyed digests leave the process.
The part before ``#`` is the same for every chunk of one document: references that repeat it
name one document.

Converse blocks (``bedrock-runtime``). As with Anthropic's Messages API, whose blocks these are: a
``searchResultLocation`` citation names a ``searchResult`` block by its 0-based index among all
``searchResult`` blocks of the request, in order across messages and tool results; a
``documentChar`` / ``documentPage`` / ``documentChunk`` citation names a ``document`` block by its
index among the ``document`` blocks, counted apart. A search result's id is derived as a
knowledge-base result's, its ``source`` standing for the location (so a result the app got from
``retrieve`` and handed over keeps its id); a text document's is the keyed digest of its text.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.keyed import content_digest
from ..core.outputs import get
from ..core.provided import Source
from ._anthropic_blocks import DOCUMENT, SEARCH_RESULT, Request, distinct

_LOCATIONS = (
    ("customDocumentLocation", "id"),
    ("s3Location", "uri"),
    ("webLocation", "url"),
    ("confluenceLocation", "url"),
    ("sharePointLocation", "url"),
    ("salesforceLocation", "url"),
    ("kendraDocumentLocation", "uri"),
    ("googleDriveLocation", "url"),
    ("oneDriveLocation", "url"),
    ("sqlLocation", "query"),
)
_TEXT_FORMATS = frozenset({"txt", "md", "html", "csv"})  # document formats whose bytes are text
_DOCUMENT_CITATIONS = ("documentChar", "documentPage", "documentChunk")


# --- knowledge-base results ---------------------------------------------------------------------
def chunk_id(location: str | None, text: str) -> str:
    """A chunk's id from its location and its text (module docstring)."""
    digest = content_digest(text)
    return digest if location is None else f"{content_digest(location)}#{digest}"


def result_text(content: Any) -> str:
    """A result's text: ``content.text``, a row's ``column: value`` lines, or (audio, video,
    bytes) a stable rendering of the content object, which is only ever digested."""
    text = get(content, "text")
    if isinstance(text, str):
        return text
    row = get(content, "row")
    if isinstance(row, list):
        return "\n".join(f"{get(cell, 'columnName')}: {get(cell, 'columnValue')}" for cell in row)
    return json.dumps(content, sort_keys=True, default=str) if isinstance(content, Mapping) else ""


def location_key(location: Any) -> str | None:
    for field, key in _LOCATIONS:
        value = get(get(location, field), key)
        if isinstance(value, str) and value:
            return value
    return None


def result_chunk(result: Any) -> dict[str, Any]:
    """A ``retrievalResults`` item or a ``retrievedReferences`` item as a chunk (score where given)."""
    text = result_text(get(result, "content"))
    return {"id": chunk_id(location_key(get(result, "location")), text), "content": text, "score": get(result, "score")}


def cited_segments(answer: str | None, citations: Iterable[Any]) -> tuple[list[str], list[tuple[int, int, str]]]:
    """The chunk ids a ``retrieve_and_generate`` answer cites, first-cited first, and where:
    (start, end exclusive, id) in characters of the answer. The API's ``span.end`` is checked
    against the part's own text, which tells whether it counts inclusively; a span that matches
    neither way is not placed."""
    ids: dict[str, None] = {}
    segments: list[tuple[int, int, str]] = []
    for citation in citations:
        part = get(get(citation, "generatedResponsePart"), "textResponsePart")
        placed = _placed(answer, get(part, "span"), get(part, "text"))
        for reference in get(citation, "retrievedReferences") or ():
            found = result_chunk(reference)["id"]
            ids.setdefault(found)
            if placed is not None:
                segments.append((*placed, found))
    return list(ids), segments


def _placed(answer: str | None, span: Any, text: Any) -> tuple[int, int] | None:
    start, end = get(span, "start"), get(span, "end")
    if not (isinstance(answer, str) and isinstance(start, int) and isinstance(end, int) and isinstance(text, str)):
        return None
    if answer[start:end] == text:
        return start, end
    if answer[start : end + 1] == text:
        return start, end + 1
    return None


# --- Converse -----------------------------------------------------------------------------------
def read_converse(messages: Any) -> Request:
    """The ``document`` and ``searchResult`` blocks of a Converse ``messages`` list, in order
    (inside ``toolResult`` blocks too), and the last user message's text as the query."""
    if not isinstance(messages, (list, tuple)):
        return Request()
    found: list[tuple[str, Source]] = []
    query = None
    for index, message in enumerate(messages):
        content = get(message, "content")
        if not isinstance(content, (list, tuple)):
            continue
        if get(message, "role") == "user":
            query = _texts(content) or query
        for block in content:
            inner = get(get(block, "toolResult"), "content")
            for part in inner if isinstance(inner, (list, tuple)) else (block,):
                source = _source(part, index)
                if source is not None:
                    found.append(source)
    return Request(tuple(distinct([s for _, s in found])), tuple(kind for kind, _ in found), query)


def _source(block: Any, message_index: int) -> tuple[str, Source] | None:
    result = get(block, "searchResult")
    if result is not None:
        text = _texts(get(result, "content")) or ""
        source = get(result, "source")
        return SEARCH_RESULT, Source(chunk_id(source if isinstance(source, str) and source else None, text), text, message_index)
    document = get(block, "document")
    if document is None:
        return None
    source = get(document, "source")
    text = get(source, "text")
    if not isinstance(text, str):
        text = _texts(get(source, "content"))
    data = get(source, "bytes")
    if text is None and isinstance(data, (bytes, str)) and get(document, "format") in _TEXT_FORMATS:
        text = data.decode("utf-8", "replace") if isinstance(data, bytes) else data
    if text is not None:
        return DOCUMENT, Source(content_digest(text), text, message_index)
    # a PDF, a Word file or an S3 object: ragtrace can't read its text
    uri = get(get(source, "s3Location"), "uri")
    named = uri if isinstance(uri, str) else data.hex() if isinstance(data, bytes) else repr(get(document, "format"))
    return DOCUMENT, Source(content_digest(named), None, message_index)


def _texts(content: Any) -> str | None:
    """The ``text`` blocks of a content list, joined by line breaks (None: none)."""
    if not isinstance(content, (list, tuple)):
        return None
    texts = [t for t in (get(b, "text") for b in content) if isinstance(t, str)]
    return "\n".join(texts) if texts else None


def citation_ref(citation: Any) -> tuple[str, Any] | None:
    """A Converse citation as (kind, index) into the request's blocks; None for a web location."""
    location = get(citation, "location")
    found = get(location, "searchResultLocation")
    if found is not None:
        return SEARCH_RESULT, get(found, "searchResultIndex")
    for kind in _DOCUMENT_CITATIONS:
        found = get(location, kind)
        if found is not None:
            return DOCUMENT, get(found, "documentIndex")
    return None


def converse_output(content: Any) -> tuple[str, list[tuple[tuple[str, Any], int, int]]]:
    """A Converse message's answer text (its ``text`` blocks and the generated text of its
    ``citationsContent`` blocks, in order) and each citation as (ref, start, end): where the
    cited block's text sits in that answer."""
    pieces: list[str] = []
    refs: list[tuple[tuple[str, Any], int, int]] = []
    length = 0
    for block in content if isinstance(content, (list, tuple)) else ():
        text = get(block, "text")
        cited = get(block, "citationsContent")
        if cited is not None:
            parts = [t for t in (get(c, "text") for c in get(cited, "content") or ()) if isinstance(t, str)]
            text = "".join(parts) if parts else None
        if not isinstance(text, str):
            continue
        if cited is not None:
            refs.extend((ref, length, length + len(text)) for ref in map(citation_ref, get(cited, "citations") or ()) if ref is not None)
        pieces.append(text)
        length += len(text)
    return "".join(pieces), refs
