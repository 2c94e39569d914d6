// fake_nvml.c — a stand-in for libnvidia-ml.so.1 that test_cli and test_dist load through PM_NVML_LIB: one
// device, named "fake GPU", whose energy counter rises at exactly the watts the environment's FAKE_NVML_WATTS
// gives (the test that sets it checks what packmamba reports against it; 250 where it is unset) from nvmlInit_v2
// on (continuously, in millijoules). Its UUID is "GPU-fake-" followed by FAKE_NVML_CARD (default "0"), so ranks
// of one job given different values have different cards, and the same value the same card. Only the symbols
// nvml_probe.c needs (and the energy counter and UUID) are here; the rest are optional there.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double t_init, watts = 250.0;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int nvmlInit_v2(void) {
    const char *w = getenv("FAKE_NVML_WATTS");
    if (w && atof(w) > 0) watts = atof(w);
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
    *millijoules = (unsigned long long)(1e3 * watts * (now_s() - t_init));
    return 0;
}
int nvmlDeviceGetUUID(void *dev, char *buf, unsigned len) {
    (void)dev;
    const char *card = getenv("FAKE_NVML_CARD");
    if (len == 0) return 2;
    snprintf(buf, len, "GPU-fake-%s", card && *card ? card : "0");
    return 0;
}
