/* Stacked matrices (ul_cpu_mat_t) and the packed layouts behind them: wq|wk|wv-like
 * stacks of parts, packed where the ISA has a layout for the type and every part has a
 * multiple of 16 rows, in row layout otherwise, each part's output in its own buffer, on
 * a real 2-thread pool. Every output against a float64 product of the dequantised
 * operands with kernel tests' summation bound (a misplaced nibble, scale, row or part
 * fails; a different summation order passes). */
#include <criterion/criterion.h>

#include "cpu/pack.h"
#include "kern_testutil.h"
#include "uvllm/err.h"

/* Returns the number of outputs outside the bound; *packed says which layout ran. */
static int check_stack(ul_pool_t *p, int type, const int *rows, int n_parts, int64_t n_cols, int nt,
                       int pack, int *packed) {
    ul_gguf_tensor_t t[UL_MAT_PARTS];
    const ul_gguf_tensor_t *parts[UL_MAT_PARTS];
    uint8_t *w[UL_MAT_PARTS];
    float *y[UL_MAT_PARTS];
    for (int i = 0; i < n_parts; i++) {
        w[i] = tk_weights(type, rows[i], n_cols, (uint64_t)(rows[i] * 7 + i + nt));
        t[i] = (ul_gguf_tensor_t){
            .n_dims = 2, .ne = {n_cols, rows[i], 1, 1}, .type = (uint32_t)type, .data = w[i]};
        parts[i] = &t[i];
        y[i] = malloc(sizeof(float) * (size_t)(rows[i] * nt));
        for (int k = 0; k < rows[i] * nt; k++) y[i][k] = NAN;
    }
    ul_cpu_mat_t m;
    cr_assert_eq(ul_cpu_mat_init(&m, parts, n_parts, pack), 0);
    *packed = m.pk != NULL;
    ul_xfmt_t f = ul_cpu_xfmt(type);
    size_t xs = ul_cpu_xrow_bytes(f, n_cols);
    float *x = malloc(sizeof(float) * (size_t)(n_cols * nt)), *xd = malloc(sizeof(float) * n_cols);
    float *wd = malloc(sizeof(float) * (size_t)n_cols);
    uint8_t *xq = malloc(xs);
    void *scratch = malloc(ul_cpu_matmul_scratch(type, n_cols, nt) + 64);
    uint64_t s = (uint64_t)(n_cols + nt);
    for (int64_t i = 0; i < n_cols * nt; i++) x[i] = tk_unif(&s) * 3;
    tk_mat_job_t j = {p, &m, x, nt, y, scratch};
    ul_pool_run(p, tk_mat_job, &j);
    int bad = 0;
    const size_t ws = ul_type_row_bytes(type, n_cols);
    for (int tk = 0; tk < nt; tk++) {
        ul_cpu_quant_x(f, x + tk * n_cols, xq, n_cols);
        tk_decode_x(f, xq, xd, n_cols);
        for (int i = 0; i < n_parts; i++)
            for (int r = 0; r < rows[i]; r++) {
                ul_cpu_dequant_row(type, w[i] + ws * r, wd, n_cols);
                double mag, ref = tk_dot_ref(wd, xd, n_cols, &mag);
                double err = fabs(y[i][tk * rows[i] + r] - ref);
                if (!(err <= (double)n_cols * 0x1p-22 * mag + 1e-30) && bad++ < 5)
                    cr_log_error("%s %s cols=%ld nt=%d part %d y[%d][%d]=%g ref=%g",
                                 ul_type_name(type), *packed ? "packed" : "rows", (long)n_cols, nt,
                                 i, tk, r, y[i][tk * rows[i] + r], ref);
            }
    }
    ul_cpu_mat_free(&m);
    for (int i = 0; i < n_parts; i++) free(w[i]), free(y[i]);
    free(x), free(xd), free(wd), free(xq), free(scratch);
    return bad;
}

static const int k_types[] = {UL_TYPE_Q4_0, UL_TYPE_Q8_0, UL_TYPE_F16, UL_TYPE_F32,
                              UL_TYPE_Q4_K, UL_TYPE_Q5_K, UL_TYPE_Q6_K};

Test(pack, stacked_parts_match_f64_reference_packed_and_not) {
    ul_pool_t *p;
    cr_assert_eq(ul_pool_create(2, &p), 0);
    /* three parts of 16-multiples (packable), parts of 48 + 17 rows (never packed), and
     * one part of 83 rows (5 groups packed, the last 3 rows, in the second 64-row chunk,
     * read in place) */
    static const int rows_a[] = {64, 16, 48}, rows_b[] = {48, 17}, rows_c[] = {83};
    /* 5 and 69 blocks: an odd last pair, and 69 crosses the 32-block chunks of prefill;
     * for K-quants 1, 8 and 5 super-blocks (an odd count) */
    static const int64_t cols[] = {32, 5 * 32, 69 * 32, 41 * 32};
    static const int toks[] = {1, 2, 4, 5, 17, 40};
    for (size_t ti = 0; ti < sizeof k_types / sizeof k_types[0]; ti++) {
        const int type = k_types[ti];
        const int blk = ul_type_block_elems(type);
        for (int ci = 0; ci < 4; ci++) {
            int64_t n_cols = cols[ci] < blk ? blk : cols[ci] / blk * blk;
            for (int k = 0; k < 6; k++)
                for (int pack = 0; pack < 2; pack++) {
                    int packed;
                    int bad = check_stack(p, type, rows_a, 3, n_cols, toks[k], pack, &packed);
                    cr_expect_eq(bad, 0, "%s stack of 3 (%s): %d bad outputs", ul_type_name(type),
                                 packed ? "packed" : "rows", bad);
                    const ul_pack_kern_t *pk = ul_cpu_pack_kern(type, ul_cpu_isa());
                    cr_expect_eq(packed, pack && pk != NULL, "%s: packed=%d with pack=%d",
                                 ul_type_name(type), packed, pack);
                    bad = check_stack(p, type, rows_b, 2, n_cols, toks[k], pack, &packed);
                    cr_expect_eq(bad, 0, "%s stack 48+17: %d bad outputs", ul_type_name(type), bad);
                    cr_expect(!packed, "a part of 17 rows cannot be packed");
                    if (ci != 1) continue; /* the tail's rows: one row length is enough */
                    bad = check_stack(p, type, rows_c, 1, n_cols, toks[k], pack, &packed);
                    cr_expect_eq(bad, 0, "%s one part of 83 (%s): %d bad outputs",
                                 ul_type_name(type), packed ? "packed" : "rows", bad);
                    cr_expect_eq(packed, pack && pk != NULL, "%s 83 rows: packed=%d with pack=%d",
                                 ul_type_name(type), packed, pack);
                }
        }
    }
    ul_pool_free(p);
}

/* On AVX-512 and AVX2 the quantised types users run most (Q4_0, Q8_0, the K-quant mixes' Q4_K,
 * Q5_K and Q6_K) must take the packed path; the scalar ISA has no packed layout. */
Test(pack, q4_0_q8_0_and_k_quants_have_packed_layouts_on_avx512) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX512);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q4_0, UL_ISA_AVX512) != NULL);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q8_0, UL_ISA_AVX512) != NULL);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q4_K, UL_ISA_AVX512) != NULL);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q5_K, UL_ISA_AVX512) != NULL);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q6_K, UL_ISA_AVX512) != NULL);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q4_0, UL_ISA_AVX2) != NULL);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q8_0, UL_ISA_AVX2) != NULL);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q4_K, UL_ISA_AVX2) != NULL);
    cr_expect(ul_cpu_pack_kern(UL_TYPE_Q4_0, UL_ISA_SCALAR) == NULL);
}

/* ul_cpu_mat_init and ul_cpu_mat_init_in refuse the same parts, and the arena size of a
 * refused or unpackable matrix is 0. */
Test(pack, parts_must_agree) {
    uint8_t buf[4096] = {0};
    ul_gguf_tensor_t a = {.n_dims = 2, .ne = {64, 16, 1, 1}, .type = UL_TYPE_Q8_0, .data = buf};
    ul_gguf_tensor_t b = a, c = a, odd = a;
    b.type = UL_TYPE_Q4_0;
    c.ne[0] = 32;
    odd.ne[1] = 17;
    const ul_gguf_tensor_t *ab[] = {&a, &b}, *ac[] = {&a, &c}, *po[] = {&odd, &odd};
    ul_cpu_mat_t m;
    cr_expect_eq(ul_cpu_mat_init(&m, ab, 2, 1), UL_EINVAL);
    cr_expect_eq(ul_cpu_mat_init(&m, ac, 2, 1), UL_EINVAL);
    cr_expect_eq(ul_cpu_mat_init(&m, ab, 0, 1), UL_EINVAL);
    cr_expect_eq(ul_cpu_mat_init_in(&m, ab, 2, 1, NULL), UL_EINVAL);
    cr_expect_eq(ul_cpu_mat_packed_bytes(ab, 2, 1), 0);
    cr_expect_eq(ul_cpu_mat_packed_bytes(po, 2, 1), 0, "parts of 17 rows cannot be packed");
    /* not packable: rows are read in place and dst is never touched */
    cr_expect_eq(ul_cpu_mat_init_in(&m, po, 2, 1, NULL), 0);
    cr_expect(m.pk == NULL && m.packed == NULL);
    ul_cpu_mat_free(&m);
}

/* The forward pass packs every weight back to back into one ul_cpu_alloc_weights arena,
 * each at the offset the sizes from ul_cpu_mat_packed_bytes give. A size that is short
 * makes one matrix overwrite the next: pack the second slot first, then the first, and
 * both must hold exactly what an owned ul_cpu_mat_init packs. */
Test(pack, packed_into_one_arena_equals_owned_copies) {
    static const int types[] = {UL_TYPE_Q4_0, UL_TYPE_Q8_0, UL_TYPE_F16,
                                UL_TYPE_Q4_K, UL_TYPE_Q5_K, UL_TYPE_Q6_K};
    for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++) {
        const int type = types[ti];
        if (!ul_cpu_pack_kern(type, ul_cpu_isa())) continue;
        const int64_t n_cols = 5 * 32 * (ul_type_block_elems(type) == QKK ? 8 : 1);
        uint8_t *w0 = tk_weights(type, 48, n_cols, 11), *w1 = tk_weights(type, 32, n_cols, 12);
        ul_gguf_tensor_t t0 = {
            .n_dims = 2, .ne = {n_cols, 48, 1, 1}, .type = (uint32_t)type, .data = w0};
        ul_gguf_tensor_t t1 = t0;
        t1.ne[1] = 32, t1.data = w1;
        const ul_gguf_tensor_t *p0[] = {&t0}, *p1[] = {&t1};
        const size_t b0 = ul_cpu_mat_packed_bytes(p0, 1, 1), b1 = ul_cpu_mat_packed_bytes(p1, 1, 1);
        cr_assert(b0 > 0 && b1 > 0, "%s: packable matrices report no packed bytes",
                  ul_type_name(type));
        const size_t off1 = (b0 + 63) & ~(size_t)63;
        uint8_t *arena = ul_cpu_alloc_weights(off1 + b1);
        cr_assert(arena != NULL);
        cr_expect_eq((uintptr_t)arena % (2u << 20), 0, "weights arena not 2 MiB aligned");
        ul_cpu_mat_t in0, in1, own0, own1;
        cr_assert_eq(ul_cpu_mat_init_in(&in1, p1, 1, 1, arena + off1), 0);
        cr_assert_eq(ul_cpu_mat_init_in(&in0, p0, 1, 1, arena), 0);
        cr_assert_eq(ul_cpu_mat_init(&own0, p0, 1, 1), 0);
        cr_assert_eq(ul_cpu_mat_init(&own1, p1, 1, 1), 0);
        cr_expect_eq(in0.packed_bytes, b0);
        cr_expect_eq(own0.packed_bytes, b0);
        cr_expect(!memcmp(arena, own0.packed, b0), "%s: first slot differs", ul_type_name(type));
        cr_expect(!memcmp(arena + off1, own1.packed, b1), "%s: second slot overwritten",
                  ul_type_name(type));
        ul_cpu_mat_free(&in0); /* leaves the arena alone */
        ul_cpu_mat_free(&in1);
        ul_cpu_mat_free(&own0);
        ul_cpu_mat_free(&own1);
        free(arena);
        free(w0), free(w1);
    }
}

/* Every register-tile shape of each SIMD ISA's packed kernels (AVX2: 1 or 2 halves x 1..6
 * tokens and the split remainders; AVX-512: 1 to 6 tokens), each ISA forced in turn so
 * an AVX-512 machine tests the AVX2 kernels too; and a token's outputs are the same bits
 * alone as inside a batch (decode and batched steps agree). */
Test(pack, every_token_tile_of_each_isa_matches_reference) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    static const int types[] = {UL_TYPE_Q4_0, UL_TYPE_Q8_0, UL_TYPE_F16};
    static const int rows[] = {48, 16};
    ul_pool_t *p;
    cr_assert_eq(ul_pool_create(2, &p), 0);
    const ul_isa_t best = ul_cpu_isa();
    for (int isa = UL_ISA_AVX2; isa <= (int)best; isa++) {
        ul_cpu_set_isa((ul_isa_t)isa);
        for (size_t ti = 0; ti < sizeof types / sizeof types[0]; ti++)
            for (int nt = 1; nt <= 14; nt++) {
                int packed;
                const int64_t n_cols = nt % 2 ? 7 * 32 : 69 * 32;
                int bad = check_stack(p, types[ti], rows, 2, n_cols, nt, 1, &packed);
                cr_expect_eq(bad, 0, "%s on %s, %d tokens: %d bad outputs", ul_type_name(types[ti]),
                             ul_cpu_isa_name((ul_isa_t)isa), nt, bad);
                cr_expect(packed, "%s on %s is not packed", ul_type_name(types[ti]),
                          ul_cpu_isa_name((ul_isa_t)isa));
            }
    }
    ul_cpu_set_isa(best);
    ul_pool_free(p);
}

Test(pack, token_alone_equals_token_in_batch_q4_0_q8_0) {
    UL_TEST_REQUIRE_ISA(UL_ISA_AVX2);
    static const int types[] = {UL_TYPE_Q4_0, UL_TYPE_Q8_0};
    const ul_isa_t best = ul_cpu_isa();
    for (int isa = UL_ISA_AVX2; isa <= (int)best; isa++)
        for (size_t ti = 0; ti < 6; ti++) { /* 4 and 5 tokens: speculative verification steps */
            static const int nts[] = {4, 5, 13};
            const ul_pack_kern_t *pk = ul_cpu_pack_kern(types[ti % 2], (ul_isa_t)isa);
            cr_assert(pk != NULL);
            const int type = types[ti % 2], nt = nts[ti / 2];
            const int diff =
                tk_pack_alone_vs_batched(pk, type, XF_Q8A, 37 * 32, 3, nt, 9 + ti, 5 + ti);
            cr_expect_eq(diff, 0, "%s on %s: %d of %d tokens differ alone vs batched",
                         ul_type_name(type), ul_cpu_isa_name((ul_isa_t)isa), diff, nt);
        }
}
