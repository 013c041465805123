"""The invocation parameters a decorated LLM call actually used, defaults included.

``@generator`` on ``def generate(messages, max_tokens=64, temperature=0.0)`` called as
``generate(messages)`` ran at temperature 0.0 with 64 tokens, so that is what the span records
(``gen_ai.request.temperature`` / ``.max_tokens``; Phoenix shows them as ``llm.invocation_parameters``). Where each parameter sits is worked out
once per decorated function; a call only indexes into its arguments.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

Reader = Callable[[Sequence[Any], Mapping[str, Any]], dict[str, Any]]
_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def parameter_reader(func: Callable[..., Any], wanted: tuple[str, ...]) -> Reader:
    """``read(args, kwargs)`` -> ``{name: value used}`` for each of ``wanted`` the call passed or
    the signature defaults. ``args`` are as wrapt hands them over: without ``self`` for methods,
    so a leading ``self``/``cls`` parameter is not counted."""
    try:
        parameters = list(inspect.signature(func).parameters.values())
    except (TypeError, ValueError):  # a builtin or C callable without a signature: keywords only
        parameters = []
    if parameters and parameters[0].name in ("self", "cls"):
        parameters = parameters[1:]
    where: list[tuple[str, int | None, Any]] = []  # (name, positional index, default)
    for name in wanted:
        index, default = None, None
        for i, p in enumerate(parameters):
            if p.name == name:
                index = i if p.kind in _POSITIONAL else None
                default = None if p.default is inspect.Parameter.empty else p.default
        where.append((name, index, default))

    def read(args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        used = {}
        for name, index, default in where:
            if name in kwargs:
                used[name] = kwargs[name]
            elif index is not None and index < len(args):
                used[name] = args[index]
            else:
                used[name] = default
        return used

    return read


# --- where a decorated function takes its inputs ----------------------------------------------------
# the parameter names read first, in order; else the first positional argument of the right kind
QUERY_KEYS = ("query", "question", "q", "text", "input")


def first_argument(args: Sequence[Any], kwargs: Mapping[str, Any], keys: tuple[str, ...], accept: Callable[[Any], bool]) -> Any:
    for key in keys:
        if key in kwargs and accept(kwargs[key]):
            return kwargs[key]
    return next((arg for arg in args if accept(arg)), None)


def is_text(value: Any) -> bool:
    return isinstance(value, str)
