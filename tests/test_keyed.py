"""The random-key warning: given once, in one line with the fix, exactly when an exported value
depends on the per-process key (an id-less chunk's digest id, redact or hash mode, ``ragtrace eval``
joining by ``rag.query.hash``, OpenAI vector-store ids: tests/integrations), and never for a
full-mode app whose chunks carry their own ids (docs/configuration.md)."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest

import ragtrace
from ragtrace._internal.core import keyed

FIX = "set RAGTRACE_HASH_KEY or configure(hash_key=...) to a secret your processes share"
WITH_IDS = [{"id": "kb-1", "content": "Refunds take 5 days."}, {"id": "kb-2", "content": "Shipping is free."}]
ID_LESS = ["Refunds take 5 days.", "Shipping is free."]


def warnings_of(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "hash key" in r.getMessage()]


def run_pipelines(spans, chunks: list, *, mode: str = "full", query: str | None = "How long do refunds take?", times: int = 2) -> None:
    ragtrace.configure(tracer_provider=spans.provider, capture_content=mode)
    for _ in range(times):
        with ragtrace.rag_pipeline("p", query=query):
            with ragtrace.retrieve() as r:
                r.record(chunks)
            with ragtrace.assemble() as a:
                a.place_all(chunks)


def test_full_mode_with_ids_exports_nothing_keyed_and_warns_not(spans, no_hash_key, caplog):
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        run_pipelines(spans, WITH_IDS)
    assert {spans_.attributes["rag.retrieval.chunk_ids"] for spans_ in spans.by_stage("retrieve")} == {("kb-1", "kb-2")}
    assert warnings_of(caplog) == []


@pytest.mark.parametrize(
    ("chunks", "mode", "query", "says"),
    [
        (ID_LESS, "full", None, "ids of id-less chunks differ between processes"),
        (WITH_IDS, "redact", "How long do refunds take?", "rag.query.hash, which joins redacted traces by query, differs between processes"),
        (WITH_IDS, "hash", None, "hash-mode content hashes differ between processes"),
        (ID_LESS, "redact", "How long do refunds take?", "differ"),
    ],
    ids=["id-less-full", "redact-query", "hash-mode", "id-less-redact"],
)
def test_a_value_that_depends_on_the_random_key_warns_once_in_one_line(spans, no_hash_key, caplog, chunks, mode, query, says):
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        run_pipelines(spans, chunks, mode=mode, query=query)
    (warning,) = warnings_of(caplog)  # once, over two pipelines and several keyed values
    assert says in warning and FIX in warning
    assert "\n" not in warning and len(warning) < 200


@pytest.mark.parametrize("mode", ["full", "redact", "hash"])
def test_a_configured_key_silences_it(spans, no_hash_key, caplog, mode):
    with caplog.at_level(logging.WARNING, logger="ragtrace"):
        ragtrace.configure(tracer_provider=spans.provider, capture_content=mode, hash_key="app secret")
        with ragtrace.rag_pipeline("p", query="How long do refunds take?"):
            with ragtrace.retrieve() as r:
                r.record(ID_LESS)
    assert spans.one("retrieve").attributes["rag.retrieval.chunk_ids"][0] == keyed.content_digest(ID_LESS[0])
    assert warnings_of(caplog) == []


def test_with_tracing_off_nothing_is_exported_and_nothing_warns(tmp_path):
    """No provider at all: ragtrace is inert, the id-less chunks' digests go nowhere."""
    script = tmp_path / "off.py"
    script.write_text(
        "import ragtrace\n"
        "with ragtrace.rag_pipeline('p', query='q'):\n"
        "    with ragtrace.retrieve() as r:\n"
        "        r.record(['Refunds take 5 days.'])\n"
        "    with ragtrace.assemble() as a:\n"
        "        a.place_all(['Refunds take 5 days.'])\n"
        "print('ok')\n"
    )
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(Path(ragtrace.__file__).parent.parent)}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr
    assert done.stderr == ""
