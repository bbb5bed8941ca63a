/* Internals of the Jinja interpreter shared by its files: values, the syntax tree, the
 * render state. A compiled template (its tree and literals) lives in the template's own
 * arena and is never written after compilation, so several threads may render it at once;
 * every value made while rendering lives in the render's arena and dies with it.
 *
 * Functions here return 0 or a negative UL_E* code; a failing one has already written
 * the Python-like message into the render state (jj_fail), so callers only pass the code on. */
#ifndef UL_CHAT_JINJA_IMPL_H
#define UL_CHAT_JINJA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "base/arena.h"
#include "base/errbuf.h"
#include "chat/jinja.h"
#include "uvllm/err.h"

#define TRY(x)                                                                                     \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_) return rc_;                                                                       \
    } while (0)

/* Positive codes: loop control, passed up from statements to the enclosing for. */
enum { JJ_BREAK = 1, JJ_CONTINUE = 2 };

/* Nested evaluation (expressions inside macros inside loops ...) recurses in C; this bounds
 * the stack a render may use (a few hundred bytes per level) whatever the limits say. */
#define JJ_MAX_RDEPTH 1500
/* Nesting of values that equality, ordering and printing walk recursively. */
#define JJ_MAX_VDEPTH 200

typedef enum {
    JV_UNDEF,
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,
    JV_DICT,
    JV_NS,   /* namespace(): a dict whose attributes may be set */
    JV_FUNC, /* built-in global, bound method, loop.cycle, macro, caller */
    JV_LOOP, /* the `loop` variable */
} jv_type;

/* An immutable string; plain[i] != 0 when byte i came from the request data.
 * plain == NULL: no byte did. */
typedef struct jgrow jgrow;
typedef struct jstr {
    size_t len;
    const char *p;
    const uint8_t *plain;
    jgrow *grow; /* non-NULL: p is the start of a growable buffer (see jv_concat) */
} jstr;

/* The buffer behind strings made by concatenation. A string s built on it owns bytes
 * [0, s->len); appending to s writes in place when nobody has appended past s->len yet,
 * so `{% set ns.s = ns.s ~ x %}` in a loop is linear, not quadratic. The shorter views
 * stay valid (their bytes never change) but are not NUL-terminated: use jv_cstr. */
struct jgrow {
    size_t used, cap;
    char *p;
    uint8_t *m;
    int any_plain;
};

typedef struct jv jv;
typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jfunc jfunc;
typedef struct jloop jloop;

struct jv {
    uint8_t t;
    uint8_t tuple;  /* JV_LIST that Python would print as a tuple */
    uint8_t gen;    /* JV_LIST standing for a Python iterator (JG_*): not JSON serializable,
                       not subscriptable; a generator also has no len() and is always true */
    uint8_t markup; /* JV_STR that is a markupsafe.Markup (|safe, |escape): `+` escapes the
                       other operand */
    union {
        int b;
        int64_t i;
        double f;
        const jstr *s;
        jlist *l;
        jdict *d;
        jfunc *fn;
        jloop *loop;
        const char *undef_name; /* JV_UNDEF: what was missing, for messages (may be NULL) */
    } u;
};

struct jlist {
    size_t n, cap;
    jv *v;
    const char *deferred; /* a generator whose body failed: raised when iterated */
};

struct jdict {
    size_t n, cap;
    jv *k, *v;
};

typedef struct jnode jnode;
typedef struct jframe jframe;

enum { JF_BUILTIN, JF_METHOD, JF_CYCLE, JF_MACRO };

/* jv.gen: what Python object a list stands for. */
enum { JG_LIST, JG_GENERATOR, JG_ITEMS, JG_KEYS, JG_VALUES };

struct jfunc {
    int kind;
    const char *name; /* built-in or method name */
    jv self;          /* JF_METHOD: the object; JF_CYCLE: the loop */
    const jnode *macro;
    jframe *closure; /* JF_MACRO: the frame the macro was defined in */
};

struct jloop {
    const jlist *items;
    size_t i;
};

/* Syntax tree. One node shape for all kinds; which fields mean what is given per kind. */
typedef enum {
    /* expressions */
    N_LIT,    /* lit */
    N_NAME,   /* name */
    N_ATTR,   /* a.name */
    N_ITEM,   /* a[b] */
    N_SLICE,  /* a[kids[0]:kids[1]:kids[2]], each may be NULL */
    N_CALL,   /* a(kids..., kw names = kids2) */
    N_FILTER, /* a | name(kids..., kw); a NULL in a filter block */
    N_TEST,   /* a is [not: op] name(kids...) */
    N_BIN,    /* a op b */
    N_NEG,    /* -a, op '+' or '-' */
    N_AND,    /* a and b */
    N_OR,     /* a or b */
    N_NOT,    /* not a */
    N_COND,   /* b if a else c (c may be NULL) */
    N_LIST,   /* [kids] */
    N_TUPLE,  /* (kids) */
    N_DICT,   /* {kids: kids2} */
    N_CMP,    /* a ops[0] kids[0] ops[1] kids[1] ... */
    /* statements */
    N_DATA,        /* lit (a string) */
    N_EMIT,        /* {{ a }} */
    N_BODY,        /* kids in order */
    N_IF,          /* if a: b else c (b, c bodies; c may be NULL) */
    N_FOR,         /* for names in a [if c]: b else d */
    N_SET,         /* names = a; or name.attr = a when attr != NULL */
    N_SETBLOCK,    /* {% set name %}b{% endset %}, filter chain c (operand NULL) */
    N_MACRO,       /* macro name(names = kids2 defaults): b */
    N_CALLBLOCK,   /* {% call(names) a %}b{% endcall %} */
    N_FILTERBLOCK, /* {% filter c %}b{% endfilter %} */
    N_BREAK,
    N_CONTINUE,
} jnode_kind;

struct jnode {
    uint8_t kind, op, nnames;
    uint16_t depth; /* expressions: height of the subtree */
    int line;
    jnode *a, *b, *c, *d;
    jnode **kids, **kids2;
    int nkids, nkids2;
    const char **names; /* kwarg names (N_CALL/N_FILTER/N_TEST), targets, params */
    const char *name;
    const char *attr;
    const uint8_t *ops; /* N_CMP */
    jv lit;
};

/* Binary operators (N_BIN op) and comparison operators (N_CMP ops). */
enum {
    OP_ADD = 1,
    OP_SUB,
    OP_MUL,
    OP_DIV,
    OP_FLOORDIV,
    OP_MOD,
    OP_POW,
    OP_CONCAT,
    OP_EQ,
    OP_NE,
    OP_LT,
    OP_LE,
    OP_GT,
    OP_GE,
    OP_IN,
    OP_NOTIN,
};

struct ul_jinja_s {
    ul_arena_t arena;
    jnode *root;
};

/* A scope: variables set in it, and the scope it falls back to. */
struct jframe {
    jframe *parent;
    size_t n, cap;
    const char **names;
    jv *vals;
};

/* Where output goes: the render's result or a capture ({% set %} block, macro body). */
typedef struct jsink {
    char *p;
    uint8_t *m;
    size_t len, cap;
    int any_plain;
} jsink;

typedef struct jstate {
    ul_arena_t *arena;
    jsink *out;
    jframe *top;
    const jdict *globals;
    uint64_t steps, max_steps;
    size_t max_out, max_mem, max_range;
    int depth, max_depth;
    int rdepth; /* C recursion through jj_eval/jj_exec, bounded by JJ_MAX_RDEPTH */
    int64_t now;
    char *msg;
    size_t msgcap;
    int raised; /* the message came from raise_exception */
} jstate;

/* ---- jinja_value.c ---- */
/* The first failure's message into st->msg; returns code. */
#define jj_fail(st, code, ...) ul_errbuf_set((st)->msg, (st)->msgcap, (code), __VA_ARGS__)
void *jj_alloc(jstate *st, size_t n);
/* A function value's body of kind JF_*, all else zero; NULL (the message set) when the
 * render's memory is spent: the caller returns UL_E2BIG. */
jfunc *jj_new_func(jstate *st, int kind, const char *name, jv self);
/* A new array of cap elements of size bytes holding old's first n (jj_alloc's limits). */
void *jj_grow(jstate *st, const void *old, size_t n, size_t cap, size_t size);
jv jv_undef(const char *name);
jv jv_none(void);
jv jv_bool(int b);
jv jv_int(int64_t i);
jv jv_float(double f);
int jv_str(jstate *st, const char *p, size_t n, const uint8_t *plain, jv *out);
jv jv_strs(const jstr *s);
int jv_newlist(jstate *st, size_t cap, jv *out);
int jv_newdict(jstate *st, size_t cap, jv *out);
int jl_push(jstate *st, jlist *l, jv v);
int jd_set(jstate *st, jdict *d, jv k, jv v);
jv *jd_get(const jdict *d, jv k);
jv *jd_gets(const jdict *d, const char *key);
int jv_truthy(jv v);
int jv_eq(jv a, jv b);
/* a < b etc. in Python; TypeError for unordered kinds. *r: -1, 0, 1 */
int jv_cmp(jstate *st, jv a, jv b, int *r);
const char *jv_typename(jv v);
int jv_is_str(jv v);
/* Iterates v as Python would into a list (string: characters, dict: keys). */
int jv_iter(jstate *st, jv v, jlist **out);
int jv_len(jstate *st, jv v, int64_t *n);
/* Sets a frame variable. */
int jf_set(jstate *st, jframe *f, const char *name, jv v);
jv *jf_lookup(jframe *f, const char *name);
int jf_new(jstate *st, jframe *parent, jframe **out);

/* String builder with the plain mask. */
void jsink_init(jsink *s);
int jsink_put(jstate *st, jsink *s, const char *p, size_t n, const uint8_t *plain);
int jsink_put_plain(jstate *st, jsink *s, const char *p, size_t n, int plain);
int jsink_str(jstate *st, jsink *s, jv *out);
size_t utf8_count(const char *p, size_t n);
size_t utf8_offset(const char *p, size_t n, size_t cp);
/* s's bytes NUL-terminated (a copy when s is a view into a longer buffer). */
const char *jv_cstr(jstate *st, jv s);
/* a + b for two strings. */
int jv_concat(jstate *st, const jstr *a, const jstr *b, jv *out);
int jv_from_bytes_any_plain(jstate *st, const char *p, size_t n, int plain, jv *out);

/* ---- jinja_print.c ---- */
/* str(v) appended to s (with the mask of string parts). */
int jj_str(jstate *st, jsink *s, jv v);
int jj_repr(jstate *st, jsink *s, jv v);
int jj_str_value(jstate *st, jv v, jv *out);
/* json.dumps(v, ensure_ascii, indent, separators, sort_keys); indent NULL = None. */
int jj_tojson(jstate *st, jsink *s, jv v, const char *indent, const char *isep, const char *ksep,
              int sort_keys, int ensure_ascii);
void jj_fmt_float(double f, char *buf, size_t cap);
/* The code point of the UTF-8 sequence at p (n > 0 bytes left) and its length in *len; an
 * invalid byte stands for itself (json.dumps' ensure_ascii, the case methods). */
unsigned long jj_utf8_at(const unsigned char *p, size_t n, size_t *len);

/* ---- jinja_lex.c / jinja_parse.c ---- */
typedef struct jtok jtok;
int jj_parse(ul_jinja_t *t, const char *src, size_t len, char *err, size_t errcap);

/* ---- jinja_eval.c ---- */
int jj_eval(jstate *st, jframe *f, const jnode *n, jv *out);
int jj_call(jstate *st, jframe *f, jv fn, const jv *args, int nargs, const char **kwn,
            const jv *kwv, int nkw, jv *out);
int jj_getattr(jstate *st, jv obj, const char *name, jv *out);
int jj_getitem(jstate *st, jv obj, jv key, jv *out);
int jj_binop(jstate *st, int op, jv a, jv b, jv *out);
int jj_step(jstate *st);

/* ---- jinja_exec.c ---- */
int jj_exec(jstate *st, jframe *f, const jnode *n);
int jj_call_macro(jstate *st, jfunc *fn, const jv *args, int nargs, const char **kwn, const jv *kwv,
                  int nkw, jv *out);

/* ---- jinja_filters.c ---- */
int jj_filter(jstate *st, jframe *f, const char *name, jv v, const jv *args, int nargs,
              const char **kwn, const jv *kwv, int nkw, jv *out);
int jj_test(jstate *st, jframe *f, const char *name, jv v, const jv *args, int nargs, int *out);

/* ---- jinja_methods.c ---- */
int jj_method(jstate *st, jv self, const char *name, const jv *args, int nargs, const char **kwn,
              const jv *kwv, int nkw, jv *out);
int jj_has_method(jv self, const char *name);
int jj_builtin(jstate *st, const char *name, const jv *args, int nargs, const char **kwn,
               const jv *kwv, int nkw, jv *out);
int jj_is_builtin(const char *name);
/* Python str methods used by filters too */
int jj_strip(jstate *st, jv s, const jv *chars, int left, int right, jv *out);
/* ---- jinja_case.c ---- */
/* how: "upper", "lower", "title" (str.title), "capitalize", "jtitle" (Jinja's |title). */
int jj_case(jstate *st, const jstr *s, const char *how, jv *out);

/* ---- jinja_format.c ---- */
int jj_percent(jstate *st, jv fmt, jv args, jv *out);
int jj_str_format(jstate *st, jv fmt, const jv *args, int nargs, const char **kwn, const jv *kwv,
                  int nkw, jv *out);
/* markupsafe.escape: & < > " ' as entities; the result is Markup. */
int jj_escape(jstate *st, jv v, jv *out);
/* Python generators fail only when iterated: turns the failure rc of a generator filter
 * (|map, |select, |items ...) into a generator that raises its message when iterated.
 * Limit and memory errors pass through. */
int jj_as_generator(jstate *st, int rc, jv *out);
int jj_slice_str(jstate *st, const jstr *s, size_t cb, size_t ce, jv *out);

#endif
