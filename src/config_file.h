// config_file.h — JSON config files for the subcommands. A config file is one JSON object whose keys are flag names
// without the leading dashes ("seq_len" or "seq-len" for --seq-len) and whose values have the flag's type:
//     {"data": "data/", "preset": "tiny", "seq_len": 256, "batch": 8, "lr": 3e-3, "deterministic": true}
// The file is turned into "--key value" arguments that the caller places before its own command-line arguments
// and parses with args_parse, so a flag given on the command line overrides the file (args_parse applies
// arguments in order). Every check happens here, against the command's ArgSpec table, so that a bad file is
// reported as "<file>: <key>: <problem>" rather than as a command-line error.
#pragma once
#include "args.h"

// Reads `path` and returns in *out_argc / *out_argv a new argument vector: argv[0], then the file's options, then
// argv[1..argc-1]. Checks: the file is one JSON object; every key names a flag in specs (except "config" and
// "help"); strings for ARG_STR, integers in int range for ARG_INT, numbers for ARG_FLOAT, true/false for ARG_BOOL
// (false adds nothing; true adds the bare flag). The vector and its strings are allocated once and meant to live
// until exit. Returns 0, or -1 with pm_error("<path>: ...").
int config_file_args(const char *path, const ArgSpec *specs, int nspecs, int argc, char **argv, int *out_argc,
                     char ***out_argv);

// config_file_args plus the value checks of `packmamba train`: sizes and counts in range (seq_len, batch,
// grad_accum >= 1; steps, warmup, save_every, keep, log_every, val_every, val_batches, window >= 0; lr > 0;
// min_lr_frac in [0, 1]; beta1, beta2 in [0, 1); weight_decay, grad_clip >= 0), a known preset, packing and device.
int train_config_load(const char *path, const ArgSpec *specs, int nspecs, int argc, char **argv, int *out_argc,
                      char ***out_argv);
// The numeric options of train (specs after parsing, from a file or the command line) against the ranges a config
// file's values are checked against: 0, or -1 with pm_error naming the flag, its value and the range.
int train_flags_check(const ArgSpec *specs, int nspecs);
// Frees what train_config_load made for a command line of argc arguments (the options it parsed from there point
// into it: call it when they are no longer read).
void train_config_free(int out_argc, char **out_argv, int argc);
