"""Subprocess side of the kill and load tests: one writer churning one agent's memory.

Run as ``python churn.py ROOT WRITER SEED OPS``, or as ``python churn.py serve
ROOT`` (below).  It opens the store at
``ROOT/.rotifer`` with ``sqlite:ROOT/memory.db`` or ``$ROTIFER_CHURN_URL``
(a PostgreSQL URL; the agent ``a`` must exist),
prints ``ready`` on stdout, then does ``OPS`` random operations (``0`` = until
killed) as the gene ``gene_id(f"writer-{WRITER}")`` of domain ``d`` over a small
key space: writes of new keys, updates, deletes, reads and queries, in every
category.  Writes past the agent's small quota evict CACHE, PATTERN and CONTEXT
entries; a few writes are larger than the whole quota and are refused.  Expected
refusals (MEMORY_NOT_FOUND, MEMORY_QUOTA_EXCEEDED) are counted, anything else
is fatal.  At the end it prints one JSON object: ``{"ops": n, "seconds": s,
"outcomes": {...}}``.

``serve ROOT`` is a fork server for the kill test, so that a writer starts in
a millisecond instead of a Python start-up: it imports everything, then for
each line ``spawn WRITER SEED`` on stdin forks a writer (which prints
``ready PID`` and churns until killed), and for ``reap PID`` waits for it and
prints ``reaped PID SIGNAL`` (the signal that ended it, 0 if none).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

from rotifer.memory import AgentMemoryError, ErrorCode, MemoryStore

KEYS = 48
#: (operation, weight); categories of writes weighted the same way.
OPERATIONS = [("write", 55), ("delete", 15), ("read", 20), ("query", 10), ("huge", 2)]
CATEGORIES = [("CACHE", 45), ("PATTERN", 20), ("CONTEXT", 25), ("PREFERENCE", 10)]
EXPECTED = {ErrorCode.NOT_FOUND, ErrorCode.QUOTA_EXCEEDED}


def gene_id(name: str) -> str:
    """As helpers.gene_id (this file runs as a script, outside the tests package)."""
    return "v2:" + hashlib.sha256(name.encode()).hexdigest()


def pick(rng: random.Random, table: list[tuple[str, int]]) -> str:
    return rng.choices([name for name, _ in table], [w for _, w in table])[0]


def main(root: Path, writer: str, seed: int, ops: int, ready: str = "ready") -> dict[str, object]:
    rng = random.Random(seed)
    url = os.environ.get("ROTIFER_CHURN_URL") or f"sqlite:{root / 'memory.db'}"
    store = MemoryStore.open(root / ".rotifer", url=url)
    g = store.for_gene("a", gene_id(f"writer-{writer}"), "d")
    os.write(1, ready.encode() + b"\n")
    outcomes: Counter[str] = Counter()
    start = time.perf_counter()
    done = 0
    while ops == 0 or done < ops:
        op = pick(rng, OPERATIONS)
        key = f"k/{rng.randrange(KEYS):02d}"
        try:
            if op == "write":
                category = pick(rng, CATEGORIES)
                size = rng.randrange(1, 100) if category == "PREFERENCE" else rng.randrange(1, 160)
                g.write_memory(key, rng.randbytes(size), category)
            elif op == "huge":  # larger than the whole quota: refused, and evicts nothing
                g.write_memory(key, rng.randbytes(rng.randrange(2100, 2600)), "CACHE")
            elif op == "delete":
                g.delete_memory(key)
            elif op == "read":
                g.read_memory(key)
            else:
                g.query_memory({"keyPrefix": "k/", "limit": 20})
            outcomes[op] += 1
        except AgentMemoryError as exc:
            if exc.code not in EXPECTED:
                raise
            outcomes[f"{op}:{exc.code.value}"] += 1
        done += 1
    seconds = time.perf_counter() - start
    store.close()
    return {"ops": done, "seconds": seconds, "outcomes": dict(outcomes)}


def serve(root: Path) -> None:
    if os.environ.get("ROTIFER_CHURN_URL", "").startswith("postgres"):
        import rotifer.memory.storage.postgres  # noqa: F401  (imported once here, not in each writer)
    for line in sys.stdin:
        command, *args = line.split()
        if command == "spawn":
            pid = os.fork()
            if pid == 0:
                try:
                    main(root, args[0], int(args[1]), 0, ready=f"ready {os.getpid()}")
                finally:
                    os._exit(1)  # a writer only ends by being killed
        elif command == "reap":
            _, status = os.waitpid(int(args[0]), 0)
            sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
            os.write(1, f"reaped {args[0]} {sig}\n".encode())


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(Path(sys.argv[2]))
        sys.exit(0)
    print(json.dumps(main(Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
