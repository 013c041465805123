"""Plain files split into lines in large reads: what the report reads export lines with.

``BufferedReader.readline`` scans for the line end byte by byte and regrows its result for lines
longer than its buffer, and export lines are often megabytes long.
"""

from __future__ import annotations

from typing import IO

READ_CHUNK = 4 << 20  # plain files are read in chunks this large and split into lines with bytes.find


class Lines:
    """``readline(limit)``, ``read(size)`` and ``close()`` over a plain file, in large reads.

    ``BufferedReader.readline`` scans for the line end byte by byte and regrows its result for
    lines longer than its buffer; export lines are often megabytes long. Here the file is read
    into one reusable buffer and lines are found with ``bytearray.find`` (memchr), so each line is
    copied once, into the ``bytes`` returned.
    """

    __slots__ = ("_file", "_buffer", "_start", "_end", "_scanned", "_eof")

    def __init__(self, file: IO[bytes], size: int = READ_CHUNK) -> None:
        self._file = file
        self._buffer = bytearray(min(READ_CHUNK, max(4096, size + 1)))  # small files, small buffer
        self._start = 0  # the unread bytes are _buffer[_start:_end]
        self._end = 0
        self._scanned = 0  # _buffer[_start:_scanned] holds no newline
        self._eof = False

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
        else:
            self._end = end
            self._eof = True

    def read(self, size: int) -> bytes:
        start, end = self._start, self._end
        with memoryview(self._buffer) as view:
            head = bytes(view[start : min(end, start + size)])
        self._start = self._scanned = start + len(head)
        if len(head) >= size or self._eof:
            return head
        self._start = self._end = self._scanned = 0
        return head + self._file.read(size - len(head))

    def close(self) -> None:
        self._file.close()
