/* C test gene built with wasi-libc as a reactor (exports express, alloc and
 * _initialize): malloc, snprintf and printf (stdout is the gene's log).
 * {"indent": n} stores n under PREFERENCE formatter/indent; {} reads it back
 * ({"saved": <entry or null>}). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((import_module("rotifer"), import_name("readMemory")))
int read_memory(const char *req, size_t req_len, char *out, size_t out_cap);
__attribute__((import_module("rotifer"), import_name("writeMemory")))
int write_memory(const char *req, size_t req_len, char *out, size_t out_cap);

static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
static char initialized[] = "no";

__attribute__((constructor)) static void init(void) { strcpy(initialized, "ok"); }

static void base64(const char *in, size_t len, char *out) {
    for (size_t i = 0; i < len; i += 3) {
        unsigned n = (unsigned char)in[i] << 16;
        if (i + 1 < len) n |= (unsigned char)in[i + 1] << 8;
        if (i + 2 < len) n |= (unsigned char)in[i + 2];
        *out++ = B64[(n >> 18) & 63];
        *out++ = B64[(n >> 12) & 63];
        *out++ = i + 1 < len ? B64[(n >> 6) & 63] : '=';
        *out++ = i + 2 < len ? B64[n & 63] : '=';
    }
    *out = 0;
}

void *alloc(size_t len) { return malloc(len); }

const char *express(char *input, size_t len) {
    static char response[4096], request[512], output[4600], b64[64];
    printf("c gene got %zu bytes\n", len);
    fflush(stdout);
    int n;
    const char *what;
    if (len > 10 && len < 40 && strncmp(input, "{\"indent\":", 10) == 0) {
        base64(input + 10, len - 11, b64);
        snprintf(request, sizeof request,
                 "{\"key\":\"formatter/indent\",\"value\":\"%s\",\"category\":\"PREFERENCE\"}", b64);
        n = write_memory(request, strlen(request), response, sizeof response - 1);
        what = "wrote";
    } else {
        strcpy(request, "{\"key\":\"formatter/indent\"}");
        n = read_memory(request, strlen(request), response, sizeof response - 1);
        what = "saved";
    }
    free(input);
    if (n < 0) snprintf(response, sizeof response, "{\"result\":%d}", n);
    else response[n] = 0;
    snprintf(output, sizeof output, "{\"%s\":%s,\"initialized\":\"%s\"}", what, response, initialized);
    return output;
}
