"""What the provider integrations share (``anthropic``, ``openai_file_search``): the sources a model
API was given become a retrieve span and an assemble span of the call's pipeline, through the same
stage handles an app's own code uses, so the figures come from the one pipeline state.

Which pipeline. Inside a ``rag_pipeline`` the stages are its stages. Outside any, the call joins
the automatic root this request's retrieval opened (a ``vector_stores.search`` or a Bedrock
``retrieve`` just before, not answered yet), or opens one as a retrieval does (``auto_root``):
the call's generate span is its answer and ends it. So
each call outside a pipeline is one pipeline, with no other change to the app.

Ids. A source the app's own recorded retrieval returned (same text, so the same keyed content
digest) keeps that retrieval's id and is not retrieved twice: only the assembly places it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from opentelemetry import trace

from ..boundaries import auto_root
from .. import names
from ..stages import state as state_module
from ..core import figures
from ..stages.assemble_stage import Assemble
from ..core.chunks import Chunk
from ..core.keyed import content_digest, holds_digest, warn_if_random
from ..core.provided import Provided, Source, by_index, context_record
from ..stages.retrieval import Retrieve
from ._anthropic_blocks import Request


def root_for(name: str, query: str | None, provider: trace.TracerProvider | None) -> Any:
    """The automatic root the call's stages go into (None inside a pipeline or with telemetry off):
    the one this context's retrieval opened for the request (a ``retrieve`` or
    ``vector_stores.search`` just before, whose results the call is given), which its answer
    would join anyway, else a new one. Call it in the caller's context, before the call's first
    stage opens."""
    found = state_module.auto_root() if state_module.current() is None else None
    if found is not None and found.accepts():
        return found
    return auto_root.for_retrieval(name, query, provider)


def with_app_ids(sources: Sequence[Source], root: Any) -> tuple[list[Source], list[bool]]:
    """``sources`` under the ids the app's recorded retrievals gave their text, and which were."""
    state = state_module.current() or (root.state if root is not None else None)
    renamed, known = [], []
    for source in sources:
        found = None
        if state is not None and source.text is not None:
            digest = content_digest(source.text)
            found = state.canonical(Chunk(digest, 0, content_hash=digest)).id
            found = None if found == digest else found
        renamed.append(source if found is None else replace(source, chunk_id=found))
        known.append(found is not None)
    return renamed, known


def record_retrieval(
    sources: Sequence[Source],
    scores: Sequence[float | None] | None,
    *,
    query: str | None,
    data_source: str | None,
    provider: trace.TracerProvider | None,
    root: Any,
    status: str | None = None,
) -> Retrieve:
    """A retrieve span of the sources, in rank order (``status``: why it holds no results)."""
    stage = Retrieve(query, data_source=data_source, tracer_provider=provider)
    stage.auto_root = root
    stage.open()
    if status is None:
        results = [{"id": s.chunk_id, "content": s.text, "score": scores[i] if scores else None} for i, s in enumerate(sources)]
        if any(s.file_id is not None for s in sources):  # chunks of named files: the file-level figures
            stage.record_files(results, [s.file_id for s in sources])
        else:
            stage.record(results)
        if not stage.inert and any(holds_digest(s.chunk_id) for s in sources):  # ids with a keyed digest in them were exported
            warn_if_random("provider chunk ids (file_id#digest, source#digest, a document's digest) differ between processes")
    elif stage.attrs is not None:
        stage.attrs.set(names.RAG_RETRIEVAL_STATUS, status)
    stage.close()
    return stage


def record_context(sources: Sequence[Source], provider: trace.TracerProvider | None, root: Any) -> Assemble:
    """An assemble span whose record is the provider's context (``inclusion_method=provider``)."""
    stage = Assemble(tracer_provider=provider)
    stage.auto_root = root
    stage.open()
    stage.given(context_record(sources, stage.builder.tokenizer))
    stage.close()
    return stage


def record_sources(request: Request, root: Any, provider: trace.TracerProvider | None, *, context: bool = True) -> Request:
    """A request that hands the model its sources (Anthropic's and Bedrock Converse's blocks,
    Cohere's documents): the retrieve span of the sources the app's recorded retrievals don't
    already hold, and the assemble span of all of them (not with ``context=False``: the API
    may have shown the model fewer or others); the request under the ids they are recorded with."""
    sources, known = with_app_ids(request.sources, root)
    new = [source for source, seen in zip(sources, known) if not seen]
    if new:
        record_retrieval(new, None, query=request.query, data_source=None, provider=provider, root=root)
    if context:
        record_context(sources, provider, root)
    return Request(tuple(sources), request.kinds, request.query)


def provided_by_index(request: Request, refs: Sequence[tuple[str, Any]]) -> Provided:
    """The response's citations, each (kind, index) into the request's blocks of that kind."""
    provided = by_index(refs, request.by_kind())
    if request.unreadable:  # a PDF's tokens are unknown: the figures that count them would be made up
        return Provided(provided.cited_ids, provided.invalid, unmeasured=figures.STATUS_SOURCE_UNREADABLE)
    return provided
