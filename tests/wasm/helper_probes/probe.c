/* A test gene around examples/wasm/formatter-c/rotifer.h: one helper call per
 * run, chosen by the input, and what it returned as the output (the same
 * contract as probe.rs). */
#include "rotifer.h"

static rotifer_slice field_text(rotifer_slice input, const char *name) {
    rotifer_slice raw, text = {"", 0};
    if (rotifer_json_field(input, name, &raw)) rotifer_json_string(raw, &text);
    return text;
}

static rotifer_category category(rotifer_slice name) {
    static const char *const names[] = {"", "PREFERENCE", "PATTERN", "CONTEXT", "CACHE"};
    for (int c = 1; c <= 4; c++) {
        size_t n = rotifer_strlen(names[c]), i = 0;
        if (name.len != n) continue;
        while (i < n && name.ptr[i] == names[c][i]) i++;
        if (i == n) return (rotifer_category)c;
    }
    return ROTIFER_ANY_CATEGORY;
}

static int is(rotifer_slice s, const char *word) {
    size_t n = rotifer_strlen(word), i = 0;
    if (s.len != n) return 0;
    while (i < n && s.ptr[i] == word[i]) i++;
    return i == n;
}

static void field(rotifer_buf *out, const char *name, const char *value) {
    rotifer_buf_quote(out, name, rotifer_strlen(name));
    rotifer_buf_char(out, ':');
    rotifer_buf_quote(out, value, rotifer_strlen(value));
    rotifer_buf_char(out, ',');
}

static void entry(rotifer_buf *out, const rotifer_entry *e) {
    rotifer_buf_char(out, '{');
    field(out, "entryId", e->entry_id);
    field(out, "category", e->category);
    field(out, "key", e->key);
    field(out, "createdBy", e->created_by);
    field(out, "lastAccessedBy", e->last_accessed_by);
    field(out, "createdAt", e->created_at);
    field(out, "updatedAt", e->updated_at);
    field(out, "readScope", e->read_scope);
    field(out, "writeScope", e->write_scope);
    field(out, "sharePolicy", e->share_policy);
    rotifer_buf_str(out, "\"value\":");
    rotifer_buf_quote(out, (const char *)e->value, e->value_len);
    rotifer_buf_str(out, ",\"retentionPolicy\":");
    rotifer_buf_str(out, e->retention_policy);
    rotifer_buf_char(out, '}');
}

__attribute__((export_name("express"))) int express(const char *ptr, size_t len) {
    rotifer_slice input = {ptr, len}, op = field_text(input, "op"), key = field_text(input, "key");
    rotifer_slice access = field_text(input, "access");
    rotifer_category cat = category(field_text(input, "category"));
    rotifer_buf out = {0};
    rotifer_error err;
    rotifer_entry *e = NULL;
    int r;
    if (is(op, "read")) {
        r = rotifer_read_memory(key.ptr, cat, &e, &err);
        if (r >= 0) {
            rotifer_buf_str(&out, "{\"entry\":");
            if (e) entry(&out, e); else rotifer_buf_str(&out, "null");
            rotifer_buf_char(&out, '}');
        }
    } else if (is(op, "write")) {
        rotifer_slice value = field_text(input, "value");
        r = rotifer_write_memory_with(key.ptr, value.ptr, value.len,
                                      cat == ROTIFER_ANY_CATEGORY ? ROTIFER_CACHE : cat,
                                      access.len ? access.ptr : NULL, NULL, &e, &err);
        if (r >= 0) {
            rotifer_buf_str(&out, "{\"entry\":");
            entry(&out, e);
            rotifer_buf_char(&out, '}');
        }
    } else if (is(op, "query")) {
        size_t count = 0;
        r = rotifer_query_memory(field_text(input, "filter").ptr, &e, &count, &err);
        if (r >= 0) {
            rotifer_buf_str(&out, "{\"entries\":[");
            for (size_t i = 0; i < count; i++) {
                if (i) rotifer_buf_char(&out, ',');
                entry(&out, &e[i]);
            }
            rotifer_buf_str(&out, "]}");
        }
    } else if (is(op, "delete")) {
        r = rotifer_delete_memory(key.ptr, &err);
        if (r >= 0) rotifer_buf_str(&out, "{\"deleted\":true}");
    } else {
        return rotifer_reject("INVALID_INPUT", "unknown op");
    }
    if (r < 0) {
        rotifer_buf_str(&out, "{\"error\":{\"result\":");
        rotifer_buf_int(&out, err.result);
        rotifer_buf_str(&out, ",\"code\":");
        rotifer_buf_quote(&out, err.code, rotifer_strlen(err.code));
        rotifer_buf_str(&out, ",\"message\":");
        rotifer_buf_quote(&out, err.message, rotifer_strlen(err.message));
        rotifer_buf_str(&out, "}}");
    }
    return rotifer_output(&out);
}
