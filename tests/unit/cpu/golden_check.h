/* The check the golden tests against llama.cpp share (test_golden.c, test_golden_own.c,
 * test_moe.c), over a JSONL file of prompt_tokens / prompt_top / tokens lines:
 *  - teacher-forced over each prompt (fed directly, pages in reverse order), at every
 *    position our top-1 id equals llama.cpp's, or is a near-tie: llama.cpp's own top-1 and
 *    ours within the tolerance of each other in ITS logits (counted in n_ties);
 *  - our logits of llama.cpp's top-20 ids lie within the tolerance (largest |diff| kept);
 *  - with a backend, the greedy continuation through it equals llama.cpp's token for token
 *    (GOLDEN_GREEDY), or only the first token, under the same near-tie rule (GOLDEN_FIRST,
 *    counted in n_first_ties).
 * UVLLM_GOLDEN_POSITIONS=1 prints the largest |diff| of every position. */
#ifndef UL_TEST_GOLDEN_CHECK_H
#define UL_TEST_GOLDEN_CHECK_H

#include <cjson/cJSON.h>
#include <stdint.h>

#include "cpu/forward.h"
#include "model/model.h"
#include "uvllm/backend.h"

/* positions whose largest |diff| exceeds this are counted in n_off */
#define GOLDEN_OFF_LIMIT 1e-3

enum { GOLDEN_FIRST = 0, GOLDEN_GREEDY = 1 };

typedef struct {
    double worst;              /* largest |ours - llama.cpp| on a top-20 logit */
    int worst_line, worst_pos; /* where (1-based line, 0-based position) */
    int n_lines, n_checked;    /* lines, logits compared */
    int n_pos, n_off;          /* positions, those beyond GOLDEN_OFF_LIMIT */
    int n_ties, n_first_ties;  /* near-tie top-1 swaps, near-tie first tokens */
} golden_stats_t;

/* Called for every line before its logits are checked (e.g. a tokenizer check). */
typedef void (*golden_line_fn)(const cJSON *line, int li, void *ctx);

/* The whole file, asserted (criterion) and summed into *st. The model ul_fwd_t f runs the
 * prompts; be, if not NULL, generates (mode GOLDEN_FIRST or GOLDEN_GREEDY). name labels
 * the messages. Asserts the file exists and has at least one line. */
void golden_check_file(const char *path, const char *name, float tol, ul_fwd_t *f, ul_backend_t *be,
                       int mode, golden_line_fn each, void *ctx, golden_stats_t *st);

/* Teacher-forced logits of one sequence of n tokens, [n][n_vocab]; caller frees. The
 * prompt goes in steps of golden_ubatch tokens (0: one step), as llama.cpp's run went in
 * ubatches: from 64 rows in a step both sides take their tiled attention path. */
float *golden_prompt_logits(ul_fwd_t *f, const int32_t *toks, int n);
extern int golden_ubatch;

/* The whole file as a string; caller frees. */
char *golden_slurp(const char *path);

/* A JSON array of integers; caller frees. */
int32_t *golden_int_array(const cJSON *a, int *n);

/* What the golden tests run with: 2 threads, an f16 KV cache like the reference runs,
 * pages of 16 tokens, steps of up to 256 tokens. */
extern const ul_cpu_config_t golden_cfg;

/* Loads a model, asserting success. */
ul_model_t *golden_load(const char *path);

#endif
