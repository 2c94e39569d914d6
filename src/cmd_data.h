// cmd_data.h — the data subcommands of the packmamba binary. argv[0] is the subcommand name; each parses its own
// flags (--help lists them with defaults) and returns the process exit code.
//   packmamba prepare --out DIR [--tokenizer byte|PATH] [--val-fraction F] [--ext LIST] [--split-on LINE]
//                     [--invalid error|replace|skip] [--force] INPUT...
//   packmamba stats DIR [--seq-len T] [--batch B] [--window W] [--split all|train|val] [--seed S] [--json]
//   packmamba tokenize [--tokenizer byte|PATH] [--no-special] [TEXT]      (TEXT omitted: read stdin)
#pragma once

int cmd_prepare(int argc, char **argv);
int cmd_stats(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
