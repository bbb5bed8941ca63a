/* Error codes: every uvllm function returns 0 or a negative UL_E* code.
 * System errors reuse the negative errno values libuv uses on Unix (UV_EINVAL == -EINVAL),
 * so a libuv status can be returned as it is; uvllm's own codes live below -30000. */
#ifndef UVLLM_ERR_H
#define UVLLM_ERR_H

#include <errno.h>

#define UL_ERRNO_MAP(XX)                                                                           \
    XX(EINVAL, (-EINVAL), "invalid argument")                                                      \
    XX(ENOMEM, (-ENOMEM), "out of memory")                                                         \
    XX(ENOENT, (-ENOENT), "no such file or directory")                                             \
    XX(EIO, (-EIO), "i/o error")                                                                   \
    XX(ERANGE, (-ERANGE), "value out of range")                                                    \
    XX(EBUSY, (-EBUSY), "resource busy")                                                           \
    XX(E2BIG, (-E2BIG), "too large")                                                               \
    XX(ETIMEDOUT, (-ETIMEDOUT), "timed out")                                                       \
    XX(ECANCELED, (-ECANCELED), "operation canceled")                                              \
    XX(ENOTSUP, (-ENOTSUP), "not supported")                                                       \
    XX(EFORMAT, (-30001), "malformed input")                                                       \
    XX(ECLOSED, (-30002), "closed")                                                                \
    XX(EFULL, (-30003), "capacity exhausted")                                                      \
    XX(ESTATE, (-30004), "invalid state")

enum {
#define XX(name, value, msg) UL_##name = value,
    UL_ERRNO_MAP(XX)
#undef XX
};

/* Human-readable message for an error code; never NULL. */
const char *ul_strerror(int err);
/* Symbolic name ("EINVAL"); "UNKNOWN" for codes outside the table. */
const char *ul_err_name(int err);

#endif
