"""performer: the Python twin of probe.wat, for the isolation tests.

Input ``[OP, REQUEST]`` with OP one of read, write, query, delete and REQUEST
the WASM ABI's JSON request for it; the gene makes exactly that one call on
``ctx.memory`` and returns ``{"result": "ok", "body": RESPONSE}`` or, when
the call is refused, ``{"result": CODE, "body": MESSAGE}``.
"""

import base64


def express(input, ctx):
    op, req = input
    memory = ctx.memory
    try:
        if op == "read":
            entry = memory.read_memory(req["key"], req.get("category"))
            body = None if entry is None else entry.to_json()
        elif op == "write":
            extra = {}
            if "retentionPolicy" in req:
                extra["retention_policy"] = req["retentionPolicy"]
            entry = memory.write_memory(req["key"], base64.b64decode(req["value"]),
                                        req["category"], req.get("accessPolicy"), **extra)
            body = entry.to_json()
        elif op == "query":
            body = [entry.to_json() for entry in memory.query_memory(req)]
        else:
            memory.delete_memory(req["key"])
            body = {}
    except Exception as exc:  # a MemoryError: report its code
        code = getattr(exc, "code", None)
        if code is None:
            raise
        return {"result": getattr(code, "value", code), "body": str(exc)}
    return {"result": "ok", "body": body}
