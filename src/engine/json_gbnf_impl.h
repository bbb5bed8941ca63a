/* Internals of the JSON Schema -> GBNF conversion (json_gbnf.c: dispatch, composition;
 * json_gbnf_types.c: objects, arrays, strings, numbers). */
#ifndef UL_ENGINE_JSON_GBNF_IMPL_H
#define UL_ENGINE_JSON_GBNF_IMPL_H

#include <cjson/cJSON.h>
#include <stddef.h>

#include "base/buf.h"
#include "base/errbuf.h"

enum { T_OBJ = 1, T_ARR = 2, T_STR = 4, T_NUM = 8, T_INT = 16, T_BOOL = 32, T_NULL = 64 };
enum { JG_VALUE = 1, JG_NULL = 2, JG_BOOL = 4 };
#define JG_MAX_KEEP 64

/* The shared lexical rules every converted schema may use. */
#define UL_JSON_GBNF_BASE                                                                          \
    "value ::= object | array | string | number | boolean | null\n"                                \
    "object ::= \"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* " \
    ")? \"}\"\n"                                                                                   \
    "array ::= \"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\"\n"                              \
    "string ::= \"\\\"\" jchar* \"\\\"\"\n"                                                        \
    "jchar ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4} )\n"   \
    "number ::= integer ( \".\" [0-9]{1,16} )? ( [eE] [-+]? [0-9]{1,3} )?\n"                       \
    "integer ::= \"-\"? ( \"0\" | [1-9] [0-9]{0,15} )\n"                                           \
    "boolean ::= \"true\" | \"false\"\n"                                                           \
    "null ::= \"null\"\n"                                                                          \
    "ws ::= ( \" \" | \"\\n\" [ \\t]{0,20} )?\n"

typedef struct {
    const cJSON *js;
    char name[16];
} jg_memo_t;

typedef struct ul_json_gbnf_s {
    const cJSON *root;
    ul_buf_t rules;
    jg_memo_t *memo;
    size_t n_memo, c_memo;
    int n_rules, depth, used;
    cJSON *keep[JG_MAX_KEEP]; /* merged allOf schemas, freed at the end */
    int n_keep;
    char *err;
    size_t err_len;
} jg_t; /* = ul_json_gbnf_t */

/* The first failure's message into the caller's buffer; returns UL_EINVAL. */
#define ul_jg_fail(j, ...) ul_errbuf_set((j)->err, (j)->err_len, UL_EINVAL, __VA_ARGS__)
void ul_jg_name(jg_t *j, char *name);
int ul_jg_rule(jg_t *j, const char *name);
const cJSON *ul_jg_get(const cJSON *js, const char *k);
/* The rule for schema js into name (16 bytes). */
int ul_jg_gen(jg_t *j, const cJSON *js, char *name);

int ul_jg_object(jg_t *j, const cJSON *js, char *name);
int ul_jg_array(jg_t *j, const cJSON *js, char *name);
int ul_jg_string(jg_t *j, const cJSON *js, char *name);
int ul_jg_number(jg_t *j, const cJSON *js, int integer, char *name);

#endif
