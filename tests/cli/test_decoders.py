"""The two JSON decoders (``json`` and the optional ``msgspec`` one) read every input the same way.

Every other CLI test already runs once per decoder (the ``json_decoder`` fixture in conftest.py);
these tests compare the two directly: the whole ``report --json`` output and the warnings on every
fixture shape, and span by span on inputs built to hit the places where the decoders differ
(bytes that are not UTF-8, escapes and numbers one accepts and the other rejects, shapes the typed
structs don't fit).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ragtrace.cli import ingest, joiner, main, reader
from ragtrace.cli import spans as spans_module
from ragtrace.cli.diagnostics import Diagnostics
from ragtrace.cli.reader import TraceReader

from . import test_context_span_id, test_inferred
from .helpers import DATA, split, to_collector, to_phoenix, write_known

pytestmark = pytest.mark.skipif(not reader.fast_decoder_available(), reason="msgspec is not installed (the cli extra)")


@pytest.fixture
def json_decoder() -> str:
    """Overrides conftest's per-decoder parametrisation: these tests run both decoders themselves."""
    return "both"


@pytest.fixture(params=["whole lines", "piecewise"])
def piecewise(request, monkeypatch) -> bool:
    """Runs a test twice: long lines read whole, and every line read a few spans at a time
    (``ingest.pieces``, which normally takes only lines of ``PIECEWISE_BYTES`` and up)."""
    on = request.param == "piecewise"
    monkeypatch.setattr(reader, "PIECEWISE_BYTES", 0 if on else 1 << 62)
    return on


def _report(paths: list[Path], decoder: str, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["report", "--json", "--decoder", decoder, *extra, *map(str, paths)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _bench_lines(path: Path) -> None:
    """A few thousand spans the way bench/bench_report.py writes them (512 spans a line)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        import bench_report
    finally:
        sys.path.pop(0)
    bench_report.generate(path, 3000, path.parent)


def fixture_inputs(tmp_path: Path) -> dict[str, list[Path]]:
    """Every input shape the report reads, by name (test_compiled.py reads them too)."""
    known = tmp_path / "known.jsonl"
    write_known(known)
    collector, phoenix, pretty = tmp_path / "collector.jsonl", tmp_path / "phoenix.json", tmp_path / "pretty.json"
    to_collector(known, collector)
    to_phoenix(known, phoenix, pretty=False)
    to_phoenix(known, pretty, pretty=True)
    parts = [tmp_path / "part-1.jsonl", tmp_path / "part-2.jsonl"]
    split(collector, parts, interleave=True)
    zipped = tmp_path / "part-2.jsonl.gz"
    zipped.write_bytes(gzip.compress(parts[1].read_bytes()))
    openinference, genai, openllmetry = tmp_path / "oi.jsonl", tmp_path / "genai.jsonl", tmp_path / "traceloop.jsonl"
    test_inferred.openinference(openinference)
    test_inferred.genai(genai)
    test_inferred.openllmetry(openllmetry)
    assemblies = tmp_path / "assemblies.jsonl"
    test_context_span_id._two_assemblies(assemblies)
    bench = tmp_path / "bench.jsonl"
    _bench_lines(bench)
    return {
        "known": [known],
        "collector": [collector],
        "phoenix": [phoenix],
        "phoenix-pretty": [pretty],
        "phoenix-saved-page": [DATA / "phoenix_otlpv1.json"],
        "split-gzip": [parts[0], zipped],
        "openinference": [openinference],
        "genai": [genai],
        "openllmetry": [openllmetry],
        "context-span-id": [assemblies],
        "bench": [bench],
        "all-at-once": [known, collector, openinference, genai, openllmetry, assemblies, bench],
    }


def test_every_fixture_gives_the_same_report(tmp_path, capsys, piecewise):
    for name, paths in fixture_inputs(tmp_path).items():
        with_json = _report(paths, "json", capsys, "--max-warnings", "1000")
        with_msgspec = _report(paths, "msgspec", capsys, "--max-warnings", "1000")
        assert with_json == with_msgspec, name
        assert with_json[0] == 0 and json.loads(with_json[1])["inputs"]["runs"] > 0, name


def _spans(path: Path, decoder: str, **options) -> tuple[list, str]:
    diagnostics = Diagnostics(io.StringIO(), limit=1000)
    out = []
    for trace in TraceReader([path], diagnostics, decoder=decoder, **options):
        for span in trace.spans:
            values = {key: span.get(key, "<default>") for key in span.attrs}
            typed = {
                key: (span.get_str(key), span.get_int(key), span.get_bool(key), span.get_number(key), span.get_list(key, str), span.get_list(key, int), span.get_list(key, bool))
                for key in span.attrs
            }
            events = [(name, list(span.event_attributes(name))) for name in ("db.query.result", "exception")]
            out.append((trace.trace_id, trace.has_root, span.span_id, span.parent_id, span.name, span.start, span.end, span.local_root, span.line, repr(values), repr(typed), repr(span.events), repr(events)))
    return out, diagnostics.stream.getvalue()


T = "a" * 32


def _span(span_id: str, value: str, *, parent: str = "", extra: str = "", trace: str = T) -> str:
    parent_field = f',"parentSpanId":"{parent}"' if parent else ""
    return (
        f'{{"traceId":"{trace}","spanId":"{span_id}"{parent_field},"name":"s","startTimeUnixNano":"1","endTimeUnixNano":"2",'
        f'"attributes":[{{"key":"k","value":{value}}},{{"key":"rag.stage","value":{{"stringValue":"embed"}}}}]{extra}}}'
    )


def _line(*spans: str) -> str:
    return '{"resourceSpans":[{"resource":{},"scopeSpans":[{"scope":{},"spans":[' + ",".join(spans) + "]}]}]}"


# Each is one export line (or a few) whose spans, values and warnings must not depend on the decoder.
ODD_LINES = {
    "plain": [_line(_span("1" * 16, '{"stringValue":"x"}'))],
    "not utf-8 inside a value": [_line(_span("1" * 16, '{"stringValue":"\udcff"}'))],
    "lone surrogate escape": [_line(_span("1" * 16, '{"stringValue":"a\\ud800b"}'))],
    "NaN literal": [_line(_span("1" * 16, '{"doubleValue":NaN}'))],
    "NaN string": [_line(_span("1" * 16, '{"doubleValue":"NaN"}'))],
    "double out of range": [_line(_span("1" * 16, '{"doubleValue":1e400}'))],
    "int beyond 64 bits": [_line(_span("1" * 16, '{"intValue":123456789012345678901234567890}'))],
    "int as a float": [_line(_span("1" * 16, '{"intValue":12.5}'))],
    "bad int": [_line(_span("1" * 16, '{"intValue":"twelve"}'))],
    "null value": [_line(_span("1" * 16, "null"))],
    "empty value": [_line(_span("1" * 16, "{}"))],
    "value of two kinds": [_line(_span("1" * 16, '{"intValue":"1","stringValue":"s"}'))],
    "array of mixed items": [_line(_span("1" * 16, '{"arrayValue":{"values":[{"intValue":"1"},{"stringValue":"s"},{"boolValue":true}]}}'))],
    "array item of two kinds": [_line(_span("1" * 16, '{"arrayValue":{"values":[{"intValue":"1","stringValue":"s"}]}}'))],
    "int with spaces and underscores": [_line(_span("1" * 16, '{"intValue":" 1_000 "}'))],
    "int written as a float string": [_line(_span("1" * 16, '{"intValue":"12.0"}'))],
    "int as a JSON number": [_line(_span("1" * 16, '{"intValue":12}'))],
    "double as a JSON int": [_line(_span("1" * 16, '{"doubleValue":3}'))],
    "double and int": [_line(_span("1" * 16, '{"doubleValue":0.5,"intValue":"1"}'))],
    "bool as a number": [_line(_span("1" * 16, '{"boolValue":1}'))],
    "null string": [_line(_span("1" * 16, '{"stringValue":null}'))],
    "empty string": [_line(_span("1" * 16, '{"stringValue":""}'))],
    "empty arrays": [_line(_span("1" * 16, '{"arrayValue":{}}'), _span("2" * 16, '{"arrayValue":{"values":[]}}', trace="c" * 32), _span("3" * 16, '{"arrayValue":{"values":null}}', trace="d" * 32))],
    "array of ints as numbers": [_line(_span("1" * 16, '{"arrayValue":{"values":[{"intValue":1},{"intValue":"2"}]}}'))],
    "array of bools": [_line(_span("1" * 16, '{"arrayValue":{"values":[{"boolValue":true},{"boolValue":false}]}}'))],
    "array with a null item": [_line(_span("1" * 16, '{"arrayValue":{"values":[{"stringValue":"a"},null]}}'))],
    "array item with an extra key": [_line(_span("1" * 16, '{"arrayValue":{"values":[{"stringValue":"a","x":1}]}}'))],
    "kvlist and bytes": [_line(_span("1" * 16, '{"kvlistValue":{"values":[{"key":"a","value":{"bytesValue":"aGk="}}]}}'))],
    "snake_case value": [_line(_span("1" * 16, '{"string_value":"x","int_value":null}'))],
    "escaped text": [_line(_span("1" * 16, '{"stringValue":"line\\nbreak \\"quoted\\" \\u00e9\\ud83d\\ude00"}'))],
    "value missing": [_line(f'{{"traceId":"{T}","spanId":"{"1" * 16}","attributes":[{{"key":"k"}}]}}')],
    "attribute without key": [_line(f'{{"traceId":"{T}","spanId":"{"1" * 16}","attributes":[{{"value":{{"stringValue":"x"}}}},{{"key":"k","value":{{"stringValue":"y"}}}}]}}')],
    "attributes not a list": [_line(f'{{"traceId":"{T}","spanId":"{"1" * 16}","attributes":{{"k":"v"}}}}')],
    "same key twice": [_line(f'{{"traceId":"{T}","spanId":"{"1" * 16}","attributes":[{{"key":"k","value":{{"stringValue":"1"}}}},{{"key":"k","value":{{"stringValue":"2"}}}}]}}')],
    "same field twice": [_line(f'{{"traceId":"{"b" * 32}","traceId":"{T}","spanId":"{"1" * 16}"}}')],
    "no traceId": [_line(f'{{"spanId":"{"1" * 16}"}}', _span("2" * 16, '{"stringValue":"x"}'))],
    "snake_case span in a request": [_line(f'{{"trace_id":"{T}","span_id":"{"1" * 16}","name":"snake"}}')],
    "span not an object": [_line('"span"', _span("2" * 16, '{"stringValue":"x"}'))],
    "ids of other types": [_line('{"traceId":12,"spanId":null,"name":5,"flags":"256","startTimeUnixNano":1.5,"endTimeUnixNano":[1]}')],
    "times out of range": [_line(f'{{"traceId":"{T}","spanId":"{"1" * 16}","startTimeUnixNano":1e400,"endTimeUnixNano":-1e400}}')],
    "base64 ids": [_line('{"traceId":"qqqqqqqqqqqqqqqqqqqqqg==","spanId":"ERERERERERE=","parentSpanId":"IiIiIiIiIiI=","flags":768}')],
    "remote parent flags": [_line(_span("1" * 16, '{"stringValue":"x"}', parent="9" * 16, extra=',"flags":768'))],
    "events": [_line(_span("1" * 16, '{"stringValue":"x"}', extra=',"events":[{"name":"db.query.result","attributes":[{"key":"db.query.result.id","value":{"stringValue":"d1"}}]},{"name":"exception"},"odd"]'))],
    "events empty": [_line(_span("1" * 16, '{"stringValue":"x"}', extra=',"events":[]'))],
    "events not a list": [_line(_span("1" * 16, '{"stringValue":"x"}', extra=',"events":"odd"'))],
    "scope_spans (snake) in a request": ['{"resourceSpans":[{"scope_spans":[{"spans":[' + _span("1" * 16, '{"stringValue":"x"}') + "]}]}]}"],
    "instrumentationLibrarySpans": ['{"resourceSpans":[{"instrumentationLibrarySpans":[{"spans":[' + _span("1" * 16, '{"stringValue":"x"}') + "]}]}]}"],
    "resource not an object": ['{"resourceSpans":[7]}'],
    "scopeSpans null": ['{"resourceSpans":[{"scopeSpans":null}]}'],
    "spans null": ['{"resourceSpans":[{"scopeSpans":[{"spans":null}]}]}'],
    "list of requests": ["[" + _line(_span("1" * 16, '{"stringValue":"x"}')) + "]"],
    "metrics, not traces": ['{"resourceMetrics":[]}'],
    "trailing garbage": [_line(_span("1" * 16, '{"stringValue":"x"}')) + " x"],
    "blank and truncated lines": ["", "   ", _line(_span("1" * 16, '{"stringValue":"x"}'))[:-9], _line(_span("2" * 16, '{"stringValue":"y"}'))],
    "trace across lines": [
        _line(_span("1" * 16, '{"stringValue":"child"}', parent="2" * 16)),
        _line(_span("3" * 16, '{"stringValue":"other"}', trace="c" * 32)),
        _line(_span("2" * 16, '{"stringValue":"root"}')),
    ],
}


@pytest.mark.parametrize("key", ["k", "rag.query.id"])  # a key the SDK does not write, and one it does
@pytest.mark.parametrize("name", list(ODD_LINES))
def test_odd_lines_read_the_same(tmp_path, name, key, piecewise):
    path = tmp_path / "odd.jsonl"
    lines = [line.replace('{"key":"k"', '{"key":"%s"' % key) for line in ODD_LINES[name]]
    path.write_bytes("\n".join(lines).encode("utf-8", "surrogateescape") + b"\n")
    with_json = _spans(path, "json")
    with_msgspec = _spans(path, "msgspec")
    assert with_json == with_msgspec


def test_a_long_line_of_other_keys_tries_the_sdk_keys_once(tmp_path, monkeypatch):
    """Once a span of a long line has a key the SDK does not write (another instrumentation's
    line), the rest of the line is decoded with plain keys straight away, not twice."""
    from ragtrace.cli import otlp_msgspec

    tried = []
    known = otlp_msgspec.decode_known_attributes
    monkeypatch.setattr(otlp_msgspec, "decode_known_attributes", lambda raw: (tried.append(1), known(raw))[1])
    monkeypatch.setattr(reader, "PIECEWISE_BYTES", 0)
    path = tmp_path / "other.jsonl"
    path.write_text(_line(*(_span(f"{n + 1:016x}", '{"stringValue":"x"}', trace=f"{n + 1:032x}") for n in range(40))) + "\n")
    traces = list(TraceReader([path], Diagnostics(io.StringIO()), decoder="msgspec"))
    assert len(traces) == 40 and all(trace.spans[0].get("k") == "x" for trace in traces)
    assert len(tried) == 1


def test_short_lines_of_other_keys_try_the_sdk_keys_once(tmp_path, monkeypatch):
    """The same for a file of short lines: once a line had keys the SDK does not write, the
    following lines of the file are decoded with plain keys straight away."""
    from ragtrace.cli import otlp_msgspec

    tried = []
    known = otlp_msgspec._known_request
    monkeypatch.setattr(otlp_msgspec, "_known_request", lambda line: (tried.append(1), known(line))[1])
    path = tmp_path / "other.jsonl"
    path.write_text("".join(_line(_span(f"{n + 1:016x}", '{"stringValue":"x"}', trace=f"{n + 1:032x}")) + "\n" for n in range(20)))
    traces = list(TraceReader([path], Diagnostics(io.StringIO()), decoder="msgspec"))
    assert len(traces) == 20 and all(trace.spans[0].get("k") == "x" for trace in traces)
    assert len(tried) == 1


def test_keys_the_sdk_writes_are_the_names_constants(tmp_path, piecewise):
    """A known key decodes to the ``names`` string itself (no string built per attribute); an
    unknown one sends its span's attributes (a short line: the line) through plain string keys."""
    from ragtrace._internal import names

    path = tmp_path / "keys.jsonl"
    known = _span("1" * 16, '{"stringValue":"x"}').replace('{"key":"k"', '{"key":"%s"' % names.RAG_QUERY_ID)
    path.write_text(_line(known) + "\n" + _line(_span("2" * 16, '{"stringValue":"y"}', trace="c" * 32)) + "\n")
    first, second = (trace.spans[0] for trace in TraceReader([path], Diagnostics(io.StringIO()), decoder="msgspec"))
    assert [key is constant for key, constant in zip(first.attrs, (names.RAG_QUERY_ID, names.RAG_STAGE))] == [True, True]
    assert list(second.attrs) == ["k", names.RAG_STAGE] and (second.get("k"), first.get(names.RAG_QUERY_ID)) == ("y", "x")


def test_pretty_printed_and_late_spans_read_the_same(tmp_path, piecewise):
    known = tmp_path / "known.jsonl"
    write_known(known)
    reversed_lines = tmp_path / "reversed.jsonl"
    reversed_lines.write_text("".join(reversed(known.read_text().splitlines(keepends=True))))
    for options in ({}, {"grace_spans": 3}, {"max_pending_spans": 2}):
        assert _spans(reversed_lines, "json", **options) == _spans(reversed_lines, "msgspec", **options), options


def test_spans_left_open_stop_referencing_their_line(tmp_path, monkeypatch, piecewise):
    """A span whose trace stays open after its line is copied out of it (memory stays flat)."""
    detached = []
    original = spans_module.Span.detach
    monkeypatch.setattr(spans_module.Span, "detach", lambda span: (detached.append(span.span_id), original(span)))
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(ODD_LINES["trace across lines"]) + "\n")
    traces = list(TraceReader([path], Diagnostics(io.StringIO()), decoder="msgspec"))
    assert detached == ["1" * 16]  # the child waited for its root; the finished trace "3..." was not copied
    assert [[span.get("k") for span in trace.spans] for trace in traces] == [["other"], ["child", "root"]]


def test_decoder_choice(cli, monkeypatch, known):
    path, _ = known
    assert cli("report", "--decoder", "json", "--json", path).code == 0
    assert reader.resolve_decoder("auto") == "msgspec"  # installed here
    with pytest.raises(ValueError):
        reader.resolve_decoder("simdjson")
    monkeypatch.setattr(reader, "_msgspec", None)
    result = cli("report", "--decoder", "msgspec", path)
    assert result.code == 2 and result.err.count("\n") == 1 and "pip install" in result.err


def test_export_lines_take_the_fast_path(tmp_path, piecewise):
    """So the comparisons above really compare two decoders: canonical lines keep raw slices."""
    import msgspec

    plain, listed = tmp_path / "plain.jsonl", tmp_path / "listed.jsonl"
    plain.write_text(ODD_LINES["plain"][0] + "\n")
    listed.write_text(ODD_LINES["list of requests"][0] + "\n")

    def first_span(path: Path, decoder: str):
        (trace,) = TraceReader([path], Diagnostics(io.StringIO()), decoder=decoder)
        return trace.spans[0]

    assert all(type(v) is msgspec.Raw for v in first_span(plain, "msgspec").attrs.values())
    assert all(type(v) is dict for v in first_span(listed, "msgspec").attrs.values())  # not one request: json
    assert all(type(v) is dict for v in first_span(plain, "json").attrs.values())


def test_long_lines_are_read_a_few_spans_at_a_time(tmp_path, monkeypatch, capsys):
    """A long line finishes each trace as soon as the line holds no more of it, and the report,
    warnings included and in the same order, is the one of reading the line whole."""
    spans = []
    for n in range(700):  # 700 runs, one after the other, as BatchSpanProcessor writes them
        trace = f"{n + 1:032x}"
        parent = "e" * 16 if n == 4 else f"{2 * n + 2:016x}"  # run 5's child: its parent is missing, the rows warn
        spans.append(_span(f"{2 * n + 1:016x}", '{"stringValue":"child"}', parent=parent, trace=trace))
        spans.append(_span(f"{2 * n + 2:016x}", '{"stringValue":"root"}', trace=trace))
    spans.insert(300, '{"traceId":"' + "9" * 32 + '"}')  # no spanId: warned about by the reader, later in the line
    spans.insert(100, _span("1" * 16, '{"stringValue":"late child"}', parent=f"{2:016x}", trace=f"{1:032x}"))  # run 1 waits for it
    path = tmp_path / "long.jsonl"
    path.write_text(_line(*spans) + "\n")
    assert path.stat().st_size >= reader.PIECEWISE_BYTES  # read piecewise as it is

    pieces, finished_at = [], []
    read_pieces, finish = ingest.pieces, joiner.TraceJoiner.finish

    def counted_pieces(*args):
        pieces.append(args[-1])
        yield from read_pieces(*args)

    def recorded_finish(self, trace_id, **options):
        finished_at.append(self.stats.spans)
        return finish(self, trace_id, **options)

    monkeypatch.setattr(ingest, "pieces", counted_pieces)
    monkeypatch.setattr(joiner.TraceJoiner, "finish", recorded_finish)
    piecewise = _report([path], "msgspec", capsys, "--max-warnings", "1000")
    early = list(finished_at)
    zipped = tmp_path / "long.jsonl.gz"
    zipped.write_bytes(gzip.compress(path.read_bytes()))
    from_gzip = _report([zipped], "msgspec", capsys, "--max-warnings", "1000")
    assert pieces == [1, 1]  # line 1 of each file

    monkeypatch.setattr(reader, "PIECEWISE_BYTES", 1 << 62)
    finished_at.clear()
    whole = _report([path], "msgspec", capsys, "--max-warnings", "1000")
    assert pieces == [1, 1]
    assert piecewise == whole
    assert "parent span " + "e" * 16 + " is not in the input" in whole[2]
    assert whole[2].index("has no traceId or spanId") < whole[2].index("is not in the input")  # the line's own first
    assert min(early) <= 128 and finished_at == [1401] * 700  # read whole: all at the line's end
    rows = json.loads(whole[1])
    assert rows["inputs"]["runs"] == 700 and rows["inputs"]["late_spans"] == 0
    expected = whole[1].replace(f'"bytes": {path.stat().st_size}', f'"bytes": {zipped.stat().st_size}')
    assert from_gzip[1].replace(str(zipped), str(path)) == expected  # gzip: the same report


def test_the_report_benchmark_gives_the_ratio_to_msgspec_alone_and_a_memory_verdict(tmp_path):
    """bench_report.py end to end on two small files: each row's ratio is its CPU time over the
    msgspec-alone child's of the same size (printed beside it), and memory gets its verdict."""
    bench = Path(__file__).resolve().parents[2] / "bench" / "bench_report.py"
    done = subprocess.run(
        [sys.executable, str(bench), "--sizes", "20000,40000", "--builds", "pure", "--decoders", "msgspec", "--conditions", "alone"],
        capture_output=True, text=True, timeout=300,
    )
    assert done.returncode in (0, 1), done.stderr  # 1: memory not flat, a verdict, not a failure to measure
    yardstick = {int(n.replace(",", "")): float(cpu) for n, cpu in re.findall(r"^\s+alone\s+([\d,]+) spans: ([\d.]+) CPU s", done.stdout, re.M)}
    rows = re.findall(r"^\s+alone\s+pure\s+msgspec\s+([\d,]+)\s.*?\s([\d.]+)\s+[\d.]+\s+([\d.]+)x\s", done.stdout, re.M)
    assert len(yardstick) == 2 and len(rows) == 2, done.stdout
    for spans, cpu, ratio in rows:
        assert float(ratio) == pytest.approx(float(cpu) / yardstick[int(spans.replace(",", ""))], rel=0.05), done.stdout
    verdict = re.search(r"the CPU time of msgspec alone; peak RSS .* spans: (flat|NOT FLAT) \(target: at most \+16 MB\)$", done.stdout, re.M)
    assert verdict and (verdict[1] == "flat") == (done.returncode == 0), done.stdout
    assert "spans/s target" not in done.stdout
