"""Side-by-side timing for the integration benchmarks: each mode (plain, ragtrace, a peer's
instrumentor...) is switched on in turn and timed over the same calls, interleaved over rounds
with the order rotated, so the shared machine's noise falls on every mode alike."""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Sequence


def medians(modes: Sequence[str], switch: Callable[[str], None], call: Callable[[], object], *, calls: int, repeats: int, warmup: int) -> dict[str, float]:
    """Median over rounds of the wall time per call, per mode; ``switch(mode)`` turns a mode on."""
    rounds: dict[str, list[float]] = {mode: [] for mode in modes}
    for mode in modes:
        switch(mode)
        for _ in range(warmup):
            call()
    for repeat in range(repeats):
        for mode in list(modes[repeat % len(modes):]) + list(modes[: repeat % len(modes)]):
            switch(mode)
            gc.collect()
            started = time.perf_counter()
            for _ in range(calls):
                call()
            rounds[mode].append((time.perf_counter() - started) / calls)
    switch(modes[0])
    return {mode: statistics.median(values) for mode, values in rounds.items()}


def table(title: str, median: dict[str, float], *, plain: str = "plain", peer: str = "openinference") -> None:
    print(title)
    print(f"{'mode':<15}{'us/call':>10}{'added us':>10}{'x plain':>9}")
    for mode, value in median.items():
        print(f"{mode:<15}{value * 1e6:>10.0f}{(value - median[plain]) * 1e6:>10.0f}{value / median[plain]:>9.2f}")
    added = (median["ragtrace"] - median[plain]) / max(median[peer] - median[plain], 1e-12)
    print(f"ragtrace / {peer}: {median['ragtrace'] / median[peer]:.2f}x (added time {added:.2f}x)")
