"""Span exporters.

* ``JsonLinesExporter``: one OTLP/JSON export request per line, optionally gzipped; the format the
  Collector's file exporter writes, readable back by ``ragtrace``'s CLI.
* ``ConsoleTreeExporter``: a readable span tree per trace with the key RAG facts of every stage.
* ``PhoenixExporter``: spans to Arize Phoenix over OTLP, plus the figures and each document's
  placed and cited marks as Phoenix annotations (needs ``ragtrace[phoenix]``; the first two need
  nothing beyond the OpenTelemetry SDK).
"""

from __future__ import annotations

from .console import ConsoleTreeExporter
from .jsonl import JsonLinesExporter
from .phoenix import PhoenixExporter

__all__ = ["ConsoleTreeExporter", "JsonLinesExporter", "PhoenixExporter"]
