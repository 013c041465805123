"""Span mechanics shared by every stage: limits-aware attributes, JSON values, errors.

Two SDK behaviours shape this module. The Python SDK evicts the *oldest* attribute when the count
limit is reached, so stages write their essential attributes last (``Attributes.flush``).
And a value-length limit cuts strings blindly, which would break JSON values, so JSON is trimmed
element by element to fit before it is serialised.
"""

from __future__ import annotations

import json
import math
import os
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.trace import Span, Status, StatusCode

from .. import names
from ..setup.redaction import ContentPolicy

_EXCEPTION_EVENT = "exception"
_EXC_TYPE = "exception.type"
_EXC_MESSAGE = "exception.message"
_EXC_STACKTRACE = "exception.stacktrace"
_EXC_ESCAPED = "exception.escaped"


def value_length_limit(span: Span) -> int | None:
    """The span's attribute value-length limit (SDK spans expose it; else the environment)."""
    limits = getattr(span, "_limits", None)
    if limits is not None:
        limit = getattr(limits, "max_span_attribute_length", None)
        return limit if isinstance(limit, int) else None
    for variable in ("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT"):
        raw = os.environ.get(variable, "")
        if raw.strip().isdigit():
            return int(raw)
    return None


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False, default=str)


def compact_json(value: Any) -> str:
    return _ENCODER.encode(value)


_JSON_STRING = json.encoder.encode_basestring  # the encoder's own string escaping (ensure_ascii=False)


def id_score_json(pairs: Sequence[tuple[Any, Any]]) -> str:
    """``[{"id": id, "score": score}, ...]`` exactly as ``compact_json`` writes it, built directly:
    the encoder calls back into Python for every float, and every retrieval writes this list.
    Anything but str ids and finite float (or None) scores goes through ``compact_json``."""
    parts = []
    for chunk_id, score in pairs:
        if type(chunk_id) is not str or not (score is None or (type(score) is float and math.isfinite(score))):
            return compact_json([{"id": i, "score": s} for i, s in pairs])
        parts.append('{"id":%s,"score":%s}' % (_JSON_STRING(chunk_id), "null" if score is None else float.__repr__(score)))
    return "[" + ",".join(parts) + "]"


_MESSAGE_KEYS = (("role", "parts"), ("role", "parts", "finish_reason"))


def messages_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """``compact_json(messages)`` for the GenAI messages ``messages_json`` builds (a role, one text
    part, then a finish reason), written directly with the encoder's own string escaping: the
    encoder's dict and list machinery costs more than the strings, and the prompt goes out this
    way on every generation. Any other shape or type goes through ``compact_json``."""
    out = []
    for message in messages:
        parts = message.get("parts")
        part = parts[0] if type(parts) is list and len(parts) == 1 else None
        role, reason = message.get("role"), message.get("finish_reason", "")
        if (
            tuple(message) not in _MESSAGE_KEYS
            or type(part) is not dict
            or tuple(part) != ("type", "content")
            or part["type"] != "text"
            or not (type(role) is str and type(part["content"]) is str and type(reason) is str)
        ):
            return compact_json(list(messages))
        tail = ',"finish_reason":%s}' % _JSON_STRING(reason) if "finish_reason" in message else "}"
        out.append('{"role":%s,"parts":[{"type":"text","content":%s}]%s' % (_JSON_STRING(role), _JSON_STRING(part["content"]), tail))
    return "[" + ",".join(out) + "]"


def json_list_within(items: Sequence[Any], limit: int | None) -> str | None:
    """A JSON array of as many leading ``items`` as fit in ``limit`` characters (None: all)."""
    text = compact_json(list(items))
    if limit is None or len(text) <= limit:
        return text
    low, high = 0, len(items)
    while low < high:  # the longest prefix that fits; always valid JSON
        middle = (low + high + 1) // 2
        if len(compact_json(list(items[:middle]))) <= limit:
            low = middle
        else:
            high = middle - 1
    return compact_json(list(items[:low])) if low or limit >= 2 else None


def json_messages_within(messages: Sequence[tuple[Any, str]], limit: int | None) -> str | None:
    """``[{"role", "content"}, ...]`` as JSON of at most ``limit`` characters (None: no limit).

    Contents are cut as strings *before* serialising, so the value is always valid JSON; a
    message left with no room at all is dropped, with those after it.
    """
    out: list[dict[str, Any]] = []
    for role, text in messages:
        out.append({"role": role, "content": text})
        excess = len(compact_json(out)) - limit if limit is not None else 0
        while excess > 0 and out[-1]["content"]:
            content = out[-1]["content"]  # a cut of n characters shortens the JSON by at least n
            out[-1]["content"] = content[: max(0, len(content) - excess)]
            excess = len(compact_json(out)) - limit  # type: ignore[operator]
        if excess > 0:
            out.pop()
            break
    text = compact_json(out)
    return text if limit is None or len(text) <= limit else None


def gated_json_object(values: Mapping[Any, Any], policy: ContentPolicy, limit: int) -> str | None:
    """A mapping whose values may be content (pipeline metadata, template variables) as one JSON
    object: full mode only, each non-number value through the policy (and redactor) as text; a
    value with no JSON form is left out. None when content is off or the JSON exceeds ``limit``."""
    if not policy.captures:
        return None
    kept: dict[str, Any] = {}
    for key, value in values.items():
        if value is None or isinstance(value, (bool, int)) or (isinstance(value, float) and math.isfinite(value)):
            kept[str(key)] = value
        elif not isinstance(value, float):  # NaN and infinities have no JSON form
            try:
                text = policy.text(value if isinstance(value, str) else compact_json(value))
            except ValueError:  # a NaN inside
                continue
            if text is not None:
                kept[str(key)] = text
    encoded = compact_json(kept)
    return encoded if len(encoded) <= limit else None


def trim_text(text: str, max_chars: int) -> str:
    return text if len(text) <= max_chars else text[:max_chars]


def finite_or_nan(value: float | None) -> float:
    return value if value is not None and math.isfinite(value) else math.nan


class Attributes:
    """Buffers a stage's attributes and writes them to its span in one call when the stage ends.

    One ``set_attributes`` per span instead of dozens keeps the SDK's per-call locking and
    validation off the hot path. ``essential`` keys go last, so the SDK's evict-the-oldest count
    limit can only drop less important keys. Content passes the policy before it is buffered.
    """

    __slots__ = ("span", "policy", "recording", "_pending", "_essential", "_at_start", "_start_count")

    def __init__(self, span: Span, policy: ContentPolicy, at_start: Mapping[str, Any] | None = None, start_count: int = 0) -> None:
        self.span = span
        self.policy = policy
        self.recording = span.is_recording()
        self._pending: dict[str, Any] = {}
        self._essential: dict[str, Any] = {}
        # essential attributes the span was started with: written again at the end only when the
        # count limit could evict them (re-setting a key makes it the newest); start_count is how
        # many attributes it was started with in all
        self._at_start = at_start
        self._start_count = start_count

    def set(self, key: str, value: Any) -> None:
        if self.recording and value is not None:
            self._pending[key] = value

    def set_many(self, values: Mapping[str, Any]) -> None:
        if self.recording:
            pending = self._pending
            for key, value in values.items():
                if value is not None:
                    pending[key] = value

    def essential(self, key: str, value: Any) -> None:
        """A key that must survive attribute limits (written last)."""
        if self.recording and value is not None:
            self._essential[key] = value

    def essential_many(self, values: Mapping[str, Any]) -> None:
        """``essential`` for each key of ``values`` (None values left out), in one call."""
        if self.recording:
            essential = self._essential
            for key, value in values.items():
                if value is not None:
                    essential[key] = value

    def content(self, key: str, text: str | None, max_chars: int) -> bool:
        """A content-bearing attribute: passes the content policy, then is trimmed. True if set."""
        if not self.recording or text is None:
            return False
        allowed = self.policy.text(text)
        if allowed is None:
            return False
        self._pending[key] = trim_text(allowed, max_chars)
        return True

    def json_list(self, key: str, items: Sequence[Any], text: str | None = None) -> bool:
        """``items`` as a JSON array within the span's value-length limit (the longest prefix that
        fits); True when all of them went out. ``text``: that array's JSON, when the caller built it."""
        if not self.recording:
            return False
        limit = value_length_limit(self.span)
        if text is None:
            text = compact_json(list(items))
        whole = limit is None or len(text) <= limit
        value = text if whole else json_list_within(items, limit)
        if value is not None:
            self._pending[key] = value
        return whole

    def flush(self) -> None:
        """Write everything buffered to the span, essentials last."""
        if not self.recording:
            return
        pending, essential, at_start = self._pending, self._essential, self._at_start
        if at_start and _may_evict(self.span, self._start_count + len(pending) + len(essential)):
            essential = {**at_start, **essential}
        if not (pending or essential):
            return
        for key in essential:
            pending.pop(key, None)
        pending.update(essential)
        self.span.set_attributes(pending)
        self._pending = {}


def _may_evict(span: Span, count: int) -> bool:
    """Whether ``count`` attributes (an upper bound: keys may repeat) could reach the span's attribute count limit."""
    limits = getattr(span, "_limits", None)
    if limits is None:
        return True  # not an SDK span: assume it may
    limit = getattr(limits, "max_span_attributes", None)
    return isinstance(limit, int) and count >= limit  # None: no limit


def record_error(span: Span, error: BaseException, policy: ContentPolicy, max_chars: int) -> None:
    """Status ERROR, ``error.type`` and an exception event; the message obeys the content policy and,
    like every other text, is trimmed to ``max_chars`` (after the redactor, so it sees it whole)."""
    if not span.is_recording():
        return
    type_name = type(error).__qualname__
    message = _safe_str(error) if policy.captures else type_name
    if policy.captures and message is not None:
        message = policy.text(message)
        message = trim_text(message, max_chars) if message is not None else None
    attributes: dict[str, Any] = {_EXC_TYPE: type_name, _EXC_MESSAGE: message or type_name, _EXC_ESCAPED: True}
    if policy.captures:  # the traceback repeats the message: it passes the redactor too
        stacktrace = policy.text("".join(traceback.format_exception(type(error), error, error.__traceback__)))
        if stacktrace is not None:
            attributes[_EXC_STACKTRACE] = trim_text(stacktrace, max_chars)
    span.add_event(_EXCEPTION_EVENT, attributes)
    span.set_attribute(names.ERROR_TYPE, type_name)
    span.set_status(Status(StatusCode.ERROR, message or type_name))


def _safe_str(value: object) -> str | None:
    try:
        return str(value)
    except Exception:  # noqa: BLE001 - user objects may raise in __str__
        return None


def gate_messages(messages: Any, policy: ContentPolicy) -> list[tuple[str, str | None]] | None:
    """(role, text that passed the content policy, or None) per chat message: each text goes through
    the policy (and a custom redactor) once, for every attribute that shows it. None when content is
    off or ``messages`` is not a sequence; a message that is not a mapping has no text."""
    if not policy.captures or not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    return [
        (str(m.get("role", "user")), policy.text(message_text(m))) if isinstance(m, Mapping) else ("user", None)
        for m in messages
    ]


def all_passed(gated: list[tuple[str, str | None]] | None) -> list[tuple[str, str]] | None:
    """The gated messages if every one passed the policy (a whole prompt or none of it), else None."""
    if gated is None:
        return None
    for _, text in gated:
        if text is None:
            return None
    return gated  # type: ignore[return-value]


def messages_json(gated: list[tuple[str, str]], max_chars: int) -> list[dict[str, Any]]:
    """Chat messages (already gated) in the GenAI ``{role, parts}`` shape."""
    return [{"role": role, "parts": [{"type": "text", "content": trim_text(text, max_chars)}]} for role, text in gated]


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of text parts. A part
    whose ``content`` is itself a list of blocks (an Anthropic ``search_result`` or
    ``tool_result``) has no text of its own here."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        texts = (part.get("text") or part.get("content") for part in content if isinstance(part, Mapping))
        return "".join(text for text in texts if isinstance(text, str))
    return ""

