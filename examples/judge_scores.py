"""Judge scores joined to traces: a pipeline, a judge in its own process after it, the report.

The app answers six questions (spans to ``OUT/runs.jsonl``) and logs ``run.trace_id``,
``run.span_id``, the answer and its context for the judge. The judge, a plain function (word
overlap of answer sentences with the context: no model, no paid API), then scores each run from
those ids with ``ragtrace.record_score`` (spans to ``OUT/scores.jsonl``), and ``ragtrace report``
joins the two by trace id: recall proxy against groundedness, the four-quadrant table.

    python examples/judge_scores.py [OUT]      # default: out/judge
"""

import json
import re
import subprocess
import sys
from pathlib import Path

import ragtrace

CORPUS = {
    "bm25": "BM25 ranks documents by term frequency and inverse document frequency.",
    "dense": "Dense retrieval embeds queries and documents into one vector space.",
    "rerank": "A reranker scores each query and passage pair with a cross-encoder.",
    "chunking": "Chunking splits long documents into overlapping passages before indexing.",
}
ANSWERS = {  # a stand-in for an LLM: grounded or not, citing or not
    "How does BM25 rank documents?": "BM25 ranks documents by term frequency and inverse document frequency [1].",
    "What does a reranker do?": "A reranker scores each query and passage pair [1].",
    "What is dense retrieval?": "Dense retrieval embeds queries and documents [1]. It was invented in 1962 by a Soviet team.",
    "Why chunk documents?": "Chunking splits long documents into overlapping passages.",
    "Is BM25 better than dense retrieval?": "Neural models always beat lexical ones on every benchmark.",
    "Who maintains the index?": "The platform team rebuilds it every night at midnight.",
}
STOP = {"a", "an", "and", "the", "of", "by", "it", "is", "into", "one", "each", "on", "every", "at", "was", "in"}


def words(text: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", text.lower())) - STOP


@ragtrace.retriever(data_source="kb", top_k=2)
def search(query: str, k: int = 2) -> list[dict]:
    ranked = sorted(CORPUS.items(), key=lambda item: (-len(words(query) & words(item[1])), item[0]))
    return [{"id": doc_id, "content": text} for doc_id, text in ranked[:k]]


def run_pipelines(out: Path) -> None:
    provider = ragtrace.configure(service_name="qa-app", exporter=f"jsonl:{out / 'runs.jsonl'}")
    with open(out / "to-judge.jsonl", "w", encoding="utf-8") as log:
        for question, answer in ANSWERS.items():
            with ragtrace.rag_pipeline("docs-qa", query=question, version="v1") as run:
                hits = search(question)
                with ragtrace.assemble() as ctx:
                    [ctx.add(hit) for hit in hits]
                    prompt = ctx.render("Answer from the context, citing [n].\n{context}\nQuestion: {question}", question=question)
                with ragtrace.generate(model="canned-llm", prompt=prompt) as g:
                    g.record(answer)
            log.write(json.dumps({"trace_id": run.trace_id, "span_id": run.span_id, "answer": answer, "context": [h["content"] for h in hits]}) + "\n")
            print(f"run {run.trace_id}: recall_proxy={run.metrics.get('recall_proxy')}  {question}")
    provider.force_flush()  # type: ignore[union-attr] - written before the judge reads the ids


def groundedness(answer: str, context: list[str]) -> tuple[float, str]:
    """Share of answer sentences whose words are mostly in the context, and the unsupported ones."""
    known = set().union(*(words(text) for text in context))
    sentences = [s for s in re.split(r"(?<=[.!?])\s+", answer.strip()) if words(s)]
    unsupported = [s for s in sentences if len(words(s) & known) / len(words(s)) < 0.6]
    score = 1 - len(unsupported) / len(sentences) if sentences else 0.0
    return score, ("unsupported: " + " | ".join(unsupported)) if unsupported else "every sentence is supported"


def judge(to_judge: Path, out: Path) -> None:  # its own process: nothing of the runs but the app's log
    ragtrace.configure(service_name="judge", exporter=f"jsonl:{out / 'scores.jsonl'}")  # flushed at exit
    for line in to_judge.read_text(encoding="utf-8").splitlines():
        run = json.loads(line)
        score, why = groundedness(run["answer"], run["context"])
        ragtrace.record_score(
            trace_id=run["trace_id"], span_id=run["span_id"], name="groundedness", value=score, scorer="code",
            label="pass" if score >= 0.7 else "fail", explanation=why, pipeline="docs-qa", version="v1",
        )


def main() -> int:
    if sys.argv[1:2] == ["--judge"]:
        return judge(Path(sys.argv[2]), Path(sys.argv[3])) or 0
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "out/judge")
    out.mkdir(parents=True, exist_ok=True)
    for name in ("runs.jsonl", "scores.jsonl"):  # the jsonl exporter appends
        (out / name).unlink(missing_ok=True)
    run_pipelines(out)
    if code := subprocess.call([sys.executable, __file__, "--judge", str(out / "to-judge.jsonl"), str(out)]):
        return code
    command = ["report", str(out / "runs.jsonl"), str(out / "scores.jsonl"), "--score-threshold", "groundedness=0.7", "--plain", "--rows", "0"]
    print("$ ragtrace " + " ".join(command), flush=True)
    return subprocess.call([sys.executable, "-m", "ragtrace", *command])


if __name__ == "__main__":
    sys.exit(main())
