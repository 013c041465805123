"""When an input is plainly not JSON lines, so reading it should stop instead of running on.

Three signs, none of which a JSON lines file shows: a line too long to read that holds a NUL
byte (JSON text never holds one: ``/dev/zero``, a binary file), ``MAX_BLANK_LINES`` blank lines
in a row, and ``MAX_BAD_LINES`` lines in a row that are not JSON at all. A short line with NUL
bytes is only a bad line: the zeros a crash leaves at the end of an appended log must not cost
the spans before them. Both readers (trace input and the golden file) count them with
``JunkRun``; each decides what stopping means.
"""

from __future__ import annotations

MAX_BLANK_LINES = 1_000_000
MAX_BAD_LINES = 10_000


def binary(line: bytes, number: int) -> str | None:
    """Why ``line`` (line ``number``, too long to read) is binary data, or None."""
    return f"binary data (NUL bytes on line {number})" if b"\0" in line else None


class JunkRun:
    """The current run of blank lines and of lines that are not JSON; each method returns why
    the input is not JSON lines once it plainly is not (else None)."""

    __slots__ = ("_blank", "_blank_from", "_bad", "_bad_from")

    def __init__(self) -> None:
        self._blank = self._blank_from = self._bad = self._bad_from = 0

    def blank(self, number: int) -> str | None:
        if not self._blank:
            self._blank_from = number
        self._blank += 1
        if self._blank >= MAX_BLANK_LINES:
            return f"{self._blank:,} blank lines in a row from line {self._blank_from}"
        return None

    def bad(self, number: int) -> str | None:
        """Line ``number`` is not JSON (or too long to read)."""
        self._blank = 0
        if not self._bad:
            self._bad_from = number
        self._bad += 1
        if self._bad >= MAX_BAD_LINES:
            return f"{self._bad:,} lines in a row that are not JSON, from line {self._bad_from}"
        return None

    def good(self) -> None:
        self._blank = self._bad = 0
