"""Packaging beyond pyproject.toml: the optional compiled build of the report path (ragtrace/cli/compiled.py).

Compiling is an optimisation: without Cython or a C compiler, or with ``RAGTRACE_NO_EXTENSIONS=1``,
the build installs the pure-Python modules alone.
"""

from __future__ import annotations

import os
import runpy
import sys

from setuptools import setup
from setuptools.command.build_ext import build_ext

# The report path's modules, listed once in ragtrace/cli/compiled.py (read without importing ragtrace).
MODULES = runpy.run_path("ragtrace/cli/compiled.py")["MODULES"]


class _OptionalBuildExt(build_ext):
    """Compiling is an optimisation: a failure leaves the pure-Python modules in charge."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as error:  # noqa: BLE001 - no compiler, no headers...: stay pure Python
            print(f"ragtrace: not compiling the report path ({error}); the pure-Python modules are used", file=sys.stderr)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as error:  # noqa: BLE001
            print(f"ragtrace: not compiling {ext.name} ({error}); its pure-Python module is used", file=sys.stderr)


def _extensions() -> list:
    if os.environ.get("RAGTRACE_NO_EXTENSIONS"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        print("ragtrace: Cython is not installed; the report path stays pure Python", file=sys.stderr)
        return []
    # annotation_typing=False: annotations stay hints, as in CPython (no C types, no extra checks),
    # so the compiled modules behave exactly like the source.
    return cythonize(
        [name.replace(".", "/") + ".py" for name in MODULES],
        compiler_directives={"language_level": 3, "annotation_typing": False},
        quiet=True,
    )


setup(ext_modules=_extensions(), cmdclass={"build_ext": _OptionalBuildExt})
