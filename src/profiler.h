// profiler.h — times the model's named regions (the Model hook, model.h) for `packmamba bench`.
// Two clocks: a backend's GPU events when it has them (backend.h event_record: no synchronize per op, so the
// profiled step runs as an unprofiled one would), otherwise synchronize + the host clock around every region
// (exact on the CPU, where synchronize is a no-op; on a GPU it adds a launch gap per op, so bench then times the
// step separately without the hook). Keeps the regions of the last step (for the Chrome trace) and per-region
// totals over all profiled steps.
#pragma once
#include "backend.h"

#define PROF_MAX_KEYS 64

typedef struct {
    const char *name;  // region name (the key's copy, stable for the profiler's lifetime)
    double t0, t1;     // seconds since the step began
    int call;          // occurrence of this name within the step: 0, 1, ...
} ProfEvent;

typedef struct {
    const Backend *bk;
    int use_events;  // 1: bk->event_record and friends; 0: synchronize + host clock
    // the current (or last finished) step
    ProfEvent *ev;
    void **bev;  // (2 * cap) backend events for begin/end of ev[i] (use_events only)
    int n_ev, cap_ev;
    double step_t0;
    void *step_e0;
    double step_s;  // the last step's duration on the profiler's clock (its regions lie inside [0, step_s])
    int in_step;
    // totals over profiled steps, per region name in order of first appearance
    int n_keys;
    char *keys[PROF_MAX_KEYS];
    double total_s[PROF_MAX_KEYS];
    long calls[PROF_MAX_KEYS];
    int steps;
    // the largest share of one accumulated step's time (step_s) that its regions cover: ~1 when they cover the
    // step. Per step, as the host clock's share on a loaded machine drops in whichever steps the process is
    // preempted between regions (test_bench asserts it; the mean over steps would carry that noise).
    double cover_max;
    // called after every region's end (outside the timed interval): bench samples memory here
    void (*on_end)(void *ctx);
    void *on_end_ctx;
} Profiler;

// use_events is honoured only when the backend has all three event functions.
void prof_init(Profiler *p, const Backend *bk, int use_events);
void prof_free(Profiler *p);
void prof_hook(void *ctx, const char *region, int begin);  // for Model.hook, ctx = the Profiler
void prof_step_begin(Profiler *p);
// Ends the step: resolves event times (synchronizes), adds the step's regions to the totals when `accumulate`.
void prof_step_end(Profiler *p, int accumulate);
void prof_reset_totals(Profiler *p);
// Index of a region name in the totals, or -1.
int prof_key(const Profiler *p, const char *name);
