"""google-genai (Gemini API and Vertex AI): every ``models.generate_content`` and
``models.generate_content_stream`` call, sync and under ``client.aio``, is a generate span; a call
whose ``config.tools`` has ``Tool(file_search=...)`` or ``Tool(retrieval=...)`` is a RAG call with
exact figures, read from the response's grounding metadata (``_gemini_grounding``):

- a retrieve span of candidate 0's ``retrieved_context`` grounding chunks, in order, the store as
  ``gen_ai.data_source.id`` and the ``retrieval_queries`` as the query (the API gives no
  per-chunk score);
- an assemble span of the same chunks (``inclusion_method = "provider"``): what the model was given;
- the generate span, whose citations are the grounding supports, each resolving to exactly the
  chunks it names, with the cited segments as character offsets into the answer.

Outside any ``rag_pipeline`` such a call is one pipeline (the automatic root, ``_provider``);
inside one, its stages are the pipeline's. The search runs on Google's side inside the call, so the
retrieve and assemble spans are made when the response (or, streamed, the chunks the app read)
arrives, after the generate span starts. A call without such a tool is a plain generate span.

The SDK has no callback system, so ``Models`` / ``AsyncModels`` methods are wrapped with wrapt at
class level (clients built before ``instrument()`` are covered). The app gets the SDK's own
objects: a ``GenerateContentResponse``, or its (async) generator of chunks behind the transparent
recording proxy every traced stream gets (``passthrough``); grounding metadata may come only on
the last chunk, so a stream closed before it has no retrieval (what the app read is scored).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import wrapt
from opentelemetry import trace

from ..core import figures
from ..stages.generation import Generate
from ..core.guard import guard
from ..stages.passthrough import record_as_consumed
from ..core.provided import Provided
from . import _gemini_grounding as grounding
from . import _provider
from ._common import call_wrappers, inside_generation, started, unwrap
from .base import RagtraceInstrumentor

_MODULE = "google.genai.models"
_PROVIDER = "gcp.gen_ai"  # gen_ai.provider.name: any Google GenAI endpoint (the Gemini API or Vertex AI)
_LABEL = "google-genai instrumentation"
ROOT_NAME = "google_genai"  # the automatic root's name (gen_ai.workflow.name)
_METHODS = ("generate_content", "generate_content_stream")


class GoogleGenAIInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("google_genai")``, or ``GoogleGenAIInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "google_genai"

    def _instrument(self, **kwargs: Any) -> None:
        provider = self.tracer_provider(kwargs)
        for method in _METHODS:
            sync, asynchronous = call_wrappers(lambda args, kwargs: _open(kwargs, provider), _returned, _LABEL)
            wrapt.wrap_function_wrapper(_MODULE, f"Models.{method}", sync)
            wrapt.wrap_function_wrapper(_MODULE, f"AsyncModels.{method}", asynchronous)

    def _uninstrument(self, **kwargs: Any) -> None:
        module = importlib.import_module(_MODULE)
        for cls in (module.Models, module.AsyncModels):
            for method in _METHODS:
                unwrap(cls, method)


def _open(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Generate | None:
    """The call's generate span, in the automatic root when it is a RAG call; None when another
    generate span already covers the call."""
    if inside_generation():
        return None
    config, contents = kwargs.get("config"), kwargs.get("contents")
    tool = grounding.rag_tool(config)
    query = grounding.query_text(contents) if tool is not None else None
    root = _provider.root_for(ROOT_NAME, query, provider) if tool is not None else None
    model = kwargs.get("model")
    stage = Generate(
        model if isinstance(model, str) else None,
        _PROVIDER,
        prompt=grounding.prompt_messages(contents, _get(config, "system_instruction")),
        temperature=_get(config, "temperature"),
        max_tokens=_get(config, "max_output_tokens"),
        tracer_provider=provider,
    )
    stage.auto_root = root
    stage.rag_tool = tool  # type: ignore[attr-defined]
    stage.query = query  # type: ignore[attr-defined]
    return started(stage)


def _get(config: Any, key: str) -> Any:
    if isinstance(config, Mapping):
        return config.get(key)
    return getattr(config, key, None) if config is not None else None


def _returned(stage: Generate, kwargs: Mapping[str, Any], result: Any) -> Any:
    """Record a response and end the span, or hand back the stream behind a recording proxy."""
    stage.detach()
    proxy = record_as_consumed(result, stage, lambda chunks, error: _streamed(stage, chunks, error))
    if proxy is not None:
        return proxy
    if getattr(stage, "rag_tool", None) is not None:
        record_grounding(stage, stage.rag_tool, stage.query, grounding.grounding(result), grounding.part_texts(result))  # type: ignore[attr-defined]
    stage.record(result)
    stage.close()
    return result


def _streamed(stage: Generate, chunks: list[Any] | None, error: BaseException | None) -> None:
    with guard("google-genai stream"):
        if getattr(stage, "rag_tool", None) is not None and chunks is not None:
            record_grounding(stage, stage.rag_tool, stage.query, grounding.stream_metadata(chunks), grounding.stream_parts(chunks))  # type: ignore[attr-defined]
        stage.stream_done(chunks or ())
        stage.close(error)


def record_grounding(stage: Generate, tool: Any, query: str | None, metadata: Any, parts: Sequence[str | None]) -> None:
    """The call's retrieve and assemble spans and its citations, before its generate span ends
    (``tool``: the request's retrieval tool; ``metadata`` and ``parts`` in the SDK's snake_case,
    as the LiteLLM integration also gives them). No grounding metadata: the model did not search
    (or the app stopped reading before it came), so no retrieval is recorded, and the figures say
    so (``no_retrieval``)."""
    if metadata is None:
        return
    found = grounding.read_grounding(metadata)
    if not found.sources:  # grounded on the web only: none of the app's sources
        return
    query = "\n".join(found.queries) or query
    store = grounding.data_source(tool) or found.store
    _provider.record_retrieval(found.sources, None, query=query, data_source=store, provider=stage._provider, root=stage.auto_root)
    _provider.record_context(found.sources, stage._provider, stage.auto_root)
    provided = grounding.citations(metadata, found, parts)
    if any(source.text is None for source in found.sources):  # its tokens are unknown: those figures would be made up
        provided = Provided(provided.cited_ids, provided.invalid, unmeasured=figures.STATUS_SOURCE_UNREADABLE, segments=provided.segments)
    stage.provided = provided
