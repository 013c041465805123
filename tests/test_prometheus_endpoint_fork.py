"""The Prometheus endpoint under pre-fork servers: real ``os.fork`` and ``multiprocessing`` fork
pools, scraped over loopback. A hang fails by timeout instead of hanging the suite."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time

import pytest

import ragtrace
from ragtrace._internal.setup import config, prometheus_endpoint
from test_prometheus_endpoint import free_port, free_range, one_run, runs_total, scrape

TIMEOUT = 20


def in_forked_child(body, tmp_path) -> str:
    """Run ``body()`` in a child made by ``os.fork()``; its result (a str) comes back through a
    file. The child is killed, and the test fails, if it hasn't finished within TIMEOUT."""
    out = tmp_path / f"child-{time.monotonic_ns()}.txt"
    pid = os.fork()
    if pid == 0:  # the child: never back into pytest
        code = 1
        try:
            out.write_text(body())
            code = 0
        except BaseException as error:  # noqa: BLE001 - reported to the parent
            out.write_text(f"error: {error!r}")
        finally:
            os._exit(code)
    deadline = time.monotonic() + TIMEOUT
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail(f"the forked child hung for {TIMEOUT} s")
        time.sleep(0.05)
    assert os.waitstatus_to_exitcode(status) == 0, out.read_text() if out.exists() else "no output"
    return out.read_text()


def reconfigure(port: int) -> str:
    """What a worker does on start: configure its own endpoint, then none."""
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{port}")
    one_run("child")
    served = runs_total(port)
    ragtrace.configure()
    return f"{served}"


def test_a_forked_child_never_blocks_in_configure_on_the_inherited_endpoint(tmp_path):
    parent = free_port()
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{parent}")
    one_run()
    assert runs_total(parent) == 1.0  # the serving thread has been running requests
    assert in_forked_child(lambda: reconfigure(free_port()), tmp_path) == "1.0"
    assert in_forked_child(lambda: (ragtrace.configure(), "closed")[1], tmp_path) == "closed"
    # the children closed their copies of the socket only: the parent still serves, unchanged
    assert runs_total(parent) == 1.0


def test_a_forked_child_reconfigures_an_inherited_exporter_and_endpoint_without_blocking(tmp_path, global_provider_slot):
    """The span exporter's batch thread and the endpoint's server thread are both the parent's."""
    parent = free_port()
    ragtrace.configure(exporter=f"jsonl:{tmp_path / 'parent.jsonl'}", metrics=f"prometheus:127.0.0.1:{parent}")
    one_run()

    def child() -> str:
        provider = ragtrace.configure(exporter=f"jsonl:{tmp_path / 'child.jsonl'}", metrics=f"prometheus:127.0.0.1:{free_port()}")
        one_run("child")
        provider.force_flush()
        ragtrace.configure()
        return str(sum(1 for _ in open(tmp_path / "child.jsonl")))

    assert int(in_forked_child(child, tmp_path)) >= 1
    assert runs_total(parent) == 1.0


def test_a_fork_pool_worker_never_blocks_in_configure(tmp_path):
    parent = free_port()
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{parent}")
    one_run()
    runs_total(parent)
    with multiprocessing.get_context("fork").Pool(2) as pool:
        results = [pool.apply_async(reconfigure, (free_port(),)) for _ in range(2)]
        assert [r.get(timeout=TIMEOUT) for r in results] == ["1.0", "1.0"]
    assert runs_total(parent) == 1.0


def work(runs: int) -> tuple[int, int]:
    """A pool task: ``runs`` pipelines in this worker; its pid and the port it serves on."""
    for _ in range(runs):
        one_run("worker")
    return os.getpid(), prometheus_endpoint._current.port


def test_every_forked_worker_serves_its_own_port_of_the_range():
    """21 runs in a fork pool of 3: the parent takes the range's first port, each worker the next
    free one, and the scrapes of the range add up to every run (main: 1.0, the parent's only)."""
    base = free_range(4)
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{base}-{base + 3}")
    one_run("parent")
    with multiprocessing.get_context("fork").Pool(3) as pool:
        served = pool.map(work, [1] * 21, chunksize=1)
        ports = {pid: port for pid, port in served}
        assert len(set(ports.values())) == len(ports) and set(ports.values()) <= {base + 1, base + 2, base + 3}
        per_port = {port: runs_total(port) for port in set(ports.values())}
        for pid, port in ports.items():
            assert per_port[port] == sum(1 for p, _ in served if p == pid)
        assert sum(per_port.values()) == 21
        assert runs_total(base) == 1.0  # the parent's own run, counted once, on its own port
        assert 'rag_pipeline_version="worker"' not in scrape(base)


def test_a_worker_with_no_free_port_says_so_once_and_records_nothing(tmp_path, caplog):
    """One port: it is the parent's, so a forked worker can't serve. Its first record warns once,
    naming the range option; nothing is served for it."""
    port = free_port()
    ragtrace.configure(metrics=f"prometheus:127.0.0.1:{port}")

    def child() -> str:
        seen: list[str] = []
        handler = logging.Handler()
        handler.emit = lambda record: seen.append(record.getMessage())  # type: ignore[method-assign]
        logging.getLogger("ragtrace").addHandler(handler)
        for _ in range(3):
            one_run("child")
        return "\n".join(seen)

    warnings = in_forked_child(child, tmp_path).splitlines()
    assert len(warnings) == 1 and "can't serve its metrics" in warnings[0] and "FIRST-LAST" in warnings[0], warnings
    assert runs_total(port) == 0.0 and 'rag_pipeline_version="child"' not in scrape(port)


def test_a_child_forked_without_an_endpoint_keeps_its_configuration(tmp_path):
    ragtrace.configure(capture_content="redact")
    before = config.current()
    assert in_forked_child(lambda: str(config.current() is before), tmp_path) == "True"
