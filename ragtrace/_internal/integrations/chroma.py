"""Chroma used without a framework: ``Collection.query`` (and ``AsyncCollection.query``, the async
HTTP client's), one retrieve stage per query of the call (``_vector_search``).

What a query records:
- ids: Chroma's record ids, in the order Chroma returned them (nearest first);
- scores: Chroma returns distances, lower is better, in the collection's space. Where the space
  has an exact similarity they are converted: ``cosine`` (cosine distance ``1 - cos``) and ``ip``
  (``1 - a.b``) become ``1 - distance``, the cosine similarity and the inner product, marked
  ``rag.retrieval.score_kind = "similarity"``. ``l2`` (squared Euclidean, Chroma's default), or a
  space the collection doesn't state, has none: those stay distances, marked ``"distance"``. The
  space is read from the collection the client already holds (its configuration, or the legacy
  ``hnsw:space`` metadata), never asked of the server;
- ``top_k``: the call's ``n_results`` (10, Chroma's default, when not given);
- the collection's name as ``gen_ai.data_source.id``;
- the chunk's text from ``documents`` (when ``include`` has them: by default it does), content
  recorded under the content policy only; the query text from ``query_texts``.

A call with several queries (``query_texts=[a, b]``) is one retrieve span per query, side by side,
each with its results. Chroma has no hooks, so the methods are wrapped with wrapt at class level.
"""

from __future__ import annotations

import importlib
import inspect
import numbers
from typing import Any

import wrapt

from . import _vector_search
from ._common import unwrap
from ._vector_search import DISTANCE, SIMILARITY, Found, Query
from .base import RagtraceInstrumentor

_CLASSES = (("chromadb.api.models.Collection", "Collection"), ("chromadb.api.models.AsyncCollection", "AsyncCollection"))
ROOT_NAME = "chroma"  # the automatic root's name (gen_ai.workflow.name)
_LABEL = "chroma instrumentation"
_SIMILAR = frozenset({"cosine", "ip"})  # the spaces whose distance is 1 - a similarity
_QUERIES = ("query_texts", "query_embeddings", "query_images", "query_uris")


class ChromaInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("chroma")``, or ``ChromaInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "chroma"

    def _instrument(self, **kwargs: Any) -> None:
        provider = self.tracer_provider(kwargs)
        for (module, name), is_async in zip(_CLASSES, (False, True)):
            cls = getattr(importlib.import_module(module), name)
            sync, asynchronous = _vector_search.wrappers(ROOT_NAME, _reader(inspect.signature(cls.query)), _results, provider, _LABEL)
            wrapt.wrap_function_wrapper(cls, "query", asynchronous if is_async else sync)

    def _uninstrument(self, **kwargs: Any) -> None:
        for module, name in _CLASSES:
            unwrap(getattr(importlib.import_module(module), name), "query")


def _reader(signature: inspect.Signature) -> Any:
    default = signature.parameters.get("n_results")
    default_n = default.default if default is not None and isinstance(default.default, int) else None

    def read(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Query] | None:
        try:
            given = signature.bind_partial(instance, *args, **kwargs).arguments
        except TypeError:  # Chroma raises its own error for the call
            return None
        count = next((n for n in (_count(given.get(key)) for key in _QUERIES) if n is not None), None)
        if not count:
            return None
        texts = given.get("query_texts")
        texts = [texts] if isinstance(texts, str) else texts if isinstance(texts, (list, tuple)) else None
        n = given.get("n_results", default_n)
        name = getattr(instance, "name", None)
        return [
            Query(
                texts[i] if texts is not None and i < len(texts) and isinstance(texts[i], str) else None,
                name if isinstance(name, str) else None,
                n if isinstance(n, int) and not isinstance(n, bool) else None,
            )
            for i in range(count)
        ]

    return read


def _count(value: Any) -> int | None:
    """How many queries one of ``query``'s arguments holds (Chroma takes one or many)."""
    if value is None:
        return None
    if isinstance(value, str):
        return 1
    shape = getattr(value, "shape", None)
    if shape is not None:  # a numpy embedding (1-d) or batch (2-d)
        return 1 if len(shape) <= 1 else int(shape[0])
    if isinstance(value, (list, tuple)):
        return 1 if value and isinstance(value[0], numbers.Number) else len(value)
    return None


def _results(instance: Any, result: Any, count: int) -> list[Found]:
    """Each query's records, nearest first: ids, scores (converted where exact) and documents."""
    ids = result.get("ids") if isinstance(result, dict) else None
    if not isinstance(ids, list):
        return []
    distances, documents = result.get("distances"), result.get("documents")
    similar = _space(instance) in _SIMILAR
    found = []
    for i, row in enumerate(ids[:count]):
        scores = _row(distances, i, len(row))
        texts = _row(documents, i, len(row))
        converted = [1.0 - float(d) if similar and isinstance(d, numbers.Number) else d for d in scores]
        items = [_vector_search.item(chunk_id, score, text if isinstance(text, str) else None) for chunk_id, score, text in zip(row, converted, texts)]
        known = any(isinstance(d, numbers.Number) for d in scores)
        found.append(Found(items, (SIMILARITY if similar else DISTANCE) if known else None))
    return found


def _row(rows: Any, index: int, length: int) -> list[Any]:
    """Query ``index``'s list in one of the result's per-query lists (Nones when not included)."""
    if isinstance(rows, list) and index < len(rows) and rows[index] is not None and len(rows[index]) == length:
        return list(rows[index])
    return [None] * length


def _space(collection: Any) -> str | None:
    """The collection's distance space as the client holds it: its configuration (``hnsw`` or
    ``spann``), else the legacy ``hnsw:space`` metadata; None when neither says."""
    configuration = getattr(collection, "configuration_json", None)
    for key in ("hnsw", "spann"):
        section = configuration.get(key) if isinstance(configuration, dict) else None
        space = section.get("space") if isinstance(section, dict) else None
        if isinstance(space, str):
            return space
    metadata = getattr(collection, "metadata", None)
    space = metadata.get("hnsw:space") if isinstance(metadata, dict) else None
    return space if isinstance(space, str) else None
