/* Cortex-M start-up: the vector table, then Reset: FPU (and MVE) on, .data copied from flash,
 * .bss zeroed, main(), and its status to board_exit (semihosting: the emulator's exit code).
 * Written in assembly so that nothing touches a floating-point register before CPACR allows
 * it. Symbols come from firmware/common/cortexm.ld.in. */
    .syntax unified
    .thumb

    .section .vectors, "a", %progbits
    .align 7                       /* VTOR wants the table aligned to its size (<= 128 here) */
    .global etch_fw_vectors
etch_fw_vectors:
    .word __stack_top
    .word fw_reset
    .word fw_fault                 /* NMI */
    .word fw_fault                 /* HardFault */
    .word fw_fault                 /* MemManage */
    .word fw_fault                 /* BusFault */
    .word fw_fault                 /* UsageFault */
    .word fw_fault                 /* SecureFault (v8-M) */
    .word 0, 0, 0
    .word fw_fault                 /* SVCall */
    .word fw_fault                 /* DebugMonitor */
    .word 0
    .word fw_fault                 /* PendSV */
    .word fw_systick               /* SysTick */
    .rept 16
    .word fw_fault                 /* external interrupts (none enabled) */
    .endr

    .text
    .thumb_func
    .global fw_reset
    .type fw_reset, %function
fw_reset:
    /* CPACR (0xE000ED88): full access to CP10/CP11 (the FPU; MVE too on v8.1-M) */
    ldr r0, =0xE000ED88
    ldr r1, [r0]
    orr r1, r1, #(0xF << 20)
    str r1, [r0]
    dsb
    isb
    /* .data: flash -> RAM */
    ldr r0, =__data_load
    ldr r1, =__data_start
    ldr r2, =__data_end
1:  cmp r1, r2
    bhs 2f
    ldr r3, [r0], #4
    str r3, [r1], #4
    b 1b
2:  /* .bss: zero */
    ldr r1, =__bss_start
    ldr r2, =__bss_end
    movs r3, #0
3:  cmp r1, r2
    bhs 4f
    str r3, [r1], #4
    b 3b
4:  /* stack guard words: the size report measures the deepest stack use from them */
    ldr r1, =__stack_bottom
    ldr r2, =__stack_top
    sub r2, r2, #64                /* leave the frames in use now alone */
    ldr r3, =0x57ACC0DE
5:  cmp r1, r2
    bhs 6f
    str r3, [r1], #4
    b 5b
6:  bl main
    bl board_exit                  /* does not return */
7:  b 7b
    .size fw_reset, . - fw_reset

    .thumb_func
    .type fw_fault, %function
fw_fault:
    mrs r0, ipsr
    bl board_fault                 /* does not return */
8:  b 8b
    .size fw_fault, . - fw_fault
