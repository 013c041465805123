"""The bounded memory of finished trace ids that lets the reader recognise late spans."""

from __future__ import annotations

from array import array
from collections import OrderedDict


class FinishedTraces:
    """The ids of the last ``capacity`` finished traces, to recognise late spans.

    Kept in flat arrays (an open-addressing table of positions in a ring of 32-byte ids) instead
    of a set of strings: tens of thousands of long-lived small objects, scattered among the
    millions of short-lived ones the reader allocates, slowed the whole report down by a fifth as
    it went on (memory locality). Slots are found by the id string's own (cached) hash; exact: a
    candidate is confirmed by comparing the id bytes. Ids
    that are not 32 ASCII characters (hex trace ids are) go to a small ordered dict instead.
    """

    __slots__ = ("_capacity", "_mask", "_table", "_hashes", "_ids", "_next", "_full", "_other")
    _WIDTH = 32

    def __init__(self, capacity: int) -> None:
        self._capacity = capacity = max(1, capacity)
        size = 1 << max(4, (capacity * 3).bit_length())  # load factor under 1/3
        self._mask = size - 1
        self._table = array("q", [-1]) * size  # ring position of the id in each slot; -1: empty
        self._hashes = array("q", [0]) * capacity  # hash(id string) at each ring position
        self._ids = bytearray(self._WIDTH * capacity)
        self._next = 0
        self._full = False
        self._other: OrderedDict[str, None] = OrderedDict()

    def __contains__(self, trace_id: str) -> bool:
        if len(trace_id) != self._WIDTH or not trace_id.isascii():
            return trace_id in self._other
        return self._find(hash(trace_id), trace_id) >= 0

    def _find(self, h: int, trace_id: str) -> int:
        """The table slot holding ``trace_id`` (whose hash is ``h``), or -1.

        The str's own hash is used (cached on the string: the reader has already hashed it as a
        dict key); the id is encoded only to confirm a candidate.
        """
        table, hashes, ids, mask, width = self._table, self._hashes, self._ids, self._mask, self._WIDTH
        i = h & mask
        key = None
        while True:
            position = table[i]
            if position < 0:
                return -1
            if hashes[position] == h:
                if key is None:
                    key = trace_id.encode("ascii")
                if ids[position * width : position * width + width] == key:
                    return i
            i = (i + 1) & mask

    def add(self, trace_id: str) -> None:
        if len(trace_id) != self._WIDTH or not trace_id.isascii():
            self._other[trace_id] = None
            if len(self._other) > self._capacity:
                self._other.popitem(last=False)
            return
        h = hash(trace_id)
        if self._find(h, trace_id) >= 0:
            return
        key = trace_id.encode("ascii")
        position, width = self._next, self._WIDTH
        if self._full:
            self._remove(position)
        self._ids[position * width : position * width + width] = key
        self._hashes[position] = h
        table, mask = self._table, self._mask
        i = h & mask
        while table[i] >= 0:
            i = (i + 1) & mask
        table[i] = position
        self._next = position + 1
        if self._next == self._capacity:
            self._next, self._full = 0, True

    def _remove(self, position: int) -> None:
        """Drop the id at ring ``position`` from the table (linear probing, backward-shift deletion)."""
        table, hashes, mask = self._table, self._hashes, self._mask
        i = hashes[position] & mask
        while table[i] != position:
            i = (i + 1) & mask
        j = i
        while True:
            j = (j + 1) & mask
            moved = table[j]
            if moved < 0:
                break
            home = hashes[moved] & mask
            # move the entry back into the hole unless its home lies cyclically in (i, j]
            if (i < j and (home <= i or home > j)) or (i > j and home <= i and home > j):
                table[i] = moved
                i = j
        table[i] = -1
