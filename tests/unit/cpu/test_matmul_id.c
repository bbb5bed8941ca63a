/* ul_cpu_matmul_id (the grouped-by-expert product of the MoE FFN) against one
 * ul_cpu_matmul_mat per group over that group's rows gathered by hand: bit-identical
 * outputs for every weight type, stacked (gate|up-like, 2 parts) and single-part mats,
 * packed and row layouts, groups of 0, 1 and many rows in any order of the activation
 * rows (rows gathered from fewer source rows, and one row per group as in decode), on
 * every ISA the CPU has, on a real 2-thread pool. ul_cpu_matmul_id_glu (gate and up
 * fused, the activation applied per item) against the same reference followed by the
 * activation over every row. */
#include <criterion/criterion.h>

#include "cpu/matmul_id.h"
#include "kern_testutil.h"
#include "uvllm/err.h"

enum { NE = 5, T = 6, ROWS = 80 }; /* 80 rows: a part is one full and one partial chunk */
static const int32_t g_many[NE] = {3, 0, 1, 7, 2}; /* 13 grouped rows from T sources */
static const int32_t g_one[NE] = {1, 0, 1, 1, 1};  /* decode: one row per group */

typedef struct {
    ul_pool_t *p;
    const ul_mm_group_t *g;
    const ul_cpu_mat_t *m;
    const float *x;
    const int32_t *idx;
    int n;
    float *const *y;
    void *scratch;
    int glu;
} job_t;

static void glu_act(float *g, const float *u, size_t n) {
    for (size_t i = 0; i < n; i++) g[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void id_job(void *ctx, int ith, int nth) {
    job_t *j = ctx;
    if (j->glu)
        ul_cpu_matmul_id_glu(j->p, j->g, NE, j->x, j->idx, T, j->n, j->y[0], j->y[1], glu_act,
                             j->scratch, ith, nth);
    else
        ul_cpu_matmul_id(j->p, j->g, NE, j->x, j->idx, T, j->n, j->y, j->scratch, ith, nth);
}

static void mat_job(void *ctx, int ith, int nth) {
    job_t *j = ctx;
    ul_cpu_matmul_mat(j->p, j->m, j->x, j->n, j->y, j->scratch, ith, nth);
}

/* Returns the number of outputs that differ (glu: of h only). */
static int check(ul_pool_t *p, int type, int n_parts, int64_t n_cols, int pack,
                 const int32_t *count, int glu) {
    const size_t rb = ul_type_row_bytes(type, n_cols);
    uint8_t *w[NE][2];
    ul_cpu_mat_t m[NE];
    ul_mm_group_t g[NE];
    int32_t n_rows = 0;
    for (int e = 0; e < NE; e++) {
        ul_gguf_tensor_t t[2];
        const ul_gguf_tensor_t *parts[2] = {&t[0], &t[1]};
        for (int i = 0; i < n_parts; i++) {
            w[e][i] = tk_weights(type, ROWS, n_cols, (uint64_t)(e * 31 + i * 7 + type));
            t[i] = (ul_gguf_tensor_t){.n_dims = 2,
                                      .ne = {n_cols, ROWS, 1, 1},
                                      .type = (uint32_t)type,
                                      .nbytes = rb * ROWS,
                                      .data = w[e][i]};
        }
        cr_assert_eq(ul_cpu_mat_init(&m[e], parts, n_parts, pack), 0);
        g[e] = (ul_mm_group_t){&m[e], n_rows, count[e]};
        n_rows += count[e];
    }
    /* T token rows; grouped row r reads token idx[r] (tokens repeat across groups) */
    float *x = malloc(sizeof(float) * (size_t)(T * n_cols));
    uint64_t s = (uint64_t)(n_cols * 3 + type);
    for (int64_t i = 0; i < T * n_cols; i++) x[i] = tk_unif(&s) * 2;
    int32_t idx[16];
    for (int r = 0; r < n_rows; r++) idx[r] = (r * 5 + 3) % T;
    float *y[UL_MAT_PARTS] = {NULL}, *ref[UL_MAT_PARTS] = {NULL};
    for (int i = 0; i < n_parts; i++) {
        y[i] = malloc(sizeof(float) * (size_t)(n_rows * ROWS));
        ref[i] = malloc(sizeof(float) * (size_t)(n_rows * ROWS));
        for (int k = 0; k < n_rows * ROWS; k++) y[i][k] = ref[i][k] = NAN;
    }
    size_t sb = ul_cpu_matmul_id_scratch(type, n_cols, n_rows, T);
    size_t sm = ul_cpu_matmul_scratch(type, n_cols, n_rows);
    void *scratch = malloc((sb > sm ? sb : sm) + 64);
    job_t j = {p, g, NULL, x, idx, n_rows, y, scratch, glu};
    ul_pool_run(p, id_job, &j);
    /* reference: each group alone, its rows gathered into a contiguous block */
    float *xg = malloc(sizeof(float) * (size_t)(n_rows * n_cols));
    for (int r = 0; r < n_rows; r++)
        memcpy(xg + r * n_cols, x + idx[r] * n_cols, sizeof(float) * (size_t)n_cols);
    for (int e = 0; e < NE; e++) {
        if (!count[e]) continue;
        float *yr[UL_MAT_PARTS] = {NULL};
        for (int i = 0; i < n_parts; i++) yr[i] = ref[i] + (size_t)g[e].row0 * ROWS;
        job_t jm = {p,  NULL,    &m[e], xg + (size_t)g[e].row0 * n_cols, NULL, count[e],
                    yr, scratch, 0};
        ul_pool_run(p, mat_job, &jm);
    }
    if (glu) glu_act(ref[0], ref[1], (size_t)(n_rows * ROWS));
    int bad = 0;
    for (int i = 0; i < (glu ? 1 : n_parts); i++)
        for (int k = 0; k < n_rows * ROWS; k++)
            if (memcmp(&y[i][k], &ref[i][k], sizeof(float))) {
                if (bad++ < 3)
                    cr_log_error("%s parts %d cols %lld pack %d glu %d: part %d row %d out %d: "
                                 "%g vs %g",
                                 ul_type_name(type), n_parts, (long long)n_cols, pack, glu, i,
                                 k / ROWS, k % ROWS, y[i][k], ref[i][k]);
            }
    for (int e = 0; e < NE; e++) {
        ul_cpu_mat_free(&m[e]);
        for (int i = 0; i < n_parts; i++) free(w[e][i]);
    }
    for (int i = 0; i < n_parts; i++) free(y[i]), free(ref[i]);
    free(x), free(xg), free(scratch);
    return bad;
}

static const int k_types[] = {UL_TYPE_F32,   UL_TYPE_F16,  UL_TYPE_BF16, UL_TYPE_Q8_0,
                              UL_TYPE_Q4_0,  UL_TYPE_Q4_1, UL_TYPE_Q5_0, UL_TYPE_Q5_1,
                              UL_TYPE_Q4_K,  UL_TYPE_Q5_K, UL_TYPE_Q6_K, UL_TYPE_IQ4_NL,
                              UL_TYPE_IQ4_XS};

Test(matmul_id, grouped_equals_each_group_alone) {
    ul_pool_t *p;
    cr_assert_eq(ul_pool_create(2, &p), 0);
    const ul_isa_t best = ul_cpu_isa();
    int runs = 0;
    for (int isa = UL_ISA_SCALAR; isa <= (int)best; isa++) {
        ul_cpu_set_isa((ul_isa_t)isa);
        for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++)
            for (int np = 1; np <= 2; np++)
                for (int pack = 0; pack <= 1; pack++)
                    for (int one = 0; one <= 1; one++) {
                        cr_expect_eq(check(p, k_types[ti], np, 256, pack, one ? g_one : g_many, 0),
                                     0, "%s on %s", ul_type_name(k_types[ti]),
                                     ul_cpu_isa_name((ul_isa_t)isa));
                        runs++;
                    }
    }
    ul_cpu_set_isa(best);
    ul_pool_free(p);
    cr_assert_gt(runs, 0);
}

Test(matmul_id, glu_equals_products_then_activation) {
    ul_pool_t *p;
    cr_assert_eq(ul_pool_create(2, &p), 0);
    const ul_isa_t best = ul_cpu_isa();
    for (int isa = UL_ISA_SCALAR; isa <= (int)best; isa++) {
        ul_cpu_set_isa((ul_isa_t)isa);
        for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++)
            for (int pack = 0; pack <= 1; pack++)
                for (int one = 0; one <= 1; one++)
                    cr_expect_eq(check(p, k_types[ti], 2, 256, pack, one ? g_one : g_many, 1), 0,
                                 "%s on %s", ul_type_name(k_types[ti]),
                                 ul_cpu_isa_name((ul_isa_t)isa));
    }
    ul_cpu_set_isa(best);
    ul_pool_free(p);
}
