"""AWS Bedrock through boto3: knowledge-base retrieval, retrieve-and-generate, and Converse with
the app's documents and search results, turned into the same stage handles as an app's own code.

- ``bedrock-agent-runtime`` ``retrieve``: a retrieve span of ``retrievalResults`` (ids, scores),
  the knowledge base as ``gen_ai.data_source.id``;
- ``bedrock-agent-runtime`` ``retrieve_and_generate`` and ``retrieve_and_generate_stream``: the
  whole pipeline in one call. The response carries only the references its answer cites, with
  no score: what was retrieved and put in context is not returned, so the retrieve span says so
  (``rag.retrieval.status = "cited_references_only"``), no assembly is recorded, and the generate
  span carries the answer, the cited ids and where the answer cites them, with the figures that
  count retrieved or in-context chunks not measurable (``cited_references_only``). A retrieval
  the pipeline recorded itself (its own ``retrieve`` call) still counts as retrieved;
- ``bedrock-runtime`` ``converse`` and ``converse_stream``: a request holding ``document`` or
  ``searchResult`` blocks is a RAG call read as Anthropic's (``_provider``: retrieve and assemble
  spans of the blocks, ``inclusion_method = "provider"``), its ``citationsContent`` resolved to
  exactly the blocks they name. Without such blocks, a plain generate span.
Ids: ``_bedrock_blocks``. Outside a ``rag_pipeline`` each call is a pipeline of its own (a
``retrieve`` opens the automatic root the next model call of the request joins); inside one,
its stages are the pipeline's.

How. botocore's own event system, not patched methods: ``before-parameter-build`` keeps the
call's parameters in botocore's per-call ``context``, ``before-call`` opens the stage once the
parameters are valid, ``after-call`` records the parsed response and ends it, and
``after-call-error`` ends it with the transport's error. The handlers are added to
``botocore.handlers.BUILTIN_HANDLERS``, which every botocore session registers when it is made,
and to boto3's default session when it already exists, so every client made after
``instrument()`` is covered (a client copies its session's handlers when it is made; one made
before is not). ``before-call`` is registered first on ``before-call.*.*``: a more specific event
would run after a catch-all handler that answers the call (botocore's ``Stubber``), and for any
other call it returns at once. A streamed response's ``EventStream`` reaches the app behind the
transparent recording proxy every traced stream gets (``passthrough``): text and citations are
read from the events the app consumed. The stage is not made the current span between the two
handlers: a later ``before-call`` handler that raises (a ``Stubber`` with no response queued)
skips ``after-call``, and would leave it current in the app's context.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from opentelemetry import trace

from ..boundaries import auto_root
from ..core import figures
from ..stages.generation import Generate
from ..core.guard import call_guarded, guard
from ..core.keyed import warn_if_random
from ..core.outputs import get
from ..stages.passthrough import RecordingIterator
from ..core.provided import Provided
from ..stages.retrieval import Retrieve
from . import _provider
from ._anthropic_blocks import Request
from ._bedrock_blocks import cited_segments, citation_ref, converse_output, read_converse, result_chunk
from ._common import add_usage, closed_with, inside_generation
from .base import RagtraceInstrumentor

_PROVIDER = "aws.bedrock"  # gen_ai.provider.name
ROOT_NAME = "bedrock"  # the automatic root's name (gen_ai.workflow.name)
_LABEL = "bedrock instrumentation"
_PARAMS, _STAGE = "ragtrace_params", "ragtrace_stage"  # in botocore's per-call context
_AGENT, _RUNTIME = "bedrock-agent-runtime", "bedrock-runtime"
_OPERATIONS = (
    (_AGENT, "Retrieve"),
    (_AGENT, "RetrieveAndGenerate"),
    (_AGENT, "RetrieveAndGenerateStream"),
    (_RUNTIME, "Converse"),
    (_RUNTIME, "ConverseStream"),
)


class BedrockInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("bedrock")``, or ``BedrockInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "bedrock"

    def _instrument(self, **kwargs: Any) -> None:
        from botocore import handlers

        hooks = _Hooks(self.tracer_provider(kwargs))
        self._hooks = hooks
        self._specs = hooks.specs(handlers.REGISTER_FIRST)
        handlers.BUILTIN_HANDLERS.extend(self._specs)
        self._emitters = [s.get_component("event_emitter") for s in (_default_session(),) if s is not None]
        for emitter in self._emitters:
            for spec in self._specs:
                register = emitter.register_first if len(spec) == 3 else emitter.register
                register(spec[0], spec[1], unique_id=_unique_id(spec))

    def _uninstrument(self, **kwargs: Any) -> None:
        from botocore import handlers

        self._hooks.active = False  # sessions made meanwhile keep the handlers: they do nothing now
        for spec in self._specs:
            if spec in handlers.BUILTIN_HANDLERS:
                handlers.BUILTIN_HANDLERS.remove(spec)
        for emitter in self._emitters:
            for spec in self._specs:
                emitter.unregister(spec[0], spec[1], unique_id=_unique_id(spec))


def _default_session() -> Any:
    """boto3's default botocore session, when boto3 is there and made one already."""
    try:
        import boto3
    except ImportError:
        return None
    default = getattr(boto3, "DEFAULT_SESSION", None)
    return getattr(default, "_session", None)


def _unique_id(spec: tuple[Any, ...]) -> str:
    return f"ragtrace:{spec[0]}"


class _Hooks:
    """botocore handlers bound to one instrumentation (its tracer provider)."""

    def __init__(self, provider: trace.TracerProvider | None) -> None:
        self.provider = provider
        self.active = True

    def specs(self, first: Any) -> list[tuple[Any, ...]]:
        found: list[tuple[Any, ...]] = [("before-call.*.*", self.before_call, first)]
        for service, operation in _OPERATIONS:
            found.append((f"before-parameter-build.{service}.{operation}", self.parameters))
            found.append((f"after-call.{service}.{operation}", self.after_call))
            found.append((f"after-call-error.{service}.{operation}", self.after_error))
        return found

    def parameters(self, params: Any = None, model: Any = None, context: Any = None, **_: Any) -> None:
        if self.active and isinstance(context, dict) and isinstance(params, Mapping):
            context[_PARAMS] = (model.name, params)

    def before_call(self, context: Any = None, **_: Any) -> None:
        found = context.pop(_PARAMS, None) if isinstance(context, dict) else None
        if found is None or not self.active:  # not a call of ours: nothing more to do
            return
        operation, params = found
        stage = call_guarded(_LABEL, _OPENERS[operation], params, self.provider)
        if stage is not None:
            context[_STAGE] = (operation, stage)

    def after_call(self, http_response: Any = None, parsed: Any = None, context: Any = None, **_: Any) -> None:
        found = context.pop(_STAGE, None) if isinstance(context, dict) else None
        if found is None:
            return
        operation, stage = found
        status = getattr(http_response, "status_code", 200)
        if not isinstance(parsed, dict) or not isinstance(status, int) or status >= 300:
            call_guarded(_LABEL, closed_with, stage, _service_error(parsed, operation))
            return
        call_guarded(_LABEL, _RECORDERS[operation], stage, parsed)

    def after_error(self, exception: Any = None, context: Any = None, **_: Any) -> None:
        found = context.pop(_STAGE, None) if isinstance(context, dict) else None
        if found is not None:
            call_guarded(_LABEL, closed_with, found[1], exception if isinstance(exception, BaseException) else _service_error(None, found[0]))


def _service_error(parsed: Any, operation: str) -> BaseException:
    """What a failed call's span ends with: the ``ClientError`` botocore raises to the app right
    after its ``after-call`` handlers ran (the same class family, code and message)."""
    from botocore.exceptions import ClientError

    return ClientError(parsed if isinstance(parsed, dict) else {}, operation)


# --- bedrock-agent-runtime -----------------------------------------------------------------------
def _open_retrieve(params: Mapping[str, Any], provider: trace.TracerProvider | None) -> Retrieve:
    query = get(get(params, "retrievalQuery"), "text")
    query = query if isinstance(query, str) else None
    base = params.get("knowledgeBaseId")
    top_k = get(get(get(params, "retrievalConfiguration"), "vectorSearchConfiguration"), "numberOfResults")
    stage = Retrieve(query, data_source=base if isinstance(base, str) else None, top_k=top_k if isinstance(top_k, int) else None, tracer_provider=provider)
    stage.auto_root = auto_root.for_retrieval(ROOT_NAME, query, provider)
    stage.open()
    return stage


def _record_retrieve(stage: Retrieve, parsed: Mapping[str, Any]) -> None:
    results = parsed.get("retrievalResults")
    if isinstance(results, list):
        stage.record([result_chunk(result) for result in results])
        if results and not stage.inert:
            warn_if_random("Bedrock chunk ids (location digest#text digest) differ between processes")
    stage.close()


def _open_generated(params: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    """``retrieve_and_generate(_stream)``: the generate span, in the automatic root outside a
    pipeline; its retrieve span is written with the response (what it can say comes from there)."""
    if inside_generation():
        return None
    query = get(get(params, "input"), "text")
    query = query if isinstance(query, str) else None
    config = get(params, "retrieveAndGenerateConfiguration")
    base_config = get(config, "knowledgeBaseConfiguration")
    model = get(base_config, "modelArn") or get(get(config, "externalSourcesConfiguration"), "modelArn")
    base = get(base_config, "knowledgeBaseId")
    stage = Generate(model if isinstance(model, str) else None, _PROVIDER, tracer_provider=provider)
    stage.auto_root = _provider.root_for(ROOT_NAME, query, provider)
    stage.bedrock_request = (query, base if isinstance(base, str) else None)  # type: ignore[attr-defined]
    stage.open()
    # the prompt only once the span is open: the model's prompt is the service's, holding what it
    # retrieved, so the automatic root must not locate an earlier retrieval in the question
    stage.set_prompt(query)
    return stage


def _record_generated(stage: Generate, parsed: dict[str, Any]) -> None:
    stream = parsed.get("stream")
    if stream is not None:  # retrieve_and_generate_stream: recorded as the app reads it
        parsed["stream"] = RecordingIterator(stream, stage, lambda events, error: _generated_stream(stage, events, error))
        return
    text = get(get(parsed, "output"), "text")
    _generated(stage, text if isinstance(text, str) else None, parsed.get("citations") or ())
    stage.record(text)
    stage.close()


def _generated(stage: Generate, text: str | None, citations: Any) -> None:
    """The call's retrieve span, which can only say what is missing, and its answer's citations."""
    query, base = getattr(stage, "bedrock_request", (None, None))
    _provider.record_retrieval(
        (), None, query=query, data_source=base, provider=stage._provider, root=stage.auto_root, status=figures.STATUS_CITED_REFERENCES_ONLY
    )
    ids, segments = cited_segments(text, citations)
    stage.provided = Provided(tuple(ids), segments=tuple(segments), unmeasured=figures.STATUS_CITED_REFERENCES_ONLY)
    if ids and not stage.inert:
        warn_if_random("Bedrock chunk ids (location digest#text digest) differ between processes")


def _generated_stream(stage: Generate, events: list[Any] | None, error: BaseException | None) -> None:
    with guard("bedrock stream"):
        pieces, citations = [], []
        for event in events or ():
            text = get(get(event, "output"), "text")
            if isinstance(text, str):
                pieces.append(text)
            cited = get(event, "citation")
            if cited is not None:  # the event's own fields; older services nest them once more
                citations.append(cited if get(cited, "retrievedReferences") is not None else get(cited, "citation") or cited)
        if events is not None:
            _generated(stage, "".join(pieces), citations)
            stage.stream_done(pieces)
        stage.close(error)


# --- bedrock-runtime Converse --------------------------------------------------------------------
def _open_converse(params: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    if inside_generation():
        return None
    messages = params.get("messages")
    request = read_converse(messages)
    root = None
    if request.sources:
        root = _provider.root_for(ROOT_NAME, request.query, provider)
        request = _provider.record_sources(request, root, provider)
    inference = get(params, "inferenceConfig")
    model = params.get("modelId")
    stage = Generate(
        model if isinstance(model, str) else None,
        _PROVIDER,
        prompt=list(messages) if isinstance(messages, (list, tuple)) else None,
        temperature=get(inference, "temperature"),
        max_tokens=get(inference, "maxTokens"),
        tracer_provider=provider,
    )
    stage.auto_root = root
    stage.provider_request = request if request.sources else None  # type: ignore[attr-defined]
    stage.open()
    return stage


def _record_converse(stage: Generate, parsed: dict[str, Any]) -> None:
    stream = parsed.get("stream")
    if stream is not None:  # converse_stream
        parsed["stream"] = RecordingIterator(stream, stage, lambda events, error: _converse_stream(stage, events, error))
        return
    text, refs = converse_output(get(get(get(parsed, "output"), "message"), "content"))
    _cited(stage, refs)
    stage.record(text)
    _usage(stage, parsed)
    stage.close()


def _usage(stage: Generate, found: Any) -> None:
    """Tokens and stop reason of a Converse response (or of a stream's ``metadata`` /
    ``messageStop`` event)."""
    usage, reason = get(found, "usage"), get(found, "stopReason")
    add_usage(stage, input_tokens=get(usage, "inputTokens"), output_tokens=get(usage, "outputTokens"), finish_reasons=[reason] if isinstance(reason, str) else None)


def _cited(stage: Generate, refs: list[tuple[tuple[str, Any], int, int]]) -> None:
    """The citations, each resolved to the block it names, and where the answer cites it."""
    request: Request | None = getattr(stage, "provider_request", None)
    if request is None:
        return
    provided = _provider.provided_by_index(request, [ref for ref, _, _ in refs])
    blocks = request.by_kind()
    segments = []
    for (kind, index), start, end in refs:
        found = blocks.get(kind, [])
        if isinstance(index, int) and 0 <= index < len(found):
            segments.append((start, end, found[index].chunk_id))
    stage.provided = replace(provided, segments=tuple(segments))


def _converse_stream(stage: Generate, events: list[Any] | None, error: BaseException | None) -> None:
    """Text deltas, and citation deltas that cite the text of their content block: a block's
    place in the answer is known once its text has been read."""
    with guard("bedrock stream"):
        if events is not None:
            pieces: list[str] = []
            blocks: dict[Any, list[int]] = {}  # content block index -> [start, end] in the answer
            cited: list[tuple[Any, tuple[str, Any]]] = []
            length = 0
            for event in events:
                delta = get(event, "contentBlockDelta")
                if delta is not None:
                    index, body = get(delta, "contentBlockIndex"), get(delta, "delta")
                    text = get(body, "text")
                    if isinstance(text, str):
                        blocks.setdefault(index, [length, length])[1] = length + len(text)
                        pieces.append(text)
                        length += len(text)
                    ref = citation_ref(get(body, "citation")) if get(body, "citation") is not None else None
                    if ref is not None:
                        cited.append((index, ref))
                _usage(stage, get(event, "metadata") or get(event, "messageStop"))
            _cited(stage, [(ref, *blocks.get(index, (length, length))) for index, ref in cited])
            stage.stream_done(pieces)
            stage.check_stream_end(events)
        stage.close(error)


_OPENERS: dict[str, Any] = {
    "Retrieve": _open_retrieve,
    "RetrieveAndGenerate": _open_generated,
    "RetrieveAndGenerateStream": _open_generated,
    "Converse": _open_converse,
    "ConverseStream": _open_converse,
}
_RECORDERS: dict[str, Any] = {
    "Retrieve": _record_retrieve,
    "RetrieveAndGenerate": _record_generated,
    "RetrieveAndGenerateStream": _record_generated,
    "Converse": _record_converse,
    "ConverseStream": _record_converse,
}
