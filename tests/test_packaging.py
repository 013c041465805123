"""What a user installs: the wheel and sdist built from this checkout, installed into a fresh venv.

``python -m build`` must give a pure ``py3-none-any`` wheel (even in a checkout where ``make``
compiled the report path in place) with no C, Cython or build leftovers, pass ``twine check``,
write nothing into the checkout, and install with no deprecation warning. The installed package
then runs ``ragtrace --version``, the README quickstart and ``ragtrace report`` on the traces the
quickstart wrote. The opt-in compiled build (``-C compile=true``) gives a platform wheel whose
report path really is compiled and which still ships no ``.c`` files.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from ragtrace.cli import compiled

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.heavy

# Never part of what a build may write: the developer's own environments and caches.
_NOT_WATCHED = {".git", "__pycache__", ".pytest_cache", ".hypothesis", "out"}
_LEFTOVERS = re.compile(r"\.(c|pyx|pxd|so|pyd|o)$|(^|/)(build|.*\.egg-info)/")


def _run(*argv: str | Path, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    completed = subprocess.run(
        [str(a) for a in argv], capture_output=True, text=True, cwd=cwd, timeout=timeout, env={**os.environ, **(env or {})}
    )
    assert completed.returncode == 0, f"{argv} failed:\n{completed.stdout[-4000:]}\n{completed.stderr[-4000:]}"
    return completed.stdout + completed.stderr


def _checkout_state() -> dict[str, int]:
    """Every file of the checkout outside .git, venvs and caches, with its modification time."""
    state = {}
    for directory, subdirectories, files in os.walk(ROOT):
        subdirectories[:] = [d for d in subdirectories if d not in _NOT_WATCHED and not d.startswith(".venv")]
        for name in files:
            path = Path(directory, name)
            state[str(path.relative_to(ROOT))] = path.lstat().st_mtime_ns
    return state


def _build(out: Path, *settings: str) -> list[Path]:
    before = _checkout_state()
    log = _run(sys.executable, "-m", "build", "--outdir", out, *settings, ROOT)
    after = _checkout_state()
    changed = sorted(path for path in after.keys() | before.keys() if before.get(path) != after.get(path))
    assert not changed, f"building wrote into the checkout: {changed[:20]}"
    assert not re.search(r"deprecat", log, re.IGNORECASE), log
    return sorted(out.iterdir())


def _wheel_names(wheel: Path) -> list[str]:
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist()


def _fresh_venv(where: Path) -> Path:
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    return where / "bin"


def _quickstart() -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quickstart", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def pure_artefacts(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    return _build(tmp_path_factory.mktemp("dist"))


def test_default_build_is_a_clean_pure_wheel_and_an_sdist(pure_artefacts):
    names = [p.name for p in pure_artefacts]
    assert names == ["ragtrace-0.1.0-py3-none-any.whl", "ragtrace-0.1.0.tar.gz"], names
    wheel = _wheel_names(pure_artefacts[0])
    assert "ragtrace/cli/reader.py" in wheel and "ragtrace/py.typed" in wheel
    # the fleet view ships as data (ragtrace dashboard grafana|rules prints these)
    assert {"ragtrace/dashboards/ragtrace-rag-quality.json", "ragtrace/dashboards/ragtrace.rules.yml"} <= set(wheel)
    assert [n for n in wheel if _LEFTOVERS.search(n)] == []
    assert [n for n in wheel if n.startswith(("tests/", "tools/"))] == []
    metadata = zipfile.ZipFile(pure_artefacts[0]).read("ragtrace-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in metadata
    _run(sys.executable, "-m", "twine", "check", "--strict", *pure_artefacts)


def test_installed_wheel_runs_the_cli_and_the_readme_quickstart(pure_artefacts, tmp_path):
    bin_dir = _fresh_venv(tmp_path / "venv")
    log = _run(bin_dir / "python", "-m", "pip", "install", "--disable-pip-version-check", pure_artefacts[0])
    assert not re.search(r"deprecat", log, re.IGNORECASE), log
    version = _run(bin_dir / "ragtrace", "--version", cwd=tmp_path)
    assert version.strip() == f"ragtrace 0.1.0 (report path: {compiled.PURE})"

    quickstart = _quickstart()
    shown = _run(bin_dir / "python", "-c", quickstart, cwd=tmp_path)
    assert "'recall_proxy': 0.5" in shown, shown  # what the README says it prints
    traces = tmp_path / "quickstart.jsonl"
    with_file = quickstart.replace('exporter="console"', f'exporter="jsonl:{traces}"')
    assert with_file != quickstart
    _run(bin_dir / "python", "-c", with_file, cwd=tmp_path)
    report = _run(bin_dir / "ragtrace", "report", "--markdown", traces, cwd=tmp_path)
    assert "4 spans, 1 traces, 1 pipeline runs" in report, report
    assert "| recall_proxy | 0.50 | 0.50 | 0.50 | 1 |" in report and "| support-qa | 1 | 1 | 0 |" in report, report
    rules = _run(bin_dir / "ragtrace", "dashboard", "rules", cwd=tmp_path)
    assert rules == (ROOT / "ragtrace" / "dashboards" / "ragtrace.rules.yml").read_text(encoding="utf-8")


def test_opt_in_compiled_wheel(tmp_path):
    artefacts = _build(tmp_path / "dist", "--wheel", "-C", "compile=true")
    assert len(artefacts) == 1 and re.fullmatch(r"ragtrace-0\.1\.0-cp3\d+-cp3\d+-linux_\w+\.whl", artefacts[0].name), artefacts
    wheel = _wheel_names(artefacts[0])
    extensions = {n.split(".")[0].replace("/", ".") for n in wheel if n.endswith(".so")}
    assert extensions == set(compiled.MODULES)
    assert [n for n in wheel if re.search(r"\.(c|pyx|o)$", n)] == []
    bin_dir = _fresh_venv(tmp_path / "venv")
    _run(bin_dir / "python", "-m", "pip", "install", "--disable-pip-version-check", artefacts[0])
    assert _run(bin_dir / "ragtrace", "--version", cwd=tmp_path).strip() == f"ragtrace 0.1.0 (report path: {compiled.COMPILED})"
