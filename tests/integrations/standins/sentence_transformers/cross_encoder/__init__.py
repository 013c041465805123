"""A stand-in ``CrossEncoder`` with the contract of sentence-transformers 5.x's (``predict`` and
``rank``, same parameters and return shapes, ``rank`` scoring through ``self.predict``), whose
"model" is the count of the query's words found in the document instead of a transformer's
weights. Only its scores are made up; what ragtrace reads (arguments, the sorted
``[{"corpus_id", "score"(, "text")}]`` list cut to ``top_k``, a numpy array of scores) is the
real class's."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np


class CrossEncoder:
    def __init__(
        self,
        model_name_or_path: str | None = None,
        *,
        device: str | None = None,
        trust_remote_code: bool = False,
        num_labels: int | None = None,
        max_length: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.config = SimpleNamespace(_name_or_path=model_name_or_path, num_labels=num_labels or 1)
        self.calls: list[str] = []  # which methods ran, in order (rank runs predict)

    @property
    def num_labels(self) -> int:
        return self.config.num_labels

    @staticmethod
    def _score(query: str, document: str) -> float:
        words = set(document.lower().replace(".", " ").split())
        return float(sum(word in words for word in set(query.lower().split())))

    def predict(
        self,
        inputs: Any,
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        activation_fn: Any = None,
        apply_softmax: bool | None = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
        **kwargs: Any,
    ) -> Any:
        self.calls.append("predict")
        singular = isinstance(inputs, (list, tuple)) and len(inputs) > 0 and not isinstance(inputs[0], (list, tuple))
        pairs = [inputs] if singular else list(inputs)
        if self.num_labels > 1:
            scores = np.array([[self._score(q, d), -self._score(q, d)] for q, d in pairs], dtype=np.float32)
        else:
            scores = np.array([self._score(q, d) for q, d in pairs], dtype=np.float32)
        return scores[0] if singular else scores

    def rank(
        self,
        query: str,
        documents: list[str],
        top_k: int | None = None,
        return_documents: bool = False,
        prompt_name: str | None = None,
        prompt: str | None = None,
        batch_size: int = 32,
        show_progress_bar: bool | None = None,
        activation_fn: Any = None,
        apply_softmax: bool = False,
        convert_to_numpy: bool = True,
        convert_to_tensor: bool = False,
    ) -> list[dict[str, Any]]:
        if self.num_labels != 1:
            raise ValueError("rank() needs a one-label model")
        self.calls.append("rank")
        scores = self.predict([[query, document] for document in documents], batch_size=batch_size)
        best_first = sorted(range(len(documents)), key=lambda i: scores[i], reverse=True)[:top_k]
        return [{"corpus_id": i, "score": scores[i], **({"text": documents[i]} if return_documents else {})} for i in best_first]
