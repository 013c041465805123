"""Run every ``bench/bench_*.py`` in turn, each in a fresh interpreter, and print their tables.

    python bench/run_all.py                    # all of them (what ``make bench`` runs)
    python bench/run_all.py overhead memory    # only those whose name contains a word given

One at a time, never in parallel: they time things, and the machine has 2 cores. Each child gets
``OPENBLAS_NUM_THREADS=1`` / ``OMP_NUM_THREADS=1`` and the interpreter running this script. A
summary follows the tables; the exit status is 1 when any benchmark missed a target or failed
(each benchmark exits 1 on a MISS).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str]) -> int:
    scripts = sorted(HERE.glob("bench_*.py"))
    if argv:
        scripts = [s for s in scripts if any(word in s.stem for word in argv)]
        if not scripts:
            print(f"no bench/bench_*.py matches {argv}", file=sys.stderr)
            return 2
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    results: list[tuple[str, int, float]] = []
    for script in scripts:
        title = f" {script.name} "
        print(f"\n{title:=^100}", flush=True)
        started = time.perf_counter()
        code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent, env=env)
        results.append((script.name, code, time.perf_counter() - started))
    print(f"\n{' summary ':=^100}")
    print(f"{'benchmark':<28} {'seconds':>8}  result")
    for name, code, seconds in results:
        outcome = "all targets met" if code == 0 else ("target missed (see its table)" if code == 1 else f"failed (exit {code})")
        print(f"{name:<28} {seconds:>8.1f}  {outcome}")
    return 0 if all(code == 0 for _, code, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
