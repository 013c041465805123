"""A real trace backend for tests: Arize Phoenix, installed in its own cached venv and run on loopback.

Standard library only, so it can be imported from the project's test venv (which has no httpx/requests).

Typical use::

    from .phoenix import PhoenixServer, ensure_phoenix_venv   # from tests/backend/*; or backend.phoenix

    with PhoenixServer(ensure_phoenix_venv()) as server:
        exporter = OTLPSpanExporter(endpoint=server.otlp_http_endpoint)
        ...  # export spans whose resource has openinference.project.name = "my-project"
        spans = server.wait_for_spans("my-project", 2)

Phoenix routes spans to a project by the *resource* attribute ``openinference.project.name``
(``PROJECT_NAME_ATTRIBUTE``); spans without it land in project ``default``. Use a unique project per test.

Shape of one span from ``get_spans`` (Phoenix REST ``/v1/projects/{p}/spans``)::

    {"name", "context": {"trace_id", "span_id"}, "parent_id", "span_kind", "start_time", "end_time",
     "status_code", "status_message", "attributes": {flat dotted keys}, "events": [...]}

``openinference.span.kind`` is moved into ``span_kind`` (``UNKNOWN`` if absent) and is not in ``attributes``
there; ``get_spans_otlp`` returns OTLP-JSON-shaped spans that keep every attribute.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import fcntl
import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Sequence, Union

__all__ = [
    "PHOENIX_REQUIREMENT",
    "PROJECT_NAME_ATTRIBUTE",
    "PhoenixError",
    "PhoenixClient",
    "PhoenixServer",
    "SpansTimeout",
    "ensure_phoenix_venv",
    "otlp_attributes",
]

#: The one Phoenix release tested here (see shared/reference/real-parts.md, section 1).
PHOENIX_REQUIREMENT = "arize-phoenix==20.26.1"
#: Resource attribute that selects (or creates) the Phoenix project a span is stored in.
PROJECT_NAME_ATTRIBUTE = "openinference.project.name"

REPO_ROOT = Path(__file__).resolve().parents[2]
DEFAULT_VENV = REPO_ROOT / ".venv-phoenix"
_STAMP_NAME = ".ragtrace-phoenix-stamp"
_INSTALL_LOG_NAME = ".ragtrace-phoenix-install.log"
# Phoenix declares Requires-Python >=3.11,<3.15.
_PY_MIN, _PY_MAX = (3, 11), (3, 14)


class PhoenixError(RuntimeError):
    """Installing, starting or talking to Phoenix failed; the message says why (with a log tail)."""


class SpansTimeout(AssertionError):
    """``wait_for_spans`` gave up. An AssertionError so pytest reports it as a plain test failure."""


# --------------------------------------------------------------------------------------------------
# The cached venv
# --------------------------------------------------------------------------------------------------


def _tail(path: Path, limit: int = 4000) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        return f"<no log at {path}: {exc}>"
    text = data[-limit:].decode("utf-8", "replace")
    return ("...\n" if len(data) > limit else "") + text


def _python_ok(version: tuple[int, int]) -> bool:
    return _PY_MIN <= version <= _PY_MAX


def _base_python() -> str:
    """The interpreter to build the venv from: the one running the tests when Phoenix supports it."""
    if _python_ok(sys.version_info[:2]):
        # Inside a venv, sys.executable is the venv's python; `-m venv` from there still builds on the
        # base interpreter (venv uses sys._base_executable), so this is fine either way.
        return sys.executable
    for minor in range(_PY_MAX[1], _PY_MIN[1] - 1, -1):
        found = shutil.which(f"python3.{minor}")
        if found:
            return found
    raise PhoenixError(
        f"{PHOENIX_REQUIREMENT} needs Python {_PY_MIN[0]}.{_PY_MIN[1]}..{_PY_MAX[0]}.{_PY_MAX[1]}; the tests run on "
        f"{sys.version.split()[0]} and no python3.11..python3.14 is on PATH"
    )


def _stamp_text(python: str) -> str:
    if python == sys.executable:
        return f"{PHOENIX_REQUIREMENT}\npython {'%d.%d.%d' % sys.version_info[:3]}\n"
    out = subprocess.run(
        [python, "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()
    return f"{PHOENIX_REQUIREMENT}\npython {out}\n"


def _lock_path(venv: Path) -> Path:
    key = hashlib.sha256(str(venv).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"ragtrace-phoenix-venv-{key}.lock"


@contextlib.contextmanager
def _install_lock(venv: Path):
    """An inter-process lock, so two pytest runs in one checkout don't build the same venv at once.

    The lock file lives in the temp dir (keyed by the venv path), not in the venv that may be wiped,
    and not in the repo, where it would be an untracked file.
    """
    with open(_lock_path(venv), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run_logged(cmd: Sequence[str], log: Path, what: str, timeout: float, env: Mapping[str, str]) -> None:
    with open(log, "ab") as out:
        out.write(f"\n$ {' '.join(cmd)}\n".encode())
        out.flush()
        try:
            proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  timeout=timeout, env=dict(env))
        except subprocess.TimeoutExpired:
            raise PhoenixError(f"{what} took more than {timeout:.0f} s; log {log}:\n{_tail(log)}") from None
    if proc.returncode != 0:
        raise PhoenixError(f"{what} failed with exit code {proc.returncode}; log {log}:\n{_tail(log)}")


def ensure_phoenix_venv(path: Path = DEFAULT_VENV, *, timeout: float = 900.0) -> Path:
    """Create (once) a separate venv holding ``PHOENIX_REQUIREMENT`` and return its ``phoenix`` executable.

    The venv is reused while its stamp file matches the pinned requirement and the base Python version.
    The stamp is written last, so a half-finished install (killed, failed, out of disk) has no stamp
    and is wiped and redone on the next call. Concurrent callers are serialised by a file lock.
    Raises PhoenixError (with the tail of the install log) if anything fails.
    """
    venv = Path(path).absolute()
    phoenix = venv / "bin" / "phoenix"
    stamp = venv / _STAMP_NAME
    python = _base_python()
    want = _stamp_text(python)

    def ready() -> bool:
        try:
            return stamp.read_text() == want and os.access(phoenix, os.X_OK)
        except OSError:
            return False

    if ready():
        return phoenix
    with _install_lock(venv):
        if ready():  # another process finished it while we waited
            return phoenix
        if venv.exists():
            if any(venv.iterdir()) and not (venv / "pyvenv.cfg").exists():
                raise PhoenixError(f"{venv} exists and is not a venv; refusing to delete it")
            shutil.rmtree(venv)
        venv.parent.mkdir(parents=True, exist_ok=True)
        # The log is kept in the temp dir while building (a failed build leaves no untracked file in the
        # repo) and copied into the venv once it is complete.
        log = _lock_path(venv).with_suffix(".install.log")
        log.write_text(f"building {venv} for {want}")
        env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH")}
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        try:
            _run_logged([python, "-m", "venv", str(venv)], log, "creating the Phoenix venv", 120, env)
            vpy = str(venv / "bin" / "python")
            _run_logged([vpy, "-m", "pip", "install", "--quiet", "--no-input", PHOENIX_REQUIREMENT],
                        log, f"pip install {PHOENIX_REQUIREMENT}", timeout, env)
            check = "import importlib.metadata as m; print(m.version('arize-phoenix'))"
            got = subprocess.run([vpy, "-c", check], capture_output=True, text=True, env=env).stdout.strip()
            want_version = PHOENIX_REQUIREMENT.split("==", 1)[1]
            if got != want_version or not os.access(phoenix, os.X_OK):
                raise PhoenixError(f"after install, arize-phoenix is {got!r} (want {want_version}) "
                                   f"and {phoenix} executable={os.access(phoenix, os.X_OK)}")
            shutil.copyfile(log, venv / _INSTALL_LOG_NAME)
            tmp = stamp.with_suffix(".tmp")
            tmp.write_text(want)
            os.replace(tmp, stamp)
        except BaseException:
            # Leave no stamp: the next call starts over. The log stays in the temp dir for a look.
            with contextlib.suppress(OSError):
                stamp.unlink()
            raise
    return phoenix


# --------------------------------------------------------------------------------------------------
# REST client (urllib)
# --------------------------------------------------------------------------------------------------

# Never send loopback requests through an HTTP(S)_PROXY from the environment.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))

Predicate = Callable[[list], Any]


def otlp_attributes(otlp_span: Mapping[str, Any]) -> dict[str, Any]:
    """Flatten an OTLP-JSON span's ``attributes`` list into ``{key: python value}``.

    Phoenix's ``/spans/otlpv1`` uses snake_case value keys with every other kind set to null
    (``{"string_value": "x", "int_value": null, ...}``); camelCase OTLP/JSON (``stringValue``, int64 as
    a string) is accepted too.
    """

    def pick(v: Mapping[str, Any], snake: str, camel: str) -> Any:
        got = v.get(snake)
        return v.get(camel) if got is None else got

    def value(v: Mapping[str, Any] | None) -> Any:
        v = v or {}
        if (x := pick(v, "string_value", "stringValue")) is not None:
            return x
        if (x := pick(v, "bool_value", "boolValue")) is not None:
            return bool(x)
        if (x := pick(v, "int_value", "intValue")) is not None:
            return int(x)
        if (x := pick(v, "double_value", "doubleValue")) is not None:
            return float(x)
        if (x := pick(v, "array_value", "arrayValue")) is not None:
            return [value(item) for item in x.get("values") or []]
        if (x := pick(v, "kvlist_value", "kvlistValue")) is not None:
            return {kv["key"]: value(kv.get("value")) for kv in x.get("values") or []}
        return pick(v, "bytes_value", "bytesValue")

    return {kv["key"]: value(kv.get("value")) for kv in otlp_span.get("attributes") or []}


class PhoenixClient:
    """Reads spans back from a Phoenix server over its REST API."""

    def __init__(self, base_url: str, *, timeout: float = 10.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout

    # -- plumbing -----------------------------------------------------------------------------------

    def request(self, method: str, path: str, params: Iterable[tuple[str, Any]] = (), body: Any = None) -> Any:
        """One JSON request; returns the decoded body (None if empty). Raises PhoenixError on HTTP errors."""
        url = self.base_url + path
        query = urllib.parse.urlencode([(k, v) for k, v in params if v is not None])
        if query:
            url += "?" + query
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(url, data=data, method=method,
                                     headers={"Accept": "application/json", "Content-Type": "application/json"})
        try:
            with _OPENER.open(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read()[:2000].decode("utf-8", "replace")
            err = PhoenixError(f"{method} {url} -> HTTP {exc.code}: {detail}")
            err.status = exc.code  # type: ignore[attr-defined]
            raise err from None
        return json.loads(raw) if raw.strip() else None

    @staticmethod
    def _project_path(project: str) -> str:
        if not project or any(c in project for c in "/?#"):
            raise ValueError(f"Phoenix project names used in REST paths can't be empty or contain / ? #: {project!r}")
        return "/v1/projects/" + urllib.parse.quote(project, safe="")

    @staticmethod
    def _filter_params(filters: Mapping[str, Any]) -> list[tuple[str, Any]]:
        params: list[tuple[str, Any]] = []
        for key, val in filters.items():
            if val is None:
                continue
            if key in ("attribute", "attributes") and isinstance(val, Mapping):
                # attributes={"ragtrace.run_id": "abc", "n": 3} -> attribute=ragtrace.run_id:"abc"&attribute=n:3
                # Phoenix JSON-parses the value, so a str is JSON-quoted to stay a str ("12345" is not 12345).
                params += [("attribute", f"{k}:{json.dumps(v)}") for k, v in val.items()]
                continue
            if key == "attributes":
                key = "attribute"
            if isinstance(val, (list, tuple, set, frozenset)):
                params += [(key, v) for v in val]
            else:
                params.append((key, val))
        return params

    # -- API ----------------------------------------------------------------------------------------

    def healthy(self) -> bool:
        try:
            with _OPENER.open(self.base_url + "/healthz", timeout=2) as resp:
                return resp.status == 200
        except (OSError, urllib.error.URLError):
            return False

    def list_projects(self) -> list[dict]:
        out: list[dict] = []
        cursor = None
        while True:
            page = self.request("GET", "/v1/projects", [("cursor", cursor)])
            out += page.get("data", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def get_spans(self, project: str, *, missing_ok: bool = False, page_size: int = 1000,
                  **filters: Any) -> list[dict]:
        """All spans of ``project`` matching the REST filters, following ``next_cursor`` pagination.

        Filters are passed through as query parameters, for example ``trace_id=``, ``name=``,
        ``span_kind=``, ``start_time=``/``end_time=`` (ISO 8601), and ``attribute="key:value"``
        (Phoenix JSON-parses the value; a list repeats the parameter and ANDs; ``attributes={"key": value}``
        is a shortcut that JSON-encodes each value, so str stays str), ``parent_id="null"`` for roots,
        ``status_code=``, ``sort="id"|"start_time"``, ``order="desc"|"asc"`` (Phoenix's default is
        newest first, ``desc``). ``limit`` is the
        page size (default ``page_size``); all pages are fetched. With ``missing_ok=True`` an unknown
        project (HTTP 404, e.g. before its first span arrived) gives ``[]`` instead of an error.
        """
        filters.setdefault("limit", page_size)
        params = self._filter_params(filters)
        out: list[dict] = []
        cursor = None
        while True:
            try:
                page = self.request("GET", self._project_path(project) + "/spans", params + [("cursor", cursor)])
            except PhoenixError as exc:
                if missing_ok and getattr(exc, "status", None) == 404 and not out:
                    return []
                raise
            out += page.get("data", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def get_spans_otlp(self, project: str, trace_id: str | None = None, *, missing_ok: bool = False,
                       page_size: int = 1000, **filters: Any) -> list[dict]:
        """Spans in OTLP JSON shape (``/v1/projects/{p}/spans/otlpv1``), every attribute kept, including
        ``openinference.span.kind``. Use ``otlp_attributes(span)`` for a flat ``{key: value}`` dict."""
        filters.setdefault("limit", page_size)
        filters["trace_id"] = trace_id
        params = self._filter_params(filters)
        out: list[dict] = []
        cursor = None
        while True:
            try:
                page = self.request("GET", self._project_path(project) + "/spans/otlpv1",
                                    params + [("cursor", cursor)])
            except PhoenixError as exc:
                if missing_ok and getattr(exc, "status", None) == 404 and not out:
                    return []
                raise
            out += page.get("data", [])
            cursor = page.get("next_cursor")
            if not cursor:
                return out

    def wait_for_spans(self, project: str, predicate_or_count: Union[int, Predicate], timeout: float = 15.0,
                       *, interval: float = 0.05, otlp: bool = False, **filters: Any) -> list[dict]:
        """Poll ``get_spans`` (or ``get_spans_otlp`` with ``otlp=True``) every ``interval`` s until done.

        ``predicate_or_count`` is either an int (done when at least that many spans match the filters) or a
        callable that gets the list of spans and returns truthy when done. Returns the last list fetched.
        Raises SpansTimeout (an AssertionError) after ``timeout`` s, saying what was seen.
        """
        if isinstance(predicate_or_count, bool) or not (
                isinstance(predicate_or_count, int) or callable(predicate_or_count)):
            raise TypeError("predicate_or_count must be an int or a callable taking the list of spans")
        if isinstance(predicate_or_count, int):
            want = predicate_or_count
            done: Predicate = lambda spans: len(spans) >= want  # noqa: E731
            what = f"at least {want} span(s)"
        else:
            done = predicate_or_count
            what = f"predicate {getattr(done, '__name__', done)!r}"
        fetch = self.get_spans_otlp if otlp else self.get_spans
        deadline = time.monotonic() + timeout
        spans: list[dict] = []
        while True:
            spans = fetch(project, missing_ok=True, **filters)
            if done(spans):
                return spans
            if time.monotonic() >= deadline:
                names = sorted(str(s.get("name")) for s in spans)
                raise SpansTimeout(f"waited {timeout} s for {what} in project {project!r} (filters {filters}); "
                                   f"last saw {len(spans)}: {names[:50]}")
            time.sleep(interval)

    def delete_traces(self, project: str) -> None:
        """Drop every trace of ``project`` (``DELETE /v1/projects/{p}/traces``)."""
        self.request("DELETE", self._project_path(project) + "/traces")


# --------------------------------------------------------------------------------------------------
# The server process
# --------------------------------------------------------------------------------------------------


def _free_port(host: str, family: int = socket.AF_INET) -> int:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def _port_free_everywhere(port: int) -> bool:
    """True if ``port`` can be bound on all interfaces, IPv4 and (if present) IPv6, as Phoenix's gRPC does."""
    for family, host in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            with socket.socket(family, socket.SOCK_STREAM) as s:
                if family == socket.AF_INET6:
                    with contextlib.suppress(OSError):
                        s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                s.bind((host, port))
        except OSError as exc:
            if family == socket.AF_INET6 and exc.errno in (errno.EAFNOSUPPORT, errno.EADDRNOTAVAIL):
                continue  # no IPv6 here
            return False
    return True


def _pick_ports() -> tuple[int, int]:
    http = _free_port("127.0.0.1")
    for _ in range(50):
        grpc = _free_port("0.0.0.0")
        if grpc != http and _port_free_everywhere(grpc):
            return http, grpc
    raise PhoenixError("could not find a free port for Phoenix's gRPC receiver")


def _die_with_parent() -> None:  # runs in the child between fork and exec
    # Linux: SIGKILL the server if the thread that started it dies (e.g. pytest killed with -9).
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class PhoenixServer:
    """``phoenix serve`` on loopback with in-memory storage, for the duration of a ``with`` block.

    ::

        with PhoenixServer(ensure_phoenix_venv()) as server:
            server.otlp_http_endpoint   # http://127.0.0.1:PORT/v1/traces
            server.get_spans("proj", trace_id=...)

    HTTP (UI, REST, OTLP/HTTP) binds 127.0.0.1 on a random free port. Phoenix always binds its OTLP/gRPC
    receiver on all interfaces (``[::]``), so a random free port is chosen for it too. All output goes to
    ``log_path`` in ``workdir`` (a fresh temp dir unless given; a temp dir we made is removed on a clean
    stop and kept, with its log, when starting failed). ``stop()`` is idempotent and also runs at interpreter exit.
    """

    def __init__(self, phoenix: Path | str | None = None, *, workdir: Path | str | None = None,
                 startup_timeout: float = 90.0, stop_timeout: float = 10.0,
                 extra_env: Mapping[str, str] | None = None) -> None:
        self.phoenix = Path(phoenix) if phoenix is not None else DEFAULT_VENV / "bin" / "phoenix"
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else None
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.extra_env = dict(extra_env or {})
        self.http_port: int | None = None
        self.grpc_port: int | None = None
        self.proc: subprocess.Popen | None = None
        self.ready_seconds: float | None = None
        self._client: PhoenixClient | None = None
        self._lock = threading.Lock()

    # -- addresses ----------------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        if self.http_port is None:
            raise PhoenixError("PhoenixServer is not started")
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def otlp_http_endpoint(self) -> str:
        return self.base_url + "/v1/traces"

    @property
    def otlp_grpc_endpoint(self) -> str:
        """For ``grpc OTLPSpanExporter(endpoint=..., insecure=True)``; prefer OTLP/HTTP in tests."""
        if self.grpc_port is None:
            raise PhoenixError("PhoenixServer is not started")
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def log_path(self) -> Path:
        if self.workdir is None:
            raise PhoenixError("PhoenixServer is not started")
        return self.workdir / "phoenix.log"

    @property
    def client(self) -> PhoenixClient:
        if self._client is None:
            self._client = PhoenixClient(self.base_url)
        return self._client

    # -- lifecycle ----------------------------------------------------------------------------------

    def start(self) -> "PhoenixServer":
        if self.proc is not None:
            raise PhoenixError("PhoenixServer already started")
        if not os.access(self.phoenix, os.X_OK):
            raise PhoenixError(f"no phoenix executable at {self.phoenix} (run ensure_phoenix_venv() first)")
        if self.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="ragtrace-phoenix-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        last_error: PhoenixError | None = None
        for _attempt in range(3):  # a port picked free may be taken before Phoenix binds it: retry then
            try:
                self._start_once()
                return self
            except PhoenixError as exc:
                last_error = exc
                if "address already in use" not in str(exc).lower():
                    break
        assert last_error is not None
        raise last_error

    def _start_once(self) -> None:
        assert self.workdir is not None
        self.http_port, self.grpc_port = _pick_ports()
        self._client = None
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PHOENIX_", "OTEL_")) and k not in ("VIRTUAL_ENV", "PYTHONHOME", "PYTHONPATH")}
        env.update({
            "PHOENIX_WORKING_DIR": str(self.workdir),
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(self.http_port),
            "PHOENIX_GRPC_PORT": str(self.grpc_port),
            "PHOENIX_SQL_DATABASE_URL": "sqlite:///:memory:",
            "PHOENIX_ALLOW_EXTERNAL_RESOURCES": "false",
            "PHOENIX_TELEMETRY_ENABLED": "false",
            # Not needed for a trace store; the assistant would otherwise offer server-side bash.
            "PHOENIX_DISABLE_AGENT_ASSISTANT": "true",
            "PHOENIX_AGENTS_DISABLE_BASH": "true",
            "HOME": str(self.workdir),  # nothing of Phoenix's lands in the real ~ (e.g. ~/.phoenix)
        })
        env.update(self.extra_env)
        in_main_thread = threading.current_thread() is threading.main_thread()
        t0 = time.monotonic()
        with open(self.log_path, "ab") as log:
            log.write(f"\n--- starting {self.phoenix} serve: http {self.http_port}, grpc {self.grpc_port}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                [str(self.phoenix), "serve"], env=env, cwd=str(self.workdir),
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,  # its own process group, so stop() reaches any children too
                preexec_fn=_die_with_parent if in_main_thread and sys.platform == "linux" else None,
            )
        _LIVE.add(self)
        try:
            self._wait_ready(t0)
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - t0

    def _wait_ready(self, t0: float) -> None:
        assert self.proc is not None
        client = PhoenixClient(self.base_url)
        deadline = t0 + self.startup_timeout
        while True:
            code = self.proc.poll()
            if code is not None:
                raise PhoenixError(f"phoenix serve exited with code {code} before /healthz answered; "
                                   f"log {self.log_path}:\n{_tail(self.log_path)}")
            if client.healthy():
                return
            if time.monotonic() >= deadline:
                raise PhoenixError(f"phoenix serve not healthy after {self.startup_timeout:.0f} s; "
                                   f"log {self.log_path}:\n{_tail(self.log_path)}")
            time.sleep(0.1)

    def stop(self) -> None:
        """SIGTERM the server's process group, SIGKILL it after ``stop_timeout`` s. Safe to call twice."""
        with self._lock:
            proc, self.proc = self.proc, None
            _LIVE.discard(self)
            if proc is None:
                return
            if proc.poll() is None:
                self._signal(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(self.stop_timeout)
                except subprocess.TimeoutExpired:
                    self._signal(proc.pid, signal.SIGKILL)
                    proc.wait(10)
            # Whatever the leader left behind in its group goes too.
            self._signal(proc.pid, signal.SIGKILL)

    @staticmethod
    def _signal(pid: int, sig: int) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, sig)  # start_new_session=True: the group id is the server's pid

    def cleanup_workdir(self) -> None:
        if self._own_workdir and self.workdir is not None and self.proc is None:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self) -> "PhoenixServer":
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None or not issubclass(exc_type, PhoenixError):
            self.cleanup_workdir()

    # -- queries (see PhoenixClient) ----------------------------------------------------------------

    def get_spans(self, project: str, **filters: Any) -> list[dict]:
        return self.client.get_spans(project, **filters)

    def get_spans_otlp(self, project: str, trace_id: str | None = None, **filters: Any) -> list[dict]:
        return self.client.get_spans_otlp(project, trace_id, **filters)

    def wait_for_spans(self, project: str, predicate_or_count: Union[int, Predicate], timeout: float = 15.0,
                       **kwargs: Any) -> list[dict]:
        return self.client.wait_for_spans(project, predicate_or_count, timeout, **kwargs)

    def delete_traces(self, project: str) -> None:
        self.client.delete_traces(project)

    def list_projects(self) -> list[dict]:
        return self.client.list_projects()


_LIVE: set[PhoenixServer] = set()


def _stop_all_at_exit() -> None:
    for server in list(_LIVE):
        with contextlib.suppress(Exception):
            server.stop()


atexit.register(_stop_all_at_exit)
