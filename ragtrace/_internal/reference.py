"""Renders docs/attributes.md from the ``ATTRIBUTES`` and ``METRICS`` tables in names.py.

Regenerate with ``python -m ragtrace._internal.reference > docs/attributes.md``; a test fails when
the page and the constants drift apart.
"""

from __future__ import annotations

from .names import ATTRIBUTES, METRICS

HEADER = """# Attribute reference

Generated from `ragtrace/_internal/names.py` (`python -m ragtrace._internal.reference > docs/attributes.md`);
a test fails when this page and the code drift apart.

*Content* attributes carry user text (queries, chunks, prompts, completions). They pass through the
content policy: recorded in `full` mode (after the optional redactor), never in `redact` or `hash`
mode. Everything else is ids, scores, counts, positions, names or figures and is always recorded.

| attribute | type | stages | content | meaning |
|---|---|---|---|---|
"""


METRICS_HEADER = """
## Metrics

Recorded for every pipeline, sampled-out traces included, through the configured (or global)
MeterProvider. Labels are bounded: the pipeline's name, `version` and `route` (`gen_ai.workflow.name`,
`rag.pipeline.version`, `rag.pipeline.route`), and for stage metrics the operation, stage, model,
provider, data source and error type. Never ids or text.

| metric | instrument | unit | meaning |
|---|---|---|---|
"""


def render() -> str:
    rows = [
        f"| `{a.key}` | {a.type} | {a.stages} | {'yes' if a.content else ''} | {a.description} |"
        for a in ATTRIBUTES
    ]
    metrics = [f"| `{m.name}` | {m.instrument} | `{m.unit}` | {m.description} |" for m in METRICS]
    return HEADER + "\n".join(rows) + "\n" + METRICS_HEADER + "\n".join(metrics) + "\n"


if __name__ == "__main__":
    print(render(), end="")
