/* What firmware/common/startup.S and the harness take from a board (board_*.c). */
#ifndef ETCH_FW_BOARD_H
#define ETCH_FW_BOARD_H

#include <stdint.h>

void board_init(void);
/* One line of output (the newline is added). */
void board_puts(const char *line);
/* Ends the run with `status` as the emulator's (or debugger's) exit status. */
__attribute__((noreturn)) void board_exit(int status);
/* An exception with no handler: report it and exit with status 3. */
__attribute__((noreturn)) void board_fault(uint32_t ipsr);
/* Bytes of stack never written since start-up (the guard words startup.S laid down). */
uint32_t board_stack_unused(void);
/* The most start-up memory (etch_platform_alloc) in use at once. */
uint32_t board_heap_peak(void);

#endif
