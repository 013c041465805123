"""Phoenix annotations derived from finished spans: one per figure, and each document's marks.

Read only from what the spans already carry (``rag.metrics.*`` on the root and the answer
generation; ``rag.retrieval.chunk_ids``, ``rag.rerank.output_ids``, the assemble span's
``rag.context.*`` placements and the answer's ``rag.citation.ids`` / ``.out_of_context_ids``), so there is no second path
to the figures, and nothing reaches an annotation that the content policy kept off the spans.
Labels and explanations are built from ids, numbers, labels and fixed words only: never from a
content attribute, so redact mode holds for annotations too.

Figure annotations are ready when their span ends. Document annotations need the whole pipeline
(the answer cites after the retriever ended), so the spans they read wait per trace until the
pipeline's root ends; at most ``max_pending`` traces wait, the oldest given up first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from .. import names
from ..core.figures import label as proxy_label

ANNOTATOR = names.ANNOTATOR_CODE
IN_PROMPT = names.EVALUATION_NAME_PREFIX + "in_prompt"  # a document's placement mark
CITED = names.EVALUATION_NAME_PREFIX + "cited"  # a document's citation mark
NOT_MEASURABLE = "not measurable"
NO_CITATIONS = "no citations"
HALLUCINATED_CITATION = "hallucinated citation"
CITED_OUTSIDE_CONTEXT = "cited outside the context"
CITED_NOT_IN_PROMPT = "cited, not in prompt"  # a document an out-of-context citation names


SPAN, DOCUMENT, TRACE = "span", "document", "trace"  # what an annotation is attached to


@dataclass(frozen=True, slots=True)
class Annotation:
    """One annotation in the shape of Phoenix's ``SpanAnnotationData``, ``SpanDocumentAnnotationData``
    or ``TraceAnnotationData``: ``target`` is the span id, or the trace id for a trace annotation."""

    target: str
    name: str
    result: dict[str, Any]
    metadata: dict[str, Any]
    document_position: int | None = None  # set: a document annotation
    kind: str = SPAN
    annotator: str = ANNOTATOR

    def payload(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "annotator_kind": self.annotator, "result": self.result, "metadata": self.metadata}
        data["trace_id" if self.kind == TRACE else "span_id"] = self.target
        if self.document_position is not None:
            data["document_position"] = self.document_position
        return data


def span_hex(span_id: int) -> str:
    return format(span_id, "016x")


def trace_hex(trace_id: int) -> str:
    return format(trace_id, "032x")


# --- figures -------------------------------------------------------------------------------
_FIGURE_STAGES = frozenset({names.STAGE_PIPELINE, names.STAGE_GENERATE})  # the root and the answer carry rag.metrics.*
_FIGURE_KEYS = tuple((m, names.metric_attribute(m)) for m in names.EMITTED_METRICS)


def figure_annotations(span_id: str, attributes: Mapping[str, Any], trace_id: str | None = None) -> list[Annotation]:
    """One annotation per figure of ``names.ALL_METRICS`` on a span that carries ``rag.metrics.*``;
    a figure that was not measured is marked so, with the span's recorded reasons. The file-level
    figures, which apply only where citations name files, are annotated where measured. On the pipeline
    root the measured proxies (in [0, 1]) also become trace annotations of ``trace_id``: Phoenix
    charts trace annotation scores over time, and its trace table filters on them."""
    if attributes.get(names.RAG_STAGE) not in _FIGURE_STAGES:  # cheap: most spans carry no figures
        return []
    inclusion = attributes.get(names.RAG_METRICS_INCLUSION_METHOD)
    status = attributes.get(names.RAG_METRICS_STATUS)
    found = {m: attributes.get(key) for m, key in _FIGURE_KEYS}
    present = {m: v for m, v in found.items() if v is not None}
    if not present and status is None:
        return []
    metadata = {"source": "ragtrace", "inclusion_method": inclusion} if inclusion else {"source": "ragtrace"}
    how = f" ({inclusion} context)" if inclusion else ""
    out = []
    for metric in names.ALL_METRICS:
        if metric in present:
            result = _figure_result(metric, present[metric], how)
        else:
            result = {"label": NOT_MEASURABLE, "explanation": f"not measurable: {status}" if status else NOT_MEASURABLE}
        out.append(Annotation(span_id, names.EVALUATION_NAME_PREFIX + metric, result, metadata))
    out += [Annotation(span_id, names.EVALUATION_NAME_PREFIX + m, _figure_result(m, present[m], how), metadata) for m in names.FILE_METRICS if m in present]
    if trace_id is not None and attributes.get(names.RAG_STAGE) == names.STAGE_PIPELINE:
        out += [replace(a, target=trace_id, kind=TRACE) for a in out if a.name[len(names.EVALUATION_NAME_PREFIX) :] in names.EMITTED_PROXY_METRICS and "score" in a.result]
    return out


def _figure_result(metric: str, value: Any, how: str) -> dict[str, Any]:
    if metric == names.METRIC_CITED_POSITIONS:  # a list: the prompt positions of the cited chunks
        positions = ", ".join(str(p) for p in value)
        return {"label": positions or NO_CITATIONS, "explanation": f"cited prompt positions: {positions or 'none'}{how}"}
    result: dict[str, Any] = {"score": float(value), "explanation": f"{metric} = {_number(value)}{how}"}
    label = _figure_label(metric, value)
    if label is not None:
        result["label"] = label
    return result


def _figure_label(metric: str, value: Any) -> str | None:
    if metric in names.EMITTED_PROXY_METRICS:
        return proxy_label(float(value))  # as on the evaluation events
    if metric == names.METRIC_CITED:
        return NO_CITATIONS if value == 0 else "cited"
    if metric in (names.METRIC_INVALID_CITATIONS, names.METRIC_UNKNOWN_CITATIONS):
        return HALLUCINATED_CITATION if value else "none"
    if metric == names.METRIC_OUT_OF_CONTEXT_CITATIONS:
        return CITED_OUTSIDE_CONTEXT if value else "none"
    if metric == names.METRIC_DUPLICATE_CHUNKS:
        return "duplicates" if value else "none"
    if metric == names.METRIC_RETRIEVED and value == 0:
        return "nothing retrieved"
    if metric == names.METRIC_IN_CONTEXT and value == 0:
        return "empty context"
    return None


def _number(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


# --- judges' scores (record_score) ------------------------------------------------------------
def score_annotations(run_span_id: str, events: Sequence[Mapping[str, Any]]) -> list[Annotation]:
    """An ``evaluation {name}`` span's ``gen_ai.evaluation.result`` events as annotations on the
    run's root (its parent), by the scorer's kind (LLM, HUMAN or CODE); the explanation only when
    the content policy let it onto the event."""
    out = []
    for event in events:
        name, value = event.get(names.GEN_AI_EVALUATION_NAME), event.get(names.GEN_AI_EVALUATION_SCORE_VALUE)
        if not isinstance(name, str) or not isinstance(value, (int, float)):
            continue
        result: dict[str, Any] = {"score": float(value)}
        for key, attribute in (("label", names.GEN_AI_EVALUATION_SCORE_LABEL), ("explanation", names.GEN_AI_EVALUATION_EXPLANATION)):
            if isinstance(event.get(attribute), str):
                result[key] = event[attribute]
        scorer = str(event.get(names.RAG_EVALUATION_SCORER) or names.SCORER_CODE).upper()
        out.append(Annotation(run_span_id, name, result, {"source": "ragtrace.record_score"}, annotator=scorer))
    return out


# --- documents -----------------------------------------------------------------------------
@dataclass(slots=True)
class _Pipeline:
    """The spans of one trace that document marks are read from, as they end."""

    documents: list[tuple[str, str, Sequence[str]]] = field(default_factory=list)  # (span id, stage, ids in document order)
    contexts: dict[str, Mapping[str, Any]] = field(default_factory=dict)  # assemble span id -> attributes, in end order
    answers: list[Mapping[str, Any]] = field(default_factory=list)  # answer generations' attributes


class DocumentMarks:
    """Collects the spans of each trace and, when its pipeline root ends, gives the document
    annotations of every retriever and reranker document in it."""

    def __init__(self, max_pending: int = 1024) -> None:
        self.max_pending = max_pending
        self.given_up = 0  # traces whose root never came within max_pending newer traces
        self._pending: OrderedDict[int, _Pipeline] = OrderedDict()

    def add(self, trace_id: int, span_id: str, attributes: Mapping[str, Any]) -> list[Annotation]:
        stage = attributes.get(names.RAG_STAGE)
        if stage == names.STAGE_PIPELINE:
            pipeline = self._pending.pop(trace_id, None)
            return _marks(pipeline) if pipeline is not None else []
        if stage not in (names.STAGE_RETRIEVE, names.STAGE_RERANK, names.STAGE_ASSEMBLE, names.STAGE_GENERATE):
            return []
        pipeline = self._pending.get(trace_id)
        if pipeline is None:
            pipeline = self._pending[trace_id] = _Pipeline()
            while len(self._pending) > self.max_pending:
                self._pending.popitem(last=False)
                self.given_up += 1
        if stage == names.STAGE_RETRIEVE:
            pipeline.documents.append((span_id, stage, attributes.get(names.RAG_RETRIEVAL_CHUNK_IDS) or ()))
        elif stage == names.STAGE_RERANK:
            pipeline.documents.append((span_id, stage, attributes.get(names.RAG_RERANK_OUTPUT_IDS) or ()))
        elif stage == names.STAGE_ASSEMBLE:
            pipeline.contexts[span_id] = _only(attributes, _CONTEXT_KEYS)
        elif attributes.get(names.RAG_GENERATION_ROLE, names.ROLE_ANSWER) in names.ANSWER_ROLES:
            pipeline.answers.append(_only(attributes, _ANSWER_KEYS))
        return []


# what a waiting trace keeps of its spans: not their attributes whole (the prompt, the answer)
_CONTEXT_KEYS = (
    names.RAG_CONTEXT_CHUNK_IDS,
    names.RAG_CONTEXT_POSITIONS,
    names.RAG_CONTEXT_LABELS,
    names.RAG_CONTEXT_DROPPED_IDS,
    names.RAG_CONTEXT_DROPPED_REASONS,
)
_ANSWER_KEYS = (names.RAG_GENERATION_CONTEXT_SPAN_ID, names.RAG_CITATION_IDS, names.RAG_CITATION_OUT_OF_CONTEXT_IDS, names.RAG_CITATION_STATUS)


def _only(attributes: Mapping[str, Any], keys: tuple[str, ...]) -> dict[str, Any]:
    return {k: attributes[k] for k in keys if k in attributes}


@dataclass(frozen=True, slots=True)
class _Placed:
    position: int
    label: str | None


def _marks(pipeline: _Pipeline) -> list[Annotation]:
    context = _answer_context(pipeline)
    placed: dict[str, _Placed] = {}
    dropped: dict[str, str] = {}
    if context is not None:
        labels = context.get(names.RAG_CONTEXT_LABELS) or ()
        for index, (chunk_id, position) in enumerate(zip(context.get(names.RAG_CONTEXT_CHUNK_IDS) or (), context.get(names.RAG_CONTEXT_POSITIONS) or ())):
            placed.setdefault(chunk_id, _Placed(position, labels[index] if index < len(labels) else None))
        dropped = dict(zip(context.get(names.RAG_CONTEXT_DROPPED_IDS) or (), context.get(names.RAG_CONTEXT_DROPPED_REASONS) or ()))
    cited, citation_status = _cited(pipeline.answers)
    outside = {i for answer in pipeline.answers for i in answer.get(names.RAG_CITATION_OUT_OF_CONTEXT_IDS) or ()}
    total = len(context.get(names.RAG_CONTEXT_CHUNK_IDS) or ()) if context is not None else 0
    out = []
    for span_id, stage, ids in pipeline.documents:
        for position, chunk_id in enumerate(ids):
            metadata: dict[str, Any] = {"source": "ragtrace", "chunk_id": chunk_id, "stage": stage}
            where = placed.get(chunk_id)
            if where is not None:  # for filters and exports: where it sat in the prompt, without parsing text
                metadata.update(prompt_position=where.position, citation_label=where.label)
            out.append(Annotation(span_id, IN_PROMPT, _in_prompt(chunk_id, context is not None, placed, dropped, total), metadata, position, DOCUMENT))
            if cited is not None or citation_status is not None:
                out.append(Annotation(span_id, CITED, _cited_result(chunk_id, cited, citation_status, placed, outside), metadata, position, DOCUMENT))
    return out


def _answer_context(pipeline: _Pipeline) -> Mapping[str, Any] | None:
    """The assemble span the answer was shown (``rag.generation.context_span_id``), else the last one."""
    for answer in reversed(pipeline.answers):
        linked = pipeline.contexts.get(answer.get(names.RAG_GENERATION_CONTEXT_SPAN_ID))
        if linked is not None:
            return linked
    return next(reversed(pipeline.contexts.values()), None)


def _cited(answers: list[Mapping[str, Any]]) -> tuple[set[str] | None, str | None]:
    """The ids the answers cited (None: no answer was scored) and why citations were not scored."""
    cited: set[str] | None = None
    status = None
    for answer in answers:
        ids = answer.get(names.RAG_CITATION_IDS)
        if ids is not None:
            cited = (cited or set()) | set(ids)
        status = status or answer.get(names.RAG_CITATION_STATUS)
    return cited, status if cited is None else None


def _in_prompt(chunk_id: str, known: bool, placed: dict[str, _Placed], dropped: dict[str, str], total: int) -> dict[str, Any]:
    if not known:
        return {"label": NOT_MEASURABLE, "explanation": "not measurable: no context assembly was recorded"}
    where = placed.get(chunk_id)
    if where is not None:
        as_label = f" as [{where.label}]" if where.label else ""
        return {"score": 1.0, "label": "placed", "explanation": f"in the prompt at position {where.position} of {total}{as_label}"}
    reason = dropped.get(chunk_id, names.DROP_NOT_ADDED)
    return {"score": 0.0, "label": reason, "explanation": f"not in the prompt: {reason}"}


def _cited_result(chunk_id: str, cited: set[str] | None, status: str | None, placed: dict[str, _Placed], outside: set[str]) -> dict[str, Any]:
    if cited is None:
        return {"label": NOT_MEASURABLE, "explanation": f"not measurable: {status}"}
    if chunk_id not in cited and chunk_id in outside:  # score 0: not a valid citation, as the figures count it
        return {"score": 0.0, "label": CITED_NOT_IN_PROMPT, "explanation": "the answer cited it, but it was not in the prompt (an out-of-context citation)"}
    if chunk_id not in cited:
        return {"score": 0.0, "label": "not cited", "explanation": "the answer did not cite it"}
    where = placed.get(chunk_id)
    as_label = f" as [{where.label}]" if where is not None and where.label else ""
    return {"score": 1.0, "label": "cited", "explanation": f"the answer cited it{as_label}"}
