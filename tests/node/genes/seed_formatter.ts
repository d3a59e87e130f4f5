import type { GeneMemoryAccess } from "@rotifer/playground/memory";

// reindent() is the gene's own formatting logic, not shown here.
// (The one addition to the seed's example: each line re-indented by brace depth.)
function reindent(code: string, indent: number): string {
  let depth = 0;
  return code.split("\n").map((raw) => {
    const line = raw.trim();
    const closing = line.startsWith("}") ? 1 : 0;
    const out = line ? " ".repeat(indent * Math.max(depth - closing, 0)) + line : "";
    depth = Math.max(depth + (line.split("{").length - 1) - (line.split("}").length - 1), 0);
    return out;
  }).join("\n");
}
const KEY = "formatter/indent";

export function express(
  input: { code: string; indent?: number },
  ctx: { memory: GeneMemoryAccess },
): { formatted: string; indent: number } {
  let indent = input.indent;

  if (indent === undefined) {
    const saved = ctx.memory.readMemory(KEY, "PREFERENCE");
    indent = saved ? Number(new TextDecoder().decode(saved.value)) : 2;
  } else {
    ctx.memory.writeMemory(
      KEY,
      new TextEncoder().encode(String(indent)),
      "PREFERENCE",
    );
  }

  return { formatted: reindent(input.code, indent), indent };
}
