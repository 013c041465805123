"""The optional compiled build of the report path (setup.py, ``ragtrace.cli.compiled``).

The same sources run either way; these tests check that the build in use here really is compiled
(so the other CLI tests exercise the extension modules), and that a pure-Python copy of the package
gives byte-identical output, warnings and exit codes on every input shape the other tests use.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ragtrace.cli import compiled

from .test_decoders import ODD_LINES, fixture_inputs
from .test_eval import GOLDEN, _golden

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.compiled


@pytest.fixture
def json_decoder() -> str:
    """Overrides conftest's per-decoder parametrisation: the calls below choose their decoder."""
    return "both"

# Runs in a child process with one build of ragtrace first on sys.path: each CLI call in-process,
# its stdout, stderr, exit code and --html page collected as JSON.
_DRIVER = """
import contextlib, io, json, sys
from pathlib import Path
from ragtrace.cli import compiled, main
calls = json.loads(sys.stdin.read())
results = []
for argv, html in calls:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    results.append([code, out.getvalue(), err.getvalue(), Path(html).read_text() if html else None])
print(json.dumps({"build": compiled.build(), "results": results}))
"""


def _run_build(root: Path, calls: list, cwd: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    completed = subprocess.run(
        [sys.executable, "-c", _DRIVER], input=json.dumps(calls), capture_output=True, text=True, cwd=cwd, env=env, timeout=600
    )
    assert completed.returncode == 0, completed.stderr
    return json.loads(completed.stdout)


def _pure_copy(target: Path) -> Path:
    shutil.copytree(ROOT / "ragtrace", target / "ragtrace", ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"))
    return target


def test_the_report_path_runs_compiled_here():
    """make test builds it (setup.py); a failed or stale build would silently test pure Python only."""
    per_module = {name: compiled.is_compiled(name) for name in compiled.MODULES}
    assert compiled.build() == compiled.COMPILED, f"not compiled: {[n for n, c in per_module.items() if not c]} (run make test)"


def test_pure_python_and_compiled_builds_give_identical_output(tmp_path):
    inputs = fixture_inputs(tmp_path / "inputs")
    odd = tmp_path / "odd.jsonl"
    odd.write_bytes("\n".join(line for lines in ODD_LINES.values() for line in lines).encode("utf-8", "surrogateescape") + b"\n")
    inputs["odd lines"] = [odd]
    golden = _golden(tmp_path / "golden.jsonl", *GOLDEN)
    calls: list = []
    for name, paths in inputs.items():
        files = [str(p) for p in paths]
        calls.append([["report", "--json", "--max-warnings", "1000", *files], None])
        calls.append([["report", "--markdown", "--decoder", "json", *files], None])
        calls.append([["eval", "--golden", str(golden), "--json", *files], None])
        html = tmp_path / f"{len(calls)}.html"
        calls.append([["report", "--html", str(html), "--fail-under", "recall_proxy=0.9", *files], str(html)])
    cwd = tmp_path / "cwd"
    cwd.mkdir()

    with_extensions = _run_build(ROOT, calls, cwd)
    pure = _run_build(_pure_copy(tmp_path / "pure"), calls, cwd)

    assert with_extensions["build"] == compiled.COMPILED and pure["build"] == compiled.PURE
    assert len(pure["results"]) == len(calls)
    for call, a, b in zip(calls, with_extensions["results"], pure["results"]):
        assert a == b, call[0]
    reports = [json.loads(out) for (argv, _), (_, out, _, _) in zip(calls, pure["results"]) if argv[:2] == ["report", "--json"]]
    assert all(report["inputs"]["runs"] > 0 for report in reports[:-1])  # every input but the odd lines has runs
    codes = {result[0] for result in pure["results"]}
    assert codes >= {0} and len(codes) > 1  # the --fail-under gate fails on some inputs: exit codes are compared too
