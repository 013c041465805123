"""Deterministic span and trace ids for tests that compare exact exporter output."""

from __future__ import annotations

from opentelemetry.sdk.trace.id_generator import IdGenerator


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
