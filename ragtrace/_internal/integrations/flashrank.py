"""FlashRank's ``Ranker.rerank(RerankRequest(query, passages))`` as a rerank stage (``_reranking``).

The passages (``{"id", "text", "meta"}``) are the candidates in the order given, read before the
call: FlashRank sorts the app's list in place and adds each passage's ``score`` to it. The result
(that same list, best first) is the new order with the model's scores; a passage's ``id`` is its
chunk id (an id-less one gets the keyed digest of its text, which is the id the pipeline's
retrieval gave the same text). A listwise model (an LLM ranking them) returns the passages in
its order with no score: recorded without scores. FlashRank returns every passage: no ``top_n``.
The model is its name (the model directory's name), the provider ``flashrank``.

``Ranker.rerank`` is wrapped with wrapt at class level (rankers made before ``instrument()`` are
covered). The real models download from a hub at ``Ranker()``: the tests run the real ``rerank``
on a ``Ranker`` subclass that loads no weights (docs/integrations.md).
"""

from __future__ import annotations

import importlib
from typing import Any

import wrapt
from opentelemetry import trace

from ..core.outputs import get
from ..stages.retrieval import Rerank
from . import _reranking
from ._common import started, unwrap
from .base import RagtraceInstrumentor

_MODULE = "flashrank.Ranker"
_PROVIDER = "flashrank"  # gen_ai.provider.name: a local model
_LABEL = "flashrank instrumentation"


class FlashRankInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("flashrank")``, or ``FlashRankInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "flashrank"

    def _instrument(self, **kwargs: Any) -> None:
        provider = self.tracer_provider(kwargs)
        wrapt.wrap_function_wrapper(_MODULE, "Ranker.rerank", _reranking.wrapper(lambda i, a, k: _open(i, a, k, provider), _record, _LABEL))

    def _uninstrument(self, **kwargs: Any) -> None:
        unwrap(importlib.import_module(_MODULE).Ranker, "rerank")


def _open(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], provider: trace.TracerProvider | None) -> tuple[Rerank, Any] | None:
    request = args[0] if args else kwargs.get("request")
    passages = get(request, "passages")
    if not isinstance(passages, list):
        return None
    candidates = [{"id": get(p, "id"), "content": _reranking.text_or_none(get(p, "text"))} for p in passages]
    model = getattr(getattr(instance, "model_dir", None), "name", None)
    stage = Rerank(
        model if isinstance(model, str) and model else None,
        provider=_PROVIDER,
        query=_reranking.text_or_none(get(request, "query")),
        tracer_provider=provider,
    )
    return started(stage), candidates


def _record(stage: Rerank, candidates: list[dict[str, Any]], results: Any) -> None:
    """The returned passages, best first, each by its id (else its text's digest) and score."""
    if not isinstance(results, list):
        return
    stage.record([{"id": get(r, "id"), "content": _reranking.text_or_none(get(r, "text")), "score": get(r, "score")} for r in results], candidates=candidates)
