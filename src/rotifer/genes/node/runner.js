// rotifer's Node.js gene runner: runs one gene's express(input, ctx) and serves
// ctx.memory by asking the Python store over a synchronous pipe bridge.
//
// Protocol (one JSON object per line, UTF-8):
//   fd IN (argv[2])  Python -> runner: first {"type":"start", ...}, then one reply per call:
//         {"ok": result} or {"error": {"code", "message"}}
//   fd OUT (argv[3]) runner -> Python: {"type":"call", "op", ...}, {"type":"log", "line"},
//         and last {"type":"result", "output"} or {"type":"error", "kind", "message"[, "code"]}
//         (kinds: memory, load, failed).  Nothing else: the host treats any other
//         message as the gene breaking the protocol (contain/channel.py).
// Byte values cross the bridge as {"$bytes": "<base64>"}; entries as the seed's
// JSON (value in base64), turned into Uint8Array here.
"use strict";

const fs = require("fs");
const path = require("path");
const vm = require("vm");
const Module = require("module");

const IN_FD = Number(process.argv[2]);
const OUT_FD = Number(process.argv[3]);

let pending = Buffer.alloc(0);

function readLine() {
  const chunk = Buffer.alloc(65536);
  for (;;) {
    const nl = pending.indexOf(10);
    if (nl >= 0) {
      const line = pending.subarray(0, nl).toString("utf8");
      pending = pending.subarray(nl + 1);
      return line;
    }
    let n;
    try {
      n = fs.readSync(IN_FD, chunk, 0, chunk.length, null);
    } catch (err) {
      if (err.code === "EAGAIN") continue;
      throw err;
    }
    if (n === 0) throw new Error("the rotifer host closed the bridge");
    pending = Buffer.concat([pending, chunk.subarray(0, n)]);
  }
}

function writeAll(data) {
  let off = 0;
  while (off < data.length) off += fs.writeSync(OUT_FD, data, off, data.length - off);
}

function send(message) {
  writeAll(Buffer.from(JSON.stringify(message) + "\n", "utf8"));
}

class MemoryError extends Error {
  constructor(code, message) {
    super(message);
    this.name = "MemoryError";
    this.code = code;
  }
}

function toEntry(doc) {
  if (doc === null || doc === undefined) return null;
  return { ...doc, value: new Uint8Array(Buffer.from(doc.value, "base64")) };
}

function bytesArg(value) {
  if (value instanceof Uint8Array) return { $bytes: Buffer.from(value).toString("base64") };
  return { $notBytes: kindOf(value) };
}

// What a value that is not bytes is, for the refusal: "a string", "an Array", "null".
function kindOf(value) {
  if (value === null || value === undefined) return String(value);
  if (Array.isArray(value)) return "an Array";
  if (typeof value === "object") {
    const name = value.constructor && value.constructor.name;
    return name ? `a ${name}` : "an object";
  }
  return /^[aeiou]/.test(typeof value) ? `an ${typeof value}` : `a ${typeof value}`;
}

// NaN and the infinities, which JSON.stringify turns into null (so that
// {limit: NaN} became the default limit), cross as {"$number": "NaN"}: the
// host puts the number back and the store's checks refuse it.
function keepNonFinite(key, value) {
  return typeof value === "number" && !Number.isFinite(value) ? { $number: String(value) } : value;
}

function call(op, fields) {
  writeAll(Buffer.from(JSON.stringify({ type: "call", op, ...fields }, keepNonFinite) + "\n",
                       "utf8"));
  const reply = JSON.parse(readLine());
  if (reply.error) throw new MemoryError(reply.error.code, reply.error.message);
  return reply.ok;
}

const memory = Object.freeze({
  readMemory(key, category) {
    const args = { key };
    if (category !== undefined) args.category = category;
    return toEntry(call("readMemory", args));
  },
  writeMemory(key, value, category, accessPolicy, retentionPolicy) {
    const args = { key, value: bytesArg(value), category };
    if (accessPolicy !== undefined) args.accessPolicy = accessPolicy;
    if (arguments.length >= 5 && retentionPolicy !== undefined) args.retentionPolicy = retentionPolicy;
    return toEntry(call("writeMemory", args));
  },
  queryMemory(filter) {
    const args = {};
    if (filter !== undefined) args.filter = filter;
    return call("queryMemory", args).map(toEntry);
  },
  deleteMemory(key) {
    call("deleteMemory", { key });
  },
});

function format(parts) {
  return parts.map((p) => (typeof p === "string" ? p : safeInspect(p))).join(" ");
}

function safeInspect(value) {
  try {
    return require("util").inspect(value, { depth: 4 });
  } catch (err) {
    return String(value);
  }
}

const PLAYGROUND = Object.freeze({ MemoryError });

function compile(js, filename) {
  return vm.runInThisContext(Module.wrap(js), { filename });
}

function loadGene(start) {
  const filename = path.join(start.geneDir, start.fileName);
  // start.js is what rotifer's own transpile step made of the source
  // (genes/node/transpile.js, in a process that runs no gene code): the
  // source itself for CommonJS JavaScript.
  const wrapper = compile(start.js, filename);
  const realRequire = Module.createRequire(filename);
  const geneRequire = (name) => {
    if (name === "@rotifer/playground/memory") return PLAYGROUND;
    try {
      return realRequire(name);
    } catch (err) {
      if (err && err.code === "MODULE_NOT_FOUND" && /^\.{0,2}\//.test(String(name))) {
        // A gene is one file: rotifer transpiles only index.ts, and only its
        // bytes are covered by the v2 id.
        const e = new Error(`cannot import '${name}': a gene is one file (rotifer runs only ` +
          `${start.fileName}; other .ts files are not transpiled)`);
        e.stack = e.message;
        throw e;
      }
      throw err;
    }
  };
  const mod = { exports: {} };
  wrapper.call(mod.exports, mod.exports, geneRequire, mod, filename, start.geneDir);
  const express = mod.exports.express || (mod.exports.default && mod.exports.default.express);
  if (typeof express !== "function") {
    throw new TypeError(`${start.fileName} does not export a function express(input, ctx)`);
  }
  return express;
}

function describe(err) {
  if (err instanceof Error) {
    // Every line of the message (the host shows them joined and escaped) and
    // the first stack frame ("at f (file:line:col)").
    const where = (err.stack || "").split("\n").slice(1).find((l) => /^\s*at .*:\d+/.test(l)) || "";
    const message = String(err.message);
    return `${err.name}: ${message}${where ? ` (${where.trim()})` : ""}`;
  }
  return `threw ${safeInspect(err)}`;
}

function finish(output) {
  if (output === undefined) {
    send({ type: "error", kind: "failed", message: "express() returned undefined, which is not JSON" });
    return;
  }
  let text;
  try {
    text = JSON.stringify(output);
  } catch (err) {
    send({ type: "error", kind: "failed", message: `the output is not JSON: ${err.message}` });
    return;
  }
  if (text === undefined) {
    send({ type: "error", kind: "failed", message: "the output is not JSON" });
    return;
  }
  // The output's JSON text goes out as it is: no second stringify of a large output.
  writeAll(Buffer.from(`{"type":"result","output":${text}}\n`, "utf8"));
}

function fail(err) {
  if (err instanceof MemoryError) {
    send({ type: "error", kind: "memory", code: err.code, message: err.message });
  } else {
    send({ type: "error", kind: "failed", message: describe(err) });
  }
}

function main() {
  const start = JSON.parse(readLine());
  const log = (...parts) => send({ type: "log", line: format(parts) });
  console.log = console.info = console.warn = console.error = console.debug = log;
  let express;
  try {
    express = loadGene(start);
  } catch (err) {
    send({ type: "error", kind: "load", message: describe(err) });
    return;
  }
  if (start.check) { // `rotifer wrap`: the gene loads, express is a function; not called
    finish(null);
    return;
  }
  const ctx = Object.freeze({ memory, log, agent: start.agent, gene: Object.freeze(start.gene) });
  let output;
  try {
    output = express(start.input, ctx);
  } catch (err) {
    fail(err);
    return;
  }
  if (output !== null && typeof output === "object" && typeof output.then === "function") {
    output.then(finish, fail);
  } else {
    finish(output);
  }
}

main();
