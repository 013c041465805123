"""Concrete advice drawn from a group of runs, each only when the data supports it."""

from __future__ import annotations

from collections import Counter

from .aggregate import Group
from .distribution import Distribution
from .verdicts import reason_text

# shares that make a recommendation worth showing
CITE_NOTHING_SHARE = 0.2
DUPLICATE_SHARE = 0.05
EMPTY_RETRIEVAL_SHARE = 0.05
INVALID_CITATION_SHARE = 0.1
NOT_MEASURABLE_SHARE = 0.2
MIN_MIDDLE_PROMPT = 5  # prompts with fewer chunks have no "middle" worth talking about


def _percent(share: float) -> str:
    value = share * 100
    return f"{value:.0f}%" if value >= 1 or value == 0 else f"{value:.1f}%"


def recommend(group: Group, min_traces: int) -> list[str]:
    """Concrete advice, each only when the data of ``group`` supports it."""
    out: list[str] = []
    # 1. top_k larger than what ever reaches the prompt
    for top_k in sorted(group.by_top_k):
        slot = group.by_top_k[top_k]
        depth = slot["depth"]
        if depth.n < min_traces:
            continue
        needed = int(depth.percentile(90) or 0)
        in_context = slot["in_context"].percentile(50)
        retrieved = slot["retrieved"].percentile(50)
        if needed and needed < top_k and in_context is not None and retrieved is not None and in_context < retrieved:
            out.append(
                f"Reduce top_k {top_k}→{needed}: median {int(in_context)} of {int(retrieved)} retrieved chunks reach the prompt "
                f"(90% of traces use no chunk ranked below {needed})"
            )
    # 2. answers that cite nothing
    if group.traces_with_answers >= min_traces:
        share = group.traces_citing_nothing / group.traces_with_answers
        if share >= CITE_NOTHING_SHARE:
            out.append(f"Answers cite nothing in {_percent(share)} of traces: check the citation instruction")
        invalid = group.traces_with_invalid / group.traces_with_answers
        if invalid >= INVALID_CITATION_SHARE:
            advice = []
            if group.out_of_context_citations:
                advice.append(f"{group.out_of_context_citations:,} name a retrieved chunk the prompt did not show (stale labels, truncation?)")
            if group.unknown_citations:
                advice.append(f"{group.unknown_citations:,} name nothing retrieved (check the labels the model is shown)")
            out.append(f"Answers cite sources that are not in the prompt in {_percent(invalid)} of traces: " + "; ".join(advice))
    # 3. lost in the middle
    sizes = Counter()
    for (size, _), count in group.positions.items():
        sizes[size] += count
    for size, cites in sizes.most_common(1):
        if size < MIN_MIDDLE_PROMPT or cites < min_traces:
            break
        distribution = Distribution()
        for (each, position), count in group.positions.items():
            if each == size:
                for _ in range(count):
                    distribution.add(position)
        low, high = int(distribution.percentile(25) or 0), int(distribution.percentile(75) or 0)
        if low > 1 and high < size and high - low + 1 <= size / 2:
            out.append(f"Cited chunks cluster mid-prompt (positions {low}–{high} of {size}): reorder by relevance so the best chunks come first")
    # 4. duplicates
    if group.retrieved_items and group.traces >= min_traces:
        share = group.duplicates / group.retrieved_items
        if share >= DUPLICATE_SHARE:
            out.append(f"{_percent(share)} of retrieved chunks are duplicates: deduplicate the index or the merged retrievals")
    # 5. empty retrievals
    if group.retrievals >= min_traces:
        share = group.empty_retrievals / group.retrievals
        if share >= EMPTY_RETRIEVAL_SHARE:
            out.append(f"{_percent(share)} of retrievals return nothing: check the index, filters and query rewriting")
    # 6. traces that can't be measured
    if group.traces >= min_traces:
        share = (group.traces - group.measurable) / group.traces
        if share >= NOT_MEASURABLE_SHARE and group.reasons:
            reason, _ = group.reasons.most_common(1)[0]
            out.append(f"{_percent(share)} of traces are not measurable (most often: {reason_text(reason)})")
    return out
