//! rotifer.rs -- the rotifer host calls as typed Rust functions, for genes
//! built with plain `rustc --target wasm32-unknown-unknown` (no crates).
//!
//! Copy this file next to your `lib.rs` and write `mod rotifer;`.  It gives:
//!
//! * `read_memory`, `write_memory`, `query_memory`, `delete_memory`: a key,
//!   bytes and a `Category` in; an `Entry` (or `None`, or a list) out; a
//!   refusal as a `MemoryError` carrying the seed's code
//!   (`MEMORY_ACCESS_DENIED`, ...).  The JSON requests, base64 values and the
//!   "out is too small, try again with a bigger buffer" dance stay in here.
//! * `log` and the `alloc` export through which the host hands over the input.
//! * `output` and `reject` to return from `express`, and `MemoryError::result`
//!   to pass a refusal on to the user (`MEMORY_ACCESS_DENIED: ...`).
//! * `json`: a small reader and writer, enough for inputs, entries and outputs.
//!
//! The ABI itself is described in docs/wasm.md.

#![allow(dead_code)]

use std::string::String;
use std::vec::Vec;

#[link(wasm_import_module = "rotifer")]
extern "C" {
    #[link_name = "readMemory"]
    fn host_read(req: *const u8, req_len: usize, out: *mut u8, out_cap: usize) -> i32;
    #[link_name = "writeMemory"]
    fn host_write(req: *const u8, req_len: usize, out: *mut u8, out_cap: usize) -> i32;
    #[link_name = "queryMemory"]
    fn host_query(req: *const u8, req_len: usize, out: *mut u8, out_cap: usize) -> i32;
    #[link_name = "deleteMemory"]
    fn host_delete(req: *const u8, req_len: usize, out: *mut u8, out_cap: usize) -> i32;
    #[link_name = "log"]
    fn host_log(level: i32, ptr: *const u8, len: usize);
}

// -- the module's side of the ABI ------------------------------------------------

/// The host writes the input JSON here.  The buffer is never freed: a run is
/// one call on a fresh instance, so leaking is the cheapest allocator.
#[no_mangle]
pub extern "C" fn alloc(len: usize) -> *mut u8 {
    let mut buf: Vec<u8> = Vec::with_capacity(len.max(1));
    let ptr = buf.as_mut_ptr();
    std::mem::forget(buf);
    ptr
}

/// The input `express` was given, as bytes.
///
/// # Safety
/// `ptr` and `len` must be the arguments the host passed to `express`.
pub unsafe fn input<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    std::slice::from_raw_parts(ptr, len)
}

/// Return `json` from `express`: the host reads it up to its NUL.
pub fn output(json: String) -> i32 {
    let mut bytes = json.into_bytes();
    bytes.push(0);
    let ptr = bytes.as_ptr();
    std::mem::forget(bytes);
    ptr as i32
}

/// Reject the input: the run fails with `code: message` (e.g. `INVALID_INPUT`).
pub fn reject(code: &str, message: &str) -> i32 {
    let mut out = String::from("{\"__rotifer_error\":{\"code\":");
    json::quote(code, &mut out);
    out.push_str(",\"message\":");
    json::quote(message, &mut out);
    out.push_str("}}");
    output(out)
}

pub const DEBUG: i32 = 0;
pub const INFO: i32 = 1;
pub const WARNING: i32 = 2;
pub const ERROR: i32 = 3;

/// A line in the gene's log (level `DEBUG` .. `ERROR`).
pub fn log(level: i32, message: &str) {
    unsafe { host_log(level, message.as_ptr(), message.len()) }
}

// -- types -------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Category {
    Preference,
    Pattern,
    Context,
    Cache,
}

impl Category {
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Preference => "PREFERENCE",
            Category::Pattern => "PATTERN",
            Category::Context => "CONTEXT",
            Category::Cache => "CACHE",
        }
    }
}

/// An entry as the host returns it (`retentionPolicy` kept as raw JSON:
/// `null`, or the object with its three fields).
#[derive(Clone, Debug, Default)]
pub struct Entry {
    pub entry_id: String,
    pub category: String,
    pub key: String,
    pub value: Vec<u8>,
    pub created_by: String,
    pub last_accessed_by: String,
    pub created_at: String,
    pub updated_at: String,
    pub read_scope: String,
    pub write_scope: String,
    pub share_policy: String,
    pub retention_policy: String,
}

/// A refused memory call.  `code` is the seed's code (`MEMORY_ACCESS_DENIED`,
/// `MEMORY_QUOTA_EXCEEDED`, `MEMORY_INVALID_INPUT`, `MEMORY_NOT_FOUND`,
/// `MEMORY_STORAGE_ERROR`), or `BUDGET_SPENT` for -4 (the run's deadline or
/// budget is used up: there is nothing to tell the user but to stop).
#[derive(Clone, Debug)]
pub struct MemoryError {
    pub result: i32,
    pub code: String,
    pub message: String,
}

impl MemoryError {
    /// What `express` returns to pass the refusal on: a rejection with the
    /// seed's code (the user sees `MEMORY_ACCESS_DENIED: ...`), or the bare
    /// result -4 when the budget is spent.
    pub fn result(&self) -> i32 {
        if self.result == BUDGET_SPENT {
            return BUDGET_SPENT;
        }
        reject(&self.code, &self.message)
    }
}

pub const OUT_TOO_SMALL: i32 = -1;
pub const BUDGET_SPENT: i32 = -4;

/// The seed's code for a host result (the body in `out` says it too, when it fits).
pub fn code_of(result: i32) -> &'static str {
    match result {
        -2 => "MEMORY_ACCESS_DENIED",
        -4 => "BUDGET_SPENT",
        -8 => "MEMORY_QUOTA_EXCEEDED",
        -10 | -1 => "MEMORY_INVALID_INPUT",
        -12 => "MEMORY_NOT_FOUND",
        _ => "MEMORY_STORAGE_ERROR",
    }
}

// -- the four memory calls ------------------------------------------------------------

/// The first `out` buffer; the host says how much it needs when this is too small.
const FIRST_OUT: usize = 1024;
/// A response never needs more (a query returns at most 4 MiB of entries).
const MAX_OUT: usize = 64 << 20;

type HostCall = unsafe extern "C" fn(*const u8, usize, *mut u8, usize) -> i32;

/// One call: the response bytes, or the refusal.  A read or query whose
/// response does not fit is asked again with the size the host named.
/// A write or delete is never repeated: -1 means it was carried out.
fn call(host: HostCall, request: &str, first: usize, repeat: bool) -> Result<Vec<u8>, MemoryError> {
    let mut cap = first;
    loop {
        let mut out: Vec<u8> = vec![0; cap];
        let n = unsafe { host(request.as_ptr(), request.len(), out.as_mut_ptr(), cap) };
        if n >= 0 {
            out.truncate(n as usize);
            return Ok(out);
        }
        let err = error_from(n, &out);
        if n == OUT_TOO_SMALL && repeat && cap < MAX_OUT {
            cap = needed(&err.message).unwrap_or(cap * 2).max(cap + 1).min(MAX_OUT);
            continue;
        }
        return Err(err);
    }
}

/// The refusal the host described in `out` (`{"__rotifer_error": ...}`, NUL-terminated).
fn error_from(result: i32, out: &[u8]) -> MemoryError {
    let end = out.iter().position(|&b| b == 0).unwrap_or(0);
    let body = json::field(&out[..end], "__rotifer_error");
    let text = |name| body.and_then(|b| json::field(b, name)).and_then(json::string);
    MemoryError {
        result,
        code: text("code").unwrap_or_else(|| code_of(result).into()),
        message: text("message").unwrap_or_else(|| format!("the host returned {}", result)),
    }
}

/// N from "... it needs N bytes ..." (the -1 body), plus room for the NUL.
fn needed(message: &str) -> Option<usize> {
    let rest = &message[message.find("needs ")? + 6..];
    let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
    digits.parse::<usize>().ok().map(|n| n + 1)
}

fn key_request(key: &str) -> String {
    let mut req = String::from("{\"key\":");
    json::quote(key, &mut req);
    req
}

/// The entry under `key` (of `category`, or any category for `None`), or `None`.
pub fn read_memory(key: &str, category: Option<Category>) -> Result<Option<Entry>, MemoryError> {
    let mut req = key_request(key);
    if let Some(c) = category {
        req.push_str(",\"category\":\"");
        req.push_str(c.as_str());
        req.push('"');
    }
    req.push('}');
    let response = call(host_read, &req, FIRST_OUT, true)?;
    if json::is_null(&response) {
        return Ok(None);
    }
    parse_entry(&response).map(Some)
}

/// Store `value` under `key` with the default policies (access SAME_DOMAIN).
pub fn write_memory(key: &str, value: &[u8], category: Category) -> Result<Entry, MemoryError> {
    write_memory_with(key, value, category, None, None)
}

/// `write_memory` with an `accessPolicy` and/or `retentionPolicy`, each given
/// as its JSON (e.g. `{"readScope":"CREATOR_GENE_ONLY",...}`, or `null` for a
/// retention policy that follows the agent's data policy).
pub fn write_memory_with(key: &str, value: &[u8], category: Category,
                         access_policy: Option<&str>, retention_policy: Option<&str>)
                         -> Result<Entry, MemoryError> {
    let mut req = key_request(key);
    req.push_str(",\"value\":\"");
    base64::encode(value, &mut req);
    req.push_str("\",\"category\":\"");
    req.push_str(category.as_str());
    req.push('"');
    if let Some(policy) = access_policy {
        req.push_str(",\"accessPolicy\":");
        req.push_str(policy);
    }
    if let Some(policy) = retention_policy {
        req.push_str(",\"retentionPolicy\":");
        req.push_str(policy);
    }
    req.push('}');
    // The stored entry is about 500 bytes plus the key and 4/3 of the value.
    let cap = FIRST_OUT + 6 * key.len() + value.len() / 3 * 4 + 8;
    match call(host_write, &req, cap, false) {
        Ok(response) => parse_entry(&response),
        // Stored, but the response did not fit: read the entry back.
        Err(e) if e.result == OUT_TOO_SMALL => match read_memory(key, Some(category))? {
            Some(entry) => Ok(entry),
            None => Err(e),
        },
        Err(e) => Err(e),
    }
}

/// Entries matching `filter` (its JSON, e.g. `{"keyPrefix":"formatter/"}`; `{}`
/// for all), newest first.
pub fn query_memory(filter: &str) -> Result<Vec<Entry>, MemoryError> {
    let response = call(host_query, filter, FIRST_OUT * 4, true)?;
    let mut entries = Vec::new();
    for raw in json::elements(&response).ok_or_else(|| bad_response(&response))? {
        entries.push(parse_entry(raw)?);
    }
    Ok(entries)
}

/// Delete the entry under `key` (`MEMORY_NOT_FOUND` when there is none).
pub fn delete_memory(key: &str) -> Result<(), MemoryError> {
    let mut req = key_request(key);
    req.push('}');
    match call(host_delete, &req, 256, false) {
        Ok(_) => Ok(()),
        Err(e) if e.result == OUT_TOO_SMALL => Ok(()), // deleted; only `{}` did not fit
        Err(e) => Err(e),
    }
}

fn bad_response(raw: &[u8]) -> MemoryError {
    MemoryError {
        result: -13,
        code: "MEMORY_STORAGE_ERROR".into(),
        message: format!("the host sent a response this helper cannot read ({} bytes)", raw.len()),
    }
}

fn parse_entry(raw: &[u8]) -> Result<Entry, MemoryError> {
    let text = |name: &str| json::field(raw, name).and_then(json::string);
    let policy = json::field(raw, "accessPolicy");
    let scope = |name: &str| policy.and_then(|p| json::field(p, name)).and_then(json::string);
    let parsed = (|| {
        Some(Entry {
            entry_id: text("entryId")?,
            category: text("category")?,
            key: text("key")?,
            value: base64::decode(text("value")?.as_bytes())?,
            created_by: text("createdBy")?,
            last_accessed_by: text("lastAccessedBy")?,
            created_at: text("createdAt")?,
            updated_at: text("updatedAt")?,
            read_scope: scope("readScope")?,
            write_scope: scope("writeScope")?,
            share_policy: scope("sharePolicy")?,
            retention_policy: String::from_utf8_lossy(json::field(raw, "retentionPolicy")?)
                .into_owned(),
        })
    })();
    parsed.ok_or_else(|| bad_response(raw))
}

// -- base64 (standard alphabet, with padding) ---------------------------------------------

pub mod base64 {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(data: &[u8], out: &mut String) {
        for chunk in data.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (b[0] as u32) << 16 | (b[1] as u32) << 8 | b[2] as u32;
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
    }

    pub fn decode(text: &[u8]) -> Option<Vec<u8>> {
        if text.len() % 4 != 0 {
            return None;
        }
        let mut out = Vec::with_capacity(text.len() / 4 * 3);
        for chunk in text.chunks(4) {
            let mut n: u32 = 0;
            let mut pad = 0;
            for &c in chunk {
                let v = match c {
                    b'A'..=b'Z' => c - b'A',
                    b'a'..=b'z' => c - b'a' + 26,
                    b'0'..=b'9' => c - b'0' + 52,
                    b'+' => 62,
                    b'/' => 63,
                    b'=' => {
                        pad += 1;
                        0
                    }
                    _ => return None,
                };
                n = n << 6 | v as u32;
            }
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..3 - pad.min(2)]);
        }
        Some(out)
    }
}

// -- JSON: just enough to read inputs and entries and to write outputs ---------------------

pub mod json {
    /// `raw` without blanks around it.
    pub fn trim(raw: &[u8]) -> &[u8] {
        let start = ws(raw, 0);
        let mut end = raw.len();
        while end > start && matches!(raw[end - 1], b' ' | b'\t' | b'\n' | b'\r') {
            end -= 1;
        }
        &raw[start..end]
    }

    fn ws(s: &[u8], mut i: usize) -> usize {
        while i < s.len() && matches!(s[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        i
    }

    /// The end of the value starting at `i` (after blanks), or None if malformed.
    fn skip(s: &[u8], i: usize) -> Option<usize> {
        let mut i = ws(s, i);
        match *s.get(i)? {
            b'"' => {
                i += 1;
                while *s.get(i)? != b'"' {
                    i += if s[i] == b'\\' { 2 } else { 1 };
                }
                Some(i + 1)
            }
            open @ (b'{' | b'[') => {
                let close = if open == b'{' { b'}' } else { b']' };
                i = ws(s, i + 1);
                if *s.get(i)? == close {
                    return Some(i + 1);
                }
                loop {
                    if open == b'{' {
                        i = ws(s, skip(s, i)?);
                        if *s.get(i)? != b':' {
                            return None;
                        }
                        i += 1;
                    }
                    i = ws(s, skip(s, i)?);
                    match *s.get(i)? {
                        b',' => i += 1,
                        c if c == close => return Some(i + 1),
                        _ => return None,
                    }
                }
            }
            _ => {
                let start = i;
                while i < s.len() && !matches!(s[i], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
                    i += 1;
                }
                if i == start { None } else { Some(i) }
            }
        }
    }

    /// The raw value of the field `name` of the object `obj`, or None.
    pub fn field<'a>(obj: &'a [u8], name: &str) -> Option<&'a [u8]> {
        let mut i = ws(obj, 0);
        if *obj.get(i)? != b'{' {
            return None;
        }
        i = ws(obj, i + 1);
        if *obj.get(i)? == b'}' {
            return None;
        }
        loop {
            let key_end = skip(obj, i)?;
            let key = string(&obj[i..key_end])?;
            i = ws(obj, key_end);
            if *obj.get(i)? != b':' {
                return None;
            }
            let start = ws(obj, i + 1);
            let end = skip(obj, start)?;
            if key == name {
                return Some(&obj[start..end]);
            }
            i = ws(obj, end);
            match *obj.get(i)? {
                b',' => i = ws(obj, i + 1),
                _ => return None,
            }
        }
    }

    /// The elements of the array `arr`, or None if it is not one.
    pub fn elements(arr: &[u8]) -> Option<Vec<&[u8]>> {
        let mut i = ws(arr, 0);
        if *arr.get(i)? != b'[' {
            return None;
        }
        let mut items = Vec::new();
        i = ws(arr, i + 1);
        if *arr.get(i)? == b']' {
            return Some(items);
        }
        loop {
            let start = ws(arr, i);
            let end = skip(arr, start)?;
            items.push(&arr[start..end]);
            i = ws(arr, end);
            match *arr.get(i)? {
                b',' => i += 1,
                b']' => return Some(items),
                _ => return None,
            }
        }
    }

    pub fn is_null(raw: &[u8]) -> bool {
        trim(raw) == b"null"
    }

    /// A whole number, or None (also for fractions and exponents).
    pub fn int(raw: &[u8]) -> Option<i64> {
        std::str::from_utf8(raw).ok()?.trim().parse().ok()
    }

    fn hex4(s: &[u8]) -> Option<u32> {
        u32::from_str_radix(std::str::from_utf8(s.get(..4)?).ok()?, 16).ok()
    }

    /// The text of a JSON string literal, escapes decoded; None if it is not one.
    pub fn string(raw: &[u8]) -> Option<String> {
        let s = trim(raw);
        if s.len() < 2 || s[0] != b'"' || s[s.len() - 1] != b'"' {
            return None;
        }
        let s = &s[1..s.len() - 1];
        let mut out: Vec<u8> = Vec::with_capacity(s.len());
        let mut i = 0;
        while i < s.len() {
            if s[i] != b'\\' {
                out.push(s[i]);
                i += 1;
                continue;
            }
            let c = *s.get(i + 1)?;
            i += 2;
            let decoded = match c {
                b'"' => '"',
                b'\\' => '\\',
                b'/' => '/',
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                b'n' => '\n',
                b'r' => '\r',
                b't' => '\t',
                b'u' => {
                    let mut code = hex4(&s[i..])?;
                    i += 4;
                    if (0xD800..0xDC00).contains(&code) && s[i..].starts_with(b"\\u") {
                        let low = hex4(&s[i + 2..])?;
                        if (0xDC00..0xE000).contains(&low) {
                            code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00);
                            i += 6;
                        }
                    }
                    char::from_u32(code).unwrap_or('\u{FFFD}')
                }
                _ => return None,
            };
            let mut buf = [0u8; 4];
            out.extend_from_slice(decoded.encode_utf8(&mut buf).as_bytes());
        }
        String::from_utf8(out).ok()
    }

    /// Append `text` as a JSON string literal.
    pub fn quote(text: &str, out: &mut String) {
        out.push('"');
        for c in text.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                c if (c as u32) < 0x20 => {
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    out.push_str("\\u00");
                    out.push(HEX[(c as usize) >> 4] as char);
                    out.push(HEX[(c as usize) & 15] as char);
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}
