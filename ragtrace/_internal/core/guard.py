"""The never-raise guard around ragtrace's own work.

Instrumentation must never break the host application, so every internal step runs behind
``guard``: an exception is logged once per fault (exception type and the line that raised it)
through ``logging`` and swallowed, so one broken dependency reached from several steps warns
once. ragtrace's own test suite sets strict mode (``RAGTRACE_STRICT=1`` or ``set_strict(True)``)
so that bugs fail tests instead of hiding behind the guard.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
from collections.abc import Callable
from typing import TypeVar

logger = logging.getLogger("ragtrace")

_T = TypeVar("_T")
_strict = os.environ.get("RAGTRACE_STRICT", "").strip().lower() in ("1", "true", "yes")
_seen: set[tuple[str, str]] = set()
_seen_lock = threading.Lock()


def new_locks_after_fork(module_name: str, *lock_names: str) -> None:
    """Give a forked child fresh module locks. A lock another thread held at ``fork()`` is never
    released in the child (that thread doesn't exist there), so using it would deadlock the
    forked worker (gunicorn, multiprocessing)."""
    if not hasattr(os, "register_at_fork"):  # Windows: no fork
        return

    def renew() -> None:
        module = sys.modules[module_name]
        for name in lock_names:
            setattr(module, name, threading.Lock())

    os.register_at_fork(after_in_child=renew)


def _always() -> bool:
    return True


_content_check: Callable[[], bool] = _always


def set_content_check(check: Callable[[], bool]) -> None:
    """How ``report`` learns whether the content mode in force is ``full`` (set by ``stage``)."""
    global _content_check
    _content_check = check


def _logs_may_show_content() -> bool:
    try:
        return _content_check()
    except Exception:  # noqa: BLE001 - unsure: fail closed
        return False


def set_strict(strict: bool) -> bool:
    """Re-raise internal errors (tests) instead of swallowing them; returns the previous mode."""
    global _strict
    previous, _strict = _strict, strict
    return previous


def is_strict() -> bool:
    return _strict


def _origin(error: BaseException) -> str:
    """Where the error was raised (its innermost traceback frame), or "" if it never was."""
    tb = error.__traceback__
    if tb is None:
        return ""
    while tb.tb_next is not None:
        tb = tb.tb_next
    return f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"


def report(step: str, error: BaseException) -> None:
    """Log an internal error once per fault (type and origin); re-raise it in strict mode."""
    key = (_origin(error) or step, type(error).__name__)
    with _seen_lock:
        first = key not in _seen
        if first:
            _seen.add(key)
    if first:
        name = type(error).__name__
        if _logs_may_show_content():
            logger.warning(
                "ragtrace: internal error in %s (%s); the application is unaffected, "
                "this step's telemetry is skipped. Further %s errors from the same place are not logged.",
                step, name, name, exc_info=error,
            )
        else:  # the message and traceback may quote content (a tokenizer's error quoting its input)
            logger.warning(
                "ragtrace: internal error in %s (%s at %s); the application is unaffected, this step's "
                "telemetry is skipped. Its message and traceback are not logged because content capture "
                "is off (redact/hash mode). Further %s errors from the same place are not logged.",
                step, name, key[0], name,
            )
    if _strict:
        raise error


class guard:  # noqa: N801 - used like a function: ``with guard("assembly"):``
    """Runs ragtrace's own code without letting it raise (a class: cheaper than @contextmanager)."""

    __slots__ = ("step",)

    def __init__(self, step: str) -> None:
        self.step = step

    def __enter__(self) -> None:
        return None

    def __exit__(self, exc_type: type[BaseException] | None, error: BaseException | None, tb: object) -> bool:
        if error is None or not isinstance(error, Exception):
            return False
        report(self.step, error)  # re-raises in strict mode
        return True


def call_guarded(step: str, fn: Callable[..., _T], *args: object, default: _T | None = None, **kwargs: object) -> _T | None:
    """``fn(*args, **kwargs)``, or ``default`` if it raised (logged once)."""
    try:
        return fn(*args, **kwargs)
    except Exception as error:  # noqa: BLE001
        report(step, error)
        return default


def warn_once(key: str, message: str, *args: object) -> None:
    """Warn about the user's input or code (bad shapes, a failing redactor) once per key.

    Unlike ``report`` this never raises, not even in strict mode: it is not a ragtrace bug.
    """
    with _seen_lock:
        if ("warn", key) in _seen:
            return
        _seen.add(("warn", key))
    logger.warning("ragtrace: " + message, *args)


def reset_log_once() -> None:
    """Forget which errors were logged (tests check that each is logged exactly once)."""
    with _seen_lock:
        _seen.clear()


new_locks_after_fork(__name__, "_seen_lock")
