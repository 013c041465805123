"""Haystack (haystack-ai 2.24 to 3.x), through its own tracing interface, beside the app's tracer.

Haystack reports every pipeline run and component run to one global ``ProxyTracer``
(``haystack.tracing.tracer``), whose ``actual_tracer`` slot is the app's (``enable_tracing``,
opentelemetry-haystack's ``OpenTelemetryTracer``). ragtrace does not take that slot: it wraps
``ProxyTracer.trace`` at class level, so the app's tracer gets every span, tag and content tag as
before, and ragtrace sees the same runs through a ``Span`` of its own around the app's. Haystack's
spans give each component's inputs and outputs to ``Span.set_content_tag`` (the hook Haystack
documents for a custom tracer; its own spans keep them only with content tracing on): ragtrace's
span reads them there, whatever the app's content-tracing setting, then passes them on unchanged.

- one ``Pipeline.run`` / ``run_async`` (``haystack.pipeline.run``; 2.x's ``AsyncPipeline``:
  ``haystack.async_pipeline.run``) is one pipeline root, unless a
  ``rag_pipeline`` (or an outer Haystack pipeline) is already open; its query is the first
  retriever's;
- each ``haystack.component.run`` is the stage its sockets say (``_haystack_components``):
  retrievers are retrieve stages (``query``, ``top_k`` when given at run time, the documents with
  their ids and scores), rankers rerank stages (candidates in, new order out), text embedders
  embed stages (their text is the pipeline's query when no retriever's is),
  ``PromptBuilder`` / ``ChatPromptBuilder`` (or the app's own component turning ``documents``
  into a ``prompt``) the assemble stage and generators generate stages;
- a document keeps its id, except where content is not exported (redact, hash) and the id is
  Haystack's default, a SHA-256 of the content: it then goes by ragtrace's keyed digest;
- a builder's documents are placed where it rendered them, known by rendering its template again
  (``_haystack_render``): *recorded*; where that rendering can't be matched, located in its prompt;
- a generator's context is the assembly whose prompt is the one it was sent (Haystack's own data
  flow, so parallel branches don't mix); its answer, usage and response model come from its
  ``replies`` and ``meta``. A generator that runs before anything was retrieved, was sent no
  documents and whose replies go on to another component (a query rewrite) has the ``rewrite``
  role, left out of the figures;
- components inside a Haystack ``Agent`` are left to the app's tracer: an agent's rounds are no
  RAG stages ragtrace can tell apart yet.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Iterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import wrapt
from opentelemetry import trace

from .. import names
from ..core.chunks import make_accessors
from ..core.guard import call_guarded, guard
from ..stages import state as state_module
from ..stages.assemble_stage import Assemble
from ..stages.generation import Generate
from ..stages.pipeline import RagPipeline
from ..stages.retrieval import Embed, Rerank, Retrieve
from ..stages.stage import Stage
from . import _haystack_components as parts
from ._common import Attached, add_usage, unwrap
from ._haystack_render import recorded, rendered_spans
from .base import RagtraceInstrumentor

_LABEL = "haystack instrumentation"
_PIPELINE_RUNS = frozenset({"haystack.pipeline.run", "haystack.async_pipeline.run"})  # 2.x's AsyncPipeline has its own
_COMPONENT_RUN = "haystack.component.run"
_AGENT_RUN = "haystack.agent.run"
_INPUT, _OUTPUT = "haystack.component.input", "haystack.component.output"
ROOT_NAME = "haystack"  # the pipeline root's name (gen_ai.workflow.name) unless the pipeline's metadata names it


class HaystackInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("haystack")``, or ``HaystackInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "haystack"

    def _instrument(self, **kwargs: Any) -> None:
        global _tracker
        _tracker = _Tracker(self.tracer_provider(kwargs))
        # never import Haystack for the app (about 1 s): each wrapper goes on when its module is
        # imported, at once if it already is
        for module, owner, name, wrapper in _WRAPPED:
            wrapt.register_post_import_hook(functools.partial(_wrap, owner=owner, name=name, wrapper=wrapper), module)

    def _uninstrument(self, **kwargs: Any) -> None:
        global _tracker
        _tracker = None  # a hook still waiting for its module's import now does nothing
        for module, owner, name, _ in _WRAPPED:
            found = sys.modules.get(module)
            if found is not None and isinstance(getattr(found, owner, None), type):
                unwrap(getattr(found, owner), name)


def _wrap(module: Any, *, owner: str, name: str, wrapper: Any) -> None:
    """Put ragtrace's ``wrapper`` on ``owner.name`` of a just-imported module, once."""
    cls = getattr(module, owner, None)
    if _tracker is None or not isinstance(cls, type):
        return
    current = vars(cls).get(name)
    while hasattr(current, "__wrapped__"):
        if (getattr(getattr(current, "_self_wrapper", None), "__module__", None) or "").startswith("ragtrace."):
            return  # already on (an earlier instrument()'s hook)
        current = current.__wrapped__
    call_guarded(_LABEL, wrapt.wrap_function_wrapper, cls, name, wrapper)


@dataclass(eq=False)
class _Run:
    """One pipeline run: its root (None inside a ``rag_pipeline``) and its assemblies' prompts."""

    root: RagPipeline | None
    assemblies: list[tuple[Any, Assemble]] = field(default_factory=list)

    def assembly_for(self, prompt: Any) -> Assemble | None:
        """The assembly whose builder produced ``prompt`` (the latest, if several did)."""
        for built, stage in reversed(self.assemblies):
            if built is prompt or _same(built, prompt):
                return stage
        return None


@dataclass(eq=False)
class _Component:
    """A traced Haystack span: a pipeline run, or a component run that is a stage."""

    kind: str  # names.STAGE_PIPELINE, the component's stage, or _AGENT_RUN
    tags: Mapping[str, Any]
    run: _Run | None
    started: int = 0  # epoch ns: the stage spans the component's run, opened once its inputs are known
    stage: Stage | None = None
    attached: Attached | None = None
    inputs: Mapping[str, Any] = field(default_factory=dict)
    outputs: Any = None
    rendered: tuple[list[Any], list[Any]] | None = None  # a builder's documents and their offsets
    tokens: list[tuple[ContextVar[Any], Any]] = field(default_factory=list)


_run: ContextVar[_Run | None] = ContextVar("ragtrace_haystack_run", default=None)
_component: ContextVar[_Component | None] = ContextVar("ragtrace_haystack_component", default=None)
_agent: ContextVar[bool] = ContextVar("ragtrace_haystack_agent", default=False)


class _Tracker:
    """Turns Haystack's spans into stage handles (each entry point is guarded by its caller)."""

    def __init__(self, provider: trace.TracerProvider | None) -> None:
        self.provider = provider

    def enter(self, operation: str, tags: Mapping[str, Any]) -> _Component | None:
        if operation == _AGENT_RUN:
            component = _Component(_AGENT_RUN, tags, None)
            component.tokens.append((_agent, _agent.set(True)))
            return component
        if operation in _PIPELINE_RUNS:
            return self._pipeline(tags) if _run.get() is None else None  # an inner pipeline is part of the outer run
        kind = parts.stage_of(tags)
        if kind is None or _agent.get():
            return None
        component = _Component(kind, tags, _run.get(), started=time.time_ns())
        component.tokens.append((_component, _component.set(component)))
        return component

    def _pipeline(self, tags: Mapping[str, Any]) -> _Component:
        root = None
        if state_module.current() is None:  # else inside the app's rag_pipeline: its stages join that one
            metadata = tags.get("haystack.pipeline.metadata")
            name = metadata.get("name") if isinstance(metadata, Mapping) else None
            root = RagPipeline(name if isinstance(name, str) and name else ROOT_NAME, tracer_provider=self.provider)
        run = _Run(root)
        component = _Component(names.STAGE_PIPELINE, tags, run, stage=root)
        if root is not None:
            root.open()
            component.attached = Attached(root, root.state)
        component.tokens.append((_run, _run.set(run)))
        return component

    # -- content tags ----------------------------------------------------------------------------
    def tagged(self, component: _Component, key: str, value: Any) -> None:
        if component.kind in (names.STAGE_PIPELINE, _AGENT_RUN):
            return
        if key == _INPUT and component.stage is None and isinstance(value, Mapping):
            component.inputs = value
            self._open(component)
        elif key == _OUTPUT:
            component.outputs = value

    def _open(self, component: _Component) -> None:
        """The component's stage, from its inputs, opened at the component span's start."""
        inputs, kind, type_name = component.inputs, component.kind, _text(component.tags.get(parts.TYPE_TAG))
        stage: Stage
        if kind == names.STAGE_RETRIEVE:
            stage = Retrieve(_text(inputs.get("query")), data_source=type_name, top_k=parts.int_or_none(inputs.get("top_k")), tracer_provider=self.provider)
        elif kind == names.STAGE_RERANK:
            stage = Rerank(type_name, top_n=parts.int_or_none(inputs.get("top_k")), query=_text(inputs.get("query")), tracer_provider=self.provider)
        elif kind == names.STAGE_ASSEMBLE:
            stage = Assemble(tracer_provider=self.provider)
        elif kind == names.STAGE_EMBED:
            stage = Embed(type_name, parts.provider_of(component.tags.get(parts.QUALIFIED_TAG), "embedders"), tracer_provider=self.provider)
        else:
            stage = self._generate(component, type_name)
        if not stage.config.content.captures:  # Haystack's default ids are content hashes
            if isinstance(stage, (Retrieve, Rerank)):
                stage.accessors = _KEYED_IDS
            elif isinstance(stage, Assemble):
                stage.builder.accessors = _KEYED_IDS
        stage.start_time = component.started
        stage.open()
        component.stage, component.attached = stage, Attached(stage)

    def _generate(self, component: _Component, type_name: str | None) -> Generate:
        prompt = parts.generator_prompt(component.inputs)
        context = component.run.assembly_for(prompt) if component.run is not None and prompt is not None else None
        shown = context.snapshot().placements if context is not None else []
        state = state_module.current()
        retrieved = state is not None and bool(state.retrievals)
        feeds_on = bool(parts.receivers(component.tags, "replies"))
        role = names.ROLE_REWRITE if not retrieved and not shown and feeds_on else names.ROLE_ANSWER
        provider = parts.provider_of(component.tags.get(parts.QUALIFIED_TAG), "generators")
        stage = Generate(type_name, provider, role=role, context=context, tracer_provider=self.provider)
        stage.set_prompt(parts.prompt_of(prompt))
        return stage

    # -- the end of a span -------------------------------------------------------------------------
    def exit(self, component: _Component, error: BaseException | None) -> None:
        for var, token in reversed(component.tokens):
            with guard("haystack context"):  # fails when an async span ends in another context
                var.reset(token)
        stage = component.stage
        if stage is None:
            return
        if component.attached is not None:
            component.attached.detach()
        if error is None and isinstance(component.outputs, Mapping):
            with guard(_LABEL):
                self._record(component, stage, component.outputs)
        stage.close(error)

    def _record(self, component: _Component, stage: Stage, outputs: Mapping[str, Any]) -> None:
        root = component.run.root if component.run is not None else None
        if isinstance(stage, Embed):
            text, meta = _text(component.inputs.get("text")), parts.embedding_meta(outputs)
            stage.record(outputs.get("embedding"), input_tokens=meta.get("input_tokens"), text=text)
            if root is not None and root.query is None and text is not None:
                root.set_query(text)  # the query an embedding retriever searches with
        elif isinstance(stage, Retrieve):
            stage.record(outputs.get("documents"))
            if root is not None and root.query is None and stage.query is not None:
                root.set_query(stage.query)
        elif isinstance(stage, Rerank):
            stage.record(outputs.get("documents"), candidates=component.inputs.get("documents"))
        elif isinstance(stage, Assemble):
            prompt = outputs.get("prompt")
            if component.rendered is not None:
                stage.given(recorded(stage, *component.rendered, prompt))
            else:
                stage.observe(parts.documents_in(component.inputs), parts.prompt_of(prompt))
            if component.run is not None:
                component.run.assemblies.append((prompt, stage))
        elif isinstance(stage, Generate):
            text, usage = parts.reply(outputs)
            if text is None:
                stage.record(outputs.get("replies"))  # unreadable: said once, the answer is not scored
                return
            stage.record(text, input_tokens=usage.get("input_tokens"), output_tokens=usage.get("output_tokens"), response_model=usage.get("response_model"))
            add_usage(stage, finish_reasons=usage.get("finish_reasons"))


_tracker: _Tracker | None = None
# where content is not exported, a document whose id is Haystack's SHA-256 of its content goes by
# ragtrace's keyed digest, as an id-less chunk does; an id the app gave is kept
_KEYED_IDS = make_accessors(id_of=parts.own_id)


def _same(built: Any, prompt: Any) -> bool:
    try:
        return bool(built == prompt)
    except Exception:  # noqa: BLE001 - an app's object whose == fails is no match
        return False


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


# -- the wrappers --------------------------------------------------------------------------------
def _trace(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``ProxyTracer.trace``: the app's tracer's span, inside a ragtrace span for the runs that
    are stages. Spans ragtrace has no stage for go to the app's tracer untouched."""
    args, kwargs = _unwrapped_parent(args, kwargs)
    tracker = _tracker
    operation = args[0] if args else kwargs.get("operation_name")
    if tracker is None or (operation not in _PIPELINE_RUNS and operation not in (_COMPONENT_RUN, _AGENT_RUN)):
        return wrapped(*args, **kwargs)
    tags = kwargs["tags"] if "tags" in kwargs else args[1] if len(args) > 1 else None
    return _traced(wrapped(*args, **kwargs), tracker, operation, tags if isinstance(tags, Mapping) else {})


@contextlib.contextmanager
def _traced(inner: Any, tracker: _Tracker, operation: str, tags: Mapping[str, Any]) -> Iterator[Any]:
    with inner as span:
        component = call_guarded(_LABEL, tracker.enter, operation, tags)
        if component is None:
            yield span
            return
        proxy = call_guarded(_LABEL, _proxy, span, tracker, component, default=span)
        try:
            yield proxy
        except BaseException as error:
            call_guarded(_LABEL, tracker.exit, component, error)
            raise
        call_guarded(_LABEL, tracker.exit, component, None)


def _unwrapped_parent(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The app's own span as ``parent_span``, where Haystack passes the span ragtrace gave it."""
    parent = kwargs.get("parent_span")
    if isinstance(parent, _span_class()):
        kwargs = {**kwargs, "parent_span": parent._inner}
    elif len(args) > 2 and isinstance(args[2], _span_class()):
        args = (*args[:2], args[2]._inner, *args[3:])
    return args, kwargs


def _built(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``PromptBuilder.run`` / ``ChatPromptBuilder.run``: the app's prompt, unchanged; inside a
    traced builder component, where each document landed in it (``_haystack_render``)."""
    result = wrapped(*args, **kwargs)
    component = _component.get()
    if component is not None and isinstance(component.stage, Assemble) and not component.stage.inert and not args and isinstance(result, Mapping):
        component.rendered = call_guarded(_LABEL, rendered_spans, wrapped, kwargs, result.get("prompt"))
    return result


_SPAN_CLASS: Any = None


def _span_class() -> Any:
    """ragtrace's ``haystack.tracing.Span`` around the app's (made once Haystack is imported)."""
    global _SPAN_CLASS
    if _SPAN_CLASS is None:
        from haystack.tracing import Span

        class RagtraceSpan(Span):  # type: ignore[misc]
            """The app's span, passed every call; the component's inputs and outputs read on the way."""

            def __init__(self, inner: Any, tracker: _Tracker, component: _Component) -> None:
                self._inner, self._tracker, self._component = inner, tracker, component

            def set_tag(self, key: str, value: Any) -> None:
                self._inner.set_tag(key, value)

            def set_tags(self, tags: dict[str, Any]) -> None:
                self._inner.set_tags(tags)

            def set_content_tag(self, key: str, value: Any) -> None:
                call_guarded(_LABEL, self._tracker.tagged, self._component, key, value)
                self._inner.set_content_tag(key, value)

            def raw_span(self) -> Any:
                return self._inner.raw_span()

            def get_correlation_data_for_logs(self) -> dict[str, Any]:
                return self._inner.get_correlation_data_for_logs()  # type: ignore[no-any-return]

            def __getattr__(self, name: str) -> Any:  # the app's span's own methods
                return getattr(self.__dict__["_inner"], name)

        _SPAN_CLASS = RagtraceSpan
    return _SPAN_CLASS


def _proxy(span: Any, tracker: _Tracker, component: _Component) -> Any:
    return _span_class()(span, tracker, component)


# (module, class, method, ragtrace's wrapper): what instrument() wraps, each when its module is imported
_WRAPPED = (
    ("haystack.tracing.tracer", "ProxyTracer", "trace", _trace),
    ("haystack.components.builders.prompt_builder", "PromptBuilder", "run", _built),
    ("haystack.components.builders.chat_prompt_builder", "ChatPromptBuilder", "run", _built),
)
