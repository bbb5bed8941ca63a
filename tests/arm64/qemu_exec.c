/* LD_PRELOAD shim for test binaries under qemu-user without binfmt_misc (make test-arm64):
 * an emulated process's execve of an AArch64 program fails with ENOEXEC on an x86 host,
 * and criterion (BoxFort) runs every test by re-executing its own binary. This execve
 * runs such a program through qemu-aarch64 instead, with the same sysroot, CPU model and
 * this shim (UVLLM_QEMU, QEMU_LD_PREFIX, QEMU_CPU and UVLLM_QEMU_SHIM from the runner,
 * tests/arm64/run.sh). Built for aarch64 only; never linked into uvllm. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int is_aarch64_elf(const char *path) {
    unsigned char h[20];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, h, sizeof h);
    close(fd);
    return n == (ssize_t)sizeof h && !memcmp(h, "\177ELF", 4) && h[18] == 183; /* EM_AARCH64 */
}

int execve(const char *path, char *const argv[], char *const envp[]) {
    static int (*real)(const char *, char *const[], char *const[]);
    if (!real)
        real = (int (*)(const char *, char *const[], char *const[]))dlsym(RTLD_NEXT, "execve");
    const char *qemu = getenv("UVLLM_QEMU"), *shim = getenv("UVLLM_QEMU_SHIM");
    if (!qemu || !shim || !is_aarch64_elf(path)) return real(path, argv, envp);
    int argc = 0, envc = 0;
    while (argv[argc]) argc++;
    while (envp[envc]) envc++;
    /* qemu -E LD_PRELOAD=shim -0 argv0 path argv[1..]: the host qemu itself must not see
     * an AArch64 LD_PRELOAD */
    char **nargv = calloc((size_t)argc + 8, sizeof *nargv),
         **nenv = calloc((size_t)envc + 1, sizeof *nenv);
    char *pre = malloc(strlen(shim) + 12);
    if (!nargv || !nenv || !pre) {
        errno = ENOMEM;
        return -1;
    }
    strcpy(pre, "LD_PRELOAD=");
    strcat(pre, shim);
    int a = 0;
    nargv[a++] = (char *)qemu;
    nargv[a++] = "-E";
    nargv[a++] = pre;
    nargv[a++] = "-0";
    nargv[a++] = argc ? argv[0] : (char *)path;
    nargv[a++] = (char *)path;
    for (int i = 1; i < argc; i++) nargv[a++] = argv[i];
    int e = 0;
    for (int i = 0; i < envc; i++)
        if (strncmp(envp[i], "LD_PRELOAD=", 11)) nenv[e++] = envp[i];
    return real(qemu, nargv, nenv);
}
