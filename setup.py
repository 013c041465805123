"""Packaging beyond pyproject.toml: the optional compiled build of the report path (ragtrace/cli/compiled.py).

Compiling is an optimisation: when it fails (no C compiler, a Cython error, no Cython with
``--no-build-isolation``), or with ``RAGTRACE_NO_EXTENSIONS=1``, the build installs the pure-Python
modules alone. ``RAGTRACE_STRICT_EXTENSIONS=1`` (what ``make`` sets) makes a failure an error
instead, so a developer never tests stale or missing extensions unknowingly.
"""

from __future__ import annotations

import os
import runpy
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

# The report path's modules, listed once in ragtrace/cli/compiled.py (read without importing ragtrace).
MODULES = runpy.run_path("ragtrace/cli/compiled.py")["MODULES"]
STRICT = bool(os.environ.get("RAGTRACE_STRICT_EXTENSIONS"))


def _not_compiling(what: str, error: BaseException | str) -> None:
    if STRICT:
        raise SystemExit(f"ragtrace: compiling {what} failed: {error}")
    print(f"ragtrace: not compiling {what} ({error}); the pure-Python modules are used", file=sys.stderr)


class _OptionalBuildExt(build_ext):
    """Compiling is an optimisation: a failure leaves the pure-Python modules in charge."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - no compiler, no headers...: stay pure Python
            _not_compiling("the report path", error)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001
            _not_compiling(ext.name, error)


def _extensions() -> list:
    if os.environ.get("RAGTRACE_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize

        # annotation_typing=False: annotations stay hints, as in CPython (no C types, no extra
        # checks), so the compiled modules behave exactly like the source.
        return cythonize(
            [name.replace(".", "/") + ".py" for name in MODULES],
            compiler_directives={"language_level": 3, "annotation_typing": False},
            quiet=True,
        )
    except Exception as error:  # noqa: BLE001 - no Cython, or it can't translate a module
        _not_compiling("the report path", error)
        return []


setup(ext_modules=_extensions(), cmdclass={"build_ext": _OptionalBuildExt})
