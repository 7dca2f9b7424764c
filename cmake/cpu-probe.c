/* Prints the x86-64 instruction-set extensions this CPU supports, one name a
 * line, for cmake/cpu-variant.cmake. Built and run at configure time. */
#include <stdio.h>
#if defined(__x86_64__) || defined(__i386__)
#    include <cpuid.h>
#endif

int main(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
#    define PROBE(name) if (__builtin_cpu_supports(name)) puts(name)
    PROBE("sse4.2");
    PROBE("avx");
    PROBE("avx2");
    PROBE("fma");
    unsigned a, b, c, d; /* F16C has no __builtin_cpu_supports name: CPUID leaf 1, ECX bit 29 */
    if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29))) puts("f16c");
    PROBE("bmi2");
    PROBE("avx512f");
    PROBE("avx512cd");
    PROBE("avx512vl");
    PROBE("avx512dq");
    PROBE("avx512bw");
    PROBE("avx512vbmi");
    PROBE("avx512vnni");
    PROBE("avx512bf16");
    PROBE("avx512fp16");
    PROBE("avxvnni");
    PROBE("amx-tile");
    PROBE("amx-int8");
#endif
    return 0;
}
