"""Haystack (haystack-ai), run the way its docs teach: an ``InMemoryDocumentStore``, an
``InMemoryBM25Retriever``, a ``PromptBuilder`` (or ``ChatPromptBuilder``) and a generator, here
a ``@component`` that answers without a model, in one ``Pipeline``.

By hand, for the store below and the question "How long does a refund take?": BM25 scores the
three refund documents above zero and the shipping one at zero (Haystack leaves it out), so the
retriever (top_k=3) returns the three in its order; the template shows each as ``[n] <content>``,
and the answer "Refunds take 5 business days [2]." cites [2]: retrieved 3, in context 3
(recorded: ragtrace rendered the template itself), cited 1, recall 1/3, utilisation 1/3. Each
document's offsets are where ``[n] `` ends in the prompt the builder returned.
"""

import asyncio
import json
import os

import pytest

os.environ.setdefault("HAYSTACK_TELEMETRY_ENABLED", "False")  # no telemetry thread, no network

haystack = pytest.importorskip("haystack", reason="haystack-ai 3.x needs Python >= 3.11; installed for the 3.11 run")

from haystack import Document, Pipeline, component
from haystack.components.builders import ChatPromptBuilder, PromptBuilder
from haystack.components.rankers import MetaFieldRanker
from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
from haystack.dataclasses import ChatMessage
from haystack.document_stores.in_memory import InMemoryDocumentStore

import ragtrace

pytestmark = pytest.mark.heavy  # haystack-ai needs Python 3.11: run once, on 3.11 (Makefile)

QUESTION = "How long does a refund take?"
ANSWER = "Refunds take 5 business days [2]."
TEMPLATE = (
    "Answer from the numbered sources and cite them as [n].\n"
    "{% for doc in documents %}[{{ loop.index }}] {{ doc.content }}\n{% endfor %}"
    "Question: {{ question }}\nAnswer:"
)
TEXTS = [
    ("A refund is issued to the original card once the item is back.", 3),
    ("Refunds take 5 business days to reach your bank.", 5),
    ("Ask support for a refund if the parcel was damaged in transit.", 1),
    ("Shipping to Norway costs 12 euros.", 4),
]


@component
class Answerer:
    """A generator without a model: always the same reply, with OpenAI-style meta."""

    def __init__(self, reply: str = ANSWER) -> None:
        self.reply = reply
        self.prompts: list[str] = []

    @component.output_types(replies=list[str], meta=list[dict])
    def run(self, prompt: str) -> dict:
        self.prompts.append(prompt)
        return {"replies": [self.reply], "meta": [{"model": "answerer-1", "usage": {"prompt_tokens": 61, "completion_tokens": 9}, "finish_reason": "stop"}]}


@component
class ChatAnswerer:
    """A chat generator without a model."""

    @component.output_types(replies=list[ChatMessage])
    def run(self, messages: list[ChatMessage]) -> dict:
        return {"replies": [ChatMessage.from_assistant(ANSWER, meta={"model": "chat-1", "usage": {"prompt_tokens": 70, "completion_tokens": 9}})]}


@pytest.fixture
def haystack_on(spans):
    assert ragtrace.instrument("haystack") == ["haystack"]
    yield spans
    ragtrace.uninstrument("haystack")


def store() -> InMemoryDocumentStore:
    documents = InMemoryDocumentStore()
    documents.write_documents([Document(content=text, meta={"rating": rating}) for text, rating in TEXTS])
    return documents


def rag(template: str = TEMPLATE, ranker: bool = False, builder: object = None, llm: object = None, kind: type = Pipeline) -> Pipeline:
    pipeline = kind()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store(), top_k=3))
    pipeline.add_component("prompt_builder", builder or PromptBuilder(template=template, required_variables=["question", "documents"]))
    pipeline.add_component("llm", llm or Answerer())
    if ranker:
        pipeline.add_component("ranker", MetaFieldRanker(meta_field="rating", top_k=2))
        pipeline.connect("retriever.documents", "ranker.documents")
        pipeline.connect("ranker.documents", "prompt_builder.documents")
    else:
        pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.prompt")
    return pipeline


def inputs() -> dict:
    return {"retriever": {"query": QUESTION}, "prompt_builder": {"question": QUESTION}}


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


def test_a_pipeline_run_is_one_pipeline_with_exact_figures(haystack_on):
    spans = haystack_on
    pipeline = rag()
    out = pipeline.run(inputs(), include_outputs_from={"retriever", "prompt_builder"})
    documents, prompt = out["retriever"]["documents"], out["prompt_builder"]["prompt"]
    assert len(documents) == 3 and "Shipping" not in prompt

    root = spans.one("pipeline")
    retrieve, assemble, generate = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    for child in (retrieve, assemble, generate):
        assert child.parent.span_id == root.context.span_id and child.context.trace_id == root.context.trace_id
    assert root.attributes["gen_ai.workflow.name"] == "haystack"
    assert root.attributes["rag.query.hash"]  # the first retriever's query is the pipeline's
    assert retrieve.attributes["gen_ai.retrieval.query.text"] == QUESTION
    assert list(retrieve.attributes["rag.retrieval.chunk_ids"]) == [d.id for d in documents]
    assert retrieve.attributes["gen_ai.data_source.id"] == "InMemoryBM25Retriever"

    a = assemble.attributes
    assert a["rag.context.inclusion_method"] == "recorded"
    assert list(a["rag.context.chunk_ids"]) == [d.id for d in documents]
    assert list(a["rag.context.labels"]) == ["1", "2", "3"]
    starts = [prompt.index(f"[{n}] ") + len(f"[{n}] ") for n in (1, 2, 3)]
    assert list(a["rag.context.char_starts"]) == starts
    assert list(a["rag.context.char_ends"]) == [s + len(d.content) for s, d in zip(starts, documents)]

    g = generate.attributes
    assert g["rag.generation.role"] == "answer" and g["gen_ai.response.model"] == "answerer-1"
    assert (g["gen_ai.usage.input_tokens"], g["gen_ai.usage.output_tokens"]) == (61, 9)
    assert g["gen_ai.response.finish_reasons"] == ("stop",)
    assert list(g["rag.citation.ids"]) == [documents[1].id]
    expected = {"retrieved": 3, "in_context": 3, "cited": 1, "recall_proxy": pytest.approx(1 / 3), "context_utilization": pytest.approx(1 / 3), "inclusion_method": "recorded"}
    for span in (generate, root):
        assert {k: metrics(span)[k] for k in expected} == expected


def test_identical_outputs_with_ragtrace_on_and_off(spans):
    off = rag().run(inputs(), include_outputs_from={"retriever", "prompt_builder"})
    ragtrace.instrument("haystack")
    try:
        on = rag().run(inputs(), include_outputs_from={"retriever", "prompt_builder"})
    finally:
        ragtrace.uninstrument("haystack")
    again = rag().run(inputs(), include_outputs_from={"retriever", "prompt_builder"})
    assert on == off == again
    assert spans.by_stage("pipeline") and len(spans.by_stage("pipeline")) == 1  # none after uninstrument


def test_uninstrument_restores_the_tracer_and_the_builders(spans):
    from haystack.tracing.tracer import ProxyTracer

    before = (vars(ProxyTracer)["trace"], vars(PromptBuilder)["run"], vars(ChatPromptBuilder)["run"])
    ragtrace.instrument("haystack")
    assert vars(ProxyTracer)["trace"] is not before[0]
    ragtrace.uninstrument("haystack")
    assert (vars(ProxyTracer)["trace"], vars(PromptBuilder)["run"], vars(ChatPromptBuilder)["run"]) == before


def test_a_filter_that_cuts_the_text_falls_back_to_located(haystack_on):
    """``truncate`` cuts the marks off with the text: the rendering can't be matched, so the
    documents are searched for in the prompt, and the record says so."""
    template = TEMPLATE.replace("{{ doc.content }}", "{{ doc.content | truncate(45) }}")
    out = rag(template).run(inputs(), include_outputs_from={"retriever"})
    a = haystack_on.one("assemble").attributes
    assert a["rag.context.inclusion_method"] == "located"
    assert list(a["rag.context.chunk_ids"]) == [d.id for d in out["retriever"]["documents"]]
    assert a["rag.context.truncated_count"] == 2  # Jinja cuts the two texts longer than 45 + its leeway of 5
    assert metrics(haystack_on.one("pipeline"))["inclusion_method"] == "located"


def test_a_filter_that_keeps_the_text_whole_is_still_recorded(haystack_on):
    """``upper`` changes every letter but cuts nothing: the offsets are the uppercased texts'."""
    template = TEMPLATE.replace("{{ doc.content }}", "{{ doc.content | upper }}")
    out = rag(template).run(inputs(), include_outputs_from={"retriever", "prompt_builder"})
    prompt, documents = out["prompt_builder"]["prompt"], out["retriever"]["documents"]
    a = haystack_on.one("assemble").attributes
    assert a["rag.context.inclusion_method"] == "recorded"
    assert list(a["rag.context.char_starts"]) == [prompt.index(d.content.upper()) for d in documents]


def test_a_document_the_template_leaves_out_is_not_in_the_prompt(haystack_on):
    template = TEMPLATE.replace("{% for doc in documents %}", "{% for doc in documents[:2] %}")
    out = rag(template).run(inputs(), include_outputs_from={"retriever"})
    documents = out["retriever"]["documents"]
    a = haystack_on.one("assemble").attributes
    assert list(a["rag.context.chunk_ids"]) == [d.id for d in documents[:2]]
    assert list(a["rag.context.dropped_ids"]) == [documents[2].id]
    assert list(a["rag.context.dropped_reasons"]) == ["not_in_prompt"]
    assert metrics(haystack_on.one("pipeline"))["in_context"] == 2


def test_a_ranker_is_a_rerank_stage(haystack_on):
    """MetaFieldRanker sorts the three retrieved by rating (5, 3, 1) and keeps two: the third is
    reranked out, so the context has the two kept, and [2] is the rating-3 document."""
    out = rag(ranker=True).run(inputs(), include_outputs_from={"retriever", "ranker"})
    retrieved, kept = out["retriever"]["documents"], out["ranker"]["documents"]
    assert [d.meta["rating"] for d in kept] == [5, 3]
    rerank = haystack_on.one("rerank")
    assert list(rerank.attributes["rag.rerank.output_ids"]) == [d.id for d in kept]
    a = haystack_on.one("assemble").attributes
    assert list(a["rag.context.chunk_ids"]) == [d.id for d in kept]
    dropped = dict(zip(a["rag.context.dropped_ids"], a["rag.context.dropped_reasons"]))
    assert dropped == {next(d.id for d in retrieved if d.meta["rating"] == 1): "reranked_out"}
    m = metrics(haystack_on.one("pipeline"))
    assert (m["retrieved"], m["in_context"], m["cited"]) == (3, 2, 1)
    assert list(haystack_on.one("generate").attributes["rag.citation.ids"]) == [kept[1].id]


@pytest.mark.parametrize("as_string", [False, True], ids=["messages", "string"])
def test_a_chat_prompt_builder_and_chat_generator(haystack_on, as_string):
    """Its template as ChatMessages, or as one string of ``{% message %}`` blocks (rendered, then
    read back as JSON lines: the marks survive the round trip)."""
    system = "Answer from the numbered sources and cite them as [n]."
    user = "{% for doc in documents %}[{{ loop.index }}] {{ doc.content }}\n{% endfor %}Question: {{ question }}"
    template = (
        f'{{% message role="system" %}}{system}{{% endmessage %}}\n{{% message role="user" %}}{user}{{% endmessage %}}'
        if as_string
        else [ChatMessage.from_system(system), ChatMessage.from_user(user)]
    )
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store(), top_k=3))
    pipeline.add_component("prompt_builder", ChatPromptBuilder(template=template, required_variables=["question", "documents"]))
    pipeline.add_component("llm", ChatAnswerer())
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.messages")
    out = pipeline.run(inputs(), include_outputs_from={"retriever", "prompt_builder"})
    documents, user = out["retriever"]["documents"], out["prompt_builder"]["prompt"][1].text
    a = haystack_on.one("assemble").attributes
    assert a["rag.context.inclusion_method"] == "recorded"
    assert list(a["rag.context.message_indexes"]) == [1, 1, 1]
    assert list(a["rag.context.char_starts"]) == [user.index(d.content) for d in documents]
    g = haystack_on.one("generate").attributes
    assert (g["gen_ai.usage.input_tokens"], g["gen_ai.response.model"]) == (70, "chat-1")
    assert json.loads(g["gen_ai.input.messages"])[0]["role"] == "system"
    m = metrics(haystack_on.one("pipeline"))
    assert (m["retrieved"], m["in_context"], m["cited"]) == (3, 3, 1)


def test_run_async_gives_the_same_figures(haystack_on):
    kind = getattr(haystack, "AsyncPipeline", Pipeline)  # 2.x has a class of its own for it
    out = asyncio.run(rag(kind=kind).run_async(inputs(), include_outputs_from={"retriever"}))
    assert len(out["retriever"]["documents"]) == 3
    root = haystack_on.one("pipeline")
    for stage in ("retrieve", "assemble", "generate"):
        assert haystack_on.one(stage).context.trace_id == root.context.trace_id
    m = metrics(root)
    assert (m["retrieved"], m["in_context"], m["cited"], m["inclusion_method"]) == (3, 3, 1, "recorded")


def test_inside_a_rag_pipeline_the_components_are_its_stages(haystack_on):
    with ragtrace.rag_pipeline("support", query=QUESTION) as run:
        rag().run(inputs())
    root = haystack_on.one("pipeline")
    assert root.attributes["gen_ai.workflow.name"] == "support"
    assert run.metrics["cited"] == 1 and run.metrics["retrieved"] == 3


def test_a_query_rewrite_before_retrieval_is_not_the_answer(haystack_on):
    """An LLM call before anything is retrieved, sent no documents, whose reply feeds the
    retriever: a ``rewrite``, left out of the figures; the answer is the last call's."""
    from haystack.components.converters import OutputAdapter

    pipeline = Pipeline()
    pipeline.add_component("rewrite_prompt", PromptBuilder(template="Rewrite as a search query: {{ question }}", required_variables=["question"]))
    pipeline.add_component("rewriter", Answerer(reply="refund duration"))
    pipeline.add_component("to_query", OutputAdapter(template="{{ replies[0] }}", output_type=str))
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store(), top_k=3))
    pipeline.add_component("prompt_builder", PromptBuilder(template=TEMPLATE, required_variables=["question", "documents"]))
    pipeline.add_component("llm", Answerer())
    pipeline.connect("rewrite_prompt.prompt", "rewriter.prompt")
    pipeline.connect("rewriter.replies", "to_query.replies")
    pipeline.connect("to_query.output", "retriever.query")
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.prompt")
    out = pipeline.run({"rewrite_prompt": {"question": QUESTION}, "prompt_builder": {"question": QUESTION}}, include_outputs_from={"retriever"})
    roles = sorted(s.attributes["rag.generation.role"] for s in haystack_on.by_stage("generate"))
    assert roles == ["answer", "rewrite"]
    assert haystack_on.one("retrieve").attributes["gen_ai.retrieval.query.text"] == "refund duration"
    m = metrics(haystack_on.one("pipeline"))
    assert (m["retrieved"], m["in_context"], m["cited"]) == (len(out["retriever"]["documents"]), len(out["retriever"]["documents"]), 1)


def test_a_failing_component_passes_its_error_through(haystack_on):
    from haystack.core.errors import PipelineRuntimeError

    @component
    class Broken:
        @component.output_types(replies=list[str])
        def run(self, prompt: str) -> dict:
            raise ValueError("model down")

    pipeline = rag(llm=Broken())
    with pytest.raises(PipelineRuntimeError) as raised:
        pipeline.run(inputs())
    assert isinstance(raised.value.__cause__, ValueError)
    generate, root = haystack_on.one("generate"), haystack_on.one("pipeline")
    assert not generate.status.is_ok and not root.status.is_ok


def test_redact_mode_leaks_nothing(haystack_on):
    """Nor Haystack's default document ids, which are SHA-256 digests of the content: those
    documents go by ragtrace's keyed digest; an id the app gave (``kb-2``) is kept."""
    ragtrace.configure(tracer_provider=haystack_on.provider, capture_content="redact")
    documents = InMemoryDocumentStore()
    written = [Document(content=f"refund MARKER-DOC-{n} takes days") for n in range(2)] + [Document(id="kb-2", content="refund MARKER-DOC-2 takes days")]
    documents.write_documents(written)
    content_ids = [d.id for d in written[:2]]
    assert content_ids == [d._create_id() for d in written[:2]]
    pipeline = Pipeline()
    pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=documents, top_k=3))
    pipeline.add_component("prompt_builder", PromptBuilder(template=TEMPLATE + " MARKER-PROMPT", required_variables=["question", "documents"]))
    pipeline.add_component("llm", Answerer(reply="MARKER-ANSWER [1]"))
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.prompt")
    pipeline.run({"retriever": {"query": "refund MARKER-QUESTION"}, "prompt_builder": {"question": "refund MARKER-QUESTION"}})
    exported = json.dumps([{"name": s.name, "attributes": dict(s.attributes), "events": [dict(e.attributes) for e in s.events]} for s in haystack_on.all()], default=str)
    for marker in ("MARKER-DOC", "MARKER-PROMPT", "MARKER-ANSWER", "MARKER-QUESTION", *content_ids):
        assert marker not in exported
    retrieved = haystack_on.one("retrieve").attributes["rag.retrieval.chunk_ids"]
    assert "kb-2" in retrieved and len(set(retrieved)) == 3
    assert list(haystack_on.one("assemble").attributes["rag.context.chunk_ids"]) == list(retrieved)  # the same ids in every stage
    m = metrics(haystack_on.one("pipeline"))
    assert (m["retrieved"], m["in_context"], m["cited"]) == (3, 3, 1)  # the figures are still there


@pytest.mark.parametrize("streamed", [False, True])
def test_openais_chat_generator_beside_the_openai_integration_is_one_generation(spans, chat_server, streamed):
    """Haystack's ``OpenAIChatGenerator`` against the loopback OpenAI server, with the OpenAI
    integration on too: the SDK call inside the component is left to its generate span (one
    generation, not two), whose usage and model are the API's (42 + 9 tokens). Streamed, the app's
    ``streaming_callback`` still gets every chunk."""
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    url, received = chat_server
    chunks: list[object] = []
    assert ragtrace.instrument("haystack", "openai") == ["haystack", "openai"]
    try:
        template = [ChatMessage.from_user("{% for doc in documents %}[{{ loop.index }}] {{ doc.content }}\n{% endfor %}Question: {{ question }}")]
        pipeline = Pipeline()
        pipeline.add_component("retriever", InMemoryBM25Retriever(document_store=store(), top_k=3))
        pipeline.add_component("prompt_builder", ChatPromptBuilder(template=template, required_variables=["question", "documents"]))
        pipeline.add_component("llm", OpenAIChatGenerator(api_key=Secret.from_token("k"), model="gpt-4o-mini", api_base_url=f"{url}/v1", streaming_callback=chunks.append if streamed else None))
        pipeline.connect("retriever.documents", "prompt_builder.documents")
        pipeline.connect("prompt_builder.prompt", "llm.messages")
        out = pipeline.run(inputs(), include_outputs_from={"retriever"})
    finally:
        ragtrace.uninstrument("haystack", "openai")
    assert out["llm"]["replies"][0].text == "Refunds take 5 business days [1]." and len(received) == 1
    assert bool(chunks) is streamed
    g = spans.one("generate").attributes
    assert g["gen_ai.provider.name"] == "openai" and g["gen_ai.response.model"] == "gpt-4o-mini-2024-07-18"
    if not streamed:  # Haystack asks for no stream usage unless told to
        assert (g["gen_ai.usage.input_tokens"], g["gen_ai.usage.output_tokens"]) == (42, 9)
    assert list(g["rag.citation.ids"]) == [out["retriever"]["documents"][0].id]
    m = metrics(spans.one("pipeline"))
    assert (m["retrieved"], m["in_context"], m["cited"], m["inclusion_method"]) == (3, 3, 1, "recorded")


def test_instrument_never_imports_haystack_and_hooks_it_when_the_app_does(tmp_path):
    import subprocess
    import sys

    from fresh_interpreter import RAGTRACE_IN_MEMORY

    code = (
        RAGTRACE_IN_MEMORY
        + "print('INSTRUMENTED', 'haystack' in ragtrace.instrument(), 'haystack' in sys.modules)\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from test_haystack import inputs, rag\n"
        "rag().run(inputs())\n"
        "print('STAGES', sorted(s.attributes.get('rag.stage') for s in exporter.get_finished_spans()))\n"
    )
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = {**os.environ, "HAYSTACK_TELEMETRY_ENABLED": "False", "PYTHONPATH": root}  # this checkout's ragtrace
    done = subprocess.run([sys.executable, "-c", code, os.path.dirname(__file__)], capture_output=True, text=True, timeout=120, cwd=tmp_path, env=env, check=False)
    assert done.returncode == 0, done.stderr
    assert "INSTRUMENTED True False" in done.stdout
    assert "STAGES ['assemble', 'generate', 'pipeline', 'retrieve']" in done.stdout


def test_an_apps_own_prompt_component_is_the_assembly_located(haystack_on):
    """A ``@component`` of the app's that turns ``documents`` into a ``prompt``: ragtrace can't
    render it again, so the documents are located in the prompt it returned."""

    @component
    class MyPrompt:
        @component.output_types(prompt=str)
        def run(self, documents: list[Document], question: str) -> dict:
            sources = "\n".join(f"Source {n}: {d.content}" for n, d in enumerate(documents, 1))
            return {"prompt": f"{sources}\nQuestion: {question}"}

    out = rag(builder=MyPrompt()).run(inputs(), include_outputs_from={"retriever", "prompt_builder"})
    documents, prompt = out["retriever"]["documents"], out["prompt_builder"]["prompt"]
    a = haystack_on.one("assemble").attributes
    assert a["rag.context.inclusion_method"] == "located"
    assert list(a["rag.context.chunk_ids"]) == [d.id for d in documents]
    assert list(a["rag.context.char_starts"]) == [prompt.index(d.content) for d in documents]
    assert list(a["rag.context.labels"]) == ["1", "2", "3"]
    assert list(haystack_on.one("generate").attributes["rag.citation.ids"]) == [documents[1].id]


def test_the_pipelines_metadata_names_the_root_and_tracer_provider_is_honoured(spans):
    """``Pipeline(metadata={"name": ...})`` names the root; ``instrument(tracer_provider=...)``
    sends the spans to that provider, not ragtrace's configured one."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
        InMemorySpanExporter,
    )

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    assert ragtrace.instrument("haystack", tracer_provider=provider) == ["haystack"]
    try:
        pipeline = rag()
        pipeline.metadata = {"name": "support-bot"}
        pipeline.run(inputs())
    finally:
        ragtrace.uninstrument("haystack")
    assert spans.all() == []
    (root,) = [s for s in exporter.get_finished_spans() if s.attributes.get("rag.stage") == "pipeline"]
    assert root.attributes["gen_ai.workflow.name"] == "support-bot" and root.name == "invoke_workflow support-bot"
    assert {s.attributes.get("rag.stage") for s in exporter.get_finished_spans()} == {"pipeline", "retrieve", "assemble", "generate"}


VOCABULARY = ("refund", "days", "card", "shipping")


@component
class WordsEmbedder:
    """A text embedder without a model: one dimension per vocabulary word the text holds."""

    @component.output_types(embedding=list[float], meta=dict)
    def run(self, text: str) -> dict:
        words = text.lower()
        return {"embedding": [float(word in words) for word in VOCABULARY], "meta": {"model": "words-1", "usage": {"prompt_tokens": len(text.split())}}}


def test_an_embedding_retrieval_with_its_text_embedder(haystack_on):
    """By hand: the question holds "refund" and "days" ([1, 1, 0, 0]); the store's dot products
    are 2 (days), 1 (card), 0 (shipping), so top_k=2 returns the first two, shown as [1] and [2];
    the answer cites [1]: retrieved 2, in context 2, cited 1, recall 1/2. The embedder's text is the
    pipeline's query (an embedding retriever is given none)."""
    from haystack.components.retrievers.in_memory import InMemoryEmbeddingRetriever

    question = "How many days does a refund take?"
    documents = InMemoryDocumentStore()
    texts = {"Refunds take 5 business days.": [1.0, 1.0, 0.0, 0.0], "A refund goes back to the original card.": [1.0, 0.0, 1.0, 0.0], "Shipping costs 12 euros.": [0.0, 0.0, 0.0, 1.0]}
    documents.write_documents([Document(content=text, embedding=vector) for text, vector in texts.items()])
    pipeline = Pipeline()
    pipeline.add_component("embedder", WordsEmbedder())
    pipeline.add_component("retriever", InMemoryEmbeddingRetriever(document_store=documents, top_k=2))
    pipeline.add_component("prompt_builder", PromptBuilder(template=TEMPLATE, required_variables=["question", "documents"]))
    pipeline.add_component("llm", Answerer(reply="Five business days [1]."))
    pipeline.connect("embedder.embedding", "retriever.query_embedding")
    pipeline.connect("retriever.documents", "prompt_builder.documents")
    pipeline.connect("prompt_builder.prompt", "llm.prompt")
    out = pipeline.run({"embedder": {"text": question}, "prompt_builder": {"question": question}}, include_outputs_from={"retriever"})
    found = out["retriever"]["documents"]
    assert [d.content for d in found] == list(texts)[:2] and [d.score for d in found] == [2.0, 1.0]
    root, embed = haystack_on.one("pipeline"), haystack_on.one("embed")
    assert embed.parent.span_id == root.context.span_id
    assert embed.attributes["gen_ai.embeddings.dimension.count"] == 4 and embed.attributes["gen_ai.usage.input_tokens"] == 7  # words, as the stand-in counts
    assert haystack_on.one("retrieve").attributes["gen_ai.retrieval.documents"] == json.dumps([{"id": d.id, "score": d.score} for d in found], separators=(",", ":"))
    assert root.attributes["rag.query.hash"]  # the embedder's text
    m = metrics(root)
    assert (m["retrieved"], m["in_context"], m["cited"], m["recall_proxy"], m["inclusion_method"]) == (2, 2, 1, 0.5, "recorded")
