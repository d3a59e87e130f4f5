// rotifer.ts -- the rotifer host calls as typed AssemblyScript functions.
//
// Copy this file next to your gene's index.ts and import what you need.  It gives:
//
// * readMemory, writeMemory, queryMemory, deleteMemory: a key, bytes and a
//   Category in; an Outcome out, holding the Entry (or null, or a list) or a
//   MemoryError with the seed's code ("MEMORY_ACCESS_DENIED", ...).
//   AssemblyScript cannot catch exceptions, so refusals are values, not
//   throws.  JSON requests, base64 values and the "out is too small, retry with
//   a bigger buffer" dance stay in here.
// * log, and the `alloc` function your index.ts re-exports (`export { alloc }
//   from "./rotifer"`) through which the host hands over the input;
//   input/output/reject to read the input and return from express.
// * a small JSON reader (jsonField, jsonString, jsonIsInt, jsonInt, jsonElements)
//   and writer (quote).
//
// The ABI is described in docs/wasm.md.

@external("rotifer", "readMemory")
declare function hostRead(req: usize, reqLen: usize, out: usize, outCap: usize): i32;
@external("rotifer", "writeMemory")
declare function hostWrite(req: usize, reqLen: usize, out: usize, outCap: usize): i32;
@external("rotifer", "queryMemory")
declare function hostQuery(req: usize, reqLen: usize, out: usize, outCap: usize): i32;
@external("rotifer", "deleteMemory")
declare function hostDelete(req: usize, reqLen: usize, out: usize, outCap: usize): i32;
@external("rotifer", "log")
declare function hostLog(level: i32, ptr: usize, len: usize): void;

// -- the module's side of the ABI ----------------------------------------------------

/** The host writes the input JSON here (unmanaged memory: the GC leaves it alone). */
export function alloc(len: usize): usize {
  return heap.alloc(len > 0 ? len : 1);
}

/** The input `express` was given, as a string. */
export function input(ptr: usize, len: usize): string {
  return String.UTF8.decodeUnsafe(ptr, len);
}

/** Kept in a global so the collector never frees the output before the host reads it. */
let lastOutput: ArrayBuffer | null = null;

/** Return `json` from express: the host reads it up to its NUL. */
export function output(json: string): i32 {
  const bytes = String.UTF8.encode(json, true);
  lastOutput = bytes;
  return <i32>changetype<usize>(bytes);
}

/** Reject the input: the run fails with `code: message` (e.g. INVALID_INPUT). */
export function reject(code: string, message: string): i32 {
  return output('{"__rotifer_error":{"code":' + quote(code) + ',"message":' + quote(message) + "}}");
}

export const DEBUG = 0;
export const INFO = 1;
export const WARNING = 2;
export const ERROR = 3;

/** A line in the gene's log (level DEBUG .. ERROR). */
export function log(level: i32, message: string): void {
  const bytes = String.UTF8.encode(message);
  hostLog(level, changetype<usize>(bytes), <usize>bytes.byteLength);
}

// -- types ------------------------------------------------------------------------------

export enum Category { ANY, PREFERENCE, PATTERN, CONTEXT, CACHE }

export function categoryName(category: Category): string {
  switch (category) {
    case Category.PREFERENCE: return "PREFERENCE";
    case Category.PATTERN: return "PATTERN";
    case Category.CONTEXT: return "CONTEXT";
    case Category.CACHE: return "CACHE";
    default: return "";
  }
}

/** An entry as the host returns it (retentionPolicy as raw JSON: null or its object). */
export class Entry {
  entryId: string = "";
  category: string = "";
  key: string = "";
  value: Uint8Array = new Uint8Array(0);
  createdBy: string = "";
  lastAccessedBy: string = "";
  createdAt: string = "";
  updatedAt: string = "";
  readScope: string = "";
  writeScope: string = "";
  sharePolicy: string = "";
  retentionPolicy: string = "null";
}

export const OUT_TOO_SMALL = -1;
export const BUDGET_SPENT = -4;

/** A refused call: the host's negative result and the seed's code
 * (MEMORY_ACCESS_DENIED, MEMORY_QUOTA_EXCEEDED, MEMORY_INVALID_INPUT,
 * MEMORY_NOT_FOUND, MEMORY_STORAGE_ERROR), or BUDGET_SPENT for -4 (the run's
 * deadline or budget is used up). */
export class MemoryError {
  constructor(public result: i32, public code: string, public message: string) {}

  /** What express returns to pass the refusal on: a rejection with the seed's
   * code (the user sees `MEMORY_ACCESS_DENIED: ...`), or -4 when the budget is spent. */
  fail(): i32 {
    if (this.result == BUDGET_SPENT) return BUDGET_SPENT;
    return reject(this.code, this.message);
  }
}

/** A call's outcome: `error` is null on success, else `value` means nothing. */
export class Outcome<T> {
  constructor(public value: T, public error: MemoryError | null) {}
}

export function codeOf(result: i32): string {
  switch (result) {
    case -2: return "MEMORY_ACCESS_DENIED";
    case -4: return "BUDGET_SPENT";
    case -8: return "MEMORY_QUOTA_EXCEEDED";
    case -1: case -10: return "MEMORY_INVALID_INPUT";
    case -12: return "MEMORY_NOT_FOUND";
    default: return "MEMORY_STORAGE_ERROR";
  }
}

// -- the four memory calls -------------------------------------------------------------

const FIRST_OUT: i32 = 1024;
const MAX_OUT: i32 = 64 << 20;
const READ = 0, WRITE = 1, QUERY = 2, DELETE = 3;

function host(op: i32, req: usize, reqLen: usize, out: usize, cap: usize): i32 {
  if (op == READ) return hostRead(req, reqLen, out, cap);
  if (op == WRITE) return hostWrite(req, reqLen, out, cap);
  if (op == QUERY) return hostQuery(req, reqLen, out, cap);
  return hostDelete(req, reqLen, out, cap);
}

/** The response of the last successful call(). */
let response: string = "";

/** One call: null and the response in `response`, or the refusal.  A read or
 * query whose response does not fit is asked again with the size the host
 * named; a write or delete never is: -1 means it was carried out. */
function call(op: i32, request: string, first: i32, repeat: bool): MemoryError | null {
  const req = String.UTF8.encode(request);
  let cap = first;
  while (true) {
    const out = new ArrayBuffer(cap);
    const n = host(op, changetype<usize>(req), <usize>req.byteLength, changetype<usize>(out), <usize>cap);
    if (n >= 0) {
      response = String.UTF8.decodeUnsafe(changetype<usize>(out), <usize>n);
      return null;
    }
    const err = errorFrom(n, out);
    if (n == OUT_TOO_SMALL && repeat && cap < MAX_OUT) {
      const want = needed(err.message);
      cap = want > cap ? want : cap * 2;
      if (cap > MAX_OUT) cap = MAX_OUT;
      continue;
    }
    return err;
  }
}

/** The refusal the host described in out (NUL-terminated), or one made from `result`. */
function errorFrom(result: i32, out: ArrayBuffer): MemoryError {
  const base = changetype<usize>(out);
  let end = 0;
  while (end < out.byteLength && load<u8>(base + <usize>end) != 0) end++;
  const body = jsonField(String.UTF8.decodeUnsafe(base, <usize>end), "__rotifer_error");
  let code = codeOf(result);
  let message = "the host returned " + result.toString();
  if (body != null) {
    const c = jsonField(body, "code");
    const m = jsonField(body, "message");
    if (c != null && jsonString(c) != null) code = jsonString(c)!;
    if (m != null && jsonString(m) != null) message = jsonString(m)!;
  }
  return new MemoryError(result, code, message);
}

/** N + 1 from "... it needs N bytes ..." (the -1 body), or 0. */
function needed(message: string): i32 {
  let i = message.indexOf("needs ");
  if (i < 0) return 0;
  let n = 0;
  for (i += 6; i < message.length; i++) {
    const c = message.charCodeAt(i);
    if (c < 48 || c > 57) break;
    n = n * 10 + (c - 48);
  }
  return n + 1;
}

function badResponse(): MemoryError {
  return new MemoryError(-13, "MEMORY_STORAGE_ERROR", "the host sent a response this helper cannot read");
}

function text(obj: string, name: string): string | null {
  const raw = jsonField(obj, name);
  return raw == null ? null : jsonString(raw);
}

function parseEntry(raw: string): Entry | null {
  const policy = jsonField(raw, "accessPolicy");
  const value = text(raw, "value");
  const retention = jsonField(raw, "retentionPolicy");
  if (policy == null || value == null || retention == null) return null;
  const bytes = base64Decode(value);
  const e = new Entry();
  const entryId = text(raw, "entryId"), category = text(raw, "category"), key = text(raw, "key");
  const createdBy = text(raw, "createdBy"), lastAccessedBy = text(raw, "lastAccessedBy");
  const createdAt = text(raw, "createdAt"), updatedAt = text(raw, "updatedAt");
  const readScope = text(policy, "readScope"), writeScope = text(policy, "writeScope");
  const sharePolicy = text(policy, "sharePolicy");
  if (bytes == null || entryId == null || category == null || key == null || createdBy == null
      || lastAccessedBy == null || createdAt == null || updatedAt == null || readScope == null
      || writeScope == null || sharePolicy == null) return null;
  e.entryId = entryId; e.category = category; e.key = key; e.value = bytes;
  e.createdBy = createdBy; e.lastAccessedBy = lastAccessedBy;
  e.createdAt = createdAt; e.updatedAt = updatedAt;
  e.readScope = readScope; e.writeScope = writeScope; e.sharePolicy = sharePolicy;
  e.retentionPolicy = retention;
  return e;
}

/** The entry under key (of category, or any for Category.ANY), or null. */
export function readMemory(key: string, category: Category = Category.ANY): Outcome<Entry | null> {
  let req = '{"key":' + quote(key);
  if (category != Category.ANY) req += ',"category":"' + categoryName(category) + '"';
  const err = call(READ, req + "}", FIRST_OUT, true);
  if (err != null) return new Outcome<Entry | null>(null, err);
  if (response.trim() == "null") return new Outcome<Entry | null>(null, null);
  const entry = parseEntry(response);
  return new Outcome<Entry | null>(entry, entry == null ? badResponse() : null);
}

/** Store value under key.  accessPolicy / retentionPolicy are JSON, or "" to
 * leave the field out (access SAME_DOMAIN; retention of the data policy). */
export function writeMemory(key: string, value: Uint8Array, category: Category,
                            accessPolicy: string = "", retentionPolicy: string = ""): Outcome<Entry | null> {
  let req = '{"key":' + quote(key) + ',"value":"' + base64Encode(value) + '","category":"'
    + categoryName(category) + '"';
  if (accessPolicy.length > 0) req += ',"accessPolicy":' + accessPolicy;
  if (retentionPolicy.length > 0) req += ',"retentionPolicy":' + retentionPolicy;
  // The stored entry is about 500 bytes plus the key and 4/3 of the value.
  const cap = FIRST_OUT + 6 * key.length + value.length / 3 * 4 + 8;
  const err = call(WRITE, req + "}", cap, false);
  if (err != null && err.result == OUT_TOO_SMALL) return readMemory(key, category); // stored
  if (err != null) return new Outcome<Entry | null>(null, err);
  const entry = parseEntry(response);
  return new Outcome<Entry | null>(entry, entry == null ? badResponse() : null);
}

/** Entries matching filter (its JSON, "{}" for all), newest first. */
export function queryMemory(filter: string): Outcome<Entry[]> {
  const err = call(QUERY, filter, 4 * FIRST_OUT, true);
  const entries = new Array<Entry>();
  if (err != null) return new Outcome<Entry[]>(entries, err);
  const items = jsonElements(response);
  if (items == null) return new Outcome<Entry[]>(entries, badResponse());
  for (let i = 0; i < items.length; i++) {
    const entry = parseEntry(items[i]);
    if (entry == null) return new Outcome<Entry[]>(entries, badResponse());
    entries.push(entry);
  }
  return new Outcome<Entry[]>(entries, null);
}

/** Delete the entry under key (MEMORY_NOT_FOUND when there is none). */
export function deleteMemory(key: string): Outcome<bool> {
  const err = call(DELETE, '{"key":' + quote(key) + "}", 256, false);
  if (err != null && err.result != OUT_TOO_SMALL) return new Outcome<bool>(false, err);
  return new Outcome<bool>(true, null); // -1: deleted, only `{}` did not fit
}

// -- base64 (standard alphabet, with padding) --------------------------------------------

const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

export function base64Encode(data: Uint8Array): string {
  const parts = new Array<string>();
  for (let i = 0; i < data.length; i += 3) {
    const v = (<u32>data[i] << 16) | (i + 1 < data.length ? <u32>data[i + 1] << 8 : 0)
      | (i + 2 < data.length ? <u32>data[i + 2] : 0);
    parts.push(ALPHABET.charAt(v >> 18 & 63) + ALPHABET.charAt(v >> 12 & 63)
      + (i + 1 < data.length ? ALPHABET.charAt(v >> 6 & 63) : "=")
      + (i + 2 < data.length ? ALPHABET.charAt(v & 63) : "="));
  }
  return parts.join("");
}

export function base64Decode(text: string): Uint8Array | null {
  if (text.length % 4 != 0) return null;
  let pad = 0;
  if (text.endsWith("==")) pad = 2; else if (text.endsWith("=")) pad = 1;
  const out = new Uint8Array(text.length / 4 * 3 - pad);
  let o = 0;
  for (let i = 0; i < text.length; i += 4) {
    let v: u32 = 0;
    for (let k = i; k < i + 4; k++) {
      const c = text.charAt(k);
      const d = c == "=" ? 0 : ALPHABET.indexOf(c);
      if (d < 0) return null;
      v = v << 6 | <u32>d;
    }
    if (o < out.length) out[o++] = <u8>(v >> 16);
    if (o < out.length) out[o++] = <u8>(v >> 8);
    if (o < out.length) out[o++] = <u8>v;
  }
  return out;
}

// -- JSON: just enough to read inputs and entries and to write outputs -----------------------

function isWs(c: i32): bool { return c == 32 || c == 9 || c == 10 || c == 13; }

function ws(s: string, i: i32): i32 {
  while (i < s.length && isWs(s.charCodeAt(i))) i++;
  return i;
}

/** The end of the value starting at i (after blanks), or -1 if malformed. */
function skip(s: string, i: i32): i32 {
  i = ws(s, i);
  if (i >= s.length) return -1;
  const c = s.charCodeAt(i);
  if (c == 34) { // "
    for (i++; i < s.length && s.charCodeAt(i) != 34; i++) if (s.charCodeAt(i) == 92) i++;
    return i < s.length ? i + 1 : -1;
  }
  if (c == 123 || c == 91) { // { [
    const close = c == 123 ? 125 : 93;
    i = ws(s, i + 1);
    if (i < s.length && s.charCodeAt(i) == close) return i + 1;
    while (true) {
      if (c == 123) {
        i = skip(s, i);
        if (i < 0) return -1;
        i = ws(s, i);
        if (i >= s.length || s.charCodeAt(i) != 58) return -1; // :
        i++;
      }
      i = skip(s, i);
      if (i < 0) return -1;
      i = ws(s, i);
      if (i >= s.length) return -1;
      if (s.charCodeAt(i) == close) return i + 1;
      if (s.charCodeAt(i) != 44) return -1; // ,
      i++;
    }
  }
  const start = i;
  while (i < s.length) {
    const d = s.charCodeAt(i);
    if (d == 44 || d == 125 || d == 93 || isWs(d)) break;
    i++;
  }
  return i > start ? i : -1;
}

/** The raw value of field `name` of the object obj, or null. */
export function jsonField(obj: string, name: string): string | null {
  let i = ws(obj, 0);
  if (i >= obj.length || obj.charCodeAt(i) != 123) return null;
  i = ws(obj, i + 1);
  if (i < obj.length && obj.charCodeAt(i) == 125) return null;
  while (true) {
    const keyEnd = skip(obj, i);
    if (keyEnd < 0) return null;
    const key = jsonString(obj.substring(i, keyEnd));
    i = ws(obj, keyEnd);
    if (key == null || i >= obj.length || obj.charCodeAt(i) != 58) return null;
    const start = ws(obj, i + 1);
    const end = skip(obj, start);
    if (end < 0) return null;
    if (key == name) return obj.substring(start, end);
    i = ws(obj, end);
    if (i >= obj.length || obj.charCodeAt(i) != 44) return null;
    i = ws(obj, i + 1);
  }
}

/** The elements of the array arr, each a raw value, or null if it is none. */
export function jsonElements(arr: string): string[] | null {
  let i = ws(arr, 0);
  if (i >= arr.length || arr.charCodeAt(i) != 91) return null;
  const items = new Array<string>();
  i = ws(arr, i + 1);
  if (i < arr.length && arr.charCodeAt(i) == 93) return items;
  while (true) {
    const start = ws(arr, i);
    const end = skip(arr, start);
    if (end < 0) return null;
    items.push(arr.substring(start, end));
    i = ws(arr, end);
    if (i >= arr.length) return null;
    if (arr.charCodeAt(i) == 93) return items;
    if (arr.charCodeAt(i) != 44) return null;
    i++;
  }
}

export function jsonIsNull(raw: string): bool { return raw.trim() == "null"; }

/** True when raw is a whole number (blanks around, optional sign) that fits an i64. */
export function jsonIsInt(raw: string): bool {
  const s = raw.trim();
  const i = s.startsWith("-") || s.startsWith("+") ? 1 : 0;
  return onlyDigits(s, i) && stripZeros(s, i) <= 18;
}

function onlyDigits(s: string, i: i32): bool {
  if (i >= s.length) return false;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) return false;
  }
  return true;
}

function stripZeros(s: string, i: i32): i32 {
  while (i < s.length - 1 && s.charCodeAt(i) == 48) i++;
  return s.length - i;
}

/** The whole number in raw (check jsonIsInt first). */
export function jsonInt(raw: string): i64 {
  const s = raw.trim();
  const negative = s.startsWith("-");
  let i = s.startsWith("-") || s.startsWith("+") ? 1 : 0;
  let n: i64 = 0;
  for (; i < s.length; i++) n = n * 10 + <i64>(s.charCodeAt(i) - 48);
  return negative ? -n : n;
}

function hex4(s: string, i: i32): i32 {
  if (i + 4 > s.length) return -1;
  let v = 0;
  for (let k = i; k < i + 4; k++) {
    const c = s.charCodeAt(k);
    v <<= 4;
    if (c >= 48 && c <= 57) v |= c - 48;
    else if (c >= 97 && c <= 102) v |= c - 87;
    else if (c >= 65 && c <= 70) v |= c - 55;
    else return -1;
  }
  return v;
}

/** The text of a JSON string literal, escapes decoded; null if raw is not one. */
export function jsonString(raw: string): string | null {
  const s = raw.trim();
  if (s.length < 2 || s.charCodeAt(0) != 34 || s.charCodeAt(s.length - 1) != 34) return null;
  const parts = new Array<string>();
  let start = 1;
  const end = s.length - 1;
  let i = 1;
  while (i < end) {
    if (s.charCodeAt(i) != 92) { i++; continue; }
    parts.push(s.substring(start, i));
    if (i + 1 >= end) return null;
    const c = s.charCodeAt(i + 1);
    i += 2;
    if (c == 117) { // u: UTF-16 code units, so surrogate pairs join by themselves
      const v = hex4(s, i);
      if (v < 0) return null;
      parts.push(String.fromCharCode(v));
      i += 4;
    } else if (c == 34 || c == 92 || c == 47) parts.push(String.fromCharCode(c));
    else if (c == 98) parts.push("\b");
    else if (c == 102) parts.push("\f");
    else if (c == 110) parts.push("\n");
    else if (c == 114) parts.push("\r");
    else if (c == 116) parts.push("\t");
    else return null;
    start = i;
  }
  parts.push(s.substring(start, end));
  return parts.join("");
}

/** text as a JSON string literal. */
export function quote(text: string): string {
  const parts = new Array<string>();
  parts.push('"');
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    let esc = "";
    if (c == 34) esc = '\\"';
    else if (c == 92) esc = "\\\\";
    else if (c == 10) esc = "\\n";
    else if (c == 13) esc = "\\r";
    else if (c == 9) esc = "\\t";
    else if (c < 32) esc = "\\u00" + (c < 16 ? "0" : "") + c.toString(16);
    else continue;
    parts.push(text.substring(start, i));
    parts.push(esc);
    start = i + 1;
  }
  parts.push(text.substring(start));
  parts.push('"');
  return parts.join("");
}
