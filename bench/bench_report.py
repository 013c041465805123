"""Streaming speed and memory of ``ragtrace report``, as a ratio to decoding the same file with msgspec alone, and peak RSS at two input sizes.

Generates OTLP/JSON lines the way a BatchSpanProcessor + JsonLinesExporter would write them (one
export request of up to 512 spans per line), from real ragtrace pipelines run once through the SDK
and cloned with fresh trace and span ids: 6 spans per trace (pipeline, embed, retrieve, rerank,
assemble, generate), so 1,000,000 spans are about 167k traces. Each size is read in a fresh child
process (reader + per-run rows + aggregation, the whole report minus printing), on one core, once
per build and JSON decoder. Builds: ``compiled``, the repo tree as it is, with the report path's
modules (ragtrace/cli/compiled.py) compiled by Cython into extension modules (the opt-in build:
``make compiled``, which ``make test`` runs; skipped, and said so, when they are not built here),
and ``pure``, a copy of ``ragtrace/`` without the extension modules: what the default install
(``pip install ragtrace``, a pure-Python wheel) runs. Each
child reports the build it ran, and both builds must agree on runs, spans, traces and median
recall (the run stops with exit status 2 otherwise). Decoders: ``msgspec`` (in the ``cli`` extra,
what ``ragtrace report`` uses when it is installed) and the standard library's ``json`` (the
fallback).

**The yardstick.** Beside every report child, a fresh child decodes the same file, line by line,
with ``msgspec.json.decode`` and nothing else (to Python objects, the file read the same way): the
least any reader of this format written in Python does. The figure is the report's CPU time over
that child's, in the same run and condition, so a slower or busier host moves both (issue #25: the
absolute spans-per-second target of #18 is retired, since #18's own measurements moved by half with
the host's load and hour on the same code). Spans per CPU-second are printed beside it, as
information.

    .venv/bin/python bench/bench_report.py                   # 250k and 1M spans, both builds, both decoders
    .venv/bin/python bench/bench_report.py --sizes 100000    # quicker (one size: no memory verdict)
    .venv/bin/python bench/bench_report.py --decoders json   # one decoder
    .venv/bin/python bench/bench_report.py --builds pure     # one build
    .venv/bin/python bench/bench_report.py --keep DIR        # keep the generated files

Each measurement is made twice (``--conditions``): ``alone``, with nothing else running here, and
``contended``, while a neighbour process on another core streams memory (two 64 MB buffers copied
back and forth), a stand-in for the other tenants of a shared host at a busy hour: they take the
shared last-level cache and memory bandwidth, which a process that works through megabytes per
export line feels, and which CPU time does not exclude.

    .venv/bin/python bench/bench_report.py --conditions alone   # without the neighbour

Target: peak RSS flat in input size (it may grow by at most ``FLAT_MB`` from the smallest to the
largest size; the input grows by gigabytes). The exit status is 1 when it is not flat, 2 when a
figure can't be trusted. Each generated file is flushed to disk (fsync) before it is read.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import NoReturn

FLAT_MB = 16.0  # peak RSS growth, smallest to largest size, that still counts as flat
SPANS_PER_LINE = 512
_ROOT = Path(__file__).resolve().parent.parent


def _variants(workdir: Path, content: str) -> list[tuple[str, list[str], str]]:
    """(trace id, span ids, compact JSON of the spans) of a few real pipelines."""
    sys.path.insert(0, str(_ROOT))
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    import ragtrace
    from ragtrace.exporters import JsonLinesExporter

    path = workdir / "variants.jsonl"
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(JsonLinesExporter(path)))
    docs = [{"id": f"kb-{i}", "score": 1 - i / 20, "content": f"Passage {i}: facts about topic {i} that a reader may cite."} for i in range(12)]
    answers = ["Per [1] and [2], yes.", "See [1].", "No citation here.", "Both [2] and [4] apply [9]."]
    for variant in range(8):
        top_k = (4, 6, 8, 10)[variant % 4]
        labels = {"version": f"v{variant % 2}", "route": ("faq", "search")[variant % 2]}
        with ragtrace.rag_pipeline("bench", query=f"question {variant}", tracer_provider=provider, capture_content=content, **labels):
            with ragtrace.embed(model="e", tracer_provider=provider) as e:
                e.record([[0.0] * 8], input_tokens=5)
            with ragtrace.retrieve(f"question {variant}", top_k=top_k, tracer_provider=provider) as r:
                r.record(docs[:top_k])
            with ragtrace.rerank(model="r", top_n=3, tracer_provider=provider) as rr:
                rr.record(docs[: 3 + variant % 2])
            with ragtrace.assemble(tracer_provider=provider) as ctx:
                for doc in rr.chunks:
                    ctx.add(doc)
                prompt = ctx.render(question=f"question {variant}")
            with ragtrace.generate(model="m", prompt=prompt, tracer_provider=provider) as g:
                g.record(answers[variant % len(answers)])
    provider.shutdown()
    traces: dict[str, list[dict]] = {}
    for line in path.read_text().splitlines():
        for resource_spans in json.loads(line)["resourceSpans"]:
            for scope in resource_spans["scopeSpans"]:
                for span in scope["spans"]:
                    traces.setdefault(span["traceId"], []).append(span)
    out = []
    for trace_id, spans in traces.items():
        out.append((trace_id, [s["spanId"] for s in spans], ",".join(json.dumps(s, separators=(",", ":")) for s in spans)))
    return out


def generate(path: Path, spans: int, workdir: Path, content: str = "full") -> int:
    """Write about ``spans`` spans; returns the exact number written."""
    variants = _variants(workdir, content)
    head = '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":{"stringValue":"bench"}}]},"scopeSpans":[{"scope":{"name":"ragtrace"},"spans":['
    tail = "]}]}]}\n"
    written = 0
    trace_number = 0
    with open(path, "w", encoding="utf-8") as handle:
        batch: list[str] = []
        batch_spans = 0
        while written < spans:
            trace_id, span_ids, text = variants[trace_number % len(variants)]
            trace_number += 1
            text = text.replace(trace_id, f"{trace_number:032x}")
            for index, span_id in enumerate(span_ids):
                text = text.replace(span_id, f"{trace_number:012x}{index:04x}")
            batch.append(text)
            batch_spans += len(span_ids)
            written += len(span_ids)
            if batch_spans >= SPANS_PER_LINE:
                handle.write(head + ",".join(batch) + tail)
                batch, batch_spans = [], 0
        if batch:
            handle.write(head + ",".join(batch) + tail)
        # on disk before it is read: otherwise the kernel is still writing gigabytes back while the
        # report runs, competing for the machine's 2 cores and memory bandwidth (about 10% slower)
        handle.flush()
        os.fsync(handle.fileno())
    return written


def measure(path: Path, decoder: str, root: Path) -> dict:
    """Read and aggregate ``path`` in this process, with ragtrace from ``root``; the numbers for one size, build and decoder."""
    sys.path.insert(0, str(root))
    from ragtrace.cli.compiled import build
    from ragtrace.cli.diagnostics import Diagnostics
    from ragtrace.cli.report import ReadOptions, run_report
    from ragtrace.cli.settings import Settings

    usage = resource.getrusage(resource.RUSAGE_SELF)
    before = usage.ru_maxrss
    started = time.perf_counter()
    cpu_started = time.process_time()
    options = ReadOptions(progress=False, decoder=decoder)
    result = run_report([str(path)], Settings(), Diagnostics(open(os.devnull, "w"), quiet=True), options=options)
    elapsed = time.perf_counter() - started
    cpu = time.process_time() - cpu_started
    after = resource.getrusage(resource.RUSAGE_SELF)
    peak = after.ru_maxrss
    return {
        "build": build(),
        "decoder": decoder,
        "spans": result.stats.spans,
        "traces": result.stats.traces,
        "runs": result.runs,
        "bytes": result.stats.bytes,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "system_seconds": after.ru_stime - usage.ru_stime,  # reading the file: page cache, disk
        "spans_per_second": result.stats.spans / elapsed,
        "spans_per_cpu_second": result.stats.spans / cpu,
        "peak_rss_mb": peak / 1024,
        "rss_before_mb": before / 1024,
        "recall_p50": result.aggregator.overall.figures["recall_proxy"].percentile(50),
    }


def decode_only(path: Path) -> dict:
    """The yardstick: every line of ``path`` decoded by msgspec to Python objects, nothing else."""
    import msgspec

    decode = msgspec.json.decode
    started = time.perf_counter()
    cpu_started = time.process_time()
    lines = 0
    with open(path, "rb") as handle:
        for line in handle:
            decode(line)
            lines += 1
    return {
        "lines": lines,
        "seconds": time.perf_counter() - started,
        "cpu_seconds": time.process_time() - cpu_started,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }


def neighbour() -> NoReturn:
    """Stream memory until killed, as a busy neighbour on a shared host does (see ``--conditions``)."""
    first, second = bytearray(64 << 20), bytearray(64 << 20)
    while True:
        first[:] = second
        second[:] = first


def _measure_child(arguments: list[str], contended: bool) -> dict:
    """One fresh child process run with ``arguments`` (a report or the yardstick); with
    ``contended``, while a neighbour runs."""
    other = subprocess.Popen([sys.executable, __file__, "--neighbour"]) if contended else None
    try:
        if other is not None:
            time.sleep(0.5)  # let it allocate and start streaming
        child = subprocess.run(
            [sys.executable, __file__, *arguments], capture_output=True, text=True, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    finally:
        if other is not None:
            other.kill()
            other.wait()
    return json.loads(child.stdout)


def _fail(message: str) -> NoReturn:
    """A figure that can't be trusted: say why and stop with exit status 2."""
    print(f"bench_report: {message}", file=sys.stderr)
    raise SystemExit(2)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="250000,1000000", help="span counts, comma-separated")
    parser.add_argument("--keep", metavar="DIR", help="write the generated files here and keep them")
    parser.add_argument("--content", choices=("full", "redact"), default="full", help="content mode of the generated traces (default: full, the SDK default)")
    parser.add_argument("--decoders", default="msgspec,json", help="JSON decoders to measure, comma-separated (default: msgspec,json)")
    parser.add_argument("--builds", default="compiled,pure", help="builds of the report path to measure, comma-separated (default: compiled,pure)")
    parser.add_argument("--conditions", default="alone,contended", help="alone and/or contended (a neighbour streaming memory), comma-separated (default: both)")
    parser.add_argument("--neighbour", action="store_true", help=argparse.SUPPRESS)  # child mode: the memory-streaming neighbour
    parser.add_argument("--measure", metavar="FILE", help=argparse.SUPPRESS)  # child mode
    parser.add_argument("--decode-only", metavar="FILE", help=argparse.SUPPRESS)  # child mode: the yardstick
    parser.add_argument("--decoder", default="auto", help=argparse.SUPPRESS)  # child mode
    parser.add_argument("--root", default=str(_ROOT), help=argparse.SUPPRESS)  # child mode: where ragtrace is imported from
    args = parser.parse_args()
    if args.neighbour:
        neighbour()
    if args.measure:
        print(json.dumps(measure(Path(args.measure), args.decoder, Path(args.root))))
        return 0
    if args.decode_only:
        print(json.dumps(decode_only(Path(args.decode_only))))
        return 0

    load_at_start = os.getloadavg()[0]
    sys.path.insert(0, str(_ROOT))
    from ragtrace.cli import compiled
    from ragtrace.cli.reader import AUTO_DECODER, fast_decoder_available

    # what each child must report having run (ragtrace.cli.compiled.build())
    expected = {"compiled": compiled.COMPILED, "pure": compiled.PURE}
    here = compiled.build()
    default_build = "pure"  # what the default install runs: the compiled build is opt-in
    builds = [b.strip() for b in args.builds.split(",") if b.strip()]
    if set(builds) - set(expected):
        parser.error(f"--builds: expected compiled and/or pure, got {args.builds!r}")
    if "compiled" in builds and here != compiled.COMPILED:
        print(f"compiled: not built here (the report path is {here}; run make compiled): skipped")
        builds.remove("compiled")
    if not builds:
        _fail("no build left to measure")
    decoders = [d.strip() for d in args.decoders.split(",") if d.strip()]
    if not fast_decoder_available():
        _fail("msgspec is not installed (pip install 'ragtrace[cli]'): without it there is no yardstick, so no speed figure")
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if not conditions or set(conditions) - {"alone", "contended"}:
        parser.error(f"--conditions: expected alone and/or contended, got {args.conditions!r}")
    sizes = [int(s) for s in args.sizes.split(",")]
    workdir = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="ragtrace-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    same = ("runs", "spans", "traces", "recall_p50")  # what both builds must agree on, per file and decoder
    rows = []
    yardsticks: dict[tuple[str, int], dict] = {}  # (condition, spans): the msgspec-alone child's figures
    # the pure build: the same sources without the extension modules, first on the child's sys.path
    # (ahead of the editable install's finder, which setuptools appends to sys.meta_path)
    roots = {"compiled": _ROOT, "pure": Path(tempfile.mkdtemp(prefix="ragtrace-pure-"))}
    try:
        if "pure" in builds:
            shutil.copytree(_ROOT / "ragtrace", roots["pure"] / "ragtrace", ignore=shutil.ignore_patterns("*.so", "*.pyd", "*.c", "__pycache__"))
        for size in sizes:
            path = workdir / f"spans-{size}.jsonl"
            started = time.perf_counter()
            written = generate(path, size, workdir, args.content)
            print(f"generated {written:,} spans ({path.stat().st_size / 1_048_576:,.0f} MB) in {time.perf_counter() - started:.1f} s", file=sys.stderr)
            measured = []
            for condition in conditions:
                contended = condition == "contended"
                yardstick = _measure_child(["--decode-only", str(path)], contended)
                yardsticks[condition, written] = yardstick
                for build, decoder in itertools.product(builds, decoders):
                    row = _measure_child(["--measure", str(path), "--decoder", decoder, "--root", str(roots[build])], contended)
                    if row["build"] != expected[build]:
                        _fail(f"asked for the {build} build, but the child's report path was {row['build']}")
                    if row["spans"] != written:
                        _fail(f"the report read {row['spans']:,} spans of the {written:,} written to {path.name}")
                    ratio = row["cpu_seconds"] / yardstick["cpu_seconds"]
                    measured.append({**row, "build": build, "condition": condition, "ratio": ratio})
            for decoder in decoders:
                figures = {row["build"]: [row[key] for key in same] for row in measured if row["decoder"] == decoder}
                if len({tuple(values) for values in figures.values()}) > 1:
                    _fail(f"the builds disagree on {'/'.join(same)} for {path.name} with {decoder}: {figures}")
            rows += measured
            if not args.keep:
                path.unlink()
    finally:
        shutil.rmtree(roots["pure"])
        if not args.keep:
            for leftover in workdir.iterdir():
                leftover.unlink()
            workdir.rmdir()

    load = f"load average {load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end, on {os.cpu_count()} CPUs"
    print(f"content mode: {args.content}; CPython {sys.version.split()[0]}; {load}")
    print("yardstick: the same file decoded line by line with msgspec.json.decode alone, in a fresh child, same run and condition")
    for (condition, spans), row in sorted(yardsticks.items(), key=lambda item: (conditions.index(item[0][0]), item[0][1])):
        print(f"  {condition:>9} {spans:>10,} spans: {row['cpu_seconds']:.2f} CPU s, peak RSS {row['peak_rss_mb']:.1f} MB")
    print(f"{'condition':>9} {'build':>8} {'decoder':>8} {'spans':>10} {'traces':>9} {'MB':>6} {'B/span':>7} {'wall s':>7} {'CPU s':>7} {'sys s':>6} {'x msgspec':>10} {'spans/CPU-s':>12} {'peak RSS MB':>12}")
    for row in sorted(rows, key=lambda r: (conditions.index(r["condition"]), builds.index(r["build"]), decoders.index(r["decoder"]), r["spans"])):
        print(
            f"{row['condition']:>9} {row['build']:>8} {row['decoder']:>8} {row['spans']:>10,} {row['traces']:>9,} {row['bytes'] / 1_048_576:>6,.0f} {row['bytes'] / row['spans']:>7,.0f} "
            f"{row['seconds']:>7.1f} {row['cpu_seconds']:>7.2f} {row['system_seconds']:>6.1f} {row['ratio']:>9.2f}x {row['spans_per_cpu_second']:>12,.0f} {row['peak_rss_mb']:>12.1f}"
        )
    flat = True
    for condition, build, decoder in itertools.product(conditions, builds, decoders):
        mine = sorted((r for r in rows if (r["condition"], r["build"], r["decoder"]) == (condition, build, decoder)), key=lambda r: r["spans"])
        note = " (the default here)" if (build, decoder) == (default_build, AUTO_DECODER) else " (for reference)"
        ratios = ", ".join(f"{r['ratio']:.2f}x at {r['spans']:,}" for r in mine)
        line = f"{condition}: {build} build, {decoder}{note}: ragtrace report takes {ratios} the CPU time of msgspec alone"
        if len(mine) > 1:
            growth = mine[-1]["peak_rss_mb"] - mine[0]["peak_rss_mb"]
            verdict = "flat" if growth <= FLAT_MB else "NOT FLAT"
            line += f"; peak RSS {mine[0]['peak_rss_mb']:.1f} -> {mine[-1]['peak_rss_mb']:.1f} MB ({growth:+.1f}) from {mine[0]['spans']:,} to {mine[-1]['spans']:,} spans: {verdict} (target: at most +{FLAT_MB:.0f} MB)"
            flat = flat and growth <= FLAT_MB
        else:
            line += "; one size: no memory verdict"
        print(line)
    if len(builds) == 2:
        speed = {(r["condition"], r["build"], r["decoder"], r["spans"]): r["spans_per_cpu_second"] for r in rows}
        ratios = [
            f"{condition} {decoder} {speed[condition, 'compiled', decoder, spans] / speed[condition, 'pure', decoder, spans]:.2f}x at {spans:,} spans"
            for condition in conditions for decoder in decoders for spans in sorted({r["spans"] for r in rows})
        ]
        print(f"compiled/pure speed (spans per CPU-second, side by side in this run): {', '.join(ratios)}")
    return 0 if flat else 1


if __name__ == "__main__":
    sys.exit(main())
