"""LiteLLM, through its own callback interface: a ``CustomLogger`` in LiteLLM's callback lists.

- every ``completion`` / ``acompletion`` (plain or ``stream=True``) is a generate span: the model
  and provider LiteLLM resolved, the request's messages, temperature and max tokens, and from the
  logged response its answer, usage, response model and id, LiteLLM's ``response_cost``
  (``llm.cost.total``, when LiteLLM knows the model's price) and, for a stream, the time to the
  first chunk LiteLLM measured. A plain completion that gives Claude ``document`` blocks is a RAG
  call as in the Anthropic integration (``_provider``): retrieve and assemble spans of the blocks
  (``provider``), and the citations LiteLLM passes on in ``provider_specific_fields`` resolved
  exactly. A plain Gemini completion (``gemini/``, ``vertex_ai/``) whose request carries a File
  Search or retrieval tool (in ``extra_body``) is a RAG call as in the google-genai integration:
  its grounding metadata is read by that integration's reader and recorder (``_litellm_gemini``);
- ``vector_stores.search`` / ``asearch`` is a retrieve span (``file_id#digest`` chunk ids, as the
  OpenAI SDK's search gets): outside any ``rag_pipeline`` it opens the automatic root that the
  answer's completion joins (``auto_root``, named ``litellm``), where the chunks are located in
  the answer's messages;
- ``rerank`` / ``arerank`` is a rerank span: the documents given, the results in their new order
  with their relevance scores, and the search units the API billed.

LiteLLM logs a call's end after the call returned, from its own threads: ``_litellm_calls`` says
how each call is tied to its request (its pre-call event, in the caller's context, and LiteLLM's
call id) and why its stages are recorded in call order once their ends are logged. Nothing of
LiteLLM is patched; importing ragtrace never imports LiteLLM (about 3 s): ``instrument()`` adds the
logger at once when the app has imported LiteLLM, else when it does (a post-import hook). The
logger goes into every list LiteLLM copies ``litellm.callbacks`` into, so the app's own callbacks,
set before or after (``litellm.callbacks = [...]``), keep receiving every event; ``uninstrument()``
takes out only ragtrace's logger.
"""

from __future__ import annotations

import contextvars
import datetime
import sys
from collections.abc import Mapping
from typing import Any

import wrapt
from opentelemetry import trace

from ..boundaries import auto_root
from .. import names
from ..stages import state as state_module
from ..stages.generation import Generate
from ..core.guard import call_guarded, warn_once
from ..core.keyed import warn_if_random
from ..core.outputs import get
from ..stages.retrieval import Rerank, Retrieve
from ..stages.stage import Stage
from . import _litellm_calls, _litellm_gemini, _provider
from ._anthropic_blocks import message_refs, read_request
from ._common import generated, generating, generating_stage, inside_generation
from .base import RagtraceInstrumentor
from .google_genai import record_grounding
from .openai_vector_stores import search_result_chunk

_LABEL = "litellm instrumentation"
ROOT_NAME = "litellm"  # the automatic root's name (gen_ai.workflow.name)
# the lists LiteLLM copies ``litellm.callbacks`` into on a call: ragtrace's logger is in each, so
# an app that assigns ``litellm.callbacks`` afterwards still has it called once per event
_LISTS = ("callbacks", "input_callback", "success_callback", "failure_callback", "_async_success_callback", "_async_failure_callback")
_GENERATE = frozenset({"completion", "acompletion"})
_SEARCH = frozenset({"search", "asearch"})
_RERANK = frozenset({"rerank", "arerank"})
_USAGE_IN_EVERY_STREAM = frozenset({"anthropic"})  # message_start / message_delta carry the usage


class LiteLLMInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("litellm")``, or ``LiteLLMInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "litellm"

    def _instrument(self, **kwargs: Any) -> None:
        global _switch
        switch = _switch = _Switch(self.tracer_provider(kwargs))
        if "litellm" in sys.modules:
            _attach(switch)
        else:  # never import LiteLLM for the app: add the logger when the app imports it
            wrapt.register_post_import_hook(lambda module: call_guarded(_LABEL, _attach, switch), "litellm")

    def _uninstrument(self, **kwargs: Any) -> None:
        global _switch
        switch, _switch = _switch, None
        if switch is not None:
            switch.on = False
            _detach(switch)
        _litellm_calls.give_up_all()


class _Switch:
    """One ``instrument()``: its tracer provider and logger; off once uninstrumented (a pending
    post-import hook then adds nothing)."""

    def __init__(self, provider: trace.TracerProvider | None) -> None:
        self.provider, self.on, self.logger = provider, True, None


_switch: _Switch | None = None


def _attach(switch: _Switch) -> None:
    if not switch.on or switch.logger is not None:
        return
    import litellm
    from litellm.integrations.custom_logger import CustomLogger

    switch.logger = _logger_type(CustomLogger)(switch.provider)
    for name in _LISTS:
        found = getattr(litellm, name, None)
        if isinstance(found, list) and not any(entry is switch.logger for entry in found):
            found.append(switch.logger)


def _detach(switch: _Switch) -> None:
    logger, switch.logger = switch.logger, None
    litellm = sys.modules.get("litellm")
    if logger is None or litellm is None:
        return
    for name in _LISTS:
        found = getattr(litellm, name, None)
        while isinstance(found, list) and any(entry is logger for entry in found):
            found.remove(logger)


_logger_types: dict[type, type] = {}


def _logger_type(base: type) -> type:
    """ragtrace's ``CustomLogger`` subclass (made once LiteLLM is imported). Every method is
    guarded: an error of ragtrace's is logged once and never reaches LiteLLM or the app."""
    found = _logger_types.get(base)
    if found is not None:
        return found

    class RagtraceLogger(base):  # type: ignore[misc, valid-type]
        def __init__(self, provider: trace.TracerProvider | None) -> None:
            super().__init__()
            self.ragtrace_provider = provider

        def log_pre_api_call(self, model: Any, messages: Any, kwargs: Any) -> None:
            call_guarded(_LABEL, _pre_call, model, messages, kwargs, self.ragtrace_provider)

        def log_post_api_call(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            call_guarded(_LABEL, _post_call, kwargs)

        def log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            call_guarded(_LABEL, _ended, kwargs, response_obj, False, start_time, end_time)

        def log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            call_guarded(_LABEL, _ended, kwargs, response_obj, True, start_time, end_time)

        async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            call_guarded(_LABEL, _ended, kwargs, response_obj, False, start_time, end_time)

        async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
            call_guarded(_LABEL, _ended, kwargs, response_obj, True, start_time, end_time)

    _logger_types[base] = RagtraceLogger
    return RagtraceLogger


# --- a call's pre-call event (the caller's context) ------------------------------------------------
_marks: dict[str, contextvars.Token[Any]] = {}  # call id -> the "model call in progress" mark set at its pre-call event


def _pre_call(model: Any, messages: Any, kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> None:
    """Make the call's stage (not opened yet), decide which pipeline it belongs to, and keep both
    with a copy of this context until its end is logged (``_litellm_calls``)."""
    call_id, call_type = kwargs.get("litellm_call_id"), kwargs.get("call_type")
    if not isinstance(call_id, str):
        return
    if call_type in _GENERATE:
        if _covered():
            return  # another generate span records this call (the app's own, a framework's)
        stage: Stage = _generation(model, messages, kwargs, provider)
        stage.litellm_call = call_id  # type: ignore[attr-defined]
    elif call_type in _SEARCH:
        stage = _search(kwargs, provider)
    elif call_type in _RERANK:
        stage = _rerank(model, kwargs, provider)
    else:
        return
    stage.start_time = _ns(kwargs.get("start_time"))
    scope, release = _scope(stage)
    if call_type in _GENERATE:  # an SDK call LiteLLM makes for it (OpenAI's, Anthropic's) is left to it
        _marks[call_id] = generating(stage)
    recorder = {names.STAGE_GENERATE: _record_generation, names.STAGE_RETRIEVE: _record_search, names.STAGE_RERANK: _record_rerank}[stage.stage]
    _litellm_calls.begin(_litellm_calls.Call(call_id, stage, contextvars.copy_context(), scope, recorder, release))


def _covered() -> bool:
    """Is this call inside a generate span that records it? A mark left in this context by an
    earlier LiteLLM call (a stream's: LiteLLM sends no post-call event for one) is dropped first."""
    if getattr(generating_stage(), "litellm_call", False):
        generating(None)
    return inside_generation()


def _scope(stage: Stage) -> tuple[Any, Any]:
    """The pipeline the call belongs to and how to tell it the stage is made: the active
    ``rag_pipeline``, else the automatic root of this context when the one rule admits the call
    here (a search opens one), else none."""
    state = state_module.current()
    if state is not None:
        state.hold()
        return state, state.release
    root = stage.auto_root if stage.auto_root is not None else state_module.auto_root()
    if root is not None and not root.closed and root.expect(stage):
        stage.auto_root = root
        return root, root.expected
    stage.auto_root = None
    return None, _nothing


def _nothing() -> None:
    pass


def _post_call(kwargs: Mapping[str, Any]) -> None:
    """The provider answered (in the caller's context, before LiteLLM returns): the mark ends."""
    token = _marks.pop(kwargs.get("litellm_call_id"), None)  # type: ignore[arg-type]
    if token is not None:
        generated(token)


def _ended(kwargs: Mapping[str, Any], response: Any, failed: bool, start_time: Any, end_time: Any) -> None:
    call_id = kwargs.get("litellm_call_id")
    _marks.pop(call_id, None)  # type: ignore[arg-type]
    error = kwargs.get("exception") if failed else None
    if failed and not isinstance(error, BaseException):
        error = RuntimeError("LiteLLM logged the call as failed")
    logged = _Logged(None if failed else response, kwargs, _ns(start_time), _ns(end_time))
    if not _litellm_calls.end(call_id, logged, error):
        warn_once(
            f"litellm-untied:{kwargs.get('call_type')}",
            "LiteLLM logged a %s with no pre-call event (a mock_response search, a cache hit): nothing ties it to its request, so it is not recorded",
            kwargs.get("call_type"),
        )


class _Logged:
    """What LiteLLM logged at a call's end."""

    __slots__ = ("response", "kwargs", "start", "end")

    def __init__(self, response: Any, kwargs: Mapping[str, Any], start: int | None, end: int | None) -> None:
        self.response, self.kwargs, self.start, self.end = response, kwargs, start, end


def _ns(value: Any) -> int | None:
    """LiteLLM's times (naive local ``datetime.now()``, or epoch seconds) as epoch nanoseconds."""
    if isinstance(value, datetime.datetime):
        return int(value.timestamp() * 1e9)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value * 1e9)
    return None


def _provider_name(kwargs: Mapping[str, Any]) -> str | None:
    found = kwargs.get("custom_llm_provider") or get(kwargs.get("litellm_params"), "custom_llm_provider")
    return found if isinstance(found, str) else None


# --- the stages -------------------------------------------------------------------------------------
def _generation(model: Any, messages: Any, kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate:
    options = kwargs.get("optional_params") or {}
    plain = not kwargs.get("stream")
    request = read_request(messages) if _provider_name(kwargs) == "anthropic" and plain else None
    searched = _litellm_gemini.request(kwargs) if _provider_name(kwargs) in _litellm_gemini.PROVIDERS and plain else None
    root = None
    if request is not None and request.sources:  # Claude is given document blocks: a RAG call, as in the SDK's integration
        root = _provider.root_for(ROOT_NAME, request.query, provider)  # here, in the caller's context
    elif searched is not None:  # Gemini searches the app's store inside the call (File Search, RAG Engine)
        root = _provider.root_for(ROOT_NAME, searched[1], provider)
    stage = Generate(
        model if isinstance(model, str) else None,
        _provider_name(kwargs),
        prompt=list(messages) if isinstance(messages, (list, tuple)) else None,
        temperature=get(options, "temperature"),
        max_tokens=get(options, "max_tokens") or get(options, "max_completion_tokens"),
        tracer_provider=provider,
    )
    stage.provider_request = request if request is not None and request.sources else None  # type: ignore[attr-defined]
    stage.gemini_search = searched  # type: ignore[attr-defined]
    stage.auto_root = root
    return stage


def _record_generation(stage: Generate, logged: _Logged | None, error: BaseException | None) -> None:
    """Runs in the caller's context once the call's end is logged (or given up: ``logged`` None)."""
    _marks.pop(getattr(stage, "litellm_call", None), None)  # type: ignore[arg-type]  # a call given up never had its end event
    if logged is not None and logged.start is not None:
        stage.start_time = logged.start
    request = getattr(stage, "provider_request", None)
    if request is not None:  # the blocks the model was given: their retrieve and assemble spans first
        request = _provider.record_sources(request, stage.auto_root, stage._provider)
    stage.open()
    if logged is not None and logged.response is not None:
        if request is not None:
            stage.provided = _provider.provided_by_index(request, message_refs(_cited_blocks(logged.response)))
        searched = getattr(stage, "gemini_search", None)
        found = _litellm_gemini.response_grounding(logged.response, logged.kwargs) if searched is not None else None
        if found is not None:  # the chunks Gemini's search gave the model: retrieve and assemble spans, citations
            record_grounding(stage, *searched, *found)
        if logged.kwargs.get("stream"):
            stage.stream_done(())  # the logged response is the whole stream, assembled by LiteLLM
            first = _ns(logged.kwargs.get("completion_start_time"))
            if first is not None and stage.start_time is not None:
                stage.time_to_first_chunk = max(0.0, (first - stage.start_time) / 1e9)
        stage.record(logged.response)
        if logged.kwargs.get("stream") and not _usage_streamed(logged.kwargs):
            stage.drop_token_counts()  # LiteLLM's estimate (tiktoken over the text), and its cost with it
        else:
            _set_cost(stage, logged.kwargs)
    _close(stage, logged, error)


def _usage_streamed(kwargs: Mapping[str, Any]) -> bool:
    """Did the stream carry the provider's usage? LiteLLM fills a stream's usage with its own token
    count when no chunk had one, and says nothing of it; a stream has the provider's usage when
    the request asked for it (``stream_options={"include_usage": True}``), or the provider always
    sends it (Anthropic's streams)."""
    options = kwargs.get("stream_options") or get(kwargs.get("optional_params"), "stream_options")
    return bool(get(options, "include_usage")) or _provider_name(kwargs) in _USAGE_IN_EVERY_STREAM


def _cited_blocks(response: Any) -> list[dict[str, Any]]:
    """Claude's citations as LiteLLM passes them on: ``provider_specific_fields["citations"]``,
    one list per text block that had any (each citation with the block's ``supported_text``), read
    as the text blocks they came from."""
    choices = get(response, "choices") or ()
    fields = get(get(choices[0], "message"), "provider_specific_fields") if choices else None
    return [{"type": "text", "citations": list(block)} for block in get(fields, "citations") or () if isinstance(block, (list, tuple))]


def _set_cost(stage: Stage, kwargs: Mapping[str, Any]) -> None:
    """LiteLLM's price of the call, when it knows the model's: a 0 it reports for a model it has
    no price for is no figure (``response_cost`` is then 0 with a diagnostic, or None)."""
    cost = kwargs.get("response_cost")
    if not isinstance(cost, (int, float)) or isinstance(cost, bool) or cost < 0 or (cost == 0 and kwargs.get("zero_cost_diagnostic")):
        return
    if stage.attrs is not None:
        stage.attrs.set(names.OI_LLM_COST_TOTAL, float(cost))


def _close(stage: Stage, logged: _Logged | None, error: BaseException | None) -> None:
    if logged is not None and logged.end is not None:
        stage.end_time = logged.end
    stage.close(error)


def _search(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Retrieve:
    options = kwargs.get("optional_params") or {}
    query = get(options, "query")
    text = query if isinstance(query, str) else "\n".join(q for q in query if isinstance(q, str)) if isinstance(query, (list, tuple)) else None
    store, top_k = get(options, "vector_store_id"), get(options, "max_num_results")
    root = auto_root.for_retrieval(ROOT_NAME, text, provider)  # here, in the caller's context
    stage = Retrieve(text, data_source=store if isinstance(store, str) else None, top_k=top_k if isinstance(top_k, int) else None, tracer_provider=provider)
    stage.auto_root = root
    return stage


def _record_search(stage: Retrieve, logged: _Logged | None, error: BaseException | None) -> None:
    if logged is not None and logged.start is not None:
        stage.start_time = logged.start
    stage.open()
    data = get(logged.response, "data") if logged is not None and logged.response is not None else None
    if isinstance(data, list):
        stage.record([search_result_chunk(result) for result in data])
        if data and not stage.inert:
            warn_if_random("vector-store chunk ids (file_id#digest) differ between processes")
    _close(stage, logged, error)


def _rerank(model: Any, kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Rerank:
    options = kwargs.get("optional_params") or {}
    query, top_n = get(options, "query"), get(options, "top_n")
    stage = Rerank(
        model if isinstance(model, str) else None,
        provider=_provider_name(kwargs),
        top_n=top_n if isinstance(top_n, int) else None,
        query=query if isinstance(query, str) else None,
        tracer_provider=provider,
    )
    stage.litellm_documents = get(options, "documents")  # type: ignore[attr-defined]
    return stage


def _record_rerank(stage: Rerank, logged: _Logged | None, error: BaseException | None) -> None:
    """The documents given are the candidates; each result names one by its index, in the new order."""
    if logged is not None and logged.start is not None:
        stage.start_time = logged.start
    stage.open()
    documents = getattr(stage, "litellm_documents", None)
    results = get(logged.response, "results") if logged is not None and logged.response is not None else None
    if isinstance(documents, (list, tuple)) and isinstance(results, list):
        candidates = [_document(document) for document in documents]
        kept = []
        for result in results:
            index = get(result, "index")
            if isinstance(index, int) and not isinstance(index, bool) and 0 <= index < len(candidates):
                kept.append({**candidates[index], "score": get(result, "relevance_score")})
        stage.record(kept, candidates=candidates)
        units = get(get(get(logged.response, "meta"), "billed_units"), "search_units")  # type: ignore[union-attr]
        if isinstance(units, (int, float)) and not isinstance(units, bool) and stage.attrs is not None:
            stage.attrs.set(names.RAG_RERANK_SEARCH_UNITS, float(units))
        _set_cost(stage, logged.kwargs)  # type: ignore[union-attr]
    _close(stage, logged, error)


def _document(document: Any) -> dict[str, Any]:
    """A rerank document as given (a string, or a dict with ``text``, and perhaps an ``id``)."""
    if isinstance(document, str):
        return {"content": document}
    text = get(document, "text")
    found = {"content": text if isinstance(text, str) else None}
    if isinstance(get(document, "id"), str):
        found["id"] = get(document, "id")
    return found
