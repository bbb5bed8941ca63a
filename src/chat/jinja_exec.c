/* Statement execution and the render entry point. Scoping follows Jinja2: a for loop's
 * body gets a fresh scope per iteration (assignments inside do not leak out, hence
 * namespace()), a macro runs in a scope whose parent is where it was defined, if blocks do
 * not scope. Output goes to the current sink, which a {% set %} block, a filter block or a
 * macro call swaps for a capture. Context variables arrive as cJSON and become values
 * here, their strings marked plain when the caller says they are request data. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chat/chat.h"
#include "chat/jinja_impl.h"

const ul_jinja_limits_t ul_jinja_default_limits = {
    .max_steps = 10000000,
    .max_output = 4u << 20,
    .max_memory = 64u << 20,
    .max_range = 100000,
    .max_depth = 64,
};

static int exec_body(jstate *st, jframe *f, const jnode *n) {
    for (int i = 0; i < n->nkids; i++) TRY(jj_exec(st, f, n->kids[i]));
    return 0;
}

/* Runs body with output captured into a string. */
static int capture(jstate *st, jframe *f, const jnode *body, jv *out) {
    jsink s, *saved = st->out;
    jsink_init(&s);
    st->out = &s;
    int rc = exec_body(st, f, body);
    st->out = saved;
    TRY(rc); /* break/continue in a set or filter block leave it for the loop, as in Jinja2 */
    return jsink_str(st, &s, out);
}

static int assign(jstate *st, jframe *f, const jnode *n, jv v) {
    if (n->nnames == 1) return jf_set(st, f, n->names[0], v);
    jlist *l;
    TRY(jv_iter(st, v, &l));
    if (l->n != n->nnames)
        return jj_fail(st, UL_EFORMAT, "ValueError: expected %d values to unpack, got %zu",
                       n->nnames, l->n);
    for (int i = 0; i < n->nnames; i++) TRY(jf_set(st, f, n->names[i], l->v[i]));
    return 0;
}

static int exec_set(jstate *st, jframe *f, const jnode *n) {
    jv v;
    TRY(jj_eval(st, f, n->a, &v));
    if (!n->attr) return assign(st, f, n, v);
    jv *ns = jf_lookup(f, n->name);
    if (!ns && st->globals) ns = jd_gets(st->globals, n->name);
    if (!ns || ns->t != JV_NS)
        return jj_fail(st, UL_EFORMAT,
                       "TemplateRuntimeError: cannot assign attribute on non-namespace object");
    jv key;
    TRY(jv_str(st, n->attr, strlen(n->attr), NULL, &key));
    return jd_set(st, ns->u.d, key, v);
}

/* Applies a filter chain whose innermost operand is the captured text v. */
static int apply_chain(jstate *st, jframe *f, const jnode *chain, jv v, jv *out) {
    if (!chain) {
        *out = v;
        return 0;
    }
    jv inner;
    TRY(apply_chain(st, f, chain->a, v, &inner));
    jv args[16], kw[16];
    if (chain->nkids > 16 || chain->nkids2 > 16)
        return jj_fail(st, UL_EFORMAT, "TypeError: too many filter arguments");
    for (int i = 0; i < chain->nkids; i++) TRY(jj_eval(st, f, chain->kids[i], &args[i]));
    for (int i = 0; i < chain->nkids2; i++) TRY(jj_eval(st, f, chain->kids2[i], &kw[i]));
    return jj_filter(st, f, chain->name, inner, args, chain->nkids, chain->names, kw, chain->nkids2,
                     out);
}

static int exec_for(jstate *st, jframe *f, const jnode *n) {
    jv it;
    jlist *items;
    TRY(jj_eval(st, f, n->a, &it));
    TRY(jv_iter(st, it, &items));
    if (n->c) { /* loop filter: loop.* counts the kept items only */
        jv kept;
        jframe *g;
        TRY(jv_newlist(st, 0, &kept));
        TRY(jf_new(st, f, &g));
        for (size_t i = 0; i < items->n; i++) {
            jv c;
            g->n = 0;
            TRY(assign(st, g, n, items->v[i]));
            TRY(jj_eval(st, g, n->c, &c));
            if (jv_truthy(c)) TRY(jl_push(st, kept.u.l, items->v[i]));
        }
        items = kept.u.l;
    }
    if (++st->depth > st->max_depth)
        return jj_fail(st, UL_E2BIG, "LimitError: nesting deeper than %d", st->max_depth);
    jloop *lp = jj_alloc(st, sizeof *lp);
    if (!lp) return jj_fail(st, UL_E2BIG, "LimitError: out of memory");
    lp->items = items;
    /* One scope reused by every iteration (emptied each time): a loop of a million
     * iterations must not allocate a million scopes. */
    jframe *g;
    int completed = 0;
    TRY(jf_new(st, f, &g));
    for (size_t i = 0; i < items->n; i++) {
        TRY(jj_step(st)); /* an empty body still costs a step per iteration */
        lp->i = i;
        g->n = 0;
        TRY(jf_set(st, g, "loop", (jv){.t = JV_LOOP, .u.loop = lp}));
        TRY(assign(st, g, n, items->v[i]));
        int rc = exec_body(st, g, n->b);
        if (rc == JJ_BREAK) break;
        if (rc < 0) return rc;
        completed |= rc == 0;
    }
    st->depth--;
    /* Jinja2 renders else unless an iteration ran to its end: a loop whose iterations all
     * ended in continue (or that broke before one completed) renders it too. */
    if (!completed && n->d) return exec_body(st, f, n->d);
    return 0;
}

/* A macro made of node n (a macro definition or a call block) that closes over f. */
static int new_macro(jstate *st, jframe *f, const jnode *n, const char *name, jfunc **out) {
    jfunc *fn = jj_new_func(st, JF_MACRO, name, (jv){0});
    if (!fn) return UL_E2BIG;
    fn->macro = n;
    fn->closure = f;
    *out = fn;
    return 0;
}

static int exec_macro_def(jstate *st, jframe *f, const jnode *n) {
    jfunc *fn = NULL;
    TRY(new_macro(st, f, n, n->name, &fn));
    return jf_set(st, f, n->name, (jv){.t = JV_FUNC, .u.fn = fn});
}

int jj_call_macro(jstate *st, jfunc *fn, const jv *args, int nargs, const char **kwn, const jv *kwv,
                  int nkw, jv *out) {
    const jnode *m = fn->macro;
    jframe *g;
    if (nargs > m->nnames)
        return jj_fail(st, UL_EFORMAT, "TypeError: macro '%s' takes not more than %d argument(s)",
                       fn->name ? fn->name : "caller", m->nnames);
    if (++st->depth > st->max_depth)
        return jj_fail(st, UL_E2BIG, "LimitError: macro calls nested deeper than %d",
                       st->max_depth);
    for (int k = 0; k < nkw; k++) {
        int known = 0;
        for (int i = 0; i < m->nnames; i++) known |= !strcmp(kwn[k], m->names[i]);
        if (!known)
            return jj_fail(st, UL_EFORMAT, "TypeError: macro '%s' takes no keyword argument '%s'",
                           fn->name ? fn->name : "caller", kwn[k]);
    }
    TRY(jf_new(st, fn->closure, &g));
    for (int i = 0; i < m->nnames; i++) {
        jv v = jv_undef(NULL);
        int given = 0;
        if (i < nargs) {
            v = args[i];
            given = 1;
        }
        for (int k = 0; k < nkw; k++)
            if (!strcmp(kwn[k], m->names[i])) {
                v = kwv[k];
                given = 1;
            }
        if (!given && m->kids2[i]) TRY(jj_eval(st, g, m->kids2[i], &v));
        TRY(jf_set(st, g, m->names[i], v));
    }

    if (fn->closure && fn->macro && fn->self.t == JV_FUNC) TRY(jf_set(st, g, "caller", fn->self));
    TRY(capture(st, g, m->b, out));
    st->depth--;
    return 0;
}

static int exec_call_block(jstate *st, jframe *f, const jnode *n) {
    /* caller is a macro made of the block's body and parameters */
    jfunc *caller = NULL;
    TRY(new_macro(st, f, n, "caller", &caller));
    const jnode *call = n->a;
    jv fn, args[16], kw[16], out;
    TRY(jj_eval(st, f, call->a, &fn));
    if (call->nkids > 16 || call->nkids2 > 16)
        return jj_fail(st, UL_EFORMAT, "TypeError: too many arguments");
    for (int i = 0; i < call->nkids; i++) TRY(jj_eval(st, f, call->kids[i], &args[i]));
    for (int i = 0; i < call->nkids2; i++) TRY(jj_eval(st, f, call->kids2[i], &kw[i]));
    if (fn.t != JV_FUNC || fn.u.fn->kind != JF_MACRO)
        return jj_fail(st, UL_EFORMAT, "TypeError: {%% call %%} needs a macro");
    jfunc bound = *fn.u.fn;
    bound.self = (jv){.t = JV_FUNC, .u.fn = caller};
    TRY(jj_call_macro(st, &bound, args, call->nkids, call->names, kw, call->nkids2, &out));
    return jj_str(st, st->out, out);
}

static int exec_node(jstate *st, jframe *f, const jnode *n);

int jj_exec(jstate *st, jframe *f, const jnode *n) {
    TRY(jj_step(st));
    if (++st->rdepth > JJ_MAX_RDEPTH)
        return jj_fail(st, UL_E2BIG, "LimitError: evaluation nested deeper than %d", JJ_MAX_RDEPTH);
    int rc = exec_node(st, f, n);
    st->rdepth--;
    return rc;
}

static int exec_node(jstate *st, jframe *f, const jnode *n) {
    jv v;
    switch (n->kind) {
    case N_DATA:
        return jsink_put(st, st->out, n->lit.u.s->p, n->lit.u.s->len, NULL);
    case N_EMIT:
        TRY(jj_eval(st, f, n->a, &v));
        return jj_str(st, st->out, v);
    case N_BODY:
        return exec_body(st, f, n);
    case N_IF:
        TRY(jj_eval(st, f, n->a, &v));
        if (jv_truthy(v)) return exec_body(st, f, n->b);
        return n->c ? exec_body(st, f, n->c) : 0;
    case N_FOR:
        return exec_for(st, f, n);
    case N_SET:
        return exec_set(st, f, n);
    case N_SETBLOCK: {
        jv s;
        TRY(capture(st, f, n->b, &s));
        TRY(apply_chain(st, f, n->c, s, &v));
        return jf_set(st, f, n->names[0], v);
    }
    case N_FILTERBLOCK: {
        jv s;
        TRY(capture(st, f, n->b, &s));
        TRY(apply_chain(st, f, n->c, s, &v));
        return jj_str(st, st->out, v);
    }
    case N_MACRO:
        return exec_macro_def(st, f, n);
    case N_CALLBLOCK:
        return exec_call_block(st, f, n);
    case N_BREAK:
        return JJ_BREAK;
    case N_CONTINUE:
        return JJ_CONTINUE;
    default:
        return jj_fail(st, UL_EFORMAT, "TemplateError: bad statement node");
    }
}

/* ---- context from JSON ---- */

static int from_json(jstate *st, const cJSON *j, int plain, int depth, jv *out) {
    if (depth > 200) return jj_fail(st, UL_E2BIG, "LimitError: JSON nested too deeply");
    if (cJSON_IsString(j)) {
        const char *s = j->valuestring ? j->valuestring : "";
        return jv_from_bytes_any_plain(st, s, strlen(s), plain, out);
    }
    if (cJSON_IsBool(j))
        *out = jv_bool(cJSON_IsTrue(j));
    else if (cJSON_IsNumber(j)) {
        double d = j->valuedouble;
        /* range first: converting a double outside int64's range is undefined */
        if (!(j->type & UL_CHAT_JSON_FLOAT) && d > -9.2e18 && d < 9.2e18 && d == (double)(int64_t)d)
            *out = jv_int((int64_t)d);
        else
            *out = jv_float(d);
    } else if (cJSON_IsArray(j)) {
        TRY(jv_newlist(st, 0, out));
        for (const cJSON *c = j->child; c; c = c->next) {
            jv v;
            TRY(from_json(st, c, plain, depth + 1, &v));
            TRY(jl_push(st, out->u.l, v));
        }
    } else if (cJSON_IsObject(j)) {
        TRY(jv_newdict(st, 0, out));
        for (const cJSON *c = j->child; c; c = c->next) {
            jv k, v;
            const char *name = c->string ? c->string : "";
            TRY(jv_from_bytes_any_plain(st, name, strlen(name), plain, &k));
            TRY(from_json(st, c, plain, depth + 1, &v));
            TRY(jd_set(st, out->u.d, k, v));
        }
    } else {
        *out = jv_none();
    }
    return 0;
}

static int build_globals(jstate *st, const ul_jinja_var_t *vars, size_t nvars, jdict **out) {
    jv g;
    TRY(jv_newdict(st, nvars, &g));
    for (size_t i = 0; i < nvars; i++) {
        jv k, v;
        TRY(jv_str(st, vars[i].name, strlen(vars[i].name), NULL, &k));
        TRY(from_json(st, vars[i].json, vars[i].plain, 0, &v));
        TRY(jd_set(st, g.u.d, k, v));
    }
    *out = g.u.d;
    return 0;
}

static int copy_out(jsink *s, ul_buf_t *out, ul_buf_t *plain) {
    if (ul_buf_append(out, s->p, s->len)) return UL_ENOMEM;
    if (plain && ul_buf_append(plain, s->m, s->len)) {
        out->len -= s->len;
        return UL_ENOMEM;
    }
    return 0;
}

int ul_jinja_render(const ul_jinja_t *t, const ul_jinja_var_t *vars, size_t nvars, int64_t now,
                    const ul_jinja_limits_t *limits, ul_buf_t *out, ul_buf_t *plain, char *msg,
                    size_t msgcap) {
    const ul_jinja_limits_t *lim = limits ? limits : &ul_jinja_default_limits;
    ul_arena_t arena;
    ul_arena_init(&arena, 64 << 10);
    jsink sink;
    jsink_init(&sink);
    jstate st = {.arena = &arena,
                 .out = &sink,
                 .max_steps = lim->max_steps,
                 .max_out = lim->max_output,
                 .max_mem = lim->max_memory,
                 .max_range = lim->max_range,
                 .max_depth = lim->max_depth,
                 .now = now ? now : (int64_t)time(NULL),
                 .msg = msg,
                 .msgcap = msgcap};
    if (msg && msgcap) msg[0] = 0;
    jdict *globals;
    int rc = build_globals(&st, vars, nvars, &globals);
    if (!rc) {
        st.globals = globals;
        rc = jf_new(&st, NULL, &st.top);
    }
    if (!rc) rc = exec_body(&st, st.top, t->root);
    if (rc > 0) rc = 0; /* break/continue outside a loop: Jinja2 refuses at compile time */
    if (!rc)
        rc = copy_out(&sink, out, plain);
    else if (rc == UL_EFORMAT && st.raised)
        rc = UL_EINVAL;
    ul_arena_free(&arena);
    return rc;
}

int ul_jinja_new(const char *src, size_t len, ul_jinja_t **out, char *err, size_t errcap) {
    ul_jinja_t *t = calloc(1, sizeof *t);
    if (!t) return UL_ENOMEM;
    ul_arena_init(&t->arena, 64 << 10);
    if (err && errcap) err[0] = 0;
    int rc = jj_parse(t, src, len, err, errcap);
    if (rc) {
        ul_jinja_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void ul_jinja_free(ul_jinja_t *t) {
    if (!t) return;
    ul_arena_free(&t->arena);
    free(t);
}
