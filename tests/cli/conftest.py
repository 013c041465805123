"""Fixtures for the CLI tests: the known-number export, and a runner for ``ragtrace.cli.main``."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from ragtrace.cli import main, reader

from .helpers import write_known


@dataclass
class Result:
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)


@pytest.fixture(autouse=True, params=[reader.DECODER_JSON, reader.DECODER_MSGSPEC])
def json_decoder(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Every CLI test runs with both JSON decoders: the results must not depend on which one reads."""
    if request.param == reader.DECODER_MSGSPEC and not reader.fast_decoder_available():
        pytest.skip("msgspec is not installed (the cli extra)")
    monkeypatch.setattr(reader, "AUTO_DECODER", request.param)
    return request.param


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Callable[..., Result]:
    """Run the CLI in-process (from an empty directory, so no pyproject.toml is picked up)."""
    workdir = tmp_path / "cwd"
    workdir.mkdir()
    monkeypatch.chdir(workdir)

    def run(*args: Any) -> Result:
        capsys.readouterr()
        code = main([str(a) for a in args])
        captured = capsys.readouterr()
        return Result(code, captured.out, captured.err)

    return run


@pytest.fixture
def known(tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The five-run export of helpers.write_known, and each run's online metrics."""
    path = tmp_path / "known.jsonl"
    metrics = write_known(path)
    return path, metrics


def by_query(document: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {row["query"]: row for row in document["traces"]}
