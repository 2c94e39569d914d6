// nvml_probe.c — see nvml_probe.h.
#define _GNU_SOURCE
#include "nvml_probe.h"

#include <dlfcn.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend.h"  // backend_cuda_device_uuid
#include "util.h"

struct NvmlProbe {
    NvmlApi api;
    void *lib;  // dlopen handle, NULL for a given table
    void *dev;
    char name[96], uuid[96];
    unsigned max_sm, max_mem, power_limit_mw;
    pthread_t thread;
    pthread_mutex_t lock;
    int running, stop, tag, period_ms;
    NvmlSample *s;
    int n, cap;
};

static const char *err_str(const NvmlApi *a, int code) {
    const char *s = a->error_string ? a->error_string(code) : NULL;
    return s ? s : "error";
}

NvmlProbe *nvml_open_api(const NvmlApi *api, unsigned index, const char *uuid, char *why, size_t why_n) {
    int r = api->init();
    if (r != 0) {
        snprintf(why, why_n, "nvmlInit failed: %s (code %d)", err_str(api, r), r);
        return NULL;
    }
    void *dev = NULL;
    const int by_uuid = uuid && api->get_handle_by_uuid;
    r = by_uuid ? api->get_handle_by_uuid(uuid, &dev) : api->get_handle(index, &dev);
    if (r != 0) {
        char which[96];
        if (by_uuid) snprintf(which, sizeof which, "%s", uuid);
        else snprintf(which, sizeof which, "%u", index);
        snprintf(why, why_n, "NVML has no device %s: %s (code %d)", which, err_str(api, r), r);
        api->shutdown();
        return NULL;
    }
    NvmlProbe *p = pm_calloc(1, sizeof *p);
    p->api = *api;
    p->dev = dev;
    p->tag = -1;
    pthread_mutex_init(&p->lock, NULL);
    if (!api->name || api->name(dev, p->name, sizeof p->name) != 0) snprintf(p->name, sizeof p->name, "GPU %u", index);
    if (!api->uuid || api->uuid(dev, p->uuid, sizeof p->uuid) != 0) p->uuid[0] = 0;
    p->uuid[sizeof p->uuid - 1] = 0;
    if (api->max_clock) {
        if (api->max_clock(dev, NVML_SM_CLOCK, &p->max_sm) != 0) p->max_sm = 0;
        if (api->max_clock(dev, NVML_MEM_CLOCK, &p->max_mem) != 0) p->max_mem = 0;
    }
    if (api->power_limit && api->power_limit(dev, &p->power_limit_mw) != 0) p->power_limit_mw = 0;
    return p;
}

NvmlProbe *nvml_open_cuda_device(int cuda, char *why, size_t why_n) {
    unsigned idx = 0;
    const char *vis = getenv("CUDA_VISIBLE_DEVICES");
    if (vis && *vis >= '0' && *vis <= '9') idx = (unsigned)atoi(vis);
    const char *lib = getenv("PM_NVML_LIB");
    char uuid[64];
    const int by_uuid = cuda && backend_cuda_device_uuid(uuid, sizeof uuid) == 0;
    return nvml_open(lib && *lib ? lib : NULL, idx, by_uuid ? uuid : NULL, why, why_n);
}

NvmlProbe *nvml_open(const char *libname, unsigned index, const char *uuid, char *why, size_t why_n) {
    if (!libname) libname = "libnvidia-ml.so.1";
    void *lib = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        snprintf(why, why_n, "%s could not be loaded: %s", libname, dlerror());
        return NULL;
    }
    NvmlApi a;
    memset(&a, 0, sizeof a);
    // dlsym returns void *; the casts through the table's pointer types are how dlsym is meant to be used
#define SYM(field, sym, required)                                                    \
    do {                                                                             \
        *(void **)&a.field = dlsym(lib, sym);                                        \
        if (!a.field && required) {                                                  \
            snprintf(why, why_n, "%s lacks the symbol %s", libname, sym);            \
            dlclose(lib);                                                            \
            return NULL;                                                             \
        }                                                                            \
    } while (0)
    SYM(init, "nvmlInit_v2", 1);
    SYM(shutdown, "nvmlShutdown", 1);
    SYM(get_handle, "nvmlDeviceGetHandleByIndex_v2", 1);
    SYM(get_handle_by_uuid, "nvmlDeviceGetHandleByUUID", 0);
    SYM(uuid, "nvmlDeviceGetUUID", 0);
    SYM(clock, "nvmlDeviceGetClockInfo", 0);
    SYM(max_clock, "nvmlDeviceGetMaxClockInfo", 0);
    SYM(power, "nvmlDeviceGetPowerUsage", 0);
    SYM(temperature, "nvmlDeviceGetTemperature", 0);
    SYM(utilization, "nvmlDeviceGetUtilizationRates", 0);
    SYM(memory, "nvmlDeviceGetMemoryInfo", 0);
    SYM(name, "nvmlDeviceGetName", 0);
    SYM(error_string, "nvmlErrorString", 0);
    SYM(power_limit, "nvmlDeviceGetEnforcedPowerLimit", 0);
    SYM(clock_reasons, "nvmlDeviceGetCurrentClocksEventReasons", 0);
    if (!a.clock_reasons) SYM(clock_reasons, "nvmlDeviceGetCurrentClocksThrottleReasons", 0);  // (drivers < 535)
    SYM(energy, "nvmlDeviceGetTotalEnergyConsumption", 0);
#undef SYM
    NvmlProbe *p = nvml_open_api(&a, index, uuid, why, why_n);
    if (!p) {
        dlclose(lib);
        return NULL;
    }
    p->lib = lib;
    return p;
}

const char *nvml_device_name(const NvmlProbe *p) { return p->name; }
const char *nvml_device_uuid(const NvmlProbe *p) { return p->uuid; }
unsigned nvml_max_sm_mhz(const NvmlProbe *p) { return p->max_sm; }
unsigned nvml_max_mem_mhz(const NvmlProbe *p) { return p->max_mem; }
double nvml_power_limit_w(const NvmlProbe *p) { return 1e-3 * p->power_limit_mw; }
double nvml_energy_j(NvmlProbe *p) {
    unsigned long long mj;
    return p->api.energy && p->api.energy(p->dev, &mj) == 0 ? 1e-3 * (double)mj : NAN;
}

NvmlSample nvml_read(NvmlProbe *p) {
    const NvmlApi *a = &p->api;
    NvmlSample s = {pm_now(), -1, NAN, NAN, NAN, NAN, NAN, NAN, NAN, -1, NAN};
    unsigned v, r2[2];
    unsigned long long m3[3], mask;
    if (a->clock && a->clock(p->dev, NVML_SM_CLOCK, &v) == 0) s.sm_mhz = (float)v;
    if (a->clock && a->clock(p->dev, NVML_MEM_CLOCK, &v) == 0) s.mem_mhz = (float)v;
    if (a->power && a->power(p->dev, &v) == 0) s.power_w = 1e-3f * (float)v;
    if (a->temperature && a->temperature(p->dev, 0, &v) == 0) s.temp_c = (float)v;
    if (a->utilization && a->utilization(p->dev, r2) == 0) s.util_gpu = (float)r2[0], s.util_mem = (float)r2[1];
    if (a->memory && a->memory(p->dev, m3) == 0) s.mem_used = (double)m3[2];
    if (a->clock_reasons && a->clock_reasons(p->dev, &mask) == 0) s.reasons = (long long)(mask & 0xffffffffull);
    s.energy_j = nvml_energy_j(p);
    return s;
}

static void *sampler(void *arg) {
    NvmlProbe *p = arg;
    for (;;) {
        NvmlSample s = nvml_read(p);
        pthread_mutex_lock(&p->lock);
        int stop = p->stop;
        s.tag = p->tag;
        if (p->n == p->cap) {
            p->cap = p->cap ? 2 * p->cap : 1024;
            p->s = pm_realloc(p->s, sizeof(NvmlSample) * p->cap);
        }
        p->s[p->n++] = s;
        pthread_mutex_unlock(&p->lock);
        if (stop) break;
        struct timespec ts = {p->period_ms / 1000, (long)(p->period_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

int nvml_start(NvmlProbe *p, int period_ms) {
    if (p->running) return 0;
    p->period_ms = period_ms > 0 ? period_ms : 1;
    p->stop = 0;
    if (pthread_create(&p->thread, NULL, sampler, p) != 0) return -1;
    p->running = 1;
    return 0;
}

void nvml_stop(NvmlProbe *p) {
    if (!p->running) return;
    pthread_mutex_lock(&p->lock);
    p->stop = 1;
    pthread_mutex_unlock(&p->lock);
    pthread_join(p->thread, NULL);
    p->running = 0;
}

void nvml_set_tag(NvmlProbe *p, int tag) {
    pthread_mutex_lock(&p->lock);
    p->tag = tag;
    pthread_mutex_unlock(&p->lock);
}

static void stat_add(NvmlStat *st, double v) {
    if (isnan(v)) return;
    if (st->n == 0 || v < st->min) st->min = v;
    if (st->n == 0 || v > st->max) st->max = v;
    st->mean += v;  // a sum until nvml_summary divides
    st->n++;
}

static void stat_finish(NvmlStat *st) {
    if (st->n) st->mean /= st->n;
    else st->mean = st->min = st->max = NAN;
}

double nvml_interval_energy_j(const NvmlSummary *s, double secs, double difference_j, int *by_rate) {
    const int rate = s->energy_updates >= 2 && s->energy_window_s >= 0.25;
    if (by_rate) *by_rate = rate;
    return rate ? s->energy_rate_w * secs : difference_j;
}

void nvml_summary(NvmlProbe *p, int tag, NvmlSummary *s) {
    memset(s, 0, sizeof *s);
    s->energy_rate_w = s->energy_window_s = NAN;
    int first = -1, last = -1;  // the tag's first and last samples that saw the energy counter move
    pthread_mutex_lock(&p->lock);
    for (int i = 0; i < p->n; i++) {
        const NvmlSample *x = &p->s[i];
        if (x->tag != tag) continue;
        if (i > 0 && !isnan(x->energy_j) && !isnan(p->s[i - 1].energy_j) && x->energy_j != p->s[i - 1].energy_j) {
            if (first < 0) first = i;
            last = i;
            s->energy_updates++;
        }
        s->samples++;
        stat_add(&s->sm_mhz, x->sm_mhz);
        stat_add(&s->mem_mhz, x->mem_mhz);
        stat_add(&s->power_w, x->power_w);
        stat_add(&s->temp_c, x->temp_c);
        stat_add(&s->util_gpu, x->util_gpu);
        stat_add(&s->util_mem, x->util_mem);
        stat_add(&s->mem_used, x->mem_used);
        if (x->reasons >= 0) {
            const unsigned long long r = (unsigned long long)x->reasons;
            s->reasons_n++;
            s->power_cap_n += (r & NVML_REASON_SW_POWER_CAP) != 0;
            s->thermal_n += (r & (NVML_REASON_SW_THERMAL | NVML_REASON_HW_THERMAL)) != 0;
            s->hw_slowdown_n += (r & (NVML_REASON_HW_SLOWDOWN | NVML_REASON_HW_POWER_BRAKE)) != 0;
        }
    }
    if (first >= 0 && last > first) {
        s->energy_window_s = p->s[last].t - p->s[first].t;
        s->energy_rate_w = (p->s[last].energy_j - p->s[first].energy_j) / s->energy_window_s;
    }
    pthread_mutex_unlock(&p->lock);
    NvmlStat *all[] = {&s->sm_mhz, &s->mem_mhz, &s->power_w, &s->temp_c, &s->util_gpu, &s->util_mem, &s->mem_used};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) stat_finish(all[i]);
}

NvmlSample *nvml_samples(NvmlProbe *p, int *n) {
    pthread_mutex_lock(&p->lock);
    NvmlSample *c = pm_malloc(sizeof(NvmlSample) * (p->n ? p->n : 1));
    memcpy(c, p->s, sizeof(NvmlSample) * p->n);
    *n = p->n;
    pthread_mutex_unlock(&p->lock);
    return c;
}

void nvml_close(NvmlProbe *p) {
    if (!p) return;
    nvml_stop(p);
    p->api.shutdown();
    if (p->lib) dlclose(p->lib);
    pthread_mutex_destroy(&p->lock);
    free(p->s);
    free(p);
}
