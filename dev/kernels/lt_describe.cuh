// lt_describe.cuh — one line naming a cuBLASLt algorithm's configuration (the GEMM labs' tables): shared by
// dev/kernels/gemm_lab.cu and skinny_lab.cu (include after cublasLt.h and stdio.h).
#pragma once

static void describe(const cublasLtMatmulAlgo_t &a, char *buf, size_t n) {
    int id = -1, tile = -1, stages = -1, splitk = -1, red = -1, swz = -1, cust = -1, clus = -1;
    size_t w;
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof red, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swz, sizeof swz, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, &cust, sizeof cust, &w);
    cublasLtMatmulAlgoConfigGetAttribute(&a, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &clus, sizeof clus, &w);
    snprintf(buf, n, "id %d tile %d stages %d splitK %d red %d swz %d cust %d cluster %d", id, tile, stages, splitk,
             red, swz, cust, clus);
}
