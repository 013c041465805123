"""Warnings with a location (``file:line``) and a plain progress bar, both on stderr.

Warnings are capped per kind so a file with a million malformed lines prints a handful of them
and one summary line, never a million. The progress bar is a single ``\\r``-rewritten line; a
warning clears it first so the two never interleave.
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import TextIO

DEFAULT_LIMIT = 10  # warnings printed per kind; the rest are counted
PROGRESS_MIN_BYTES = 8 * 1024 * 1024  # inputs smaller than this get no progress bar
_BAR_WIDTH = 28
_REFRESH_SECONDS = 0.2


class Diagnostics:
    """Collects warnings: prints the first ``limit`` of each kind, counts all of them."""

    def __init__(self, stream: TextIO | None = None, *, limit: int = DEFAULT_LIMIT, quiet: bool = False) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.limit = limit
        self.quiet = quiet
        self.counts: Counter[str] = Counter()
        self.progress: Progress | None = None
        # while True, warnings wait in _held for release(): the reader holds those raised about a
        # trace it finished in the middle of a line until the line's own warnings are out
        self.holding = False
        self._held: list[tuple[str, str | None, str]] = []

    def warn(self, kind: str, where: str | None, message: str) -> None:
        """One warning. ``kind`` groups it for the cap, ``where`` is ``file:line`` (or None)."""
        if self.holding:
            self._held.append((kind, where, message))
            return
        self.counts[kind] += 1
        if self.quiet or self.counts[kind] > self.limit:
            return
        if self.progress is not None:
            self.progress.clear()
        location = f"{where}: " if where else ""
        self.stream.write(f"ragtrace: warning: {location}{message}\n")
        self.stream.flush()

    def release(self) -> None:
        """Give the held warnings, in the order they were raised."""
        held, self._held = self._held, []
        for warning in held:
            self.warn(*warning)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> None:
        """One line per kind whose warnings were cut off by the cap."""
        if self.quiet:
            return
        for kind, count in sorted(self.counts.items()):
            hidden = count - self.limit
            if hidden > 0:
                self.stream.write(f"ragtrace: warning: {hidden} more '{kind}' warning(s) not shown ({count} in all)\n")
        self.stream.flush()


class Progress:
    """A plain progress bar over bytes read, redrawn at most five times a second."""

    def __init__(self, total_bytes: int, stream: TextIO | None = None) -> None:
        self.total = max(total_bytes, 1)
        self.stream = stream if stream is not None else sys.stderr
        self.done_before = 0  # bytes of files already finished
        self._last = 0.0
        self._shown = False
        self.spans = 0

    def update(self, file_position: int, spans: int) -> None:
        now = time.monotonic()
        if now - self._last < _REFRESH_SECONDS:
            return
        self._last = now
        self.spans = spans
        self._draw(self.done_before + file_position)

    def file_done(self, size: int) -> None:
        self.done_before += size

    def _draw(self, done: int) -> None:
        fraction = min(done / self.total, 1.0)
        filled = int(fraction * _BAR_WIDTH)
        bar = "#" * filled + "." * (_BAR_WIDTH - filled)
        text = f"\r[{bar}] {fraction * 100:5.1f}% {_megabytes(done)}/{_megabytes(self.total)} MB, {self.spans:,} spans"
        self.stream.write(text)
        self.stream.flush()
        self._shown = True

    def clear(self) -> None:
        if self._shown:
            self.stream.write("\r\x1b[2K" if _is_tty(self.stream) else "\n")
            self.stream.flush()
            self._shown = False

    def finish(self) -> None:
        self.clear()


def _megabytes(count: int) -> str:
    return f"{count / 1_048_576:,.1f}"


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def wants_progress(total_bytes: int, forced: bool | None, stream: TextIO | None = None) -> bool:
    """A bar for large inputs on an interactive stderr; ``--progress``/``--no-progress`` override."""
    if forced is not None:
        return forced
    return total_bytes >= PROGRESS_MIN_BYTES and _is_tty(stream if stream is not None else sys.stderr)
