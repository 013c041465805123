"""`ragtrace report` and `ragtrace eval` on the traces the demo wrote.

``report`` scores every traced pipeline run from the exported spans alone (figures, worst runs,
aggregates). ``eval`` joins the runs to a golden set (``examples/golden.jsonl``: each demo question
with the corpus passages that answer it) and computes real recall@k, precision@k, MRR and nDCG,
which see what the online recall proxy can't: relevant passages that were never retrieved.

    make demo                                      # writes out/demo-traces.jsonl
    python examples/report_and_eval.py [TRACES]    # default: out/demo-traces.jsonl

The same from a shell: ``ragtrace report out/demo-traces.jsonl`` and
``ragtrace eval --golden examples/golden.jsonl out/demo-traces.jsonl`` (or ``python -m ragtrace ...``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden.jsonl"


def main() -> int:
    traces = sys.argv[1] if len(sys.argv) > 1 else "out/demo-traces.jsonl"
    if not Path(traces).is_file():
        print(f"{traces} not found: run `make demo` first", file=sys.stderr)
        return 2
    for command in (["report", traces], ["eval", "--golden", str(GOLDEN), traces]):
        print("$ ragtrace " + " ".join(command), flush=True)
        code = subprocess.call([sys.executable, "-m", "ragtrace", *command])
        print(flush=True)
        if code != 0:
            return code
    return 0


if __name__ == "__main__":
    sys.exit(main())
