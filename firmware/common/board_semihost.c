/* The board layer of the emulated Arm MPS2/MPS3 boards: output and exit over semihosting
 * (qemu -semihosting), the clock from SysTick at the board's CPU clock (FW_CPU_HZ), start-up
 * memory from a static bump allocator. It implements etch/platform.h for the core. */
#include <string.h>

#include "board.h"
#include "etch/platform.h"

#ifndef FW_CPU_HZ
#error "FW_CPU_HZ (the clock SysTick counts) must be defined by the board"
#endif
#ifndef FW_HEAP_SIZE
#define FW_HEAP_SIZE 1024 /* start-up memory: the program handle (256 bytes) */
#endif

/* ---- semihosting (Arm's debug interface: bkpt 0xab, operation in r0, argument in r1) ---- */

enum { SYS_WRITE0 = 0x04, SYS_EXIT_EXTENDED = 0x20 };
enum { ADP_STOPPED_APPLICATION_EXIT = 0x20026 };

static uint32_t semihost(uint32_t op, const void *arg) {
    register uint32_t r0 __asm__("r0") = op;
    register const void *r1 __asm__("r1") = arg;
    __asm__ volatile("bkpt 0xab" : "+r"(r0) : "r"(r1) : "memory");
    return r0;
}

void board_puts(const char *line) {
    /* one call per line: assemble line + newline (long lines in pieces) */
    char buf[256];
    size_t n = strlen(line);
    while (n + 2 > sizeof buf) {
        memcpy(buf, line, sizeof buf - 1);
        buf[sizeof buf - 1] = 0;
        semihost(SYS_WRITE0, buf);
        line += sizeof buf - 1;
        n -= sizeof buf - 1;
    }
    memcpy(buf, line, n);
    buf[n] = '\n';
    buf[n + 1] = 0;
    semihost(SYS_WRITE0, buf);
}

void board_exit(int status) {
    const uint32_t block[2] = {ADP_STOPPED_APPLICATION_EXIT, (uint32_t)status};
    for (;;)
        semihost(SYS_EXIT_EXTENDED, block);
}

static void put_hex32(char *p, uint32_t v) {
    for (int k = 7; k >= 0; k--, v >>= 4)
        p[k] = "0123456789abcdef"[v & 15];
}

void board_fault(uint32_t ipsr) {
    char msg[] = "fault: exception 0x........ (no handler)";
    put_hex32(msg + 19, ipsr & 0x1ff);
    board_puts(msg);
    board_exit(3);
}

/* ---- SysTick: a 24-bit down-counter at the CPU clock, widened by counting its wraps ---- */

#define SYST_CSR (*(volatile uint32_t *)0xE000E010u)
#define SYST_RVR (*(volatile uint32_t *)0xE000E014u)
#define SYST_CVR (*(volatile uint32_t *)0xE000E018u)
#define SCB_ICSR (*(volatile uint32_t *)0xE000ED04u)

static volatile uint32_t systick_wraps;

void fw_systick(void);
void fw_systick(void) { systick_wraps++; }

void board_init(void) {
    SYST_RVR = 0x00FFFFFFu;
    SYST_CVR = 0;
    SYST_CSR = 7u; /* processor clock, interrupt on wrap, enabled */
    /* the write to CVR left it 0 until the first reload: a time read then would be a wrap */
    while (SYST_CVR == 0)
        ;
}

static uint64_t ticks(void) {
    uint32_t wraps, cvr;
    __asm__ volatile("cpsid i" ::: "memory");
    wraps = systick_wraps;
    cvr = SYST_CVR;
    /* wrapped, handler not run yet: the count restarted at the top */
    if ((SCB_ICSR & (1u << 26)) && cvr > 0x00800000u)
        wraps++;
    __asm__ volatile("cpsie i" ::: "memory");
    return (uint64_t)wraps * 0x01000000u + (0x00FFFFFFu - cvr);
}

/* ---- etch/platform.h ---- */

void etch_platform_log(etch_log_level level, const char *msg) {
    (void)level;
    board_puts(msg ? msg : "");
}

uint64_t etch_platform_time_ns(void) {
    const uint64_t t = ticks();
    /* t * 1e9 / hz without overflow for any run shorter than centuries */
    return t / FW_CPU_HZ * 1000000000u + t % FW_CPU_HZ * 1000000000u / FW_CPU_HZ;
}

void etch_platform_abort(const char *why) {
    board_puts(why ? why : "abort");
    board_exit(134);
}

static _Alignas(16) unsigned char heap[FW_HEAP_SIZE];
static size_t heap_used, heap_last, heap_peak; /* the newest block starts at heap_last */

void *etch_platform_alloc(size_t size, size_t align) {
    if (align < 8)
        align = 8;
    size_t at = (heap_used + align - 1) & ~(align - 1);
    if (at > sizeof heap || size > sizeof heap - at)
        return NULL;
    heap_last = heap_used;
    heap_used = at + size;
    heap_peak = heap_used > heap_peak ? heap_used : heap_peak;
    return heap + at;
}

/* A bump allocator: freeing the newest block gives it back (a refused open, a reopen);
 * anything older stays until reset. */
void etch_platform_free(void *ptr) {
    if (ptr && (unsigned char *)ptr >= heap + heap_last && (unsigned char *)ptr < heap + heap_used)
        heap_used = heap_last;
}

uint32_t board_heap_peak(void) { return (uint32_t)heap_peak; }

uint32_t board_stack_unused(void) {
    extern uint32_t __stack_bottom[], __stack_top[];
    uint32_t n = 0;
    for (const uint32_t *p = __stack_bottom; p < __stack_top && *p == 0x57ACC0DEu; p++)
        n += 4;
    return n;
}

/* No heap. newlib-nano's printf family refers to malloc (for the streams that grow; snprintf
 * into a fixed buffer never calls it), so malloc must link: its memory source refuses, and a
 * malloc that were ever called would return NULL instead of taking RAM nobody planned. */
#include <errno.h>
void *_sbrk(int incr);
void *_sbrk(int incr) {
    (void)incr;
    errno = ENOMEM;
    return (void *)-1;
}
