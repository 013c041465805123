"""Token counting: the dependency-free default and the tiktoken adapter (with a real BPE)."""

from __future__ import annotations

import pytest
import tiktoken
from hypothesis import given
from hypothesis import strategies as st

import ragtrace
from ragtrace import SimpleTokenizer, TiktokenTokenizer


def test_simple_tokenizer_counts_words_and_punctuation():
    tokenizer = SimpleTokenizer()
    assert tokenizer.count("Hi, there") == 3
    assert tokenizer.count("") == 0
    assert tokenizer.truncate("one two, three four", 3) == "one two,"
    assert tokenizer.truncate("one two", 5) == "one two"
    assert tokenizer.truncate("one two", 0) == ""


@given(st.text(), st.integers(min_value=0, max_value=50))
def test_simple_truncation_is_a_prefix_within_budget(text, budget):
    tokenizer = SimpleTokenizer()
    cut = tokenizer.truncate(text, budget)
    assert text.startswith(cut)
    assert tokenizer.count(cut) == min(budget, tokenizer.count(text))


def byte_level_encoding() -> tiktoken.Encoding:
    """A real tiktoken BPE built offline: 256 byte tokens plus merges for 'th', 'the' and ' the'."""
    ranks = {bytes([b]): b for b in range(256)}
    for merged in (b"th", b"the", b" t", b" th", b" the"):
        ranks[merged] = len(ranks)
    return tiktoken.Encoding(
        name="test-bpe",
        pat_str=r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
        mergeable_ranks=ranks,
        special_tokens={},
    )


def test_tiktoken_adapter_counts_and_truncates_with_real_bpe():
    tokenizer = TiktokenTokenizer(byte_level_encoding())
    assert tokenizer.name == "test-bpe"
    assert tokenizer.count("the") == 1  # one merged token
    assert tokenizer.count("the the") == 2  # "the" + " the"
    assert tokenizer.count("xyz") == 3  # bytes
    assert tokenizer.truncate("the the xyz", 2) == "the the"
    assert tokenizer.truncate("the", 5) == "the"


def test_tiktoken_tokenizer_drives_the_assembly_budget(spans):
    ragtrace.configure(tracer_provider=spans.provider, tokenizer=TiktokenTokenizer(byte_level_encoding()))
    with ragtrace.assemble(max_tokens=12) as ctx:
        ctx.add({"id": "a", "content": "the the"})  # 2 BPE tokens (the simple tokenizer says 2 too)
        ctx.add({"id": "b", "content": "xyzxyzxyzxyz"})  # 12 byte tokens (simple: 1 word): 10 left -> cut
        ctx.add({"id": "c", "content": "the"})  # budget used up
    attrs = spans.one("assemble").attributes
    assert list(attrs["rag.context.chunk_tokens"]) == [2, 10]
    assert list(attrs["rag.context.truncated"]) == [False, True]
    assert list(attrs["rag.context.dropped_ids"]) == ["c"]
    assert list(attrs["rag.context.dropped_reasons"]) == ["over_budget"]


def test_unknown_encoding_name_fails_at_construction():
    with pytest.raises(ValueError, match="no-such-encoding"):
        TiktokenTokenizer("no-such-encoding")


class CountingTokenizer(SimpleTokenizer):
    """The simple tokenizer, counting its passes over text."""

    def __init__(self) -> None:
        self.counted: list[str] = []

    def count(self, text: str) -> int:
        self.counted.append(text)
        return super().count(text)


@given(st.lists(st.text(max_size=40), max_size=6), st.one_of(st.none(), st.integers(0, 60)))
def test_upper_bounds_hold(texts, budget):
    simple, tik = SimpleTokenizer(), TiktokenTokenizer(byte_level_encoding())
    for text in texts:
        assert simple.count(text) <= simple.at_most(text)
        assert tik.count(text) <= tik.at_most(text)


@given(st.lists(st.text(alphabet="ab .,", max_size=30), max_size=8), st.one_of(st.none(), st.integers(0, 40)))
def test_putting_counts_off_never_changes_what_lands(texts, budget):
    """The builder counts a chunk only once the budget could bind; the prompt, placements, tokens
    and drops are those of counting every chunk at once (a tokenizer without a bound)."""
    from ragtrace._internal.core.assembly import ContextBuilder

    class Eager:  # no at_most: every chunk is counted as it is added
        count, truncate = SimpleTokenizer().count, SimpleTokenizer().truncate

    built = []
    for tokenizer in (SimpleTokenizer(), Eager()):
        builder = ContextBuilder(max_tokens=budget, tokenizer=tokenizer)
        landed = [builder.add({"id": f"c{i}", "content": text}) for i, text in enumerate(texts)]
        prompt = builder.render()
        built.append((landed, prompt, builder.record().placements, builder.record().dropped))
    assert built[0] == built[1]


def test_no_tokenizer_pass_when_tracing_is_off_and_the_budget_cannot_bind():
    tokenizer = CountingTokenizer()
    chunks = [{"id": f"c{i}", "content": f"chunk {i} has six tokens."} for i in range(5)]
    with ragtrace.assemble(max_tokens=3000, tokenizer=tokenizer) as ctx:  # no provider: telemetry off
        ctx.add(chunks)
        prompt = ctx.render(question="why?")
    assert "[5] chunk 4 has six tokens." in prompt
    assert tokenizer.counted == []
    # a budget that can bind counts exactly: the chunks before it, then each new one
    with ragtrace.assemble(max_tokens=12, tokenizer=tokenizer) as ctx:
        assert ctx.add(chunks[:2]) and not ctx.add(chunks[2])  # 6 + 6 tokens fill it
    assert tokenizer.counted == [c["content"] for c in chunks[:3]]


def test_counts_put_off_are_exported_exactly(spans):
    ragtrace.configure(tracer_provider=spans.provider)
    with ragtrace.assemble(max_tokens=3000) as ctx:
        ctx.add([{"id": "a", "content": "one two, three."}, {"id": "b", "content": "four"}])
        ctx.render()
    attrs = spans.one("assemble").attributes
    assert list(attrs["rag.context.chunk_tokens"]) == [5, 1] and attrs["rag.context.total_tokens"] == 6
