"""Verdict thresholds and CI gates: defaults < ``[tool.ragtrace]`` in pyproject.toml < flags.

::

    [tool.ragtrace]
    thresholds = { recall_proxy = 0.25, context_precision = 0.5 }   # per-trace verdict bars
    fail_under = { recall_proxy = 0.4, "score.groundedness" = 0.7 }  # p50 gates for `report` (scores too)
    min_traces = 20                                                  # sample size for a recommendation
    score_thresholds = { groundedness = 0.7 }                        # "high" score in the quadrants (default 0.5)

    [tool.ragtrace.eval]
    k = 10                      # cut-off for recall@k, precision@k, nDCG@k (default: the trace's top_k)
    low_recall = 0.5            # real recall below this is "low" (the blind-spot list)
    fail_under = { recall = 0.6, ndcg = 0.5 }                        # mean gates for `eval`

The nearest pyproject.toml (current directory, then its parents) is read with ``tomllib``; on
Python 3.10 ``tomli`` is used when installed, else the defaults apply (with a warning when the file
has a ``[tool.ragtrace]`` table).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .._internal import names

DEFAULT_THRESHOLDS: dict[str, float] = {
    names.METRIC_CONTEXT_PRECISION: 0.5,
    names.METRIC_RECALL_PROXY: 0.2,
    names.METRIC_RECALL_PROXY_WEIGHTED: 0.3,
    names.METRIC_CONTEXT_UTILIZATION: 0.25,
}
REPORT_GATES = names.PROXY_METRICS
EVAL_GATES = ("recall", "precision", "mrr", "ndcg")
DEFAULT_MIN_TRACES = 5
DEFAULT_LOW_RECALL = 0.5
# Figures are ratios and means computed in floating point: a weighted recall of exactly 2/5 comes
# out as 0.3999999999999999. A figure within BAR_TOLERANCE of a bar meets it.
BAR_TOLERANCE = 1e-9
SCORE_PREFIX = "score."  # fail_under score.<name>: a gate on a judge score (record_score)
_SCORE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_.\-]{0,200}")  # record_score's rule


class SettingsError(ValueError):
    """A bad value in pyproject.toml or in a flag; the message is one line."""


@dataclass(frozen=True)
class Settings:
    thresholds: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_THRESHOLDS))
    fail_under: dict[str, float] = field(default_factory=dict)
    score_thresholds: dict[str, float] = field(default_factory=dict)  # score name -> "high" bar
    min_traces: int = DEFAULT_MIN_TRACES
    eval_k: int | None = None
    low_recall: float = DEFAULT_LOW_RECALL
    eval_fail_under: dict[str, float] = field(default_factory=dict)
    source: str | None = None  # the pyproject.toml the values came from


def below(value: float, bar: float) -> bool:
    """Whether ``value`` misses ``bar`` (--threshold, --fail-under): below it by more than rounding error."""
    return value < bar - BAR_TOLERANCE


def find_pyproject(start: Path | None = None) -> Path | None:
    """The nearest pyproject.toml: in ``start`` (default: the current directory) or a parent."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        candidate = directory / "pyproject.toml"
        if candidate.is_file():
            return candidate
    return None


def _toml_loads() -> Any:
    try:
        import tomllib

        return tomllib.loads
    except ImportError:  # Python 3.10
        try:
            import tomli  # type: ignore[import-not-found]

            return tomli.loads
        except ImportError:
            return None


def load(path: Path | None, warn: Any = None) -> Settings:
    """Settings from ``path`` (a pyproject.toml), or the defaults when it is None or has no table."""
    if path is None:
        return Settings()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise SettingsError(f"cannot read {path}: {getattr(error, 'strerror', None) or error}") from None
    loads = _toml_loads()
    if loads is None:
        if "[tool.ragtrace" in text and warn is not None:
            warn("config", str(path), "Python 3.10 without tomli can't read pyproject.toml; default thresholds used (pip install tomli)")
        return Settings()
    try:
        document = loads(text)
    except ValueError as error:
        raise SettingsError(f"{path}: invalid TOML ({error})") from None
    table = document.get("tool", {}).get("ragtrace")
    if table is None:
        return Settings()
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: [tool.ragtrace] must be a table")
    return from_table(table, str(path))


def from_table(table: Mapping[str, Any], where: str) -> Settings:
    settings = Settings(source=where)
    known = {"thresholds", "fail_under", "min_traces", "score_thresholds", "eval"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise SettingsError(f"{where}: unknown key(s) in [tool.ragtrace]: {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    if "thresholds" in table:
        settings = replace(settings, thresholds={**settings.thresholds, **_bars(table["thresholds"], REPORT_GATES, f"{where}: thresholds")})
    if "fail_under" in table:
        settings = replace(settings, fail_under=_bars(table["fail_under"], REPORT_FAIL_UNDER, f"{where}: fail_under"))
    if "min_traces" in table:
        settings = replace(settings, min_traces=_positive_int(table["min_traces"], f"{where}: min_traces"))
    if "score_thresholds" in table:
        settings = replace(settings, score_thresholds=_bars(table["score_thresholds"], SCORES, f"{where}: score_thresholds"))
    evaluation = table.get("eval")
    if evaluation is not None:
        if not isinstance(evaluation, dict):
            raise SettingsError(f"{where}: [tool.ragtrace.eval] must be a table")
        unknown = sorted(set(evaluation) - {"k", "low_recall", "fail_under"})
        if unknown:
            raise SettingsError(f"{where}: unknown key(s) in [tool.ragtrace.eval]: {', '.join(unknown)}")
        if "k" in evaluation:
            settings = replace(settings, eval_k=_positive_int(evaluation["k"], f"{where}: eval.k"))
        if "low_recall" in evaluation:
            settings = replace(settings, low_recall=_ratio(evaluation["low_recall"], f"{where}: eval.low_recall"))
        if "fail_under" in evaluation:
            settings = replace(settings, eval_fail_under=_bars(evaluation["fail_under"], EVAL_GATES, f"{where}: eval.fail_under"))
    return settings


def _ratio(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or not 0 <= value <= 1:
        raise SettingsError(f"{what} must be a number between 0 and 1, got {value!r}")
    return float(value)


def _positive_int(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise SettingsError(f"{what} must be a positive integer, got {value!r}")
    return value


ANY_SCORE = "<name>"
SCORES = (ANY_SCORE,)  # score_thresholds: any score name
REPORT_FAIL_UNDER = REPORT_GATES + (SCORE_PREFIX + ANY_SCORE,)  # the proxies, or score.<name>


def _bar(key: str, value: Any, allowed: tuple[str, ...], what: str) -> float:
    """A figure's bar (a ratio), or a score's: any finite number, as scores are on the judge's scale."""
    if ANY_SCORE in allowed or (SCORE_PREFIX + ANY_SCORE in allowed and key.startswith(SCORE_PREFIX)):
        name = key if ANY_SCORE in allowed else key[len(SCORE_PREFIX):]
        if not _SCORE_NAME.fullmatch(name):
            raise SettingsError(f"{what}: {key!r} does not name a score (a letter, then letters, digits, '_', '.', '-')")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise SettingsError(f"{what} {key} must be a number, got {value!r}")
        return float(value)
    if key not in allowed:
        raise SettingsError(f"{what}: unknown figure {key!r} (one of {', '.join(allowed)})")
    return _ratio(value, f"{what}.{key}")


def _bars(table: Any, allowed: tuple[str, ...], what: str) -> dict[str, float]:
    if not isinstance(table, dict):
        raise SettingsError(f"{what} must be a table of name = number")
    return {key: _bar(key, value, allowed, what) for key, value in table.items()}


def parse_pairs(text: str, allowed: tuple[str, ...], flag: str) -> dict[str, float]:
    """``"recall_proxy=0.4,context_precision=0.5"`` -> a dict; bad input raises SettingsError."""
    bars: dict[str, float] = {}
    for piece in text.split(","):
        piece = piece.strip()
        if not piece:
            continue
        key, equals, raw = piece.partition("=")
        key = key.strip()
        if not equals:
            raise SettingsError(f"{flag}: expected name=number, got {piece!r}")
        try:
            value = float(raw)
        except ValueError:
            raise SettingsError(f"{flag}: {key} needs a number, got {raw.strip()!r}") from None
        bars[key] = _bar(key, value, allowed, flag)
    if not bars:
        raise SettingsError(f"{flag}: expected name=number[,name=number...]")
    return bars
