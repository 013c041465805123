"""Retriever results of any common shape -> one chunk record.

Retrievers return dicts, ``(doc, score)`` tuples, LangChain ``Document`` objects, LlamaIndex
``NodeWithScore`` objects or plain strings. Everything downstream (assembly, citations, figures,
attributes) works on ``Chunk`` records only, so shape handling lives here and nowhere else.
Items that can't be understood are counted, never raised on.
"""

from __future__ import annotations

import math
from math import isfinite
from itertools import islice
from operator import attrgetter, eq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .guard import warn_once
from .keyed import content_digest, warn_if_random, warning_due

IdOf = Callable[[Any], Any]
ContentOf = Callable[[Any], Any]
ScoreOf = Callable[[Any], Any]

_ID_KEYS = ("id", "chunk_id", "doc_id", "document_id", "node_id", "id_", "_id", "uuid")
_CONTENT_KEYS = ("content", "text", "page_content", "document", "chunk", "body", "page")
_SCORE_KEYS = ("score", "relevance_score", "similarity", "_score")
_DISTANCE_KEYS = ("distance", "_distance")
_METADATA_KEYS = ("metadata", "meta", "extra_info")
_TOKEN_KEYS = ("tokens", "token_count", "n_tokens")
# The id of a retrieved item whose id_of raised and that has no readable text: it can't be matched
# to a citation or a placement, but it was retrieved, so it counts in R.
STAND_IN = "ragtrace.unreadable:"


@dataclass(slots=True)
class Chunk:
    """One retrieved (or reranked, or placed) chunk.

    ``rank`` is 1-based within the retrieval that produced it. ``score`` is whatever the retriever
    returned (a distance when only a distance was given: rank order, not the score, is what the
    figures rely on), or ``None`` when absent or not a finite number. ``file_id``: the file the
    chunk belongs to, where a provider integration knows it (the file-level figures).
    """

    id: str
    rank: int
    score: float | None = None
    content: str | None = None
    metadata: Mapping[str, Any] | None = None
    tokens: int | None = None
    content_hash: str | None = field(default=None, repr=False)
    file_id: str | None = None


@dataclass(slots=True)
class Normalized:
    """The result of normalising a batch of retriever results."""

    chunks: list[Chunk]
    unreadable: int = 0
    omitted: int = 0  # items beyond ``normalize``'s limit: counted, not read


@dataclass(frozen=True, slots=True)
class Accessors:
    """User overrides for shapes ragtrace doesn't know (``id_of=``, ``content_of=``, ``score_of=``)."""

    id_of: IdOf | None = None
    content_of: ContentOf | None = None
    score_of: ScoreOf | None = None


NO_ACCESSORS = Accessors()


def make_accessors(id_of: IdOf | None = None, content_of: ContentOf | None = None, score_of: ScoreOf | None = None) -> Accessors:
    """The user's overrides; the shared empty instance when there are none (``to_chunk``'s fast
    path for plain dicts checks for it by identity)."""
    if id_of is None and content_of is None and score_of is None:
        return NO_ACCESSORS
    return Accessors(id_of, content_of, score_of)


def placeable(chunk: Chunk | None, failed: list[str], *, rendered: bool = True) -> Chunk | None:
    """``chunk`` if it can be placed in a prompt: not when its id could not be read (a stand-in id
    matches nothing), nor, when ragtrace renders it, when its content_of raised (nothing to show)."""
    if chunk is None or chunk.id.startswith(STAND_IN) or (rendered and "content_of" in failed):
        return None
    return chunk


def content_hash(text: str) -> str:
    """Short keyed digest of chunk text: the id of id-less chunks and the duplicate key (``keyed``)."""
    return content_digest(text)


def digest_of(text: str, digests: dict[str, str] | None) -> str:
    """``content_hash(text)``, computed once per pipeline: the same text is retrieved, reranked and
    placed, and each stage reads it again. ``digests`` is the pipeline's memo (None: no memo)."""
    if digests is None:
        return content_digest(text)
    found = digests.get(text)
    if found is None:
        found = digests[text] = content_digest(text)
    return found


def warn_if_digest_ids(pairs: Iterable[tuple[str, str | None]]) -> None:
    """Called where chunk ids are exported, with each one's (id, content hash): an id-less chunk's
    id is its keyed digest, which under the random key differs between processes (``keyed``)."""
    if warning_due() and any(chunk_id == digest for chunk_id, digest in pairs):
        warn_if_random(_DIGEST_IDS)


def warn_if_digest_chunks(chunks: Sequence[Chunk]) -> None:
    """``warn_if_digest_ids`` for chunks, compared without a Python call per chunk (the warning is
    due until given: with no hash key set, every retrieval and rerank checks its chunks)."""
    if warning_due() and any(map(eq, map(_ID, chunks), map(_HASH, chunks))):
        warn_if_random(_DIGEST_IDS)


_DIGEST_IDS = "ids of id-less chunks differ between processes"
_ID, _HASH = attrgetter("id"), attrgetter("content_hash")


def normalize(
    items: Any, accessors: Accessors = NO_ACCESSORS, *, start_rank: int = 1, limit: int | None = None, digests: dict[str, str] | None = None
) -> Normalized:
    """Normalise an iterable of results into ranked chunks; non-iterables count as one item.
    With ``limit``, only the first ``limit`` items are read; the rest are counted (``omitted``).
    ``digests``: the pipeline's text -> content digest memo (``digest_of``)."""
    if items is None:
        return Normalized([])
    listed = type(items) is list or type(items) is tuple
    if not listed and (isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Iterable)):
        items, listed = (items,), True
    failures: list[BaseException] = []
    omitted = 0
    # lists and tuples can't raise midway: only other iterables pay for guarded iteration
    if listed:
        if limit is not None and len(items) > limit:
            omitted, items = len(items) - limit, items[:limit]
        source: Iterable[Any] = items
        rest: Iterator[Any] | None = None
    else:
        rest = _until_failure(items, failures)
        source = rest if limit is None else islice(rest, limit)
    chunks: list[Chunk] = []
    unreadable = 0
    failed: list[str] = []
    plain = accessors is NO_ACCESSORS
    for item in source:
        # the common shape, {"id": str, "content": str(, "score": ...)}, read here without a call
        # per item: the same chunk as to_chunk -> _plain_dict_chunk makes of it
        if plain and type(item) is dict and (len(item) == 2 or (len(item) == 3 and "score" in item)):
            chunk_id, text = item.get("id"), item.get("content")
            if type(chunk_id) is str and chunk_id and type(text) is str:
                score = item.get("score")
                digest = digests.get(text) if digests is not None else None
                chunks.append(
                    Chunk(
                        chunk_id,
                        start_rank + len(chunks),
                        score if type(score) is float and isfinite(score) else None if score is None else _finite(score),
                        text,
                        None,
                        None,
                        digest_of(text, digests) if digest is None else digest,
                    )
                )
                continue
        before = len(failed)
        chunk = to_chunk(item, start_rank + len(chunks), accessors, failed, digests=digests)
        if chunk is None:
            unreadable += 1
        else:
            chunks.append(chunk)
            if len(failed) > before:  # kept (it counts in R) but not fully read
                unreadable += 1
    if limit is not None and rest is not None:
        omitted = sum(1 for _ in rest)
    return Normalized(chunks, unreadable + len(failures), omitted)


def _until_failure(items: Iterable[Any], failures: list[BaseException]) -> Iterator[Any]:
    """The caller's items until its iterator raises; the failure is warned about and kept."""
    iterator = iter(items)
    while True:
        try:
            item = next(iterator)
        except StopIteration:
            return
        except Exception as error:  # noqa: BLE001 - the caller's iterable failed midway
            warn_once("iterable", "a result iterable raised %s midway; kept the items read before it", type(error).__name__)
            failures.append(error)
            return
        yield item


def to_chunk(
    item: Any, rank: int, accessors: Accessors = NO_ACCESSORS, failed: list[str] | None = None, *, hashed: bool = True, digests: dict[str, str] | None = None
) -> Chunk | None:
    """One result -> a ``Chunk``, or ``None`` when it has neither an id nor text.

    A user callback that raises leaves only its own field unknown, and its role is appended to
    ``failed``: the item is still a retrieved item and counts in the figures' denominators. When
    ``id_of`` raised, the id is the content digest (what id-less chunks get, so the same item
    placed later still matches) or, with no text either, a positional stand-in
    (``STAND_IN`` + rank; the retrieve stage makes it unique per retrieval).
    ``hashed=False`` (tracing off, where nothing reads it) leaves ``content_hash`` out of a chunk
    that has an id of its own. ``digests``: the pipeline's memo of content digests (``digest_of``).
    """
    if isinstance(item, Chunk):
        return item
    score: Any = None
    # (doc, score) tuples and LlamaIndex NodeWithScore(node, score): the pair's score is kept, and
    # the user's callbacks receive the document (the tuple's doc, the NodeWithScore's node)
    if isinstance(item, tuple) and len(item) == 2 and _is_number(item[1]):
        item, score = item
    elif type(item) is not dict and not isinstance(item, Mapping) and hasattr(item, "node") and hasattr(item, "score"):
        score = getattr(item, "score", None)
        item = item.node

    if type(item) is dict and accessors is NO_ACCESSORS:
        raw_id, raw_content = item.get("id"), item.get("content")
        if type(raw_id) is str and raw_id and type(raw_content) is str:
            return _plain_dict_chunk(item, raw_id, raw_content, rank, score, digest_of(raw_content, digests) if hashed else None)
    raw_id = _users(accessors.id_of, "id_of", item) if accessors.id_of else _field(item, _ID_KEYS)
    raw_content = _users(accessors.content_of, "content_of", item) if accessors.content_of else _content(item)
    if accessors.score_of:
        score = _users(accessors.score_of, "score_of", item)
    elif score is None:
        score = _field(item, _SCORE_KEYS)
        if score is None:
            score = _field(item, _DISTANCE_KEYS)
    metadata = _metadata(item)
    if raw_id is None and metadata is not None:
        raw_id = _field(metadata, _ID_KEYS)

    id_failed = raw_id is _FAILED
    if id_failed or raw_content is _FAILED or score is _FAILED:
        if failed is not None:
            failed.extend(role for role, value in (("id_of", raw_id), ("content_of", raw_content), ("score_of", score)) if value is _FAILED)
        raw_id, raw_content = (None if id_failed else raw_id), (None if raw_content is _FAILED else raw_content)
        score = None if score is _FAILED else score
    text = _text(raw_content)
    chunk_id = _text(raw_id)
    digest = digest_of(text, digests) if text is not None and (hashed or not chunk_id) else None
    if not chunk_id:
        if digest is not None:
            chunk_id = digest
        elif id_failed:
            chunk_id = f"{STAND_IN}{rank}"
        else:
            return None
    tokens = _field(item, _TOKEN_KEYS)
    return Chunk(
        id=chunk_id,
        rank=rank,
        score=_finite(score),
        content=text,
        metadata=metadata,
        tokens=_token_count(tokens),
        content_hash=digest,
    )


_FAILED: Any = object()


def _users(callback: Callable[[Any], Any], role: str, item: Any) -> Any:
    """The user's accessor on one item; ``_FAILED`` when it raised, reported once per callable as
    the user's error (by name, with the exception type only: its message may hold content)."""
    try:
        return callback(item)
    except Exception as error:  # noqa: BLE001 - the user's code fails per item, never the batch
        name = getattr(callback, "__qualname__", type(callback).__qualname__)
        warn_once(
            f"callback:{role}:{id(callback)}",
            "your %s callback %s raised %s on a %s item; that item is counted unreadable, and still counts as retrieved (further errors from it are not logged)",
            role,
            name,
            type(error).__name__,
            type(item).__name__,
        )
        return _FAILED


def _plain_dict_chunk(item: dict[str, Any], chunk_id: str, text: str, rank: int, score: Any, digest: str | None) -> Chunk:
    """The common shape, ``{"id": str, "content": str, ...}``, read without the generic checks
    (same result: these keys come first in the alias lists)."""
    if len(item) == 2 or (len(item) == 3 and "score" in item):  # nothing but id, content (, score)
        if score is None:
            score = item.get("score")
        return Chunk(chunk_id, rank, _finite(score), text, None, None, digest)
    if score is None:
        score = _first(item, _SCORE_KEYS)
        if score is None:
            score = _first(item, _DISTANCE_KEYS)
    metadata = _first(item, _METADATA_KEYS)
    return Chunk(
        chunk_id,
        rank,
        _finite(score),
        text,
        metadata if isinstance(metadata, Mapping) else None,
        _token_count(_first(item, _TOKEN_KEYS)),
        digest,
    )


def _token_count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63 else None


def _first(item: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    for key in keys:
        value = item.get(key)
        if value is not None:
            return value
    return None


def _field(item: Any, keys: tuple[str, ...]) -> Any:
    if isinstance(item, Mapping):
        return _first(item, keys)
    if isinstance(item, (str, bytes, int, float)):
        return None
    for key in keys:
        value = getattr(item, key, None)
        if value is not None and not callable(value):
            return value
    return None


def _content(item: Any) -> Any:
    if isinstance(item, (str, bytes)):
        return item
    value = _field(item, _CONTENT_KEYS)
    if value is None and not isinstance(item, Mapping):
        get_content = getattr(item, "get_content", None)  # LlamaIndex nodes
        if callable(get_content):
            value = get_content()
    return value


def _metadata(item: Any) -> Mapping[str, Any] | None:
    value = _field(item, _METADATA_KEYS)
    return value if isinstance(value, Mapping) else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, (Mapping, list, tuple, set)):
        return None  # structures are not text; never guess via repr()
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - an object whose __str__ raises has no text we can use
        return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any) -> float | None:
    if type(value) is float:
        return value if math.isfinite(value) else None
    try:
        value = float(value)  # also numpy floats, Decimals, numeric strings
    except Exception:  # noqa: BLE001 - not a number, an int beyond float range, a raising __float__
        return None
    return value if math.isfinite(value) else None
