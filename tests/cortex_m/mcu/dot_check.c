/* Bare-metal check (Cortex-M under qemu-system-arm, semihosting) that etch_cm_dot_s8 -- SMLAD
 * on DSP cores, VMLADAVA on Helium -- equals the portable loop bit for bit: every length up
 * to 67 (all tails), offsets at the ends of their range, int8 extremes, misaligned vectors,
 * and a sum that wraps int32. Prints "N passed, N failed" and exits 0 only when all pass. */
#include <stddef.h>
#include <stdint.h>

#include "kernels/portable/portable_cortex_m.h"

void *memcpy(void *d, const void *s, size_t n) {
    unsigned char *a = d;
    const unsigned char *b = s;
    while (n--)
        *a++ = *b++;
    return d;
}
void *memset(void *d, int v, size_t n) {
    unsigned char *a = d;
    while (n--)
        *a++ = (unsigned char)v;
    return d;
}
int memcmp(const void *x, const void *y, size_t n) {
    const unsigned char *a = x, *b = y;
    for (; n--; a++, b++)
        if (*a != *b)
            return *a < *b ? -1 : 1;
    return 0;
}

static int semihost(int op, const void *arg) {
    register int r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}
static void put(const char *s) { semihost(0x04, s); }
static void put_int(long v) {
    char b[24], *p = b + sizeof b - 1;
    unsigned long u = v < 0 ? 0ul - (unsigned long)v : (unsigned long)v;
    *p = 0;
    do
        *--p = (char)('0' + u % 10);
    while (u /= 10);
    if (v < 0)
        *--p = '-';
    put(p);
}

static uint32_t rng = 12345u;
static int8_t rnd8(void) {
    rng = rng * 1664525u + 1013904223u;
    return (int8_t)(rng >> 24);
}

#define BIG 70000
static int8_t xa[BIG + 16], wa[BIG + 16];
static int passed, failed;

static void check(const int8_t *x, const int8_t *w, int32_t n, int32_t xo, int32_t wo) {
    int32_t got = etch_cm_dot_s8(x, w, n, xo, wo), want = etch_cm_dot_s8_portable(x, w, n, xo, wo);
    if (got == want) {
        passed++;
        return;
    }
    if (failed++ < 10) {
        put("mismatch n=");
        put_int(n);
        put(" offsets ");
        put_int(xo);
        put(" ");
        put_int(wo);
        put(": ");
        put_int(got);
        put(" vs ");
        put_int(want);
        put("\n");
    }
}

int main(void) {
    static const int32_t offs[] = {0, 1, -1, 128, -127, -128, 127, 256, -256, 37};
    for (int i = 0; i < BIG + 16; i++)
        xa[i] = rnd8(), wa[i] = rnd8();
    xa[0] = -128, xa[1] = 127, wa[0] = -128, wa[1] = -128;
    for (int32_t n = 0; n <= 67; n++)
        for (size_t a = 0; a < sizeof offs / sizeof offs[0]; a++)
            for (size_t b = 0; b < sizeof offs / sizeof offs[0]; b += 3)
                for (int mis = 0; mis < 4; mis++) /* misaligned starts */
                    check(xa + mis, wa + 3 * mis, n, offs[a], offs[b]);
    for (int i = 0; i < BIG; i++) /* every product 256 * 127: the sum passes 2^31 */
        xa[i] = 127, wa[i] = 127;
    check(xa, wa, BIG, 128, 0);
    check(xa, wa, BIG, 128, 128);
    check(xa + 1, wa + 2, BIG - 5, -128, -128);
    put("dot_check " ETCH_CM_DOT_KIND ": ");
    put_int(passed);
    put(" passed, ");
    put_int(failed);
    put(" failed\n");
    return failed ? 1 : 0;
}

/* ---- startup: vector table, .data/.bss, FPU + MVE access, semihosting exit ------------- */
extern uint32_t _sidata, _sdata, _edata, _sbss, _ebss, _estack;
void reset_handler(void);
static void hang(void) {
    put("fault\n");
    semihost(0x18, (const void *)0x20023);
    for (;;) {
    }
}
__attribute__((section(".vectors"), used)) static const void *vectors[16] = {
    &_estack, (void *)reset_handler, (void *)hang, (void *)hang, (void *)hang, (void *)hang,
    (void *)hang};

void reset_handler(void) {
    for (uint32_t *s = &_sidata, *d = &_sdata; d < &_edata;)
        *d++ = *s++;
    for (uint32_t *d = &_sbss; d < &_ebss;)
        *d++ = 0;
    *(volatile uint32_t *)0xE000ED88 |= 0xFu << 20; /* CPACR: CP10, CP11 full access */
    __asm__ volatile("dsb\n isb");
    int rc = main();
    /* ADP_Stopped_ApplicationExit (status 0) or ADP_Stopped_RunTimeErrorUnknown */
    semihost(0x18, (const void *)(uintptr_t)(rc == 0 ? 0x20026 : 0x20023));
    for (;;) {
    }
}
