/* ul_gpu_backend_create for the uvllm executable: the CUDA backend lives in a module
 * (libuvllm-cuda.so, built from the same sources as ul_gpu) that is loaded only when a
 * CUDA backend is asked for, so a process on the CPU or null backend never maps the CUDA
 * runtime and cuBLAS (~200 MB of resident libraries). The module is looked for next to the
 * executable (the directory of /proc/self/exe), or at $UVLLM_CUDA_MODULE for installs that
 * keep it elsewhere. It leaves the engine, model and base symbols it uses undefined; the
 * executable exports them (ENABLE_EXPORTS), so there is one logger, one copy of every
 * global. Plain C, no CUDA header: the executable knows nothing of CUDA.
 *
 * The module stays loaded for the life of the process (a backend's code and the CUDA
 * runtime's threads live there). Called from the loop thread at start-up. */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvllm/backend.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define MODULE_NAME "libuvllm-cuda.so"
#define MODULE_ENV "UVLLM_CUDA_MODULE"

typedef int (*create_fn)(const ul_model_t *, const ul_gpu_config_t *, ul_backend_t **, char *,
                         size_t);

/* The module's path: $UVLLM_CUDA_MODULE as given (a bare name made relative to the working
 * directory, so dlopen never searches the library path), else the executable's directory. */
static int module_path(char *path, size_t len, int *from_env, char *err, size_t errlen) {
    const char *env = getenv(MODULE_ENV);
    *from_env = env && *env;
    if (*from_env) {
        int n = snprintf(path, len, "%s%s", strchr(env, '/') ? "" : "./", env);
        if (n < 0 || (size_t)n >= len)
            return snprintf(err, errlen, "%s is too long", MODULE_ENV), UL_EINVAL;
        return 0;
    }
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0 || (size_t)n >= sizeof exe - 1)
        return snprintf(err, errlen,
                        "cannot find this binary's directory to load the CUDA module %s "
                        "(/proc/self/exe); set %s to its path",
                        MODULE_NAME, MODULE_ENV),
               UL_ENOTSUP;
    exe[n] = '\0';
    char *slash = strrchr(exe, '/');
    if (slash) *slash = '\0';
    n = snprintf(path, len, "%s/%s", slash ? exe : ".", MODULE_NAME);
    if (n < 0 || (size_t)n >= len)
        return snprintf(err, errlen, "the CUDA module's path is too long"), UL_EINVAL;
    return 0;
}

/* Opens the module once (later calls reuse the handle) and returns its create function. */
static int module_create_fn(create_fn *fn, char *err, size_t errlen) {
    static void *handle;
    static create_fn create;
    if (create) return *fn = create, 0;
    char path[PATH_MAX + sizeof MODULE_NAME + 1];
    int from_env, rc = module_path(path, sizeof path, &from_env, err, errlen);
    if (rc) return rc;
    if (access(path, F_OK))
        return snprintf(err, errlen,
                        from_env ? "the CUDA module %s was not found (%s)"
                                 : "this build's CUDA module " MODULE_NAME
                                   " was not found next to the binary: %s (%s; set "
                                   "UVLLM_CUDA_MODULE to its path)",
                        path, strerror(errno)),
               UL_ENOTSUP;
    /* RTLD_NOW: a symbol the executable does not export is a start-up error here, not a
     * crash at the first step; RTLD_LOCAL: nothing of CUDA's leaks into later lookups. */
    if (!handle) handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char *why = dlerror();
        /* dlerror names the module itself only when it is the file at fault, not when a
         * library it needs (libcudart, libcublas) is missing */
        return snprintf(err, errlen, "cannot load the CUDA module %s: %s", path,
                        why ? why : "dlopen failed"),
               UL_ENOTSUP;
    }
    /* dlsym on the handle searches the module and its dependencies, not the executable,
     * whose ul_gpu_backend_create is this loader. */
    void *sym = dlsym(handle, "ul_gpu_backend_create");
    if (!sym)
        return snprintf(err, errlen, "the CUDA module %s has no ul_gpu_backend_create", path),
               UL_ENOTSUP;
    memcpy(&create, &sym, sizeof create); /* ISO C has no object-to-function pointer cast */
    UL_LOG_DEBUG("cuda: loaded module %s", path);
    return *fn = create, 0;
}

int ul_gpu_backend_create(const ul_model_t *m, const ul_gpu_config_t *cfg, ul_backend_t **out,
                          char *err, size_t errlen) {
    *out = NULL;
    create_fn create;
    int rc = module_create_fn(&create, err, errlen);
    if (rc) return rc;
    return create(m, cfg, out, err, errlen);
}
