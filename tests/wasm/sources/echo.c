/* A WASI command gene in C: echoes its input (stdin) to stdout. */
#include <stdio.h>

int main(void) {
    char buf[4096];
    size_t n, total = 0;
    while ((n = fread(buf, 1, sizeof buf, stdin)) > 0) {
        fwrite(buf, 1, n, stdout);
        total += n;
    }
    fprintf(stderr, "c echo read %zu bytes\n", total);
    return 0;
}
