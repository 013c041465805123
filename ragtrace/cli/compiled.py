"""The optional compiled build of the report path: which modules it covers, and whether they are compiled here.

These modules are plain Python. When Cython and a C compiler are there at install time,
``setup.py`` also compiles them, unchanged, into extension modules that Python imports in their
place: the same results, warnings and output (the tests compare both builds byte for byte), only
faster (``bench/bench_report.py`` measures both side by side). Without a compiler, or with
``RAGTRACE_NO_EXTENSIONS=1`` at install time, the pure-Python modules run. ``figures.compute`` is
shared with the SDK, so where it is compiled the online per-trace figures use it too.
"""

from __future__ import annotations

import importlib
from importlib.machinery import EXTENSION_SUFFIXES

# The report path: reading, per-run rows, figures, aggregation, and the per-trace streaming-latency and
# score bookkeeping. setup.py compiles these.
MODULES = (
    "ragtrace.cli.linefile",
    "ragtrace.cli.finished",
    "ragtrace.cli.spans",
    "ragtrace.cli.otlp_spans",
    "ragtrace.cli.joiner",
    "ragtrace.cli.ingest",
    "ragtrace.cli.reader",
    "ragtrace.cli.row",
    "ragtrace.cli.recorded",
    "ragtrace.cli.traces",
    "ragtrace.cli.foreign",
    "ragtrace.cli.verdicts",
    "ragtrace.cli.distribution",
    "ragtrace.cli.aggregate",
    "ragtrace.cli.aggregator",
    "ragtrace.cli.latency",
    "ragtrace.cli.scores",
    "ragtrace.cli.report",
    "ragtrace._internal.core.figures",
)

COMPILED, PURE, MIXED = "compiled", "pure Python", "partly compiled"


def is_compiled(module_name: str) -> bool:
    """Whether ``module_name`` was imported from an extension module rather than its ``.py`` source."""
    path = getattr(importlib.import_module(module_name), "__file__", None) or ""
    return path.endswith(tuple(EXTENSION_SUFFIXES))


def build() -> str:
    """``"compiled"``, ``"pure Python"``, or ``"partly compiled"`` (some modules failed to compile)."""
    compiled = [is_compiled(name) for name in MODULES]
    return COMPILED if all(compiled) else PURE if not any(compiled) else MIXED
