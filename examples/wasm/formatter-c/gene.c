/* The seed's formatter in C: it remembers the indent width a user asked for
 * under "formatter/indent" (PREFERENCE, default access policy, so every gene
 * of the formatter domain finds it) and reindents code by bracket depth.
 *
 * Build: ./build.sh (clang, freestanding wasm32), then `rotifer compile formatter-c`.
 */
#include "rotifer.h"

#define KEY "formatter/indent"
#define DEFAULT_INDENT 2

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }
static int is_opener(char c) { return c == '{' || c == '[' || c == '('; }
static int is_closer(char c) { return c == '}' || c == ']' || c == ')'; }

/* Indent each line by its bracket depth, `indent` spaces a level (the Python
 * formatter's rules: lines split at \n, \r\n or \r, blanks stripped). */
static void reindent(rotifer_slice code, long long indent, rotifer_buf *out) {
    size_t width = indent > 0 ? (size_t)indent : 0, i = 0;
    long long depth = 0;
    int first = 1;
    while (i < code.len) {
        size_t start = i;
        while (i < code.len && code.ptr[i] != '\n' && code.ptr[i] != '\r') i++;
        size_t end = i;
        if (i < code.len) i += (code.ptr[i] == '\r' && i + 1 < code.len && code.ptr[i + 1] == '\n') ? 2 : 1;
        while (start < end && is_blank(code.ptr[start])) start++;
        while (end > start && is_blank(code.ptr[end - 1])) end--;
        if (!first) rotifer_buf_char(out, '\n');
        first = 0;
        if (start == end) continue;
        long long leading = 0, opened = 0, closed = 0;
        while (start + leading < end && is_closer(code.ptr[start + leading])) leading++;
        for (size_t k = start; k < end; k++) {
            opened += is_opener(code.ptr[k]);
            closed += is_closer(code.ptr[k]);
        }
        long long level = depth - leading > 0 ? depth - leading : 0;
        rotifer_buf_reserve(out, width * (size_t)level);
        __builtin_memset(out->data + out->len, ' ', width * (size_t)level);
        out->len += width * (size_t)level;
        rotifer_buf_add(out, code.ptr + start, end - start);
        depth = depth + opened - closed > 0 ? depth + opened - closed : 0;
    }
}

/* The stored indent; a value that is not a number (another gene's mistake)
 * gives the default rather than failing the user's run. */
static long long saved_indent(const rotifer_entry *entry) {
    long long n;
    rotifer_slice text = {(const char *)entry->value, entry->value_len};
    if (rotifer_parse_int(text, &n) && n >= INT32_MIN && n <= INT32_MAX) return n;
    rotifer_log(ROTIFER_WARNING, "the saved indent is not a number; using the default");
    return DEFAULT_INDENT;
}

/* Called once per run with the input JSON; returns a pointer to the output JSON. */
__attribute__((export_name("express"))) int express(const char *ptr, size_t len) {
    rotifer_slice input = {ptr, len}, raw, code;
    rotifer_error err;
    long long indent;
    if (!rotifer_json_field(input, "code", &raw) || !rotifer_json_string(raw, &code))
        return rotifer_reject("INVALID_INPUT", "the input needs a string 'code'");
    if (rotifer_json_field(input, "indent", &raw) && !rotifer_json_is_null(raw)) {
        if (!rotifer_json_int(raw, &indent) || indent < INT32_MIN || indent > INT32_MAX)
            return rotifer_reject("INVALID_INPUT", "indent must be a 32-bit whole number");
        /* Remember the user's choice for the next run (and the next formatter). */
        rotifer_buf value = {0};
        rotifer_buf_int(&value, indent);
        if (rotifer_write_memory(KEY, value.data, value.len, ROTIFER_PREFERENCE, NULL, &err) < 0)
            return rotifer_fail(&err);
    } else {
        rotifer_entry *saved;
        if (rotifer_read_memory(KEY, ROTIFER_PREFERENCE, &saved, &err) < 0) return rotifer_fail(&err);
        indent = saved ? saved_indent(saved) : DEFAULT_INDENT;
    }
    rotifer_buf formatted = {0}, out = {0};
    reindent(code, indent, &formatted);
    rotifer_buf_str(&out, "{\"formatted\":");
    rotifer_buf_quote(&out, formatted.data ? formatted.data : "", formatted.len);
    rotifer_buf_str(&out, ",\"indent\":");
    rotifer_buf_int(&out, indent);
    rotifer_buf_char(&out, '}');
    return rotifer_output(&out);
}
