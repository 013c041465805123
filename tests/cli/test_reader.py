"""The streaming reader: shapes, joining, bounded memory, and every kind of bad input."""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
from pathlib import Path

import pytest

from ragtrace.cli import finished, linefile
from ragtrace.cli import reader as reader_module
from ragtrace.cli.diagnostics import Diagnostics
from ragtrace.cli.reader import InputError, TraceReader
from ragtrace.cli.spans import decode_value

from .conftest import by_query
from .helpers import KNOWN, lines


def _span(trace: str, span: str, parent: str = "", name: str = "s", **attributes) -> dict:
    encoded = []
    for key, value in attributes.items():
        if isinstance(value, bool):
            encoded.append({"key": key, "value": {"boolValue": value}})
        elif isinstance(value, int):
            encoded.append({"key": key, "value": {"intValue": str(value)}})
        else:
            encoded.append({"key": key, "value": {"stringValue": value}})
    out = {"traceId": trace, "spanId": span, "name": name, "startTimeUnixNano": "1", "endTimeUnixNano": "2", "attributes": encoded}
    if parent:
        out["parentSpanId"] = parent
    return out


def _request(*spans: dict) -> str:
    return json.dumps({"resourceSpans": [{"resource": {}, "scopeSpans": [{"scope": {}, "spans": list(spans)}]}]}) + "\n"


T1, T2 = "a" * 32, "b" * 32


def _read(path: Path, **options) -> tuple[list, Diagnostics, TraceReader]:
    diagnostics = Diagnostics(io.StringIO())
    reader = TraceReader([path], diagnostics, **options)
    return list(reader), diagnostics, reader


def test_joins_by_trace_id_and_finishes_at_the_root(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(_request(_span(T1, "1" * 16, "0" * 15 + "9"), _span(T2, "2" * 16)) + _request(_span(T1, "0" * 15 + "9")))
    traces, diagnostics, reader = _read(path, grace_spans=0)
    assert [t.trace_id for t in traces] == [T2, T1]  # T2's root came first
    assert [len(t.spans) for t in traces] == [1, 2]
    assert all(t.has_root for t in traces)
    assert reader.stats.spans == 3 and reader.stats.lines == 2
    assert diagnostics.total == 0


def test_trace_without_root_finishes_at_end_of_input(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(_request(_span(T1, "1" * 16, "f" * 16)))
    (trace,), _, _ = _read(path)
    assert trace.has_root is False


def test_remote_parent_is_a_local_root(tmp_path):
    span = _span(T1, "1" * 16, "f" * 16)
    span["flags"] = 0x300  # has-is-remote and is-remote
    path = tmp_path / "t.jsonl"
    path.write_text(_request(span))
    (trace,), _, _ = _read(path)
    assert trace.has_root and trace.spans[0].local_root


def test_late_span_after_grace_is_a_warning(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(_request(_span(T1, "0" * 15 + "9")) + _request(_span(T1, "1" * 16, "0" * 15 + "9")))
    traces, diagnostics, reader = _read(path, grace_spans=0)
    assert len(traces) == 1 and len(traces[0].spans) == 1
    assert reader.stats.late_spans == 1
    assert f"{path}:2: span 1111111111111111 of trace {T1} arrived after its trace was finished" in diagnostics.stream.getvalue()
    # with a grace window the late child still joins its trace
    traces, diagnostics, _ = _read(path, grace_spans=5)
    assert len(traces[0].spans) == 2 and diagnostics.total == 0


def test_pending_spans_are_capped(tmp_path):
    path = tmp_path / "t.jsonl"
    rootless = [_request(_span(f"{n:032x}", "1" * 16, "f" * 16)) for n in range(1, 6)]
    path.write_text("".join(rootless))
    traces, diagnostics, reader = _read(path, max_pending_spans=2)
    assert len(traces) == 5
    assert reader.stats.evicted_traces == 3 and sum(t.evicted for t in traces) == 3
    assert "no root span after 2 pending spans" in diagnostics.stream.getvalue()
    assert reader.joiner.pending_spans == 0


def test_base64_ids_are_converted_to_hex(tmp_path):
    trace_b64 = base64.b64encode(bytes.fromhex(T1)).decode()
    span_b64 = base64.b64encode(bytes.fromhex("1" * 16)).decode()
    path = tmp_path / "t.jsonl"
    path.write_text(_request({"traceId": trace_b64, "spanId": span_b64, "name": "x"}))
    (trace,), _, _ = _read(path)
    assert trace.trace_id == T1 and trace.spans[0].span_id == "1" * 16


def test_phoenix_snake_case_values_decode():
    assert decode_value({"string_value": None, "int_value": 5, "double_value": None}) == 5
    assert decode_value({"array_value": {"values": [{"string_value": "a", "int_value": None}, {"int_value": 2}]}, "string_value": None}) == ["a", 2]
    assert decode_value({"kvlist_value": {"values": [{"key": "k", "value": {"bool_value": True}}]}}) == {"k": True}
    assert decode_value({"stringValue": "camel"}) == "camel"
    assert decode_value({"intValue": "12"}) == 12


def test_bad_attribute_value_is_a_warning(tmp_path):
    span = _span(T1, "1" * 16)
    span["attributes"].append({"key": "rag.stage", "value": {"intValue": "not a number"}})
    path = tmp_path / "t.jsonl"
    path.write_text(_request(span))
    (trace,), diagnostics, _ = _read(path)
    assert trace.spans[0].get("rag.stage", "fallback") == "fallback"
    assert f"{path}:1: span 1111111111111111: attribute rag.stage is not a valid value" in diagnostics.stream.getvalue()


@pytest.mark.parametrize("decoder", ["json", "msgspec"])
def test_attribute_keys_that_are_not_strings_are_skipped_with_a_warning(tmp_path, decoder):
    span = _span(T1, "1" * 16, **{"rag.pipeline.route": "faq"})
    span["attributes"].append({"key": 7, "value": {"stringValue": "x"}})
    path = tmp_path / "t.jsonl"
    path.write_text(_request(span))
    (trace,), diagnostics, _ = _read(path, decoder=decoder)
    assert list(trace.spans[0].attrs) == ["rag.pipeline.route"]
    assert f"{path}:1: span 1111111111111111: malformed attribute entries skipped" in diagnostics.stream.getvalue()


def test_malformed_lines_warn_with_line_numbers_and_the_rest_is_read(cli, known, tmp_path):
    source = lines(known[0])
    broken = tmp_path / "broken.jsonl"
    # line 3 is garbage, line 6 is cut in half, and the file ends in a truncated line
    damaged = source[:2] + ["{not json\n"] + source[2:4] + [source[4][: len(source[4]) // 2] + "\n"] + source[5:] + [source[0][:40]]
    broken.write_text("".join(damaged))
    result = cli("report", "--json", broken)
    assert result.code == 0
    assert f"ragtrace: warning: {broken}:3: not valid JSON" in result.err
    assert f"ragtrace: warning: {broken}:6: not valid JSON" in result.err
    assert f"ragtrace: warning: {broken}:{len(damaged)}: not valid JSON" in result.err
    assert "Traceback" not in result.err
    rows = by_query(result.json())
    # line 6 held the retrieve span of the second run: its pipeline span recorded |R| = 4, the
    # rebuild sees no retrieval, so the run is reported as incomplete rather than as "no retrieval"
    lost = rows.pop("How does dense retrieval work?")
    assert lost["verdict"] == "not measurable" and lost["status"][0] == "spans_missing"
    assert lost["recall_proxy"] is None
    assert "spans or attributes of this run are missing" in result.err
    assert set(rows) == set(KNOWN) - {"How does dense retrieval work?"}
    for query, row in rows.items():
        assert row["verdict"] == KNOWN[query]["verdict"]
        assert row["recall_proxy"] == KNOWN[query].get("recall_proxy"), query


def test_truncated_gzip_warns_and_keeps_what_was_read(cli, known, tmp_path):
    whole = gzip.compress("".join(lines(known[0])).encode(), mtime=0)
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(whole[: int(len(whole) * 0.8)])
    result = cli("report", "--json", cut)
    assert result.code == 0
    assert f"{cut}:" in result.err and "truncated or corrupt compressed data" in result.err
    document = result.json()
    assert 1 <= document["inputs"]["traces"] <= 5
    assert document["inputs"]["lines"] >= 10


def test_missing_parent_warns_and_the_run_is_not_measurable(cli, known, tmp_path):
    source = lines(known[0])
    without_root = [line for line in source if '"invoke_workflow support-qa"' not in line or "What is BM25?" not in line]
    assert len(without_root) == len(source) - 1
    path = tmp_path / "orphans.jsonl"
    path.write_text("".join(without_root))
    result = cli("report", "--json", path)
    assert result.code == 0
    assert "parent span" in result.err and "is not in the input" in result.err
    assert f"{path}:1:" in result.err  # the retrieve span of the first run is on line 1
    rows = result.json()["traces"]
    orphan = [r for r in rows if r["pipeline"] is None]
    assert len(orphan) == 1
    assert orphan[0]["verdict"] == "not measurable" and orphan[0]["status"][0] == "incomplete_trace"
    assert orphan[0]["recall_proxy"] is None  # never scored as if complete
    assert orphan[0]["retrieved"] == 4  # the sizes are still shown


def test_huge_line_is_skipped_with_a_warning(cli, known, tmp_path, monkeypatch):
    source = lines(known[0])
    longest = max(len(line) for line in source)
    path = tmp_path / "huge.jsonl"
    huge = _request(_span(T1, "1" * 16, blob="x" * (longest * 3)))
    path.write_text(source[0] + huge + "".join(source[1:]))
    monkeypatch.setattr(reader_module, "MAX_LINE_BYTES", longest * 2)
    result = cli("report", "--json", path)
    assert result.code == 0
    assert f"{path}:2: line longer than" in result.err
    assert result.json()["inputs"]["spans"] == len(source)


def test_other_json_values_are_skipped_with_a_warning(tmp_path):
    path = tmp_path / "mixed.jsonl"
    path.write_text('{"resourceMetrics": []}\n42\n' + _request(_span(T1, "1" * 16)) + "\n\n")
    traces, diagnostics, _ = _read(path)
    assert len(traces) == 1
    text = diagnostics.stream.getvalue()
    assert f"{path}:1: a JSON object without resourceSpans" in text
    assert f"{path}:2: a JSON value that is not an OTLP trace export" in text


def test_non_utf8_line(tmp_path):
    path = tmp_path / "bin.jsonl"
    path.write_bytes(b"\xff\xfe\x00garbage\n" + _request(_span(T1, "1" * 16)).encode())
    traces, diagnostics, _ = _read(path)
    assert len(traces) == 1
    assert f"{path}:1: not valid JSON" in diagnostics.stream.getvalue()


def test_pretty_printed_document_that_is_broken_falls_back_to_lines(tmp_path):
    path = tmp_path / "doc.json"
    path.write_text("{\n" + _request(_span(T1, "1" * 16)))
    traces, diagnostics, _ = _read(path)
    assert len(traces) == 1
    assert "neither JSON lines nor one JSON document" in diagnostics.stream.getvalue()


def test_warnings_are_capped_per_kind(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text("nope\n" * 25)
    stream = io.StringIO()
    diagnostics = Diagnostics(stream, limit=3)
    list(TraceReader([path], diagnostics))
    diagnostics.summary()
    text = stream.getvalue()
    assert text.count("not valid JSON") == 3
    assert "22 more 'malformed line' warning(s) not shown (25 in all)" in text


def test_unreadable_inputs_raise_input_error(tmp_path):
    with pytest.raises(InputError, match="No such file"):
        TraceReader([tmp_path / "missing.jsonl"], Diagnostics(io.StringIO()))
    empty = tmp_path / "empty-dir"
    empty.mkdir()
    with pytest.raises(InputError, match="holds no files"):
        TraceReader([empty], Diagnostics(io.StringIO()))
    zstd = tmp_path / "t.jsonl.zst"
    zstd.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 10)
    with pytest.raises(InputError, match="zstd"):
        list(TraceReader([zstd], Diagnostics(io.StringIO())))


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 4096])
def test_chunked_line_splitting_matches_readline(tmp_path, monkeypatch, chunk):
    """Plain files are split into lines by linefile.Lines (large reads + bytes.find): same lines as readline."""
    import random

    monkeypatch.setattr(linefile, "READ_CHUNK", chunk)
    rng = random.Random(chunk)
    pieces = [b"x" * rng.choice([0, 1, 5, 30, 200]) for _ in range(60)]
    data = b"\n".join(pieces) + rng.choice([b"", b"\n", b"tail"])
    path = tmp_path / "lines.bin"
    path.write_bytes(data)
    for limit in (1, 3, 16, 1000):
        expected_stream = io.BytesIO(data)
        with open(path, "rb") as handle:
            lines = linefile.Lines(handle)
            while True:
                expected = expected_stream.readline(limit)
                assert lines.readline(limit) == expected, limit
                if not expected:
                    break
    with open(path, "rb") as handle:  # readline, then the rest at once (the single-document path)
        lines = linefile.Lines(handle)
        first = lines.readline(1000)
        assert first + lines.read(len(data)) == data
    with open(path, "rb") as handle:
        lines = linefile.Lines(handle)
        assert lines.read(5) == data[:5]
        assert lines.readline(1000) == io.BytesIO(data[5:]).readline(1000)


@pytest.mark.parametrize("capacity", [1, 3, 100])
def test_finished_trace_memory_is_an_exact_bounded_fifo(capacity):
    """FinishedTraces behaves as an OrderedDict of the last `capacity` ids (insertion order, no duplicates)."""
    import random
    from collections import OrderedDict

    rng = random.Random(capacity)
    ids = [f"{rng.getrandbits(128):032x}" for _ in range(300)]
    ids += ["short", "ünïcode-ids-of-thirty-two-chars!", "0" * 31, "x" * 40]  # not 32 ASCII characters
    ids += [ids[0][:-1] + ("0" if ids[0][-1] != "0" else "1")]  # one character away from a known id
    finished_ids, reference = finished.FinishedTraces(capacity), OrderedDict()
    for step in range(3000):
        trace_id = rng.choice(ids)
        if rng.random() < 0.5:
            finished_ids.add(trace_id)
            if trace_id not in reference:  # a trace id is finished once; adding it again is a no-op
                reference[trace_id] = None
                ascii32 = [k for k in reference if len(k) == 32 and k.isascii()]
                other = [k for k in reference if not (len(k) == 32 and k.isascii())]
                for kept in (ascii32, other):  # each kind keeps its own last `capacity`
                    while len(kept) > capacity:
                        del reference[kept.pop(0)]
        probe = rng.choice(ids)
        assert (probe in finished_ids) == (probe in reference), step


def _record_fadvise(monkeypatch, fail: bool = False) -> list[tuple[int, int, int]]:
    """Calls of os.posix_fadvise as (offset, length, advice); the real call still runs (or raises OSError)."""
    calls: list[tuple[int, int, int]] = []
    real = os.posix_fadvise

    def recorded(fd: int, offset: int, length: int, advice: int) -> None:
        calls.append((offset, length, advice))
        if fail:
            raise OSError(22, "Invalid argument")
        real(fd, offset, length, advice)

    monkeypatch.setattr(os, "posix_fadvise", recorded)
    return calls


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is not available on this platform")
def test_large_files_leave_the_page_cache_as_they_are_read(tmp_path, monkeypatch):
    """Files of DROP_CACHE_BYTES or more release their pages as they are read, all of them by the end; the lines are unchanged."""
    data = b"".join(b"%07d " % i + b"x" * 1000 + b"\n" for i in range(linefile.DROP_CACHE_BYTES // 1000 + 5000))
    path = tmp_path / "large.jsonl"
    path.write_bytes(data)
    calls = _record_fadvise(monkeypatch)
    with open(path, "rb") as handle:
        lines = linefile.Lines(handle, len(data))
        read = b"".join(iter(lambda: lines.readline(1 << 20), b""))
    assert read == data
    assert len(calls) >= 2 and all(advice == os.POSIX_FADV_DONTNEED for _, _, advice in calls)
    assert [offset for offset, _, _ in calls] == [0] + [offset + length for offset, length, _ in calls[:-1]]  # contiguous
    assert calls[-1][0] + calls[-1][1] == len(data)  # every page read is released

    small = tmp_path / "small.jsonl"
    small.write_bytes(data[: 1 << 20])
    calls.clear()
    with open(small, "rb") as handle:
        lines = linefile.Lines(handle, 1 << 20)
        assert b"".join(iter(lambda: lines.readline(1 << 20), b"")) == data[: 1 << 20]
    assert calls == []  # small files keep their pages


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is not available on this platform")
def test_a_failing_page_cache_hint_is_given_up_silently(tmp_path, monkeypatch):
    data = b"y" * 2000 + b"\n"
    data *= linefile.DROP_CACHE_BYTES // len(data) * 2
    path = tmp_path / "large.jsonl"
    path.write_bytes(data)
    calls = _record_fadvise(monkeypatch, fail=True)
    with open(path, "rb") as handle:
        lines = linefile.Lines(handle, len(data))
        assert b"".join(iter(lambda: lines.readline(1 << 20), b"")) == data
    assert len(calls) == 1  # tried once, then no more


@pytest.mark.skipif(not hasattr(os, "posix_fadvise"), reason="posix_fadvise is not available on this platform")
def test_large_files_read_whole_or_left_early_release_every_page_read(tmp_path, monkeypatch):
    """The single-document path (readline, then read the rest) and a reader closed midway release what they read."""
    data = b"{" + b"x" * (linefile.DROP_CACHE_BYTES + (5 << 20)) + b"}\n"
    path = tmp_path / "document.json"
    path.write_bytes(data)
    calls = _record_fadvise(monkeypatch)
    with open(path, "rb") as handle:
        lines = linefile.Lines(handle, len(data))
        first = lines.readline(100)
        assert first + lines.read(len(data)) == data
        lines.close()
    assert calls[-1][0] + calls[-1][1] == len(data)
    calls.clear()
    with open(path, "rb") as handle:
        lines = linefile.Lines(handle, len(data))
        lines.readline(100)
        lines.close()
    assert calls == [(0, linefile.READ_CHUNK, os.POSIX_FADV_DONTNEED)]  # the one buffer it had read
