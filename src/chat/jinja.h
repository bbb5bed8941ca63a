/* A Jinja2 template interpreter for chat templates: compiles a template once and renders
 * it like Python's Jinja2 as Hugging Face transformers configures it
 * (ImmutableSandboxedEnvironment, trim_blocks, lstrip_blocks, loop controls,
 * {% generation %}, tojson as json.dumps(ensure_ascii=False), raise_exception,
 * strftime_now). Undefined behaves like jinja2.Undefined.
 *
 * Templates come from model files, so they are untrusted: rendering has hard limits on
 * steps, output, memory, nesting and range() length, and exceeding one is an error.
 * A compiled template is immutable and may be rendered by several threads at once; each
 * render allocates from its own arena, freed when it returns.
 *
 * Every string taken from a variable marked plain carries a per-byte mask through string
 * operations, and the output comes with a mask: 1 where a byte came from plain data (the
 * request), so special tokens can be recognised only where the template wrote them. */
#ifndef UL_CHAT_JINJA_H
#define UL_CHAT_JINJA_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

#include "base/buf.h"

typedef struct ul_jinja_s ul_jinja_t;

/* A context variable: its JSON value; plain != 0 marks its strings as request data. */
typedef struct ul_jinja_var_s {
    const char *name;
    const cJSON *json;
    int plain;
} ul_jinja_var_t;

typedef struct ul_jinja_limits_s {
    uint64_t max_steps; /* evaluated nodes */
    size_t max_output;  /* bytes of output (and of any one string) */
    size_t max_memory;  /* bytes of the render's arena */
    size_t max_range;   /* elements of range() */
    int max_depth;      /* macro calls and nested loops */
} ul_jinja_limits_t;

/* The defaults: 10M steps, 4 MiB output, 64 MiB memory, range 100k, depth 64. */
extern const ul_jinja_limits_t ul_jinja_default_limits;

/* Compiles src. On a syntax error returns UL_EFORMAT with "line N: message" in err. */
int ul_jinja_new(const char *src, size_t len, ul_jinja_t **out, char *err, size_t errcap);
void ul_jinja_free(ul_jinja_t *t);

/* Renders t with vars (later entries win) into out, the plain mask into plain (may be NULL);
 * both appended, plain grows by as many bytes as out. now: unix seconds for strftime_now.
 * limits NULL: the defaults. Returns 0; UL_EINVAL when the template called
 * raise_exception (msg: its message); UL_EFORMAT for another runtime error (msg: a
 * Python-like "UndefinedError: ..." / "TypeError: ..."); UL_E2BIG when a limit was hit;
 * UL_ENOMEM. */
int ul_jinja_render(const ul_jinja_t *t, const ul_jinja_var_t *vars, size_t nvars, int64_t now,
                    const ul_jinja_limits_t *limits, ul_buf_t *out, ul_buf_t *plain, char *msg,
                    size_t msgcap);

#endif
