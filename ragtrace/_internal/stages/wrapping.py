"""How a stage wraps each function kind: sync, async, generators, async generators, methods.

A wrapped function returns exactly what it returned before and raises exactly what it raised
before. Generator spans cover the whole iteration, but their context is current only while the
generator is being stepped, so nothing leaks into the caller between steps. With no provider
configured and no pipeline active, the wrapper calls straight through. ``decorators`` says which
stage each public decorator opens and what it records; this module only runs the call.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncGenerator, Callable, Generator
from typing import Any

import wrapt
from opentelemetry import trace
from opentelemetry.metrics import _internal as _metrics_api

from ..setup import config as config_module
from . import state as state_module
from ..core.guard import call_guarded, guard
from .passthrough import Kept, record_as_consumed
from .stage import Stage

MakeStage = Callable[[tuple[Any, ...], dict[str, Any]], Stage]
OnResult = Callable[[Stage, tuple[Any, ...], dict[str, Any], Any, bool], None]


def decorate(func: Any, make: MakeStage, on_result: OnResult, provider: trace.TracerProvider | None, *, results_stream: bool = False) -> Any:
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
    """The sync wrapper of ``decorate`` as a plain function (``functools.wraps``: name, docstring,
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

        def consumed(items: Kept | None, error: BaseException | None) -> None:
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
    items = Kept(stage.stream_keep)
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
        items.add(item)
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
    items = Kept(stage.stream_keep if stage is not None else 0)
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
            items.add(item)
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

