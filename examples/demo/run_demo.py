"""`make demo`: a real offline RAG pipeline answering questions about ragtrace, traced by ragtrace.

Prints each answer with its span tree and figures, writes the traces to a JSON-lines file, and
ends with the `ragtrace report` summary of that file.

    python examples/demo/run_demo.py [--out out/demo-traces.jsonl] [--phoenix http://127.0.0.1:6006]

With --phoenix (`make demo PHOENIX=URL`) the spans also go to a Phoenix server you started yourself
(`pip install arize-phoenix && phoenix serve`), project "ragtrace-demo", through ragtrace's
PhoenixExporter: the figures show as annotations, each retrieved document says whether it was
placed and cited, and the questions of one run form one session.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parent))

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor

import pipeline
import ragtrace
from ragtrace.exporters import ConsoleTreeExporter, JsonLinesExporter

PROJECT = "ragtrace-demo"
QUESTIONS = [
    "What is the cited-chunk recall proxy?",
    "What is a golden set?",
    "What does the embed span record?",
    "What does the generate span record?",
]


def tracer_provider(out: Path, phoenix: str | None) -> TracerProvider:
    resource = Resource.create({"service.name": "ragtrace-demo", "openinference.project.name": PROJECT})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(SimpleSpanProcessor(ConsoleTreeExporter()))
    provider.add_span_processor(BatchSpanProcessor(JsonLinesExporter(out)))
    if phoenix:
        from ragtrace.exporters import PhoenixExporter

        provider.add_span_processor(BatchSpanProcessor(PhoenixExporter(phoenix, project=PROJECT)))
    return provider


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("out/demo-traces.jsonl"))
    parser.add_argument("--phoenix", metavar="URL", help="also export to a Phoenix server, e.g. http://127.0.0.1:6006")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="how many of the questions to ask")
    args = parser.parse_args(argv)

    if args.out.exists():
        args.out.unlink()
    provider = tracer_provider(args.out, args.phoenix)
    ragtrace.configure(tracer_provider=provider)

    started = time.perf_counter()
    session = f"demo-{time.strftime('%Y%m%dT%H%M%S')}-{os.getpid()}"  # one run's questions: one session
    pipeline.setup()
    print(f"models loaded and corpus embedded in {time.perf_counter() - started:.1f} s\n")
    asked = QUESTIONS[: args.questions]
    citing = 0  # answers citing at least one chunk that was in their prompt (the figure `cited`)
    for question in asked:
        began = time.perf_counter()
        print(f"Q: {question}")
        text, run = pipeline.answer(question, session_id=session)  # the span tree prints as the pipeline ends
        print(f"A: {text.strip()}")
        recall = run.metrics.get("recall_proxy")
        shown = f"{recall:.2f}" if isinstance(recall, float) else f"not measurable ({run.status})"
        print(f"   ({time.perf_counter() - began:.1f} s)  recall_proxy={shown}\n")
        citing += (run.metrics.get("cited") or 0) > 0
    provider.shutdown()
    print(f"traces written to {args.out}; whole run {time.perf_counter() - started:.1f} s\n")

    from ragtrace.cli import main as ragtrace_cli

    code = ragtrace_cli(["report", str(args.out)])
    print(f"\n{citing} of {len(asked)} answers cited a chunk that was in their context")
    return code


if __name__ == "__main__":
    sys.exit(main())
