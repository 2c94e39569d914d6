// main.c — the `packmamba` command: dispatches to the subcommands.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "cmd_data.h"
#include "commands.h"

static const struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} commands[] = {
    {"prepare", cmd_prepare, "tokenize a corpus into document shards"},
    {"stats", cmd_stats, "documents, lengths and the fill of each batching policy"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"train", cmd_train, "train a model (CPU or CUDA)"},
    {"eval", cmd_eval, "loss and perplexity of a checkpoint, per document on request"},
    {"export", cmd_export, "write a checkpoint for transformers (MambaForCausalLM) or mamba_ssm (pytorch_model.bin)"},
    {"generate", cmd_generate, "sample text from a checkpoint (recurrent decoding)"},
    {"bench", cmd_bench, "characterize training speed: sweeps, per-op time, memory, roofline, report"},
    {"plot", cmd_plot, "loss and throughput curves of a run (PNG and SVG through gnuplot)"},
};

static void usage(FILE *f) {
    fprintf(f, "usage: packmamba COMMAND [options]   (packmamba COMMAND --help for each)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-10s %s\n", commands[i].name, commands[i].help);
}

int main(int argc, char **argv) {
    // The CPU backend mixes OpenMP regions (conv, scan, norms) with OpenBLAS's own threads (GEMMs). With OpenMP's
    // default active waiting, idle OpenMP threads spin on the cores the GEMM threads need: on 2 cores a tiny-model
    // step ran 1.6x slower with 2 threads than with PASSIVE waiting (docs/cpu_perf.md). libgomp reads the policy
    // before main(), so when the user has not chosen one, set it and re-execute once.
    if (!getenv("OMP_WAIT_POLICY")) {
        setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
        execv("/proc/self/exe", argv);  // returns only on failure: then carry on with the default policy
    }
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(argv[1], commands[i].name) == 0) return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "packmamba: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
