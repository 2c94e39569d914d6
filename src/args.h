// args.h — a small command-line flag parser shared by the subcommands: declare the flags with their defaults
// and help text, parse, and get `--help` output that shows every default.
#pragma once

typedef enum { ARG_STR, ARG_INT, ARG_FLOAT, ARG_BOOL } ArgKind;

typedef struct {
    const char *name;  // "--seq-len"
    ArgKind kind;
    void *value;       // const char **, int *, float *, int * (bool)
    const char *help;
} ArgSpec;

// Parses argv[1..argc-1] (argv[0] is the subcommand). Positional arguments are collected into pos (up to
// max_pos; their count into *npos, which may be NULL when none are allowed). Prints usage and exits 0 on
// --help; dies with a one-line message on an unknown flag, a missing or malformed value, or extra arguments.
void args_parse(int argc, char **argv, const char *usage, ArgSpec *specs, int nspecs, const char **pos,
                int max_pos, int *npos);
