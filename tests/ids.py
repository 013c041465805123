"""Deterministic span and trace ids for tests that compare exact exporter output, and the suite's hash key."""

from __future__ import annotations

import hashlib

from opentelemetry.sdk.trace.id_generator import IdGenerator

# conftest puts this in RAGTRACE_HASH_KEY for the whole session (subprocesses inherit it), so
# content-derived ids are stable and known: ``keyed_digest`` is the construction docs/redaction.md
# documents, computed here without ragtrace.
HASH_KEY = "ragtrace-test-suite-key"


def keyed_digest(text: str, purpose: bytes = b"ragtrace-chunk") -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=8, key=HASH_KEY.encode(), person=purpose).hexdigest()


class CountingIds(IdGenerator):
    """Trace ids 0xab00..01, 0xab00..02...; span ids 0xcd00..01, 0xcd00..02..."""

    def __init__(self) -> None:
        self.trace = 0
        self.span = 0

    def generate_trace_id(self) -> int:
        self.trace += 1
        return (0xAB << 120) | self.trace

    def generate_span_id(self) -> int:
        self.span += 1
        return (0xCD << 56) | self.span
