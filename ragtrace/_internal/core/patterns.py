"""Regular expressions built from content, compiled outside ``re``'s own cache.

``re.compile`` keeps the last few hundred patterns in a process-wide cache, each holding its
pattern text. A pattern made of a chunk's words or an answer's citation token would keep that
content in the process after its pipeline ended, in every content mode (issue 16 item 9). These
are compiled by the compiler ``re.compile`` itself calls, without the cache, and dropped with
their caller's frame.
"""

from __future__ import annotations

import re
from typing import Any

try:  # Python 3.11 and later: the compiler re.compile calls
    from re import _compiler as _sre_compiler  # type: ignore[attr-defined]
except ImportError:  # Python 3.10
    import sre_compile as _sre_compiler  # type: ignore[no-redef]


def uncached(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, not kept anywhere once the caller drops it."""
    compiled: Any = _sre_compiler.compile(pattern, flags)
    return compiled
