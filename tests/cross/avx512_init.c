/*
 * /init of the initramfs that tests/cross/run_avx512.sh boots in Bochs: checks that the
 * emulated CPU and the kernel give user programs AVX-512 (CPUID and XCR0), then runs each
 * line of /etch/commands (a name, a working directory and an argument vector, fields
 * separated by tabs) with ETCH_TEST_ISAS=avx512 (the kernel tests then run their AVX-512
 * variants alone: the host runs the others) and its output on the serial console, and
 * reports:
 *
 *   ETCH-AVX512: avx512 usable              (or "not usable: ..." and no command runs)
 *   ETCH-AVX512: run NAME
 *   ETCH-AVX512: exit NAME STATUS           (STATUS: exit code, or 128 + signal)
 *   ETCH-AVX512: done
 *
 * then asks Bochs to end the simulation (its shutdown port) and powers off. Built static by
 * the script with the host's compiler; it is not part of the library.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/io.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#define MAX_ARGS 32

static unsigned long long xgetbv0(void) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

/* NULL when what etch's AVX-512 variant needs (src/kernels/optimized/isa.c: AVX-512
 * F/BW/DQ/VL and FMA) can run in user mode, else what is missing: the tests would only say
 * "not supported", this says whether the emulated CPU or the kernel lacks it. */
static const char *avx512_missing(void) {
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27)))
        return "OSXSAVE is off (the kernel did not enable XSAVE)";
    if (!(c & (1u << 12)))
        return "CPUID leaf 1 lacks FMA";
    if ((xgetbv0() & 0xe6) != 0xe6)
        return "XCR0 lacks the YMM / opmask / ZMM state (the kernel disabled it)";
    if (__get_cpuid_max(0, NULL) < 7)
        return "no CPUID leaf 7";
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned need = (1u << 16) | (1u << 17) | (1u << 30) | (1u << 31);
    if ((b & need) != need)
        return "CPUID leaf 7 lacks AVX512F/DQ/BW/VL";
    return NULL;
}

static void finish(void) {
    printf("ETCH-AVX512: done\n");
    fflush(stdout);
    /* the console's last lines through the emulated UART before the machine goes */
    tcdrain(STDOUT_FILENO);
    sleep(1);
    sync();
    /* Bochs ends the simulation when "Shutdown" is written to port 0x8900 */
    if (ioperm(0x8900, 1, 1) == 0)
        for (const char *s = "Shutdown"; *s; s++)
            outb((unsigned char)*s, 0x8900);
    reboot(RB_POWER_OFF);
    for (;;)
        pause();
}

int main(void) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    mount("proc", "/proc", "proc", 0, NULL);
    /* No tmpfs over /tmp: the root file system (the unpacked initramfs) is already writable,
     * and a build tree under /tmp (a CI clone there) would be hidden by the mount. */
    const char *missing = avx512_missing();
    if (missing) {
        printf("ETCH-AVX512: avx512 not usable: %s\n", missing);
        finish();
    }
    printf("ETCH-AVX512: avx512 usable\n");
    FILE *f = fopen("/etch/commands", "r");
    if (!f) {
        printf("ETCH-AVX512: cannot open /etch/commands\n");
        finish();
    }
    static char line[8192];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        char *fields[MAX_ARGS + 3];
        int n = 0;
        for (char *p = strtok(line, "\t"); p && n < MAX_ARGS + 2; p = strtok(NULL, "\t"))
            fields[n++] = p;
        if (n < 3) /* name, directory, program */
            continue;
        fields[n] = NULL;
        printf("ETCH-AVX512: run %s\n", fields[0]);
        const pid_t pid = fork();
        if (pid == 0) {
            if (chdir(fields[1]) != 0)
                _exit(126);
            setenv("TMPDIR", "/tmp", 1);
            setenv("ETCH_TEST_ISAS", "avx512", 1); /* the others run on the host */
            execv(fields[2], fields + 2);
            _exit(127);
        }
        int st = 0;
        if (pid < 0 || waitpid(pid, &st, 0) < 0)
            st = 255 << 8;
        printf("ETCH-AVX512: exit %s %d\n", fields[0],
               WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    }
    fclose(f);
    finish();
    return 0;
}
