// fake_nvml.c — a stand-in for libnvidia-ml.so.1 that test_cli loads through PM_NVML_LIB: one device, named
// "fake GPU", whose energy counter rises at exactly FAKE_NVML_WATTS from nvmlInit_v2 on (continuously, in
// millijoules). Whatever packmamba reports about it is checked against that known power. Only the symbols
// nvml_probe.c needs (and the energy counter) are here; the rest are optional there.
#include <string.h>
#include <time.h>

#define FAKE_NVML_WATTS 250.0

static double t_init;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int nvmlInit_v2(void) {
    t_init = now_s();
    return 0;
}
int nvmlShutdown(void) { return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **dev) {
    if (index != 0) return 2;  // NVML_ERROR_INVALID_ARGUMENT
    *dev = (void *)&t_init;
    return 0;
}
int nvmlDeviceGetName(void *dev, char *buf, unsigned len) {
    (void)dev;
    if (len == 0) return 2;
    strncpy(buf, "fake GPU", len - 1);
    buf[len - 1] = 0;
    return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void *dev, unsigned long long *millijoules) {
    (void)dev;
    *millijoules = (unsigned long long)(1e3 * FAKE_NVML_WATTS * (now_s() - t_init));
    return 0;
}
