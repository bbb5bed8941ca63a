/* Lets criterion's runner start under ThreadSanitizer. Linked into the unit-test binaries of
 * the TSan build only (UVLLM_TSAN); nothing in uvllm itself uses it.
 *
 * Criterion 2.4 (BoxFort) maps its "inheritable arena" at a random address drawn with
 * rand_r() from [0x2000_0000_0000, 0x6000_0000_0000), accepting a draw only if mincore()
 * says the range is unmapped, and gives up after a few tries ("Could not initialize
 * inheritable arena: Resource temporarily unavailable", then abort). TSan reserves almost
 * all of that span for its shadow and meta memory (PROT_NONE, so mapped), leaving free only
 * its PIE application range 0x5500_0000_0000..0x5680_0000_0000: about 2% of draws.
 *
 * This rand_r interposes the C library's and, for calls from libcriterion only, folds the
 * draw into that range (BoxFort's base = 0x2000_0000_0000 + (r & 0x3fffff) << 24), keeping
 * it random so a draw that hits the test binary's own mapping is retried elsewhere. Every
 * other caller (tests seed rand_r for reproducible inputs) gets the C library's value. */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#define APP_LO 0x350000u /* (0x5500_0000_0000 - 0x2000_0000_0000) >> 24 */
#define APP_N 0x18000u   /* 0x0180_0000_0000 >> 24 */

int rand_r(unsigned *seed) {
    static int (*real)(unsigned *);
    if (!real) real = (int (*)(unsigned *))dlsym(RTLD_NEXT, "rand_r");
    int r = real(seed);
    Dl_info di;
    if (dladdr(__builtin_return_address(0), &di) && di.dli_fname &&
        strstr(di.dli_fname, "libcriterion"))
        r = (int)(APP_LO + (unsigned)r % APP_N);
    return r;
}
