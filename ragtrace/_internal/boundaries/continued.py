"""Pipelines that cross a process: ``inject`` on the side that assembles, ``continue_pipeline`` on
the side that answers.

``inject`` seals the current pipeline's record (``carrier``) into one ``ragtrace-context`` entry
of the carrier the app sends (HTTP headers, a queue message, a JSON body), adds the W3C trace
context through the app's own propagators unless the carrier already has it, and marks the root
delegated: the other side's figures are the pipeline's, so a dashboard counts it once.
``ContinuedPipeline`` opens this process's part, a ``pipeline_segment`` span that is a child of the
remote span, whose state holds the carried retrievals and context: the generate stages and the
integrations inside it score the answer exactly as in one process, and every metric is recorded
under the origin's pipeline labels. A record that is missing, too large or can't be trusted
leaves the figures not measurable with that reason, logged once; the app's request goes on.

Fail closed: the record says how much content the origin allowed, so without a usable one this
side can't know, and its segment is redacted (a record that is present but unusable always; a
missing one unless ``if_missing="own"``). ``inject`` writes the current trace context, replacing
any the carrier held, and a segment never joins a trace its record doesn't name. Both sides need
the same secret hash key (``configure(hash_key=...)`` or ``RAGTRACE_HASH_KEY``); without one a
record can be neither signed nor checked: that set-up error is logged once, and on the request
path the hand-off degrades to ``remote_context_missing`` on both sides, never raising.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, MutableMapping
from typing import Any, Final, NoReturn

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from . import carrier as carrier_module
from ..setup import config as config_module
from .. import names
from ..stages import state as state_module
from ..stages.state import STATUS_REMOTE_CONTEXT_INVALID, STATUS_REMOTE_CONTEXT_MISSING, STATUS_REMOTE_CONTEXT_TOO_LARGE
from ..core.guard import call_guarded, warn_once
from ..core.keyed import ENV_KEY, shared_key
from ..stages.pipeline import RagPipeline
from ..setup.redaction import stricter_mode

# what a segment without a record does with content: redact it (fail closed), or use this side's mode
IF_MISSING: Final = ("redact", "own")
_BAGGAGE: Final = "baggage"  # the W3C baggage header: the app's to send, never replaced here

_WHY = {
    STATUS_REMOTE_CONTEXT_MISSING: "the carrier has no %s entry (or this process has no hash key to check it)" % names.CARRIER_KEY,
    STATUS_REMOTE_CONTEXT_INVALID: "its %s record is not valid here (bad signature or hash key, expired, another trace's, or unreadable)" % names.CARRIER_KEY,
    STATUS_REMOTE_CONTEXT_TOO_LARGE: "its %s record is over the %d-character cap" % (names.CARRIER_KEY, carrier_module.MAX_TOKEN_CHARS),
}


def _key() -> bytes | None:
    """The shared key, or None after saying once that it is missing: a set-up error that must not
    fail the app's requests (a replica deployed without the key answers them all the same)."""
    key = shared_key()
    if key is None:
        warn_once(
            "carrier-no-key",
            "set-up error: ragtrace.inject and continue_pipeline need a secret hash key shared by both "
            "processes, to sign and check the %s record: configure(hash_key=...) or %s. Until it is set, "
            "hand-offs carry no record and both sides report rag.metrics.status=%s",
            names.CARRIER_KEY,
            ENV_KEY,
            STATUS_REMOTE_CONTEXT_MISSING,
        )
    return key


# --- the sending side ----------------------------------------------------------------------------
def inject(carrier: MutableMapping[str, str], *, ttl: float = carrier_module.DEFAULT_TTL) -> bool:
    """Write the current pipeline's record into ``carrier`` (see the module docstring). True when
    an entry was written; False outside a traced pipeline (the carrier is then unchanged)."""
    if not isinstance(carrier, MutableMapping):
        raise TypeError(f"ragtrace.inject takes a mutable mapping of strings (headers, message attributes), got {type(carrier).__name__}")
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not ttl > 0:
        raise ValueError(f"ttl must be a positive number of seconds, got {ttl!r}")
    return bool(call_guarded("carrier inject", _inject, carrier, ttl, default=False))


def _inject(carrier: MutableMapping[str, str], ttl: float) -> bool:
    state = state_module.current()
    span_context = trace.get_current_span().get_span_context()
    if state is None or not span_context.is_valid:
        warn_once(
            "inject-outside",
            "ragtrace.inject() was called outside a traced rag_pipeline: there is no record to carry; the carrier is unchanged",
        )
        return False
    _write_trace_context(carrier)
    key = _key()
    if key is None:  # nothing to sign with: no record, and this side says why it has no figures
        state.unmeasured = STATUS_REMOTE_CONTEXT_MISSING
        return False
    trace_id = format(span_context.trace_id, "032x")
    expires = int(time.time() + ttl)
    token = carrier_module.seal(carrier_module.carried_of(state, trace_id), key, state.config.content, expires=expires)
    if len(token) > carrier_module.MAX_TOKEN_CHARS:
        warn_once(
            "carrier-too-large",
            "a %s record is %d characters, over the %d cap (about 100 chunks); a stand-in is sent and the "
            "receiving side reports rag.metrics.status=remote_context_too_large",
            names.CARRIER_KEY,
            len(token),
            carrier_module.MAX_TOKEN_CHARS,
        )
        token = carrier_module.seal_too_large(trace_id, len(token), key, expires=expires)
    carrier[names.CARRIER_KEY] = token
    state.delegated = True
    return True


def _write_trace_context(carrier: MutableMapping[str, str]) -> None:
    """The current trace context through the app's propagators, as its HTTP instrumentation would,
    replacing whatever trace context the carrier held (a reused dict, forwarded incoming headers):
    a stale one would put the other side's segment into another request's trace. Baggage the app
    put there stays."""
    written: dict[str, str] = {}
    propagate.inject(written)
    fields = {field.lower() for field in propagate.get_global_textmap().fields} | {name.lower() for name in written}
    fields.discard(_BAGGAGE)
    had_baggage = False
    for name in list(carrier):
        if isinstance(name, str) and name.lower() in fields:
            del carrier[name]
        had_baggage = had_baggage or (isinstance(name, str) and name.lower() == _BAGGAGE)
    carrier.update((name, value) for name, value in written.items() if not (had_baggage and name.lower() == _BAGGAGE))


# --- the receiving side --------------------------------------------------------------------------
class ContinuedPipeline(RagPipeline):
    """``with ragtrace.continue_pipeline(request.headers) as run``: this process's part of a
    pipeline another process started; ``run.metrics`` holds the pipeline's figures after exit."""

    stage = names.STAGE_SEGMENT

    def __init__(self, carrier: Any, name: str | None = None, *, if_missing: str = "redact") -> None:
        if name is not None and (not isinstance(name, str) or not name):
            raise ValueError("continue_pipeline's name must be a non-empty str")
        if if_missing not in IF_MISSING:
            raise ValueError(f"continue_pipeline's if_missing must be one of {', '.join(map(repr, IF_MISSING))}, got {if_missing!r}")
        read = call_guarded("carrier read", _read, carrier, default=None)
        parent, carried, status = read if read is not None else (None, None, STATUS_REMOTE_CONTEXT_INVALID)
        self.remote_status: str | None = status  # why the carried record can't be used, or None
        self._parent = parent
        self._carried = carried
        if status is not None:
            warn_once(
                f"remote-context:{status}",
                "continue_pipeline: %s; this part's figures are not measurable (rag.metrics.status=%s). The request goes on",
                _WHY[status],
                status,
            )
        origin = carried.labels if carried is not None else {}
        attributes = {
            key: origin[label] for key, label in (("version", names.RAG_PIPELINE_VERSION), ("route", names.RAG_PIPELINE_ROUTE)) if label in origin
        }
        super().__init__(origin.get(names.GEN_AI_WORKFLOW_NAME) or name or "continued", capture_content=_mode(carried, status, if_missing), **attributes)

    def open(self) -> None:
        if self._parent is None:  # the remote span is already current (the app's middleware)
            super().open()
            return
        token = otel_context.attach(self._parent)
        try:
            super().open()
        finally:
            otel_context.detach(token)

    def find_state(self) -> state_module.PipelineState:
        state = super().find_state()
        carried = self._carried
        if carried is None:
            state.unmeasured = self.remote_status
            return state
        state.retrievals = carried.retrievals
        state.unreadable = carried.unreadable
        state.unmeasured = carried.unmeasured  # the origin could not tell which assembly was this answer's
        if carried.context is not None:
            state.contexts.append(carried.context)
        return state

    def __call__(self, func: Any) -> NoReturn:
        raise TypeError("continue_pipeline is a context manager per request: `with ragtrace.continue_pipeline(request.headers):`")


def _mode(carried: carrier_module.Carried | None, status: str | None, if_missing: str) -> str | None:
    """The segment's content mode (None: this side's own). Never more content than the origin
    allowed: with its record, the stricter of its mode and this side's; without one, this side
    can't know what the origin allowed, so redact (a missing record: as ``if_missing`` says)."""
    if carried is not None:
        if carried.mode == "full":
            return None
        return stricter_mode(carried.mode, config_module.current().content.mode)
    if status == STATUS_REMOTE_CONTEXT_MISSING and if_missing == "own":
        return None
    return "redact"


def _read(carrier: Any) -> tuple[otel_context.Context | None, carrier_module.Carried | None, str | None]:
    """(the context to open under, or None for the current one; the record; why it can't be used)."""
    parent: otel_context.Context | None = None
    current = trace.get_current_span().get_span_context()
    trace_id = current.trace_id if current.is_valid else None
    if isinstance(carrier, Mapping) or hasattr(carrier, "get"):
        extracted = propagate.extract(carrier)
        remote = trace.get_current_span(extracted).get_span_context()
        if remote.is_valid and remote.trace_id != trace_id:
            parent, trace_id = extracted, remote.trace_id
    token = _entry(carrier)
    if token is None:
        return parent, None, STATUS_REMOTE_CONTEXT_MISSING
    key = _key()
    if key is None:  # nothing to check the record with: as if there were none
        return parent, None, STATUS_REMOTE_CONTEXT_MISSING
    try:
        carried = carrier_module.unseal(token, key, format(trace_id, "032x") if trace_id else None, time.time())
    except carrier_module.OtherTrace as unusable:  # the record names one trace, the carrier another:
        return trace.set_span_in_context(trace.INVALID_SPAN), None, unusable.args[0]  # join neither
    except carrier_module.Unusable as unusable:
        return parent, None, unusable.args[0]
    return parent, carried, None


def _entry(carrier: Any) -> str | None:
    """The carrier's ``ragtrace-context`` value: headers are matched without case; one value only."""
    getter = getattr(carrier, "get", None)
    if getter is None:
        return None
    value = getter(names.CARRIER_KEY)
    if value is None and isinstance(carrier, Mapping):
        value = next((v for k, v in carrier.items() if isinstance(k, str) and k.lower() == names.CARRIER_KEY), None)
    if isinstance(value, (list, tuple)):
        value = value[0] if len(value) == 1 else None
    if isinstance(value, bytes):
        value = value.decode("ascii", "replace")
    return value if isinstance(value, str) else None
