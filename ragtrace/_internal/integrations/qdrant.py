"""The Qdrant client used without a framework: ``QdrantClient.query_points`` and, where the installed
client still has it (qdrant-client before 1.16), ``search``, and the same methods of
``AsyncQdrantClient``, each a retrieve stage (``_vector_search``).

What a query records:
- ids: each point's id (an integer or a UUID, as text), Qdrant's own stable id for the chunk;
- scores: each point's ``score`` as Qdrant returns it, best first. For a Cosine or Dot collection
  that is a similarity, for Euclid or Manhattan a distance (lower is better). The client doesn't
  say which without asking the server about the collection, a request the app didn't make, so
  the kind is read from the order of the scores Qdrant returned best first: rising scores are
  distances, falling ones similarities, and a single score or equal ones leave it ``unknown``
  (``rag.retrieval.score_kind``);
- ``top_k``: the call's ``limit`` (the client's default when not given);
- the collection as ``gen_ai.data_source.id``;
- the chunk's text, from the point's payload under ``text``, ``page_content`` (LangChain's
  Qdrant store), ``content`` or ``document``: content, recorded under the content policy only;
  without it (``with_payload=False``, another layout) the ids and scores are still exact;
- the query text when the query is one (a ``models.Document``, whose text Qdrant embeds);
  a vector is no text, and is never recorded.

Qdrant has no hooks, so the client classes' methods are wrapped with wrapt at class level (clients
made before ``instrument()`` are covered). ``query_batch_points`` is not traced.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any

import wrapt

from ..core.outputs import get
from . import _vector_search
from ._common import unwrap
from ._vector_search import Found, Query
from .base import RagtraceInstrumentor

_CLASSES = (("qdrant_client.qdrant_client", "QdrantClient"), ("qdrant_client.async_qdrant_client", "AsyncQdrantClient"))
_METHODS = ("query_points", "search")
ROOT_NAME = "qdrant"  # the automatic root's name (gen_ai.workflow.name)
_LABEL = "qdrant instrumentation"


class QdrantInstrumentor(RagtraceInstrumentor):
    """``ragtrace.instrument("qdrant")``, or ``QdrantInstrumentor().instrument(tracer_provider=...)``."""

    library_name = "qdrant"

    def _instrument(self, **kwargs: Any) -> None:
        provider = self.tracer_provider(kwargs)
        for (module, name), is_async in zip(_CLASSES, (False, True)):
            cls = getattr(importlib.import_module(module), name)
            for method in _METHODS:
                found = vars(cls).get(method)
                if found is None:  # search: gone from qdrant-client 1.16
                    continue
                read = _reader(inspect.signature(found))
                sync, asynchronous = _vector_search.wrappers(ROOT_NAME, read, _results, provider, _LABEL)
                wrapt.wrap_function_wrapper(cls, method, asynchronous if is_async else sync)

    def _uninstrument(self, **kwargs: Any) -> None:
        for module, name in _CLASSES:
            cls = getattr(importlib.import_module(module), name)
            for method in _METHODS:
                unwrap(cls, method)


def _reader(signature: inspect.Signature) -> Any:
    """Reads a call's one query from its arguments, bound as the installed client's method
    binds them (the defaults too: ``limit`` is 10 unless given)."""
    default = signature.parameters.get("limit")
    default_limit = default.default if default is not None and isinstance(default.default, int) else None

    def read(instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> list[Query] | None:
        try:
            given = signature.bind_partial(instance, *args, **kwargs).arguments
        except TypeError:  # the client raises its own error for the call
            return None
        collection, limit = given.get("collection_name"), given.get("limit", default_limit)
        query, text = given.get("query"), None
        if query is not None and not isinstance(query, (str, int, list, tuple, Mapping)):  # a model, not a vector or an id
            text = get(query, "text") or get(get(query, "nearest"), "text")  # Document, NearestQuery(nearest=Document)
        return [
            Query(
                text if isinstance(text, str) else None,
                collection if isinstance(collection, str) else None,
                limit if isinstance(limit, int) and not isinstance(limit, bool) else None,
            )
        ]

    return read


def _results(instance: Any, result: Any, count: int) -> list[Found]:
    """The points of a ``QueryResponse`` (``query_points``) or the list ``search`` returns."""
    points = getattr(result, "points", result)
    if not isinstance(points, list):
        return []
    scores = [getattr(point, "score", None) for point in points]
    items = [_vector_search.item(getattr(point, "id", None), score, _vector_search.payload_text(getattr(point, "payload", None))) for point, score in zip(points, scores)]
    return [Found(items, _vector_search.kind_by_order(scores))]
