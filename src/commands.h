// commands.h — the `packmamba` subcommands; each parses its own flags and returns the process exit code.
#pragma once

int cmd_train(int argc, char **argv);     // train.c
int cmd_eval(int argc, char **argv);      // train.c
