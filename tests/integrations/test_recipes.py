"""Recipes: libraries that need no instrumentation of their own, run the way their docs teach, with
the real packages and the fakes they ship (docs/integrations.md, "Recipes").

- the OpenAI Agents SDK's ``FileSearchTool``: its Responses API calls go through the OpenAI
  integration (the SDK's ``AsyncOpenAI`` over an ``httpx.MockTransport``: ``openai_responses_fake``);
- DSPy: its ``dspy.LM`` calls LiteLLM (the LiteLLM integration, against the loopback server), the
  app's retriever carries ``@ragtrace.retriever``;
- Pydantic AI: its own OTel spans, ``@ragtrace.retriever`` in the tool, its ``FunctionModel``.
"""

from __future__ import annotations

import math
import os

import pytest

import ragtrace
from ragtrace._internal.core import keyed

from .openai_responses_fake import MODEL, STORE, FakeResponses, result

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

pytestmark = pytest.mark.heavy  # the agent frameworks and LiteLLM take seconds to import: 3.11 only


def metrics(span) -> dict:
    return {k.removeprefix("rag.metrics."): v for k, v in span.attributes.items() if k.startswith("rag.metrics.")}


# --- the OpenAI Agents SDK --------------------------------------------------------------------------
AGENT_RESULTS = [
    result("file-shipping", "Shipping is free for orders over 50 euros.", 0.52),
    result("file-gifts", "Gift cards never expire.", 0.40),
]


def test_openai_agents_file_search_tool_goes_through_the_openai_integration(spans):
    """An ``Agent`` with ``FileSearchTool(include_search_results=True)``: the SDK sends
    ``responses.create`` with the ``file_search`` tool and ``include``; the OpenAI integration makes
    it one pipeline. By hand: 2 results, both given to the model (provider), the answer cites
    file-shipping: retrieved 2, in context 2, cited 1 at position 1, recall 1/2, weighted recall
    1 / (1 + 1/2) = 2/3, precision 1, utilisation 1/2."""
    from agents import Agent, FileSearchTool, Runner, set_tracing_disabled
    from agents.models.openai_responses import OpenAIResponsesModel

    set_tracing_disabled(True)  # the SDK's own tracing would export to OpenAI's servers
    fake = FakeResponses(AGENT_RESULTS, [("Shipping is free over 50 euros.", ["file-shipping"])])
    agent = Agent(
        name="support",
        instructions="Answer from the files.",
        model=OpenAIResponsesModel(model=MODEL, openai_client=fake.async_client()),
        tools=[FileSearchTool(vector_store_ids=[STORE], max_num_results=2, include_search_results=True)],
    )
    assert ragtrace.instrument("openai") == ["openai"]
    try:
        run = Runner.run_sync(agent, "Is shipping free?")
    finally:
        ragtrace.uninstrument("openai")
    assert run.final_output == "Shipping is free over 50 euros."
    assert fake.requests[0]["include"] == ["file_search_call.results"]
    ids = [f"{r['file_id']}#{keyed.content_digest(r['text'])}" for r in AGENT_RESULTS]
    root = spans.one("pipeline")
    retrieved, assembled, generated = spans.one("retrieve"), spans.one("assemble"), spans.one("generate")
    assert root.name == "invoke_workflow openai" and {s.parent.span_id for s in (retrieved, assembled, generated)} == {root.context.span_id}
    assert list(retrieved.attributes["rag.retrieval.chunk_ids"]) == ids
    assert assembled.attributes["rag.context.inclusion_method"] == "provider"
    assert list(generated.attributes["rag.citation.ids"]) == ids[:1]
    got = metrics(root)
    assert (got["retrieved"], got["in_context"], got["cited"], list(got["cited_positions"])) == (2, 2, 1, [1])
    assert got["recall_proxy"] == 0.5 and math.isclose(got["recall_proxy_weighted"], 2 / 3)
    assert got["context_precision"] == 1.0 and got["context_utilization"] == 0.5


# --- DSPy ------------------------------------------------------------------------------------------
PASSAGES = [
    {"id": "kb-refunds", "content": "Refunds reach the original card within 5 business days."},
    {"id": "kb-credit", "content": "Store credit is issued immediately instead of a refund."},
    {"id": "kb-shipping", "content": "Shipping is free for orders over 50 euros."},
]
# what DSPy's ChatAdapter expects back from the model, field by field
DSPY_ANSWER = "[[ ## answer ## ]]\nRefunds take 5 business days [1].\n\n[[ ## completed ## ]]"


def test_dspy_through_litellm_with_a_decorated_retriever(spans):
    """A DSPy module whose ``dspy.LM`` calls LiteLLM: ``ragtrace.instrument()`` (the LiteLLM
    integration), ``@ragtrace.retriever`` on the search, ``@ragtrace.assembler`` with ``place_all``
    on the context it formats, ``@ragtrace.rag_pipeline`` on ``forward``. By hand: 3 retrieved, 3
    declared in context as [1]-[3], the answer cites [1]: recall 1/3, precision 1, utilisation 1/3."""
    import dspy

    from loopback import serve_chat
    from ragtrace._internal.integrations import _litellm_calls

    from .test_litellm import settled

    @ragtrace.retriever(data_source="kb")
    def search(query: str) -> list[dict]:
        return PASSAGES

    @ragtrace.assembler
    def format_context(passages: list[dict]) -> str:
        return ragtrace.place_all(passages)  # "[1] ...", "[2] ...": declared

    class SupportRAG(dspy.Module):
        def __init__(self) -> None:
            super().__init__()
            self.respond = dspy.Predict("context, question -> answer")

        @ragtrace.rag_pipeline("dspy-support")
        def forward(self, question: str):
            return self.respond(context=format_context(search(question)), question=question)

    import litellm  # noqa: F401 - DSPy imports it lazily; the app has it

    assert "litellm" in ragtrace.instrument()
    try:
        for url, received in serve_chat(DSPY_ANSWER):
            # DSPy 3.4 calls its own lm15 engine unless told to use LiteLLM
            dspy.configure(lm=dspy.LM("openai/gpt-4o-mini", api_base=f"{url}/v1", api_key="k", cache=False, engine="litellm"))
            prediction = SupportRAG()(question="How long does a refund take?")
            settled(spans)
    finally:
        ragtrace.uninstrument()
    assert prediction.answer == "Refunds take 5 business days [1]."
    assert "[1] Refunds reach the original card" in received[-1]["body"]["messages"][-1]["content"]
    assert _litellm_calls.pending_count() == 0
    root, generated = spans.one("pipeline"), spans.one("generate")
    assert root.name == "invoke_workflow dspy-support" and generated.parent.span_id == root.context.span_id
    assert generated.attributes["gen_ai.provider.name"] == "openai" and generated.attributes["gen_ai.usage.input_tokens"] == 42
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-refunds"]
    got = metrics(root)
    assert got["inclusion_method"] == "declared"
    assert (got["retrieved"], got["in_context"], got["cited"], got["invalid_citations"], got["unknown_citations"]) == (3, 3, 1, 0, 0)
    assert math.isclose(got["recall_proxy"], 1 / 3) and got["context_precision"] == 1.0 and math.isclose(got["context_utilization"], 1 / 3)


# --- Pydantic AI -----------------------------------------------------------------------------------
def test_pydantic_ai_with_its_own_spans_and_ragtrace_decorators_in_the_tool(spans):
    """A Pydantic AI agent (its ``FunctionModel``: first a tool call, then the answer) with its own
    OTel instrumentation on the same provider. The tool's search carries ``@ragtrace.retriever``,
    its formatting ``@ragtrace.assembler`` with ``place_all``; a ``ragtrace.generate()`` block
    around the run records the agent's answer. By hand: 2 retrieved, 2 declared in context, the
    answer cites [1]: recall 1/2, precision 1, utilisation 1/2; one trace with Pydantic AI's spans."""
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    shown: list[str] = []

    def model(messages, info: AgentInfo) -> ModelResponse:
        returned = [part for message in messages for part in getattr(message, "parts", ()) if isinstance(part, ToolReturnPart)]
        if not returned:
            return ModelResponse(parts=[ToolCallPart("search", {"query": "refund time"})])
        shown.append(returned[0].content)
        return ModelResponse(parts=[TextPart("Refunds take 5 business days [1].")])

    @ragtrace.retriever(data_source="kb")
    def find(query: str) -> list[dict]:
        return PASSAGES[:2]

    @ragtrace.assembler
    def format_context(passages: list[dict]) -> str:
        return ragtrace.place_all(passages)

    agent = Agent(FunctionModel(model), capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=spans.provider))])

    @agent.tool_plain
    def search(query: str) -> str:
        """Search the knowledge base."""
        return format_context(find(query))

    @ragtrace.rag_pipeline("pydantic-ai-support")
    def ask(question: str) -> str:
        with ragtrace.generate(model="function", provider="pydantic-ai") as answer:
            output = agent.run_sync(question).output
            answer.record(output)
        return output

    assert ask("How long does a refund take?") == "Refunds take 5 business days [1]."
    assert shown == ["[1] " + PASSAGES[0]["content"] + "\n\n[2] " + PASSAGES[1]["content"]]
    root, retrieved, generated = spans.one("pipeline"), spans.one("retrieve"), spans.one("generate")
    by_name = {s.name: s for s in spans.all()}
    assert len({s.context.trace_id for s in spans.all()}) == 1  # Pydantic AI's spans and ragtrace's: one trace
    assert retrieved.parent.span_id == by_name["execute_tool search"].context.span_id
    assert by_name["invoke_agent agent"].parent.span_id == generated.context.span_id
    assert list(generated.attributes["rag.citation.ids"]) == ["kb-refunds"]
    got = metrics(root)
    assert got["inclusion_method"] == "declared"
    assert (got["retrieved"], got["in_context"], got["cited"]) == (2, 2, 1)
    assert got["recall_proxy"] == 0.5 and got["context_precision"] == 1.0 and got["context_utilization"] == 0.5
