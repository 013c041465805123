"""The ``ragtrace`` command: ``ragtrace report PATH...``, ``ragtrace eval --golden FILE PATH...`` and
``ragtrace dashboard grafana|rules`` (the shipped fleet view, docs/fleet.md).

Exit codes: 0 success; 1 a ``--fail-under`` bar was missed; 2 bad arguments or configuration;
3 an input file can't be read or is not trace data; 4 the input holds no spans; 130 interrupted. Errors are one line on stderr, never a traceback
(``RAGTRACE_DEBUG=1`` shows one for internal errors). See docs/cli.md.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any, NoReturn

EXIT_OK = 0
EXIT_GATE = 1
EXIT_USAGE = 2
EXIT_INPUT = 3
EXIT_NO_SPANS = 4
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130

__all__ = ["main", "EXIT_OK", "EXIT_GATE", "EXIT_USAGE", "EXIT_INPUT", "EXIT_NO_SPANS"]


class _UsageError(Exception):
    """Bad arguments; the message is one line."""


class _Parser(argparse.ArgumentParser):
    """argparse, but errors are one line and raise instead of exiting."""

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{message} (see '{self.prog} --help')")


def _version() -> str:
    """The version, and whether the report path runs compiled here (``compiled``)."""
    from .._internal.setup.config import VERSION
    from .compiled import build

    return f"{VERSION} (report path: {build()})"


def _non_negative(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {value}")
    return value


def _positive(text: str) -> int:
    value = _non_negative(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a number >= 1, got {value}")
    return value


def _ratio(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") from None
    if not 0 <= value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {value}")
    return value


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="OTLP/JSON trace files or directories (optionally gzipped)")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print JSON instead of tables")
    fmt.add_argument("--markdown", action="store_true", help="print Markdown instead of tables")
    parser.add_argument("--html", metavar="FILE", help="also write a self-contained HTML page with charts")
    parser.add_argument("-o", "--output", metavar="FILE", help="write the output to FILE instead of stdout")
    parser.add_argument("--plain", action="store_true", help="plain text tables even when rich is installed")
    parser.add_argument("--config", metavar="PYPROJECT", help="read [tool.ragtrace] from this file (default: the nearest pyproject.toml)")
    parser.add_argument("--no-config", action="store_true", help="ignore pyproject.toml")
    parser.add_argument("--threshold", metavar="NAME=X,...", help="verdict bars, e.g. recall_proxy=0.25,context_precision=0.5")
    parser.add_argument("--rows", type=_non_negative, default=25, metavar="N", help="rows listed in tables (default 25; 0: none)")
    progress = parser.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_true", default=None, help="always show the progress bar")
    progress.add_argument("--no-progress", dest="progress", action="store_false", help="never show the progress bar")
    parser.add_argument("--grace-spans", type=_non_negative, default=None, metavar="N", help="keep a trace open for N more spans after its root arrived (default 0; for files given newest first or paged exports)")
    parser.add_argument("--max-pending-spans", type=_positive, default=None, metavar="N", help="spans held for unfinished traces before the oldest are finished (default 100000)")
    parser.add_argument("--max-warnings", type=_non_negative, default=10, metavar="N", help="warnings printed per kind (default 10)")
    parser.add_argument("--decoder", choices=("auto", "msgspec", "json"), default="auto", help="JSON decoder: msgspec (fast, in the [cli] extra) or the standard library's json; auto uses msgspec when installed (same results either way)")
    parser.add_argument("-q", "--quiet", action="store_true", help="print no warnings")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="ragtrace", description="Audit exported RAG traces offline, and measure real recall against a golden set.")
    parser.add_argument("--version", action="version", version=f"ragtrace {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    report = commands.add_parser("report", help="per-run figures, aggregates and recommendations", description="Per-run figures, aggregates, recommendations and CI gates from exported traces.")
    _common(report)
    report.add_argument("--fail-under", metavar="NAME=X,...", help="exit 1 when an overall p50 is below its bar, e.g. recall_proxy=0.4 or score.groundedness=0.7 (a judge score)")
    report.add_argument("--score-threshold", metavar="NAME=X,...", help="judge scores at or above X are high in the quadrant table, e.g. groundedness=0.7 (default 0.5; the proxy's bar is --threshold recall_proxy)")
    report.add_argument("--group-by", metavar="DIM,...", help="grouping dimensions (default pipeline,route,version,top_k; any rag.pipeline.<key>)")
    report.add_argument("--min-traces", type=_positive, default=None, metavar="N", help="runs needed before a recommendation is made (default 5)")
    evaluate = commands.add_parser("eval", help="recall@k, precision@k, MRR, nDCG@k against a golden set", description="Real retrieval quality of traced runs against a golden set, beside the online proxy.")
    evaluate.add_argument("--golden", required=True, metavar="GOLDEN.jsonl", help="one JSON object per line: query or query_id, relevant_ids, optional k")
    _common(evaluate)
    evaluate.add_argument("--k", type=_positive, default=None, help="cut-off for @k figures (default: the golden line's k, else the run's top_k)")
    evaluate.add_argument("--low-recall", type=_ratio, default=None, metavar="X", help="real recall below X is low (blind-spot list; default 0.5)")
    evaluate.add_argument("--fail-under", metavar="NAME=X,...", help="exit 1 when a mean is below its bar: recall, precision, mrr, ndcg")
    dashboard = commands.add_parser("dashboard", help="print the Grafana dashboard or the Prometheus rules for ragtrace's metrics", description="Print the shipped Grafana dashboard (JSON) or Prometheus rules file (recording rules and alerts) that query ragtrace's metrics (docs/fleet.md).")
    dashboard.add_argument("kind", choices=("grafana", "rules"), help="grafana: the dashboard JSON to import; rules: a Prometheus rule_files entry")
    dashboard.add_argument("-o", "--output", metavar="FILE", help="write to FILE instead of stdout")
    return parser


def _dashboard(args: argparse.Namespace, stdout: IO[str]) -> int:
    from .fleet_views import shipped

    text = shipped(args.kind)
    if not args.output:
        stdout.write(text)
        return EXIT_OK
    try:
        Path(args.output).write_text(text, encoding="utf-8")
    except OSError as error:
        raise _UsageError(f"--output: cannot write {args.output}: {error.strerror or error}") from None
    return EXIT_OK


def _settings(args: argparse.Namespace, diagnostics: Any) -> Any:
    from dataclasses import replace

    from . import settings as settings_module

    if args.no_config:
        settings = settings_module.Settings()
    else:
        path = Path(args.config) if args.config else settings_module.find_pyproject()
        if args.config and not path.is_file():  # type: ignore[union-attr]
            raise settings_module.SettingsError(f"--config: {args.config} is not a file")
        settings = settings_module.load(path, diagnostics.warn)
    if args.threshold:
        bars = settings_module.parse_pairs(args.threshold, settings_module.REPORT_GATES, "--threshold")
        settings = replace(settings, thresholds={**settings.thresholds, **bars})
    if args.command == "report":
        if args.fail_under:
            settings = replace(settings, fail_under=settings_module.parse_pairs(args.fail_under, settings_module.REPORT_FAIL_UNDER, "--fail-under"))
        if args.score_threshold:
            bars = settings_module.parse_pairs(args.score_threshold, settings_module.SCORES, "--score-threshold")
            settings = replace(settings, score_thresholds={**settings.score_thresholds, **bars})
        if args.min_traces is not None:
            settings = replace(settings, min_traces=args.min_traces)
    else:
        if args.fail_under:
            settings = replace(settings, eval_fail_under=settings_module.parse_pairs(args.fail_under, settings_module.EVAL_GATES, "--fail-under"))
        if args.k is not None:
            settings = replace(settings, eval_k=args.k)
        if args.low_recall is not None:
            settings = replace(settings, low_recall=args.low_recall)
    return settings


def _group_by(text: str | None) -> tuple[str, ...]:
    from .aggregator import DEFAULT_GROUP_BY

    if not text:
        return DEFAULT_GROUP_BY
    dimensions = tuple(dict.fromkeys(piece.strip() for piece in text.split(",") if piece.strip()))
    if not dimensions:
        raise _UsageError("--group-by: expected dimension names, e.g. pipeline,version")
    return dimensions


def _run(args: argparse.Namespace, stdout: IO[str], stderr: IO[str]) -> int:
    from . import html, json_output, tables, text_output
    from .diagnostics import Diagnostics
    from .report import ReadOptions

    if args.html:
        from .charts import ChartsUnavailable, check_available

        try:
            check_available()  # before reading anything
        except ChartsUnavailable as error:
            raise _UsageError(str(error)) from None
    diagnostics = Diagnostics(stderr, limit=args.max_warnings, quiet=args.quiet)
    settings = _settings(args, diagnostics)
    from .reader import resolve_decoder

    try:
        resolve_decoder(args.decoder)
    except ValueError as error:
        raise _UsageError(f"--decoder {args.decoder}: {error}") from None
    options = ReadOptions(progress=args.progress, decoder=args.decoder)
    if args.grace_spans is not None:
        options.grace_spans = args.grace_spans
    if args.max_pending_spans is not None:
        options.max_pending_spans = args.max_pending_spans

    if args.command == "report":
        from .report import run_report

        result: Any = run_report(
            args.paths, settings, diagnostics, options=options, group_by=_group_by(args.group_by), rows=args.rows, keep_rows=args.json
        )
        failed = bool(result.gate_failures)
    else:
        from .eval import run_eval

        result = run_eval(args.golden, args.paths, settings, diagnostics, options=options, rows=args.rows)
        failed = bool(result.gate_failures)

    out: IO[str] = stdout
    if args.output:
        try:
            out = open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed below
        except OSError as error:
            raise _UsageError(f"--output: cannot write {args.output}: {error.strerror or error}") from None
    try:
        warnings = diagnostics.total
        if args.json:
            (json_output.write_report_json if args.command == "report" else json_output.write_eval_json)(result, out)
        else:
            writer = tables.Writer(out, tables.choose_style(out, args.markdown, args.plain))
            (text_output.write_report_text if args.command == "report" else text_output.write_eval_text)(result, writer, warnings)
        out.flush()
    finally:
        if out is not stdout:
            out.close()
        spool = getattr(result, "spool", None)
        if spool is not None:
            spool.close()
    if args.html:
        page = html.report_page(result, diagnostics.total) if args.command == "report" else html.eval_page(result, diagnostics.total)
        try:
            html.write(args.html, page)
        except OSError as error:
            raise _UsageError(f"--html: cannot write {args.html}: {error.strerror or error}") from None
    diagnostics.summary()
    if failed:
        stderr.write("ragtrace: --fail-under: " + "; ".join(result.gate_failures) + "\n")
        return EXIT_GATE
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (the console script passes it to ``sys.exit``)."""
    stdout, stderr = sys.stdout, sys.stderr
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
        if args.command is None:
            parser.print_help(stderr)
            return EXIT_USAGE
        if args.command == "dashboard":
            return _dashboard(args, stdout)
        return _run(args, stdout, stderr)
    except SystemExit as exit_:  # --help, --version
        return exit_.code if isinstance(exit_.code, int) else EXIT_OK
    except KeyboardInterrupt:
        stderr.write("\nragtrace: interrupted\n")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `ragtrace report ... | head`
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, stdout.fileno())
        except (OSError, ValueError, AttributeError):
            pass
        return EXIT_OK
    except Exception as error:  # noqa: BLE001 - the CLI never shows a traceback by default
        return _error_exit(error, stderr)


def _error_exit(error: Exception, stderr: IO[str]) -> int:
    from .eval import GoldenError
    from .inputs import InputError, NoSpansError
    from .settings import SettingsError

    if isinstance(error, InputError):
        stderr.write(f"ragtrace: error: {error}\n")
        return EXIT_INPUT
    if isinstance(error, NoSpansError):
        stderr.write(f"ragtrace: error: {error}\n")
        return EXIT_NO_SPANS
    if isinstance(error, (_UsageError, SettingsError, GoldenError)):
        stderr.write(f"ragtrace: error: {error}\n")
        return EXIT_USAGE
    if os.environ.get("RAGTRACE_DEBUG"):
        import traceback

        traceback.print_exception(type(error), error, error.__traceback__, file=stderr)
    stderr.write(f"ragtrace: internal error: {type(error).__name__}: {error} (RAGTRACE_DEBUG=1 shows the traceback)\n")
    return EXIT_INTERNAL
