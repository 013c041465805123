"""LiteLLM calls between their pre-call event and their logged end: where each belongs, and the
order their stages are recorded in.

LiteLLM calls ``log_pre_api_call`` in the caller's context, before the provider is called, but
logs a call's end (``log_success_event``, ``async_log_success_event``, the failures) after the
call returned: from its logging thread pool, or a task of its logging worker, in any order
between calls, and sometimes with none of the caller's context. So:

- **where a call belongs is decided at its pre-call event**, in the caller's context, by the same
  rule as any stage (the active ``rag_pipeline``; else an automatic root by ``boundary``'s rule,
  through ``AutoRoot.expect``), and a copy of that context is kept with the call;
- **its end is tied to it by LiteLLM's ``litellm_call_id``** and nothing else: an end whose call
  had no pre-call event here (a ``mock_response`` search, a cache hit) is not recorded, because
  nothing ties it to a request;
- **its stages are made once its end is logged**, in the kept context, spans timed by LiteLLM's
  own start and end times, and **in call order within their pipeline**: a call's end waits for
  the calls made before it in the same pipeline (the search before the answer), so the figures
  see what the app did, in the order it did it;
- **the pipeline waits for them**: a ``rag_pipeline`` (``PipelineState.hold``) or automatic root
  (``AutoRoot.expect``) whose block ended before its calls were logged ends once they are, at the
  time its block ended.

A call whose end is never logged (LiteLLM drops log tasks when its queue is full; a stream the app
abandoned) is given up after ``STALE_SECONDS``, at the next LiteLLM event or at exit: its stage is
recorded without a result, and its pipeline ends.
"""

from __future__ import annotations

import atexit
import contextvars
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..core.guard import guard, new_locks_after_fork, warn_once

STALE_SECONDS = 300.0  # a call whose end is not logged by then is given up
MAX_PENDING = 4096  # calls awaiting their end, at most (the oldest is given up beyond)


@dataclass(eq=False)
class Call:
    """One LiteLLM call awaiting its logged end."""

    call_id: str
    stage: Any  # the stage handle, made at the pre-call event (not opened yet)
    context: contextvars.Context  # the caller's context at the pre-call event
    scope: Any  # the pipeline state or automatic root it belongs to (None: neither)
    record: Callable[[Any, Any, BaseException | None], None]  # opens, records and closes the stage
    release: Callable[[], None]  # tells the scope the stage is made
    made: float = field(default_factory=time.monotonic)
    ended: bool = False
    result: Any = None
    error: BaseException | None = None


class _Queue:
    """The calls of one pipeline in call order, and whether a thread is recording them now."""

    __slots__ = ("calls", "recording")

    def __init__(self) -> None:
        self.calls: deque[Call] = deque()
        self.recording = False


_lock = threading.Lock()
_pending: dict[str, Call] = {}
_queues: dict[int, _Queue] = {}  # id(scope) -> its queue, while it has calls
_exit_registered = False


def begin(call: Call) -> None:
    """A call's pre-call event: kept, in its pipeline's order, until its end is logged."""
    global _exit_registered
    _give_up_stale()
    with _lock:
        if call.call_id in _pending:  # LiteLLM's retries send the pre-call event again: the first stands
            call.release()
            return
        _pending[call.call_id] = call
        if call.scope is not None:
            _queues.setdefault(id(call.scope), _Queue()).calls.append(call)
        oldest = next(iter(_pending.values())) if len(_pending) > MAX_PENDING else None
        if not _exit_registered:
            atexit.register(give_up_all)
            _exit_registered = True
    if oldest is not None:
        end(oldest.call_id, None, None)


def end(call_id: Any, result: Any, error: BaseException | None) -> bool:
    """A call's logged end: its stage (and those of earlier calls of its pipeline that are
    ended) recorded now. False when no pre-call event here made the call (not recorded)."""
    with _lock:
        call = _pending.pop(call_id, None) if isinstance(call_id, str) else None
        if call is None:
            return False
        call.ended, call.result, call.error = True, result, error
        queue = _queues.get(id(call.scope)) if call.scope is not None else None
    if queue is None:
        _record(call)
    else:
        _drain(call.scope, queue)
    _give_up_stale()
    return True


def _drain(scope: Any, queue: _Queue) -> None:
    """Record the ended calls at the head of a pipeline's queue, one thread at a time, in order."""
    while True:
        with _lock:
            if queue.recording or not queue.calls or not queue.calls[0].ended:
                if not queue.calls and not queue.recording:
                    _queues.pop(id(scope), None)
                return
            queue.recording = True
            call = queue.calls.popleft()
        try:
            _record(call)
        finally:
            with _lock:
                queue.recording = False


def _record(call: Call) -> None:
    with guard("litellm instrumentation"):
        call.context.run(call.record, call.stage, call.result, call.error)
    with guard("litellm instrumentation"):
        call.release()


def _give_up_stale() -> None:
    now = time.monotonic()
    with _lock:
        stale = [c.call_id for c in _pending.values() if now - c.made > STALE_SECONDS]
    for call_id in stale:
        warn_once("litellm-stale", "a LiteLLM call's end was not logged within %d s: its stage is recorded without a result", int(STALE_SECONDS))
        end(call_id, None, None)


def give_up_all() -> None:
    """Record every call still waiting, without a result (at exit; for tests)."""
    with _lock:
        waiting = list(_pending)
    for call_id in waiting:
        end(call_id, None, None)


def pending_count() -> int:
    """How many calls await their logged end (bounded by ``MAX_PENDING``; for tests)."""
    with _lock:
        return len(_pending)


new_locks_after_fork(__name__, "_lock")
