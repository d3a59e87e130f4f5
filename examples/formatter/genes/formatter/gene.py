"""The seed's formatter, in Python: it remembers the indent width a user asked
for last time and uses it when the next request does not say.

The preference is written with the default access policy (SAME_DOMAIN), so
any other gene of the ``formatter`` domain finds it where this one left it.
"""

KEY = "formatter/indent"
OPENERS, CLOSERS = "{[(", "}])"


def reindent(code, indent):
    """Indent each line by its bracket depth, ``indent`` spaces a level."""
    lines, depth = [], 0
    for raw in code.splitlines():
        line = raw.strip()
        if not line:
            lines.append("")
            continue
        leading = len(line) - len(line.lstrip(CLOSERS))
        level = max(depth - leading, 0)
        lines.append(" " * (indent * level) + line)
        depth = max(depth + sum(line.count(c) for c in OPENERS)
                    - sum(line.count(c) for c in CLOSERS), 0)
    return "\n".join(lines)


def express(input, ctx):
    indent = input.get("indent")
    if indent is None:
        saved = ctx.memory.read_memory(KEY, "PREFERENCE")
        indent = int(saved.value.decode()) if saved else 2
    else:
        ctx.memory.write_memory(KEY, str(indent).encode(), "PREFERENCE")
    return {"formatted": reindent(input["code"], indent), "indent": indent}
