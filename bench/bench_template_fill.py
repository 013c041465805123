"""Template filling without a cache: what parsing each template afresh costs (issue 16 item 9).

``assembly.fill`` used to parse templates and chat messages of up to 2,048 characters through a
process-wide LRU cache (128 entries), which kept that text, content included, after the pipeline
ended. It now splits each template afresh in one C-level ``re.split``. This script times both side
by side in one run, interleaved over rounds (``interleaved.medians``), so the machine's noise falls
on both alike:

- ``fill`` alone on a chunk format (called once per chunk) and on a chat system message;
- a whole redact-mode pipeline (retrieve 8 chunks, assemble them into a chat template, generate),
  traced by a real SDK provider whose spans are dropped, with the old cached ``fill`` swapped in
  for the ``cached`` rounds.

    python bench/bench_template_fill.py

Exit status 1 when the whole pipeline is more than 2% slower uncached.
"""

from __future__ import annotations

import functools
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402

import ragtrace  # noqa: E402
from interleaved import medians  # noqa: E402
from ragtrace._internal.stages import assemble_stage
from ragtrace._internal.core import assembly

BAR = 1.02
_VARIABLE = re.compile(r"\{(\w+)\}")


# --- the cached fill this replaced (as it was on main before issue 16 item 9) -------------------
def _template_parts(template: str) -> tuple[str, ...]:
    parts: list[str] = []
    last = 0
    for match in _VARIABLE.finditer(template):
        parts += [template[last : match.start()], match.group(0)]
        last = match.end()
    parts.append(template[last:])
    return tuple(parts)


_cached_parts = functools.lru_cache(maxsize=128)(_template_parts)


def cached_fill(template: str, variables: Mapping[str, Any]) -> str:
    parts = _cached_parts(template) if len(template) <= 2048 else _template_parts(template)
    if len(parts) == 1:
        return template
    return "".join(
        part if index % 2 == 0 else str(variables[part[1:-1]]) if part[1:-1] in variables else part
        for index, part in enumerate(parts)
    )


FILLS = {"cached": cached_fill, "uncached": assembly.fill}


def use(mode: str) -> None:
    assembly.fill = assemble_stage.fill = FILLS[mode]


# --- workloads ----------------------------------------------------------------------------------
CHUNK_FORMAT = assembly.DEFAULT_CHUNK_FORMAT
SYSTEM = "You are a careful assistant for the support team. Answer only from the sources below and cite them as [n].\n\n{context}"
DOCS = [{"id": f"kb-{i}", "content": f"Passage {i} of the knowledge base, about refunds and returns, " * 3} for i in range(8)]
TEMPLATE = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "Question: {question}"}]


def fill_chunk_format() -> None:
    fill = assembly.fill
    for position in range(1, 9):
        fill(CHUNK_FORMAT, {"label": position, "content": "\x00"})


def fill_system_message() -> None:
    assembly.fill(SYSTEM, {"question": "How long does a refund take?"})


def pipeline() -> None:
    with ragtrace.rag_pipeline("bench", query="How long does a refund take?"):
        with ragtrace.retrieve("How long does a refund take?") as r:
            r.record(DOCS)
        with ragtrace.assemble() as ctx:
            for chunk in r.chunks:
                ctx.add(chunk)
            prompt = ctx.render(TEMPLATE, question="How long does a refund take?")
        with ragtrace.generate(model="m", prompt=prompt) as g:
            g.record("Refunds take 5 days [1][3].")


def main() -> int:
    ragtrace.configure(tracer_provider=TracerProvider(), capture_content="redact", hash_key="bench-template-fill-key")  # spans dropped
    modes = ["cached", "uncached"]
    rows = [
        ("fill x8, chunk format", fill_chunk_format, 5000),
        ("fill, chat system message", fill_system_message, 20000),
        ("whole pipeline, 8 chunks", pipeline, 400),
    ]
    print(f"load average {os.getloadavg()[0]:.2f}")
    print(f"{'workload':<28}{'cached us':>11}{'uncached us':>13}{'ratio':>8}")
    ratio = 1.0
    for title, call, calls in rows:
        median = medians(modes, use, call, calls=calls, repeats=9, warmup=calls // 10)
        ratio = median["uncached"] / median["cached"]
        print(f"{title:<28}{median['cached'] * 1e6:>11.2f}{median['uncached'] * 1e6:>13.2f}{ratio:>8.3f}")
    use("uncached")
    return 0 if ratio <= BAR else 1


if __name__ == "__main__":
    sys.exit(main())
