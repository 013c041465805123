"""Span exporters that need nothing beyond the OpenTelemetry SDK.

* ``JsonLinesExporter``: one OTLP/JSON export request per line, optionally gzipped; the format the
  Collector's file exporter writes, readable back by ``ragtrace``'s CLI.
* ``ConsoleTreeExporter``: a readable span tree per trace with the key RAG facts of every stage.
"""

from __future__ import annotations

from .console import ConsoleTreeExporter
from .jsonl import JsonLinesExporter

__all__ = ["ConsoleTreeExporter", "JsonLinesExporter"]
