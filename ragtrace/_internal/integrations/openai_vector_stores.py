"""The OpenAI SDK's own retriever: ``client.vector_stores.search`` (sync and async) is a retrieve span.

It is wrapped with wrapt at class level (``VectorStores``/``AsyncVectorStores``), where the installed
SDK has it, like ``create``. Outside any ``rag_pipeline`` a search opens the automatic root
(``auto_root``) that the model call answering from it joins, so an SDK app gets per-trace figures
with ``ragtrace.instrument()`` alone.

The app gets the SDK's own page. Its ``data`` list is read, never iterated through the page or
copied for the app. The async ``search`` sends nothing until awaited (or iterated), so the app gets
its ``AsyncPaginator`` behind a proxy that records the page when the request is made; the root is
opened at the call, in the caller's context, so searches gathered as tasks join one root.

Chunk ids. A result is a chunk of a file, and ``file_id`` is shared by every chunk of that file,
so a chunk's id is ``{file_id}#{digest}``, the digest being ragtrace's keyed content digest of the
chunk's text (16 hex digits, the one an id-less chunk gets): the same chunk has the same id in
every search, two chunks of one file never share one, and no text leaves in it.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from typing import Any

import wrapt
from opentelemetry import trace

from ..boundaries import auto_root
from ..core.guard import call_guarded, warn_once
from ..core.keyed import content_digest, warn_if_random
from ..core.outputs import get
from ..stages.retrieval import Retrieve
from ._common import call_wrappers, closed_with, started, unwrap

_MODULE = "openai.resources.vector_stores.vector_stores"
_CLASSES = ("VectorStores", "AsyncVectorStores")
ROOT_NAME = "openai"  # the automatic root's name (gen_ai.workflow.name)


def instrument(provider: trace.TracerProvider | None) -> None:
    """Wrap ``search`` where the installed SDK has it (openai 1.66 and later)."""
    found = _classes()
    if found is None:
        return
    sync, _ = call_wrappers(lambda args, kwargs: started(_new_stage(args, kwargs, provider)), _record)
    wrapt.wrap_function_wrapper(_MODULE, "VectorStores.search", sync)
    wrapt.wrap_function_wrapper(_MODULE, "AsyncVectorStores.search", _async_search(provider))


def uninstrument() -> None:
    for cls in _classes() or ():
        unwrap(cls, "search")


def _classes() -> tuple[type, ...] | None:
    try:
        module = importlib.import_module(_MODULE)
    except ImportError:
        return None
    found = tuple(getattr(module, name, None) for name in _CLASSES)
    return found if all(cls is not None and hasattr(cls, "search") for cls in found) else None  # type: ignore[return-value]


# --- one search ---------------------------------------------------------------------------------
def _new_stage(args: tuple[Any, ...], kwargs: Mapping[str, Any], provider: trace.TracerProvider | None) -> Retrieve:
    """The search's retrieve stage, in the automatic root when outside any pipeline (not opened yet)."""
    query = kwargs.get("query")
    text = query if isinstance(query, str) else "\n".join(q for q in query if isinstance(q, str)) if isinstance(query, Sequence) else None
    store = args[0] if args else kwargs.get("vector_store_id")
    top_k = kwargs.get("max_num_results")
    root = auto_root.for_retrieval(ROOT_NAME, text, provider)
    stage = Retrieve(
        text,
        data_source=store if isinstance(store, str) else None,
        top_k=top_k if isinstance(top_k, int) else None,
        tracer_provider=provider,
    )
    stage.auto_root = root  # preset: an async search may be awaited in another task's context
    return stage


def _record(stage: Retrieve, kwargs: Mapping[str, Any], page: Any) -> Any:
    """The page's results, read from its ``data`` list (what iterating the page yields: the
    search endpoint has one page), and the span ended; the page goes to the app as it came."""
    stage.detach()
    data = getattr(page, "data", None)
    if isinstance(data, list):
        stage.record_files([search_result_chunk(result) for result in data], [file_id_of(result) for result in data])
        if data and not stage.inert:  # the ids were exported
            warn_if_random("OpenAI vector-store chunk ids (file_id#digest) differ between processes")
    else:  # with_raw_response / with_streaming_response: an HTTP response, not read here
        warn_once("openai-raw-search", "a vector_stores.search call returned %s, not a page: its results are not recorded", type(page).__name__)
    stage.close()
    return page


def search_result_chunk(result: Any) -> dict[str, Any]:
    """One search result (the SDK's object, or the same as a dict: LiteLLM's) as a chunk: its text
    parts joined by a line break, its score, and an id unique to the chunk (module docstring)."""
    parts = get(result, "content") or ()
    text = "\n".join(get(part, "text") for part in parts if get(part, "type") == "text" and isinstance(get(part, "text"), str))
    return {"id": f"{get(result, 'file_id')}#{content_digest(text)}", "content": text, "score": get(result, "score")}


def file_id_of(result: Any) -> str | None:
    """The file a search or ``file_search`` result is a chunk of (an id, never a filename); None
    when it names none (its file is then not known, and the file-level figures say so)."""
    found = get(result, "file_id")
    return found if isinstance(found, str) and found else None


def _async_search(provider: trace.TracerProvider | None) -> Any:
    def search(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        paginator = wrapped(*args, **kwargs)  # nothing is sent until it is awaited or iterated
        stage = call_guarded("openai instrumentation", _new_stage, args, kwargs, provider)
        return paginator if stage is None else _Search(paginator, stage)

    return search


class _Search(wrapt.ObjectProxy):  # type: ignore[misc]
    """The app's ``AsyncPaginator``, recording the page it fetches: awaiting it (or iterating it,
    which awaits it, as the paginator does) sends the request inside the retrieve span."""

    def __init__(self, paginator: Any, stage: Retrieve) -> None:
        super().__init__(paginator)
        self._self_stage: Retrieve | None = stage

    def __await__(self) -> Any:
        return self._self_fetch().__await__()

    async def _self_fetch(self) -> Any:
        stage, self._self_stage = self._self_stage, None  # a second await is a second request: not recorded again
        stage = call_guarded("openai instrumentation", started, stage) if stage is not None else None
        if stage is None:
            return await self.__wrapped__
        try:
            page = await self.__wrapped__
        except BaseException as error:
            call_guarded("openai instrumentation", closed_with, stage, error)
            raise
        call_guarded("openai instrumentation", _record, stage, {}, page)
        return page

    async def __aiter__(self) -> Any:
        async for item in await self:
            yield item
