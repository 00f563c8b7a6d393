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

#endif
