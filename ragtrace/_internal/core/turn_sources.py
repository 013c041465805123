"""This turn's sources in a searched prompt: which labelled block the answer's prompt adds.

A prompt may show retrieved chunks outside this turn's sources: an earlier turn's block in the
chat history, a few-shot example in the system prompt or right before the sources, written in
another label style or alike. What is this turn's is decided from where the labelled block sits
in the messages (roles) and the prompt's structure (label style, a worked answer line), never from
whether label numbers repeat (``locate`` asks; ``docs/concepts.md`` says what the user sees).
Pure: no spans, no globals.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import NamedTuple

from .source_labels import NO_LABEL, fold_label, label_at, label_style

# a line that answers (a few-shot example's, an earlier turn's), and what it cites
_ANSWER_LINE = re.compile(r"(?:^|\n|\\n)[ \t>*-]*(?:answer|assistant|a|output|response|model)[ \t]*:", re.I)
_BRACKETED = re.compile(r"\[([^\[\]\n]{1,64})\]")

_USER_ROLES = frozenset({"user", "human"})
_SYSTEM_ROLES = frozenset({"system", "developer"})
_TOOL_ROLES = frozenset({"tool", "function", "ipython"})


# what may follow a chunk that fills its source entry: a closing quote or tag, then the line's end
# (also escaped, in a JSON body) or the end of a JSON string; and what may come before one
ENDS_ENTRY = re.compile(r"[ \t]*(?:[\"'”’»]|</[A-Za-z]+>)?[ \t]*(?:\r|\n|\\[rn\"]|\"|$)")
_OPENS_LINE = re.compile(r"(?:^|\n|\\n|\")[ \t]*(?:[-*•>][ \t]+)?[\"'“]?$")  # after a bullet or an opening quote too


def fills_line(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` is a line (or lines) of its own: a source entry, not a sentence
    inside instructions."""
    return _OPENS_LINE.search(text, max(0, start - 16), start) is not None and ENDS_ENTRY.match(text, end) is not None


class Hit(NamedTuple):
    """Where a search found a chunk."""

    text: int  # index into the prompt's texts
    start: int
    end: int
    truncated: bool
    tier: int  # how sure the label before it is a source's (``source_labels``)


def this_turn(hits: dict[int, Hit], raw: Sequence[str], roles_of: Sequence[str]) -> tuple[set[int], tuple[int, int] | None]:
    """The chunks found outside this turn's sources: the labelled block the answer's prompt adds.

    The last text with a labelled chunk holds it, from where this turn starts: the last user
    message up to it (an agent's tool messages after it are this turn's rounds). Inside that
    text the block is the last run of labels written alike that never repeats one: where the
    labels start over, or change style (``[A]`` or ``[doc-7]`` before ``[1]``), an example or an
    earlier block came first. A labelled chunk in an earlier text is outside when that text is
    before this turn (chat history, a few-shot exchange), in the system prompt while the sources
    are not (an example), or in a user message under a label this block uses again or writes
    another way (an example); when the sources are labelled, a chunk found under no label is
    outside too. Returns those chunks, and where this turn's sources start (text index, offset):
    the missed-chunk rule of ``answer`` reads labels from there on only.
    """
    labelled = [n for n, hit in hits.items() if hit.tier > NO_LABEL]
    if not labelled:
        return _inside_instructions(hits, raw), None
    last = max(hits[n].text for n in labelled)
    roles = [role.casefold() for role in roles_of]
    first = max((i for i in range(last + 1) if roles[i] in _USER_ROLES), default=0)
    system_only = roles[last] in _SYSTEM_ROLES
    outside = {n for n, hit in hits.items() if hit.tier == NO_LABEL}
    block: dict[str, int] = {}  # folded label -> chunk, this block's
    block_start, style, previous_end = -1, None, 0
    text = raw[last]
    for n in sorted((n for n in labelled if hits[n].text == last), key=lambda n: hits[n].start):
        label = fold_label(label_at(text, hits[n].start)[0])
        written, label_start = label_style(text, hits[n].start)
        gap = text[previous_end:label_start]
        # a label written another way after text of its own (a heading, an example's question):
        # another block; entries side by side under mixed labels ("[Refund policy]", "[2]") are one
        restyled = style is not None and written != style and any(char.isalnum() for char in gap)
        if label in block or restyled or _answers(gap, block):
            # another block came first (an example, an earlier turn): this turn's starts after its
            # last chunk (a source the example also showed may sit before this label)
            outside.update(block.values())
            block, block_start = {}, previous_end
        block[label], style, previous_end = n, written, hits[n].end
    for n in labelled:
        hit = hits[n]
        if hit.text >= last:
            continue
        if hit.text < first or (roles[hit.text] in _SYSTEM_ROLES and not system_only):
            outside.add(n)
        elif roles[hit.text] not in _TOOL_ROLES:  # an agent's rounds may each number from [1]
            earlier = raw[hit.text]
            if fold_label(label_at(earlier, hit.start)[0]) in block or label_style(earlier, hit.start)[0] != style:
                outside.add(n)
    return outside, ((last, block_start) if block_start >= 0 else (first, 0))


def _answers(gap: str, block: dict[str, int]) -> bool:
    """Whether the text between two labelled chunks holds an answer line citing a label of the
    block before it: a worked example (``Answer: ... [doc-7].``) or an earlier turn, whose labels
    may be written just like this turn's sources and never repeat."""
    if not block or _ANSWER_LINE.search(gap) is None:
        return False
    return any(fold_label(cited) in block for cited in _BRACKETED.findall(gap))


def _inside_instructions(hits: dict[int, Hit], raw: Sequence[str]) -> set[int]:
    """Sources shown bare: a chunk found only inside a line of other text (a short chunk the
    instructions repeat) while the other chunks each fill lines of their own is no source."""
    whole = [n for n, hit in hits.items() if not hit.truncated]
    fills = {n: fills_line(raw[hits[n].text], hits[n].start, hits[n].end) for n in whole}
    if sum(fills.values()) < 2:
        return set()
    return {n for n, filled in fills.items() if not filled}
