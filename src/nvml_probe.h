// nvml_probe.h — GPU clocks, power, temperature, utilization and memory through NVML, loaded at run time with
// dlopen("libnvidia-ml.so.1") so packmamba neither links nor needs it: without NVML bench reports why and goes
// on. A sampler thread reads the device every few milliseconds; bench tags the samples with the configuration
// being timed and summarizes each tag.
#pragma once
#include <stddef.h>

// The NVML entry points bench uses, as plain function pointers (NVML's return codes are ints, 0 = success;
// nvmlDevice_t is an opaque pointer). nvml_open fills them with dlsym; tests fill them with fakes.
typedef struct {
    int (*init)(void);                                          // nvmlInit_v2
    int (*shutdown)(void);                                      // nvmlShutdown
    int (*get_handle)(unsigned index, void **dev);              // nvmlDeviceGetHandleByIndex_v2
    int (*get_handle_by_uuid)(const char *uuid, void **dev);    // nvmlDeviceGetHandleByUUID (may be NULL)
    int (*uuid)(void *dev, char *buf, unsigned len);            // nvmlDeviceGetUUID (may be NULL)
    int (*clock)(void *dev, int type, unsigned *mhz);           // nvmlDeviceGetClockInfo (1 = SM, 2 = memory)
    int (*max_clock)(void *dev, int type, unsigned *mhz);       // nvmlDeviceGetMaxClockInfo
    int (*power)(void *dev, unsigned *milliwatts);              // nvmlDeviceGetPowerUsage
    int (*temperature)(void *dev, int sensor, unsigned *c);     // nvmlDeviceGetTemperature (0 = GPU)
    int (*utilization)(void *dev, unsigned rates[2]);           // nvmlDeviceGetUtilizationRates {gpu, memory} %
    int (*memory)(void *dev, unsigned long long m[3]);          // nvmlDeviceGetMemoryInfo {total, free, used}
    int (*name)(void *dev, char *buf, unsigned len);            // nvmlDeviceGetName
    int (*power_limit)(void *dev, unsigned *milliwatts);        // nvmlDeviceGetEnforcedPowerLimit
    // nvmlDeviceGetCurrentClocksEventReasons (older drivers: ...ClocksThrottleReasons): why the clocks are below
    // their maximum, a mask of NVML_REASON_*
    int (*clock_reasons)(void *dev, unsigned long long *mask);
    int (*energy)(void *dev, unsigned long long *millijoules);  // nvmlDeviceGetTotalEnergyConsumption (since load)
    const char *(*error_string)(int code);                      // nvmlErrorString (may be NULL)
} NvmlApi;

enum { NVML_SM_CLOCK = 1, NVML_MEM_CLOCK = 2 };

// NVML's clock event reasons (nvmlClocksEventReason*): the ones bench counts. A training step that draws the
// board's power limit runs its SMs below their maximum clock with SW_POWER_CAP set; the thermal and hardware
// slowdowns are the card protecting itself.
#define NVML_REASON_SW_POWER_CAP 0x4ull
#define NVML_REASON_HW_SLOWDOWN 0x8ull
#define NVML_REASON_SW_THERMAL 0x20ull
#define NVML_REASON_HW_THERMAL 0x40ull
#define NVML_REASON_HW_POWER_BRAKE 0x80ull

typedef struct {
    double t;  // pm_now() seconds
    int tag;   // the tag set when it was taken (-1: none)
    // NAN where the device does not report the quantity
    float sm_mhz, mem_mhz, power_w, temp_c, util_gpu, util_mem;
    double mem_used;  // bytes
    long long reasons;  // clock event reasons (NVML_REASON_*), -1 where the device does not report them
    double energy_j;    // the device's energy counter (nvml_energy_j), NaN where it has none
} NvmlSample;

typedef struct {
    int n;
    double mean, min, max;
} NvmlStat;

typedef struct {
    int samples;
    NvmlStat sm_mhz, mem_mhz, power_w, temp_c, util_gpu, util_mem, mem_used;
    // of the `reasons_n` samples that report clock event reasons, how many had the SMs held down by the power
    // limit (SW_POWER_CAP), by heat (SW_THERMAL or HW_THERMAL), by the hardware's slowdowns (HW_SLOWDOWN,
    // HW_POWER_BRAKE)
    int reasons_n, power_cap_n, thermal_n, hw_slowdown_n;
    // The mean power from the energy counter between its first and last update seen in these samples (NaN with
    // fewer than two updates): the driver moves the counter in steps, so a difference of two readings at arbitrary
    // times is off by up to a step at each end, while the rate between two updates is not (each update is seen
    // within one sampling period of when it happened). energy_window_s: the time between those two updates.
    double energy_rate_w, energy_window_s;
    int energy_updates;
} NvmlSummary;

// The energy over an interval of `secs` whose samples s summarizes, `difference_j` being the counter's difference
// across it: the summary's rate between the counter's moves times secs where it saw two moves at least 0.25 s apart
// (*by_rate = 1), else difference_j (*by_rate = 0; off by up to one of the counter's steps at each end). by_rate
// may be NULL.
double nvml_interval_energy_j(const NvmlSummary *s, double secs, double difference_j, int *by_rate);

typedef struct NvmlProbe NvmlProbe;

// Loads `libname` (NULL: "libnvidia-ml.so.1") and opens the device whose UUID is `uuid` ("GPU-..."), or where
// uuid is NULL or the library cannot look devices up by UUID, device `index`. NULL with the reason in `why` when
// the library, a symbol, initialization or the device is unavailable.
NvmlProbe *nvml_open(const char *libname, unsigned index, const char *uuid, char *why, size_t why_n);
// The NVML handle of the device this process computes on, as bench and train open it: the library PM_NVML_LIB
// names (default libnvidia-ml.so.1); with cuda set, the CUDA backend's current device by its UUID (so a rank of a
// data-parallel run, or CUDA_VISIBLE_DEVICES in any form, gets its own card), else NVML index the first entry of
// CUDA_VISIBLE_DEVICES when that is a number (else 0).
NvmlProbe *nvml_open_cuda_device(int cuda, char *why, size_t why_n);
// The same over a given function table (tests).
NvmlProbe *nvml_open_api(const NvmlApi *api, unsigned index, const char *uuid, char *why, size_t why_n);
void nvml_close(NvmlProbe *p);  // stops the sampler if running

const char *nvml_device_name(const NvmlProbe *p);
// The device's UUID as NVML gives it ("GPU-..."), "" where the library does not report it: what tells two ranks'
// cards apart (train sums the energy of distinct cards).
const char *nvml_device_uuid(const NvmlProbe *p);
unsigned nvml_max_sm_mhz(const NvmlProbe *p);   // 0 if unknown
unsigned nvml_max_mem_mhz(const NvmlProbe *p);
double nvml_power_limit_w(const NvmlProbe *p);  // the enforced board power limit; 0 if unknown
// The energy the device has used since its driver loaded, in joules (NaN if the device does not count it); the
// difference of two readings is the energy in between, to the counter's update period.
double nvml_energy_j(NvmlProbe *p);
NvmlSample nvml_read(NvmlProbe *p);  // one reading now (tag -1)

// Sampler thread, one reading every period_ms. Returns 0 or -1 (thread could not start).
int nvml_start(NvmlProbe *p, int period_ms);
void nvml_stop(NvmlProbe *p);
void nvml_set_tag(NvmlProbe *p, int tag);  // readings taken from now on carry `tag`
// Mean/min/max over the readings with `tag` (NaN readings skipped).
void nvml_summary(NvmlProbe *p, int tag, NvmlSummary *s);
// A malloc'd copy of every reading so far; *n gets the count.
NvmlSample *nvml_samples(NvmlProbe *p, int *n);
