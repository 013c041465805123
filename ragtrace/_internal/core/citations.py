"""Which in-context chunks an answer cites, and which of its citations point at nothing.

Pure and dependency-free: ``parse_citations(text, labels)`` reads an LLM answer and resolves every
citation against ``labels`` (citation key -> chunk id, built at assembly). It runs on every answer
inside instrumentation, on text a model produced, so it must be linear in the text and never
raise on odd input. How that is kept:

* Structure first: one regex pass finds fence lines (code blocks are skipped), one C-level
  ``re.sub`` blanks inline code spans out (a regex that can match each position only one way).
* Bracket tokens are found by a bounded regex (``[`` + at most 64 bracket-free characters + ``]``),
  which cannot backtrack beyond that bound; a label that repeats many times is masked out of the
  rest of the text in one C-level ``re.sub`` instead of being visited a million times.
* JSON is only decoded when a ``"citations"`` key exists, only at ``{"`` positions before the
  last one, and with caps on decoder calls (16 failures, 1024 attempts), so a million
  ``{"citations"`` fragments cost a handful of decoder calls.

Plain Python cannot visit a million tokens in 100 ms, which is why the heavy lifting is in C
(``str.find``, ``re``, ``json``) and Python only sees each *distinct* token. Work per distinct
token is bounded, so text made of 100k distinct labels is still linear, just not C-fast
(``bench/bench_citations.py`` shows both).


What counts as a citation (design choices, also in ``parse_citations``'s docstring):

* Numeric tokens (``[3]``, ``[^3]``, ``[1-3]``, ``【3†source】``) are always citations: valid when the
  key maps to a chunk, otherwise invalid.
* Id-like tokens (``[doc-7]``, ``[abc.md]``) are citations when they map, or when they contain a
  digit or one of ``- _ . : / #`` (invalid). A plain word that maps to nothing (``[sic]``,
  ``[note]``, ``[x]``) is ignored, as is anything with spaces (``[citation needed]``), so prose
  brackets don't inflate the invalid count. Tokens ending in ``.`` (``[e.g.]``) are abbreviations.
* ``[Source 2]``, ``[source: abc]``, ``[see 3]``: the prefix word is dropped; after a colon any
  unmatched id-like word is invalid (``[Source: Wikipedia]``), otherwise the rule above applies.
  The same goes for footnote syntax (``[^note]``) and for entries of a JSON ``citations`` field.
* Invalid labels are reported as the key the model used (``"9"`` for ``[Source 9]``, ``【9:0†x】``),
  at most 64 characters of id characters, so they never carry prose.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, Union

from . import vocabulary
from .citation_scan import Scanner

__all__ = ["CitationPattern", "CitationResult", "parse_citations"]

# A user-supplied citation format: a regex whose group 1 (or whole match) is a label key, or a
# callable returning the label keys found in the text. (The alias is evaluated at runtime, where
# typing.Union is the spelling every supported Python accepts; it equals the | form.)
CitationPattern = Union[str, re.Pattern[str], Callable[[str], Iterable[str]]]


@dataclass(frozen=True, slots=True)
class CitationResult:
    """What the answer cites. ``format`` is one of ``vocabulary.CITATION_FORMAT_*``."""

    format: str
    cited_ids: tuple[str, ...]
    invalid_labels: tuple[str, ...]
    conformant: bool

    @property
    def valid_count(self) -> int:
        """Distinct in-context chunks cited."""
        return len(self.cited_ids)

    @property
    def invalid_count(self) -> int:
        """Distinct citation labels that point at no in-context chunk."""
        return len(self.invalid_labels)


_NOTHING: Final = CitationResult(vocabulary.CITATION_FORMAT_NONE, (), (), False)


def parse_citations(
    text: str | None, labels: Mapping[str, str], *, pattern: CitationPattern | None = None
) -> CitationResult:
    """The chunks ``text`` cites, resolved through ``labels`` (citation key -> chunk id).

    Recognised: ``[1]``, ``[1, 3]``, ``[1][2]``, ``[1-3]`` / ``[1–3]`` (ranges up to 100 wide),
    ``[^1]``, ``【1†source】`` / ``【3:0†source】``, id labels (``[doc-7]``, ``[source: abc]``,
    ``[Source 2]``), and a JSON object with a ``citations`` list (ints, id strings or
    ``{"id": ...}``), bare, embedded in prose or in a fenced block. JSON wins the ``format`` but
    inline markers elsewhere (including inside the object's strings) still count.

    Never citations: links and images (``[t](url)``), reference definitions (``[1]: http://..``),
    anything in inline code or fenced code, plain bracketed words that match no label (``[sic]``).
    ``BM25[1]`` does count: models glue markers to the previous word, and prose has no arrays.
    Reference-style *uses* (``[text][1]``) count too, since footnote-style answers look the same.

    ``cited_ids`` and ``invalid_labels`` are unique, first-appearance order (a JSON object's
    entries sit where the object starts). ``conformant`` is False only when nothing citation-like
    was found; a JSON ``"citations": []`` is conformant (the model answered in the format).

    ``pattern`` replaces the inline rules (JSON still applies): a regex (string or compiled) whose
    group 1, or whole match, is a label key, matched outside code; or a callable given the whole
    text that returns label keys (listed after any JSON entries). Unmatched keys are invalid, and
    are reported only up to 64 characters long. The callable and the regex are the
    caller's code: their exceptions propagate (the instrumentation wraps this call), and a regex
    that backtracks is the caller's cost.
    """
    if not isinstance(text, str) or not text:
        return _NOTHING
    compiled: re.Pattern[str] | None = None
    keys_from: Callable[[str], Iterable[str]] | None = None
    if isinstance(pattern, str):
        compiled = re.compile(pattern)
    elif isinstance(pattern, re.Pattern):
        compiled = pattern
    elif callable(pattern):
        keys_from = pattern
    elif pattern is not None:
        raise TypeError(f"citation pattern must be a regex or a callable, not {type(pattern).__name__}")

    parser = Scanner(labels, compiled)
    if keys_from is not None:
        parser.inline_rules = False  # the callable replaces the inline rules
    parser.markdown(text, 0, len(text), allow_json=True)
    if keys_from is not None:
        for key in keys_from(text):
            parser.user_key(key)

    if parser.json_found:
        kind = vocabulary.CITATION_FORMAT_JSON
    elif parser.cited or parser.invalid:
        kind = vocabulary.CITATION_FORMAT_INLINE
    else:
        return _NOTHING
    return CitationResult(kind, tuple(parser.cited), tuple(parser.invalid), True)
