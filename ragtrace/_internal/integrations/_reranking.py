"""What the local reranker integrations share (``sentence_transformers``, ``flashrank``): one call of a
reranker model becomes the rerank stage an app's own ``ragtrace.rerank`` would make, through
``Rerank.record``: the candidates in the order given, the results in their new order with the
model's scores, ``top_n``, the model and the query. A candidate whose text the pipeline retrieved
keeps that chunk's id (``Rerank.record`` maps texts to the pipeline's ids), so the rerank's inputs
and outputs line up with the retrieval's. Outside any pipeline a rerank joins the automatic root
a retrieval opened (a vector-database query just before), else it is a rerank span of its own.

Inside a rerank or retrieval already recorded (LlamaIndex's ``SentenceTransformerRerank``
postprocessor, a LangChain compression retriever's ``CrossEncoderReranker``, the app's own
``ragtrace.rerank`` block) the model call is that stage's work: not recorded again.

The candidates are read before the call: a reranker may reorder the app's list in place
(FlashRank sorts the passages it is given), and the app's objects are never copied or changed.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from .. import names
from ..core.guard import call_guarded
from ..stages.retrieval import Rerank
from ._common import closed_with, inside_stage

# a traced rerank in progress in this context: a reranker method that calls another one of the
# same model (CrossEncoder.rank calls predict) is part of it, not a second rerank
_reranking: ContextVar[bool] = ContextVar("ragtrace_reranking", default=False)

Open = Callable[[Any, tuple[Any, ...], dict[str, Any]], "tuple[Rerank, Any] | None"]
Record = Callable[[Rerank, Any, Any], None]


def wrapper(open_: Open, record: Record, label: str) -> Any:
    """A wrapt wrapper for a reranker method. ``open_(instance, args, kwargs)`` starts the stage
    from the call (None: not a rerank, or inside one) and reads what it needs before the call;
    ``record(stage, read, result)`` records the result (untouched) and closes the stage. ragtrace's
    own failures are logged once and the call goes on untraced."""

    def rerank(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        inside = _reranking.get() or inside_stage(names.STAGE_RETRIEVE, names.STAGE_RERANK)
        opened = None if inside else call_guarded(label, open_, instance, args, kwargs)
        if opened is None:
            return wrapped(*args, **kwargs)
        stage, read = opened
        token = _reranking.set(True)
        try:
            result = wrapped(*args, **kwargs)
        except BaseException as error:
            call_guarded(label, closed_with, stage, error)
            raise
        finally:
            _reranking.reset(token)
        call_guarded(label, _recorded, stage, record, read, result)
        return result

    return rerank


def _recorded(stage: Rerank, record: Record, read: Any, result: Any) -> None:
    stage.detach()
    try:
        record(stage, read, result)
    finally:
        stage.close()


def ranked(candidates: list[dict[str, Any]], order: list[tuple[int, Any]]) -> list[dict[str, Any]]:
    """The results in their new order: (index into ``candidates``, score) pairs, each the
    candidate with its score; an index out of range is left out."""
    return [{**candidates[index], "score": score} for index, score in order if isinstance(index, int) and 0 <= index < len(candidates)]


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None
