// logits.h — what the decoding tests share: the relative difference of two logit vectors, ||a - b|| / ||b||.
#pragma once
#include <math.h>

static inline double rel_diff(const float *a, const float *b, int n) {
    double num = 0, den = 0;
    for (int v = 0; v < n; v++) {
        double e = (double)a[v] - b[v];
        num += e * e, den += (double)b[v] * b[v];
    }
    return sqrt(num / den);
}
