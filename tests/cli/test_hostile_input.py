"""Bad input to ``ragtrace report`` and ``ragtrace eval`` (issue 16, items 11-13): deep nesting,
inputs that would need unbounded memory, and input that is plainly not trace data.

Each case where memory or time is the point runs the real CLI in a child process under an
address-space limit (``RLIMIT_AS``) and a timeout, with the decoder of the test's parameter.
"""

from __future__ import annotations

import gzip
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from ragtrace.cli import EXIT_INPUT, EXIT_NO_SPANS, EXIT_OK, EXIT_USAGE

from .conftest import by_query
from .helpers import KNOWN, lines

MEMORY_LIMIT = 768 << 20  # address space of the child: far below what the old reader took (6 GiB and more)
TIMEOUT = 60  # seconds; every case here ends in a few
DEEP = 100_000  # levels: beyond what json (3.13 decodes 1,000) and msgspec decode without RecursionError
_NESTED_LIST = "[" * DEEP + "]" * DEEP  # the issue's 2 KB line was 1,000 levels; Python 3.13's json decodes that


def _bounded(*args, stdin=None, decoder: str = "auto") -> subprocess.CompletedProcess:
    command, *rest = (str(a) for a in args)

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "ragtrace.cli", command, "--decoder", decoder, *rest],
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        capture_output=True, text=True, timeout=TIMEOUT, preexec_fn=limit,
    )


def _nested_value(depth: int) -> str:
    """An AnyValue nested ``depth`` array levels deep, as JSON text (json.dumps can't write it)."""
    return '{"arrayValue":{"values":[' * depth + '{"stringValue":"bottom"}' + "]}}" * depth


# --- 11: deep nesting ------------------------------------------------------------------------------
def test_deeply_nested_lines_are_malformed_lines(cli, known, tmp_path):
    source = lines(known[0])
    deep_attribute = json.loads(source[0])
    deep_attribute["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["attributes"].append({"key": "deep", "value": "DEEP"})
    path = tmp_path / "nested.jsonl"
    damaged = [_NESTED_LIST + "\n", *source[:1], "{" + '"a":{' * DEEP + "}" * (DEEP + 1) + "\n", *source[1:], json.dumps(deep_attribute).replace('"DEEP"', _nested_value(DEEP)) + "\n"]
    path.write_text("".join(damaged))
    result = cli("report", "--json", path)
    assert result.code == EXIT_OK, result.err
    assert "RecursionError" not in result.err and "internal error" not in result.err
    assert f"{path}:1: not valid JSON (nested too deeply); line skipped" in result.err
    assert f"{path}:3: not valid JSON (nested too deeply); line skipped" in result.err
    assert f"{path}:{len(damaged)}: not valid JSON (nested too deeply); line skipped" in result.err
    rows = by_query(result.json())
    assert set(rows) == set(KNOWN)
    assert rows["What is BM25?"]["recall_proxy"] == KNOWN["What is BM25?"]["recall_proxy"]


def test_deep_nesting_as_a_whole_document(cli, tmp_path):
    path = tmp_path / "nested.json"
    path.write_text("[\n" + _NESTED_LIST + "\n]\n")  # multi-line: read as one document, then line by line
    result = cli("report", path)
    assert result.code == EXIT_NO_SPANS
    assert "RecursionError" not in result.err and "internal error" not in result.err
    assert "nested too deeply" in result.err


def test_deeply_nested_attribute_value_inside_a_readable_line(cli, tmp_path):
    """Nesting that both decoders parse (300 array levels are 900 JSON levels): read as a value, never a crash."""
    from ragtrace._internal import names

    span = {
        "traceId": "a" * 32, "spanId": "1" * 16, "name": "retrieval", "startTimeUnixNano": "1", "endTimeUnixNano": "2",
        "attributes": [
            {"key": names.GEN_AI_OPERATION_NAME, "value": {"stringValue": names.OP_RETRIEVAL}},
            {"key": names.GEN_AI_RETRIEVAL_DOCUMENTS, "value": "DEEP"},
        ],
    }
    path = tmp_path / "deep-value.jsonl"
    path.write_text(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).replace('"DEEP"', _nested_value(300)) + "\n")
    result = cli("report", "--json", path)
    assert result.code == EXIT_OK, result.err
    assert "internal error" not in result.err and "could not be read" not in result.err
    (row,) = result.json()["traces"]
    assert row["verdict"] == "not measurable"


def test_deeply_nested_golden_line_is_skipped(cli, known, tmp_path):
    golden = tmp_path / "golden.jsonl"
    golden.write_text(_NESTED_LIST + "\n" + json.dumps({"query": "What is BM25?", "relevant_ids": ["d1"]}) + "\n")
    result = cli("eval", "--golden", golden, "--json", known[0])
    assert result.code == EXIT_OK, result.err
    assert f"{golden}:1: not valid JSON (nested too deeply); line skipped" in result.err
    assert result.json()["summary"]["matched"] == 1


# --- 12: bounded memory ----------------------------------------------------------------------------
def test_gzip_of_one_huge_document_of_empty_objects(tmp_path, json_decoder):
    """The issue's 457 KB gzip: one pretty-printed document of ``{}`` items, ~200 MB unpacked."""
    path = tmp_path / "bomb.json.gz"
    with gzip.open(path, "wb", compresslevel=9) as handle:
        handle.write(b"[\n")
        chunk = b"{},\n" * 1_000_000
        for _ in range(50):
            handle.write(chunk)
        handle.write(b"{}\n]\n")
    assert path.stat().st_size < 1_000_000
    result = _bounded("report", path, decoder=json_decoder)
    assert result.returncode == EXIT_NO_SPANS, result.stderr
    assert "MemoryError" not in result.stderr and "internal error" not in result.stderr
    assert f"{path}:1: " in result.stderr and "JSON document larger than 64 MiB" in result.stderr


def test_line_of_millions_of_tiny_values_is_skipped(tmp_path, json_decoder):
    path = tmp_path / "dense.jsonl"
    dense = '{"resourceSpans":[' + ",".join(["{}"] * 12_000_000) + "]}\n"  # 36 MB, 12 million objects
    path.write_text(dense + '{"resourceSpans":[]}\n')
    result = _bounded("report", path, decoder=json_decoder)
    assert result.returncode == EXIT_NO_SPANS, result.stderr
    assert f"{path}:1: line of 34 MiB holds more than 4,000,000 JSON values (" in result.stderr


def test_golden_from_dev_zero_stops_with_a_clear_error(known, json_decoder):
    result = _bounded("eval", "--golden", "/dev/zero", known[0], decoder=json_decoder)
    assert result.returncode == EXIT_USAGE, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "ragtrace: error: /dev/zero: binary data (NUL bytes on line 1), not a golden file of JSON lines"


def test_golden_line_cap(cli, known, tmp_path):
    golden = tmp_path / "golden.jsonl"
    relevant = [f"id-{n}" for n in range(400_000)]  # a 4 MB line, over the 1 MiB cap
    golden.write_text(json.dumps({"query": "How do rerankers work?", "relevant_ids": relevant}) + "\n" + json.dumps({"query": "What is BM25?", "relevant_ids": ["d1"]}) + "\n")
    result = cli("eval", "--golden", golden, "--json", known[0])
    assert result.code == EXIT_OK, result.err
    assert f"{golden}:1: line longer than 1 MiB; skipped" in result.err
    assert result.json()["summary"]["golden"] == 1


# --- 13: input that is not trace data, and no spans at all ------------------------------------------
def test_dev_zero_stops_with_a_clear_error(json_decoder):
    result = _bounded("report", "/dev/zero", decoder=json_decoder)
    assert result.returncode == EXIT_INPUT, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "ragtrace: error: /dev/zero: not trace data: binary data (NUL bytes on line 1)"


def test_endless_blank_lines_stop_with_a_clear_error(json_decoder):
    """``yes ''`` writes newlines forever: a stand-in for the issue's 4 GiB of newlines."""
    with subprocess.Popen(["yes", ""], stdout=subprocess.PIPE) as newlines:
        try:
            result = _bounded("report", "/dev/stdin", stdin=newlines.stdout, decoder=json_decoder)
        finally:
            newlines.kill()
    assert result.returncode == EXIT_INPUT, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "ragtrace: error: /dev/stdin: not trace data: 1,000,000 blank lines in a row from line 1"


def test_nul_padding_after_spans_is_one_bad_line(cli, known, tmp_path):
    """What a crash leaves at the end of an appended log: the spans before it are kept."""
    path = tmp_path / "crashed.jsonl"
    path.write_bytes(known[0].read_bytes() + b"\0" * 100_000)
    result = cli("report", "--json", path)
    assert result.code == EXIT_OK, result.err
    assert f"{path}:{len(lines(known[0])) + 1}: not valid JSON" in result.err
    assert set(by_query(result.json())) == set(KNOWN)


def test_garbage_after_spans_skips_the_rest_of_the_file(cli, known, tmp_path, monkeypatch):
    from ragtrace.cli import notdata

    monkeypatch.setattr(notdata, "MAX_BAD_LINES", 50)
    path = tmp_path / "garbage-after.jsonl"
    path.write_text(known[0].read_text() + "garbage\n" * 60 + known[0].read_text())
    result = cli("report", "--json", path)
    assert result.code == EXIT_OK, result.err
    first = len(lines(known[0])) + 1
    assert f"{path}:{first + 49}: not trace data: 50 lines in a row that are not JSON, from line {first}; the rest of the file is skipped" in result.err
    assert result.json()["inputs"]["runs"] == len(KNOWN)  # the copy after the garbage is not read


def test_endless_garbage_lines_stop(json_decoder):
    with subprocess.Popen(["yes", "not json"], stdout=subprocess.PIPE) as garbage:
        try:
            result = _bounded("report", "/dev/stdin", stdin=garbage.stdout, decoder=json_decoder)
        finally:
            garbage.kill()
    assert result.returncode == EXIT_INPUT, result.stderr
    assert result.stderr.strip().splitlines()[-1] == "ragtrace: error: /dev/stdin: not trace data: 10,000 lines in a row that are not JSON, from line 1"


def test_endless_line_stops(cli, tmp_path, monkeypatch):
    from ragtrace.cli import reader

    monkeypatch.setattr(reader, "MAX_LINE_BYTES", 1000)
    monkeypatch.setattr(reader, "MAX_SKIPPED_BYTES", 10_000)
    path = tmp_path / "endless.jsonl"
    path.write_text("{" * 20_000)
    result = cli("report", path)
    assert result.code == EXIT_INPUT, result.err
    assert result.err.strip().splitlines()[-1] == f"ragtrace: error: {path}: not trace data: line 1 goes on for more than 0 MiB"


@pytest.mark.parametrize("content", ["", "\n\n", '{"resourceMetrics": []}\n', '{"resourceSpans": []}\n'])
def test_no_spans_is_its_own_message_and_exit_code(cli, tmp_path, content):
    path = tmp_path / "nothing.jsonl"
    path.write_text(content)
    for command in (("report",), ("eval", "--golden", _golden(tmp_path))):
        result = cli(*command, "--json", path)
        assert result.code == EXIT_NO_SPANS, result.err
        assert result.out == ""
        assert result.err.strip().splitlines()[-1] == f"ragtrace: error: no spans found in 1 file ({path}): nothing to report"


def _golden(tmp_path: Path) -> Path:
    golden = tmp_path / "golden.jsonl"
    golden.write_text(json.dumps({"query": "q", "relevant_ids": ["a"]}) + "\n")
    return golden
