"""sentence-transformers' ``CrossEncoder`` used as a reranker without a framework: ``rank`` and
``predict`` are rerank stages (``_reranking``).

- ``rank(query, documents, top_k=...)``: the documents are the candidates in the order given, the
  results (``corpus_id``, ``score``) the new order with the model's scores, ``top_k`` as
  ``rag.rerank.top_n``. ``rank`` calls ``predict`` itself: that call is part of the rank, not a
  second stage.
- ``predict(pairs)`` is a rerank when the pairs share one query, ``[(query, doc), ...]``, the way
  apps rerank with it: the documents are the candidates, and the results are all of them ordered
  by the model's score, highest first, the order the app then sorts them in (``predict`` drops none;
  the app's own cut shows in the assembly). Pairs of different first texts (sentence similarity),
  a single pair, and a model with several labels (class scores, not relevance) are not reranks:
  not traced.
- The model is its name or path (``config._name_or_path``), the provider ``sentence_transformers``.

The class is found by its path, ``sentence_transformers.cross_encoder.CrossEncoder`` (where
sentence-transformers 2.x to 5.x keep it), and its methods are wrapped with wrapt at class level
when the app imports it: ``instrument()`` never imports sentence-transformers (and PyTorch, seconds)
for the app, it registers a post-import hook. sentence-transformers needs PyTorch, far too big for this
project's tests: they run a stand-in package of the same path and contract that loads no weights
(docs/integrations.md).
"""

from __future__ import annotations

import inspect
import sys
from typing import Any

import wrapt
from opentelemetry import trace

from ..core.guard import call_guarded, warn_once
from ..stages.retrieval import Rerank
from . import _reranking
from ._common import started, unwrap
from .base import RagtraceInstrumentor

_MODULE = "sentence_transformers.cross_encoder"
_CLASS = "CrossEncoder"
_METHODS = ("rank", "predict")
_PROVIDER = "sentence_transformers"  # gen_ai.provider.name: a local model
_LABEL = "sentence-transformers instrumentation"


class SentenceTransformersInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("sentence_transformers")``, or ``SentenceTransformersInstrumentor().instrument(...)``."""

    library_name = "sentence_transformers"

    def _instrument(self, **kwargs: Any) -> None:
        global _switch
        switch = _switch = _Switch(self.tracer_provider(kwargs))
        if _MODULE in sys.modules:
            _wrap(switch)
        else:  # wrapped when the app imports it (a hook left pending by uninstrument wraps nothing)
            wrapt.register_post_import_hook(lambda module: call_guarded(_LABEL, _wrap, switch), _MODULE)

    def _uninstrument(self, **kwargs: Any) -> None:
        global _switch
        switch, _switch = _switch, None
        if switch is not None:
            switch.on = False
        module = sys.modules.get(_MODULE)
        if module is not None:
            for name in _METHODS:
                unwrap(getattr(module, _CLASS), name)


class _Switch:
    """One ``instrument()``: its tracer provider; off once uninstrumented."""

    def __init__(self, provider: trace.TracerProvider | None) -> None:
        self.provider, self.on = provider, True


_switch: _Switch | None = None


def _wrap(switch: _Switch) -> None:
    if not switch.on:
        return
    cls, provider = getattr(sys.modules[_MODULE], _CLASS), switch.provider
    rank, predict = (inspect.signature(vars(cls)[name]) for name in _METHODS)
    wrapt.wrap_function_wrapper(cls, "rank", _reranking.wrapper(lambda i, a, k: _open_rank(rank, i, a, k, provider), _record_rank, _LABEL))
    wrapt.wrap_function_wrapper(cls, "predict", _reranking.wrapper(lambda i, a, k: _open_predict(predict, i, a, k, provider), _record_predict, _LABEL))


def _arguments(signature: inspect.Signature, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any] | None:
    try:
        return signature.bind_partial(instance, *args, **kwargs).arguments
    except TypeError:  # the model raises its own error for the call
        return None


def _stage(instance: Any, query: Any, top_n: Any, provider: trace.TracerProvider | None) -> Rerank:
    config = getattr(instance, "config", None)
    model = getattr(config, "_name_or_path", None)
    return started(
        Rerank(
            model if isinstance(model, str) else None,
            provider=_PROVIDER,
            top_n=top_n if isinstance(top_n, int) and not isinstance(top_n, bool) else None,
            query=_reranking.text_or_none(query),
            tracer_provider=provider,
        )
    )


# --- rank ---------------------------------------------------------------------------------------
def _open_rank(signature: inspect.Signature, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], provider: trace.TracerProvider | None) -> tuple[Rerank, Any] | None:
    given = _arguments(signature, instance, args, kwargs)
    documents = given.get("documents") if given is not None else None
    if not isinstance(documents, (list, tuple)):
        return None
    candidates = [{"content": _reranking.text_or_none(document)} for document in documents]
    return _stage(instance, given.get("query"), given.get("top_k"), provider), candidates  # type: ignore[union-attr]


def _record_rank(stage: Rerank, candidates: list[dict[str, Any]], results: Any) -> None:
    if not isinstance(results, list):
        return
    order = [(result.get("corpus_id"), result.get("score")) for result in results if isinstance(result, dict)]
    stage.record(_reranking.ranked(candidates, order), candidates=candidates)


# --- predict ------------------------------------------------------------------------------------
def _open_predict(signature: inspect.Signature, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], provider: trace.TracerProvider | None) -> tuple[Rerank, Any] | None:
    """A rerank only for pairs that share their query, from a one-label model (see the module)."""
    given = _arguments(signature, instance, args, kwargs)
    pairs = given.get("inputs", given.get("sentences")) if given is not None else None  # "sentences" before 4.0
    if not isinstance(pairs, list) or not pairs or not all(isinstance(p, (list, tuple)) and len(p) == 2 for p in pairs):
        return None
    if len({_reranking.text_or_none(p[0]) for p in pairs}) != 1 or _reranking.text_or_none(pairs[0][0]) is None:
        return None
    labels = getattr(instance, "num_labels", None)
    if isinstance(labels, int) and labels > 1:
        return None
    candidates = [{"content": _reranking.text_or_none(p[1])} for p in pairs]
    return _stage(instance, pairs[0][0], None, provider), candidates


def _record_predict(stage: Rerank, candidates: list[dict[str, Any]], scores: Any) -> None:
    try:
        values = [float(score) for score in scores]
    except (TypeError, ValueError):  # not one number per pair
        values = []
    if len(values) != len(candidates):
        warn_once("cross-encoder-scores", "a CrossEncoder.predict call returned no score per pair: its rerank order is not recorded")
        return
    order = sorted(enumerate(values), key=lambda pair: -pair[1])
    stage.record(_reranking.ranked(candidates, order), candidates=candidates)
