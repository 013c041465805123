"""The docs can't drift: the attribute reference matches the code, and every Python block runs."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ragtrace
from ragtrace._internal import names
from ragtrace._internal.names import reference

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def test_attribute_reference_is_generated_from_names():
    assert (ROOT / "docs" / "attributes.md").read_text() == reference.render(), (
        "docs/attributes.md is stale: python -m ragtrace._internal.names.reference > docs/attributes.md"
    )


def _documented_patterns() -> list[re.Pattern[str]]:
    patterns = []
    for info in names.ATTRIBUTES:
        key = re.escape(info.key)
        key = key.replace(re.escape("{i}"), r"\d+").replace(re.escape("<key>"), r"\w+")
        key = re.sub(r"\\\{([\w,]+)\\\}", lambda m: "(" + "|".join(m.group(1).split(",")) + ")", key)
        patterns.append(re.compile(key + "$"))
    return patterns


def test_every_emitted_attribute_is_documented(spans):
    with ragtrace.rag_pipeline("docs", query="q", version="1", query_id="q-1") as run:
        with ragtrace.embed(model="m", provider="p") as e:
            e.record([[0.0, 1.0]], input_tokens=2, text="q")
        with ragtrace.retrieve("q", data_source="kb", top_k=3) as r:
            r.record([{"id": "a", "score": 0.9, "content": "alpha", "tokens": 1}, {"id": "b", "score": 0.2, "content": "beta", "tokens": 1}])
        with ragtrace.rerank(model="x", top_n=1, query="q") as rr:
            rr.record([r.chunks[0]])
        with ragtrace.assemble(max_tokens=10) as ctx:
            ctx.add(r.chunks[0])
            ctx.render([{"role": "system", "content": "{context}"}, {"role": "user", "content": "q"}])
        with ragtrace.generate(model="m", provider="p", prompt=ctx.prompt, temperature=0.1, max_tokens=5) as g:
            g.record({"id": "r1", "model": "m", "choices": [{"message": {"content": "[1] [7]"}, "finish_reason": "stop"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
    assert run.metrics
    patterns = _documented_patterns()
    emitted = {key for span in spans.all() for key in span.attributes}
    undocumented = sorted(k for k in emitted if not any(p.match(k) for p in patterns))
    assert undocumented == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_python_blocks_run(page: Path, tmp_path: Path):
    blocks = BLOCK.findall(page.read_text())
    for number, code in enumerate(blocks, start=1):
        # each block runs in a fresh interpreter, as a reader would paste it
        result = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=120
        )
        assert result.returncode == 0, f"{page.name} block {number} failed:\n{code}\n{result.stderr[-2000:]}"


def test_every_emitted_metric_is_documented(metric_reader):
    from ragtrace._internal import names

    with ragtrace.rag_pipeline("docs", version="1", route="faq") as run:
        with ragtrace.retrieve("q") as r:
            r.record([{"id": "a", "score": 0.9, "content": "alpha"}])
        with ragtrace.retrieve("q") as empty:
            empty.record([])
        with ragtrace.assemble() as ctx:
            ctx.add(r.chunks[0])
        with ragtrace.generate(model="m") as g:
            list(g.stream(iter(["alpha ", "[1]"])))
    ragtrace.record_score(run, name="groundedness", value=1.0, scorer="code")
    data = metric_reader.get_metrics_data()
    emitted = {m.name for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    documented = {m.name.replace("<name>", "groundedness") for m in names.METRICS}
    # only a PhoenixExporter with a full queue emits the first (tests/test_phoenix_exporter.py), only
    # citations that name files (OpenAI file_search) the second (tests/integrations/test_file_figures.py)
    assert emitted == documented - {names.METRIC_PHOENIX_DROPPED_ANNOTATIONS, names.METRIC_FILE_RECALL_PROXY_HISTOGRAM}


def _table_after(text: str, heading: str) -> list[list[str]]:
    """The cells of the first Markdown table under ``heading``, header and rule left out."""
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def test_readme_figures_are_the_performance_pages_with_the_command_that_reproduces_each():
    readme = _table_after((ROOT / "README.md").read_text(encoding="utf-8"), "## What it costs")
    glance = _table_after((ROOT / "docs" / "performance.md").read_text(encoding="utf-8"), "## At a glance")
    assert readme and [row[:3] for row in glance] == readme
    for measured, figure, command in readme:
        assert re.fullmatch(r"`(make [\w-]+|python bench/bench_\w+\.py)`", command), command
        assert re.search(r"\d", figure), figure


def test_readme_quickstart_prints_no_warning(tmp_path):
    """Full content, every chunk with an id: nothing exported depends on the hash key."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    quickstart = BLOCK.findall(readme.split("## Quickstart", 1)[1])[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAGTRACE_", "OTEL_"))}
    env["PYTHONPATH"] = str(ROOT)
    done = subprocess.run([sys.executable, "-c", quickstart], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "'recall_proxy': 0.5" in done.stdout, done.stderr
    assert done.stderr == ""


def test_the_integration_lists_name_every_instrumented_library():
    """docs/integrations.md lists exactly what ``instrument()`` covers: the names it takes, the
    extras and the ``opentelemetry_instrumentor`` entry points (pyproject.toml)."""
    from ragtrace._internal.integrations import LIBRARIES

    page = (ROOT / "docs" / "integrations.md").read_text(encoding="utf-8")
    named = re.search(r'# or only the ones named: (.*)', page).group(1)
    assert re.findall(r'"(\w+)"', named) == list(LIBRARIES)
    extras = re.search(r"pip install 'ragtrace\[langchain\]'\s+# or (.*): adds", page).group(1)
    assert ["langchain", *re.findall(r"\[([\w-]+)\]", extras)] == [library.extra for library in LIBRARIES.values()]
    points = re.findall(r"^(ragtrace_\w+) = ", (ROOT / "pyproject.toml").read_text(encoding="utf-8"), re.M)
    sentence = re.search(r"registered under the `opentelemetry_instrumentor` entry point as(.*?)\. ragtrace declares", page, re.S).group(1)
    assert re.findall(r"`(ragtrace_\w+)`", sentence) == points == [f"ragtrace_{name}" for name in LIBRARIES]
