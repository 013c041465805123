"""Iterators that a traced function *returns*: recorded as the application consumes them.

A decorated sync or async function may return a one-shot iterator: a generator expression, ``map``,
a DB cursor, an OpenAI ``Stream``. Reading it to record the results would leave the application an
empty iterator, so the application gets a transparent ``wrapt.ObjectProxy`` instead. Attributes,
``isinstance``, ``with`` / ``async with`` and ``close()`` reach the real object; each item the
application takes passes through the stage on its way. The stage stays open until the iterator is
exhausted, raises, is closed, or is dropped, like the span of a decorated generator function.
What is recorded is what the application consumed: all of it when the iterator ran out
(``Kept.ran_out``: a model stream that ran out without its final event was cut off, not finished),
the part read before an early ``close()``/``break``, and nothing when it was read some other way (a
cursor's ``fetchall()``): then the stage ends without a result rather than with a false empty one.
A stage may keep fewer (``Stage.stream_keep``: a retriever keeps ``max_retrieved``): the items
beyond pass on to the application untouched and are only counted (``Kept``), so a cursor that
never ends costs the stage a counter, not its rows.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from typing import Any

import wrapt

from ..core.guard import guard
from .stage import Stage


class Kept(list):  # type: ignore[type-arg]
    """The items of a stream a stage keeps, in order: its first ``limit`` (all with None), and a
    count of every item that passed, so ``omitted`` says how many were seen but not kept."""

    __slots__ = ("limit", "passed", "ran_out")

    def __init__(self, limit: int | None = None) -> None:
        super().__init__()
        self.limit = sys.maxsize if limit is None else limit
        self.passed = 0
        self.ran_out = False  # the iterator ended by itself (StopIteration), not closed by the app

    def add(self, item: Any) -> None:
        self.passed += 1
        if self.passed <= self.limit:
            self.append(item)

    @property
    def omitted(self) -> int:
        return self.passed - len(self)


# (items the application consumed, or None when none passed through; the iterator's own error)
Finish = Callable[[Kept | None, BaseException | None], None]


def record_as_consumed(result: Any, stage: Stage, finish: Finish) -> Any:
    """A recording proxy for a one-shot iterator; None for anything else (recorded at once)."""
    if isinstance(result, (str, bytes, bytearray, Sequence, Mapping)):
        return None
    shape = _shape(result)
    if isinstance(shape, Iterator):
        return RecordingIterator(result, stage, finish)
    if isinstance(shape, AsyncIterator):
        return RecordingAsyncIterator(result, stage, finish)
    return None


def _shape(result: Any) -> Any:
    """What says whether ``result`` is read with ``for`` or ``async for``. Another instrumentor's
    stream proxy (OpenLLMetry's ``ChatStream``) has both protocols, whatever it wraps: then the
    object it wraps says. Bounded: a proxy that names itself as what it wraps must not hang the app."""
    for _ in range(8):
        if not (isinstance(result, Iterator) and isinstance(result, AsyncIterator) and hasattr(result, "__wrapped__")):
            break
        result = result.__wrapped__
    return result


def _same_stream(entered: Any, wrapped: Any) -> bool:
    """Whether ``with`` gave back the stream the proxy wraps: itself, or the stream that another
    instrumentor's proxy in between wraps (OpenLLMetry's ``AnthropicStream`` enters as the SDK's
    ``Stream``). Then the app gets the recording proxy, which reads through the other one."""
    for _ in range(8):  # bounded, as ``_shape``
        if entered is wrapped:
            return True
        wrapped = getattr(wrapped, "__wrapped__", None)
        if wrapped is None:
            return False
    return False


class _Recording(wrapt.ObjectProxy):  # type: ignore[misc]
    """What both proxies share: the stage, the items seen so far, and finishing exactly once."""

    def __init__(self, wrapped: Any, stage: Stage, finish: Finish) -> None:
        super().__init__(wrapped)
        self._self_stage: Stage | None = stage
        self._self_finish: Finish | None = finish
        self._self_items = Kept(stage.stream_keep)

    def _self_end(self, exhausted: bool, error: BaseException | None = None) -> None:
        finish, items = self._self_finish, self._self_items
        if finish is None:
            return
        self._self_finish, self._self_stage, self._self_items = None, None, Kept(0)
        items.ran_out = exhausted and error is None
        finish(items if exhausted or items.passed else None, error)

    def _self_abandon(self) -> None:
        """Closed or dropped before the end: record what passed through so far."""
        self._self_end(False)

    def __del__(self) -> None:
        with guard("stream end"):
            self._self_abandon()


class RecordingIterator(_Recording):
    def __init__(self, wrapped: Any, stage: Stage, finish: Finish) -> None:
        super().__init__(wrapped, stage, finish)
        # another instrumentor's proxy can pass for an iterator (``isinstance`` sees the class it
        # wraps) and have only ``__iter__`` (OpenInference's Anthropic stream): step what it makes
        self._self_next = wrapped if hasattr(type(wrapped), "__next__") else iter(wrapped)

    def __iter__(self) -> Any:
        return self

    def __next__(self) -> Any:
        return self._self_step(next, self._self_next)

    @property
    def send(self) -> Callable[[Any], Any]:
        """A returned generator's ``send``: the sent-to item is recorded like ``next``'s."""
        send = self.__wrapped__.send  # AttributeError for plain iterators, as before

        def recorded_send(value: Any) -> Any:
            return self._self_step(send, value)

        return recorded_send

    @property
    def throw(self) -> Callable[..., Any]:
        throw = self.__wrapped__.throw

        def recorded_throw(*args: Any) -> Any:
            return self._self_step(throw, *args)

        return recorded_throw

    def _self_step(self, step: Callable[..., Any], *args: Any) -> Any:
        stage = self._self_stage
        if stage is None:  # finished: plain passthrough
            return step(*args)
        stage.attach()  # the stage is current while the application steps the iterator
        try:
            item = step(*args)
        except StopIteration:
            stage.detach()
            self._self_end(True)
            raise
        except BaseException as error:
            stage.detach()
            self._self_end(False, error)
            raise
        stage.detach()
        stage.item_arrived()
        self._self_items.add(item)
        return item

    @property
    def close(self) -> Callable[[], Any]:
        close = self.__wrapped__.close  # AttributeError when the iterator has none, as before

        def recorded_close() -> Any:
            try:
                return close()
            finally:
                self._self_abandon()

        return recorded_close

    def __enter__(self) -> Any:
        entered = self.__wrapped__.__enter__()
        return self if _same_stream(entered, self.__wrapped__) else entered  # ``with stream as s``: s records too

    def __exit__(self, *exc_info: Any) -> Any:
        try:
            return self.__wrapped__.__exit__(*exc_info)
        finally:
            self._self_abandon()


class RecordingAsyncIterator(_Recording):
    def __init__(self, wrapped: Any, stage: Stage, finish: Finish) -> None:
        super().__init__(wrapped, stage, finish)
        self._self_anext = wrapped if hasattr(type(wrapped), "__anext__") else wrapped.__aiter__()  # as RecordingIterator's

    def __aiter__(self) -> Any:
        return self

    async def __anext__(self) -> Any:
        stage = self._self_stage
        if stage is None:
            return await self._self_anext.__anext__()
        stage.attach()
        try:
            item = await self._self_anext.__anext__()
        except StopAsyncIteration:
            stage.detach()
            self._self_end(True)
            raise
        except BaseException as error:
            stage.detach()
            self._self_end(False, error)
            raise
        stage.detach()
        stage.item_arrived()
        self._self_items.add(item)
        return item

    @property
    def aclose(self) -> Callable[[], Any]:
        aclose = self.__wrapped__.aclose

        async def recorded_aclose() -> Any:
            try:
                return await aclose()
            finally:
                self._self_abandon()

        return recorded_aclose

    @property
    def close(self) -> Callable[[], Any]:
        """OpenAI's ``AsyncStream.close`` is a coroutine function; either kind is forwarded."""
        close = self.__wrapped__.close

        def recorded_close() -> Any:
            try:
                return close()
            finally:
                self._self_abandon()

        return recorded_close

    async def __aenter__(self) -> Any:
        entered = await self.__wrapped__.__aenter__()
        return self if _same_stream(entered, self.__wrapped__) else entered

    async def __aexit__(self, *exc_info: Any) -> Any:
        try:
            return await self.__wrapped__.__aexit__(*exc_info)
        finally:
            self._self_abandon()
