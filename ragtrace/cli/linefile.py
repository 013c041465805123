"""Plain files split into lines in large reads: what the report reads export lines with.

Large files (``DROP_CACHE_BYTES`` and up, read from their start) also hand their pages back to the
kernel as they are read.
"""

from __future__ import annotations

import os
from typing import IO

READ_CHUNK = 4 << 20  # plain files are read in chunks this large and split into lines with bytes.find
DROP_CACHE_BYTES = 64 << 20  # files at least this large leave the page cache as they are read
_DROP_EVERY = 32 << 20  # ...in steps of this many bytes


class Lines:
    """``readline(limit)``, ``read(size)`` and ``close()`` over a plain file, in large reads.

    ``BufferedReader.readline`` scans for the line end byte by byte and regrows its result for
    lines longer than its buffer; export lines are often megabytes long. Here the file is read
    into one reusable buffer and lines are found with ``bytearray.find`` (memchr), so each line is
    copied once, into the ``bytes`` returned.
    """

    __slots__ = ("_file", "_buffer", "_start", "_end", "_scanned", "_eof", "_fd", "_read", "_dropped")

    def __init__(self, file: IO[bytes], size: int = READ_CHUNK) -> None:
        self._file = file
        self._buffer = bytearray(min(READ_CHUNK, max(4096, size + 1)))  # small files, small buffer
        self._start = 0  # the unread bytes are _buffer[_start:_end]
        self._end = 0
        self._scanned = 0  # _buffer[_start:_scanned] holds no newline
        self._eof = False
        self._fd = _cache_dropping_fd(file) if size >= DROP_CACHE_BYTES else None
        self._read = self._dropped = 0  # file bytes read so far; pages before _dropped released

    def readline(self, limit: int) -> bytes:
        while True:
            buffer, start, end = self._buffer, self._start, self._end
            stop = min(end, start + limit)
            found = buffer.find(b"\n", max(start, self._scanned), stop)
            if found >= 0:
                stop = found + 1
            elif stop - start < limit and not self._eof:
                self._scanned = end
                self._fill()
                continue
            self._start = self._scanned = stop
            with memoryview(buffer) as view:
                return bytes(view[start:stop])

    def _fill(self) -> None:
        """Read more: move the partial line to the front (growing the buffer if it is full)."""
        buffer, start, end = self._buffer, self._start, self._end
        if start:
            buffer[: end - start] = buffer[start:end]
            end -= start
            self._scanned -= start
            self._start = 0
        if end == len(buffer):
            buffer.extend(bytes(len(buffer)))
        with memoryview(buffer) as view:
            got = self._file.readinto(view[end:])
        if got:
            self._end = end + got
            self._account(got)
        else:
            self._end = end
            self._eof = True
            self._drop_cache()

    def _account(self, got: int) -> None:
        """Count ``got`` more bytes read from the file; release their pages every ``_DROP_EVERY`` bytes."""
        self._read += got
        if self._read - self._dropped >= _DROP_EVERY:
            self._drop_cache()

    def _drop_cache(self) -> None:
        """Tell the kernel the pages read so far won't be read again (see ``_cache_dropping_fd``)."""
        if self._fd is None or self._read == self._dropped:
            return
        try:
            os.posix_fadvise(self._fd, self._dropped, self._read - self._dropped, os.POSIX_FADV_DONTNEED)  # type: ignore[arg-type]
        except OSError:
            self._fd = None
            return
        self._dropped = self._read

    def read(self, size: int) -> bytes:
        start, end = self._start, self._end
        with memoryview(self._buffer) as view:
            head = bytes(view[start : min(end, start + size)])
        self._start = self._scanned = start + len(head)
        if len(head) >= size or self._eof:
            return head
        self._start = self._end = self._scanned = 0
        rest = self._file.read(size - len(head))
        self._account(len(rest))
        return head + rest

    def close(self) -> None:
        self._drop_cache()
        self._file.close()


def _cache_dropping_fd(file: IO[bytes]) -> int | None:
    """The descriptor to release a large file's pages through as they are read; None where that can't be done.

    A multi-GB export read once would otherwise fill the page cache, pushing out other programs'
    data, and, where memory is capped (containers), the kernel reclaims pages in the reading
    process: measured here, a cold 3 GB read took 5.1 to 5.5 s of system time without the hint
    and 0.4 to 0.5 s with it (``bench/bench_report.py`` prints user and system time apart).
    """
    if not hasattr(os, "posix_fadvise"):
        return None
    try:
        return file.fileno()
    except (OSError, AttributeError, ValueError):
        return None
