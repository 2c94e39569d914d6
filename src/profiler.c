// profiler.c — see profiler.h.
#include "profiler.h"

#include <string.h>

#include "util.h"

void prof_init(Profiler *p, const Backend *bk, int use_events) {
    memset(p, 0, sizeof *p);
    p->bk = bk;
    p->use_events = use_events && bk->event_record && bk->event_elapsed_ms && bk->event_release;
}

void prof_free(Profiler *p) {
    for (int i = 0; i < p->n_keys; i++) free(p->keys[i]);
    free(p->ev);
    free(p->bev);
    memset(p, 0, sizeof *p);
}

int prof_key(const Profiler *p, const char *name) {
    for (int i = 0; i < p->n_keys; i++)
        if (strcmp(p->keys[i], name) == 0) return i;
    return -1;
}

// The key's stable copy of `name`, added on first sight.
static int key_for(Profiler *p, const char *name) {
    int k = prof_key(p, name);
    if (k >= 0) return k;
    if (p->n_keys == PROF_MAX_KEYS) pm_die("bench: more than %d distinct profiling regions", PROF_MAX_KEYS);
    p->keys[p->n_keys] = pm_strdup(name);
    return p->n_keys++;
}

static double host_time(Profiler *p) {
    p->bk->synchronize();
    return pm_now() - p->step_t0;
}

void prof_step_begin(Profiler *p) {
    p->n_ev = 0;
    p->in_step = 1;
    if (p->use_events) {
        p->step_e0 = p->bk->event_record();
    } else {
        p->bk->synchronize();
        p->step_t0 = pm_now();
    }
}

void prof_hook(void *ctx, const char *region, int begin) {
    Profiler *p = ctx;
    if (!p->in_step) return;
    if (begin) {
        if (p->n_ev == p->cap_ev) {
            p->cap_ev = p->cap_ev ? 2 * p->cap_ev : 256;
            p->ev = pm_realloc(p->ev, sizeof(ProfEvent) * p->cap_ev);
            p->bev = pm_realloc(p->bev, sizeof(void *) * 2 * p->cap_ev);
        }
        ProfEvent *e = &p->ev[p->n_ev];
        e->name = p->keys[key_for(p, region)];
        e->call = 0;
        for (int i = p->n_ev - 1; i >= 0; i--)
            if (p->ev[i].name == e->name) {
                e->call = p->ev[i].call + 1;
                break;
            }
        e->t1 = -1;
        p->n_ev++;
        // take the clock last, so bookkeeping stays outside the region
        if (p->use_events) p->bev[2 * (p->n_ev - 1)] = p->bk->event_record();
        else e->t0 = host_time(p);
        return;
    }
    // the most recent open region of this name (regions do not nest in model.c, but tolerate it)
    int i = p->n_ev - 1;
    while (i >= 0 && !(p->ev[i].t1 < 0 && strcmp(p->ev[i].name, region) == 0)) i--;
    if (i < 0) pm_die("bench: profiling region '%s' ended without a begin", region);
    if (p->use_events) {
        p->bev[2 * i + 1] = p->bk->event_record();
        p->ev[i].t1 = 0;  // resolved at the step's end
    } else {
        p->ev[i].t1 = host_time(p);
    }
    if (p->on_end) p->on_end(p->on_end_ctx);
}

void prof_step_end(Profiler *p, int accumulate) {
    if (!p->in_step) return;
    p->in_step = 0;
    if (p->use_events) {
        void *end = p->bk->event_record();
        p->bk->synchronize();
        p->step_s = 1e-3 * p->bk->event_elapsed_ms(p->step_e0, end);
        p->bk->event_release(end);
        for (int i = 0; i < p->n_ev; i++) {
            p->ev[i].t0 = 1e-3 * p->bk->event_elapsed_ms(p->step_e0, p->bev[2 * i]);
            p->ev[i].t1 = 1e-3 * p->bk->event_elapsed_ms(p->step_e0, p->bev[2 * i + 1]);
            p->bk->event_release(p->bev[2 * i]);
            p->bk->event_release(p->bev[2 * i + 1]);
        }
        p->bk->event_release(p->step_e0);
    } else {
        p->step_s = host_time(p);
    }
    if (!accumulate) return;
    double covered = 0;
    for (int i = 0; i < p->n_ev; i++) {
        int k = prof_key(p, p->ev[i].name);
        p->total_s[k] += p->ev[i].t1 - p->ev[i].t0;
        p->calls[k]++;
        covered += p->ev[i].t1 - p->ev[i].t0;
    }
    if (p->step_s > 0 && covered / p->step_s > p->cover_max) p->cover_max = covered / p->step_s;
    p->steps++;
}

void prof_reset_totals(Profiler *p) {
    memset(p->total_s, 0, sizeof p->total_s);
    memset(p->calls, 0, sizeof p->calls);
    p->steps = 0;
    p->cover_max = 0;
}
