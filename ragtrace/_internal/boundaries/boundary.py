"""Request boundaries: which automatic root a stage outside any ``rag_pipeline`` may join, and
when a root's request is over. One rule, asked by ``auto_root`` (which the integrations call)
and by every stage's ``open``; docs/integrations.md ("Request boundaries") states it for users.

A root is owned by the request that made its first search, known in one of two ways:

1. **Its request span**: the span current at that search, when it is a valid span ragtrace did
   not make (a web framework's SERVER span, or any span of the app) and not a CONSUMER span (a
   messaging span may be one message's or a whole batch's: under one long CONSUMER span around a
   consumer loop, taking it for the request would merge the messages it handles, so the call that
   searched owns the root instead, rule 2). A stage joins only when its
   own current span is that span or one under it (a fan-out to tasks or threads that carry the
   span joins too), and the root ends when that span ends: a span processor added to the span's
   TracerProvider sees it end (``_RequestEnds``).
2. **Otherwise, the function call that made the search** (its frame, in its thread or asyncio
   task). A stage joins only when it is called directly from that same call, so a later work
   item of a pool thread, a later request on the same thread, or a task created after the search
   never joins. The call is gone when its task is done, or (threads) when its frame is no longer
   on its thread's stack; ``auto_root`` ends the root then.

Where neither holds, nothing joins. The frame is held (so its identity can't be reused by the
next call) only while the root is open, and never for a root with a request span it can watch.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import weakref
from collections.abc import Mapping
from types import FrameType
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, Span, SpanProcessor

from .. import names
from ..core.guard import guard, new_locks_after_fork
from ..stages.stage import STAGE_KEY

# the packages whose frames stand between the app and a stage: the caller is the first frame outside
# them (other instrumentors' wrappers of the same SDK call among them)
_NOT_THE_CALLER = frozenset({"ragtrace", "wrapt", "openai", "anthropic", "botocore", "boto3", "cohere", "litellm", "opentelemetry", "openinference"})
# the frames of a list, dict or set comprehension (Python < 3.12) run within their function's call
_INLINE_CODE = frozenset({"<listcomp>", "<dictcomp>", "<setcomp>"})
_MAX_HOPS = 64  # span parents followed up to a request span
_MAX_SPANS_PER_TRACE = 4096  # span parents remembered per watched trace (beyond: not under, so not joined)


class Owner:
    """Who an automatic root belongs to: a request span (``request``, its trace and span ids), or
    the call that opened it (``frame``, ``task``, ``thread``)."""

    __slots__ = ("request", "watched", "frame", "task", "thread")

    def __init__(self) -> None:
        self.request: tuple[int, int] | None = None
        self.watched = False  # the request span's end will be seen (``_RequestEnds``)
        self.frame: FrameType | None = None
        self.task: asyncio.Task[Any] | None = None
        self.thread = threading.get_ident()

    def contains_caller(self) -> bool:
        """Whether the stage being opened here is this owner's work."""
        if self.request is not None:
            return _under(trace.get_current_span(), self.request)
        return self.frame is not None and caller() is self.frame

    def same_slot(self) -> bool:
        """Whether this context variable slot is the owner's own (the same thread and task), so
        that a new root stored here makes the old one unreachable for its owner."""
        return self.thread == threading.get_ident() and self.task is current_task()

    def forget(self) -> None:
        self.frame = self.task = None


def owner_of_caller(root: Any, providers: tuple[Any, ...]) -> Owner:
    """The owner of a root opened here (the caller's context). ``root`` is told when its request
    span ends (``request_ended``), through the first of ``providers`` that made the span."""
    owner = Owner()
    span = _request_span()
    if span is not None:
        context = span.get_span_context()
        owner.request = (context.trace_id, context.span_id)
        owner.watched = _watch(span, owner.request, root, providers)
    if not owner.watched:  # the call stands in for the request's end
        owner.frame = caller()
        owner.task = current_task()
        if owner.task is not None:
            _end_with_task(owner.task, root)
    return owner


def caller() -> FrameType | None:
    """The app's call that called into ragtrace: the first frame outside ragtrace, wrapt and the
    SDK (a comprehension's frame stands for the function it runs in)."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        module = frame.f_globals.get("__name__")
        if (not isinstance(module, str) or module.partition(".")[0] not in _NOT_THE_CALLER) and frame.f_code.co_name not in _INLINE_CODE:
            return frame
        frame = frame.f_back
    return None


def current_task() -> asyncio.Task[Any] | None:
    loop = asyncio._get_running_loop()
    return asyncio.current_task(loop) if loop is not None else None


def gone(owner: Owner, frames: dict[int, FrameType]) -> bool:
    """Whether the call owning a root is over: its task done, its thread ended, or its frame off
    its thread's stack (``frames``: ``sys._current_frames()``). A watched request span ends the
    root itself; a suspended task's frame is on no stack, so a task is asked instead."""
    if owner.watched:
        return False
    if owner.task is not None:
        return owner.task.done()
    if owner.frame is None:
        return True
    frame = frames.get(owner.thread)
    while frame is not None:
        if frame is owner.frame:
            return False
        frame = frame.f_back
    return True


def _request_span() -> trace.Span | None:
    """The current span when it is a valid one ragtrace did not make and that stands for one
    request (not a CONSUMER span, which may hold a batch), else None."""
    span = trace.get_current_span()
    if not span.get_span_context().is_valid:
        return None
    stage = otel_context.get_value(STAGE_KEY)
    if stage is not None and getattr(stage, "span", None) is span:
        return None
    if _model_call(span) or getattr(span, "kind", None) is trace.SpanKind.CONSUMER:
        return None
    return span


# an instrumentor's span of one model-API call (OpenInference's, OpenLLMetry's): never a request.
# Told by what it says it is, or, before it says (OpenInference sets its span kind at the end), by
# the instrumentation that made it: those of model SDKs make one span per SDK call.
_MODEL_CALL_KINDS = frozenset({"LLM", "RETRIEVER", "EMBEDDING", "RERANKER"})
_MODEL_SDKS = frozenset({"bedrock", "botocore", "cohere", "openai", "anthropic", "google_genai", "vertexai", "mistralai", "groq"})


def _model_call(span: trace.Span) -> bool:
    """Whether ``span`` is another instrumentor's span of the very SDK call ragtrace is in
    (OpenInference's ``bedrock.retrieve``, an OpenLLMetry ``chat`` span), current around it:
    taken for the request, it would end the automatic root as the call returns, before the
    answer that follows it in the app's request. Then the app's call owns the root instead."""
    attributes = getattr(span, "attributes", None)
    if isinstance(attributes, Mapping) and (
        attributes.get(names.OI_SPAN_KIND) in _MODEL_CALL_KINDS or names.GEN_AI_OPERATION_NAME in attributes or "gen_ai.system" in attributes
    ):
        return True
    scope = getattr(getattr(span, "instrumentation_scope", None), "name", None) or ""
    family, _, library = scope.rpartition(".")
    return family in ("openinference.instrumentation", "opentelemetry.instrumentation") and library in _MODEL_SDKS


def _under(span: trace.Span, request: tuple[int, int]) -> bool:
    """Whether ``span`` is the request span or one of its descendants (as far as known)."""
    context = span.get_span_context()
    if not context.is_valid or context.trace_id != request[0]:
        return False
    if context.span_id == request[1]:
        return True
    parent = getattr(span, "parent", None)  # an SDK span knows its parent; further up, the watcher does
    node = parent.span_id if parent is not None else 0
    parents = _watcher.parents.get(request[0], {})
    for _ in range(_MAX_HOPS):
        if not node:
            return False
        if node == request[1]:
            return True
        node = parents.get(node, 0)
    return False


# --- seeing a request span end ------------------------------------------------------------------
class _RequestEnds(SpanProcessor):
    """Added once to each TracerProvider that made a request span: ends the automatic roots
    waiting for that span's end, and, while a trace has such roots, remembers its spans' parents
    (to tell a span under the request span from one beside it). Two dict checks per span else."""

    def __init__(self) -> None:
        self.waiting: dict[tuple[int, int], list[weakref.ref[Any]]] = {}
        self.parents: dict[int, dict[int, int]] = {}  # trace id -> span id -> parent span id

    def on_start(self, span: Span, parent_context: otel_context.Context | None = None) -> None:
        if not self.parents:
            return
        context = span.get_span_context()
        found = self.parents.get(context.trace_id)
        if found is not None and len(found) < _MAX_SPANS_PER_TRACE:
            found[context.span_id] = span.parent.span_id if span.parent is not None else 0

    def on_end(self, span: ReadableSpan) -> None:
        if not self.waiting:
            return
        context = span.get_span_context()
        key = (context.trace_id, context.span_id)
        if key not in self.waiting:  # every span of the app ends here: no lock for the others
            return
        with _lock:
            refs = self.waiting.pop(key, None)
            if refs is not None and not any(k[0] == key[0] for k in self.waiting):
                self.parents.pop(key[0], None)
        for ref in refs or ():
            root = ref()
            if root is not None:
                with guard("request boundary"):
                    root.request_ended(span.end_time)

    def forget(self) -> None:
        self.waiting.clear()
        self.parents.clear()


_watcher = _RequestEnds()
_watched_providers: weakref.WeakSet[Any] = weakref.WeakSet()
_lock = threading.Lock()


def _watch(span: trace.Span, request: tuple[int, int], root: Any, providers: tuple[Any, ...]) -> bool:
    """Have ``root`` told when ``span`` ends. False when that can't be seen: a span that isn't
    recording, has ended already, or was made by a provider ragtrace can't find."""
    if not span.is_recording() or getattr(span, "end_time", None) is not None:
        return False
    made_by = getattr(span, "_span_processor", None)  # the SDK span's link to its provider's processors
    for provider in dict.fromkeys(p for p in providers if p is not None):
        if made_by is None or getattr(provider, "_active_span_processor", None) is not made_by:
            continue
        with _lock:
            if provider not in _watched_providers:
                provider.add_span_processor(_watcher)
                _watched_providers.add(provider)
            _watcher.waiting.setdefault(request, []).append(weakref.ref(root))
            _watcher.parents.setdefault(request[0], {})
        return True
    return False


# --- a task's end ends its roots ------------------------------------------------------------------
_task_roots: weakref.WeakKeyDictionary[asyncio.Task[Any], weakref.WeakSet[Any]] = weakref.WeakKeyDictionary()


def _end_with_task(task: asyncio.Task[Any], root: Any) -> None:
    """One done callback per task ends every root the task owns (running in the task's loop)."""
    roots = _task_roots.get(task)
    if roots is None:
        roots = _task_roots[task] = weakref.WeakSet()
        task.add_done_callback(_task_done)
    roots.add(root)


def _task_done(task: asyncio.Task[Any]) -> None:
    for root in list(_task_roots.pop(task, ())):
        with guard("request boundary"):
            root.owner_gone()


def forget_inherited() -> None:
    """In a forked child: nothing of the parent's requests is waited for."""
    _watcher.forget()
    _task_roots.clear()


new_locks_after_fork(__name__, "_lock")
