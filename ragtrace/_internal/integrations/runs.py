"""Framework runs mapped to ragtrace pipelines, linked by the framework's own run ids.

Frameworks report a run's start and end through callbacks or events, often in another thread or
a copied context (LangChain's ``ainvoke`` and ``batch``), so context set in one callback is gone by
the next. ``Runs`` therefore links runs by ``run_id``/``parent_run_id`` and keeps, per outermost
run, the *scope* its stages go into: the parent span to start them under and the pipeline state to
record into. An outermost run inside a user's ``rag_pipeline`` uses that pipeline; otherwise an
outermost chain opens a pipeline of its own (the automatic root) and closes it when it ends.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from ..stages import state as state_module
from ..core.guard import guard
from ..stages.pipeline import RagPipeline
from ..stages.stage import Stage

_S = TypeVar("_S", bound=Stage)


@dataclass(eq=False)
class Scope:
    """Where a run's stages go: under ``context``'s span, recording into ``state``."""

    context: otel_context.Context
    state: state_module.PipelineState | None
    root: RagPipeline | None = None  # the automatic root this scope owns, if it opened one
    extra: dict[str, Any] = field(default_factory=dict)  # the integration's own bookkeeping
    lock: threading.RLock = field(default_factory=threading.RLock)


@dataclass(eq=False)
class Run:
    scope: Scope
    parent: Hashable | None
    stage: Stage | None = None
    data: dict[str, Any] = field(default_factory=dict)  # what the integration keeps for this run


class Runs:
    """Run id → run, each in the scope of its outermost run. Thread-safe."""

    def __init__(self, tracer_provider: trace.TracerProvider | None = None) -> None:
        self.tracer_provider = tracer_provider
        self._runs: dict[Hashable, Run] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return len(self._runs)

    def get(self, run_id: Hashable) -> Run | None:
        with self._lock:
            return self._runs.get(run_id)

    def parent(self, run: Run) -> Run | None:
        return self.get(run.parent) if run.parent is not None else None

    def ancestors(self, run: Run) -> Iterator[Run]:
        found = self.parent(run)
        while found is not None:
            yield found
            found = self.parent(found)

    def start(
        self,
        run_id: Hashable,
        parent_id: Hashable | None,
        *,
        root_name: str | None = None,
        query: Any = None,
        context: otel_context.Context | None = None,
    ) -> Run:
        """Register a starting run. A run whose parent is known joins its scope; an outermost one
        joins the user's current pipeline, or, given ``root_name``, opens an automatic root (under
        ``context``, default the current one: another instrumentor's span for the same run)."""
        parent = self.get(parent_id) if parent_id is not None else None
        if parent is not None:
            run = Run(parent.scope, parent_id)
        else:
            run = Run(self._outermost_scope(root_name, query, context), None)
            run.data["outermost"] = True
        with self._lock:
            self._runs[run_id] = run
        return run

    def _outermost_scope(self, root_name: str | None, query: Any, context: otel_context.Context | None) -> Scope:
        state = state_module.current()
        if state is not None:  # inside the user's rag_pipeline: its stages nest under it
            return self._user_scope(state)
        context = context if context is not None else otel_context.get_current()
        if root_name is None:
            return Scope(context, None)
        root = RagPipeline(root_name, tracer_provider=self.tracer_provider)
        token = otel_context.attach(context)
        try:
            root.open()
        finally:
            otel_context.detach(token)
        with guard("automatic root"):
            root.set_query(query)
        return Scope(trace.set_span_in_context(root.span), root.state, root=root)

    def _user_scope(self, state: state_module.PipelineState) -> Scope:
        """One scope per user pipeline, so separate framework calls inside it share bookkeeping.
        It is kept on the pipeline's state, so it ends with the pipeline: its documents and
        rendered texts are content, never held after it (issue 16 item 9)."""
        with self._lock:
            scope = state.scopes.get(self)
            if scope is None:
                scope = state.scopes[self] = Scope(otel_context.get_current(), state)
            else:
                scope.context = otel_context.get_current()
            return scope

    def end(self, run_id: Hashable, *, output: Any = None, error: BaseException | None = None) -> Run | None:
        """Forget a finished run; the outermost run of an automatic root closes the root."""
        with self._lock:
            run = self._runs.pop(run_id, None)
        if run is None:
            return None
        if run.stage is not None:
            run.stage.close(error)
        root = run.scope.root
        if root is not None and run.data.get("outermost"):
            with guard("automatic root"):
                root.record(output)
            root.close(error)
        return run

    def open(self, run: Run, make: Callable[[], _S], *, parent: Stage | None = None) -> _S:
        """Create and open a stage in ``run``'s scope (under ``parent``'s span if given) and keep
        it on the run, so ``end`` closes it."""
        with inside(run.scope, parent):
            stage = make()
            stage.open()
        run.stage = stage
        return stage


@contextmanager
def inside(scope: Scope, parent: Stage | None = None) -> Iterator[None]:
    """The scope's span as current context and its pipeline state as current, for a moment."""
    context = trace.set_span_in_context(parent.span, scope.context) if parent is not None else scope.context
    token = otel_context.attach(context)
    state_token = state_module.activate(scope.state) if scope.state is not None else None
    try:
        yield
    finally:
        if state_token is not None:
            state_module.deactivate(state_token)
        otel_context.detach(token)
