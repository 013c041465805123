"""``client.embeddings.create`` (sync and async) is an embed span: model, dimensions, input tokens.

Wrapped with wrapt at class level (``Embeddings``/``AsyncEmbeddings``) like ``create`` of chat
completions. Inside a pipeline, or an automatic root that a search opened, the span is one of its
stages; elsewhere it is a span of its own (an embedding opens no root: it is not a retrieval).
The app gets the SDK's own ``CreateEmbeddingResponse``; ragtrace reads its first vector's length
and its usage. The input text is content, under the content policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import wrapt
from opentelemetry import trace

from ..core.guard import warn_once
from ..stages.retrieval import Embed
from ._common import call_wrappers, started, unwrap

_MODULE = "openai.resources.embeddings"
_PROVIDER = "openai"


def instrument(provider: trace.TracerProvider | None) -> None:
    sync, asynchronous = call_wrappers(lambda args, kwargs: _open(kwargs, provider), _record)
    wrapt.wrap_function_wrapper(_MODULE, "Embeddings.create", sync)
    wrapt.wrap_function_wrapper(_MODULE, "AsyncEmbeddings.create", asynchronous)


def uninstrument() -> None:
    import importlib

    module = importlib.import_module(_MODULE)
    unwrap(module.Embeddings, "create")
    unwrap(module.AsyncEmbeddings, "create")


def _open(kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Embed:
    model = kwargs.get("model")
    return started(Embed(model if isinstance(model, str) else None, _PROVIDER, tracer_provider=provider))


def _record(stage: Embed, kwargs: Mapping[str, Any], response: Any) -> Any:
    stage.detach()
    data = getattr(response, "data", None)
    if isinstance(data, list):
        first = getattr(data[0], "embedding", None) if data else None
        usage = getattr(response, "usage", None)
        given = kwargs.get("input")
        text = given if isinstance(given, str) or (isinstance(given, list) and all(isinstance(t, str) for t in given)) else None
        stage.record(
            dimensions=len(first) if isinstance(first, list) else None,
            input_tokens=getattr(usage, "prompt_tokens", None),
            text=text,
        )
    else:  # with_raw_response: an HTTP response, not read here
        warn_once("openai-raw-embeddings", "an embeddings.create call returned %s, not embeddings: not recorded", type(response).__name__)
    stage.close()
    return response
