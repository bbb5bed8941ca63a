/* Pre-tokenizers of byte-level BPE vocabularies: the regex lists llama.cpp uses for each
 * tokenizer.ggml.pre, run with PCRE2 (UTF + UCP, JIT when available). As in llama.cpp's
 * unicode_regex_split, every regex of a list splits each piece left by the previous one
 * into matches and the text between them, and a regex never sees past its piece.
 *
 * Differences from writing the patterns naively, all to agree with llama.cpp:
 * - its whitespace set is Unicode White_Space, which includes U+0085; PCRE2's \s does not,
 *   so \s is spelled [\s\x{85}];
 * - its std::wregex patterns with literal ranges run on text where non-ASCII whitespace
 *   was replaced by \v, so such ranges here leave whitespace out;
 * - `$` is std::regex's end of input: \z here. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "model/vocab_impl.h"
#include "uvllm/err.h"

enum {
    PT_DEFAULT,
    PT_LLAMA3,
    PT_DEEPSEEK_LLM,
    PT_DEEPSEEK_CODER,
    PT_FALCON,
    PT_STARCODER,
    PT_GPT2,
    PT_QWEN2,
    PT_PORO,
    PT_VIKING,
    PT_TEKKEN,
    PT_CHAMELEON,
    PT_QWEN35,
    PT_GPT4O,
    PT_SEED_CODER,
    PT_BAILINGMOE,
    PT_UFAKZEKA,
    PT_LAGUNA,
    PT_MINICPM5,
    PT_COUNT
};

#define S "[\\s\\x{85}]"
#define NS "[^\\s\\x{85}]"
#define RE_GPT2                                                                                    \
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\x{85}\\p{L}\\p{N}]+|" S "+(?!" NS ")|" S \
    "+"
#define RE_CONTRACT "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])"
#define RE_LLAMA3                                                                                  \
    RE_CONTRACT                                                                                    \
    "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\x{85}\\p{L}\\p{N}]+[\\r\\n]*|" S          \
    "*[\\r\\n]+|" S "+(?!" NS ")|" S "+"
#define RE_QWEN2                                                                                   \
    RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\x{85}\\p{L}\\p{N}]+[\\r\\n]*|" S   \
                "*[\\r\\n]+|" S "+(?!" NS ")|" S "+"
/* U+0800-U+4E00 minus the whitespace in it (see the file comment). */
#define CJK                                                                                        \
    "[\\x{4E00}-\\x{9FA5}\\x{0800}-\\x{167F}\\x{1681}-\\x{1FFF}\\x{200B}-\\x{2027}"                \
    "\\x{202A}-\\x{202E}\\x{2030}-\\x{205E}\\x{2060}-\\x{2FFF}\\x{3001}-\\x{4E00}"                 \
    "\\x{AC00}-\\x{D7FF}]+"
/* Cased letters, exactly the ranges of DeepSeek LLM's tokenizer.json. */
#define DS_LETTERS                                                                                 \
    "A-Za-z\\x{B5}\\x{C0}-\\x{D6}\\x{D8}-\\x{F6}\\x{F8}-\\x{1BA}\\x{1BC}-\\x{1BF}\\x{1C4}-\\x{"    \
    "293}"                                                                                         \
    "\\x{295}-\\x{2AF}\\x{370}-\\x{373}\\x{376}\\x{377}\\x{37B}-\\x{37D}\\x{37F}\\x{386}"          \
    "\\x{388}-\\x{38A}\\x{38C}\\x{38E}-\\x{3A1}\\x{3A3}-\\x{3F5}\\x{3F7}-\\x{481}"                 \
    "\\x{48A}-\\x{52F}\\x{531}-\\x{556}\\x{10A0}-\\x{10C5}\\x{13A0}-\\x{13F5}\\x{13F8}-\\x{13FD}"  \
    "\\x{1C90}-\\x{1CBA}\\x{1CBD}-\\x{1CBF}\\x{1D00}-\\x{1D2B}\\x{1D6B}-\\x{1D77}"                 \
    "\\x{1D79}-\\x{1D9A}\\x{1E00}-\\x{1F15}\\x{1F18}-\\x{1F1D}\\x{1F20}-\\x{1F45}"                 \
    "\\x{1F48}-\\x{1F4D}\\x{1F50}-\\x{1F57}\\x{1F59}\\x{1F5B}\\x{1F5D}\\x{1F5F}-\\x{1F7D}"         \
    "\\x{1F80}-\\x{1FB4}\\x{1FB6}-\\x{1FBC}\\x{1FBE}\\x{1FC2}-\\x{1FC4}\\x{1FC6}-\\x{1FCC}"        \
    "\\x{1FD0}-\\x{1FD3}\\x{1FD6}-\\x{1FDB}\\x{1FE0}-\\x{1FEC}\\x{1FF2}-\\x{1FF4}"                 \
    "\\x{1FF6}-\\x{1FFC}\\x{2102}\\x{2107}\\x{210A}-\\x{2113}\\x{2115}\\x{2119}-\\x{211D}"         \
    "\\x{2124}\\x{2126}\\x{2128}\\x{212A}-\\x{212D}\\x{212F}-\\x{2134}\\x{2139}"                   \
    "\\x{213C}-\\x{213F}\\x{2145}-\\x{2149}\\x{214E}\\x{2183}\\x{2184}\\x{2C00}-\\x{2C7B}"         \
    "\\x{2C7E}-\\x{2CE4}\\x{2CEB}-\\x{2CEE}\\x{2CF2}\\x{2CF3}\\x{A640}-\\x{A66D}"                  \
    "\\x{A680}-\\x{A69B}\\x{A722}-\\x{A76F}\\x{A771}-\\x{A787}\\x{A78B}-\\x{A78E}"                 \
    "\\x{AB70}-\\x{ABBF}\\x{FB00}-\\x{FB06}\\x{FB13}-\\x{FB17}\\x{FF21}-\\x{FF3A}"                 \
    "\\x{FF41}-\\x{FF5A}\\x{10400}-\\x{1044F}\\x{104B0}-\\x{104D3}\\x{104D8}-\\x{104FB}"           \
    "\\x{10C80}-\\x{10CB2}\\x{10CC0}-\\x{10CF2}\\x{118A0}-\\x{118DF}\\x{1E900}-\\x{1E943}"
#define RE_PORO                                                                                    \
    " ?[^(\\s\\x{85}|.,!?\\x{2026}\\x{3002}\\x{FF0C}\\x{3001}\\x{0964}\\x{06D4}\\x{060C})]+"
#define TEKKEN_L "((?=[\\p{L}])([^a-z]))"
#define TEKKEN_U "((?=[\\p{L}])([^A-Z]))"

#define RE_QWEN35                                                                                  \
    RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "                                  \
                "?[^\\s\\x{85}\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S   \
                "+"
#define RE_GPT4O                                                                                   \
    "[^\\r\\n\\p{L}\\p{N}]?" TEKKEN_L "*" TEKKEN_U "+" RE_CONTRACT                                 \
    "?|[^\\r\\n\\p{L}\\p{N}]?" TEKKEN_L "+" TEKKEN_U "*" RE_CONTRACT                               \
    "?|\\p{N}{1,3}| ?[^\\s\\x{85}\\p{L}\\p{N}]+[\\r\\n/]*|" S "*[\\r\\n]+|" S "+(?!" NS ")|" S "+"
#define RE_SEED_CODER                                                                              \
    RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1}| ?[^\\s\\x{85}\\p{L}\\p{N}\\r\\n]+|" S   \
                "*[\\r\\n]+|" S "+(?!" NS ")|" S "+"
#define RE_BAILINGMOE                                                                              \
    "'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "            \
    "?[^\\s\\x{85}\\p{L}\\p{N}]+[\\r\\n]*|" S "*[\\r\\n]|" S "+(?!" NS ")|" S "+"
#define RE_UFAKZEKA                                                                                \
    "[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\x{85}\\p{L}\\p{N}]+[\\r\\n]*|" S                \
    "*[\\r\\n]+|" S "+(?!" NS ")|" S "+"
#define RE_MINICPM5                                                                                \
    RE_CONTRACT "|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}+| ?[^\\s\\x{85}\\p{L}\\p{N}]+[\\r\\n]*|" S  \
                "*[\\r\\n]+|" S "+(?!" NS ")|" S "+"

static const char *const k_regex[PT_COUNT][7] = {
    [PT_DEFAULT] = {"[\\p{P}\\$\\+<=>\\^~\\|]+", RE_GPT2, "\\p{N}+", "[0-9][0-9][0-9]"},
    [PT_LLAMA3] = {RE_LLAMA3},
    [PT_DEEPSEEK_LLM] = {"[\\r\\n]", S "?[" DS_LETTERS "]+",
                         S "?[!-/:-~\\x{FF01}-\\x{FF0F}\\x{FF1A}-\\x{FF5E}\\x{2018}-\\x{201F}"
                           "\\x{3001}-\\x{3002}]+",
                         S "+\\z", CJK, "\\p{N}+"},
    [PT_DEEPSEEK_CODER] = {"[\\r\\n]", S "?\\p{L}+", S "?\\p{P}+", CJK, "\\p{N}"},
    [PT_FALCON] = {"[\\p{P}\\$\\+<=>\\^~\\|`]+", RE_GPT2, "[0-9][0-9][0-9]"},
    [PT_STARCODER] = {"\\p{N}", RE_GPT2},
    [PT_GPT2] = {RE_GPT2},
    [PT_QWEN2] = {RE_QWEN2},
    [PT_PORO] = {RE_PORO},
    [PT_VIKING] = {RE_PORO, "\\p{N}"},
    [PT_TEKKEN] = {"[^\\r\\n\\p{L}\\p{N}]?" TEKKEN_L "*" TEKKEN_U
                   "+|[^\\r\\n\\p{L}\\p{N}]?" TEKKEN_L "+" TEKKEN_U
                   "*|\\p{N}| ?[^\\s\\x{85}\\p{L}\\p{N}]+[\\r\\n/]*|" S "*[\\r\\n]+|" S "+(?!" NS
                   ")|" S "+"},
    [PT_QWEN35] = {RE_QWEN35},
    [PT_GPT4O] = {RE_GPT4O},
    [PT_SEED_CODER] = {RE_SEED_CODER},
    [PT_BAILINGMOE] = {RE_BAILINGMOE},
    [PT_UFAKZEKA] = {RE_UFAKZEKA},
    [PT_LAGUNA] = {"[^\\n]+|[\\n]+", RE_QWEN2},
    [PT_MINICPM5] = {"\\p{N}{1,3}", RE_MINICPM5},
    [PT_CHAMELEON] = {"<sentinel:[0-9]+>", "(IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z",
                      "([\\t\\n]|    |  )", "\\p{N}", "[\\p{P}!-/:-@\\[-`{-~]", RE_GPT2},
};

/* tokenizer.ggml.pre names llama.cpp accepts, with the flags it sets for them. */
static const struct {
    const char *name;
    int type, ignore_merges, add_bos, no_bos;
} k_names[] = {
    {"default", PT_DEFAULT, 0, 0, 0},
    {"llama3", PT_LLAMA3, 1, 1, 0},
    {"llama-v3", PT_LLAMA3, 1, 1, 0},
    {"llama-bpe", PT_LLAMA3, 1, 1, 0},
    {"falcon3", PT_LLAMA3, 1, 1, 0},
    {"deepseek-llm", PT_DEEPSEEK_LLM, 0, 0, 0},
    {"deepseek-coder", PT_DEEPSEEK_CODER, 0, 0, 0},
    {"falcon", PT_FALCON, 0, 0, 0},
    {"mpt", PT_GPT2, 0, 0, 0},
    {"starcoder", PT_STARCODER, 0, 0, 0},
    {"gpt-2", PT_GPT2, 0, 0, 0},
    {"phi-2", PT_GPT2, 0, 0, 0},
    {"jina-es", PT_GPT2, 0, 0, 0},
    {"jina-de", PT_GPT2, 0, 0, 0},
    {"gigachat", PT_GPT2, 0, 0, 0},
    {"jina-v1-en", PT_GPT2, 0, 0, 0},
    {"jina-v2-es", PT_GPT2, 0, 0, 0},
    {"jina-v2-de", PT_GPT2, 0, 0, 0},
    {"jina-v2-code", PT_GPT2, 0, 0, 0},
    {"roberta-bpe", PT_GPT2, 0, 0, 0},
    {"refact", PT_STARCODER, 0, 0, 0},
    {"command-r", PT_STARCODER, 0, 0, 0},
    {"qwen2", PT_QWEN2, 0, 0, 0},
    {"stablelm2", PT_QWEN2, 0, 0, 0},
    {"olmo", PT_GPT2, 0, 0, 0},
    {"dbrx", PT_LLAMA3, 0, 0, 0},
    {"smaug-bpe", PT_LLAMA3, 0, 0, 0},
    {"poro-chat", PT_PORO, 0, 0, 0},
    {"chatglm-bpe", PT_LLAMA3, 0, 0, 1},
    {"viking", PT_VIKING, 0, 0, 0},
    {"jais", PT_GPT2, 0, 0, 0},
    {"tekken", PT_TEKKEN, 1, 1, 0},
    {"smollm", PT_STARCODER, 0, 0, 0},
    {"codeshell", PT_STARCODER, 0, 0, 0},
    {"bloom", PT_PORO, 0, 0, 0},
    {"gpt3-finnish", PT_PORO, 0, 0, 0},
    {"exaone", PT_STARCODER, 0, 0, 0},
    {"chameleon", PT_CHAMELEON, 0, 1, 0},
    {"minerva-7b", PT_STARCODER, 0, 0, 0},
    {"megrez", PT_QWEN2, 0, 0, 0},
    {"falcon-h1", PT_LLAMA3, 1, 1, 0},
    {"pixtral", PT_LLAMA3, 1, 1, 0},
    {"midm-2.0", PT_LLAMA3, 1, 1, 0},
    {"lfm2", PT_LLAMA3, 1, 1, 0},
    {"jina-v5-nano", PT_LLAMA3, 1, 1, 0},
    {"a.x-4.0", PT_GPT2, 0, 0, 0},
    {"mellum", PT_GPT2, 0, 0, 0},
    {"modern-bert", PT_GPT2, 0, 0, 0},
    {"exaone4", PT_GPT2, 0, 0, 0},
    {"trillion", PT_GPT2, 0, 0, 0},
    {"granite-docling", PT_GPT2, 0, 0, 0},
    {"deepseek-r1-qwen", PT_QWEN2, 0, 0, 0},
    {"kormo", PT_QWEN2, 0, 0, 0},
    {"f2llmv2", PT_QWEN2, 0, 0, 0},
    {"hunyuan", PT_QWEN2, 0, 0, 0},
    {"solar-open", PT_QWEN2, 0, 0, 0},
    {"grok-2", PT_QWEN2, 0, 0, 0},
    {"glm4", PT_LLAMA3, 0, 0, 1},
    {"mellum2", PT_STARCODER, 0, 0, 0},
    {"qwen35", PT_QWEN35, 0, 0, 0},
    {"gpt-4o", PT_GPT4O, 0, 0, 0},
    {"llama4", PT_GPT4O, 0, 0, 0},
    {"kanana2", PT_GPT4O, 0, 0, 0},
    {"talkie", PT_GPT4O, 0, 0, 0},
    {"minimax-m2", PT_GPT4O, 0, 0, 0},
    {"seed-coder", PT_SEED_CODER, 0, 0, 0},
    {"bailingmoe", PT_BAILINGMOE, 0, 0, 0},
    {"bailingmoe2", PT_BAILINGMOE, 0, 0, 0},
    {"llada-moe", PT_BAILINGMOE, 0, 0, 0},
    {"ufakzeka", PT_UFAKZEKA, 0, 0, 0},
    {"laguna", PT_LAGUNA, 0, 0, 0},
    {"minicpm5", PT_MINICPM5, 1, 0, 0},
};

int ul_pretok_lookup(const char *name, size_t len, int *type, int *ignore_merges, int *add_bos,
                     int *no_bos) {
    for (size_t i = 0; i < sizeof k_names / sizeof k_names[0]; i++) {
        if (strlen(k_names[i].name) != len || memcmp(k_names[i].name, name, len)) continue;
        *type = k_names[i].type;
        *ignore_merges = k_names[i].ignore_merges;
        if (k_names[i].add_bos) *add_bos = 1;
        *no_bos = k_names[i].no_bos;
        return 0;
    }
    return UL_ENOTSUP;
}

struct ul_pretok_s {
    int n;
    pcre2_code *re[7];
    int jit[7];
};

void ul_pretok_free(ul_pretok_t *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) pcre2_code_free(p->re[i]);
    free(p);
}

int ul_pretok_new(int type, ul_pretok_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (type < 0 || type >= PT_COUNT) return UL_EINVAL;
    ul_pretok_t *p = calloc(1, sizeof *p);
    if (!p) return UL_ENOMEM;
    for (int i = 0; i < 7 && k_regex[type][i]; i++) {
        int ec;
        PCRE2_SIZE eo;
        const char *src = k_regex[type][i];
        p->re[i] = pcre2_compile((PCRE2_SPTR)src, PCRE2_ZERO_TERMINATED,
                                 PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &ec, &eo, NULL);
        if (!p->re[i]) {
            PCRE2_UCHAR msg[128];
            pcre2_get_error_message(ec, msg, sizeof msg);
            if (errlen)
                snprintf(err, errlen, "pre-tokenizer regex %d: %s at %zu", i, (char *)msg,
                         (size_t)eo);
            ul_pretok_free(p);
            return UL_EINVAL;
        }
        p->n = i + 1;
        p->jit[i] = pcre2_jit_compile(p->re[i], PCRE2_JIT_COMPLETE) == 0;
    }
    *out = p;
    return 0;
}

typedef struct seg_s {
    size_t off, len;
} seg_t;

typedef struct segs_s {
    seg_t *p;
    size_t n, cap;
} segs_t;

typedef struct split_s {
    const ul_pretok_t *pre;
    const char *text;
    pcre2_match_data *md;
    pcre2_match_context *mctx; /* with a larger JIT stack, made on first need */
    pcre2_jit_stack *stack;
    segs_t out;
    int last; /* the regex being run is the last: pieces go to the callback */
    ul_word_cb cb;
    void *ctx;
} split_t;

static int piece(split_t *s, size_t off, size_t len) {
    if (s->last) return s->cb(s->ctx, s->text + off, len);
    segs_t *o = &s->out;
    seg_t *p = ul_grow(o->p, &o->cap, o->n + 1, sizeof *p, 64);
    if (!p) return UL_ENOMEM;
    o->p = p;
    o->p[o->n++] = (seg_t){off, len};
    return 0;
}

static int match(split_t *s, int r, const char *subj, size_t n, size_t start) {
    const ul_pretok_t *p = s->pre;
    int rc;
    if (p->jit[r] && !s->mctx) {
        rc = pcre2_jit_match(p->re[r], (PCRE2_SPTR)subj, n, start, 0, s->md, NULL);
        if (rc != PCRE2_ERROR_JIT_STACKLIMIT) return rc;
        s->mctx = pcre2_match_context_create(NULL);
        s->stack = pcre2_jit_stack_create(64 * 1024, 16 * 1024 * 1024, NULL);
        if (!s->mctx || !s->stack) return PCRE2_ERROR_NOMEMORY;
        pcre2_jit_stack_assign(s->mctx, NULL, s->stack);
    }
    return pcre2_match(p->re[r], (PCRE2_SPTR)subj, n, start, 0, s->md, s->mctx);
}

/* One regex over one piece: matches and the text between them become pieces. */
static int split_seg(split_t *s, int r, seg_t sg) {
    const char *subj = s->text + sg.off;
    size_t start = 0, prev = 0;
    int rc = 0;
    while (start < sg.len && !rc) {
        int m = match(s, r, subj, sg.len, start);
        if (m == PCRE2_ERROR_NOMATCH) break;
        if (m < 0) return m == PCRE2_ERROR_NOMEMORY ? UL_ENOMEM : UL_EINVAL;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(s->md);
        if (ov[1] == ov[0]) { /* empty match: step over one character */
            start = ov[0] + 1;
            while (start < sg.len && ((unsigned char)subj[start] & 0xC0) == 0x80) start++;
            continue;
        }
        if (ov[0] > prev) rc = piece(s, sg.off + prev, ov[0] - prev);
        if (!rc) rc = piece(s, sg.off + ov[0], ov[1] - ov[0]);
        prev = start = ov[1];
    }
    if (!rc && prev < sg.len) rc = piece(s, sg.off + prev, sg.len - prev);
    return rc;
}

int ul_pretok_split(const ul_pretok_t *p, const char *text, size_t len, ul_word_cb cb, void *ctx) {
    if (len == 0) return 0;
    split_t s = {.pre = p, .text = text, .cb = cb, .ctx = ctx};
    s.md = pcre2_match_data_create(1, NULL);
    if (!s.md) return UL_ENOMEM;
    segs_t in = {0};
    seg_t whole = {0, len};
    int rc = 0;
    for (int r = 0; r < p->n && !rc; r++) {
        s.last = r == p->n - 1;
        s.out.n = 0;
        if (r == 0) {
            rc = split_seg(&s, r, whole);
        } else {
            for (size_t i = 0; i < in.n && !rc; i++) rc = split_seg(&s, r, in.p[i]);
        }
        segs_t t = in;
        in = s.out;
        s.out = t;
    }
    free(in.p);
    free(s.out.p);
    pcre2_match_data_free(s.md);
    pcre2_match_context_free(s.mctx);
    pcre2_jit_stack_free(s.stack);
    return rc;
}

/* llama.cpp's lenient decoder (unicode_cpt_from_utf8): accepts over-long forms and
 * surrogates; anything else invalid is one U+FFFD per byte. Returns the code point and
 * the bytes used, or 0xFFFD with *n = 1. */
static uint32_t lenient_cpt(const unsigned char *p, size_t left, size_t *n) {
    unsigned c = p[0];
    *n = 1;
    if (!(c & 0x80)) return c;
    if (!(c & 0x40)) return 0xFFFD;
    size_t need = !(c & 0x20) ? 2 : !(c & 0x10) ? 3 : !(c & 0x08) ? 4 : 0;
    if (!need || need > left) return 0xFFFD;
    uint32_t cp = c & (0x7F >> need);
    for (size_t i = 1; i < need; i++) {
        if ((p[i] & 0xC0) != 0x80) return 0xFFFD;
        cp = (cp << 6) | (p[i] & 0x3F);
    }
    *n = need;
    return cp > 0x10FFFF ? 0xFFFD : cp;
}

static size_t put_utf8(char *d, uint32_t cp) {
    if (cp < 0x80) return d[0] = (char)cp, 1;
    if (cp < 0x800) return d[0] = (char)(0xC0 | cp >> 6), d[1] = (char)(0x80 | (cp & 0x3F)), 2;
    if (cp < 0x10000) {
        d[0] = (char)(0xE0 | cp >> 12), d[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        d[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    d[0] = (char)(0xF0 | cp >> 18), d[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    d[2] = (char)(0x80 | ((cp >> 6) & 0x3F)), d[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

int ul_pretok_clean(const char *text, size_t len, char **out, size_t *out_len) {
    const unsigned char *s = (const unsigned char *)text;
    char *d = NULL;
    size_t i = 0, o = 0;
    *out = NULL;
    while (i < len) {
        if (s[i] < 0x80 && !d) {
            i++;
            continue;
        }
        size_t n;
        char enc[4];
        uint32_t cp = lenient_cpt(s + i, len - i, &n);
        size_t en = put_utf8(enc, cp);
        if (!d && (en != n || memcmp(enc, s + i, n))) {
            d = malloc(len * 3 + 4); /* each byte grows to at most U+FFFD */
            if (!d) return UL_ENOMEM;
            memcpy(d, text, i);
            o = i;
        }
        if (d) memcpy(d + o, enc, en), o += en;
        i += n;
    }
    if (d) *out = d, *out_len = o;
    return 0;
}

/* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves, the others
 * (controls, space, DEL, NBSP, soft hyphen) map to U+0100 onwards, in byte order. */
static int printable(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

uint32_t ul_bpe_byte_to_cpt(uint8_t b) {
    if (printable(b)) return b;
    uint32_t n = 0;
    for (int i = 0; i < b; i++) n += !printable(i);
    return 256 + n;
}

int ul_bpe_cpt_to_byte(uint32_t cpt) {
    if (cpt < 256) return printable((int)cpt) ? (int)cpt : -1;
    if (cpt >= 256 + 68) return -1; /* 68 bytes are not printable */
    uint32_t n = cpt - 256;
    for (int b = 0; b < 256; b++)
        if (!printable(b) && n-- == 0) return b;
    return -1;
}
