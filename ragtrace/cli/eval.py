"""``ragtrace eval --golden GOLDEN.jsonl PATH...``: real retrieval quality against labelled queries.

The golden file holds one JSON object per line: ``query`` and/or ``query_id``, ``relevant_ids``
(a list of chunk ids) and optionally ``k``. A run is matched to a golden query by ``rag.query.id``
when the pipeline set one and the golden line has a ``query_id``; else by the normalised query
text, compared through ``query_hash`` (the hash ragtrace records as ``rag.query.hash``, so this
works in redact mode too, where the text itself is never exported).

Per run, from the retrieved ids in best-rank order, cut at k (``--k``, else the golden line's
``k``, else the run's requested ``top_k``, else everything retrieved): recall@k, precision@k,
MRR (first relevant within the top k) and nDCG@k with binary relevance. Per query these are
averaged over its runs, and the summary averages the queries. The online recall proxy is set
beside them: Spearman's rank correlation across queries, and the queries where the proxy looks
healthy (at or above its verdict threshold) while real recall is low: relevant chunks that were
never retrieved, which no proxy can see.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from .._internal import names
from .._internal.core.keyed import warn_if_random
from .._internal.stages.stage import query_hash
from .diagnostics import Diagnostics
from .notdata import JunkRun, binary
from .reader import InputError, ReadStats
from .report import ReadOptions, iter_rows, open_reader
from .settings import Settings, below
from .traces import STATUS_ATTRIBUTES_LOST, Row

METRICS = ("recall", "precision", "mrr", "ndcg")
MAX_GOLDEN_LINE_BYTES = 1 << 20  # a query and its relevant ids; longer lines are skipped
MAX_SKIPPED_BYTES = 64 << 20  # ...unless they go on longer than this


class GoldenError(ValueError):
    """A golden file with no usable line; the message is one line."""


@dataclass(slots=True)
class _Tally:
    """What the runs matched to one golden query added up: made at its first run."""

    sums: dict[str, float] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    ks: set[int] = field(default_factory=set)
    retrieved: set[str] = field(default_factory=set)


@dataclass(eq=False, slots=True)
class GoldenQuery:
    """One golden line, held compactly (slots, a tuple of ids, no tally until a run matches it):
    a golden set of a million lines is held whole while the traces stream past (docs/cli.md)."""

    line: int
    query: str | None
    query_id: str | None
    relevant: tuple[str, ...]
    k: int | None = None
    traces: int = 0
    unscored: int = 0
    tally: _Tally | None = None

    @property
    def label(self) -> str:
        return self.query if self.query is not None else f"id:{self.query_id}"

    def saw(self, k: int, retrieved: Iterable[str]) -> None:
        """A matched run cut at ``k`` that retrieved ``retrieved``."""
        if self.tally is None:
            self.tally = _Tally()
        self.tally.ks.add(k)
        self.tally.retrieved.update(retrieved)

    def add(self, key: str, value: float) -> None:
        if self.tally is None:
            self.tally = _Tally()
        sums, counts = self.tally.sums, self.tally.counts
        sums[key] = sums.get(key, 0.0) + value
        counts[key] = counts.get(key, 0) + 1

    def mean(self, key: str) -> float | None:
        count = self.tally.counts.get(key) if self.tally is not None else None
        return self.tally.sums[key] / count if count else None  # type: ignore[union-attr]

    @property
    def scored(self) -> bool:
        return self.tally is not None and "recall" in self.tally.counts

    @property
    def ks(self) -> set[int]:
        return self.tally.ks if self.tally is not None else set()

    @property
    def never_retrieved(self) -> list[str]:
        retrieved = self.tally.retrieved if self.tally is not None else set()
        return [chunk_id for chunk_id in self.relevant if chunk_id not in retrieved]

    def k_text(self) -> str:
        ks = self.ks
        if not ks:
            return "-"
        return str(min(ks)) if len(ks) == 1 else f"{min(ks)}-{max(ks)}"

    def record(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "query_id": self.query_id,
            "line": self.line,
            "relevant_ids": list(self.relevant),
            "traces": self.traces,
            "unscored_traces": self.unscored,
            "k": sorted(self.ks),
            **{key: self.mean(key) for key in (*METRICS, "recall_proxy")},
            "never_retrieved": self.never_retrieved if self.traces else None,
        }


# --- the golden file ------------------------------------------------------------------------------
def load_golden(path: str, diagnostics: Diagnostics) -> list[GoldenQuery]:
    """The golden queries; a line over ``MAX_GOLDEN_LINE_BYTES`` is skipped with a warning, and
    input that is plainly not JSON lines (``notdata``) stops with a ``GoldenError``."""
    try:
        handle = open(path, "rb")  # noqa: SIM115
    except OSError as error:
        raise InputError(f"cannot read {path}: {error.strerror or error}") from None
    queries: list[GoldenQuery] = []
    junk = JunkRun()
    with handle:
        for number, raw in enumerate(_capped_lines(handle, path), start=1):
            where = f"{path}:{number}"
            if raw is None or not raw.strip():
                reason = junk.blank(number) if raw is not None else junk.bad(number)
                if reason is not None:
                    raise GoldenError(f"{path}: {reason}, not a golden file of JSON lines")
                if raw is None:
                    diagnostics.warn("golden", where, f"line longer than {MAX_GOLDEN_LINE_BYTES >> 20} MiB; skipped")
                continue
            try:
                item = json.loads(raw)
            except (ValueError, RecursionError) as error:
                reason = (binary(raw, number) if len(raw) > MAX_GOLDEN_LINE_BYTES else None) or junk.bad(number)
                if reason is not None:
                    raise GoldenError(f"{path}: {reason}, not a golden file of JSON lines") from None
                if isinstance(error, RecursionError):
                    reason = "nested too deeply"
                else:
                    reason = "not UTF-8" if isinstance(error, UnicodeDecodeError) else str(error).split(": line")[0]
                diagnostics.warn("golden", where, f"not valid JSON ({reason}); line skipped")
                continue
            junk.good()
            query = _golden_query(item, number, where, diagnostics)
            if query is not None:
                queries.append(query)
    if not queries:
        raise GoldenError(f"{path}: no usable golden query (each line needs query or query_id, and relevant_ids)")
    return queries


def _capped_lines(handle: IO[bytes], path: str) -> Iterator[bytes | None]:
    """The lines of ``handle``, each None when it is longer than ``MAX_GOLDEN_LINE_BYTES`` (the
    rest of it is read past in pieces of that size, so memory stays flat)."""
    number = 0
    while True:
        number += 1
        line = handle.readline(MAX_GOLDEN_LINE_BYTES + 1)
        if not line:
            return
        if len(line) <= MAX_GOLDEN_LINE_BYTES or line.endswith(b"\n"):
            yield line
            continue
        if b"\0" in line:  # binary: let the caller say so rather than read past it forever
            yield line
            return
        skipped = len(line)
        while line and not line.endswith(b"\n"):
            if skipped > MAX_SKIPPED_BYTES:
                raise GoldenError(f"{path}: line {number} goes on for more than {MAX_SKIPPED_BYTES >> 20} MiB, not a golden file of JSON lines")
            line = handle.readline(MAX_GOLDEN_LINE_BYTES)
            skipped += len(line)
        yield None


def _golden_query(item: Any, number: int, where: str, diagnostics: Diagnostics) -> GoldenQuery | None:
    if not isinstance(item, dict):
        diagnostics.warn("golden", where, "not a JSON object; line skipped")
        return None
    query, query_id = item.get("query"), item.get("query_id")
    if query_id is not None and not isinstance(query_id, (str, int)):
        query_id = None
    if not isinstance(query, str) and query_id is None:
        diagnostics.warn("golden", where, "needs a query (string) or a query_id; line skipped")
        return None
    relevant = item.get("relevant_ids")
    if not isinstance(relevant, list) or not all(isinstance(r, (str, int)) and not isinstance(r, bool) for r in relevant):
        diagnostics.warn("golden", where, "relevant_ids must be a list of ids; line skipped")
        return None
    relevant_ids = tuple(dict.fromkeys(str(r) for r in relevant))
    if not relevant_ids:
        diagnostics.warn("golden", where, "relevant_ids is empty: recall is undefined; line skipped")
        return None
    k = item.get("k")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int) or k < 1):
        diagnostics.warn("golden", where, f"k must be a positive integer, got {k!r}; ignored")
        k = None
    return GoldenQuery(number, query if isinstance(query, str) else None, None if query_id is None else str(query_id), relevant_ids, k)


# --- figures --------------------------------------------------------------------------------------
def retrieval_metrics(retrieved: Sequence[str], relevant: Iterable[str], k: int) -> dict[str, float]:
    """recall@k, precision@k, MRR within the top k and binary nDCG@k."""
    relevant_set = set(relevant)
    top = retrieved[:k]
    hits = [index for index, chunk_id in enumerate(top) if chunk_id in relevant_set]
    dcg = sum(1.0 / math.log2(index + 2) for index in hits)
    ideal = sum(1.0 / math.log2(index + 2) for index in range(min(len(relevant_set), k)))
    return {
        "recall": len(hits) / len(relevant_set),
        "precision": len(hits) / k,
        "mrr": 1.0 / (hits[0] + 1) if hits else 0.0,
        "ndcg": dcg / ideal if ideal else 0.0,
    }


def _ranks(values: Sequence[float]) -> list[float]:
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        average = (start + end) / 2 + 1
        for position in range(start, end + 1):
            ranks[order[position]] = average
        start = end + 1
    return ranks


def spearman(xs: Sequence[float], ys: Sequence[float]) -> float | None:
    """Spearman's ρ (Pearson on average ranks, so ties are handled); None below 3 points or if constant."""
    if len(xs) != len(ys) or len(xs) < 3:
        return None
    rx, ry = _ranks(xs), _ranks(ys)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    sxy = sum((a - mx) * (b - my) for a, b in zip(rx, ry))
    sxx = sum((a - mx) ** 2 for a in rx)
    syy = sum((b - my) ** 2 for b in ry)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


# --- the command ----------------------------------------------------------------------------------
@dataclass(eq=False)
class EvalResult:
    stats: ReadStats
    golden_path: str
    queries: list[GoldenQuery]
    proxy_bar: float
    low_recall: float
    k: int | None
    rows_limit: int
    runs: int = 0
    unlabelled: int = 0
    files: list[str] = field(default_factory=list)
    fail_under: dict[str, float] = field(default_factory=dict)
    gate_failures: list[str] = field(default_factory=list)

    def matched(self) -> list[GoldenQuery]:
        return [q for q in self.queries if q.scored]

    def means(self) -> dict[str, float | None]:
        matched = self.matched()
        out: dict[str, float | None] = {}
        for key in (*METRICS, "recall_proxy"):
            values = [q.mean(key) for q in matched if q.mean(key) is not None]
            out[key] = sum(values) / len(values) if values else None  # type: ignore[arg-type]
        return out

    def agreement(self) -> tuple[float | None, int]:
        pairs = [(q.mean("recall_proxy"), q.mean("recall")) for q in self.matched()]
        pairs = [(p, r) for p, r in pairs if p is not None and r is not None]
        return spearman([p for p, _ in pairs], [r for _, r in pairs]), len(pairs)  # type: ignore[misc]

    def blind_spots(self) -> list[GoldenQuery]:
        spots = []
        for query in self.matched():
            proxy, recall = query.mean("recall_proxy"), query.mean("recall")
            if proxy is not None and recall is not None and not below(proxy, self.proxy_bar) and below(recall, self.low_recall):
                spots.append(query)
        return sorted(spots, key=lambda q: (q.mean("recall"), -(q.mean("recall_proxy") or 0), q.line))

    def queries_for_display(self) -> list[GoldenQuery]:
        ordered = sorted(self.queries, key=lambda q: (not q.scored, q.mean("recall") if q.scored else 0.0, q.line))
        return ordered[: self.rows_limit] if self.rows_limit else []

    def summary(self) -> dict[str, Any]:
        rho, n = self.agreement()
        matched = len(self.matched())
        return {
            "golden": len(self.queries),
            "matched": matched,
            "unmatched": sum(1 for q in self.queries if not q.traces),
            "means": self.means(),
            "spearman": rho,
            "agreement_n": n,
        }

    def document(self) -> dict[str, Any]:
        return {
            "command": "eval",
            "inputs": {
                "files": self.files,
                "golden": self.golden_path,
                "spans": self.stats.spans,
                "traces": self.stats.traces,
                "runs": self.runs,
                "runs_not_in_golden_set": self.unlabelled,
            },
            "k": self.k,
            "proxy_bar": self.proxy_bar,
            "low_recall": self.low_recall,
            "summary": self.summary(),
            "blind_spots": [q.record() for q in self.blind_spots()],
            "queries": [q.record() for q in sorted(self.queries, key=lambda q: q.line)],
            "fail_under": self.fail_under,
            "gate_failures": self.gate_failures,
        }

    def gate(self) -> list[str]:
        means = self.means()
        failures = []
        for key, bar in self.fail_under.items():
            value = means.get(key)
            if value is None:
                failures.append(f"{key}: no matched queries (bar {bar:g})")
            elif below(value, bar):
                failures.append(f"{key}: mean {value:.3f} < {bar:g}")
        return failures


class _Index:
    def __init__(self, queries: list[GoldenQuery], diagnostics: Diagnostics, golden_path: str) -> None:
        self.by_id: dict[str, GoldenQuery] = {}
        self.by_hash: dict[str, GoldenQuery] = {}
        for query in queries:
            where = f"{golden_path}:{query.line}"
            if query.query_id is not None:
                if query.query_id in self.by_id:
                    diagnostics.warn("golden", where, f"query_id {query.query_id!r} repeats line {self.by_id[query.query_id].line}; the first is used")
                else:
                    self.by_id[query.query_id] = query
            if query.query is not None:
                digest = query_hash(query.query)
                if digest in self.by_hash:
                    diagnostics.warn("golden", where, f"query repeats line {self.by_hash[digest].line} (after normalisation); the first is used")
                else:
                    self.by_hash[digest] = query

    def match(self, row: Row) -> GoldenQuery | None:
        if row.query_id is not None and row.query_id in self.by_id:
            return self.by_id[row.query_id]
        # the text when the trace has it: a trace's rag.query.hash matches only under the same hash key
        if row.query is not None:
            return self.by_hash.get(query_hash(row.query))
        if row.query_hash is None:
            return None
        if self.by_hash:  # the golden set's digests were made: under the random key they can't match
            warn_if_random("the golden set's query hashes can't match the traces' rag.query.hash")
        return self.by_hash.get(row.query_hash)


def run_eval(
    golden_path: str,
    paths: Iterable[str],
    settings: Settings,
    diagnostics: Diagnostics,
    *,
    options: ReadOptions | None = None,
    rows: int = 25,
) -> EvalResult:
    queries = load_golden(golden_path, diagnostics)
    index = _Index(queries, diagnostics, golden_path)
    reader = open_reader(paths, diagnostics, options or ReadOptions())
    result = EvalResult(
        reader.stats,
        golden_path,
        queries,
        proxy_bar=settings.thresholds.get(names.METRIC_RECALL_PROXY, 0.0),
        low_recall=settings.low_recall,
        k=settings.eval_k,
        rows_limit=rows,
        files=[str(p) for p in reader.files],
        fail_under=dict(settings.eval_fail_under),
    )
    try:
        for row in iter_rows(reader, diagnostics):
            result.runs += 1
            query = index.match(row)
            if query is None:
                result.unlabelled += 1
                continue
            query.traces += 1
            if row.retrievals == 0 or STATUS_ATTRIBUTES_LOST in row.status:
                query.unscored += 1
                continue
            k = settings.eval_k or query.k or row.top_k or len(row.retrieved_ids) or 1
            query.saw(k, row.retrieved_ids)
            for key, value in retrieval_metrics(row.retrieved_ids, query.relevant, k).items():
                query.add(key, value)
            proxy = row.figures.get(names.METRIC_RECALL_PROXY)
            if isinstance(proxy, (int, float)) and row.measurable:
                query.add("recall_proxy", float(proxy))
    finally:
        if reader.progress is not None:
            reader.progress.finish()
            diagnostics.progress = None
    result.gate_failures = result.gate()
    return result


