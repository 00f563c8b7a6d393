/* The subcommands: one file each (cmd_<name>.c). argv[0] is the subcommand's name. */
#ifndef ETCH_CLI_COMMANDS_H
#define ETCH_CLI_COMMANDS_H

#include <stdio.h>

int cmd_info(int argc, char **argv);
void cmd_info_usage(FILE *out);
int cmd_run(int argc, char **argv);
void cmd_run_usage(FILE *out);
int cmd_verify(int argc, char **argv);
void cmd_verify_usage(FILE *out);
int cmd_llm(int argc, char **argv);
void cmd_llm_usage(FILE *out);
int cmd_bench(int argc, char **argv);
void cmd_bench_usage(FILE *out);
int cmd_embed(int argc, char **argv);
void cmd_embed_usage(FILE *out);
int cmd_model(int argc, char **argv);
void cmd_model_usage(FILE *out);
int cmd_features(int argc, char **argv);
void cmd_features_usage(FILE *out);

#endif
