// The seed's formatter in AssemblyScript: it remembers the indent width a user
// asked for under "formatter/indent" (PREFERENCE, default access policy, so
// every gene of the formatter domain finds it) and reindents code by bracket depth.
//
// Build: ./build.sh (asc with its default options), then `rotifer compile formatter-as`.

import {
  Category, input, jsonField, jsonInt, jsonIsInt, jsonIsNull, jsonString, log, output, quote,
  readMemory, reject, WARNING, writeMemory,
} from "./rotifer";

// The host writes the input through alloc: the gene must export it.
export { alloc } from "./rotifer";

const KEY = "formatter/indent";
const DEFAULT_INDENT: i64 = 2;
const INT32_MIN: i64 = -2147483648;
const INT32_MAX: i64 = 2147483647;

/** Called once per run with the input JSON; returns a pointer to the output JSON. */
export function express(ptr: usize, len: usize): i32 {
  const json = input(ptr, len);
  const rawCode = jsonField(json, "code");
  if (rawCode == null) return reject("INVALID_INPUT", "the input needs a string 'code'");
  const code = jsonString(rawCode);
  if (code == null) return reject("INVALID_INPUT", "the input needs a string 'code'");
  const given = jsonField(json, "indent");
  let indent = DEFAULT_INDENT;
  if (given != null && !jsonIsNull(given)) {
    if (!jsonIsInt(given)) return reject("INVALID_INPUT", "indent must be a 32-bit whole number");
    indent = jsonInt(given);
    if (indent < INT32_MIN || indent > INT32_MAX) {
      return reject("INVALID_INPUT", "indent must be a 32-bit whole number");
    }
    // Remember the user's choice for the next run (and the next formatter).
    const written = writeMemory(KEY, Uint8Array.wrap(String.UTF8.encode(indent.toString())),
      Category.PREFERENCE);
    if (written.error != null) return written.error!.fail();
  } else {
    const read = readMemory(KEY, Category.PREFERENCE);
    if (read.error != null) return read.error!.fail();
    if (read.value != null) indent = savedIndent(read.value!.value);
  }
  return output('{"formatted":' + quote(reindent(code, indent)) + ',"indent":' + indent.toString() + "}");
}

/** The stored indent; a value that is not a number (another gene's mistake)
 * gives the default rather than failing the user's run. */
function savedIndent(value: Uint8Array): i64 {
  const text = String.UTF8.decode(value.buffer.slice(value.byteOffset, value.byteOffset + value.byteLength));
  if (jsonIsInt(text)) {
    const n = jsonInt(text);
    if (n >= INT32_MIN && n <= INT32_MAX) return n;
  }
  log(WARNING, "the saved indent is not a number; using the default");
  return DEFAULT_INDENT;
}

function isOpener(c: i32): bool { return c == 123 || c == 91 || c == 40; }  // { [ (
function isCloser(c: i32): bool { return c == 125 || c == 93 || c == 41; }  // } ] )

/** Indent each line by its bracket depth, `indent` spaces a level (the Python
 * formatter's rules: lines split at \n, \r\n or \r, blanks stripped). */
function reindent(code: string, indent: i64): string {
  const unit = " ".repeat(indent > 0 ? <i32>indent : 0);
  const lines = new Array<string>();
  let depth: i32 = 0;
  let i = 0;
  while (i < code.length) {
    const start = i;
    while (i < code.length && code.charCodeAt(i) != 10 && code.charCodeAt(i) != 13) i++;
    const line = code.substring(start, i).trim();
    if (i < code.length) i += code.charCodeAt(i) == 13 && i + 1 < code.length && code.charCodeAt(i + 1) == 10 ? 2 : 1;
    if (line.length == 0) {
      lines.push("");
      continue;
    }
    let leading = 0;
    while (leading < line.length && isCloser(line.charCodeAt(leading))) leading++;
    let opened = 0, closed = 0;
    for (let k = 0; k < line.length; k++) {
      if (isOpener(line.charCodeAt(k))) opened++;
      if (isCloser(line.charCodeAt(k))) closed++;
    }
    const level = depth - leading > 0 ? depth - leading : 0;
    lines.push(unit.repeat(level) + line);
    depth = depth + opened - closed > 0 ? depth + opened - closed : 0;
  }
  return lines.join("\n");
}
