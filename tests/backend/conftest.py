"""Fixtures for tests against a real Phoenix trace backend (see phoenix.py).

``phoenix_server`` installs Phoenix into the cached ``<repo>/.venv-phoenix`` (about 45 s the first time,
instant afterwards) and starts one server per session. If either step fails the requesting tests fail
(never skip) with the reason and the log tail.
"""

from __future__ import annotations

import re
import time
import uuid
from typing import Iterator

import pytest

from .phoenix import PhoenixError, PhoenixServer, ensure_phoenix_venv

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


@pytest.fixture
def phoenix_project(request: pytest.FixtureRequest) -> str:
    """A project name unique to this test: put it in the resource as ``openinference.project.name``."""
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name)[:60]
    return f"{base}-{uuid.uuid4().hex[:8]}"


def pytest_terminal_summary(terminalreporter) -> None:
    if _timings:
        parts = [f"venv {_timings['venv']:.1f} s"]
        if "ready" in _timings:
            parts.append(f"server ready {_timings['ready']:.1f} s")
        terminalreporter.write_line("phoenix backend: " + ", ".join(parts))
