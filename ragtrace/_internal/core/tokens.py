"""Pluggable token counting: a dependency-free default and an optional tiktoken adapter.

Token counts feed budgets and the wasted-context figure, so the default must be deterministic and
cheap rather than exact for any one model: it counts words and punctuation marks separately, which
lands within ~20% of BPE tokenizers on English prose.
"""

from __future__ import annotations

import re
from typing import Any, Protocol, runtime_checkable

_TOKEN = re.compile(r"\w+|[^\w\s]")


@runtime_checkable
class Tokenizer(Protocol):
    """What assembly needs from a tokenizer."""

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        ...

    def truncate(self, text: str, max_tokens: int) -> str:
        """The longest prefix of ``text`` with at most ``max_tokens`` tokens."""
        ...


class SimpleTokenizer:
    """Words and punctuation marks: ``"Hi, there"`` is three tokens."""

    def count(self, text: str) -> int:
        return len(_TOKEN.findall(text))

    def at_most(self, text: str) -> int:
        """An upper bound on ``count(text)`` that costs nothing: every token is at least a character."""
        return len(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        if max_tokens <= 0:
            return ""
        end = 0
        for index, match in enumerate(_TOKEN.finditer(text)):
            if index == max_tokens:
                return text[:end]
            end = match.end()
        return text

    def __repr__(self) -> str:
        return "SimpleTokenizer()"


class TiktokenTokenizer:
    """tiktoken's BPE (``pip install 'ragtrace[tiktoken]'``): exact counts for OpenAI models.

    ``encoding`` is an encoding name (tiktoken downloads its file on first use, so offline machines
    need ``TIKTOKEN_CACHE_DIR`` populated) or a ``tiktoken.Encoding`` you built yourself.
    """

    def __init__(self, encoding: Any = "o200k_base") -> None:
        import tiktoken  # optional extra, imported only when asked for

        self._encoding = tiktoken.get_encoding(encoding) if isinstance(encoding, str) else encoding
        self.name = self._encoding.name

    def count(self, text: str) -> int:
        return len(self._encoding.encode(text, disallowed_special=()))

    def at_most(self, text: str) -> int:
        """An upper bound on ``count(text)``: a BPE token is at least one byte (a character is at most four)."""
        return 4 * len(text)

    def truncate(self, text: str, max_tokens: int) -> str:
        tokens = self._encoding.encode(text, disallowed_special=())
        if len(tokens) <= max_tokens:
            return text
        return self._encoding.decode(tokens[: max(max_tokens, 0)])

    def __repr__(self) -> str:
        return f"TiktokenTokenizer({self.name!r})"


DEFAULT_TOKENIZER = SimpleTokenizer()
