"""A worker of the failover test: writes and deletes its own keys across agents,
recording what each call was told, until a stop file appears.

Run as ``python -m tests.failover.worker URL ROTIFER_DIR WORKER AGENTS OUT STOP``.
Each call is one JSON line in ``OUT``, written (and flushed) after the call
returns: ``{"i", "agent", "key", "op": "write"|"delete", "value", "ok"}``.  A
call that was cut off by the process's end leaves no line: the checker treats
every op number without a line like a failed call (it may or may not have
happened).  Each worker owns its keys (``w<N>/k<j>``), so the last
acknowledged operation on a key says what must be there, up to the calls after
it that failed.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

from rotifer.memory import AgentMemoryError, MemoryStore

GENE = "v2:" + "f" * 64
KEYS = 6


def main(url: str, rotifer_dir: str, worker: int, agents: str, out: str, stop: str) -> None:
    rng = random.Random(worker)
    names = agents.split(",")
    store = MemoryStore.open(Path(rotifer_dir), url, create=False)
    views = {name: store.for_gene(name, GENE, "failover") for name in names}
    stop_file = Path(stop)
    with open(out, "a", encoding="utf-8") as record:
        i = 0
        while not stop_file.exists():
            i += 1
            agent = rng.choice(names)
            key = f"w{worker}/k{rng.randrange(KEYS)}"
            op = "delete" if rng.random() < 0.25 else "write"
            value = f"w{worker}-{i}"
            try:
                if op == "write":
                    views[agent].write_memory(key, value.encode(), "CONTEXT")
                else:
                    views[agent].delete_memory(key)
                ok = True
            except AgentMemoryError as exc:
                # A delete of a key that is not there is an answer too: absent.
                ok = op == "delete" and exc.code.value == "MEMORY_NOT_FOUND"
                if not ok and exc.code.value != "MEMORY_STORAGE_ERROR":
                    raise
            record.write(json.dumps({"i": i, "agent": agent, "key": key, "op": op,
                                     "value": value if op == "write" else None,
                                     "ok": ok}) + "\n")
            record.flush()
    store.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6])
