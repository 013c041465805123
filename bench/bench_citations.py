"""Citation parser throughput and adversarial-input timings (a script, not a test).

Timing assertions don't belong in unit tests on shared, noisy machines, so the 100 ms bar for
hostile answers is checked here instead: ``python bench/bench_citations.py``. Each row is the best
of a few runs; "2x size" is the time at double the input over the time at 1x (about 2 when
linear, about 4 when quadratic). The exit status is 1 when a row of the brief's set misses the
bar or any row parses wrong; the further shapes report against the bar but are informational.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from ragtrace._internal.core.citations import CitationResult, parse_citations  # noqa: E402

BAR_MS = 100.0
REPEATS = 3
LABELS = {str(i): f"doc-{i}" for i in range(1, 11)} | {f"doc-{i}": f"doc-{i}" for i in range(1, 11)}
MB = 1_000_000

WORDS = (
    "retrieval augmented generation grounds the answer in passages the retriever found which the "
    "model then cites so that readers can check every claim against its source while the index "
    "keeps embeddings of each chunk and a reranker orders the candidates by relevance"
).split()


def _sentence(rng: random.Random) -> str:
    words = rng.choices(WORDS, k=rng.randint(8, 22))
    sentence = " ".join(words).capitalize()
    roll = rng.random()
    if roll < 0.35:
        sentence += f" [{rng.randint(1, 10)}]"
    elif roll < 0.45:
        sentence += f" [{rng.randint(1, 5)}, {rng.randint(6, 10)}]"
    elif roll < 0.5:
        sentence += f" [doc-{rng.randint(1, 12)}]"
    elif roll < 0.55:
        sentence += f" ([docs](https://example.com/guide/{rng.randint(1, 99)}))"
    elif roll < 0.6:
        sentence += f" using `index[{rng.randint(0, 9)}]`"
    return sentence + "."


def realistic_answer(rng: random.Random) -> str:
    """Markdown of 1-3 KB: headings, lists, links, inline and fenced code, citations."""
    parts: list[str] = []
    target = rng.randint(1000, 3000)
    while sum(len(p) for p in parts) < target:
        kind = rng.random()
        if kind < 0.1:
            parts.append(f"## {' '.join(rng.choices(WORDS, k=3)).title()}")
        elif kind < 0.25:
            parts.append("\n".join(f"- {_sentence(rng)}" for _ in range(rng.randint(2, 4))))
        elif kind < 0.32:
            parts.append("```python\nscores = index.search(query)[0:5]\nprint(scores[1])\n```")
        else:
            parts.append(" ".join(_sentence(rng) for _ in range(rng.randint(2, 5))))
    if rng.random() < 0.1:
        body = " ".join(parts).replace("\\", "").replace('"', "'")
        return '{"answer": "%s", "citations": [1, 3, "doc-4"]}' % body.replace("\n", "\\n")
    if rng.random() < 0.2:
        parts.append("[1]: https://example.com/source-one")
    return "\n\n".join(parts)


Check = Callable[[CitationResult], bool]


def _none(result: CitationResult) -> bool:
    return result.cited_ids == () and result.invalid_labels == () and not result.conformant


def _only_first(result: CitationResult) -> bool:
    return result.cited_ids == ("doc-1",) and result.invalid_labels == ()


def _first_ten(result: CitationResult) -> bool:
    return result.cited_ids == tuple(f"doc-{i}" for i in range(1, 11))


def _nine(result: CitationResult) -> bool:
    return result.cited_ids == tuple(f"doc-{i}" for i in range(1, 10))


# (name, text of scale k, check). The check asserts the parse is also *right*, not only fast.
# The brief's set must be under the bar; the others are further hostile shapes.
REQUIRED: list[tuple[str, Callable[[int], str], Check]] = [
    ("1 MB of [", lambda k: "[" * (k * MB), _none),
    ("1 MB of [[[[1", lambda k: "[[[[1" * (k * MB // 5), _none),
    ("unclosed ``` + 1 MB", lambda k: "intro [1]\n```\n" + "answer [2] " * (k * MB // 11), _only_first),
    ("a million [1] (3 MB)", lambda k: "[1]" * (k * MB), _only_first),
    ("1 MB of {", lambda k: "{" * (k * MB), _none),
    ("nested: 0.5M [ + 1 + 0.5M ]", lambda k: "[" * (k * MB // 2) + "1" + "]" * (k * MB // 2), _only_first),
    ("nested: ([[1]] )* 1 MB", lambda k: "([[1]] )" * (k * MB // 8), _only_first),
    ('a million {"citations" (12 MB)', lambda k: '{"citations"' * (k * MB), _none),
]
EXTRA: list[tuple[str, Callable[[int], str], Check]] = [
    ("[ then 1 MB of text", lambda k: "[" + "a" * (k * MB), _none),
    ("a million 'see [1] ' (8 MB)", lambda k: "see [1] " * (k * MB), _only_first),
    ("[1]..[9] cycling (3 MB)", lambda k: "".join(f"[{i}]" for i in range(1, 10)) * (k * MB // 9), _nine),
    ("1 MB of `", lambda k: "`" * (k * MB), _none),
    ("1 MB of ` `` runs", lambda k: "` `` a " * (k * MB // 7), _none),
    ("1 MB of closed fences", lambda k: "```\n[1]\n```\n" * (k * MB // 12), _none),
    ("` `` ``` then a 1 MB paragraph", lambda k: "` `` ``` " + "text [1]\n" * (k * MB // 9), _only_first),
    ("1 MB of 】【", lambda k: "】【" * (k * MB // 2), _none),
    ('a million {"citations": [1]} (19 MB)', lambda k: '{"citations": [1]} ' * (k * MB), _only_first),
    ("100k distinct [n] (0.8 MB)", lambda k: "".join(f"[{n}]" for n in range(k * 100_000)), _first_ten),
    ('{"citations": [1,1,... unclosed', lambda k: '{"citations": [' + "1," * (k * MB // 2), _none),
    ('{"citations": [[[[... 1 MB', lambda k: '{"citations": ' + "[" * (k * MB), _none),
    ('"citations" + {"a\\" escapes', lambda k: '"citations"' + '{"a\\"' * (k * MB // 5), _none),
    ("1 MB of links", lambda k: "[a](http://x.io/p) " * (k * MB // 19), _none),
    ("1 MB of newlines", lambda k: "\n" * (k * MB), _none),
]


def _best_ms(text: str) -> tuple[float, CitationResult]:
    best, result = float("inf"), None
    for _ in range(REPEATS):
        start = time.perf_counter()
        result = parse_citations(text, LABELS)
        best = min(best, (time.perf_counter() - start) * 1000)
    assert result is not None
    return best, result


def main() -> int:
    rng = random.Random(7)
    answers = [realistic_answer(rng) for _ in range(400)]
    size = sum(len(a.encode()) for a in answers)
    best = float("inf")
    for _ in range(REPEATS):
        start = time.perf_counter()
        cited = sum(parse_citations(a, LABELS).valid_count for a in answers)
        best = min(best, time.perf_counter() - start)
    print(f"realistic: {len(answers)} answers, {size / 1e6:.2f} MB, {cited} citations resolved")
    print(f"  {size / 1e6 / best:8.1f} MB/s   {best * 1e6 / len(answers):7.1f} µs/answer\n")

    failed = 0
    header = f"{'input':38} {'size':>8} {'ms':>8}  {'<' + str(int(BAR_MS)) + ' ms':7} {'2x size':>8}  result"
    for title, rows in (("adversarial (the brief's set)", REQUIRED), ("further hostile shapes", EXTRA)):
        print(f"{title}\n{header}")
        for name, make, check in rows:
            text = make(1)
            ms, result = _best_ms(text)
            double_ms, _ = _best_ms(make(2))
            ok_result = check(result)
            verdict = "PASS" if ms < BAR_MS else "FAIL"
            failed += (verdict == "FAIL" and rows is REQUIRED) or not ok_result
            print(
                f"{name:38} {len(text) / 1e6:6.2f}MB {ms:8.1f}  {verdict:7} {double_ms / ms:7.2f}x  "
                f"{'ok' if ok_result else 'WRONG ' + repr(result)}"
            )
        print()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
