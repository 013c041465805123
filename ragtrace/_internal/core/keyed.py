"""Keyed digests: the only values derived from content that ragtrace lets out of the process.

An unkeyed hash of content is content: whoever can guess the text (a 4-digit PIN in a query, a
short chunk) confirms the guess from the hash. So the id of an id-less chunk, the hash-mode content
hashes and ``rag.query.hash`` are keyed BLAKE2b digests (BLAKE2's built-in MAC mode, RFC 7693),
with a separate personalisation per purpose. Without the key they can't be recomputed from a guess.

The key is ``configure(hash_key=...)``, else ``RAGTRACE_HASH_KEY``, else a random key made once per
process: digests then agree within the process only. That matters only where an exported value
depends on it (``warn_if_random``), not for the duplicate keys every full-mode chunk gets, so the
one-line warning is given there, lazily, and never for an app whose chunks carry their own ids.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
import threading
from typing import Final

from .guard import new_locks_after_fork, warn_once

ENV_KEY: Final = "RAGTRACE_HASH_KEY"
_CONTENT: Final = b"ragtrace-chunk"
_QUERY: Final = b"ragtrace-query"
_LABEL: Final = b"ragtrace-label"
# a citation label carried as its keyed digest (``label_key``): no typed citation can hold a NUL
HASHED_LABEL: Final = "\x00label:"
_DIGEST_BYTES: Final = 8  # 16 hex digits

_lock = threading.Lock()
_given: bytes | None = None  # from configure(hash_key=...)
_random: bytes | None = None  # made once, kept for the life of the process
_hashers: dict[bytes, hashlib._Hash] | None = None  # per purpose, keyed; copied for each digest
_random_in_use = False  # the hashers above are keyed with the random key
_warned = False  # the random-key warning was given (a plain flag: warn_if_random runs per id-less chunk)


def check_key(key: object) -> bytes | None:
    """Validate ``configure(hash_key=...)``: a non-empty str or bytes (None: environment or random)."""
    if key is None:
        return None
    if isinstance(key, str):
        key = key.encode("utf-8")
    if not isinstance(key, (bytes, bytearray)):
        raise TypeError(f"hash_key must be a str or bytes, got {type(key).__name__}")
    if not key:
        raise ValueError("hash_key must not be empty")
    return bytes(key)


def set_key(key: bytes | None) -> None:
    """The key ``configure()`` was given, or None to take ``RAGTRACE_HASH_KEY`` or the random key."""
    global _given, _hashers
    with _lock:
        _given, _hashers = key, None


def shared_key() -> bytes | None:
    """The key set by ``configure(hash_key=...)`` or ``RAGTRACE_HASH_KEY``; None when only the
    random per-process key exists (nothing another process could check against)."""
    if _given is not None:
        return _given
    raw = os.environ.get(ENV_KEY, "")
    return raw.encode("utf-8") if raw else None


def _key() -> bytes:
    global _random
    shared = shared_key()
    if shared is not None:
        return shared
    if _random is None:
        _random = secrets.token_bytes(32)
    return _random


def warning_due() -> bool:
    """The digests are under the random key and nobody was told yet (cheap: a caller may skip the
    work of finding out whether a keyed value is exported)."""
    return _random_in_use and not _warned


def warn_if_random(what: str) -> None:
    """Called where an exported value depends on the key (``what`` says which and how), after its
    digest was made: warns once, in one line with the fix, when that key is the random one."""
    global _warned
    if _random_in_use and not _warned:
        _warned = True
        warn_once("random-hash-key", "no hash key is set: %s; set %s or configure(hash_key=...) to a secret your processes share", what, ENV_KEY)


# an id ragtrace made from a keyed digest: the digest itself, or ``something#digest``
_DIGEST_ID: Final = re.compile(r"(?:^|#)[0-9a-f]{%d}\Z" % (2 * _DIGEST_BYTES))


def holds_digest(chunk_id: str) -> bool:
    """Whether an id has a keyed digest in it (as ragtrace forms them): only such an id differs
    between processes without a shared key, so only it calls for ``warn_if_random``."""
    return _DIGEST_ID.search(chunk_id) is not None


def _hasher(purpose: bytes) -> hashlib._Hash:
    global _hashers, _random_in_use
    hashers = _hashers
    if hashers is None:
        with _lock:
            key = _key()
            _random_in_use = key is _random
            if len(key) > 64:  # BLAKE2b keys are at most 64 bytes
                key = hashlib.blake2b(key).digest()
            hashers = _hashers = {
                purpose: hashlib.blake2b(digest_size=_DIGEST_BYTES, key=key, person=purpose) for purpose in (_CONTENT, _QUERY, _LABEL)
            }
    return hashers[purpose]


def content_digest(text: str) -> str:
    """The keyed digest of chunk text: the id of an id-less chunk and its duplicate key."""
    hashers = _hashers  # made already, but for the first digest: no call to ``_hasher`` per chunk
    hasher = (hashers[_CONTENT] if hashers is not None else _hasher(_CONTENT)).copy()
    hasher.update(text.encode("utf-8", "surrogatepass"))
    return hasher.hexdigest()


def query_digest(query: str) -> str:
    """``rag.query.hash``: the keyed digest of the query, case and whitespace normalised."""
    hasher = _hasher(_QUERY).copy()
    hasher.update(" ".join(query.lower().split()).encode("utf-8", "surrogatepass"))
    return hasher.hexdigest()


def label_key(folded: str) -> str:
    """A citation label that is content (a title), as a cross-process record carries it in redact
    and hash modes: ``HASHED_LABEL`` + the keyed digest of the label, case and whitespace folded.
    The receiving process resolves a citation by the digest of its folded key (``citation_keys``)."""
    hasher = _hasher(_LABEL).copy()
    hasher.update(folded.encode("utf-8", "surrogatepass"))
    return HASHED_LABEL + hasher.hexdigest()


def forget() -> None:
    """Back to no key at all (tests of the random-key path): a new random key on next use, and
    its warning may be given again."""
    global _given, _random, _hashers, _random_in_use, _warned
    with _lock:
        _given = _random = _hashers = None
        _random_in_use = _warned = False


new_locks_after_fork(__name__, "_lock")
