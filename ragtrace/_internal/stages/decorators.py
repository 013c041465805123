"""The public stage decorators: which stage each opens and what it records from the call.

``@retriever``, ``@reranker``, ``@embedder``, ``@assembler``, ``@generator`` and the function form
of ``@rag_pipeline`` read the stage's inputs from the call's arguments and its result from what the
function returns; ``wrapping`` runs the call itself (every function kind, the tracing-off path).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from opentelemetry import trace

from .. import names
from ..core.chunks import make_accessors
from ..core.answer import checked_pattern
from .assemble_stage import Assemble
from .generation import Generate
from ..core.invocation import QUERY_KEYS, first_argument, is_text, parameter_reader
from .retrieval import Embed, Rerank, Retrieve
from .stage import Stage
from .wrapping import decorate

_F = TypeVar("_F", bound=Callable[..., Any])

_DOCUMENT_KEYS = ("documents", "docs", "chunks", "hits", "candidates", "nodes", "results", "passages", "context", "sources")
_PROMPT_KEYS = ("prompt", "messages")


# --- argument extraction ---------------------------------------------------------------------
def _is_documents(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _is_prompt(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, Sequence) and bool(value) and all(isinstance(m, Mapping) for m in value)
    )


# --- the public decorators -------------------------------------------------------------------
def _bare_or_configured(func: Any, build: Callable[[Any], Any]) -> Any:
    """Support both ``@decorator`` and ``@decorator(option=...)``; anything but a callable is
    refused at once (a wrapped object would pass its methods, ``.invoke()`` say, through untraced)."""
    if func is None:
        return lambda f: build(_callable(f))
    return build(_callable(func))


def _callable(func: Any) -> Any:
    if not callable(func):
        raise TypeError(
            f"ragtrace decorators trace a function or method, got a {type(func).__name__} object. Pass options "
            "as keywords; for a framework object (a LangChain retriever, a LlamaIndex query engine, an OpenAI "
            "client) use ragtrace.instrument(...), or decorate a function that calls it"
        )
    return func


def retriever(
    func: _F | None = None,
    *,
    data_source: str | None = None,
    top_k: int | None = None,
    id_of: Callable[[Any], Any] | None = None,
    content_of: Callable[[Any], Any] | None = None,
    score_of: Callable[[Any], Any] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> Any:
    """Trace a retriever: its query argument and the documents it returns (any common shape)."""
    accessors = make_accessors(id_of, content_of, score_of)

    def make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Stage:
        query = first_argument(args, kwargs, QUERY_KEYS, is_text)
        k = kwargs.get("top_k", kwargs.get("k", top_k))
        return Retrieve(query, data_source=data_source, top_k=k if isinstance(k, int) else top_k, accessors=accessors, tracer_provider=tracer_provider)

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        stage.record(value)

    return _bare_or_configured(func, lambda f: decorate(f, make, result, tracer_provider, results_stream=True))


def reranker(
    func: _F | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
    top_n: int | None = None,
    id_of: Callable[[Any], Any] | None = None,
    content_of: Callable[[Any], Any] | None = None,
    score_of: Callable[[Any], Any] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> Any:
    """Trace a reranker: its query and candidate documents in, the reordered documents out."""
    accessors = make_accessors(id_of, content_of, score_of)

    def make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Stage:
        query = first_argument(args, kwargs, QUERY_KEYS, is_text)
        n = kwargs.get("top_n", top_n)
        return Rerank(model, provider=provider, top_n=n if isinstance(n, int) else top_n, query=query, accessors=accessors, tracer_provider=tracer_provider)

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        stage.record(value, candidates=first_argument(args, kwargs, _DOCUMENT_KEYS, _is_documents))

    return _bare_or_configured(func, lambda f: decorate(f, make, result, tracer_provider, results_stream=True))


def embedder(
    func: _F | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> Any:
    """Trace an embedding call: its input text(s) and the dimensions of what it returns."""

    def make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Stage:
        return Embed(model, provider, tracer_provider=tracer_provider)

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        text = first_argument(args, kwargs, ("texts", *QUERY_KEYS), lambda v: is_text(v) or (_is_documents(v) and all(isinstance(t, str) for t in v)))
        stage.record(value, text=text)

    return _bare_or_configured(func, lambda f: decorate(f, make, result, tracer_provider))


def assembler(
    func: _F | None = None,
    *,
    id_of: Callable[[Any], Any] | None = None,
    content_of: Callable[[Any], Any] | None = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> Any:
    """Trace a prompt builder you wrote.

    Inside it, declare what you render with ``ragtrace.place(chunk, text)`` or
    ``ragtrace.place_all(chunks, render)``: the prompt it returns is then the declared prompt
    (``rag.context.inclusion_method = "declared"``, exact). Without declarations, the chunks
    argument is searched for in the returned prompt (``located``: a search can miss or misplace).
    """
    accessors = make_accessors(id_of, content_of)

    def make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Stage:
        return Assemble(accessors=accessors, tracer_provider=tracer_provider)

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        prompt = "".join(v for v in value if isinstance(v, str)) if streamed else value
        if stage.has_declarations:
            stage.set_prompt(prompt)
        else:
            stage.observe(first_argument(args, kwargs, _DOCUMENT_KEYS, _is_documents), prompt)

    return _bare_or_configured(func, lambda f: decorate(f, make, result, tracer_provider))


def generator(
    func: _F | None = None,
    *,
    model: str | None = None,
    provider: str | None = None,
    role: str = names.ROLE_ANSWER,
    citation_pattern: Any = None,
    tracer_provider: trace.TracerProvider | None = None,
) -> Any:
    """Trace an LLM call: the prompt argument in, the text (or completion, or stream) out.

    ``role`` other than ``"answer"`` (a query rewrite, a grader) keeps the call out of the figures.
    """
    citation_pattern = checked_pattern(citation_pattern)  # a misconfiguration raises here, once

    def traced(target: Any) -> Any:
        used = parameter_reader(getattr(target, "__func__", target), ("temperature", "max_tokens"))  # defaults count: they were used

        def make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Stage:
            return Generate(
                model,
                provider,
                prompt=first_argument(args, kwargs, _PROMPT_KEYS, _is_prompt),
                role=role,
                citation_pattern=citation_pattern,
                tracer_provider=tracer_provider,
                **used(args, kwargs),
            )

        return decorate(target, make, result, tracer_provider, results_stream=True)

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        if streamed:
            stage.stream_done(value)
        else:
            stage.record(value)

    return _bare_or_configured(func, traced)

