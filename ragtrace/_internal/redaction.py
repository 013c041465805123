"""The one gate every piece of user content passes before it may become telemetry.

Modes: ``full`` records content (optionally rewritten by a user redactor), ``redact`` records none,
``hash`` records none plus short content hashes so duplicates stay visible. The gate is applied
when an attribute or event is built, so redacted text never reaches the OpenTelemetry SDK.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from . import guard

ContentMode = Literal["full", "redact", "hash"]
MODES: Final = ("full", "redact", "hash")
Redactor = Callable[[str], str]

ENV_RAGTRACE: Final = "RAGTRACE_CAPTURE_CONTENT"
ENV_OTEL: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# The OTel GenAI variable's values, mapped onto ragtrace's modes.
_OTEL_VALUES: Final = {
    "no_content": "redact",
    "false": "redact",
    "span_only": "full",
    "span_and_event": "full",
    "event_only": "redact",  # ragtrace records no content events, so nothing may go on spans
    "true": "full",
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

    An unknown value is logged and ignored, never raised on: the environment is not a call site.
    """
    raw = os.environ.get(ENV_RAGTRACE)
    if raw:
        value = raw.strip().lower()
        if value in MODES:
            return value  # type: ignore[return-value]
        guard.logger.warning("ragtrace: ignoring %s=%r (expected one of %s)", ENV_RAGTRACE, raw, MODES)
    raw = os.environ.get(ENV_OTEL)
    if raw:
        mapped = _OTEL_VALUES.get(raw.strip().lower())
        if mapped:
            return mapped  # type: ignore[return-value]
        guard.logger.warning("ragtrace: ignoring %s=%r", ENV_OTEL, raw)
    return None


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
