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
