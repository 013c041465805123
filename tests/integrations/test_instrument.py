"""ragtrace.instrument()/uninstrument(): the registry, version checks, idempotence, threads,
the optional dependency and the ``opentelemetry_instrumentor`` entry points."""

from __future__ import annotations

import json
import math
import logging
import os
import re
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


def test_with_no_names_what_lacks_its_extra_is_left_out_in_one_line_and_named_ones_raise():
    """An app with a library that brought another along (LiteLLM installs openai) but without
    ragtrace's extra: instrument() with no names instruments nothing it can't, says so once, in
    one line naming the extra; naming the library still raises."""
    code = (
        "import logging, sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.startswith('opentelemetry.instrumentation'):\n"
        "            raise ModuleNotFoundError('No module named ' + name, name=name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "logging.basicConfig(stream=sys.stdout, format='LOG %(message)s')\n"
        "import ragtrace\n"
        "print('DONE', ragtrace.instrument())\n"
        "print('AGAIN', ragtrace.instrument())\n"
        "try:\n"
        "    ragtrace.instrument('openai')\n"
        "except ImportError as error:\n"
        "    print('ERROR', error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "DONE []" in lines and "AGAIN []" in lines
    said = [line for line in lines if line.startswith("LOG ")]
    assert len(said) == 1, lines  # once, in one line, for both calls
    installed = [name for name, library in integrations.LIBRARIES.items() if integrations.installed_version(library.distribution)]
    extras = ",".join(dict.fromkeys(integrations.LIBRARIES[name].extra for name in installed))
    assert said[0] == f"LOG ragtrace.instrument(): {', '.join(installed)} installed but not instrumented: pip install 'ragtrace[{extras}]' adds opentelemetry-instrumentation"
    assert "ERROR ragtrace.instrument('openai') needs opentelemetry-instrumentation: pip install 'ragtrace[openai]'" in lines


def test_with_no_names_the_instrumentable_ones_are_instrumented_beside_one_that_is_not(monkeypatch, caplog, spans):
    real = integrations.instrumentor

    def instrumentor(library):
        if library.name == "openai":  # as if its module could not import opentelemetry-instrumentation
            raise ImportError("ragtrace.instrument('openai') needs opentelemetry-instrumentation: pip install 'ragtrace[openai]'")
        return real(library)

    monkeypatch.setattr(integrations, "instrumentor", instrumentor)
    monkeypatch.setattr(integrations, "_said_lacking", set())
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        done = ragtrace.instrument()
    try:
        assert "langchain" in done and "openai" not in done
        assert len(our_handlers()) == 1
        lines = [r.getMessage() for r in caplog.records if r.name == "ragtrace"]
        assert lines == ["ragtrace.instrument(): openai installed but not instrumented: pip install 'ragtrace[openai]' adds opentelemetry-instrumentation"]
        with pytest.raises(ImportError, match="needs opentelemetry-instrumentation"):
            ragtrace.instrument("openai")
    finally:
        ragtrace.uninstrument()


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
    for name in [n for n in integrations.LIBRARIES if n != "langchain"]:  # whatever else is installed here is not this test's business
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


def declared_entry_points() -> dict[str, str]:
    """pyproject.toml's ``opentelemetry_instrumentor`` table (read by hand: no tomllib on 3.10)."""
    section = (ROOT / "pyproject.toml").read_text().split("[project.entry-points.opentelemetry_instrumentor]\n", 1)[1].split("\n[", 1)[0]
    return dict(re.findall(r'^(\w+) = "([^"]+)"$', section, re.MULTILINE))


def test_entry_points_are_not_skipped_by_opentelemetry_instrument():
    """opentelemetry-instrument skips a distribution's entry points when its `instruments` extra
    is not all installed; ragtrace's has none, so its instrumentors are loaded and check themselves."""
    from opentelemetry.instrumentation.dependencies import get_dist_dependency_conflicts

    distribution = metadata.distribution("ragtrace")
    assert get_dist_dependency_conflicts(distribution) is None
    points = {e.name: e for e in distribution.entry_points if e.group == "opentelemetry_instrumentor"}
    declared = declared_entry_points()
    assert declared == {f"ragtrace_{name}": f"{library.module}:{library.instrumentor}" for name, library in integrations.LIBRARIES.items()}
    # the installed metadata is the pyproject's as of the last install: a shared editable install
    # made before a library was added lacks that one's entry point until it is reinstalled
    assert {"ragtrace_langchain", "ragtrace_llama_index", "ragtrace_openai"} <= set(points) <= set(declared)
    assert points["ragtrace_langchain"].load() is lc_integration.LangChainInstrumentor
    for name, point in points.items():
        assert point.value == declared[name]


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


def under_opentelemetry_instrument(app: Path, *, disabled: str, **extra: str) -> subprocess.CompletedProcess[str]:
    """``opentelemetry-instrument python app.py`` with the console exporter; every entry point on
    except ``disabled`` (OpenInference's are named ``langchain``, ``llama_index``, ``openai``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "RAGTRACE_", "OPENAI_"))}
    env.update(
        OTEL_TRACES_EXPORTER="console",
        OTEL_METRICS_EXPORTER="none",
        OTEL_LOGS_EXPORTER="none",
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=disabled,
        OTEL_SERVICE_NAME="zero-code",
        OTEL_BSP_SCHEDULE_DELAY="60000",  # spans print at exit, after the app's own lines
        RAGTRACE_STRICT="1",
        OPENBLAS_NUM_THREADS="1",
        OMP_NUM_THREADS="1",
        **extra,
    )
    command = [str(Path(sys.executable).with_name("opentelemetry-instrument")), sys.executable, app.name]
    done = subprocess.run(command, cwd=app.parent, env=env, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    return done


def stages_by_trace(spans: list[dict]) -> dict[str, dict[str, dict]]:
    """ragtrace's spans of each trace, by stage (one span per stage in these apps)."""
    traces: dict[str, dict[str, dict]] = {}
    for span in spans:
        if "rag.stage" in span["attributes"]:
            stages = traces.setdefault(span["context"]["trace_id"], {})
            assert span["attributes"]["rag.stage"] not in stages
            stages[span["attributes"]["rag.stage"]] = span
    return traces


def metrics(root: dict) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in root["attributes"].items() if k.startswith("rag.metrics.")}


def example_without(name: str, tmp_path: Path, drop: tuple[str, ...]) -> Path:
    """An example's code with its ``# ragtrace`` lines that start with one of ``drop`` removed."""
    source = (Path(__file__).resolve().parents[2] / "examples" / f"{name}.py").read_text(encoding="utf-8")
    body = source.split('"""', 2)[2]  # past the docstring
    kept = [line for line in body.splitlines() if not (line.endswith("# ragtrace") and line.strip().startswith(drop))]
    app = tmp_path / f"{name}.py"
    app.write_text("\n".join(kept) + "\n", encoding="utf-8")
    return app


def test_opentelemetry_instrument_traces_the_plain_llamaindex_example(tmp_path):
    """examples/llamaindex_rag.py with every ragtrace line removed: zero code, the same figures.
    (OpenInference's LlamaIndex entry point is skipped by the launcher here anyway: its
    ``instruments`` extra names a package that isn't installed; docs/integrations.md.)"""
    app = example_without("llamaindex_rag", tmp_path, ("import ragtrace", "ragtrace."))
    assert "ragtrace" not in app.read_text(encoding="utf-8")
    done = under_opentelemetry_instrument(app, disabled="llama_index")
    answers = re.findall(r"^A(?: \(streamed\))?: (.+)$", done.stdout, re.M)
    assert len(answers) == 2 and answers[0] == answers[1]
    cited = re.fullmatch(r".+ \[(\w+)\]", answers[0]).group(1)
    found = console_spans(done.stdout)
    traces = stages_by_trace(found)
    assert len(traces) == 2  # the plain and the streamed query
    for stages in traces.values():
        assert sorted(stages) == ["assemble", "embed", "generate", "pipeline", "retrieve"]
        root = stages["pipeline"]
        assert root["name"] == "invoke_workflow RetrieverQueryEngine"
        assert root["resource"]["attributes"]["service.name"] == "zero-code"
        retrieved = stages["retrieve"]["attributes"]["rag.retrieval.chunk_ids"]
        assert stages["assemble"]["attributes"]["rag.context.inclusion_method"] == "declared"
        assert stages["assemble"]["attributes"]["rag.context.chunk_ids"] == retrieved
        assert stages["generate"]["attributes"]["rag.citation.ids"] == [cited] == retrieved[:1]
        got = metrics(root)
        assert (got["retrieved"], got["in_context"], got["cited"], got["cited_positions"]) == (3, 3, 1, [1])
    assert len({s["context"]["trace_id"] for s in found}) == 2


@pytest.mark.parametrize("disabled", ["openai", ""], ids=["ragtrace-only", "beside-openinference-and-openllmetry"])
@pytest.mark.parametrize("stream", [False, True], ids=["completion", "stream"])
def test_opentelemetry_instrument_traces_the_plain_openai_example(tmp_path, chat_server, stream, disabled):
    """examples/openai_rag.py with every ragtrace line removed: zero code. The launcher sets up the
    provider and turns the OpenAI integration on; the search opens the automatic root. ``openai``
    names both OpenInference's and OpenLLMetry's entry points: with it not disabled, both run too."""
    url, received = chat_server
    app = example_without("openai_rag", tmp_path, ("import ragtrace", "ragtrace."))
    source = app.read_text(encoding="utf-8")
    assert "ragtrace" not in source
    if stream:
        source = source.replace('"--stream" in sys.argv', "True")
        app.write_text(source, encoding="utf-8")
    env = {"OPENAI_BASE_URL": f"{url}/v1", "OPENAI_API_KEY": "sk-test-key", "OPENAI_VECTOR_STORE_ID": "vs_kb"}
    done = under_opentelemetry_instrument(app, disabled=disabled, **env)
    assert [r["path"] for r in received] == ["/v1/vector_stores/vs_kb/search", "/v1/chat/completions"]
    assert bool(received[1]["body"].get("stream")) is stream
    assert "A: Refunds take 5 business days [1]." in done.stdout
    found = console_spans(done.stdout)
    others = sorted(s["name"] for s in found if "rag.stage" not in s["attributes"])
    # OpenInference's spans of the two requests, and OpenLLMetry's of the chat completion
    assert others == ([] if disabled else ["ChatCompletion", "SyncPage[VectorStoreSearchResponse]", "openai.chat"])
    assert len({s["context"]["trace_id"] for s in found}) == 1
    (stages,) = stages_by_trace(found).values()
    assert sorted(stages) == ["assemble", "generate", "pipeline", "retrieve"]
    assert stages["pipeline"]["name"] == "invoke_workflow openai"
    generated = stages["generate"]["attributes"]
    assert (generated["gen_ai.usage.input_tokens"], generated["gen_ai.usage.output_tokens"]) == (42, 9)
    retrieved = stages["retrieve"]["attributes"]["rag.retrieval.chunk_ids"]
    assert generated["rag.citation.ids"] == retrieved[:1]
    assert stages["assemble"]["attributes"]["rag.context.inclusion_method"] == "located"
    got = metrics(stages["pipeline"])
    assert (got["retrieved"], got["in_context"], got["cited"]) == (3, 2, 1)
    assert math.isclose(got["recall_proxy"], 1 / 3)


@pytest.mark.parametrize("disabled", ["langchain", ""], ids=["ragtrace-only", "beside-openinference"])
def test_opentelemetry_instrument_turns_ragtrace_on_with_no_code(tmp_path, disabled):
    (tmp_path / "app.py").write_text(APP, encoding="utf-8")
    done = under_opentelemetry_instrument(tmp_path / "app.py", disabled=disabled)  # "langchain": OpenInference's
    assert "ANSWER It is free [1]." in done.stderr
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
    # OpenLLMetry's LangChain instrumentor shares the entry point name ``langchain`` and loads too where the
    # ``langchain`` package is installed (its ``instruments`` extra): its own trace, as in the tests beside it
    found = [s for s in found if not any(k.startswith("traceloop.") for k in s["attributes"])]
    others = [s for s in found if "rag.stage" not in s["attributes"]]
    assert bool(others) is (disabled == ""), [s["name"] for s in others]  # OpenInference's own spans, when it is on
    assert len({s["context"]["trace_id"] for s in found}) == 1  # beside OpenInference: ragtrace's root inside its trace
