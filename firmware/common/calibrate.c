/* Calibration image (ctest mcu.<cpu>.icount): loops of a known number of instructions timed
 * with the board's clock (SysTick through etch_platform_time_ns), so that the harness's
 * "time execute_ns" can be read as an instruction count under qemu -icount shift=0 (1 virtual
 * ns per instruction) only because this test shows it is one. */
#include <stdint.h>
#include <stdio.h>

#include "board.h"
#include "etch/platform.h"

int main(void) {
    board_init();
    char line[96];
    for (uint32_t n = 10000; n <= 1000000; n *= 10) {
        uint32_t r = n;
        const uint64_t t0 = etch_platform_time_ns();
        /* two instructions per iteration */
        __asm__ volatile("1: subs %0, %0, #1\n\tbne 1b" : "+r"(r) : : "cc");
        const uint64_t t1 = etch_platform_time_ns();
        snprintf(line, sizeof line, "calibrate %lu instructions: %lu ns", (unsigned long)(2 * n),
                 (unsigned long)(t1 - t0));
        board_puts(line);
    }
    return 0;
}
