"""tools/system_packages.sh, the first thing ``make test`` runs: every branch, on a directory of
binaries the test owns (``SYSTEM_PACKAGES_BIN``) and with its own ``id``, ``apt-get`` and
``apt-cache`` first on PATH, which log their calls and "install" by creating the binaries. The
non-root branch also runs as a real unprivileged user (setpriv), with the real tools."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "system_packages.sh"
BINARIES = ["chromium", "chromedriver", "prometheus", "promtool"]
PACKAGES = "chromium chromium-driver prometheus"
NEEDS = f"install Debian's {PACKAGES} (as root: apt-get install {PACKAGES}), then run make test again"


class Machine:
    """A bin directory, a fake ``id`` saying who we are, and fake apt tools logging to ``calls``."""

    def __init__(self, root: Path, *, uid: int, apt: bool = True, known: bool = True, stale: bool = False) -> None:
        self.bin, self.tools, self.calls = root / "bin", root / "tools", root / "calls"
        self.bin.mkdir()
        self.tools.mkdir()
        self.calls.write_text("")
        self._tool("id", f'[ "$1" = -u ] && echo {uid}')
        if apt:
            # known: apt's lists name the packages (else only after an update); stale: the first
            # install fails as it does on outdated lists, until an update
            self._tool("apt-cache", f'[ {int(known)} = 1 ] || [ -e "{root}/updated" ]')
            creates = " ".join(f'"{self.bin}/{b}"' for b in BINARIES)
            self._tool(
                "apt-get",
                f'case "$1" in update) /usr/bin/touch "{root}/updated" ;; '
                f'install) [ {int(stale)} = 0 ] || [ -e "{root}/updated" ] || exit 100; '
                f"/usr/bin/touch {creates}; /bin/chmod +x {creates} ;; esac",
            )

    def _tool(self, name: str, body: str) -> None:
        path = self.tools / name
        path.write_text(f'#!/bin/sh\necho "{name} $*" >> "{self.calls}"\n{body}\n')
        path.chmod(0o755)

    def have(self, *names: str) -> None:
        for name in names:
            (self.bin / name).write_text("#!/bin/sh\n")
            (self.bin / name).chmod(0o755)

    def run(self) -> subprocess.CompletedProcess[str]:
        env = {"PATH": str(self.tools), "SYSTEM_PACKAGES_BIN": str(self.bin)}  # no other apt-get to find
        return subprocess.run(["/bin/sh", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=30)

    def apt_calls(self) -> list[str]:
        return [line for line in self.calls.read_text().splitlines() if not line.startswith("id ")]


def test_with_everything_installed_it_does_nothing(tmp_path):
    machine = Machine(tmp_path, uid=0)
    machine.have(*BINARIES)
    done = machine.run()
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    assert machine.apt_calls() == []


def test_as_root_it_installs_what_is_missing_without_an_update_apt_does_not_need(tmp_path):
    machine = Machine(tmp_path, uid=0)
    machine.have("chromium", "chromedriver")
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert done.stderr == "make test: installing prometheus (Debian packages, for the browser and Prometheus tests)\n"
    assert machine.apt_calls() == ["apt-cache show prometheus", "apt-get install -y -qq prometheus"]
    again = machine.run()  # idempotent: now nothing to do
    assert (again.returncode, again.stderr) == (0, "") and len(machine.apt_calls()) == 2


def test_on_a_fresh_machine_it_updates_apt_first(tmp_path):
    machine = Machine(tmp_path, uid=0, known=False)
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls() == ["apt-cache show chromium", "apt-get update -qq", f"apt-get install -y -qq {PACKAGES}"]
    assert all((machine.bin / b).exists() for b in BINARIES)


def test_on_stale_lists_it_updates_and_tries_once_more(tmp_path):
    machine = Machine(tmp_path, uid=0, stale=True)
    done = machine.run()
    assert done.returncode == 0, done.stderr
    assert machine.apt_calls()[-3:] == [f"apt-get install -y -qq {PACKAGES}", "apt-get update -qq", f"apt-get install -y -qq {PACKAGES}"]


@pytest.mark.parametrize(("uid", "apt"), [(1000, True), (0, False)], ids=["not-root", "no-apt-get"])
def test_where_it_cannot_install_it_stops_at_once_with_one_line(tmp_path, uid, apt):
    machine = Machine(tmp_path, uid=uid, apt=apt)
    machine.have("chromium", "promtool")
    done = machine.run()
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"make test needs chromedriver prometheus in {machine.bin}: install Debian's chromium-driver prometheus (as root: apt-get install chromium-driver prometheus), then run make test again\n"
    assert machine.apt_calls() == []


def test_as_a_real_unprivileged_user_it_stops_at_once_with_one_line(tmp_path):
    """The real id, apt-get and PATH; an empty directory of binaries, so all four are missing."""
    empty = tmp_path / "bin"
    empty.mkdir()
    command = ["/bin/sh", "-s"]  # the script on stdin: nobody may not be able to read the checkout
    if os.geteuid() == 0:  # as root (make test's usual case), become nobody for this run
        command = [shutil.which("setpriv") or "/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", *command]
    started = time.perf_counter()
    with SCRIPT.open() as script:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SYSTEM_PACKAGES_BIN": str(empty)}
        done = subprocess.run(command, stdin=script, env=env, capture_output=True, text=True, timeout=30)
    assert time.perf_counter() - started < 5  # at once: no apt, no network
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == f"make test needs {' '.join(BINARIES)} in {empty}: {NEEDS}\n"


def test_make_test_runs_it_before_anything_else_and_ci_runs_only_make_test():
    root = SCRIPT.parent.parent
    plan = subprocess.run(["make", "-n", "test", "VENV=/nonexistent-venv"], cwd=root, capture_output=True, text=True, timeout=30)
    first = plan.stdout.splitlines()[0]
    assert first == "tools/system_packages.sh", plan.stdout
    ci = [line for line in (root / ".ci" / "run").read_text().splitlines() if line and not line.startswith("#")]
    assert ci[-1] == "make test" and not any("apt-get" in line for line in ci)
