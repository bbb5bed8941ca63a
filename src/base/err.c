/* The error table: messages and names generated from UL_ERRNO_MAP. */
#include <string.h>

#include "uvllm/err.h"

const char *ul_strerror(int err) {
    if (err == 0) return "success";
#define XX(name, value, msg)                                                                       \
    if (err == (value)) return msg;
    UL_ERRNO_MAP(XX)
#undef XX
    return "unknown error";
}

const char *ul_err_name(int err) {
    if (err == 0) return "OK";
#define XX(name, value, msg)                                                                       \
    if (err == (value)) return #name;
    UL_ERRNO_MAP(XX)
#undef XX
    return "UNKNOWN";
}
