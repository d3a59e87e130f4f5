/* WASI command genes that misbehave, chosen by -DMODE=...:
 * 1 never reads stdin, 2 exits 3 after an error on stderr, 3 loops forever,
 * 4 writes stdout forever (ignoring errors), 5 sleeps an hour, 6 tries files,
 * the environment and arguments and reports what it saw. */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

extern char **environ;

int main(int argc, char **argv) {
#if MODE == 1
    puts("{\"ignored\":\"stdin\"}");
#elif MODE == 2
    fputs("something broke\nexiting with 3\n", stderr);
    return 3;
#elif MODE == 3
    volatile unsigned long i = 0;
    for (;;) i++;
#elif MODE == 4
    static char block[65536];
    memset(block, 'x', sizeof block);
    for (;;) fwrite(block, 1, sizeof block, stdout);
#elif MODE == 5
    sleep(3600);
    puts("{\"slept\":true}");
#elif MODE == 6
    FILE *f = fopen("/etc/passwd", "r");
    FILE *g = fopen("out.txt", "w");
    int envs = 0;
    for (char **e = environ; e && *e; e++) envs++;
    printf("{\"read\":%s,\"write\":%s,\"env\":%d,\"argc\":%d,\"argv0\":\"%s\",\"cwd\":%s}\n",
           f ? "true" : "false", g ? "true" : "false", envs, argc, argv[0],
           getcwd(NULL, 0) ? "true" : "false");
#endif
    return 0;
}
