/* The floor of any runtime wrapper: exec the real runtime with the same
 * arguments, nothing else. bench/run.sh builds it static, once per runtime:
 *   cc -static -O2 -DREAL='"/usr/bin/crun"' -o execwrap-crun bench/execwrap.c
 */
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv) {
    (void)argc;
    argv[0] = REAL;
    execv(REAL, argv);
    perror("execv " REAL);
    return 127;
}
