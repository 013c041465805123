"""ragtrace.instrument()/uninstrument(): the registry, version checks, idempotence, threads,
the optional dependency and the ``opentelemetry_instrumentor`` entry points."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from dataclasses import replace
from importlib import metadata
from pathlib import Path

import pytest
from langchain_core.callbacks import CallbackManager

import ragtrace
from ragtrace._internal import integrations
from ragtrace._internal.integrations import langchain as lc_integration

ROOT = Path(__file__).resolve().parents[2]


def our_handlers() -> list[object]:
    """The ragtrace handlers a fresh LangChain callback manager gets (what every run sees)."""
    manager = CallbackManager.configure()
    return [h for h in manager.handlers if type(h).__name__ == "RagtraceCallbackHandler" and not h.ignore_chain]


def stuff_format_document_wrapped() -> bool:
    from langchain_classic.chains.combine_documents import stuff
    import wrapt

    return isinstance(stuff.format_document, wrapt.FunctionWrapper)


def test_importing_ragtrace_needs_neither_a_framework_nor_opentelemetry_instrumentation():
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('langchain_core', 'langchain_classic') or name.startswith('opentelemetry.instrumentation'):\n"
        "            raise ModuleNotFoundError('No module named ' + name, name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import ragtrace\n"
        "with ragtrace.rag_pipeline('p'):\n"
        "    pass\n"
        "try:\n"
        "    ragtrace.instrument('langchain')\n"
        "except ImportError as error:\n"
        "    print('ERROR', error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "needs opentelemetry-instrumentation: pip install 'ragtrace[langchain]'" in done.stdout


def test_instrument_and_uninstrument_are_idempotent(spans):
    assert ragtrace.instrument("langchain") == ["langchain"]
    assert ragtrace.instrument("langchain") == ["langchain"]
    assert len(our_handlers()) == 1 and stuff_format_document_wrapped()
    assert ragtrace.uninstrument("langchain") == ["langchain"]
    assert ragtrace.uninstrument("langchain") == []
    assert our_handlers() == [] and not stuff_format_document_wrapped()
    assert ragtrace.instrument("langchain") == ["langchain"]  # and again after an uninstrument
    assert len(our_handlers()) == 1
    ragtrace.uninstrument()
    assert our_handlers() == []


def test_unknown_library_is_a_clear_error():
    with pytest.raises(ValueError, match=r"can't instrument \['langchian'\].*'langchain'"):
        ragtrace.instrument("langchian")
    with pytest.raises(ValueError, match="langchian"):
        ragtrace.uninstrument("langchian")


def test_named_but_not_installed_raises_and_absent_is_skipped(monkeypatch, spans):
    missing = replace(integrations.LIBRARIES["langchain"], requirements=("ragtrace-no-such-framework >= 1",))
    monkeypatch.setitem(integrations.LIBRARIES, "langchain", missing)
    with pytest.raises(ModuleNotFoundError, match=r"ragtrace-no-such-framework is not installed \(pip install 'ragtrace\[langchain\]'\)"):
        ragtrace.instrument("langchain")
    for name in ("llama_index", "openai"):  # whatever else is installed here is not this test's business
        monkeypatch.setitem(integrations.LIBRARIES, name, replace(missing, name=name))
    assert ragtrace.instrument() == []
    assert our_handlers() == []


def test_a_version_outside_the_range_is_warned_about_and_left_alone(monkeypatch, caplog, spans):
    found = metadata.version("langchain-core")
    too_new = replace(integrations.LIBRARIES["langchain"], requirements=("langchain-core >= 99",))
    monkeypatch.setitem(integrations.LIBRARIES, "langchain", too_new)
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        assert ragtrace.instrument("langchain") == []
    assert f"not instrumenting langchain: langchain-core {found} is outside the supported range >=99" in caplog.text
    assert our_handlers() == [] and not stuff_format_document_wrapped()  # nothing half patched
    assert not lc_integration.LangChainInstrumentor().is_instrumented_by_opentelemetry


def test_unknown_options_are_a_clear_error():
    with pytest.raises(TypeError, match=r"unknown options \['provider'\]"):
        ragtrace.instrument("langchain", provider=None)
    with pytest.raises(TypeError, match="tracer_provider must be a TracerProvider"):
        ragtrace.instrument("langchain", tracer_provider="console")
    assert our_handlers() == []


def test_concurrent_instrument_and_uninstrument_leave_one_consistent_state(spans):
    barrier = threading.Barrier(8)
    errors: list[BaseException] = []

    def flip(index: int) -> None:
        try:
            barrier.wait()
            for _ in range(20):
                ragtrace.instrument("langchain") if index % 2 else ragtrace.uninstrument("langchain")
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=flip, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    on = lc_integration.LangChainInstrumentor().is_instrumented_by_opentelemetry
    assert len(our_handlers()) == int(on) and stuff_format_document_wrapped() is on
    ragtrace.uninstrument()


def test_entry_points_are_not_skipped_by_opentelemetry_instrument():
    """opentelemetry-instrument skips a distribution's entry points when its `instruments` extra
    is not all installed; ragtrace's has none, so its instrumentors are loaded and check themselves."""
    from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts

    distribution = metadata.distribution("ragtrace")
    assert get_dist_dependency_conflicts(distribution) is None
    points = {e.name: e for e in distribution.entry_points if e.group == "opentelemetry_instrumentor"}
    assert set(points) == {"ragtrace_langchain", "ragtrace_llama_index", "ragtrace_openai"}
    assert points["ragtrace_langchain"].load() is lc_integration.LangChainInstrumentor
    for name, point in points.items():
        library = integrations.LIBRARIES[name.removeprefix("ragtrace_")]
        assert point.value == f"{library.module}:{library.instrumentor}"


APP = """
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore

store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
store.add_documents([Document(page_content=t, id=i) for i, t in [("a", "Refunds take 5 days."), ("b", "Shipping is free."), ("c", "Store credit is instant.")]])
prompt = ChatPromptTemplate.from_messages([("system", "Context:\\n{context}"), ("human", "{question}")])
llm = FakeListChatModel(responses=["It is free [1]."])
chain = {"context": store.as_retriever(search_kwargs={"k": 2}) | (lambda docs: "\\n\\n".join(d.page_content for d in docs)), "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
import sys
print("ANSWER", chain.invoke("Is shipping free?"), file=sys.stderr)  # stdout is the console exporter's
"""


def console_spans(text: str) -> list[dict]:
    """The span JSON objects the console exporter printed, one after another."""
    decoder, spans, index = json.JSONDecoder(), [], 0
    while (start := text.find("{", index)) != -1:
        span, index = decoder.raw_decode(text, start)
        spans.append(span)
    return spans


@pytest.mark.parametrize("disabled", ["langchain", ""], ids=["ragtrace-only", "beside-openinference"])
def test_opentelemetry_instrument_turns_ragtrace_on_with_no_code(tmp_path, disabled):
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGTRACE_"))}
    env.update(
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=disabled,  # "langchain" is OpenInference's entry point
        OTEL_SERVICE_NAME="zero-code",
        OTEL_BSP_SCHEDULE_DELAY="1",  # spans print as they end, some before the answer line
        RAGTRACE_STRICT="1",
    )
    command = [str(Path(sys.executable).with_name("opentelemetry-instrument")), sys.executable, "app.py"]
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "ANSWER It is free [1]." in done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    found = console_spans(done.stdout)
    ours = [s for s in found if "rag.stage" in s["attributes"]]
    assert sorted(s["attributes"]["rag.stage"] for s in ours) == ["assemble", "generate", "pipeline", "retrieve"]
    (root,) = [s for s in ours if s["attributes"]["rag.stage"] == "pipeline"]
    assert root["resource"]["attributes"]["service.name"] == "zero-code"
    assert {s["parent_id"] for s in ours if s is not root} == {root["context"]["span_id"]}
    retrieved = next(s for s in ours if s["attributes"]["rag.stage"] == "retrieve")["attributes"]["rag.retrieval.chunk_ids"]
    assembled = next(s for s in ours if s["attributes"]["rag.stage"] == "assemble")["attributes"]
    assert assembled["rag.context.inclusion_method"] == "located" and assembled["rag.context.chunk_ids"] == retrieved
    figures = {k.removeprefix("rag.metrics."): v for k, v in root["attributes"].items() if k.startswith("rag.metrics.")}
    assert (figures["retrieved"], figures["in_context"], figures["context_precision"]) == (2, 2, 1.0)
    others = [s for s in found if "rag.stage" not in s["attributes"]]
    assert bool(others) is (disabled == ""), [s["name"] for s in others]  # OpenInference's own spans, when it is on
    assert len({s["context"]["trace_id"] for s in found}) == 1  # beside OpenInference: ragtrace's root inside its trace
