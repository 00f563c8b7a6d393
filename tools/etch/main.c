/* etch — command-line front end: dispatch to one file per subcommand. */
#include <string.h>

#include "cli_util.h"
#include "commands.h"

static const cli_command commands[] = {
    {"info", "describe a program: header, segments, methods, operators, memory, debug info",
     cmd_info, cmd_info_usage},
    {"run", "run a method on .npy inputs (or ones) and save or print its outputs", cmd_run,
     cmd_run_usage},
    {"verify", "run the test cases of a bundled program (.bpte) and check the outputs",
     cmd_verify, cmd_verify_usage},
    {"llm", "generate text with a language model (.pte) and a tokenizer", cmd_llm,
     cmd_llm_usage},
    {"bench", "time a method: median/min/max, load time, peak RSS, time per operator",
     cmd_bench, cmd_bench_usage},
    {"embed", "a program as an aligned C array + a header of its memory sizes (firmware)",
     cmd_embed, cmd_embed_usage},
    {"model", "the on-device model store: install, list, verify, rollback, remove", cmd_model,
     cmd_model_usage},
    {"features", "audio features (MFCC, log-mel) of a WAV file as a model's .npy input",
     cmd_features, cmd_features_usage},
};
#define NUM_COMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *out) {
    fprintf(out,
            "etch %s — run ExecuTorch programs (.pte) on device\n"
            "\n"
            "usage: etch <command> [options]\n"
            "       etch help <command>\n"
            "       etch -V, --version\n"
            "\n"
            "commands:\n",
            ETCH_VERSION_STRING);
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n'etch <command> --help' describes a command's options.\n"
                 "Exit status: 0 success, 1 failure, 2 bad usage.\n");
}

/* "info, run, ..." for error messages. */
static const char *command_list(void) {
    static char buf[256];
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < NUM_COMMANDS && len < sizeof buf; i++) {
        int w = snprintf(buf + len, sizeof buf - len, "%s%s", i ? ", " : "", commands[i].name);
        if (w < 0)
            break;
        len += (size_t)w;
    }
    return buf;
}

static const cli_command *find_command(const char *name) {
    for (size_t i = 0; i < NUM_COMMANDS; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return CLI_USAGE;
    }
    const char *name = argv[1];
    if (strcmp(name, "-h") == 0 || strcmp(name, "--help") == 0) {
        usage(stdout);
        return CLI_OK;
    }
    if (strcmp(name, "-V") == 0 || strcmp(name, "--version") == 0 ||
        strcmp(name, "version") == 0) {
        printf("etch %s\n", ETCH_VERSION_STRING);
        return CLI_OK;
    }
    if (strcmp(name, "help") == 0) {
        if (argc == 2) {
            usage(stdout);
            return CLI_OK;
        }
        if (argc > 3)
            return cli_usage_error(NULL, "'help' takes at most one command name");
        if (strcmp(argv[2], "help") == 0) { /* 'etch help help': help's usage is the general one */
            usage(stdout);
            return CLI_OK;
        }
        const cli_command *c = find_command(argv[2]);
        if (!c)
            return cli_usage_error(NULL, "unknown command '%s' (commands: %s)", argv[2],
                                   command_list());
        c->usage(stdout);
        return CLI_OK;
    }
    const cli_command *c = find_command(name);
    if (!c) {
        if (name[0] == '-')
            return cli_usage_error(NULL, "unknown option '%s'", name);
        return cli_usage_error(NULL, "unknown command '%s' (commands: %s)", name,
                               command_list());
    }
    if (cli_wants_help(argc - 1, argv + 1)) {
        c->usage(stdout);
        return CLI_OK;
    }
    return c->run(argc - 1, argv + 1);
}
