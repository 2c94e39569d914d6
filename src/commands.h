// commands.h — the `packmamba` subcommands; each parses its own flags and returns the process exit code.
#pragma once
#include <stddef.h>

int cmd_train(int argc, char **argv);     // train.c
int cmd_eval(int argc, char **argv);      // train.c
int cmd_export(int argc, char **argv);    // train.c
int cmd_generate(int argc, char **argv);  // generate.c
int cmd_plot(int argc, char **argv);      // plot.c
