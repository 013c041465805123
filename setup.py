"""Packaging beyond pyproject.toml: the opt-in compiled build of the report path (ragtrace/cli/compiled.py).

By default nothing is compiled and the wheel is pure Python. With ``RAGTRACE_COMPILE=1`` (set by
``tools/build_backend.py`` for ``-C compile=true``, and by ``make compiled``) Cython compiles the
report modules; a failure then is an error, never a silent pure-Python build.

setuptools and Cython write into a fresh temporary directory, removed at exit, so an install from
a checkout leaves nothing there (no ``build/``, ``*.egg-info`` or ``.c`` files) for a later build
to ship. ``RAGTRACE_BUILD_DIR`` names a lasting one instead: ``make compiled`` keeps ``build/`` so
that only changed modules are compiled again.
"""

from __future__ import annotations

import atexit
import os
import runpy
import shutil
import tempfile

from setuptools import setup

# The report path's modules, listed once in ragtrace/cli/compiled.py (read without importing ragtrace).
MODULES = runpy.run_path("ragtrace/cli/compiled.py")["MODULES"]


def _build_dir() -> str:
    lasting = os.environ.get("RAGTRACE_BUILD_DIR")
    if lasting:
        return lasting
    scratch = tempfile.mkdtemp(prefix="ragtrace-build-")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    return scratch


def _extensions(build_dir: str) -> list:
    if os.environ.get("RAGTRACE_COMPILE", "").strip().lower() not in {"1", "true", "yes", "on"}:
        return []
    from Cython.Build import cythonize

    # annotation_typing=False: annotations stay hints, as in CPython (no C types, no extra checks),
    # so the compiled modules behave exactly like the source.
    return cythonize(
        [name.replace(".", "/") + ".py" for name in MODULES],
        compiler_directives={"language_level": 3, "annotation_typing": False},
        build_dir=os.path.join(build_dir, "cython"),
        quiet=True,
    )


BUILD_DIR = _build_dir()
setup(
    ext_modules=_extensions(BUILD_DIR),
    options={"build": {"build_base": BUILD_DIR}, "egg_info": {"egg_base": BUILD_DIR}},
)
