// A test gene around examples/wasm/formatter-as/assembly/rotifer.ts: one
// helper call per run, chosen by the input, and what it returned as the
// output (the same contract as probe.rs).

import {
  Category, deleteMemory, Entry, input, jsonField, jsonString, MemoryError, output, queryMemory,
  quote, readMemory, reject, writeMemory,
} from "../../../examples/wasm/formatter-as/assembly/rotifer";

export { alloc } from "../../../examples/wasm/formatter-as/assembly/rotifer";

function text(json: string, name: string): string {
  const raw = jsonField(json, name);
  if (raw == null) return "";
  const s = jsonString(raw);
  return s == null ? "" : s;
}

function category(name: string): Category {
  if (name == "PREFERENCE") return Category.PREFERENCE;
  if (name == "PATTERN") return Category.PATTERN;
  if (name == "CONTEXT") return Category.CONTEXT;
  if (name == "CACHE") return Category.CACHE;
  return Category.ANY;
}

function entry(e: Entry): string {
  return '{"entryId":' + quote(e.entryId) + ',"category":' + quote(e.category)
    + ',"key":' + quote(e.key) + ',"createdBy":' + quote(e.createdBy)
    + ',"lastAccessedBy":' + quote(e.lastAccessedBy) + ',"createdAt":' + quote(e.createdAt)
    + ',"updatedAt":' + quote(e.updatedAt) + ',"readScope":' + quote(e.readScope)
    + ',"writeScope":' + quote(e.writeScope) + ',"sharePolicy":' + quote(e.sharePolicy)
    + ',"value":' + quote(String.UTF8.decode(e.value.buffer.slice(e.value.byteOffset,
      e.value.byteOffset + e.value.byteLength)))
    + ',"retentionPolicy":' + e.retentionPolicy + "}";
}

function error(e: MemoryError): string {
  return '{"error":{"result":' + e.result.toString() + ',"code":' + quote(e.code)
    + ',"message":' + quote(e.message) + "}}";
}

export function express(ptr: usize, len: usize): i32 {
  const json = input(ptr, len);
  const op = text(json, "op");
  const key = text(json, "key");
  const cat = category(text(json, "category"));
  if (op == "read" || op == "write") {
    const got = op == "read" ? readMemory(key, cat)
      : writeMemory(key, Uint8Array.wrap(String.UTF8.encode(text(json, "value"))),
        cat == Category.ANY ? Category.CACHE : cat, text(json, "access"));
    if (got.error != null) return output(error(got.error!));
    return output('{"entry":' + (got.value == null ? "null" : entry(got.value!)) + "}");
  }
  if (op == "query") {
    const got = queryMemory(text(json, "filter"));
    if (got.error != null) return output(error(got.error!));
    const parts = new Array<string>();
    for (let i = 0; i < got.value.length; i++) parts.push(entry(got.value[i]));
    return output('{"entries":[' + parts.join(",") + "]}");
  }
  if (op == "delete") {
    const got = deleteMemory(key);
    if (got.error != null) return output(error(got.error!));
    return output('{"deleted":true}');
  }
  return reject("INVALID_INPUT", "unknown op");
}
