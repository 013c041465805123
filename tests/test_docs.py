"""The docs can't drift: the attribute reference matches the code, and every Python block runs."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import ragtrace
from ragtrace._internal import names, reference

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)


def test_attribute_reference_is_generated_from_names():
    assert (ROOT / "docs" / "attributes.md").read_text() == reference.render(), (
        "docs/attributes.md is stale: python -m ragtrace._internal.reference > docs/attributes.md"
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
    # only a PhoenixExporter with a full queue emits this one (tests/test_phoenix_exporter.py)
    assert emitted == documented - {names.METRIC_PHOENIX_DROPPED_ANNOTATIONS}
