// shell.h — for the tests that run commands: sh(fmt, ...) formats a command line and runs it through the shell,
// returning its exit status (128 + the signal where it was killed); pm_bin() names the packmamba binary.
#pragma once
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static int sh(const char *fmt, ...) {
    char cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    const int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

// The packmamba binary the command tests run: $PM_BIN (ctest sets it), else build/packmamba.
static inline const char *pm_bin(void) {
    const char *b = getenv("PM_BIN");
    return b && *b ? b : "build/packmamba";
}
