"""wrapt decorators for every function kind: sync, async, generators, async generators, methods.

A decorated function returns exactly what it returned before and raises exactly what it raised
before. Generator spans cover the whole iteration, but their context is current only while the
generator is being stepped, so nothing leaks into the caller between steps. With no provider
configured and no pipeline active, the wrapper calls straight through.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator, Mapping, Sequence
from typing import Any, TypeVar

import wrapt
from opentelemetry import trace
from opentelemetry.metrics import _internal as _metrics_api

from . import config as config_module
from . import names, state as state_module
from .chunks import make_accessors
from .guard import call_guarded, guard
from .answer import checked_pattern
from .passthrough import record_as_consumed
from .assemble_stage import Assemble
from .generation import Generate
from .invocation import parameter_reader
from .retrieval import Embed, Rerank, Retrieve
from .stage import Stage

_F = TypeVar("_F", bound=Callable[..., Any])
MakeStage = Callable[[tuple[Any, ...], dict[str, Any]], Stage]
OnResult = Callable[[Stage, tuple[Any, ...], dict[str, Any], Any, bool], None]

_QUERY_KEYS = ("query", "question", "q", "text", "input")
_DOCUMENT_KEYS = ("documents", "docs", "chunks", "hits", "candidates", "nodes", "results", "passages", "context", "sources")
_PROMPT_KEYS = ("prompt", "messages")


def _decorate(func: Any, make: MakeStage, on_result: OnResult, provider: trace.TracerProvider | None, *, results_stream: bool = False) -> Any:
    """``results_stream``: the stage records the items of what the function returns, so a returned
    one-shot iterator is recorded as the application consumes it (``passthrough``), never read here."""
    if provider is not None:
        config_module.provider_given()
    target = getattr(func, "__func__", func)
    if inspect.isasyncgenfunction(target):
        run = _run_async_generator
    elif inspect.isgeneratorfunction(target):
        run = _run_generator
    elif inspect.iscoroutinefunction(target):
        run = _run_async
    else:
        run = None  # sync: run inline below, so a traced recursive call costs one frame less
        if _unbound_function(func):
            return _plain_sync(func, make, on_result, provider, results_stream)

    @wrapt.decorator
    def wrapper(wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not config_module.PROVIDERS_GIVEN and trace._TRACER_PROVIDER is None and _metrics_api._METER_PROVIDER is None:
            return wrapped(*args, **kwargs)  # tracing off: the one test (config.PROVIDERS_GIVEN)
        if state_module.current() is None and not config_module.telemetry_on(provider):
            return wrapped(*args, **kwargs)
        if run is not None:
            return run(wrapped, args, kwargs, make, on_result, results_stream)
        stage = _new_stage(make, args, kwargs)
        if stage is None:
            return wrapped(*args, **kwargs)
        stage.attach()
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            stage.detach()
            stage.close(error)
            raise
        stage.detach()
        return _returned(stage, on_result, args, kwargs, result, results_stream)

    return wrapper(func)


def _unbound_function(func: Any) -> bool:
    """A Python function not defined in a class body, so never bound to an instance: it needs no
    wrapt proxy to separate ``self``, and a plain wrapper saves wrapt's C call, which CPython 3.11
    counts as one more recursion level per traced call (issue 16 item 5)."""
    if not inspect.isfunction(func):
        return False
    scope = func.__qualname__.rpartition(".")[0]
    return not scope or scope.endswith("<locals>")


def _plain_sync(func: Callable[..., Any], make: MakeStage, on_result: OnResult, provider: trace.TracerProvider | None, results_stream: bool) -> Any:
    """The sync wrapper of ``_decorate`` as a plain function (``functools.wraps``: name, docstring,
    ``__wrapped__`` and so the signature are the function's). Its body repeats wrapt's on purpose:
    a shared helper would put the frame back."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if not config_module.PROVIDERS_GIVEN and trace._TRACER_PROVIDER is None and _metrics_api._METER_PROVIDER is None:
            return func(*args, **kwargs)  # tracing off: the one test (config.PROVIDERS_GIVEN)
        if state_module.current() is None and not config_module.telemetry_on(provider):
            return func(*args, **kwargs)
        stage = _new_stage(make, args, kwargs)
        if stage is None:
            return func(*args, **kwargs)
        stage.attach()
        try:
            result = func(*args, **kwargs)
        except BaseException as error:
            stage.detach()
            stage.close(error)
            raise
        stage.detach()
        return _returned(stage, on_result, args, kwargs, result, results_stream)

    return wrapper


def _new_stage(make: MakeStage, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Stage | None:
    stage = call_guarded("span start", make, args, kwargs)
    if stage is not None:
        stage.open()
    return stage


def _finish(stage: Stage, on_result: OnResult, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, streamed: bool) -> None:
    with guard(f"{stage.stage} bookkeeping"):
        on_result(stage, args, kwargs, result, streamed)
    stage.close()


def _returned(stage: Stage, on_result: OnResult, args: tuple[Any, ...], kwargs: dict[str, Any], result: Any, results_stream: bool) -> Any:
    """What a sync or async call returned, recorded now, or as it is consumed if it is an iterator."""
    if results_stream:

        def consumed(items: list[Any] | None, error: BaseException | None) -> None:
            if items is None or error is not None:
                stage.close(error)  # nothing passed through ragtrace: no result rather than a false empty one
            else:
                _finish(stage, on_result, args, kwargs, items, True)

        proxy = call_guarded("stream passthrough", record_as_consumed, result, stage, consumed)
        if proxy is not None:
            return proxy
    _finish(stage, on_result, args, kwargs, result, False)
    return result


async def _run_async(wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], make: MakeStage, on_result: OnResult, results_stream: bool) -> Any:
    stage = _new_stage(make, args, kwargs)
    if stage is None:
        return await wrapped(*args, **kwargs)
    stage.attach()
    try:
        result = await wrapped(*args, **kwargs)
    except BaseException as error:
        stage.detach()
        stage.close(error)
        raise
    stage.detach()
    return _returned(stage, on_result, args, kwargs, result, results_stream)


def _run_generator(wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], make: MakeStage, on_result: OnResult, results_stream: bool) -> Generator[Any, Any, Any]:
    stage = _new_stage(make, args, kwargs)
    if stage is None:
        return (yield from wrapped(*args, **kwargs))
    items: list[Any] = []
    to_send: Any = None
    to_throw: BaseException | None = None
    stage.attach()
    try:
        inner = wrapped(*args, **kwargs)
    except BaseException as error:
        stage.detach()
        stage.close(error)
        raise
    stage.detach()
    while True:
        stage.attach()
        try:
            if to_throw is not None:
                error, to_throw = to_throw, None
                item = inner.throw(error)
            else:
                item = inner.send(to_send)
        except StopIteration as stop:
            stage.detach()
            _finish(stage, on_result, args, kwargs, items, True)
            return stop.value
        except BaseException as error:
            stage.detach()
            stage.close(error)
            raise
        stage.detach()
        stage.item_arrived()
        items.append(item)
        try:
            to_send = yield item
        except GeneratorExit:
            stage.attach()
            try:
                inner.close()
            finally:
                stage.detach()
                _finish(stage, on_result, args, kwargs, items, True)
            raise
        except BaseException as error:  # thrown in by the caller: forward it
            to_throw = error


async def _run_async_generator(wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], make: MakeStage, on_result: OnResult, results_stream: bool) -> AsyncGenerator[Any, Any]:
    stage = _new_stage(make, args, kwargs)
    inner = None
    items: list[Any] = []
    to_send: Any = None
    to_throw: BaseException | None = None
    if stage is not None:
        stage.attach()
    try:
        inner = wrapped(*args, **kwargs)
    except BaseException as error:
        if stage is not None:
            stage.detach()
            stage.close(error)
        raise
    if stage is not None:
        stage.detach()
    while True:
        if stage is not None:
            stage.attach()
        try:
            if to_throw is not None:
                error, to_throw = to_throw, None
                item = await inner.athrow(error)
            else:
                item = await inner.asend(to_send)
        except StopAsyncIteration:
            if stage is not None:
                stage.detach()
                _finish(stage, on_result, args, kwargs, items, True)
            return
        except BaseException as error:
            if stage is not None:
                stage.detach()
                stage.close(error)
            raise
        if stage is not None:
            stage.detach()
            stage.item_arrived()
            items.append(item)
        try:
            to_send = yield item
        except GeneratorExit:
            if stage is not None:
                stage.attach()
            try:
                await inner.aclose()
            finally:
                if stage is not None:
                    stage.detach()
                    _finish(stage, on_result, args, kwargs, items, True)
            raise
        except BaseException as error:
            to_throw = error


# --- argument extraction ---------------------------------------------------------------------
def _first(args: Sequence[Any], kwargs: Mapping[str, Any], keys: tuple[str, ...], accept: Callable[[Any], bool]) -> Any:
    for key in keys:
        if key in kwargs and accept(kwargs[key]):
            return kwargs[key]
    return next((arg for arg in args if accept(arg)), None)


def _is_text(value: Any) -> bool:
    return isinstance(value, str)


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
        query = _first(args, kwargs, _QUERY_KEYS, _is_text)
        k = kwargs.get("top_k", kwargs.get("k", top_k))
        return Retrieve(query, data_source=data_source, top_k=k if isinstance(k, int) else top_k, accessors=accessors, tracer_provider=tracer_provider)

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        stage.record(value)

    return _bare_or_configured(func, lambda f: _decorate(f, make, result, tracer_provider, results_stream=True))


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
        query = _first(args, kwargs, _QUERY_KEYS, _is_text)
        n = kwargs.get("top_n", top_n)
        return Rerank(model, provider=provider, top_n=n if isinstance(n, int) else top_n, query=query, accessors=accessors, tracer_provider=tracer_provider)

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        stage.record(value, candidates=_first(args, kwargs, _DOCUMENT_KEYS, _is_documents))

    return _bare_or_configured(func, lambda f: _decorate(f, make, result, tracer_provider, results_stream=True))


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
        text = _first(args, kwargs, ("texts", *_QUERY_KEYS), lambda v: _is_text(v) or (_is_documents(v) and all(isinstance(t, str) for t in v)))
        stage.record(value, text=text)

    return _bare_or_configured(func, lambda f: _decorate(f, make, result, tracer_provider))


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
            stage.observe(_first(args, kwargs, _DOCUMENT_KEYS, _is_documents), prompt)

    return _bare_or_configured(func, lambda f: _decorate(f, make, result, tracer_provider))


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
                prompt=_first(args, kwargs, _PROMPT_KEYS, _is_prompt),
                role=role,
                citation_pattern=citation_pattern,
                tracer_provider=tracer_provider,
                **used(args, kwargs),
            )

        return _decorate(target, make, result, tracer_provider, results_stream=True)

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        if streamed:
            stage.stream_done(value)
        else:
            stage.record(value)

    return _bare_or_configured(func, traced)


def pipeline_decorator(func: _F, name: str, options: dict[str, Any]) -> _F:
    """``@rag_pipeline(name)`` on a function: one root span and one state per call."""
    from .pipeline import RagPipeline

    provider = options.get("tracer_provider")

    def make(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Stage:
        query = options.get("query") or _first(args, kwargs, _QUERY_KEYS, _is_text)
        return RagPipeline(name, **{**options, "query": query})

    def result(stage: Any, args: tuple[Any, ...], kwargs: dict[str, Any], value: Any, streamed: bool) -> None:
        stage.record(value if not streamed else None)

    return _decorate(func, make, result, provider)  # type: ignore[no-any-return]
