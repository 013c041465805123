"""What the vector-database client integrations share (``qdrant``, ``chroma``): one query call of
the client becomes the retrieve stage(s) an app's own ``ragtrace.retrieve`` would make, with the
database's ids, its scores (and which kind of score they are), ``top_k`` and the collection as
``gen_ai.data_source.id``.

Which pipeline. Inside a ``rag_pipeline`` the stages are its stages. Outside any, the query opens
the automatic root (``auto_root``), as the OpenAI SDK's ``vector_stores.search`` does: the rerank
and the model call that answer from it join that root, and the answer ends it. A query nothing
answers (a search service, a lone lookup) is a root of its own, ended as abandoned when its
owning call is over (``rag.root.abandoned``), with its retrieve span and the retrieval's figures.

The root is opened at the call, in the caller's context, also for an async client: queries
gathered as tasks join one root. The stages' spans start when the query is sent (awaited).

Inside a retrieval already recorded (a LangChain or LlamaIndex retriever over the same client,
the app's own ``ragtrace.retrieve`` block or ``@ragtrace.retriever``) a query is that retrieval's
work: not recorded again.

Score kinds. A similarity ranks best first with the highest score (cosine, dot product), a
distance with the lowest (Euclidean). ``rag.retrieval.score_kind`` says which the recorded scores
are, so a dashboard never reads distances as similarities; each integration says how it knows.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from opentelemetry import trace

from .. import names
from ..boundaries import auto_root
from ..core.guard import call_guarded
from ..stages.retrieval import Retrieve
from ._common import closed_with, inside_stage

SIMILARITY = "similarity"
DISTANCE = "distance"
UNKNOWN = "unknown"
CONTENT_KEYS = ("text", "page_content", "content", "document")  # where payloads commonly hold a chunk's text


@dataclass(frozen=True)
class Query:
    """One query of a call, as the call's arguments state it."""

    text: str | None
    data_source: str | None
    top_k: int | None


@dataclass
class Found:
    """One query's results: items in rank order (``{"id", "score", "content"}``) and the score kind."""

    items: list[dict[str, Any]]
    score_kind: str | None = None


ReadCall = Callable[[Any, tuple[Any, ...], dict[str, Any]], "list[Query] | None"]
ReadResult = Callable[[Any, Any, int], "list[Found]"]


def wrappers(root_name: str, read_call: ReadCall, read_result: ReadResult, provider: trace.TracerProvider | None, label: str) -> tuple[Any, Any]:
    """wrapt wrappers (sync, async) for a client's query method. ``read_call(instance, args,
    kwargs)`` names the call's queries (None: not traced), ``read_result(instance, result, count)``
    reads each query's results from what the client returned, which reaches the app untouched.
    ragtrace's own failures are logged once and the call goes on untraced."""

    def sync(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        stages = call_guarded(label, _new_stages, root_name, read_call, instance, args, kwargs, provider)
        if not stages:
            return wrapped(*args, **kwargs)
        call_guarded(label, _open, stages)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            call_guarded(label, _failed, stages, error)
            raise
        call_guarded(label, _record, stages, read_result, instance, result)
        return result

    def asynchronous(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        coroutine = wrapped(*args, **kwargs)  # nothing is sent until it is awaited
        if not inspect.isawaitable(coroutine):  # not the coroutine this wrapper was made for: untouched
            return coroutine
        stages = call_guarded(label, _new_stages, root_name, read_call, instance, args, kwargs, provider)
        return _awaited(coroutine, stages, read_result, instance, label) if stages else coroutine

    return sync, asynchronous


async def _awaited(coroutine: Any, stages: list[Retrieve], read_result: ReadResult, instance: Any, label: str) -> Any:
    call_guarded(label, _open, stages)
    try:
        result = await coroutine
    except BaseException as error:
        call_guarded(label, _failed, stages, error)
        raise
    call_guarded(label, _record, stages, read_result, instance, result)
    return result


def _new_stages(
    root_name: str, read_call: ReadCall, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any], provider: trace.TracerProvider | None
) -> list[Retrieve] | None:
    """The call's retrieve stages (not opened yet), in the automatic root when outside any pipeline;
    None inside a retrieval already being recorded (a framework's retriever or the app's own
    ``ragtrace.retrieve`` around the query), whose results these are."""
    if inside_stage(names.STAGE_RETRIEVE):
        return None
    queries = read_call(instance, args, kwargs)
    if not queries:
        return None
    root = auto_root.for_retrieval(root_name, queries[0].text, provider)
    stages = []
    for query in queries:
        stage = Retrieve(query.text, data_source=query.data_source, top_k=query.top_k, tracer_provider=provider)
        stage.auto_root = root  # preset: an async query may be awaited in another task's context
        stages.append(stage)
    return stages


def _open(stages: list[Retrieve]) -> None:
    """Start the spans; one query's span is current while the client works (its HTTP spans nest
    under it), several queries' spans are siblings, none current."""
    for stage in stages:
        stage.open()
    if len(stages) == 1:
        stages[0].attach()


def _failed(stages: list[Retrieve], error: BaseException) -> None:
    for stage in stages:
        closed_with(stage, error)


def _record(stages: list[Retrieve], read_result: ReadResult, instance: Any, result: Any) -> None:
    for stage in stages:
        stage.detach()
    found = call_guarded("vector search results", read_result, instance, result, len(stages)) or []
    for index, stage in enumerate(stages):
        if index < len(found):
            stage.record(found[index].items)
            if stage.attrs is not None and found[index].score_kind is not None and found[index].items:
                stage.attrs.set(names.RAG_RETRIEVAL_SCORE_KIND, found[index].score_kind)
        stage.close()


def kind_by_order(scores: Sequence[Any]) -> str | None:
    """The kind of scores a database returned best first: rising scores are distances, falling
    ones similarities; equal or single scores can't tell (``unknown``); no scores, None."""
    numbers = [float(s) for s in scores if isinstance(s, (int, float))]
    if not numbers:
        return None
    rising = any(b > a for a, b in pairwise(numbers))
    falling = any(b < a for a, b in pairwise(numbers))
    if rising != falling:
        return DISTANCE if rising else SIMILARITY
    return UNKNOWN


def payload_text(payload: Any) -> str | None:
    """A chunk's text in a payload or metadata mapping, under the keys apps and frameworks use."""
    if not isinstance(payload, dict):
        return None
    for key in CONTENT_KEYS:
        value = payload.get(key)
        if isinstance(value, str):
            return value
    return None


def item(chunk_id: Any, score: Any, text: str | None) -> dict[str, Any]:
    """One result as the common chunk shape (no ``content`` key when the text is unknown)."""
    found = {"id": str(chunk_id), "score": score}
    if text is not None:
        found["content"] = text
    return found
