"""The one gate every piece of user content passes before it may become telemetry.

Modes: ``full`` records content (optionally rewritten by a user redactor), ``redact`` records none,
``hash`` records none plus short content hashes so duplicates stay visible. The gate is applied
when an attribute or event is built, so redacted text never reaches the OpenTelemetry SDK.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from ..core import guard

ContentMode = Literal["full", "redact", "hash"]
MODES: Final = ("full", "redact", "hash")
MODES_BY_STRICTNESS: Final = ("full", "hash", "redact")  # each lets out less content than the one before
Redactor = Callable[[str], str]

ENV_RAGTRACE: Final = "RAGTRACE_CAPTURE_CONTENT"
ENV_OTEL: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENV_SAMPLE: Final = "RAGTRACE_FULL_CONTENT_SAMPLE"
# What either variable may say, mapped onto ragtrace's modes: the modes themselves, the OTel GenAI
# variable's standard values, and the usual words for on and off. Anything else means "redact".
ENVIRONMENT_ALIASES: Final = {
    **{mode: mode for mode in MODES},
    "hashed": "hash",
    "span_only": "full",
    "span_and_event": "full",
    "true": "full",
    "on": "full",
    "yes": "full",
    "1": "full",
    "no_content": "redact",
    "event_only": "redact",  # ragtrace records no content events, so nothing may go on spans
    "false": "redact",
    "off": "redact",
    "no": "redact",
    "0": "redact",
    "none": "redact",
    "redacted": "redact",
}


def check_mode(mode: object, *, where: str = "capture_content") -> ContentMode:
    """Validate a mode given in code; misconfiguration raises at the call site."""
    if not isinstance(mode, str):
        raise TypeError(f"{where} must be one of {MODES}, got {type(mode).__name__}")
    value = mode.strip().lower()
    if value not in MODES:
        raise ValueError(f"{where} must be one of {MODES}, got {mode!r}")
    return value  # type: ignore[return-value]


def mode_from_environment() -> ContentMode | None:
    """``RAGTRACE_CAPTURE_CONTENT`` first, then the standard OTel GenAI variable.

    An unknown value fails closed: it means ``"redact"``, with a warning, whatever the other
    variable says. It is never raised on: the environment is not a call site.
    """
    for variable in (ENV_RAGTRACE, ENV_OTEL):
        raw = os.environ.get(variable)
        if raw:
            mapped = ENVIRONMENT_ALIASES.get(raw.strip().lower())
            if mapped is None:
                guard.logger.warning(
                    "ragtrace: %s=%r is not a content mode ragtrace knows; recording no content ('redact'). "
                    "Use full, redact or hash (docs/redaction.md lists the aliases)",
                    variable,
                    raw,
                )
                return "redact"
            return mapped  # type: ignore[return-value]
    return None


def check_sample(share: object, mode: str, *, where: str = "full_content_sample") -> float:
    """Validate the share of pipelines given full content; it needs a mode that isn't full."""
    if isinstance(share, bool) or not isinstance(share, (int, float)):
        raise TypeError(f"{where} must be a number between 0 and 1, got {type(share).__name__}")
    if not 0.0 <= share <= 1.0:  # NaN fails this too
        raise ValueError(f"{where} must be between 0 and 1, got {share!r}")
    if share and mode == "full":
        raise ValueError(f"{where} samples full content out of 'redact' or 'hash'; capture_content is already 'full'")
    return float(share)


def sample_from_environment(mode: str) -> float:
    """``RAGTRACE_FULL_CONTENT_SAMPLE``; an unusable value is logged and counts as 0 (fail closed)."""
    raw = os.environ.get(ENV_SAMPLE)
    if not raw:
        return 0.0
    try:
        return check_sample(float(raw), mode, where=ENV_SAMPLE)
    except (TypeError, ValueError) as error:
        guard.logger.warning("ragtrace: ignoring %s=%r (%s); no pipeline gets full content from it", ENV_SAMPLE, raw, error)
        return 0.0


def sampled_for_content(trace_id: int, share: float) -> bool:
    """Whether the pipeline of ``trace_id`` is in the full-content sample.

    A hash of the trace id, not its raw bits: the decision is the same in every process that
    knows the trace id, and independent of trace-id ratio samplers (which read the raw low bits).
    """
    digest = hashlib.blake2b(trace_id.to_bytes(16, "big"), digest_size=8, person=b"ragtrace-sample").digest()
    return int.from_bytes(digest, "big") < share * 2**64


def stricter_mode(first: str, second: str) -> str:
    """Of two modes, the one that lets less content out: full, then hash (keyed digests), then redact."""
    return first if MODES_BY_STRICTNESS.index(first) > MODES_BY_STRICTNESS.index(second) else second


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """How content is treated; one instance per configuration or pipeline."""

    mode: ContentMode = "full"
    redactor: Redactor | None = None

    @property
    def captures(self) -> bool:
        return self.mode == "full"

    @property
    def hashes(self) -> bool:
        return self.mode == "hash"

    @property
    def verbatim(self) -> bool:
        """Every text passes as it is (full mode, no redactor): ``text`` returns its argument."""
        return self.mode == "full" and self.redactor is None

    def text(self, value: str | None) -> str | None:
        """The value as it may be exported, or ``None`` when it must not leave the process."""
        if value is None or self.mode != "full":
            return None
        if self.redactor is None:
            return value
        try:
            rewritten = self.redactor(value)
        except Exception as error:  # noqa: BLE001 - fail closed: drop the value
            guard.warn_once(
                "redactor", "the custom redactor raised %s; the value was dropped", type(error).__name__
            )
            return None
        return rewritten if isinstance(rewritten, str) else None
