"""The Responses API's ``file_search`` tool: the model searches a vector store itself, inside one
``responses.create`` call, and the response says what it found and which files the answer cites.

A call whose ``tools`` has a ``file_search`` tool is a RAG call (``openai`` wraps the call; this
module reads it). Outside any ``rag_pipeline`` it is one pipeline, the automatic root the call
opens (``_provider``) and its generate span ends; inside one, its stages are the pipeline's. From
the response (or, streamed, from the events the app read):

- each ``file_search_call`` item is a retrieve span: its ``queries``, the store, and its
  ``results`` in rank order, each a chunk with id ``{file_id}#{keyed digest of its text}``, the
  id ``vector_stores.search`` gives the same chunk (``openai_vector_stores``);
- the results are what the model was given: an assemble span with ``inclusion_method =
  "provider"``, in result order;
- the ``file_citation`` annotations of the message are the answer's citations. They name files,
  not chunks (``rag.citation.granularity = "file"``): each resolves to its file's results
  (``provided.by_file``), exact when the cited file has one result there, not measurable for
  the chunk-counting figures when it has several (``citations_file_level``).

Without ``include=["file_search_call.results"]`` the results are absent: the retrieve span says so
(``rag.retrieval.status = "results_not_included"``), and what can be known, the cited files, is
on the generate span (``rag.citation.file_ids``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from opentelemetry import trace

from ..core import figures
from ..stages.generation import Generate
from ..core.keyed import content_digest
from ..core.outputs import get
from ..core.provided import Source, by_file
from . import _provider
from .openai_vector_stores import ROOT_NAME, file_id_of


def tool(kwargs: Mapping[str, Any]) -> Any:
    """The request's ``file_search`` tool, or None."""
    tools = kwargs.get("tools")
    if not isinstance(tools, (list, tuple)):
        return None
    return next((t for t in tools if get(t, "type") == "file_search"), None)


def begin(query: str | None, provider: trace.TracerProvider | None) -> Any:
    """Before the call's generate span opens: the automatic root it goes into (None in a pipeline)."""
    return _provider.root_for(ROOT_NAME, query, provider)


def record(stage: Generate, kwargs: Mapping[str, Any], outputs: Iterable[Any]) -> None:
    """The call's retrieve and assemble spans and its citations, from the ``Response`` or the
    stream events the app read, before its generate span ends."""
    items, annotations = _read(outputs)
    found = tool(kwargs)
    stores = get(found, "vector_store_ids")
    store = stores[0] if isinstance(stores, (list, tuple)) and len(stores) == 1 and isinstance(stores[0], str) else None
    sources: list[Source] = []
    owners: list[tuple[str, str | None]] | None = []
    for call in items:
        queries = [q for q in get(call, "queries") or () if isinstance(q, str)]
        results = get(call, "results")
        query = "\n".join(queries) or None
        if results is None:
            owners = None
            _provider.record_retrieval((), None, query=query, data_source=store, provider=stage._provider, root=stage.auto_root, status=figures.STATUS_RESULTS_NOT_INCLUDED)
            continue
        found_here = [_source(result) for result in results]
        _provider.record_retrieval(
            [s for s, _ in found_here], [get(r, "score") for r in results], query=query, data_source=store, provider=stage._provider, root=stage.auto_root
        )
        sources.extend(s for s, _ in found_here)
        if owners is not None:
            owners.extend((s.chunk_id, file_id) for s, file_id in found_here)
    if owners is not None and items:
        _provider.record_context(sources, stage._provider, stage.auto_root)
    stage.provided = by_file(annotations, owners)


def _source(result: Any) -> tuple[Source, str | None]:
    text = get(result, "text")
    text = text if isinstance(text, str) else ""
    file_id = file_id_of(result)
    return Source(f"{file_id}#{content_digest(text)}", text, file_id=file_id), file_id


def _read(outputs: Iterable[Any]) -> tuple[list[Any], list[str]]:
    """The ``file_search_call`` items and the cited file ids, from a ``Response`` or stream
    events: the completed response when the app read that far, else the items and annotations
    of the events it did read."""
    items: list[Any] = []
    annotations: list[str] = []
    completed = None
    for output in outputs:
        kind = get(output, "type")
        if get(output, "object") == "response":
            completed = output
        elif kind == "response.completed":
            completed = get(output, "response")
        elif kind == "response.output_item.done":
            items.append(get(output, "item"))
        elif kind == "response.output_text.annotation.added":
            annotations.extend(_cited([get(output, "annotation")]))
    if completed is not None:
        items = list(get(completed, "output") or ())
    calls = [item for item in items if get(item, "type") == "file_search_call"]
    for item in items:
        if get(item, "type") == "message":
            for part in get(item, "content") or ():
                annotations.extend(_cited(get(part, "annotations") or ()))
    return calls, annotations


def _cited(annotations: Iterable[Any]) -> list[str]:
    return [f for f in (get(a, "file_id") for a in annotations if get(a, "type") == "file_citation") if isinstance(f, str)]
