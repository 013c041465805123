"""``JsonLinesExporter``: OTLP/JSON export requests, one per line, in a local file.

Each ``export()`` call appends one compact ``ExportTraceServiceRequest`` (the shape the
Collector's file exporter writes) followed by a newline, and flushes. With gzip, each line is
written as its own gzip member: the file stays a valid gzip stream after every export (and after a
crash), and ``gzip.open(path, "rt")`` reads all the lines back.
"""

from __future__ import annotations

import gzip as gzip_module
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from .._internal.export.otlp_json import encode_spans

__all__ = ["JsonLinesExporter"]

_logger = logging.getLogger("ragtrace")


def _dumps(request: dict[str, Any]) -> bytes:
    try:
        text = json.dumps(request, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate in some string: \u-escape everything instead
        return json.dumps(request, ensure_ascii=True, separators=(",", ":"), allow_nan=False).encode("ascii")


class JsonLinesExporter(SpanExporter):
    """Append one OTLP/JSON export request per ``export()`` call to ``path``.

    ``gzip`` defaults to whether ``path`` ends with ``.gz``. Parent directories are created on the
    first export. I/O errors make ``export()`` return ``FAILURE`` (logged once per exporter), never
    raise; the file is reopened on the next export. Safe to call from several threads.
    """

    def __init__(self, path: str | os.PathLike[str], *, gzip: bool | None = None) -> None:
        self.path = Path(os.fspath(path))
        self.gzip = self.path.name.endswith(".gz") if gzip is None else bool(gzip)
        self._lock = threading.Lock()
        self._file: IO[bytes] | None = None
        self._closed = False
        self._logged = False

    def _log_failure(self, what: str, error: BaseException) -> None:
        if not self._logged:
            self._logged = True
            _logger.warning(
                "ragtrace: JSON Lines export to %s failed while %s (%s: %s); spans are dropped. "
                "Further failures of this exporter are not logged.",
                self.path,
                what,
                type(error).__name__,
                error,
            )

    def _open(self) -> IO[bytes]:
        if self._file is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._file = open(self.path, "ab")  # noqa: SIM115 - kept open across exports
        return self._file

    def _close_file(self) -> None:
        file, self._file = self._file, None
        if file is not None:
            try:
                file.close()
            except Exception:  # noqa: BLE001 - the handle is gone either way
                pass

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        try:
            line = _dumps(encode_spans(spans)) + b"\n"
            if self.gzip:
                line = gzip_module.compress(line, mtime=0)
        except Exception as error:  # noqa: BLE001 - an exporter never raises
            self._log_failure("encoding spans", error)
            return SpanExportResult.FAILURE
        with self._lock:
            if self._closed:
                return SpanExportResult.FAILURE
            try:
                file = self._open()
                file.write(line)
                file.flush()
            except Exception as error:  # noqa: BLE001 - OSError mostly; never raise
                self._log_failure("writing", error)
                self._close_file()
                return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        with self._lock:
            if self._file is not None:
                try:
                    self._file.flush()
                except Exception as error:  # noqa: BLE001
                    self._log_failure("flushing", error)
        return True

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
            self._close_file()

    def __repr__(self) -> str:
        return f"JsonLinesExporter({str(self.path)!r}, gzip={self.gzip})"
