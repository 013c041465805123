"""google-genai requests and responses, read for their retrieval tool, grounding chunks and
grounding supports (never parsed from text). Objects or dicts alike (``outputs.get``).

The request. A call is a RAG call when its ``config.tools`` has a ``Tool(file_search=...)``
(Gemini API File Search) or a ``Tool(retrieval=...)`` (Vertex RAG Engine, Vertex AI Search): the
model searches on Google's side, inside the call. ``google_search`` and ``url_context`` are the
web, not the app's sources: such a call alone is a plain generate span.

The response. Candidate 0 is the answer (what ``response.text`` reads); its
``grounding_metadata.grounding_chunks`` are what the search gave the model: the ``retrieved_context``
ones are the call's retrieved chunks, in order; a ``web`` (or maps, image) chunk is not one of the
app's sources and is not counted. Each ``grounding_supports[]`` entry names the chunks a segment of
the answer rests on, by index into ``grounding_chunks``: those are the answer's citations, each
resolving to exactly the chunk it names (chunk granularity). ``citation_metadata`` flags recitation
of training data, not retrieval: it is not read.

Ids (docs/integrations.md). ``rag_chunk.chunk_id`` where the API gives one; else the document the
chunk came from (``rag_chunk.file_id``, else ``document_name``) and the keyed digest of its text,
``<document>#<digest>``, as OpenAI's ``file_id#digest``; else the keyed digest of the text alone
(ragtrace's id for an id-less chunk). Titles and URIs are never part of an id: a title is content,
and a URI (``gs://bucket/hr/salaries.pdf``) may be.

Answer positions. A segment's ``start_index`` / ``end_index`` count **UTF-8 bytes within the part**
``part_index`` of the candidate's content, not characters. They are converted to character offsets
into the answer text (the candidate's non-thought text parts, joined); a zero start is absent from
the JSON and means 0. A segment whose bytes don't fall on character boundaries, name no text
part, or (where the API gives ``segment.text``) don't slice to that text, keeps its citation but
gets no position: a position ragtrace can't vouch for is not given.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.keyed import content_digest
from ..core.outputs import get
from ..core.provided import Provided, Source, by_index

KIND = "grounding_chunk_index"  # how an invalid citation is reported: grounding_chunk_index=<n>
_RAG_TOOLS = ("file_search", "retrieval")


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def api_json(value: Any) -> Any:
    """The REST API's JSON (camelCase keys: ``groundingChunks``, ``retrievedContext``), as
    LiteLLM passes it on, with the SDK's snake_case keys, so this reader reads it as it reads the
    SDK's objects. Values are left as they are."""
    if isinstance(value, Mapping):
        return {_CAMEL.sub("_", key).lower() if isinstance(key, str) else key: api_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [api_json(item) for item in value]
    return value


# --- the request -------------------------------------------------------------------------------
def rag_tool(config: Any) -> Any:
    """The request's ``file_search`` or ``retrieval`` tool, or None."""
    tools = get(config, "tools") if config is not None else None
    if not isinstance(tools, (list, tuple)):
        return None
    for found in tools:  # a Tool, a dict, or a Python function (automatic function calling)
        if not callable(found) and any(get(found, kind) is not None for kind in _RAG_TOOLS):
            return found
    return None


def data_source(found: Any) -> str | None:
    """The store the tool names, when it names exactly one (``gen_ai.data_source.id``): a File
    Search store, a RAG corpus or a Vertex AI Search data store (resource names: ids)."""
    search = get(found, "file_search")
    if search is not None:
        return _only(get(search, "file_search_store_names"))
    retrieval = get(found, "retrieval")
    rag = get(retrieval, "vertex_rag_store")
    if rag is not None:
        return _only([get(r, "rag_corpus") for r in get(rag, "rag_resources") or ()]) or _only(get(rag, "rag_corpora"))
    search = get(retrieval, "vertex_ai_search")
    return _only([get(search, "datastore")]) if search is not None else None


def _only(values: Any) -> str | None:
    if isinstance(values, (list, tuple)) and len(values) == 1 and isinstance(values[0], str) and values[0]:
        return values[0]
    return None


def query_text(contents: Any) -> str | None:
    """The last user turn's text: a string, a list of strings and parts, or ``Content``s (a
    list or tuple only: anything else might be consumed)."""
    if isinstance(contents, str):
        return contents
    if not isinstance(contents, (list, tuple)):
        return _content_text(contents) if get(contents, "parts") is not None else None
    if all(isinstance(c, str) or get(c, "text") is not None for c in contents):  # parts of one user turn
        return "".join(c if isinstance(c, str) else get(c, "text") for c in contents) or None
    found = None
    for content in contents:
        if get(content, "role") in (None, "user"):
            found = _content_text(content) or found
    return found


def prompt_messages(contents: Any, system: Any) -> list[dict[str, str]] | None:
    """The request as chat messages for the content policy (``model`` turns as ``assistant``)."""
    messages = [{"role": "system", "content": text} for text in [_any_text(system)] if text]
    if isinstance(contents, str):
        return [*messages, {"role": "user", "content": contents}]
    if not isinstance(contents, (list, tuple)):
        return None
    if all(isinstance(c, str) or get(c, "text") is not None for c in contents):
        return [*messages, {"role": "user", "content": "".join(c if isinstance(c, str) else get(c, "text") for c in contents)}]
    for content in contents:
        role = get(content, "role")
        messages.append({"role": "assistant" if role == "model" else role or "user", "content": _content_text(content) or ""})
    return messages


def _content_text(content: Any) -> str | None:
    texts = [t for t in (get(p, "text") for p in get(content, "parts") or ()) if isinstance(t, str)]
    return "".join(texts) if texts else None


def _any_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    return _content_text(value) if value is not None else None


# --- the response ------------------------------------------------------------------------------
def part_texts(response: Any) -> list[str | None]:
    """Candidate 0's parts: the text of each answer part, None for a thought or non-text part
    (``part_index`` counts every part)."""
    candidates = get(response, "candidates")
    first = candidates[0] if isinstance(candidates, (list, tuple)) and candidates else None
    parts = get(get(first, "content"), "parts") if first is not None else None
    found: list[str | None] = []
    for part in parts if isinstance(parts, (list, tuple)) else ():
        text = get(part, "text")
        found.append(text if isinstance(text, str) and not get(part, "thought") else None)
    return found


def grounding(response: Any) -> Any:
    """Candidate 0's ``grounding_metadata`` (None when the model did not search)."""
    candidates = get(response, "candidates")
    first = candidates[0] if isinstance(candidates, (list, tuple)) and candidates else None
    return get(first, "grounding_metadata") if first is not None else None


@dataclass(frozen=True, slots=True)
class Grounding:
    """What one answer's grounding metadata says: the retrieved chunks (``sources``, in order),
    and for each grounding chunk its source (None: the web, not the app's)."""

    sources: tuple[Source, ...]
    by_chunk_index: tuple[Source | None, ...]
    queries: tuple[str, ...]
    store: str | None  # the File Search store every chunk names, when they name one


def read_grounding(metadata: Any) -> Grounding:
    by_index: list[Source | None] = []
    stores: set[str] = set()
    for chunk in get(metadata, "grounding_chunks") or ():
        context = get(chunk, "retrieved_context")
        if context is None:
            by_index.append(None)
            continue
        store = get(context, "file_search_store")
        if isinstance(store, str) and store:
            stores.add(store)
        by_index.append(_source(context))
    queries = tuple(q for q in get(metadata, "retrieval_queries") or () if isinstance(q, str))
    sources = tuple(s for s in by_index if s is not None)
    return Grounding(sources, tuple(by_index), queries, next(iter(stores)) if len(stores) == 1 else None)


def _source(context: Any) -> Source:
    text = get(context, "text")
    rag_chunk = get(context, "rag_chunk")
    if not isinstance(text, str):
        text = get(rag_chunk, "text") if rag_chunk is not None else None
        text = text if isinstance(text, str) else None
    chunk_id = get(rag_chunk, "chunk_id") if rag_chunk is not None else None
    if isinstance(chunk_id, str) and chunk_id:
        return Source(chunk_id, text)
    document = _document_of(context, rag_chunk)
    digest = content_digest(text) if text is not None else None
    if document is not None:
        return Source(f"{document}#{digest}" if digest else document, text)
    return Source(digest or content_digest(""), text)


def _document_of(context: Any, rag_chunk: Any) -> str | None:
    """The document a retrieved context came from, where the API names one."""
    found = (get(rag_chunk, "file_id") if rag_chunk is not None else None) or get(context, "document_name")
    return found if isinstance(found, str) and found else None


def citations(metadata: Any, found: Grounding, parts: Sequence[str | None]) -> Provided:
    """The grounding supports as the answer's citations, resolved to the chunks they name, with
    their segments as character offsets into the answer (``parts``: candidate 0's part texts)."""
    refs: list[tuple[str, Any]] = []
    segments: list[tuple[int, int, str]] = []
    for support in get(metadata, "grounding_supports") or ():
        indices = [i for i in get(support, "grounding_chunk_indices") or () if not _is_web(i, found)]
        refs.extend((KIND, i) for i in indices)
        position = _position(get(support, "segment"), parts)
        if position is not None:
            for index in indices:
                source = _at(index, found)
                if source is not None:
                    segments.append((*position, source.chunk_id))
    provided = by_index(refs, {KIND: found.by_chunk_index})
    return Provided(provided.cited_ids, provided.invalid, segments=tuple(dict.fromkeys(segments)))


def _at(index: Any, found: Grounding) -> Source | None:
    if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(found.by_chunk_index):
        return found.by_chunk_index[index]
    return None


def _is_web(index: Any, found: Grounding) -> bool:
    """A valid index whose chunk is not a retrieved context (the web): not the app's source."""
    return isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(found.by_chunk_index) and found.by_chunk_index[index] is None


def _position(segment: Any, parts: Sequence[str | None]) -> tuple[int, int] | None:
    """A segment's (start, end) in characters of the answer text, from bytes within its part."""
    if segment is None:
        return None
    part_index = get(segment, "part_index") or 0
    start, end = get(segment, "start_index") or 0, get(segment, "end_index")
    if not (isinstance(part_index, int) and 0 <= part_index < len(parts) and isinstance(start, int) and isinstance(end, int)):
        return None
    text = parts[part_index]
    if text is None:
        return None
    encoded = text.encode("utf-8")
    if not 0 <= start <= end <= len(encoded):
        return None
    try:
        before, cited = encoded[:start].decode("utf-8"), encoded[start:end].decode("utf-8")
    except UnicodeDecodeError:  # not on character boundaries: not the byte offsets we know
        return None
    given = get(segment, "text")
    if isinstance(given, str) and given and given != cited:
        return None
    offset = sum(len(t) for t in parts[:part_index] if t is not None) + len(before)
    return offset, offset + len(cited)


def stream_metadata(chunks: Iterable[Any]) -> Any:
    """The grounding metadata of a stream: the last chunk's that has any (it may come only on
    the last chunk)."""
    found = None
    for chunk in chunks:
        metadata = grounding(chunk)
        if metadata is not None and (get(metadata, "grounding_chunks") or get(metadata, "grounding_supports")):
            found = metadata
    return found


def stream_parts(chunks: Iterable[Any]) -> list[str | None]:
    """A stream's answer as one part: the text the app read, joined."""
    texts = [t for chunk in chunks for t in part_texts(chunk) if t is not None]
    return ["".join(texts)]
