"""Per-pipeline state: what the stages of one pipeline (or one trace) have recorded so far.

A ``rag_pipeline`` puts its state in a ``contextvars`` variable, so threads and asyncio tasks
never see each other's chunks. Stages used without a pipeline share a state per trace id, kept in
a small bounded map, so a generation can still be scored against the retrievals of its trace.
With more such traces in flight than the map holds, the least recently used trace loses its state
and is remembered as evicted: its later stages get a throwaway state marked ``evicted`` (its
figures say not measurable) instead of a fresh one that would evict the next trace in turn, so
one trace degrades per trace too many, never all of them.
State holds ids, ranks, scores and hashes only, never chunk text.
"""

from __future__ import annotations

import asyncio
import threading
from collections import OrderedDict
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from typing import Any

from opentelemetry.trace import Span

from ..core.assembly import ContextRecord
from ..core.chunks import STAND_IN, Chunk
from ..setup.config import Config
from ..core import figures as figures_module
from .. import names
from ..names import (  # noqa: F401 - read here by the modules that set them
    STATUS_CONTEXT_UNKNOWN,
    STATUS_DELEGATED,
    STATUS_OUTSIDE_PIPELINE,
    STATUS_REMOTE_CONTEXT_INVALID,
    STATUS_REMOTE_CONTEXT_MISSING,
    STATUS_REMOTE_CONTEXT_TOO_LARGE,
    STATUS_REQUEST_SPLIT,
    STATUS_STATE_EVICTED,
)
from ..core.figures import Answer, Figures
from ..core.guard import new_locks_after_fork, warn_once

_IMPLICIT_CAPACITY = 256
_EVICTED_CAPACITY = 16 * _IMPLICIT_CAPACITY  # trace ids (ints) remembered as evicted
# the statuses a pipeline's state gives (spelled in core/vocabulary.py, with every other reason)
REMOTE_CONTEXT_STATUSES = frozenset({STATUS_REMOTE_CONTEXT_MISSING, STATUS_REMOTE_CONTEXT_INVALID, STATUS_REMOTE_CONTEXT_TOO_LARGE})


@dataclass(eq=False, slots=True)
class PipelineState:
    config: Config
    retrievals: list[list[Chunk]] = field(default_factory=list)
    reranked_out: set[str] = field(default_factory=set)
    reranked: bool = False
    contexts: list[ContextRecord] = field(default_factory=list)
    answers: list[Answer] = field(default_factory=list)
    answer_text: str | None = None
    unreadable: int = 0
    omitted: int = 0  # retrieved items beyond max_retrieved: counted, not kept (figures_module.compute)
    labels: dict[str, Any] = field(default_factory=dict)  # bounded metric labels of the pipeline
    shown: dict[str, str | None] = field(default_factory=dict)  # chunk id -> content hash of text a retrieve span carries
    # the last answer's figures and what they were computed from (answer, retrievals, unreadable):
    # the root's are the same while nothing else was recorded (``figures_for_trace``)
    answer_figures: tuple[Answer, int, int, Figures] | None = None
    _ids_by_hash: dict[str, str] = field(default_factory=dict)
    implicit: bool = False  # the shared state of a trace outside any pipeline (``for_span``)
    # framework integrations' bookkeeping for this pipeline (``integrations.runs.Scope``), which
    # may hold the framework's documents: dropped with the pipeline, never kept process-wide
    scopes: dict[Any, Any] = field(default_factory=dict)
    evicted: bool = False  # a trace's stand-in state after its own was dropped from the map
    unmeasured: str | None = None  # a status reason: this pipeline's figures can't be known (``auto_root``, ``continued``)
    delegated: bool = False  # ragtrace.inject handed this pipeline's record to another process
    # the assemblies bound to the contexts (task or thread) that made them (``bind_context``):
    # token (held in that context) -> record, where each was made, and which ones an answer took
    _bound: dict[object, ContextRecord] = field(default_factory=dict)
    _origins: set[tuple[int, int]] = field(default_factory=set)
    _answered: set[int] = field(default_factory=set)
    # stages made here whose results an integration records later, after the call returned
    # (LiteLLM logs them from its own thread): the pipeline's close waits for them (``hold``)
    holds: int = 0
    _closing: Callable[[], None] | None = None
    # text -> content digest of the chunks this pipeline read (``chunks.digest_of``): a chunk
    # retrieved, reranked and placed is hashed once. A pipeline's own state only, emptied when its
    # root ends: a trace's shared state outside any pipeline would keep the app's texts alive
    digests: dict[str, str] | None = None

    def hold(self) -> None:
        """A stage of this pipeline will be recorded later: its close waits until ``release``."""
        with _hold_lock:
            self.holds += 1

    def release(self) -> None:
        """A held stage was recorded: the pipeline's close, if it was deferred, runs now."""
        with _hold_lock:
            self.holds = max(0, self.holds - 1)
            closing = self._closing if self.holds == 0 else None
            if closing is not None:
                self._closing = None
        if closing is not None:
            closing()

    def close_when_released(self, closing: Callable[[], None]) -> bool:
        """Defer ``closing`` until the held stages are recorded; False (nothing deferred) when none is held."""
        with _hold_lock:
            if self.holds == 0:
                return False
            self._closing = closing
            return True

    def add_retrieval(self, chunks: list[Chunk], unreadable: int, omitted: int = 0) -> list[Chunk]:
        """Record a retrieval's chunks (text dropped) and return them with canonical ids;
        ``omitted`` more were retrieved than ``chunks`` holds (beyond ``max_retrieved``)."""
        kept = []
        ids_by_hash = self._ids_by_hash
        for chunk in chunks:
            chunk_id, digest = chunk.id, chunk.content_hash
            if chunk_id.startswith(STAND_IN):  # unique per retrieval: two unreadable items are two
                chunk_id = f"{STAND_IN}{len(self.retrievals) + 1}.{chunk.rank}"
            elif digest and chunk_id == digest:  # ``canonical``, inline: one call per retrieval, not per chunk
                chunk_id = ids_by_hash.get(digest, chunk_id)
            if digest and digest not in ids_by_hash:
                ids_by_hash[digest] = chunk_id
            kept.append(Chunk(chunk_id, chunk.rank, chunk.score, None, None, chunk.tokens, digest, chunk.file_id))
        self.retrievals.append(kept)
        self.unreadable += unreadable
        self.omitted += omitted
        return kept

    def canonical(self, chunk: Chunk) -> Chunk:
        """A chunk whose id was derived from its text gets the id it was retrieved under."""
        if chunk.content_hash and chunk.id == chunk.content_hash:
            known = self._ids_by_hash.get(chunk.content_hash)
            if known is not None and known != chunk.id:
                return replace(chunk, id=known)
        return chunk

    def canonical_all(self, chunks: list[Chunk]) -> list[Chunk]:
        """``canonical`` of each chunk; only those whose id is their digest are looked up."""
        return [self.canonical(c) if c.id == c.content_hash else c for c in chunks]

    def retrieved_ids(self) -> set[str]:
        return {chunk.id for retrieval in self.retrievals for chunk in retrieval}

    def latest_context(self) -> ContextRecord | None:
        return self.contexts[-1] if self.contexts else None

    def bind_context(self, record: ContextRecord) -> None:
        """An assembly of this pipeline ended here: answers made in this context (this task or
        thread, and the tasks it starts later) are scored against it."""
        token = object()
        self._bound[token] = record
        self._origins.add(_origin())
        _assembly.set(token)

    def context_for_answer(self, answer: bool = True) -> tuple[ContextRecord | None, str | None]:
        """The context an answer made here was shown, or None and why it can't be told: the
        assembly bound to this context; else, when all assemblies were made in one task or
        thread, the latest; else the only one no answer took yet."""
        record = self._bound.get(_assembly.get())
        if record is None and self.contexts:
            unanswered = [c for c in self.contexts if id(c) not in self._answered]
            if len(self._origins) <= 1:
                record = self.contexts[-1]
            elif len(unanswered) == 1:
                record = unanswered[0]
            else:
                return None, STATUS_CONTEXT_UNKNOWN
        if record is not None and answer:
            self._answered.add(id(record))
        return record, None

    def unanswered_contexts(self) -> list[ContextRecord]:
        """Contexts no answer was recorded against (they still count for |C|); every context when
        an answer's own one can't be told (they are all the pipeline's, whichever it was)."""
        if not self.answers or any(a.unmeasured == STATUS_CONTEXT_UNKNOWN for a in self.answers):
            return self.contexts
        return []

    def figures_for_answer(self, answer: Answer) -> Figures:
        """The figures of one answer generation, against every retrieval so far."""
        if self.unmeasured is not None:
            return figures_module.Figures(status=[self.unmeasured])
        result = figures_module.compute(self.retrievals, [answer], unreadable=self.unreadable, omitted=self.omitted)
        self.answer_figures = (answer, len(self.retrievals), self.unreadable, result)
        return result

    def figures_for_trace(self) -> Figures:
        """The trace's figures (the root's). With one answer and nothing retrieved since its own
        figures, they are the same inputs to the same pure function: computed once."""
        if self.unmeasured is not None:
            return figures_module.Figures(status=[self.unmeasured])
        contexts = [c.placements for c in self.unanswered_contexts() if not c.not_located]  # a failed search is no empty context
        cached = self.answer_figures
        if cached is not None and not contexts and len(self.answers) == 1 and self.answers[0] is cached[0] and cached[1:3] == (len(self.retrievals), self.unreadable):
            return cached[3]
        return figures_module.compute(self.retrievals, self.answers, contexts=contexts, unreadable=self.unreadable, omitted=self.omitted)


_current: ContextVar[PipelineState | None] = ContextVar("ragtrace_pipeline", default=None)
# the automatic root (``auto_root.AutoRoot``) the stages of this context join, set where a
# retrieval outside any pipeline opened it; a closed one left behind counts as none
_auto_root: ContextVar[Any] = ContextVar("ragtrace_auto_root", default=None)
# the token of the assembly this context made last (``PipelineState.bind_context``): a bare object,
# so a context that outlives its pipeline keeps nothing of it
_assembly: ContextVar[object] = ContextVar("ragtrace_assembly", default=None)
_implicit: OrderedDict[int, PipelineState] = OrderedDict()
_evicted: OrderedDict[int, None] = OrderedDict()
_implicit_lock = threading.Lock()
_hold_lock = threading.Lock()


# The active pipeline's state, or None. The context variable's own bound ``get`` (no Python frame):
# every decorated call asks it first, with tracing off too.
current: Callable[[], PipelineState | None] = _current.get


def activate(state: PipelineState) -> object:
    return _current.set(state)


def deactivate(token: object) -> None:
    _current.reset(token)  # type: ignore[arg-type]


auto_root: Callable[[], Any] = _auto_root.get
set_auto_root: Callable[[Any], object] = _auto_root.set


def reset_auto_root(token: object) -> None:
    """Undo ``set_auto_root`` (an agent's tool call sets one for the stages inside it)."""
    _auto_root.reset(token)  # type: ignore[arg-type]


def for_span(span: Span, config: Config) -> PipelineState | None:
    """The pipeline's state, or the shared state of the span's trace when outside a pipeline."""
    state = _current.get()
    if state is not None:
        return state
    trace_id = span.get_span_context().trace_id
    if not trace_id:
        return None
    with _implicit_lock:
        state = _implicit.get(trace_id)
        if state is not None:
            _implicit.move_to_end(trace_id)
            return state
        if trace_id not in _evicted:
            state = _implicit[trace_id] = PipelineState(config, implicit=True)
            if len(_implicit) > _IMPLICIT_CAPACITY:
                _evicted[_implicit.popitem(last=False)[0]] = None
                if len(_evicted) > _EVICTED_CAPACITY:
                    _evicted.popitem(last=False)
            return state
    warn_once(
        "implicit-state-evicted",
        "a trace with stages outside any rag_pipeline came back after its state was evicted: more than %d such traces "
        "were in flight at once. Its generations are marked rag.metrics.status=state_evicted (not measured), and so is "
        "each trace evicted the same way. Wrap each request in rag_pipeline(...): a pipeline keeps its own state",
        _IMPLICIT_CAPACITY,
    )
    return PipelineState(config, implicit=True, evicted=True)


def _origin() -> tuple[int, int]:
    """Where an assembly is made: its thread and asyncio task (0 for none)."""
    loop = asyncio._get_running_loop()
    task = asyncio.current_task(loop) if loop is not None else None
    return threading.get_ident(), id(task) if task is not None else 0


def implicit_count() -> int:
    """How many trace-keyed states are held (bounded; for tests)."""
    with _implicit_lock:
        return len(_implicit)


new_locks_after_fork(__name__, "_implicit_lock")
new_locks_after_fork(__name__, "_hold_lock")
