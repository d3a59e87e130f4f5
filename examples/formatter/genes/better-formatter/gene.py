"""A better formatter in the same domain: tabs become spaces, trailing blanks
and runs of empty lines go, and the result ends with one newline.

It reads the same ``formatter/indent`` preference as ``formatter``: the entry
was written with SAME_DOMAIN access, so swapping genes keeps the user's choice.
It never writes the preference unless asked to, so the old entry's creator
stays ``formatter``.
"""

KEY = "formatter/indent"
OPENERS, CLOSERS = "{[(", "}])"


def reindent(code, indent):
    lines, depth, blank = [], 0, False
    for raw in code.expandtabs(indent or 1).splitlines():
        line = raw.strip()
        if not line:
            if lines and not blank:
                lines.append("")
            blank = True
            continue
        blank = False
        leading = len(line) - len(line.lstrip(CLOSERS))
        lines.append(" " * (indent * max(depth - leading, 0)) + line)
        depth = max(depth + sum(line.count(c) for c in OPENERS)
                    - sum(line.count(c) for c in CLOSERS), 0)
    while lines and not lines[-1]:
        lines.pop()
    return "\n".join(lines) + "\n"


def express(input, ctx):
    indent = input.get("indent")
    if indent is None:
        saved = ctx.memory.read_memory(KEY, "PREFERENCE")
        indent = int(saved.value.decode()) if saved else 2
    else:
        ctx.memory.write_memory(KEY, str(indent).encode(), "PREFERENCE")
    return {"formatted": reindent(input["code"], indent), "indent": indent}
