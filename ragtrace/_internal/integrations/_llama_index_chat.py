"""A chat engine's streamed turn (``stream_chat``/``astream_chat``): its pipeline root ends when
the engine's own writer is done, not when the engine call returns.

The engine returns a ``StreamingAgentChatResponse`` at once and starts a writer
(``write_response_to_history`` in a thread, ``awrite_response_to_history`` in a task) that drains
the model's stream into the response's queue, where the app reads it, and into the chat memory.
The model is called in that writer, whether the app reads or not; ragtrace reads nothing of the
response. The writer runs in a copy of the engine call's context, so its dispatcher span's parent
is the engine call: the root ends once the call has returned *and* its writer has finished, in
whichever order the two come (a fast model finishes before the call returns).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from ..stages.pipeline import RagPipeline
from ._common import Attached

STREAM_CHAT_METHODS = frozenset({"stream_chat", "astream_chat"})
WRITER_METHODS = frozenset({"write_response_to_history", "awrite_response_to_history"})


@dataclass(eq=False)
class Turn:
    """One streamed turn whose root is open: has the engine call returned, has its writer ended."""

    root: RagPipeline
    returned: bool = False
    written: bool = False
    error: BaseException | None = None  # the writer's (the model failed mid-stream)
    attached: Attached | None = None  # the root, current in the writer while it runs


class StreamedTurns:
    """The streamed turns in progress, by the dispatcher span id of their engine call."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.turns: dict[str, Turn] = {}
        self.writers: dict[str, str] = {}  # writer span id -> engine span id

    def __contains__(self, engine_id: str) -> bool:
        with self.lock:
            return engine_id in self.turns

    def started(self, engine_id: str, root: RagPipeline) -> None:
        with self.lock:
            self.turns[engine_id] = Turn(root)

    def returned(self, engine_id: str, response: Any) -> Turn | None:
        """The engine call returned ``response`` without error. The turn to end now (its writer is
        done, or there is none), or None while the writer, still running, is left to end it."""
        with self.lock:
            turn = self.turns.get(engine_id)
            if turn is None:
                return None
            turn.returned = True
            if turn.written or not _has_writer(response):
                return self.turns.pop(engine_id)
            return None

    def failed(self, engine_id: str) -> None:
        """The engine call raised: its root ends with the error, and no writer will end it."""
        with self.lock:
            self.turns.pop(engine_id, None)

    def writer_started(self, writer_id: str, parent_id: str | None) -> None:
        """A writer starts: the turn's root is current in it while it calls the model (in the
        engine call's context copy, ragtrace's current span fell back once the call returned)."""
        with self.lock:
            turn = self.turns.get(parent_id) if parent_id is not None else None
            if turn is None:
                return
            self.writers[writer_id] = parent_id  # type: ignore[assignment]
        turn.attached = Attached(turn.root, turn.root.state)

    def writer_ended(self, writer_id: str, error: BaseException | None) -> Turn | None:
        """A writer ended: its turn, to end now if the engine call has returned already."""
        with self.lock:
            engine_id = self.writers.pop(writer_id, None)
            turn = self.turns.get(engine_id) if engine_id is not None else None
            if turn is None:
                return None
            turn.written, turn.error = True, error
            ended = self.turns.pop(engine_id) if turn.returned else None  # type: ignore[arg-type]
        if turn.attached is not None:
            turn.attached.detach()
        return ended


def _has_writer(response: Any) -> bool:
    return getattr(response, "write_response_to_history_thread", None) is not None or getattr(response, "awrite_response_to_history_task", None) is not None
