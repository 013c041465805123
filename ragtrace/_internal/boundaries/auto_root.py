"""Automatic pipeline roots for apps with no outermost call to hang one on (the OpenAI SDK's).

A LangChain chain or a LlamaIndex query engine is one call with a start and an end, and the
integrations make it the root. An OpenAI-SDK app is a retrieval (``vector_stores.search``) and then
a model call, in the app's own code. So a retrieval outside any ``rag_pipeline`` opens a root
(``for_retrieval``); the stages that follow join it (``Stage.open`` asks ``state.auto_root()``,
then ``AutoRoot.admit``) when they are the same request's work by the one rule of ``boundary``:
under the same request span, or, without one, called from the same function call. The root
closes when the first answer generation among them ends (a stream: when it ends, is closed or is
dropped). More retrievals of the same request before that answer (multi-query) join the same
root. With no assembly recorded, the answer's prompt is searched for the retrieved chunks
(``located``) by the same ``Assemble.observe`` an ``@assembler`` uses.

Lifetimes. The root is a context variable set in the caller's context (what a wrapper sets
persists there), never the OpenTelemetry context: nothing is attached to the app's own spans, and
a closed root left behind counts as none. The retrieved chunks' text, kept to locate them in the
prompt, is dropped when the root closes. A root whose answer never comes (an exception, an early
return) is ended without an answer, marked ``rag.root.abandoned`` with the reason, when
- its request span ends (``request_ended``), or its owning call is over: its task done, its
  frame off its thread's stack, looked at whenever a root opens (``owner_gone``);
- a search outside its request opens a root in the same context slot (``replaced``). When that
  search may be the same request's (made by the same call, not alongside an earlier search still
  in flight; or its 33rd; or after ``IDLE_SECONDS``), the new root's figures are not measured
  (``request_split``): its request's first searches may be in the old one;
- any root opens while it has been idle ``IDLE_SECONDS`` (``idle``), or more than
  ``configure(max_open_roots=...)`` are open (``capacity``, the oldest);
- its context was freed (``collected``): at once when its thread ends, else when the next root
  opens; or the process exits (``exit``).
A forked child forgets every root it inherited: the parent's spans are never ended or exported
twice.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
import time
import weakref
from collections import deque
from typing import Any

from opentelemetry import trace

from . import boundary
from .. import names
from ..stages import state as state_module
from ..setup import config as config_module
from ..stages.assemble_stage import Assemble
from ..core.chunks import Chunk
from ..core.guard import guard, new_locks_after_fork
from ..core.messages import as_prompt
from ..stages.pipeline import RagPipeline
from ..stages.stage import Stage

IDLE_SECONDS = 60.0  # a root with no stage for this long is not joined, and is ended as abandoned
MAX_RETRIEVALS = 32  # retrievals one root takes before the next opens another root

_open: dict[int, weakref.ref[AutoRoot]] = {}  # id -> the open roots, oldest first
_collected: deque[RagPipeline] = deque()  # roots whose context was collected, ended at the next opening (``_context_gone``)
_lock = threading.Lock()
_exit_registered = False


class AutoRoot:
    """One automatic root: its pipeline, the state its stages record into, and the retrieved
    chunks (with text) its answer's prompt is searched for."""

    def __init__(self, pipeline: RagPipeline, providers: tuple[Any, ...]) -> None:
        self.pipeline: RagPipeline | None = pipeline
        self.state = pipeline.state
        self.context: Any = trace.set_span_in_context(pipeline.span)
        self.closed = False
        self.answer: Stage | None = None
        self.owner = boundary.owner_of_caller(self, providers)  # made in the caller's context
        self.chunks: list[Chunk] = []
        self.retrievals = 0
        self.searching = 0  # searches handed this root by ``for_retrieval`` and not ended yet
        self.expecting = 0  # stages admitted by ``expect`` whose spans are still to be made
        self._answer_open = False  # the answer's span was opened (its prompt searched)
        self._ending: tuple[BaseException | None, str | None, int] | None = None  # an end deferred by ``expecting``
        self.touched = time.monotonic()
        self._lock = threading.Lock()
        # a root whose context is collected unended is ended then or later (``_context_gone``); the
        # callback holds the pipeline (ids, never text) and is dropped when the root ends
        self._finalizer = weakref.finalize(self, _context_gone, pipeline)
        self._finalizer.atexit = False  # ``_end_all`` ends what is open at exit

    def _accepts(self) -> bool:
        return not self.closed and self.answer is None and self.owner.contains_caller()

    def accepts(self) -> bool:
        """Whether a stage opened here now would join this root: open, not answered yet, not idle,
        and this caller's request's (a provider call that brings its own sources answers it)."""
        return not self._idle() and self._accepts()

    def _idle(self) -> bool:
        return self.answer is None and not self.expecting and time.monotonic() - self.touched > IDLE_SECONDS

    def expect(self, stage: Stage) -> bool:
        """Admit now, by the one rule, a stage whose span an integration makes later, after the
        call returned (LiteLLM logs its calls from its own thread): call it in the caller's
        context, preset ``stage.auto_root``, open the stage later, then call ``expected``. An
        answer ends the intake now, as admitting it would; its prompt is searched for the chunks
        when its span opens. The root doesn't end as idle or abandoned while stages are expected."""
        if self._idle():
            self.end(abandoned="idle")
        with self._lock:
            if self.closed or not self._accepts():
                return False
            if stage.stage == names.STAGE_GENERATE and getattr(stage, "is_answer", False):
                self.answer = stage
            self.expecting += 1
            self.touched = time.monotonic()
            return True

    def expected(self) -> None:
        """An expected stage was made (or given up on): a deferred end happens once none is left."""
        with self._lock:
            self.expecting = max(0, self.expecting - 1)
            ending, self._ending = (self._ending, None) if not self.expecting else (None, self._ending)
        if ending is not None:
            error, abandoned, end_time = ending
            self.end(error, abandoned=abandoned, end_time=end_time)

    def admit(self, stage: Stage) -> AutoRoot | None:
        """Take ``stage`` in (``Stage.open`` calls this before its span starts), or None when this
        root is over or is another request's. The first answer generation ends the root's intake:
        the chunks retrieved so far are located in its prompt first (unless an assembly was
        recorded), then the root waits for it to end."""
        preset = stage.auto_root is self  # a stage this root made (the located assembly) or was given
        if not preset and self._idle():
            self.end(abandoned="idle")
        with self._lock:
            if self.closed or not (preset or self._accepts()):
                return None
            self.touched = time.monotonic()
            if stage.stage == names.STAGE_RETRIEVE:
                self.retrievals += 1
            answer = stage.stage == names.STAGE_GENERATE and getattr(stage, "is_answer", False)
            if answer:
                self.answer = stage
                self._answer_open = True
            chunks, self.chunks = (self.chunks, []) if answer else ([], self.chunks)
        if answer:
            self._locate(chunks, getattr(stage, "prompt", None), stage)
        return self

    def _locate(self, chunks: list[Chunk], prompt: Any, answer: Stage) -> None:
        """The located assembly: the retrieved chunks searched for in the answer's prompt, as an
        ``@assembler`` without declarations does (``Assemble.observe``), in a span of its own."""
        if self.state is None or self.state.contexts or not chunks or prompt is None:
            return  # an assembly was recorded in this root (declared or built): it stands
        first: dict[str, Chunk] = {}
        for chunk in chunks:  # each chunk once, as first retrieved
            first.setdefault(chunk.id, chunk)
        assembly = Assemble(tracer_provider=answer._provider, config=answer.config)
        assembly.auto_root = self
        assembly.open()
        assembly.observe(list(first.values()), as_prompt(prompt))  # content parts read as text, as in a declared prompt
        assembly.close()

    def stage_closed(self, stage: Stage, error: BaseException | None) -> None:
        """A stage of this root ended: a retrieval's chunks are kept for the answer's prompt; the
        answer's end ends the root."""
        if stage is self.answer:
            self.end(error)
            return
        if stage.stage == names.STAGE_RETRIEVE:
            with self._lock:
                self.searching = max(0, self.searching - 1)
                if not self.closed and not self._answer_open:
                    self.chunks.extend(c for c in getattr(stage, "chunks", ()) if c.content is not None)
                    self.touched = time.monotonic()

    def takes_retrieval(self) -> bool:
        """Whether one more retrieval of its own request joins (asked once ``owner`` said it is):
        room for it, and, without a request span, an earlier search still in flight (gathered
        searches of one call); one after another, two searches of one call may be two requests."""
        with self._lock:
            if self.closed or self.answer is not None or self.retrievals >= MAX_RETRIEVALS or self._idle():
                return False
            if self.owner.request is None and not self.searching:
                return False
            self.searching += 1
            return True

    def request_ended(self, end_time: int | None) -> None:
        """Its request span ended: so does the root, at the same time, answered or not."""
        self.end(abandoned="request_ended", end_time=end_time)

    def owner_gone(self) -> None:
        """The call that owned it is over: a root still waiting for its answer ends unanswered."""
        if self.answer is None and not self.expecting:
            self.end(abandoned="owner_gone")

    def end(self, error: BaseException | None = None, *, abandoned: str | None = None, end_time: int | None = None, force: bool = False) -> None:
        """Close the pipeline once (its figures are computed then) and let go of everything;
        while stages are expected (``expect``), once they are made, ended as of now."""
        with self._lock:
            if self.closed:
                return
            if self.expecting and not force:
                self._ending = (error, abandoned, end_time if end_time is not None else time.time_ns())
                return
            self.closed = True
            pipeline, self.pipeline, self.state, self.context, self.chunks, self.answer = self.pipeline, None, None, None, [], None
        self._finalizer.detach()
        self.owner.forget()
        with _lock:
            _open.pop(id(self), None)
        if pipeline is not None:
            pipeline.end_time = end_time
            _close(pipeline, error, abandoned)

    def forget(self) -> None:
        """In a forked child: the parent's root, closed here without ending its span."""
        self.closed = True
        self.pipeline, self.state, self.context, self.chunks, self.answer = None, None, None, [], None
        self._finalizer.detach()
        self.owner.forget()


def _close(pipeline: RagPipeline, error: BaseException | None, abandoned: str | None) -> None:
    if abandoned is not None and pipeline.attrs is not None:
        with guard("automatic root"):
            pipeline.attrs.essential(names.RAG_ROOT_ABANDONED, abandoned)
    pipeline.close(error)


def for_retrieval(name: str, query: Any = None, tracer_provider: trace.TracerProvider | None = None) -> AutoRoot | None:
    """The automatic root a retrieval starting here goes into: this context's, if it still takes
    retrievals, else a new one (ending the one it replaces). None inside a pipeline, or when
    telemetry is off. Call it in the caller's context, where the retrieval is asked for."""
    if state_module.current() is not None:
        return None
    _end_stale()
    found = state_module.auto_root()
    split = False
    if found is not None and not found.closed:
        own = found.owner.contains_caller()
        if own and found.takes_retrieval():
            return found  # type: ignore[no-any-return]
        if found.answer is None and (own or found.owner.same_slot()):  # the new root takes its slot
            found.end(abandoned="replaced")
            split = own
    pipeline = RagPipeline(name, tracer_provider=tracer_provider)
    pipeline.open()
    if pipeline.inert or pipeline.state is None:
        pipeline.close()
        return None
    with guard("automatic root"):
        pipeline.set_query(query)
    if split:
        pipeline.state.unmeasured = names.STATUS_REQUEST_SPLIT
    root = AutoRoot(pipeline, (tracer_provider, pipeline.config.tracer_provider, trace.get_tracer_provider()))
    root.searching = 1
    _register(root)
    state_module.set_auto_root(root)
    return root


def _register(root: AutoRoot) -> None:
    global _exit_registered
    with _lock:
        _open.pop(id(root), None)  # a collected root's entry under a reused id
        _open[id(root)] = weakref.ref(root)
        capacity = config_module.current().max_open_roots
        oldest = [ref() for ref in list(_open.values())[: max(0, len(_open) - capacity)]]
        if not _exit_registered:  # after the app's TracerProvider, so it runs before the provider's shutdown
            atexit.register(_end_all)
            _exit_registered = True
    for found in oldest:
        if found is not None:
            found.end(abandoned="capacity")


def _end_stale() -> None:
    """End the roots whose context is gone, whose owning call is over, and those idle too long
    (any context's)."""
    _end_collected()
    with _lock:
        for key in [key for key, ref in _open.items() if ref() is None]:
            del _open[key]
        roots = [root for root in (ref() for ref in _open.values()) if root is not None]
    frames = sys._current_frames() if roots else {}
    for root in roots:
        if root._idle():
            root.end(abandoned="idle")
        elif root.answer is None and not root.expecting and boundary.gone(root.owner, frames):
            root.end(abandoned="owner_gone")
    del frames


def _end_all() -> None:
    with _lock:
        roots = [ref() for ref in _open.values()]
    for root in roots:
        if root is not None:
            root.end(abandoned="exit", force=True)
    _end_collected()


def _context_gone(pipeline: RagPipeline) -> None:
    """A root's context was freed unended. When its thread is ending (the thread's context is
    cleared after its last Python code, so no lock of the app's or ragtrace's is held in it), the
    root ends here, before ``join()`` returns; otherwise (a collection that may run anywhere) it
    waits for the next opening or exit."""
    if threading.get_ident() in threading._active:  # type: ignore[attr-defined]
        _collected.append(pipeline)
    elif not pipeline.closed:
        with guard("automatic root"):
            _close(pipeline, None, "collected")


def _end_collected() -> None:
    """End the pipelines of roots collected unended (their finalizers queued them)."""
    while _collected:
        pipeline = _collected.popleft()
        if not pipeline.closed:
            _close(pipeline, None, "collected")


def end_open() -> None:
    """End every open root and forget this context's (what the exit hook does; for tests)."""
    _end_all()
    state_module.set_auto_root(None)


def open_count() -> int:
    """How many automatic roots are open (bounded by ``max_open_roots``; for tests)."""
    with _lock:
        return sum(1 for ref in _open.values() if ref() is not None)


def _forget_inherited() -> None:
    """After ``fork()``, in the child: every root is the parent's, so none is ended or exported here."""
    roots = [ref() for ref in _open.values()]
    _open.clear()
    _collected.clear()
    for root in roots:
        if root is not None:
            root.forget()
    boundary.forget_inherited()


if hasattr(os, "register_at_fork"):
    new_locks_after_fork(__name__, "_lock")
    os.register_at_fork(after_in_child=_forget_inherited)
