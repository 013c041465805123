"""The input files: which ones (directories expanded), and each opened as a byte stream.

Gzip is detected by its magic bytes, not by name, and zstd is refused with a message. Plain files
are read through ``linefile.Lines``.
"""

from __future__ import annotations

import gzip
import os
from collections.abc import Iterable
from pathlib import Path
from typing import IO

from .linefile import READ_CHUNK, Lines

_READ_BUFFER = 1 << 20  # the raw file's buffer: gzip inputs are read through it (plain files by linefile.Lines)
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"


class InputError(Exception):
    """An input file that can't be opened or read at all; the message is one line."""


class NoSpansError(Exception):
    """The input was read and holds no span at all; the message is one line."""

    def __init__(self, files: list[Path]) -> None:
        shown = ", ".join(str(path) for path in files[:3]) + (", ..." if len(files) > 3 else "")
        super().__init__(f"no spans found in {len(files)} file{'s' if len(files) != 1 else ''} ({shown}): nothing to report")


def resolve_inputs(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """The files to read, in order: files as given, directories as their sorted visible files.

    Raises ``InputError`` for a path that doesn't exist or can't be read.
    """
    files: list[Path] = []
    for given in paths:
        path = Path(given)
        try:
            if path.is_dir():
                entries = sorted(p for p in path.iterdir() if p.is_file() and not p.name.startswith("."))
                if not entries:
                    raise InputError(f"cannot read {path}: the directory holds no files")
                files.extend(entries)
                continue
            with open(path, "rb"):
                pass
        except InputError:
            raise
        except OSError as error:
            raise InputError(f"cannot read {path}: {error.strerror or error}") from None
        files.append(path)
    return files


def total_bytes(files: Iterable[Path]) -> int:
    total = 0
    for path in files:
        try:
            total += path.stat().st_size
        except OSError:
            pass
    return total


def open_input(path: Path) -> tuple[IO[bytes], IO[bytes]]:
    """(stream to read lines from, raw file for the progress position); raises ``InputError``."""
    try:
        raw = open(path, "rb", buffering=_READ_BUFFER)  # noqa: SIM115 - the caller closes both
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None
    try:
        magic = raw.peek(4)[:4] if hasattr(raw, "peek") else b""
    except OSError as error:
        raw.close()
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None
    if magic.startswith(_GZIP_MAGIC):
        return gzip.GzipFile(fileobj=raw, mode="rb"), raw  # type: ignore[return-value]
    if magic.startswith(_ZSTD_MAGIC):
        raw.close()
        raise InputError(f"cannot read {path}: zstd-compressed; decompress it first (zstd -d)")
    try:
        size = os.fstat(raw.fileno()).st_size
    except (OSError, ValueError):
        size = READ_CHUNK
    return Lines(raw, size), raw  # type: ignore[return-value]
