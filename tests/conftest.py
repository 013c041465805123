"""Shared fixtures: the real OpenTelemetry SDK with an in-memory exporter, strict guard."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ids import HASH_KEY

os.environ["RAGTRACE_HASH_KEY"] = HASH_KEY  # before ragtrace hashes anything: stable ids, no random-key warning

from backend.phoenix import PhoenixError, PhoenixServer, ensure_phoenix_venv
from loopback import serve_chat
from ragtrace._internal.boundaries import auto_root
from ragtrace._internal.setup import config
from ragtrace._internal.core import guard, keyed
from ragtrace.cli import compiled

ROOT = Path(__file__).resolve().parent.parent


def pytest_sessionstart(session: pytest.Session) -> None:
    """Stop at once if a compiled report module is older than its source: the tests would run stale code."""
    stale = []
    for name in compiled.MODULES:
        source = ROOT / (name.replace(".", "/") + ".py")
        for suffix in EXTENSION_SUFFIXES:
            extension = source.with_name(source.stem + suffix)
            if extension.exists() and extension.stat().st_mtime < source.stat().st_mtime:
                stale.append(str(extension.relative_to(ROOT)))
    if stale:
        pytest.exit(f"stale compiled modules {stale}: rebuild them with `make test` (or `python setup.py build_ext --inplace`)", returncode=3)


class Spans:
    """The spans a test produced, with lookups by name and by ragtrace stage."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider()
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def all(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def by_stage(self, stage: str) -> list[ReadableSpan]:
        return [s for s in self.all() if s.attributes.get("rag.stage") == stage]

    def one(self, stage: str) -> ReadableSpan:
        found = self.by_stage(stage)
        assert len(found) == 1, f"expected one {stage} span, got {[s.name for s in self.all()]}"
        return found[0]

    def clear(self) -> None:
        self.exporter.clear()


@pytest.fixture(autouse=True)
def _strict_and_clean() -> Iterator[None]:
    """Internal errors fail ragtrace's own tests; configuration never leaks between tests."""
    previous = guard.set_strict(True)
    guard.reset_log_once()
    yield
    guard.set_strict(previous)
    auto_root.end_open()  # an automatic root a test left open must not take the next test's stages
    config.reset()


@pytest.fixture
def no_hash_key(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No configured or environment hash key (the suite runs under one, above): the random key,
    and its warning not given yet."""
    monkeypatch.delenv("RAGTRACE_HASH_KEY")
    keyed.forget()
    yield
    keyed.forget()


@pytest.fixture
def metric_reader(spans: "Spans") -> Iterator[InMemoryMetricReader]:
    """ragtrace configured with the ``spans`` provider and a MeterProvider read in memory."""
    found = InMemoryMetricReader()
    config.configure(tracer_provider=spans.provider, meter_provider=MeterProvider(metric_readers=[found]))
    yield found
    found.shutdown()


@pytest.fixture
def spans() -> Iterator[Spans]:
    """A provider configured as ragtrace's, capturing finished spans in memory."""
    captured = Spans()
    config.configure(tracer_provider=captured.provider)
    yield captured
    captured.provider.shutdown()


@pytest.fixture
def chat_server() -> Iterator[tuple[str, list[dict]]]:
    """A chat-completions server like the OpenAI API on loopback: (base URL, requests received)."""
    yield from serve_chat()


# --- the real Phoenix backend (tests/backend/phoenix.py) --------------------------------------------
# ``phoenix_server`` installs Phoenix into the cached ``<repo>/.venv-phoenix`` (about 45 s the first
# time, instant afterwards) and starts one server per session, shared by the backend and CLI tests.
# If either step fails the requesting tests fail (never skip) with the reason and the log tail.
_timings: dict[str, float] = {}


@pytest.fixture(scope="session")
def phoenix_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PhoenixServer]:
    t0 = time.monotonic()
    try:
        phoenix = ensure_phoenix_venv()
    except PhoenixError as exc:
        pytest.fail(f"could not install the Phoenix backend: {exc}", pytrace=False)
    _timings["venv"] = time.monotonic() - t0

    # pytest keeps this dir (and its phoenix.log) for inspection after the run.
    server = PhoenixServer(phoenix, workdir=tmp_path_factory.mktemp("phoenix"))
    try:
        server.start()
    except PhoenixError as exc:
        pytest.fail(f"could not start the Phoenix backend: {exc}", pytrace=False)
    _timings["ready"] = server.ready_seconds or 0.0
    try:
        yield server
    finally:
        server.stop()


def pytest_terminal_summary(terminalreporter) -> None:
    if _timings:
        parts = [f"venv {_timings['venv']:.1f} s"]
        if "ready" in _timings:
            parts.append(f"server ready {_timings['ready']:.1f} s")
        terminalreporter.write_line("phoenix backend: " + ", ".join(parts))


@pytest.fixture
def global_provider_slot(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lets a test install a global TracerProvider (``configure(exporter=...)`` does) and takes it
    away afterwards: the API sets it once per process, so a leaked one traces every later test."""
    monkeypatch.setattr(trace, "_TRACER_PROVIDER", None)
    monkeypatch.setattr(trace, "_TRACER_PROVIDER_SET_ONCE", trace.Once())
