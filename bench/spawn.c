/* One process start, outside any runtime: the wall time from posix_spawn to
 * waitpid of each variant, in alternating rounds (the order rotates every
 * round), 5 warm-up rounds dropped. Each variant is a segment after `--`,
 * with its own options first:
 *   -i FILE      its stdin (default /dev/null); stdout goes to /dev/null
 *   -r SRC:DST   copy SRC over DST before each start, untimed (a fresh
 *                config.json for the wrapper)
 * and, before the first `--`, `-c MIB`: sweep MIB of memory before each start,
 * untimed, so that every start runs with cold CPU caches, as it does after a
 * runtime's own work (a container start).
 * Prints median, p10 and p90 in microseconds, and the difference and ratio
 * of each median to the first variant's. Build and use (BENCHMARKS.md):
 *   cc -O2 -o spawn bench/spawn.c
 *   spawn 400 [-c 64] -- -i state.json floor -- -i state.json oci-tmpfs-hook hook
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct variant {
    const char *in, *src, *dst;
    char **argv;
    double *us;
};

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void copy(const char *src, const char *dst) {
    static char buf[1 << 20];
    int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ssize_t n;
    if (in < 0 || out < 0 || (n = read(in, buf, sizeof buf)) < 0 || write(out, buf, (size_t)n) != n) {
        perror("spawn: -r");
        exit(1);
    }
    close(in);
    close(out);
}

int main(int argc, char **argv) {
    size_t sweep = 0;
    if (argc > 4 && !strcmp(argv[2], "-c")) {
        sweep = (size_t)atoi(argv[3]) << 20;
        argv += 2;
        argc -= 2;
    }
    if (argc < 4 || strcmp(argv[2], "--")) {
        fprintf(stderr, "usage: spawn ROUNDS [-c MIB] -- [-i FILE] [-r SRC:DST] PROG [ARG...] [-- ...]\n");
        return 2;
    }
    volatile unsigned char *cold = sweep ? malloc(sweep) : NULL;
    int rounds = atoi(argv[1]), n = 0;
    struct variant v[32];
    for (int i = 2; i < argc && n < 32; i++) {
        if (strcmp(argv[i], "--"))
            continue;
        argv[i] = NULL; /* ends the previous variant's argv */
        struct variant *x = &v[n++];
        memset(x, 0, sizeof *x);
        x->in = "/dev/null";
        int j = i + 1;
        for (; j + 1 < argc; j += 2) {
            if (!strcmp(argv[j], "-i")) {
                x->in = argv[j + 1];
            } else if (!strcmp(argv[j], "-r")) {
                char *colon = strchr(argv[j + 1], ':');
                if (!colon)
                    return 2;
                *colon = 0;
                x->src = argv[j + 1];
                x->dst = colon + 1;
            } else {
                break;
            }
        }
        x->argv = &argv[j];
        x->us = calloc((size_t)rounds, sizeof(double));
        i = j - 1;
    }
    for (int r = -5; r < rounds; r++) {
        for (int k = 0; k < n; k++) {
            struct variant *x = &v[(k + (r < 0 ? 0 : r)) % n];
            if (x->src)
                copy(x->src, x->dst);
            for (size_t b = 0; b < sweep; b += 64)
                cold[b]++;
            posix_spawn_file_actions_t fa;
            posix_spawn_file_actions_init(&fa);
            posix_spawn_file_actions_addopen(&fa, 0, x->in, O_RDONLY, 0);
            posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
            struct timespec a, b;
            pid_t pid;
            int status;
            clock_gettime(CLOCK_MONOTONIC, &a);
            if (posix_spawn(&pid, x->argv[0], &fa, NULL, x->argv, environ)) {
                perror(x->argv[0]);
                return 1;
            }
            waitpid(pid, &status, 0);
            clock_gettime(CLOCK_MONOTONIC, &b);
            posix_spawn_file_actions_destroy(&fa);
            if (!WIFEXITED(status) || WEXITSTATUS(status)) {
                fprintf(stderr, "spawn: %s exited with status %d\n", x->argv[0], status);
                return 1;
            }
            if (r >= 0)
                x->us[r] = (double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) / 1e3;
        }
    }
    double first = 0;
    for (int k = 0; k < n; k++) {
        qsort(v[k].us, (size_t)rounds, sizeof(double), cmp);
        double m = v[k].us[rounds / 2];
        if (k == 0)
            first = m;
        printf("| %s", v[k].argv[0]);
        for (char **a = v[k].argv + 1; *a; a++)
            printf(" %s", *a);
        printf(" | %.1f | %.1f | %.1f | %+.1f | %.3f |\n", m, v[k].us[rounds / 10], v[k].us[rounds * 9 / 10],
               m - first, m / first);
    }
    return 0;
}
