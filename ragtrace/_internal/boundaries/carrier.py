"""The cross-process record: what a pipeline holds, sealed into one ``ragtrace-context`` token.

When the prompt is built in one process and answered in another, the answering process needs the
retrievals and the placements to score the answer. ``carried_of`` reads them from the pipeline's
state (ids, ranks, scores, labels, positions, token counts, the pipeline's name, version and route,
the content mode), ``seal`` turns them into a token and ``unseal`` back into the same records the
figures are computed from, so the receiving side runs the one figure path (``figures.compute``).

Token: ``v1.<payload>.<mac>``. The payload is base64url (no padding) of zlib-compressed JSON; the
mac is the first 16 bytes of HMAC-SHA256 over ``v1.<payload>`` under the shared hash key (the one
``keyed`` uses), so a record can't be forged or altered without the key. The JSON names the trace
it belongs to and an expiry: ``unseal`` refuses a record of another trace (no replay onto another
request) or past its expiry. What is never in it, in redact and hash modes: content. Ids, ranks,
scores, positions, token counts and drop reasons are exported in every mode already; a label that
is neither the position nor the chunk id (a title) is carried as its keyed digest
(``keyed.label_key``), which ``citation_keys`` resolves citations against. Duplicates by content
travel as small class numbers, not as content hashes. Scores are rounded to 6 significant digits
(the figures use ranks, not scores). Of a located or inferred context's prompt, only the source
labels it shows travel, as keyed digests: the one citation-resolution rule (``answer``) reads
them. Char offsets are not carried (the receiving side has no
assemble span to put them on); its placements say -1.
Pure apart from the key: no spans, no globals.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import zlib
from collections import Counter
from dataclasses import dataclass
from typing import Any, Final

from .. import names
from ..core.answer import SEARCHED
from ..core.assembly import ContextRecord, Drop, Placement
from ..core.chunks import Chunk
from ..core.citation_syntax import fold
from ..stages.state import STATUS_REMOTE_CONTEXT_INVALID, STATUS_REMOTE_CONTEXT_TOO_LARGE, PipelineState
from ..core.keyed import HASHED_LABEL, label_key
from ..core.source_labels import shown_labels
from ..setup.redaction import MODES, ContentPolicy

VERSION: Final = "v1"
# The most characters a token may have: typical servers accept 8 KB header lines, shared with the
# app's own headers. Measured: 20 chunks with UUID ids seal to about 0.8 KB, 100 to about 4 KB.
MAX_TOKEN_CHARS: Final = 4096
DEFAULT_TTL: Final = 900.0  # seconds a record stays valid (a queue may hold it a while)
_MAC_BYTES: Final = 16
_MAX_JSON_BYTES: Final = 1 << 20  # what a token may inflate to
_PURPOSE: Final = b"ragtrace-context\x00"
_NOT_CARRIED: Final = -1  # char offsets of a carried placement


@dataclass(frozen=True, slots=True)
class Carried:
    """A record as the receiving side uses it: the origin's labels, retrievals and context."""

    trace_id: str  # 32 hex digits
    labels: dict[str, Any]  # gen_ai.workflow.name, rag.pipeline.version, rag.pipeline.route
    mode: str  # the origin's content mode
    retrievals: list[list[Chunk]]
    unreadable: int
    context: ContextRecord | None
    unmeasured: str | None = None  # why the origin could not tell which assembly is this answer's


def carried_of(state: PipelineState, trace_id: str) -> Carried:
    """What the pipeline holds now: every retrieval, and the assembly an answer made here would be
    scored against (the one bound to this task or thread), or why that can't be told."""
    context, unknown = state.context_for_answer(answer=False)
    return Carried(trace_id, dict(state.labels), state.config.content.mode, state.retrievals, state.unreadable, context, unknown)


# --- sealing (the sending side) -------------------------------------------------------------------
def seal(carried: Carried, key: bytes, policy: ContentPolicy, *, expires: int) -> str:
    """The token for ``carried``; labels that are content pass ``policy`` or go as keyed digests."""
    labels = carried.labels
    document: dict[str, Any] = {
        "t": carried.trace_id,
        "e": expires,
        "p": [labels.get(names.GEN_AI_WORKFLOW_NAME), labels.get(names.RAG_PIPELINE_VERSION), labels.get(names.RAG_PIPELINE_ROUTE)],
        "m": carried.mode,
        "r": _retrievals_out(carried.retrievals),
        "u": carried.unreadable,
        "c": _context_out(carried.context, policy) if carried.context is not None else None,
    }
    if carried.unmeasured is not None:
        document["z"] = carried.unmeasured
    return _signed(document, key)


def seal_too_large(trace_id: str, size: int, key: bytes, *, expires: int) -> str:
    """A small signed stand-in for a record over ``MAX_TOKEN_CHARS``: the receiving side reports
    ``remote_context_too_large`` instead of guessing, and no oversized header is sent."""
    return _signed({"t": trace_id, "e": expires, "x": size}, key)


def _signed(document: dict[str, Any], key: bytes) -> str:
    raw = json.dumps(document, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode("utf-8")
    body = f"{VERSION}.{_b64(zlib.compress(raw, 9))}"
    return f"{body}.{_b64(_mac(key, body))}"


def _mac(key: bytes, body: str) -> bytes:
    return hmac.new(key, _PURPOSE + body.encode("ascii"), hashlib.sha256).digest()[:_MAC_BYTES]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _retrievals_out(retrievals: list[list[Chunk]]) -> list[list[list[Any]]]:
    """``[id, rank, score, duplicate class]`` per chunk; the class (shared by chunks with one
    content hash) only where a hash repeats, since only equality matters to the figures."""
    counts = Counter(c.content_hash for r in retrievals for c in r if c.content_hash)
    classes: dict[str, int] = {}
    out = []
    for retrieval in retrievals:
        rows = []
        for chunk in retrieval:
            key = chunk.content_hash
            group = classes.setdefault(key, len(classes)) if key and counts[key] > 1 else None
            score = float(f"{chunk.score:.6g}") if chunk.score is not None else None
            rows.append([chunk.id, chunk.rank, score, group])
        out.append(rows)
    return out


def _context_out(record: ContextRecord, policy: ContentPolicy) -> dict[str, Any]:
    document = {
        "m": record.method,
        "s": record.span_id,
        "k": record.max_tokens,
        "p": [
            [p.chunk_id, _label_out(p.label, p.chunk_id, str(p.position), policy), p.position, p.tokens, int(p.truncated)]
            for p in record.placements
        ],
        "d": [[d.chunk_id, d.reason] for d in record.dropped],
        "a": [[_label_out(label, chunk_id, None, policy), chunk_id] for label, chunk_id in record.aliases.items()],
        "n": [[_label_out(label, chunk_id, None, policy), chunk_id] for label, chunk_id in record.unshown.items()],
    }
    if record.method in SEARCHED and record.prompt is not None:  # what the resolution rule reads of the prompt
        document["w"] = sorted(label_key(label)[len(HASHED_LABEL):] for label in shown_labels(record.prompt, record.sources_at))
    return document


def _label_out(label: str, chunk_id: str, position: str | None, policy: ContentPolicy) -> Any:
    """None: the position; True: the chunk id; a string: the label itself (not content, or full
    mode); ``{"h": digest}``: a label that is content, keyed."""
    if label == position:
        return None
    if label == chunk_id:
        return True
    if label == "":
        return label
    shown = policy.text(label)
    return shown if shown is not None else {"h": label_key(fold(label))[len(HASHED_LABEL):]}


# --- unsealing (the receiving side) ---------------------------------------------------------------
class Unusable(Exception):
    """A token that can't be used; ``args[0]`` is the status (``figures.STATUS_REMOTE_CONTEXT_*``)."""


class OtherTrace(Unusable):
    """An authentic record that names another trace than the one it arrived in (a replay, or a
    carrier whose trace context is stale): the receiving side must join neither trace."""


def unseal(token: str, key: bytes, trace_id: str | None, now: float) -> Carried:
    """The record in ``token``, checked: size, signature, version, trace, expiry, shape."""
    if len(token) > MAX_TOKEN_CHARS:
        raise Unusable(STATUS_REMOTE_CONTEXT_TOO_LARGE)
    body, _, mac = token.rpartition(".")
    version, _, payload = body.partition(".")
    if version != VERSION or not payload:
        raise Unusable(STATUS_REMOTE_CONTEXT_INVALID)
    try:
        given = _unb64(mac)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(_unb64(payload), _MAX_JSON_BYTES) if hmac.compare_digest(given, _mac(key, body)) else None
        if raw is None or inflater.unconsumed_tail:
            raise Unusable(STATUS_REMOTE_CONTEXT_INVALID)
        document = json.loads(raw)
    except (ValueError, binascii.Error, zlib.error, UnicodeError) as error:
        raise Unusable(STATUS_REMOTE_CONTEXT_INVALID) from error
    if not isinstance(document, dict):
        raise Unusable(STATUS_REMOTE_CONTEXT_INVALID)
    if trace_id is None or document.get("t") != trace_id:
        raise OtherTrace(STATUS_REMOTE_CONTEXT_INVALID)  # another trace's record: never replayed here
    expires = document.get("e")
    if not isinstance(expires, int) or isinstance(expires, bool) or expires < now:
        raise Unusable(STATUS_REMOTE_CONTEXT_INVALID)
    if "x" in document:
        raise Unusable(STATUS_REMOTE_CONTEXT_TOO_LARGE)
    try:
        return _carried(document, trace_id)
    except (TypeError, ValueError, KeyError, IndexError) as error:  # signed by a version we don't read
        raise Unusable(STATUS_REMOTE_CONTEXT_INVALID) from error


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _carried(document: dict[str, Any], trace_id: str) -> Carried:
    name, version, route = document["p"]
    labels: dict[str, Any] = {names.GEN_AI_WORKFLOW_NAME: _text(name)}
    if version is not None:
        labels[names.RAG_PIPELINE_VERSION] = version if isinstance(version, int) and not isinstance(version, bool) else _text(version)
    if route is not None:
        labels[names.RAG_PIPELINE_ROUTE] = _text(route)
    mode = document["m"]
    if mode not in MODES:
        raise ValueError(mode)
    retrievals = [[_chunk(row) for row in _list(retrieval)] for retrieval in _list(document["r"])]
    context, unknown = document["c"], document.get("z")
    carried = _context(context) if context is not None else None
    return Carried(trace_id, labels, mode, retrievals, _count(document["u"]), carried, None if unknown is None else _text(unknown))


def _chunk(row: Any) -> Chunk:
    chunk_id, rank, score, group = _list(row)
    if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))):
        raise TypeError(score)
    key = None if group is None else f"#{_count(group)}"  # never a keyed digest's hex
    return Chunk(_text(chunk_id), _count(rank, 1), None if score is None else float(score), None, None, None, key)


def _context(document: Any) -> ContextRecord:
    if not isinstance(document, dict):
        raise TypeError(document)
    placements = []
    for row in _list(document["p"]):
        chunk_id, label, position, tokens, truncated = _list(row)
        chunk_id, position = _text(chunk_id), _count(position, 1)
        placements.append(
            Placement(chunk_id, position, _label_in(label, chunk_id, str(position)), _NOT_CARRIED, _NOT_CARRIED, _count(tokens), bool(_count(truncated)))
        )
    span_id, max_tokens = document["s"], document["k"]
    return ContextRecord(
        method=_text(document["m"]),
        placements=placements,
        dropped=[Drop(_text(chunk_id), _text(reason)) for chunk_id, reason in map(_list, _list(document["d"]))],
        max_tokens=None if max_tokens is None else _count(max_tokens),
        span_id=None if span_id is None else _text(span_id),
        aliases={_label_in(label, _text(chunk_id), None): _text(chunk_id) for label, chunk_id in map(_list, _list(document["a"]))},
        unshown={_label_in(label, _text(chunk_id), None): _text(chunk_id) for label, chunk_id in map(_list, _list(document["n"]))},
        shown_keys=frozenset(HASHED_LABEL + _text(key) for key in _list(document["w"])) if "w" in document else None,
    )


def _label_in(label: Any, chunk_id: str, position: str | None) -> str:
    if label is None and position is not None:
        return position
    if label is True:
        return chunk_id
    if isinstance(label, dict):
        return HASHED_LABEL + _text(label["h"])
    return _text(label)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(value)
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(value)
    return value


def _count(value: Any, least: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(value)
    return value
