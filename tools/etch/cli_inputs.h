/* Method inputs for the CLI (etch run, etch bench): from .npy files, or generated. */
#ifndef ETCH_CLI_INPUTS_H
#define ETCH_CLI_INPUTS_H

#include "cli_util.h"
#include "etch/npy.h"

#define CLI_MAX_INPUTS 256

/* How tensor inputs are made without --inputs (both at the stored, upper-bound shape). */
typedef enum cli_fill {
    CLI_FILL_ONES,   /* ones, as ExecuTorch's executor_runner does */
    CLI_FILL_RANDOM, /* floats uniform in [-1, 1] from a fixed seed; integers 0..3; bools
                        false */
} cli_fill;

/* Everything the inputs borrow: keep it until the method's module is closed. */
typedef struct cli_inputs {
    etch_npy npys[CLI_MAX_INPUTS];
    etch_tensor tensors[CLI_MAX_INPUTS];
    void *data[CLI_MAX_INPUTS];
    char *list;
} cli_inputs;

/* "a.npy,b.npy": every entry non-empty; CLI_OK or a usage error (printed). */
int cli_inputs_check_list(const char *cmd, const char *list);
/* Set every input of m: from `list` (one .npy per input, in order; a non-tensor input takes
 * a 0-d array) or, when list is NULL, tensors made as `fill` says and non-tensor inputs at
 * their exported values. CLI_OK, or CLI_FAIL / CLI_USAGE with the error printed. */
int cli_inputs_set(cli_inputs *in, const char *cmd, const char *list, cli_fill fill,
                   etch_method *m);
void cli_inputs_free(cli_inputs *in); /* a zeroed struct is fine */

/* ---- the options etch run and etch bench share ---------------------------------------------
 * --method NAME, --inputs LIST, --data FILE.ptd, --cpu-threads N, --kernels SET, --no-fusion. */
typedef struct cli_module_args {
    const char *method, *inputs, *data, *threads_s, *kernels_s; /* as given, or NULL */
    bool no_fusion;
    bool no_prepack;
    bool no_blocked_layout;
    bool no_backends;
    int num_threads;             /* parsed by cli_module_args_finish (default:
                                    cli_default_threads()) */
    etch_module_kernels kernels; /* (default optimized) */
} cli_module_args;

/* Match argv[*i] against the shared options (as cli_opt_value / cli_opt_flag do): 1 taken
 * (*i advanced past a value), 0 not one of them, -1 usage error (printed). */
int cli_module_args_take(const char *cmd, int argc, char **argv, int *i, cli_module_args *a);
/* After parsing: check the --inputs list, parse --cpu-threads and --kernels. CLI_OK or
 * CLI_USAGE (error printed). */
int cli_module_args_finish(const char *cmd, cli_module_args *a);
/* etch_module_default_options() with --data, the threads, the kernels and --no-fusion. */
etch_module_options cli_module_args_options(const cli_module_args *a);
/* etch_module_load_method, the failure printed: CLI_OK or CLI_FAIL. A method that needs
 * external data when no --data was given is told to take --data FILE.ptd. */
int cli_module_load_method(etch_module *mod, const char *name, const cli_module_args *a,
                           etch_method **out);

#endif
