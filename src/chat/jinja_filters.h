/* Shared by the filter files (jinja_filters.c, jinja_seq.c, jinja_tests.c): the arguments of
 * one filter or test call, looked up by position or keyword as Python would. */
#ifndef UL_CHAT_JINJA_FILTERS_H
#define UL_CHAT_JINJA_FILTERS_H

#include "chat/jinja_impl.h"

typedef struct jfargs {
    const jv *args;
    int n;
    const char **kwn;
    const jv *kwv;
    int nkw;
    jframe *f;
} jfargs;

/* The argument at pos or named name; 0 when neither was given. */
int jj_arg(const jfargs *a, int pos, const char *name, jv *out);
/* Sequence filters: select/reject(attr), map, sort, unique, dictsort, sum, min, max, batch,
 * slice. UL_EFORMAT "No filter named ..." for an unknown name. */
int jj_filter_seq(jstate *st, const char *name, jv v, const jfargs *a, jv *out);

#endif
