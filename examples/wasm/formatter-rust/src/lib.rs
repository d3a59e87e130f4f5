//! The seed's formatter in Rust: it remembers the indent width a user asked
//! for under `formatter/indent` (PREFERENCE, default access policy, so every
//! gene of the `formatter` domain finds it) and reindents code by bracket depth.
//!
//! Build: `./build.sh` (plain rustc, no crates, wasm32-unknown-unknown), then
//! `rotifer compile formatter-rust`.

mod rotifer;

use rotifer::{json, Category};

const KEY: &str = "formatter/indent";
const DEFAULT_INDENT: i64 = 2;

/// Called once per run with the input JSON; returns a pointer to the output JSON.
#[no_mangle]
pub extern "C" fn express(ptr: *const u8, len: usize) -> i32 {
    let input = unsafe { rotifer::input(ptr, len) };
    let code = match json::field(input, "code").and_then(json::string) {
        Some(code) => code,
        None => return rotifer::reject("INVALID_INPUT", "the input needs a string 'code'"),
    };
    let given = json::field(input, "indent").filter(|raw| !json::is_null(raw));
    let indent = match given {
        Some(raw) => match json::int(raw).filter(|n| i32::try_from(*n).is_ok()) {
            Some(n) => {
                // Remember the user's choice for the next run (and the next formatter).
                if let Err(e) = rotifer::write_memory(KEY, n.to_string().as_bytes(), Category::Preference) {
                    return e.result();
                }
                n
            }
            None => return rotifer::reject("INVALID_INPUT", "indent must be a 32-bit whole number"),
        },
        None => match rotifer::read_memory(KEY, Some(Category::Preference)) {
            Ok(Some(entry)) => saved_indent(&entry.value),
            Ok(None) => DEFAULT_INDENT,
            Err(e) => return e.result(),
        },
    };
    let mut out = String::from("{\"formatted\":");
    json::quote(&reindent(&code, indent), &mut out);
    out.push_str(",\"indent\":");
    out.push_str(&indent.to_string());
    out.push('}');
    rotifer::output(out)
}

/// The stored indent; a value that is not a number (another gene's mistake)
/// gives the default rather than failing the user's run.
fn saved_indent(value: &[u8]) -> i64 {
    match std::str::from_utf8(value).ok().and_then(|s| s.trim().parse::<i64>().ok()) {
        Some(n) if i32::try_from(n).is_ok() => n,
        _ => {
            rotifer::log(rotifer::WARNING, "the saved indent is not a number; using the default");
            DEFAULT_INDENT
        }
    }
}

const OPENERS: &str = "{[(";
const CLOSERS: &str = "}])";

/// Indent each line by its bracket depth, `indent` spaces a level (the Python
/// formatter's rules: lines split at \n, \r\n or \r, blanks stripped).
fn reindent(code: &str, indent: i64) -> String {
    let width = indent.max(0) as usize;
    let mut lines: Vec<String> = Vec::new();
    let mut depth: i64 = 0;
    for raw in split_lines(code) {
        let line = raw.trim_matches(|c: char| c.is_ascii_whitespace() || c == '\u{b}');
        if line.is_empty() {
            lines.push(String::new());
            continue;
        }
        let leading = line.chars().take_while(|c| CLOSERS.contains(*c)).count() as i64;
        let level = (depth - leading).max(0) as usize;
        lines.push(" ".repeat(width * level) + line);
        let opened = line.chars().filter(|c| OPENERS.contains(*c)).count() as i64;
        let closed = line.chars().filter(|c| CLOSERS.contains(*c)).count() as i64;
        depth = (depth + opened - closed).max(0);
    }
    lines.join("\n")
}

/// Lines as Python's `str.splitlines` gives them for \n, \r\n and \r: no
/// empty last line for a trailing line break.
fn split_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let bytes = text.as_bytes();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        if bytes[i] == b'\n' || bytes[i] == b'\r' {
            lines.push(&text[start..i]);
            if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                i += 1;
            }
            start = i + 1;
        }
        i += 1;
    }
    if start < bytes.len() {
        lines.push(&text[start..]);
    }
    lines
}
