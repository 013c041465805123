"""ragtrace: drop-in OpenTelemetry instrumentation for retrieval-augmented generation.

Stage spans (embed, retrieve, rerank, assemble, generate) inside a ``rag_pipeline`` root, exact
context inclusion recorded while the prompt is built, citations parsed from the answer, and
per-trace recall proxies attached to the spans before export. See README.md and docs/.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any, Literal

from opentelemetry import trace as _trace

from ._internal import names as _names
from ._internal.core.assembly import ContextRecord, Labeller
from ._internal.core.chunks import make_accessors as _make_accessors
from ._internal.core.chunks import Chunk
from ._internal.core.citations import CitationPattern, CitationResult, parse_citations
from ._internal.boundaries.carrier import DEFAULT_TTL as _DEFAULT_TTL
from ._internal.setup.config import configure
from ._internal.boundaries.continued import ContinuedPipeline
from ._internal.boundaries.continued import inject as _inject
from ._internal.stages.decorators import assembler, embedder, generator, reranker, retriever
from ._internal.integrations import instrument, uninstrument
from ._internal.stages.pipeline import RagPipeline
from ._internal.setup.redaction import Redactor
from ._internal.stages.assemble_stage import Assemble, Render
from ._internal.stages.assemble_stage import current as _current_assemble
from ._internal.stages.assemble_stage import render_joined as _render_joined
from ._internal.core.guard import warn_once as _warn_once
from ._internal.stages.generation import Generate
from ._internal.stages.retrieval import Embed, Rerank, Retrieve
from ._internal.stages.scores import SCORERS, record_score
from ._internal.core.tokens import SimpleTokenizer, TiktokenTokenizer, Tokenizer

__all__ = [
    "configure",
    "instrument",
    "uninstrument",
    "rag_pipeline",
    "inject",
    "continue_pipeline",
    "embed",
    "retrieve",
    "rerank",
    "assemble",
    "generate",
    "embedder",
    "retriever",
    "reranker",
    "assembler",
    "generator",
    "place",
    "place_all",
    "parse_citations",
    "record_score",
    "SCORERS",
    "Chunk",
    "CitationResult",
    "ContextRecord",
    "RagPipeline",
    "ContinuedPipeline",
    "Embed",
    "Retrieve",
    "Rerank",
    "Assemble",
    "Render",
    "Generate",
    "Tokenizer",
    "SimpleTokenizer",
    "TiktokenTokenizer",
]

_Provider = _trace.TracerProvider


def rag_pipeline(
    name: str,
    *,
    query: str | None = None,
    query_id: str | None = None,
    tracer_provider: _Provider | None = None,
    capture_content: str | None = None,
    redactor: Redactor | None = None,
    session_id: str | None = None,
    user_id: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    tags: Sequence[str] | None = None,
    **attributes: Any,
) -> RagPipeline:
    """The root span ``invoke_workflow {name}``; a context manager (sync or async) or a decorator.

    Yields a run whose ``.metrics`` holds the per-trace figures after exit. ``session_id``,
    ``user_id`` and ``tags`` become OpenInference's ``session.id``, ``user.id`` and ``tag.tags`` in
    every content mode; ``metadata`` (``metadata``, JSON) is content, exported in full mode only.
    Extra keyword arguments (``version=``, ``route=``...) become ``rag.pipeline.<key>`` attributes.
    """
    return RagPipeline(
        name,
        query=query,
        query_id=query_id,
        tracer_provider=tracer_provider,
        capture_content=capture_content,
        redactor=redactor,
        session_id=session_id,
        user_id=user_id,
        metadata=metadata,
        tags=tags,
        **attributes,
    )


def inject(carrier: MutableMapping[str, str], *, ttl: float = _DEFAULT_TTL) -> bool:
    """Inside a ``rag_pipeline``, after its assembly: hand the pipeline to another process.

    Writes one ``ragtrace-context`` entry into ``carrier`` (HTTP headers, a queue message's
    attributes, a JSON body): the retrieval and placement record (ids, scores, ranks, labels,
    positions, token counts, the pipeline's name, version and route, the content mode; never
    content in redact or hash mode), signed with the shared hash key, bound to this trace and
    valid for ``ttl`` seconds. The W3C trace context goes in too, through the app's propagators,
    replacing any trace context the carrier already held. The root is then marked delegated
    (``rag.pipeline.delegated``): the receiving side's ``continue_pipeline`` carries the figures.
    Without a shared hash key (``configure(hash_key=...)`` or ``RAGTRACE_HASH_KEY``) no record is
    written: a set-up error logged once, and the root says ``remote_context_missing``; nothing is
    raised. Returns whether an entry was written (False outside a traced pipeline or without the
    key). See docs/cross-process.md.
    """
    return _inject(carrier, ttl=ttl)


def continue_pipeline(carrier: Any, name: str | None = None, *, if_missing: Literal["redact", "own"] = "redact") -> ContinuedPipeline:
    """The answering side of a pipeline another process started: ``with
    ragtrace.continue_pipeline(request.headers) as run:`` (sync or async).

    Opens a ``pipeline_segment`` span, a child of the remote span, whose generate stages (and the
    integrations) score the answer against the carried record exactly as in one process;
    ``run.metrics`` and the metrics use the origin's pipeline labels. A missing, oversized,
    tampered, expired or other-trace record leaves the figures not measurable
    (``remote_context_missing``, ``remote_context_too_large``, ``remote_context_invalid``), logged
    once; nothing is raised for it. ``name`` names the pipeline when the record can't say.
    Fail closed: a segment whose record is present but unusable is redacted, whatever this
    process's content mode; one with no record is redacted too unless ``if_missing="own"`` (this
    process's own mode, for a service that also takes hand-offs from senders without ragtrace).
    Without a shared hash key the record is treated as missing (logged once, never raised).
    See docs/cross-process.md.
    """
    return ContinuedPipeline(carrier, name, if_missing=if_missing)


def embed(model: str | None = None, provider: str | None = None, *, tracer_provider: _Provider | None = None) -> Embed:
    """An ``embeddings {model}`` span; call ``.record(vectors or dimensions=, input_tokens=)``."""
    return Embed(model, provider, tracer_provider=tracer_provider)


def retrieve(
    query: str | None = None,
    *,
    data_source: str | None = None,
    top_k: int | None = None,
    id_of: Callable[[Any], Any] | None = None,
    content_of: Callable[[Any], Any] | None = None,
    score_of: Callable[[Any], Any] | None = None,
    tracer_provider: _Provider | None = None,
) -> Retrieve:
    """A ``retrieval {data_source}`` span; call ``.record(results)`` with the retriever's output."""
    return Retrieve(
        query,
        data_source=data_source,
        top_k=top_k,
        accessors=_make_accessors(id_of, content_of, score_of),
        tracer_provider=tracer_provider,
    )


def rerank(
    model: str | None = None,
    *,
    provider: str | None = None,
    top_n: int | None = None,
    query: str | None = None,
    id_of: Callable[[Any], Any] | None = None,
    content_of: Callable[[Any], Any] | None = None,
    score_of: Callable[[Any], Any] | None = None,
    tracer_provider: _Provider | None = None,
) -> Rerank:
    """A ``rerank {model}`` span; call ``.record(kept)`` (candidates default to the last retrieval)."""
    return Rerank(
        model,
        provider=provider,
        top_n=top_n,
        query=query,
        accessors=_make_accessors(id_of, content_of, score_of),
        tracer_provider=tracer_provider,
    )


def assemble(
    max_tokens: int | None = None,
    *,
    labeller: Labeller = "index",
    chunk_format: str | None = None,
    separator: str = "\n\n",
    truncate: bool = True,
    tokenizer: Tokenizer | None = None,
    id_of: Callable[[Any], Any] | None = None,
    content_of: Callable[[Any], Any] | None = None,
    tracer_provider: _Provider | None = None,
) -> Assemble:
    """An ``assemble_context`` span that builds the prompt: ``.add(chunk)``, ``.drop(chunk, reason=)``,
    ``.render(template, **variables)`` / ``.prompt``. Records exactly which chunk landed where.

    ``labeller`` is ``"index"`` (``[1]``, ``[2]``...), ``"id"`` (``[chunk-id]``) or a callable
    ``(chunk, position) -> label``. ``max_tokens`` is the context budget; a chunk that doesn't fit
    is truncated (``truncate=True``) or dropped as over budget.
    """
    if labeller not in ("index", "id") and not callable(labeller):
        raise ValueError(f"labeller must be 'index', 'id' or a callable, got {labeller!r}")
    if max_tokens is not None and (not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 0):
        raise ValueError(f"max_tokens must be a non-negative int, got {max_tokens!r}")
    return Assemble(
        max_tokens,
        labeller=labeller,
        chunk_format=chunk_format,
        separator=separator,
        truncate=truncate,
        tokenizer=tokenizer,
        accessors=_make_accessors(id_of, content_of),
        tracer_provider=tracer_provider,
    )


def generate(
    model: str | None = None,
    provider: str | None = None,
    *,
    prompt: str | Sequence[Mapping[str, Any]] | None = None,
    context: Assemble | ContextRecord | None = None,
    role: str = _names.ROLE_ANSWER,
    citation_pattern: CitationPattern | None = None,
    temperature: float | None = None,
    max_tokens: int | None = None,
    tracer_provider: _Provider | None = None,
) -> Generate:
    """A ``chat {model}`` span; call ``.record(output)`` (text, OpenAI-style completion or pieces),
    or pass a stream through ``.stream(pieces)``.

    An ``"answer"`` generation is scored against ``context`` (default: the pipeline's latest
    assembly); other roles (``"rewrite"``, ``"grader"``...) are traced but left out of the figures.
    """
    return Generate(
        model,
        provider,
        prompt=prompt,
        context=context,
        role=role,
        citation_pattern=citation_pattern,
        temperature=temperature,
        max_tokens=max_tokens,
        tracer_provider=tracer_provider,
    )


def place(chunk: Any, text: str, *, label: str | None = None) -> bool:
    """``Assemble.place`` on the assembly running now (an ``assemble()`` block or an
    ``@assembler`` function): declare that the prompt shows ``text`` for ``chunk``. Outside one,
    nothing is recorded (warned once) and False is returned."""
    stage = _current_assemble()
    if stage is None:
        _warn_once("place-outside", "ragtrace.place() was called outside an assemble block or @assembler function; not recorded")
        return False
    return stage.place(chunk, text, label=label)


def place_all(chunks: Any, render: Render = "[{label}] {content}", *, separator: str = "\n\n") -> str:
    """``Assemble.place_all`` on the assembly running now: render, declare and join the chunks
    (``def format_docs(docs): return ragtrace.place_all(docs, lambda d: d.page_content)``).
    Outside an assembly the joined text is still returned; nothing is recorded (warned once)."""
    stage = _current_assemble()
    if stage is not None:
        return stage.place_all(chunks, render, separator=separator)
    _warn_once("place-outside", "ragtrace.place_all() was called outside an assemble block or @assembler function; not recorded")
    return _render_joined(chunks, render, separator)
