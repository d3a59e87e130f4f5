//! A test gene around examples/wasm/formatter-rust/src/rotifer.rs: one helper
//! call per run, chosen by the input, and what it returned as the output, so
//! tests/wasm/test_example_helpers.py can check every function of the helper.
//!
//! Input: {"op": "read"|"write"|"query"|"delete", "key", "value" (text),
//! "category" (absent = any), "access" (JSON text), "filter" (JSON text)}.
//! Output: {"entry": E|null} | {"entries": [E...]} | {"deleted": true} |
//! {"error": {"result", "code", "message"}}.

#[path = "../../../examples/wasm/formatter-rust/src/rotifer.rs"]
mod rotifer;

use rotifer::{json, Category, Entry, MemoryError};

fn text(input: &[u8], name: &str) -> Option<String> {
    json::field(input, name).and_then(json::string)
}

fn category(name: Option<String>) -> Option<Category> {
    match name.as_deref() {
        Some("PREFERENCE") => Some(Category::Preference),
        Some("PATTERN") => Some(Category::Pattern),
        Some("CONTEXT") => Some(Category::Context),
        Some("CACHE") => Some(Category::Cache),
        _ => None,
    }
}

fn entry(e: &Entry, out: &mut String) {
    let fields = [("entryId", &e.entry_id), ("category", &e.category), ("key", &e.key),
                  ("createdBy", &e.created_by), ("lastAccessedBy", &e.last_accessed_by),
                  ("createdAt", &e.created_at), ("updatedAt", &e.updated_at),
                  ("readScope", &e.read_scope), ("writeScope", &e.write_scope),
                  ("sharePolicy", &e.share_policy)];
    out.push('{');
    for (name, value) in fields {
        json::quote(name, out);
        out.push(':');
        json::quote(value, out);
        out.push(',');
    }
    out.push_str("\"value\":");
    json::quote(&String::from_utf8_lossy(&e.value), out);
    out.push_str(",\"retentionPolicy\":");
    out.push_str(&e.retention_policy);
    out.push('}');
}

fn error(e: &MemoryError) -> String {
    let mut out = format!("{{\"error\":{{\"result\":{},\"code\":", e.result);
    json::quote(&e.code, &mut out);
    out.push_str(",\"message\":");
    json::quote(&e.message, &mut out);
    out.push_str("}}");
    out
}

#[no_mangle]
pub extern "C" fn express(ptr: *const u8, len: usize) -> i32 {
    let input = unsafe { rotifer::input(ptr, len) };
    let key = text(input, "key").unwrap_or_default();
    let cat = category(text(input, "category"));
    let mut out = String::new();
    let op = text(input, "op").unwrap_or_default();
    let result = match op.as_str() {
        "read" => rotifer::read_memory(&key, cat).map(|found| {
            out.push_str("{\"entry\":");
            match found {
                Some(e) => entry(&e, &mut out),
                None => out.push_str("null"),
            }
            out.push('}');
        }),
        "write" => {
            let value = text(input, "value").unwrap_or_default();
            let access = text(input, "access");
            rotifer::write_memory_with(&key, value.as_bytes(), cat.unwrap_or(Category::Cache),
                                       access.as_deref(), None)
                .map(|e| {
                    out.push_str("{\"entry\":");
                    entry(&e, &mut out);
                    out.push('}');
                })
        }
        "query" => rotifer::query_memory(&text(input, "filter").unwrap_or_default()).map(|list| {
            out.push_str("{\"entries\":[");
            for (i, e) in list.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                entry(e, &mut out);
            }
            out.push_str("]}");
        }),
        "delete" => rotifer::delete_memory(&key).map(|()| out.push_str("{\"deleted\":true}")),
        _ => return rotifer::reject("INVALID_INPUT", "unknown op"),
    };
    match result {
        Ok(()) => rotifer::output(out),
        Err(e) => rotifer::output(error(&e)),
    }
}
