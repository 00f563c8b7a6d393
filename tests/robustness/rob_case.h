/*
 * One robustness case: the whole path an application takes with untrusted program bytes.
 * Shared by the in-process corpus replay (test_robustness.c) and the libFuzzer target
 * (fuzz/fuzz_program.c), so both exercise exactly the same calls:
 *
 *   [.ptd: etch_data_map_open_buffer]
 *   etch_program_open_buffer (identify, header, full verification)
 *   for every method: meta -> memory sized from the metadata (plain malloc, exact sizes so
 *   the sanitizer sees any overrun) -> etch_method_load -> set every input (ones) ->
 *   etch_method_execute twice -> read every output byte -> etch_method_free
 *   [.bpte: etch_bundled_open_buffer -> load every test case's inputs -> execute -> verify]
 *
 * Every call must return either ETCH_OK or a known error status with a message. Anything
 * else found on the way is a "violation" (counted, described, and fatal in the fuzzer).
 * Memory-safety errors are left to the sanitizers: this code installs no signal handlers.
 */
#ifndef ETCH_ROB_CASE_H
#define ETCH_ROB_CASE_H

#include <stddef.h>
#include <stdint.h>

#include "etch/status.h"

/* Where a case ended: the stage of the first failure, or ROB_DONE. */
typedef enum rob_stage {
    ROB_OPEN_PTD = 0, /* etch_data_map_open_buffer (only when a .ptd is given) */
    ROB_OPEN,         /* etch_program_open_buffer */
    ROB_REFUSED,      /* metadata asks for more memory than the cap: not attempted */
    ROB_LOAD,         /* etch_method_load */
    ROB_INPUT,        /* etch_method_set_input */
    ROB_EXEC1,        /* first etch_method_execute */
    ROB_EXEC2,        /* second etch_method_execute */
    ROB_BUNDLED,      /* bundled-program API (open, load inputs, execute, verify) */
    ROB_SAME,         /* skip_plain_exec without bundled checks: nothing new to run */
    ROB_DONE,         /* every method loaded and ran twice */
    ROB_NUM_STAGES
} rob_stage;

const char *rob_stage_name(rob_stage s);

/* Outcome counts: per stage, per status (statuses are < 256). */
typedef struct rob_stats {
    unsigned long count[ROB_NUM_STAGES][256];
    unsigned long cases;
    unsigned long violations;
} rob_stats;

typedef struct rob_options {
    size_t max_memory;    /* cap on pool + arenas + input bytes of one method */
    size_t temp_size;     /* kernel scratch per method */
    int bundled_checks;   /* also drive the bundled-program API on BP08 input */
    int quiet;            /* do not print violations (the caller reports them) */
    /* The program image is byte-identical to one whose executes already ran (e.g. a .bpte
     * mutated outside its embedded program): skip the two plain executes, whose outcome is
     * already known; the bundled checks still run (when the wrapper opens: otherwise the
     * methods are not even loaded, as that too would repeat the earlier run). */
    int skip_plain_exec;
    /* The second plain execute runs through a background job (etch/async.h): every case
     * whose first execute passes also runs on a worker thread, where a failure must still
     * come with a message. */
    int async_exec;
} rob_options;

rob_options rob_default_options(void);

/* Run one case. `ptd` may be NULL. Returns the number of violations (0 = clean), describes
 * the first one in `why` (when non-NULL), and adds the outcomes (one per method, or one for
 * the open failure) to `stats` (when non-NULL). */
int rob_run(const uint8_t *pte, size_t pte_size, const uint8_t *ptd, size_t ptd_size,
            const rob_options *opts, rob_stats *stats, char *why, size_t why_size);

/* Print the non-zero outcome counts as "  stage  Status  n" lines. */
void rob_stats_print(const rob_stats *stats, const char *indent);
void rob_stats_add(rob_stats *into, const rob_stats *from);

#endif
