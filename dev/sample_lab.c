// sample_lab.c — one draw of generate's sampling (src/generate.c, sample_token) from a 50K vocabulary, timed
// against two earlier forms on the same host: qsort over every candidate (before the forty-first session) and the
// radix sort over every candidate with its buffers allocated at every draw (the build of calls 322-324). Logits are normal with the standard
// deviation named (0.05: a fresh model's nearly flat ones). `make build` builds it: build/sample_lab.
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "generate.h"
#include "util.h"

typedef struct {
    float p;
    int id;
} LabCand;

static int lab_desc(const void *a, const void *b) {
    float x = ((const LabCand *)a)->p, y = ((const LabCand *)b)->p;
    return x < y ? 1 : x > y ? -1 : ((const LabCand *)a)->id - ((const LabCand *)b)->id;
}

// the common tail of both old forms: top-k, top-p and the draw over candidates already in order
static int lab_draw(LabCand *c, int n, double sum, int top_k, float top_p, PmRng *rng) {
    if (top_k > 0 && top_k < n) n = top_k;
    double acc = 0, total = 0;
    for (int i = 0; top_p < 1 && i < n; i++)
        if ((acc += c[i].p / sum) >= top_p) n = i + 1;
    for (int i = 0; i < n; i++) total += c[i].p;
    double r = pm_rng_uniform(rng) * total;
    for (int i = 0; i < n; i++)
        if ((r -= c[i].p) <= 0) return c[i].id;
    return c[n - 1].id;
}

static double lab_fill(LabCand *c, const float *l, int V, float temp) {
    float mx = l[0];
    for (int i = 1; i < V; i++) mx = l[i] > mx ? l[i] : mx;
    double sum = 0;
    for (int i = 0; i < V; i++) c[i].id = i, c[i].p = expf((l[i] - mx) / temp), sum += c[i].p;
    return sum;
}

static int sample_qsort(const float *l, int V, float temp, int top_k, float top_p, PmRng *rng) {
    LabCand *c = pm_malloc(sizeof(LabCand) * V);
    double sum = lab_fill(c, l, V, temp);
    qsort(c, V, sizeof(LabCand), lab_desc);
    int id = lab_draw(c, V, sum, top_k, top_p, rng);
    free(c);
    return id;
}

static int sample_radix_malloc(const float *l, int V, float temp, int top_k, float top_p, PmRng *rng) {
    LabCand *c = pm_malloc(sizeof(LabCand) * V), *tmp = pm_malloc(sizeof(LabCand) * V), *a = c, *b = tmp;
    double sum = lab_fill(c, l, V, temp);
    for (int shift = 0; shift < 32; shift += 8) {
        int start[257] = {0};
        for (int i = 0; i < V; i++) {
            uint32_t k;
            memcpy(&k, &a[i].p, sizeof k);
            start[((~k >> shift) & 255) + 1]++;
        }
        for (int q = 0; q < 256; q++) start[q + 1] += start[q];
        for (int i = 0; i < V; i++) {
            uint32_t k;
            memcpy(&k, &a[i].p, sizeof k);
            b[start[(~k >> shift) & 255]++] = a[i];
        }
        LabCand *t = a;
        a = b, b = t;
    }
    int id = lab_draw(a, V, sum, top_k, top_p, rng);
    free(c), free(tmp);
    return id;
}

int main(void) {
    const int V = 50280;
    float *l = pm_malloc(sizeof(float) * V);
    PmRng rng;
    pm_rng_seed(&rng, 1);
    int (*forms[])(const float *, int, float, int, float, PmRng *) = {sample_qsort, sample_radix_malloc, sample_token};
    const char *names[] = {"qsort", "radix, buffers a draw", "sample_token (now)"};
    const float sds[] = {0.05f, 1.0f, 6.0f};
    printf("%-22s %-9s %-12s %s\n", "form", "logit sd", "top-p 0.95", "with top-k 40 (ms a draw)");
    for (int f = 0; f < 3; f++)
        for (int t = 0; t < 3; t++) {
            for (int i = 0; i < V; i++) l[i] = sds[t] * pm_rng_normal(&rng);
            const int n = f == 0 ? 50 : 300;
            int sink = 0;
            double t0 = pm_now();
            for (int i = 0; i < n; i++) sink += forms[f](l, V, 0.8f, 0, 0.95f, &rng);
            double t1 = pm_now();
            for (int i = 0; i < n; i++) sink += forms[f](l, V, 0.8f, 40, 0.95f, &rng);
            printf("%-22s %-9.2f %-12.3f %.3f%s\n", names[f], (double)sds[t], (t1 - t0) / n * 1e3,
                   (pm_now() - t1) / n * 1e3, sink < 0 ? " " : "");
        }
    free(l);
    return 0;
}
