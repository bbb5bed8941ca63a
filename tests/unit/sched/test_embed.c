/* Embedding sequences in the scheduler (sched.h, ul_seq_t.embd; backend.h "Embeddings"):
 * prefilled whole in one step beside decoders, no sampling, pages back at once, no prefix
 * cache, and refused when they cannot fit one step. The null backend's vectors are a hash
 * of each token, pooled as asked, so the pooling the step carries is checked exactly. */
#include <criterion/criterion.h>
#include <string.h>

#include "sched/sched.h"
#include "uvllm/err.h"

#include "steps.h"

#include "seqbase.h"

typedef struct {
    ul_seq_t seq;
    float vec[UL_NULL_EMBD];
    int n_tokens, finished;
    ul_finish_t reason;
} eseq_t;

static int on_token(ul_seq_t *q, int32_t tok, const ul_token_lp_t *lp) {
    ((eseq_t *)q)->n_tokens++;
    return 0;
}

static void on_finish(ul_seq_t *q, ul_finish_t reason, int status) {
    eseq_t *t = (eseq_t *)q;
    seq_base_finish(&t->finished, &t->reason, reason, status);
}

static void eseq_init(eseq_t *t, int embed, int32_t pooling, int32_t max_tokens) {
    seq_base_init(&t->seq, sizeof *t, max_tokens, on_token, on_finish);
    t->seq.embd = embed ? t->vec : NULL;
    t->seq.pooling = pooling;
}

/* The scheduler with steps of max_batch_tokens on the null backend (64 pages of 4);
 * returns the backend. */
static ul_backend_t *open_sched(ul_sched_t *s, int32_t max_batch_tokens) {
    ul_backend_t *b;
    ul_null_config_t cfg = {.n_vocab = 1000, .n_ctx = 256, .page_size = 4, .n_pages = 64};
    cr_assert_eq(ul_null_backend_create(&cfg, &b), 0);
    cr_assert_eq(ul_sched_init(s, b, &(ul_sched_config_t){.max_batch_tokens = max_batch_tokens}),
                 0);
    return b;
}

static void close_sched(ul_sched_t *s) {
    ul_backend_t *b = s->backend;
    ul_sched_free(s);
    ul_backend_destroy(b);
}

static const ul_step_seq_t *entry_of(const ul_sched_t *s, const ul_seq_t *q) {
    for (int32_t i = 0; i < s->step->n_seqs; i++)
        if (s->step->seqs[i].seq_id == q->id) return &s->step->seqs[i];
    return NULL;
}

Test(sched_embed, whole_prompt_beside_a_decoder_no_token_pages_back) {
    ul_sched_t s;
    open_sched(&s, 16);
    eseq_t dec, emb;
    eseq_init(&dec, 0, 0, 50);
    eseq_init(&emb, 1, UL_POOL_MEAN, 1);
    const int32_t p[] = {5, 6, 7, 8, 9, 10, 11};
    cr_assert_eq(ul_sched_add(&s, &dec.seq, p, 3), 0);
    cr_assert_eq(one_step(&s), 1);
    const int32_t free_before = s.pool.n_free;
    cr_assert_eq(ul_sched_add(&s, &emb.seq, p, 7), 0);
    cr_assert_eq(one_step(&s), 2);
    const ul_step_seq_t *e = entry_of(&s, &emb.seq);
    cr_assert_not_null(e);
    cr_assert_eq(e->n_tokens, 7, "the whole prompt in one step");
    cr_assert_eq(e->pos0, 0);
    cr_assert_eq(e->sample, 0, "an embedding samples nothing");
    cr_assert_eq(e->out_embd, emb.vec);
    cr_assert_eq(e->pooling, UL_POOL_MEAN);
    cr_assert_eq(emb.finished, 1);
    cr_assert_eq(emb.reason, UL_FINISH_STOP);
    cr_assert_eq(emb.n_tokens, 0, "no on_token");
    cr_assert_eq(dec.n_tokens, 2, "the decoder went on beside it");
    cr_assert_eq(s.pool.n_free, free_before - (dec.seq.n_pages - 1),
                 "the embedding's pages are back at once");
    float norm = 0;
    for (int i = 0; i < UL_NULL_EMBD; i++) norm += emb.vec[i] * emb.vec[i];
    cr_assert_gt(norm, 0, "the backend wrote the vector");
    ul_sched_cancel(&s, &dec.seq);
    run_all(&s);
    close_sched(&s);
}

/* cls of [x, y] is x's vector, last of [z, x] is x's too; mean of [x, x] as well */
Test(sched_embed, pooling_reaches_the_backend) {
    ul_sched_t s;
    open_sched(&s, 16);
    eseq_t cls, last, mean, other;
    eseq_init(&cls, 1, UL_POOL_CLS, 1);
    eseq_init(&last, 1, UL_POOL_LAST, 1);
    eseq_init(&mean, 1, UL_POOL_MEAN, 1);
    eseq_init(&other, 1, UL_POOL_MEAN, 1);
    cr_assert_eq(ul_sched_add(&s, &cls.seq, (int32_t[]){42, 7}, 2), 0);
    cr_assert_eq(ul_sched_add(&s, &last.seq, (int32_t[]){9, 42}, 2), 0);
    cr_assert_eq(ul_sched_add(&s, &mean.seq, (int32_t[]){42, 42}, 2), 0);
    cr_assert_eq(ul_sched_add(&s, &other.seq, (int32_t[]){43, 43}, 2), 0);
    cr_assert_eq(one_step(&s), 4, "four embeddings batched in one step");
    cr_assert(cls.finished && last.finished && mean.finished && other.finished);
    cr_assert_arr_eq(cls.vec, last.vec, sizeof cls.vec);
    cr_assert_arr_eq(cls.vec, mean.vec, sizeof cls.vec);
    cr_assert(memcmp(cls.vec, other.vec, sizeof cls.vec) != 0);
    close_sched(&s);
}

Test(sched_embed, waits_until_the_step_holds_it_whole) {
    ul_sched_t s;
    open_sched(&s, 8);
    eseq_t d1, d2, emb, big;
    eseq_init(&d1, 0, 0, 3);
    eseq_init(&d2, 0, 0, 3);
    eseq_init(&emb, 1, UL_POOL_LAST, 1);
    eseq_init(&big, 1, UL_POOL_LAST, 1);
    int32_t p[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9};
    cr_assert_eq(ul_sched_add(&s, &big.seq, p, 9), UL_E2BIG, "over the step budget");
    cr_assert_eq(ul_sched_add(&s, &d1.seq, p, 1), 0);
    cr_assert_eq(ul_sched_add(&s, &d2.seq, p + 1, 1), 0);
    cr_assert_eq(one_step(&s), 2);
    cr_assert_eq(ul_sched_add(&s, &emb.seq, p, 7), 0);
    /* two decoders + 7 > 8: it is not cut into chunks, it waits */
    cr_assert_eq(one_step(&s), 2);
    cr_assert_null(entry_of(&s, &emb.seq));
    cr_assert_eq(emb.finished, 0);
    run_all(&s);
    cr_assert(d1.finished && d2.finished);
    cr_assert_eq(emb.finished, 1);
    cr_assert_eq(emb.reason, UL_FINISH_STOP);
    cr_assert_eq(s.pool.n_free, s.pool.n_pages);
    close_sched(&s);
}

Test(sched_embed, never_from_the_prefix_cache_nor_into_it) {
    ul_sched_t s;
    open_sched(&s, 32);
    eseq_t gen, emb, emb2;
    eseq_init(&gen, 0, 0, 1);
    eseq_init(&emb, 1, UL_POOL_MEAN, 1);
    eseq_init(&emb2, 1, UL_POOL_MEAN, 1);
    int32_t p[12];
    for (int i = 0; i < 12; i++) p[i] = 200 + i;
    cr_assert_eq(ul_sched_add(&s, &gen.seq, p, 12), 0);
    run_all(&s);
    cr_assert_eq(ul_sched_add(&s, &emb.seq, p, 12), 0);
    cr_assert_eq(one_step(&s), 1);
    cr_assert_eq(s.step->seqs[0].pos0, 0, "computed whole although its pages are cached");
    cr_assert_eq(s.step->seqs[0].n_tokens, 12);
    const uint64_t hits = s.stats.prefix_hit_tokens;
    cr_assert_eq(ul_sched_add(&s, &emb2.seq, p, 12), 0);
    cr_assert_eq(one_step(&s), 1);
    cr_assert_eq(s.step->seqs[0].pos0, 0);
    cr_assert_eq(s.stats.prefix_hit_tokens, hits);
    cr_assert_arr_eq(emb.vec, emb2.vec, sizeof emb.vec);
    close_sched(&s);
}

Test(sched_embed, refused_without_backend_support_and_cancelled_cleanly) {
    ul_sched_t s;
    ul_backend_t *b = open_sched(&s, 16);
    eseq_t emb;
    eseq_init(&emb, 1, UL_POOL_MEAN, 1);
    const int32_t n_embd = b->n_embd;
    b->n_embd = 0;
    cr_assert_eq(ul_sched_add(&s, &emb.seq, (int32_t[]){1, 2}, 2), UL_ENOTSUP);
    b->n_embd = n_embd;
    cr_assert_eq(ul_sched_add(&s, &emb.seq, (int32_t[]){1, 2}, 2), 0);
    ul_sched_cancel(&s, &emb.seq);
    cr_assert_eq(ul_sched_step_build(&s), 0);
    cr_assert_eq(emb.finished, 1);
    cr_assert_eq(emb.reason, UL_FINISH_CANCELLED);
    close_sched(&s);
}
