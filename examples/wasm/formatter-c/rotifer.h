/* rotifer.h -- the rotifer host calls as typed C functions, for genes built
 * freestanding with clang (--target=wasm32-unknown-unknown -nostdlib): no libc,
 * no WASI, nothing imported but the rotifer host functions.
 *
 * Include it in the one .c file of your gene.  It gives:
 *
 *   rotifer_read_memory / _write_memory / _query_memory / _delete_memory:
 *       a key (a NUL-terminated string: the store refuses keys containing
 *       NUL anyway), bytes and a category in; an entry (or NULL) out; a refusal as
 *       a negative result plus a rotifer_error holding the seed's code
 *       ("MEMORY_ACCESS_DENIED", ...).  JSON requests, base64 values and the
 *       "out is too small, retry with a bigger buffer" dance stay in here.
 *   rotifer_log, and the `alloc` export the host writes the input through;
 *   rotifer_output / rotifer_reject / rotifer_fail to return from express;
 *   a bump allocator (rotifer_alloc), a string builder (rotifer_buf) and a
 *   small JSON reader (rotifer_json_field, _string, _int).
 *
 * Build with -mbulk-memory: clang turns copies and fills (also loops it
 * recognises) into memcpy/memset calls, which a freestanding module does not
 * have; with bulk memory they become the memory.copy/memory.fill instructions.
 * The ABI is described in docs/wasm.md.
 */
#ifndef ROTIFER_H
#define ROTIFER_H

#ifndef __wasm_bulk_memory__
#error "build with -mbulk-memory (or provide memcpy and memset yourself)"
#endif

#include <stddef.h>
#include <stdint.h>

#define ROTIFER_API static __attribute__((unused))
#define ROTIFER_IMPORT(name) __attribute__((import_module("rotifer"), import_name(name)))

ROTIFER_IMPORT("readMemory") int rotifer_host_read(const char *, size_t, char *, size_t);
ROTIFER_IMPORT("writeMemory") int rotifer_host_write(const char *, size_t, char *, size_t);
ROTIFER_IMPORT("queryMemory") int rotifer_host_query(const char *, size_t, char *, size_t);
ROTIFER_IMPORT("deleteMemory") int rotifer_host_delete(const char *, size_t, char *, size_t);
ROTIFER_IMPORT("log") void rotifer_host_log(int level, const char *, size_t);

/* -- memory: a bump allocator; a run is one call on a fresh instance -------- */

extern unsigned char __heap_base;
static uintptr_t rotifer_heap_top;

/* n bytes (8-aligned) or NULL when the memory cannot grow. */
ROTIFER_API void *rotifer_alloc(size_t n) {
    if (!rotifer_heap_top) rotifer_heap_top = (uintptr_t)&__heap_base;
    uintptr_t start = (rotifer_heap_top + 7) & ~(uintptr_t)7;
    if (n > SIZE_MAX - start) return NULL;
    uintptr_t end = start + n;
    uintptr_t have = __builtin_wasm_memory_size(0) * 65536;
    if (end > have) {
        size_t pages = (end - have + 65535) / 65536;
        if (__builtin_wasm_memory_grow(0, pages) == (size_t)-1) return NULL;
    }
    rotifer_heap_top = end;
    return (void *)start;
}

/* The host writes the input JSON here. */
__attribute__((export_name("alloc"))) void *alloc(size_t len) { return rotifer_alloc(len); }

ROTIFER_API size_t rotifer_strlen(const char *s) {
    size_t n = 0;
    while (s[n]) n++;
    return n;
}

/* -- a growing string; out of memory traps (unreachable) ---------------------- */

typedef struct { char *data; size_t len, cap; } rotifer_buf;

ROTIFER_API void rotifer_buf_reserve(rotifer_buf *b, size_t more) {
    if (b->len + more + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap * 2 : 256;
    while (cap < b->len + more + 1) cap *= 2;
    char *data = rotifer_alloc(cap);
    if (!data) __builtin_trap();
    if (b->len) __builtin_memcpy(data, b->data, b->len);
    b->data = data;
    b->cap = cap;
}

ROTIFER_API void rotifer_buf_add(rotifer_buf *b, const char *s, size_t n) {
    rotifer_buf_reserve(b, n);
    __builtin_memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
}

ROTIFER_API void rotifer_buf_str(rotifer_buf *b, const char *s) { rotifer_buf_add(b, s, rotifer_strlen(s)); }

ROTIFER_API void rotifer_buf_char(rotifer_buf *b, char c) { rotifer_buf_add(b, &c, 1); }

ROTIFER_API void rotifer_buf_int(rotifer_buf *b, long long n) {
    char digits[24];
    int i = sizeof digits;
    unsigned long long u = n < 0 ? 0ULL - (unsigned long long)n : (unsigned long long)n;
    do { digits[--i] = (char)('0' + u % 10); u /= 10; } while (u);
    if (n < 0) digits[--i] = '-';
    rotifer_buf_add(b, digits + i, sizeof digits - i);
}

/* Append s[0..n) as a JSON string literal (UTF-8 passes through). */
ROTIFER_API void rotifer_buf_quote(rotifer_buf *b, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    rotifer_buf_char(b, '"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') rotifer_buf_add(b, "\\\"", 2);
        else if (c == '\\') rotifer_buf_add(b, "\\\\", 2);
        else if (c == '\n') rotifer_buf_add(b, "\\n", 2);
        else if (c == '\r') rotifer_buf_add(b, "\\r", 2);
        else if (c == '\t') rotifer_buf_add(b, "\\t", 2);
        else if (c < 0x20) {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            rotifer_buf_add(b, esc, 6);
        } else rotifer_buf_char(b, (char)c);
    }
    rotifer_buf_char(b, '"');
}

/* -- JSON reading: just enough for inputs, entries and error bodies ------------ */

typedef struct { const char *ptr; size_t len; } rotifer_slice;

static int rotifer_is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static size_t rotifer_ws(rotifer_slice s, size_t i) {
    while (i < s.len && rotifer_is_ws(s.ptr[i])) i++;
    return i;
}

/* The end of the value starting at i (after blanks), or 0 if malformed. */
static size_t rotifer_skip(rotifer_slice s, size_t i) {
    i = rotifer_ws(s, i);
    if (i >= s.len) return 0;
    char c = s.ptr[i];
    if (c == '"') {
        for (i++; i < s.len && s.ptr[i] != '"'; i++)
            if (s.ptr[i] == '\\') i++;
        return i < s.len ? i + 1 : 0;
    }
    if (c == '{' || c == '[') {
        char close = c == '{' ? '}' : ']';
        i = rotifer_ws(s, i + 1);
        if (i < s.len && s.ptr[i] == close) return i + 1;
        for (;;) {
            if (c == '{') {
                if (!(i = rotifer_skip(s, i))) return 0;
                i = rotifer_ws(s, i);
                if (i >= s.len || s.ptr[i] != ':') return 0;
                i++;
            }
            if (!(i = rotifer_skip(s, i))) return 0;
            i = rotifer_ws(s, i);
            if (i >= s.len) return 0;
            if (s.ptr[i] == close) return i + 1;
            if (s.ptr[i] != ',') return 0;
            i++;
        }
    }
    size_t start = i;
    while (i < s.len && s.ptr[i] != ',' && s.ptr[i] != '}' && s.ptr[i] != ']' && !rotifer_is_ws(s.ptr[i])) i++;
    return i > start ? i : 0;
}

ROTIFER_API int rotifer_json_is_null(rotifer_slice v) {
    size_t i = rotifer_ws(v, 0);
    return v.len - i >= 4 && v.ptr[i] == 'n' && v.ptr[i + 1] == 'u' && v.ptr[i + 2] == 'l' && v.ptr[i + 3] == 'l';
}

static int rotifer_hex4(rotifer_slice s, size_t i, unsigned *out) {
    unsigned v = 0;
    if (i + 4 > s.len) return 0;
    for (size_t k = i; k < i + 4; k++) {
        char c = s.ptr[k];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return 0;
    }
    *out = v;
    return 1;
}

static void rotifer_utf8(rotifer_buf *b, unsigned cp) {
    char u[4];
    if (cp < 0x80) { u[0] = (char)cp; rotifer_buf_add(b, u, 1); }
    else if (cp < 0x800) { u[0] = (char)(0xC0 | cp >> 6); u[1] = (char)(0x80 | (cp & 63)); rotifer_buf_add(b, u, 2); }
    else if (cp < 0x10000) {
        u[0] = (char)(0xE0 | cp >> 12); u[1] = (char)(0x80 | (cp >> 6 & 63)); u[2] = (char)(0x80 | (cp & 63));
        rotifer_buf_add(b, u, 3);
    } else {
        u[0] = (char)(0xF0 | cp >> 18); u[1] = (char)(0x80 | (cp >> 12 & 63));
        u[2] = (char)(0x80 | (cp >> 6 & 63)); u[3] = (char)(0x80 | (cp & 63));
        rotifer_buf_add(b, u, 4);
    }
}

/* Decode the JSON string literal v into *out (NUL-terminated; out->len may
 * count NULs from \u0000).  Returns 0 if v is not a string. */
ROTIFER_API int rotifer_json_string(rotifer_slice v, rotifer_slice *out) {
    size_t i = rotifer_ws(v, 0), end = v.len;
    while (end > i && rotifer_is_ws(v.ptr[end - 1])) end--;
    if (end - i < 2 || v.ptr[i] != '"' || v.ptr[end - 1] != '"') return 0;
    rotifer_slice s = {v.ptr + i + 1, end - i - 2};
    rotifer_buf b = {0};
    rotifer_buf_reserve(&b, s.len);
    for (i = 0; i < s.len;) {
        if (s.ptr[i] != '\\') { rotifer_buf_char(&b, s.ptr[i++]); continue; }
        if (i + 1 >= s.len) return 0;
        char c = s.ptr[i + 1];
        i += 2;
        switch (c) {
        case '"': case '\\': case '/': rotifer_buf_char(&b, c); break;
        case 'b': rotifer_buf_char(&b, '\b'); break;
        case 'f': rotifer_buf_char(&b, '\f'); break;
        case 'n': rotifer_buf_char(&b, '\n'); break;
        case 'r': rotifer_buf_char(&b, '\r'); break;
        case 't': rotifer_buf_char(&b, '\t'); break;
        case 'u': {
            unsigned cp, low;
            if (!rotifer_hex4(s, i, &cp)) return 0;
            i += 4;
            if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < s.len && s.ptr[i] == '\\' && s.ptr[i + 1] == 'u'
                && rotifer_hex4(s, i + 2, &low) && low >= 0xDC00 && low < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                i += 6;
            }
            if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD; /* a lone surrogate */
            rotifer_utf8(&b, cp);
            break;
        }
        default: return 0;
        }
    }
    out->ptr = b.data;
    out->len = b.len;
    return 1;
}

static int rotifer_same(rotifer_slice a, const char *b, size_t n) {
    if (a.len != n) return 0;
    for (size_t i = 0; i < n; i++)
        if (a.ptr[i] != b[i]) return 0;
    return 1;
}

/* The raw value of field `name` of the object obj; 0 if there is none. */
ROTIFER_API int rotifer_json_field(rotifer_slice obj, const char *name, rotifer_slice *value) {
    size_t i = rotifer_ws(obj, 0), n = rotifer_strlen(name);
    if (i >= obj.len || obj.ptr[i] != '{') return 0;
    i = rotifer_ws(obj, i + 1);
    if (i < obj.len && obj.ptr[i] == '}') return 0;
    for (;;) {
        size_t key_end = rotifer_skip(obj, i);
        rotifer_slice key;
        if (!key_end || !rotifer_json_string((rotifer_slice){obj.ptr + i, key_end - i}, &key)) return 0;
        i = rotifer_ws(obj, key_end);
        if (i >= obj.len || obj.ptr[i] != ':') return 0;
        size_t start = rotifer_ws(obj, i + 1), end = rotifer_skip(obj, start);
        if (!end) return 0;
        if (rotifer_same(key, name, n)) {
            value->ptr = obj.ptr + start;
            value->len = end - start;
            return 1;
        }
        i = rotifer_ws(obj, end);
        if (i >= obj.len || obj.ptr[i] != ',') return 0;
        i = rotifer_ws(obj, i + 1);
    }
}

/* A whole number from text (blanks around, optional sign); 0 if it is none. */
ROTIFER_API int rotifer_parse_int(rotifer_slice v, long long *out) {
    size_t i = rotifer_ws(v, 0), end = v.len;
    while (end > i && (rotifer_is_ws(v.ptr[end - 1]))) end--;
    int neg = 0;
    if (i < end && (v.ptr[i] == '-' || v.ptr[i] == '+')) neg = v.ptr[i++] == '-';
    if (i >= end) return 0;
    unsigned long long n = 0;
    for (; i < end; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9') return 0;
        if (n > (0x7FFFFFFFFFFFFFFFULL - 9) / 10) return 0; /* too big */
        n = n * 10 + (unsigned)(v.ptr[i] - '0');
    }
    *out = neg ? -(long long)n : (long long)n;
    return 1;
}

ROTIFER_API int rotifer_json_int(rotifer_slice v, long long *out) { return rotifer_parse_int(v, out); }

/* The elements of the array arr, each a raw value; their number, or -1 if arr is none. */
ROTIFER_API long rotifer_json_elements(rotifer_slice arr, rotifer_slice **items) {
    size_t i = rotifer_ws(arr, 0), count = 0, cap = 0;
    rotifer_slice *list = NULL;
    if (i >= arr.len || arr.ptr[i] != '[') return -1;
    i = rotifer_ws(arr, i + 1);
    if (i < arr.len && arr.ptr[i] == ']') { *items = NULL; return 0; }
    for (;;) {
        size_t start = rotifer_ws(arr, i), end = rotifer_skip(arr, start);
        if (!end) return -1;
        if (count == cap) {
            cap = cap ? cap * 2 : 8;
            rotifer_slice *grown = rotifer_alloc(cap * sizeof *grown);
            if (!grown) __builtin_trap();
            if (count) __builtin_memcpy(grown, list, count * sizeof *grown);
            list = grown;
        }
        list[count++] = (rotifer_slice){arr.ptr + start, end - start};
        i = rotifer_ws(arr, end);
        if (i >= arr.len) return -1;
        if (arr.ptr[i] == ']') { *items = list; return (long)count; }
        if (arr.ptr[i] != ',') return -1;
        i++;
    }
}

/* -- base64 (standard alphabet, with padding) ------------------------------------ */

static const char rotifer_b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

ROTIFER_API void rotifer_base64_encode(rotifer_buf *b, const unsigned char *data, size_t n) {
    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)data[i] << 16 | (i + 1 < n ? (unsigned)data[i + 1] << 8 : 0)
                     | (i + 2 < n ? data[i + 2] : 0);
        char quad[4] = {rotifer_b64[v >> 18 & 63], rotifer_b64[v >> 12 & 63],
                        i + 1 < n ? rotifer_b64[v >> 6 & 63] : '=', i + 2 < n ? rotifer_b64[v & 63] : '='};
        rotifer_buf_add(b, quad, 4);
    }
}

static int rotifer_b64_value(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return c == '=' ? 0 : -1;
}

ROTIFER_API int rotifer_base64_decode(rotifer_slice text, rotifer_slice *out) {
    if (text.len % 4) return 0;
    rotifer_buf b = {0};
    rotifer_buf_reserve(&b, text.len / 4 * 3);
    for (size_t i = 0; i < text.len; i += 4) {
        unsigned v = 0;
        int pad = 0;
        for (size_t k = i; k < i + 4; k++) {
            int d = rotifer_b64_value(text.ptr[k]);
            if (d < 0) return 0;
            pad += text.ptr[k] == '=';
            v = v << 6 | (unsigned)d;
        }
        char bytes[3] = {(char)(v >> 16), (char)(v >> 8), (char)v};
        rotifer_buf_add(&b, bytes, (size_t)(3 - (pad > 2 ? 2 : pad)));
    }
    out->ptr = b.data;
    out->len = b.len;
    return 1;
}

/* -- the gene's side of the ABI ---------------------------------------------------- */

enum { ROTIFER_DEBUG = 0, ROTIFER_INFO = 1, ROTIFER_WARNING = 2, ROTIFER_ERROR = 3 };

ROTIFER_API void rotifer_log(int level, const char *message) {
    rotifer_host_log(level, message, rotifer_strlen(message));
}

/* Return JSON from express: the host reads it up to its NUL. */
ROTIFER_API int rotifer_output(rotifer_buf *json) {
    rotifer_buf_reserve(json, 0);
    json->data[json->len] = 0;
    return (int)(uintptr_t)json->data;
}

/* Reject the input: the run fails with `code: message` (e.g. INVALID_INPUT). */
ROTIFER_API int rotifer_reject(const char *code, const char *message) {
    rotifer_buf out = {0};
    rotifer_buf_str(&out, "{\"__rotifer_error\":{\"code\":");
    rotifer_buf_quote(&out, code, rotifer_strlen(code));
    rotifer_buf_str(&out, ",\"message\":");
    rotifer_buf_quote(&out, message, rotifer_strlen(message));
    rotifer_buf_str(&out, "}}");
    return rotifer_output(&out);
}

/* -- the four memory calls ------------------------------------------------------------ */

typedef enum {
    ROTIFER_ANY_CATEGORY = 0, /* reads only: whatever category the entry has */
    ROTIFER_PREFERENCE,
    ROTIFER_PATTERN,
    ROTIFER_CONTEXT,
    ROTIFER_CACHE,
} rotifer_category;

static const char *const rotifer_category_names[] = {NULL, "PREFERENCE", "PATTERN", "CONTEXT", "CACHE"};

/* An entry as the host returns it: NUL-terminated strings, the value as bytes,
 * retention_policy as raw JSON (`null` or its object). */
typedef struct {
    const char *entry_id, *category, *key, *created_by, *last_accessed_by, *created_at, *updated_at;
    const char *read_scope, *write_scope, *share_policy, *retention_policy;
    const unsigned char *value;
    size_t value_len;
} rotifer_entry;

/* A refused call: `result` is the host's negative result, `code` the seed's
 * code ("MEMORY_ACCESS_DENIED", "MEMORY_QUOTA_EXCEEDED", "MEMORY_INVALID_INPUT",
 * "MEMORY_NOT_FOUND", "MEMORY_STORAGE_ERROR"), or "BUDGET_SPENT" for -4 (the
 * run's deadline or budget is used up). */
typedef struct { int result; const char *code; const char *message; } rotifer_error;

#define ROTIFER_OUT_TOO_SMALL (-1)
#define ROTIFER_BUDGET_SPENT (-4)

/* What express returns to pass a refusal on: a rejection with the seed's
 * code (the user sees `MEMORY_ACCESS_DENIED: ...`), or -4 when the budget is spent. */
ROTIFER_API int rotifer_fail(const rotifer_error *err) {
    if (err->result == ROTIFER_BUDGET_SPENT) return ROTIFER_BUDGET_SPENT;
    return rotifer_reject(err->code, err->message);
}

ROTIFER_API const char *rotifer_code_of(int result) {
    switch (result) {
    case -2: return "MEMORY_ACCESS_DENIED";
    case -4: return "BUDGET_SPENT";
    case -8: return "MEMORY_QUOTA_EXCEEDED";
    case -1: case -10: return "MEMORY_INVALID_INPUT";
    case -12: return "MEMORY_NOT_FOUND";
    default: return "MEMORY_STORAGE_ERROR";
    }
}

#define ROTIFER_FIRST_OUT 1024u
#define ROTIFER_MAX_OUT (64u << 20)

typedef int (*rotifer_host_call)(const char *, size_t, char *, size_t);

static const char *rotifer_text(rotifer_slice obj, const char *name) {
    rotifer_slice raw, text;
    if (!rotifer_json_field(obj, name, &raw) || !rotifer_json_string(raw, &text)) return NULL;
    return text.ptr;
}

/* The refusal the host described in out (NUL-terminated), or one made from `result`. */
static void rotifer_error_from(int result, const char *out, rotifer_error *err) {
    rotifer_slice body = {out, rotifer_strlen(out)}, inner;
    err->result = result;
    err->code = NULL;
    err->message = NULL;
    if (rotifer_json_field(body, "__rotifer_error", &inner)) {
        err->code = rotifer_text(inner, "code");
        err->message = rotifer_text(inner, "message");
    }
    if (!err->code) err->code = rotifer_code_of(result);
    if (!err->message) {
        rotifer_buf m = {0};
        rotifer_buf_str(&m, "the host returned ");
        rotifer_buf_int(&m, result);
        err->message = m.data;
    }
}

/* N + 1 from "... it needs N bytes ..." (the -1 body), or 0. */
static size_t rotifer_needed(const char *message) {
    for (const char *p = message; *p; p++) {
        if (p[0] == 'n' && p[1] == 'e' && p[2] == 'e' && p[3] == 'd' && p[4] == 's' && p[5] == ' ') {
            size_t n = 0;
            for (p += 6; *p >= '0' && *p <= '9'; p++) n = n * 10 + (size_t)(*p - '0');
            return n + 1;
        }
    }
    return 0;
}

/* One call: >= 0 and the response in *response, or the negative result and
 * *err.  A read or query whose response does not fit is asked again with the
 * size the host named; a write or delete never is: -1 means it was carried out. */
static int rotifer_call(rotifer_host_call host, const rotifer_buf *req, size_t cap, int repeat,
                        rotifer_slice *response, rotifer_error *err) {
    for (;;) {
        char *out = rotifer_alloc(cap);
        if (!out) __builtin_trap();
        out[0] = 0;
        int n = host(req->data, req->len, out, cap);
        if (n >= 0) {
            response->ptr = out;
            response->len = (size_t)n;
            return n;
        }
        rotifer_error_from(n, out, err);
        if (n == ROTIFER_OUT_TOO_SMALL && repeat && cap < ROTIFER_MAX_OUT) {
            size_t want = rotifer_needed(err->message);
            cap = want > cap ? want : cap * 2;
            if (cap > ROTIFER_MAX_OUT) cap = ROTIFER_MAX_OUT;
            continue;
        }
        return n;
    }
}

static int rotifer_bad_response(rotifer_error *err) {
    err->result = -13;
    err->code = "MEMORY_STORAGE_ERROR";
    err->message = "the host sent a response this helper cannot read";
    return -13;
}

static int rotifer_parse_entry(rotifer_slice raw, rotifer_entry *e) {
    rotifer_slice policy, value, retention;
    if (!rotifer_json_field(raw, "accessPolicy", &policy) || !rotifer_json_field(raw, "value", &value)
        || !rotifer_json_string(value, &value) || !rotifer_base64_decode(value, &value)
        || !rotifer_json_field(raw, "retentionPolicy", &retention))
        return 0;
    rotifer_buf kept = {0};
    rotifer_buf_add(&kept, retention.ptr, retention.len);
    e->entry_id = rotifer_text(raw, "entryId");
    e->category = rotifer_text(raw, "category");
    e->key = rotifer_text(raw, "key");
    e->created_by = rotifer_text(raw, "createdBy");
    e->last_accessed_by = rotifer_text(raw, "lastAccessedBy");
    e->created_at = rotifer_text(raw, "createdAt");
    e->updated_at = rotifer_text(raw, "updatedAt");
    e->read_scope = rotifer_text(policy, "readScope");
    e->write_scope = rotifer_text(policy, "writeScope");
    e->share_policy = rotifer_text(policy, "sharePolicy");
    e->retention_policy = kept.data;
    e->value = (const unsigned char *)value.ptr;
    e->value_len = value.len;
    return e->entry_id && e->category && e->key && e->created_by && e->last_accessed_by
           && e->created_at && e->updated_at && e->read_scope && e->write_scope && e->share_policy;
}

static void rotifer_key_request(rotifer_buf *req, const char *key) {
    rotifer_buf_str(req, "{\"key\":");
    rotifer_buf_quote(req, key, rotifer_strlen(key));
}

/* The entry under key (of category, or any for ROTIFER_ANY_CATEGORY) in
 * *entry, or *entry = NULL when there is none.  0, or the negative result and *err. */
ROTIFER_API int rotifer_read_memory(const char *key, rotifer_category category, rotifer_entry **entry,
                                    rotifer_error *err) {
    rotifer_buf req = {0};
    rotifer_slice response;
    rotifer_key_request(&req, key);
    if (category != ROTIFER_ANY_CATEGORY) {
        rotifer_buf_str(&req, ",\"category\":\"");
        rotifer_buf_str(&req, rotifer_category_names[category]);
        rotifer_buf_char(&req, '"');
    }
    rotifer_buf_char(&req, '}');
    int n = rotifer_call(rotifer_host_read, &req, ROTIFER_FIRST_OUT, 1, &response, err);
    if (n < 0) return n;
    *entry = NULL;
    if (rotifer_json_is_null(response)) return 0;
    rotifer_entry *e = rotifer_alloc(sizeof *e);
    if (!e) __builtin_trap();
    if (!rotifer_parse_entry(response, e)) return rotifer_bad_response(err);
    *entry = e;
    return 0;
}

/* Store value[0..len) under key with accessPolicy / retentionPolicy given as
 * JSON (NULL leaves the field out: access SAME_DOMAIN, retention of the data
 * policy).  The stored entry in *entry unless entry is NULL.  0, or the
 * negative result and *err. */
ROTIFER_API int rotifer_write_memory_with(const char *key, const void *value, size_t len,
                                          rotifer_category category, const char *access_policy,
                                          const char *retention_policy, rotifer_entry **entry,
                                          rotifer_error *err) {
    rotifer_buf req = {0};
    rotifer_slice response;
    rotifer_key_request(&req, key);
    rotifer_buf_str(&req, ",\"value\":\"");
    rotifer_base64_encode(&req, value, len);
    rotifer_buf_str(&req, "\",\"category\":\"");
    rotifer_buf_str(&req, category == ROTIFER_ANY_CATEGORY ? "" : rotifer_category_names[category]);
    rotifer_buf_char(&req, '"');
    if (access_policy) { rotifer_buf_str(&req, ",\"accessPolicy\":"); rotifer_buf_str(&req, access_policy); }
    if (retention_policy) { rotifer_buf_str(&req, ",\"retentionPolicy\":"); rotifer_buf_str(&req, retention_policy); }
    rotifer_buf_char(&req, '}');
    /* The stored entry is about 500 bytes plus the key and 4/3 of the value. */
    size_t cap = ROTIFER_FIRST_OUT + 6 * rotifer_strlen(key) + len / 3 * 4 + 8;
    int n = rotifer_call(rotifer_host_write, &req, cap, 0, &response, err);
    if (n == ROTIFER_OUT_TOO_SMALL) /* stored, but the response did not fit: read it back */
        return entry ? rotifer_read_memory(key, category, entry, err) : 0;
    if (n < 0) return n;
    if (!entry) return 0;
    rotifer_entry *e = rotifer_alloc(sizeof *e);
    if (!e) __builtin_trap();
    if (!rotifer_parse_entry(response, e)) return rotifer_bad_response(err);
    *entry = e;
    return 0;
}

ROTIFER_API int rotifer_write_memory(const char *key, const void *value, size_t len, rotifer_category category,
                                     rotifer_entry **entry, rotifer_error *err) {
    return rotifer_write_memory_with(key, value, len, category, NULL, NULL, entry, err);
}

/* Entries matching filter (its JSON, "{}" for all), newest first, in
 * *entries[0..*count).  0, or the negative result and *err. */
ROTIFER_API int rotifer_query_memory(const char *filter, rotifer_entry **entries, size_t *count,
                                     rotifer_error *err) {
    rotifer_buf req = {0};
    rotifer_slice response, *items;
    rotifer_buf_str(&req, filter);
    int n = rotifer_call(rotifer_host_query, &req, 4 * ROTIFER_FIRST_OUT, 1, &response, err);
    if (n < 0) return n;
    long found = rotifer_json_elements(response, &items);
    if (found < 0) return rotifer_bad_response(err);
    rotifer_entry *list = rotifer_alloc((size_t)found * sizeof *list + 1);
    if (!list) __builtin_trap();
    for (long i = 0; i < found; i++)
        if (!rotifer_parse_entry(items[i], &list[i])) return rotifer_bad_response(err);
    *entries = list;
    *count = (size_t)found;
    return 0;
}

/* Delete the entry under key (MEMORY_NOT_FOUND when there is none). */
ROTIFER_API int rotifer_delete_memory(const char *key, rotifer_error *err) {
    rotifer_buf req = {0};
    rotifer_slice response;
    rotifer_key_request(&req, key);
    rotifer_buf_char(&req, '}');
    int n = rotifer_call(rotifer_host_delete, &req, 256, 0, &response, err);
    return n == ROTIFER_OUT_TOO_SMALL ? 0 : (n < 0 ? n : 0); /* -1: deleted, `{}` did not fit */
}

#endif /* ROTIFER_H */
