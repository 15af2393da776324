/* What one CPUID instruction costs here, in microseconds (the median of 21
 * batches of 50). On bare metal it is well under 0.1; under virtualization
 * every CPUID exits to the hypervisor. glibc's start-up runs it dozens of
 * times (CPU feature and cache detection), static or dynamic, which musl's
 * does not (docs/design.md#cpuid). bench/run.sh prints it with the machine.
 */
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(void) {
    double us[21];
    for (int i = 0; i < 21; i++) {
        struct timespec a, b;
        unsigned eax, ebx, ecx, edx;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (int j = 0; j < 50; j++)
            __cpuid_count(7, 0, eax, ebx, ecx, edx);
        clock_gettime(CLOCK_MONOTONIC, &b);
        us[i] = ((b.tv_sec - a.tv_sec) * 1e9 + (b.tv_nsec - a.tv_nsec)) / 1e3 / 50;
    }
    qsort(us, 21, sizeof us[0], cmp);
    printf("%.2f\n", us[10]);
    return 0;
}
