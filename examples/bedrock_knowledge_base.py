"""RAG on AWS Bedrock with boto3 alone, offline: botocore's own ``Stubber`` answers the calls as
the service would (no credentials, no network), so the example runs anywhere.

Two apps over one knowledge base: (1) ``retrieve`` the passages, hand them to ``converse`` as
search-result blocks with citations on; (2) ``retrieve_and_generate``, the whole pipeline in one
call. ``ragtrace.instrument()`` is the one line they need (the lines ending in ``# ragtrace``).
The first is one pipeline with exact figures: the retrieval, the assembly the API states
(``inclusion_method = "provider"``) and the citations it returns. The second returns only the
references its answer cites, so its retrieval and context are reported as not measurable
(``cited_references_only``) rather than guessed. Needs ``pip install 'ragtrace[bedrock]' boto3``.

    python examples/bedrock_knowledge_base.py [console|jsonl:PATH]
"""

from __future__ import annotations

import sys

import boto3
from botocore.stub import Stubber

import ragtrace  # ragtrace

KNOWLEDGE_BASE = "KBREFUNDS01"
MODEL = "anthropic.claude-3-haiku-20240307-v1:0"
PASSAGES = [
    ("s3://support-kb/refunds.md", "Refunds reach the original card within 5 business days.", 0.91),
    ("s3://support-kb/store-credit.md", "Store credit is issued immediately instead of a refund.", 0.74),
    ("s3://support-kb/shipping.md", "Shipping is free for orders over 50 euros.", 0.32),
]
ANSWER = ["Refunds take 5 business days", ", or store credit is immediate."]


def knowledge_base_result(uri: str, text: str, score: float | None = None) -> dict:
    found = {"content": {"text": text, "type": "TEXT"}, "location": {"type": "S3", "s3Location": {"uri": uri}}}
    return found if score is None else {**found, "score": score}


def offline(client: object, operation: str, response: dict) -> Stubber:
    """The service's answer to the next ``operation`` call on ``client`` (the fake)."""
    stub = Stubber(client)
    stub.add_response(operation, response)
    return stub


def retrieve_then_converse(question: str) -> str:
    agent, runtime = session.client("bedrock-agent-runtime"), session.client("bedrock-runtime")
    with offline(agent, "retrieve", {"retrievalResults": [knowledge_base_result(*p) for p in PASSAGES]}):
        found = agent.retrieve(knowledgeBaseId=KNOWLEDGE_BASE, retrievalQuery={"text": question})["retrievalResults"]
    blocks = [
        {"searchResult": {"source": r["location"]["s3Location"]["uri"], "title": "Support", "content": [{"text": r["content"]["text"]}], "citations": {"enabled": True}}}
        for r in found
    ]
    cite = lambda index: {"location": {"searchResultLocation": {"searchResultIndex": index, "start": 0, "end": 1}}}  # noqa: E731
    reply = {
        "output": {"message": {"role": "assistant", "content": [{"citationsContent": {"content": [{"text": part}], "citations": [cite(i)]}} for i, part in enumerate(ANSWER)]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 180, "outputTokens": 14, "totalTokens": 194},
        "metrics": {"latencyMs": 420},
    }
    with offline(runtime, "converse", reply):
        response = runtime.converse(modelId=MODEL, messages=[{"role": "user", "content": [*blocks, {"text": question}]}])
    return "".join(b["citationsContent"]["content"][0]["text"] for b in response["output"]["message"]["content"])


def retrieve_and_generate(question: str) -> str:
    agent = session.client("bedrock-agent-runtime")
    text = "".join(ANSWER)
    cited = [
        {"generatedResponsePart": {"textResponsePart": {"text": part, "span": {"start": text.index(part), "end": text.index(part) + len(part) - 1}}}, "retrievedReferences": [knowledge_base_result(*PASSAGES[i][:2])]}
        for i, part in enumerate(ANSWER)
    ]
    configuration = {"type": "KNOWLEDGE_BASE", "knowledgeBaseConfiguration": {"knowledgeBaseId": KNOWLEDGE_BASE, "modelArn": f"arn:aws:bedrock:us-east-1::foundation-model/{MODEL}"}}
    with offline(agent, "retrieve_and_generate", {"sessionId": "session-1", "output": {"text": text}, "citations": cited}):
        return agent.retrieve_and_generate(input={"text": question}, retrieveAndGenerateConfiguration=configuration)["output"]["text"]


if __name__ == "__main__":
    ragtrace.configure(service_name="bedrock-knowledge-base", exporter=(sys.argv[1:] or ["console"])[0])  # ragtrace
    ragtrace.instrument()  # ragtrace
    session = boto3.session.Session(aws_access_key_id="offline", aws_secret_access_key="offline", region_name="us-east-1")
    print("A (retrieve + converse):", retrieve_then_converse("How long does a refund take?"))
    print("A (retrieve_and_generate):", retrieve_and_generate("How long does a refund take?"))
