/* prompt_tokens of every record in ../shared/golden/NAME.public.jsonl (llama.cpp's tokenization
 * with BOS as the vocabulary asks) reproduced by ul_tokenize on the matching model file. */
#include <cjson/cJSON.h>
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_files.h"
#include "test_vocab_util.h"

static int check_file(const char *gdir, const char *fname) {
    char path[1400], model[1400];
    size_t l = strlen(fname);
    snprintf(path, sizeof path, "%s/%s", gdir, fname);
    /* NAME.public.jsonl -> models/NAME.gguf */
    const char *dot = strstr(fname, ".public.jsonl");
    snprintf(model, sizeof model, "%s/models/%.*s.gguf", tv_shared(),
             (int)(dot ? (size_t)(dot - fname) : l - 6), fname);
    tv_vocab_t t;
    tv_load(&t, model);
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    char *line = NULL;
    size_t cap = 0;
    int records = 0;
    while (getline(&line, &cap, f) > 0) {
        cJSON *j = cJSON_Parse(line);
        cr_assert(j, "%s: record %d is not JSON", fname, records);
        const char *prompt = cJSON_GetStringValue(cJSON_GetObjectItem(j, "prompt"));
        cJSON *exp = cJSON_GetObjectItem(j, "prompt_tokens");
        cr_assert(prompt && cJSON_IsArray(exp));
        int n;
        int32_t *ids = tv_tokenize(t.v, prompt, strlen(prompt), 1, 0, &n);
        cr_expect_eq(n, cJSON_GetArraySize(exp), "%s: '%.40s': %d ids, expected %d", fname, prompt,
                     n, cJSON_GetArraySize(exp));
        int i = 0;
        cJSON *e;
        cJSON_ArrayForEach(e, exp) {
            if (i < n)
                cr_expect_eq(ids[i], (int32_t)e->valueint, "%s: '%.40s': id %d is %d, expected %d",
                             fname, prompt, i, ids[i], e->valueint);
            i++;
        }
        free(ids);
        cJSON_Delete(j);
        records++;
    }
    free(line);
    fclose(f);
    tv_free(&t);
    cr_expect(records > 0, "%s: no records", fname);
    return records;
}

static int check_one(const char *path, const char *name, void *dir) {
    check_file(dir, name);
    return 1;
}

Test(tokenize_golden, prompt_tokens_match_llama_cpp) {
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/golden", tv_shared());
    int files = tf_each(dir, ".jsonl", check_one, dir);
    cr_assert(files > 0, "no golden files in %s", dir);
}
