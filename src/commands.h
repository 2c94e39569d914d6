// commands.h — the `packmamba` subcommands; each parses its own flags and returns the process exit code.
#pragma once
#include <stddef.h>

int cmd_train(int argc, char **argv);     // train.c
int cmd_eval(int argc, char **argv);      // train.c
int cmd_generate(int argc, char **argv);  // generate.c
int cmd_plot(int argc, char **argv);      // plot.c
// A checkpoint directory, or a run directory whose newest checkpoint is meant: the checkpoint's path in out.
int checkpoint_resolve(const char *path, char *out, size_t n);  // train.c; 0 or -1 with pm_error
