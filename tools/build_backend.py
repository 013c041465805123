"""ragtrace's PEP 517 build backend: setuptools, plus the opt-in compiled build of the report path.

The default wheel is pure Python (``py3-none-any``) and needs nothing but setuptools to build. The
compiled build (``ragtrace/cli/compiled.py``, ``setup.py``) is asked for with the config setting
``compile=true`` (``pip install . -C compile=true``, ``python -m build -C compile=true``) or, where
a config setting can't be passed (a dependency resolved by another tool), ``RAGTRACE_COMPILE=1``.
Only then does the build need Cython, so only then is it added to the build requirements.
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import (  # noqa: F401 - re-exported hooks that need no change
    build_editable,
    build_sdist,
    get_requires_for_build_editable,
    get_requires_for_build_sdist,
    prepare_metadata_for_build_editable,
    prepare_metadata_for_build_wheel,
)

COMPILE_SETTING = "compile"
COMPILE_ENV = "RAGTRACE_COMPILE"
CYTHON = "Cython>=3.0"
_TRUE = {"1", "true", "yes", "on"}


def _wants_compiling(config_settings: dict[str, Any] | None) -> bool:
    setting = (config_settings or {}).get(COMPILE_SETTING, os.environ.get(COMPILE_ENV, ""))
    return str(setting).strip().lower() in _TRUE


def _for_setuptools(config_settings: dict[str, Any] | None) -> dict[str, Any] | None:
    """setuptools reads its own keys from the settings; ours is not one of them."""
    if config_settings is None:
        return None
    return {key: value for key, value in config_settings.items() if key != COMPILE_SETTING}


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    requires = _setuptools.get_requires_for_build_wheel(_for_setuptools(config_settings))
    return [*requires, CYTHON] if _wants_compiling(config_settings) else requires


def build_wheel(wheel_directory: str, config_settings: dict[str, Any] | None = None, metadata_directory: str | None = None) -> str:
    # setup.py runs in this process: the choice reaches it through the environment.
    os.environ[COMPILE_ENV] = "1" if _wants_compiling(config_settings) else ""
    return _setuptools.build_wheel(wheel_directory, _for_setuptools(config_settings), metadata_directory)
