/* Byte counts as flags write them, and MemAvailable from a /proc/meminfo text. */
#include <criterion/criterion.h>
#include <stdint.h>

#include "base/size.h"
#include "uvllm/err.h"

static int64_t parse(const char *s) {
    int64_t v = -1;
    int rc = ul_size_parse(s, &v);
    cr_assert_eq(rc, 0, "'%s' refused: %d", s, rc);
    return v;
}

static void refuse(const char *s, int want) {
    int64_t v = 12345;
    cr_assert_eq(ul_size_parse(s, &v), want, "'%s'", s);
    cr_assert_eq(v, 12345, "'%s' wrote a value", s);
}

Test(size, parse_plain_and_suffixes) {
    cr_assert_eq(parse("1073741824"), 1073741824);
    cr_assert_eq(parse("0"), 0);
    cr_assert_eq(parse("512M"), 512ll << 20);
    cr_assert_eq(parse("4G"), 4ll << 30);
    cr_assert_eq(parse("4g"), 4ll << 30);
    cr_assert_eq(parse("64K"), 64ll << 10);
    cr_assert_eq(parse("2T"), 2ll << 40);
    cr_assert_eq(parse("512MB"), 512ll << 20);
    cr_assert_eq(parse("512MiB"), 512ll << 20);
    cr_assert_eq(parse("512mib"), 512ll << 20);
    cr_assert_eq(parse("100B"), 100);
    cr_assert_eq(parse("1.5G"), 3ll << 29);
    cr_assert_eq(parse("0.5K"), 512);
}

Test(size, parse_refusals) {
    refuse("", UL_EINVAL);
    refuse(NULL, UL_EINVAL);
    refuse("M", UL_EINVAL);
    refuse("-1G", UL_EINVAL);
    refuse("+1G", UL_EINVAL);
    refuse(" 1G", UL_EINVAL);
    refuse("1G ", UL_EINVAL);
    refuse("1 G", UL_EINVAL);
    refuse("1X", UL_EINVAL);
    refuse("1GG", UL_EINVAL);
    refuse("1Gx", UL_EINVAL);
    refuse("1.5", UL_EINVAL);
    refuse("1.G", UL_EINVAL);
    refuse("0x10", UL_EINVAL);
    refuse("9223372036854775808", UL_E2BIG);
    refuse("99999999999999999999999", UL_E2BIG);
    refuse("8388608T", UL_E2BIG);
    cr_assert_eq(parse("8388607T"), 8388607ll << 40);
}

Test(size, format) {
    char buf[32];
    cr_assert_str_eq(ul_size_format(512ll << 20, buf, sizeof buf), "512.0 MiB");
    cr_assert_str_eq(ul_size_format(1000, buf, sizeof buf), "1000 B");
}

Test(size, mem_limit_is_the_machines_or_lower) {
    cr_assert_gt(ul_size_mem_limit(), 0, "this machine has a MemTotal");
}
