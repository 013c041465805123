"""What a citation looks like: the limits, the bounded regexes and the key predicates the parser uses.

Every quantifier below is bounded or runs over a class that excludes what follows it, so no regex
here can backtrack beyond its bound (``citations.py`` says why that matters). Pure data and small
pure functions: the scanner (``citation_scan``) and the key resolver (``citation_keys``) share them.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

MAX_LABEL: Final = 64  # longest text between brackets that can be a citation label
MAX_RANGE: Final = 100  # [1-100] expands; [1-1000] is one invalid label
HEAVY_REPEATS: Final = 16  # a token seen this often in one stretch is masked out of the rest
MAX_MASKINGS: Final = 16  # ...at most this many times per stretch (each is one O(n) pass)
MAX_JSON_ATTEMPTS: Final = 1024  # decoder calls per text
MAX_JSON_FAILURES: Final = 16  # failed decoder calls per text (each may scan to the end)
MAX_JSON_DEPTH: Final = 32
LINK_DEST_MAX: Final = 2048
MAX_PROSE_CITATIONS: Final = 4096  # prose keywords ("(Source n)", "Sources:") looked at per stretch

# --- regexes: every quantifier is bounded or over a class that excludes what follows it ---------
FENCE = re.compile(r"^[ \t>]{0,16}(`{3,}|~{3,})([^\n]*)", re.MULTILINE)
# An inline code span, CommonMark-style: a run of 1-3 backticks closed by the next run of exactly
# the same length, not across a blank line. Every alternative can match only one way (text and
# backtick runs are consumed whole), so a failed opener costs one scan of its paragraph, and only
# the last run of each length in a paragraph can fail: at most three scans. Longer runs are left
# literal (fences take those).
CODE_SPAN = re.compile(r"(?<!`)(`{1,3})(?!`)(?:[^`\n]+(?![^`\n])|\n(?![ \t\r]*\n)|`+(?!`))*?\1(?!`)")
# What code spans become: a character no citation label may contain, legal inside JSON strings.
CODE_MASK: Final = "\ue000"
# What masked repeats become: no label may contain it, any link destination may, and it keeps
# ASCII text ASCII (cheap copies).
REPEAT_MASK: Final = "\x00"
# Group 2 is what follows ``]`` when it makes the bracket a link ``](`` or a reference definition
# ``]: http://...``; those are never citations.
AFTER = r"(\(|:[ \t]{0,16}(?:<|/|#|www\.|mailto:|[A-Za-z][A-Za-z0-9+.\-]{0,31}://))?"
# Labels hold no bracket of either kind: tokens are innermost, so no two can overlap.
LABEL = r"[^\[\]【】\r\n\x00\ue000]{1,%d}" % MAX_LABEL
SQUARE = re.compile(r"\[(%s)\]%s" % (LABEL, AFTER))
# The OpenAI form is only searched for when the text holds a 【: the alternation costs the regex
# engine its fast literal scan for [.
SQUARE_OR_LENTICULAR = re.compile(
    r"\[(%s)\]%s|【(%s)】" % (LABEL, AFTER, LABEL)
)
# A link's "(destination "title")" after "]"; "[1](p. 5)" is no link (CommonMark agrees).
LINK_DEST = re.compile(
    r"\((?:<[^<>\n]{0,%d}>|[^()\s]{0,%d})(?:[ \t]{1,16}(?:\"[^\"\n]{0,256}\"|'[^'\n]{0,256}'))?[ \t]{0,16}\)"
    % (LINK_DEST_MAX, LINK_DEST_MAX)
)
# Prose citations: "(Source 2)", "(sources 1, 3)", and a line "Sources: faq-7, faq-9" (the list a
# model writes at the end). Group 1 is what a bracket would hold; read with the bracket rules.
_PROSE_WORDS = r"(?:source|doc|document|ref|reference|passage|chunk|citation)"
PAREN_CITATION = re.compile(r"\(" + _PROSE_WORDS + r"s?[ \t]{0,4}[:#]?[ \t]{0,4}([^()\[\]\n]{1,64})\)", re.I)
# the line form takes the plural only: "source: kb-7" is how metadata lines look (a prompt echoed)
SOURCES_LINE = re.compile(r"[ \t>*_\-]{0,8}" + _PROSE_WORDS + r"s[ \t*_]{0,4}:[ \t*_]{0,8}([^\n]{1,256})(?:\n|$)", re.I)
# The keywords lowercased, for the C-level checks that find where the two patterns are tried:
# right after a "(", and right before a ":" after a plural (also after "**", as in "**Sources:**").
PROSE_WORDS: Final = ("source", "doc", "ref", "passage", "chunk", "citation")
PROSE_WORD_ENDS: Final = tuple(w + "s" + m for w in PROSE_WORDS + ("document", "reference") for m in ("", "*", "**", "_", " "))
OBJECT_START = re.compile(r"\{[ \t\r\n]{0,64}\"")
NON_SPACE = re.compile(r"\S")
CITATIONS_KEYS: Final = ('"citations"', '"Citations"')

LIST_SPLIT = re.compile(r"\s*(?:[,;，、]|&|\band\b)\s*")
RANGE = re.compile(r"(\d{1,9})\s*[-–—‒]\s*(\d{1,9})")
PREFIX = re.compile(
    r"(?:sources?|src|docs?|documents?|chunks?|refs?|references?|citations?|cite|passages?"
    r"|contexts?|snippets?|excerpts?|results?|ids?|see)(\s*[:#]\s*|\s+)(\S.*)",
    re.IGNORECASE | re.DOTALL,
)
ID = re.compile(r"[\w.:/#\-]+")
ID_SEPARATORS: Final = frozenset("-_.:/#")
OPENAI_INDEX = re.compile(r"(\d{1,9})(?::\d{1,9})?")
ID_FIELDS: Final = ("id", "chunk_id", "doc_id", "document_id", "source_id", "label", "index", "source", "ref")
DECODER = json.JSONDecoder()

# How sure we are that an unmatched key was meant as a citation.
PLAIN: Final = 0  # bare bracket: numbers and id-looking tokens only
SOURCE: Final = 1  # after "source:" or in a JSON citations field: any id-like word


def fold(key: str) -> str:
    return " ".join(key.split()).casefold()


def is_id(key: str) -> bool:
    """Letters/digits with ``- _ . : / #``, at least one letter or digit, short."""
    return len(key) <= MAX_LABEL and ID.fullmatch(key) is not None and any(c.isalnum() for c in key)


def looks_like_citation(key: str) -> bool:
    """An unmatched bare token is an (invalid) citation only if it looks like an id or a number."""
    if not is_id(key) or key.endswith("."):
        return False
    return any(c.isdigit() or c in ID_SEPARATORS for c in key)


def strip_caret(key: str) -> str:
    key = key.strip()
    if key.startswith("^"):  # footnote [^3]
        key = key[1:].strip()
    return key

def last_key(text: str, start: int, end: int) -> int:
    """Where the last ``"citations"`` key starts (-1: none), found in C rather than by decoding."""
    return max(text.rfind(key, start, end) for key in CITATIONS_KEYS)


def has_citations(node: Any, depth: int) -> bool:
    if depth > MAX_JSON_DEPTH:
        return False
    if isinstance(node, dict):
        return any(
            (isinstance(k, str) and k.casefold() == "citations") or has_citations(v, depth + 1)
            for k, v in node.items()
        )
    if isinstance(node, list):
        return any(has_citations(v, depth + 1) for v in node)
    return False
