/* The api's defences against hostile bodies and clients, without a server: the body check
 * names the field that carries invalid UTF-8 or a \u0000 escape, the fair-share table
 * counts per client and forgets a client whose counts are back to 0, and large-request jobs
 * run below the loop's priority without lowering the pool's. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/gen.h"
#include "net/http.h"
#include "uvllm/err.h"

static int check(const char *body, char *param, size_t *at) {
    return ul_api_body_check(body, strlen(body), param, 128, at);
}

Test(body, names_the_field) {
    char p[128];
    size_t at;
    cr_assert_eq(check("{\"prompt\":\"ok\",\"n\":2}", p, &at), 0);
    cr_assert_eq(check("{\"prompt\":\"a\\u0000b\"}", p, &at), 2);
    cr_assert_str_eq(p, "prompt");
    cr_assert_eq(check("{\"prompt\":\"a\\\\u0000b\"}", p, &at), 0, "an escaped backslash");
    cr_assert_eq(check("{\"messages\":[{\"role\":\"user\"},{\"role\":\"user\",\"content\":"
                       "\"x\\u0000\"}]}",
                       p, &at),
                 2);
    cr_assert_str_eq(p, "messages[1].content");
    cr_assert_eq(check("{\"stop\":[\"a\",\"\xff\"]}", p, &at), 1);
    cr_assert_str_eq(p, "stop[1]");
    cr_assert_eq(at, 14);
    cr_assert_eq(check("{\"a\":{\"b\\u0000c\":1}}", p, &at), 2);
    cr_assert_str_eq(p, "a.b", "a key: the path up to it");
    cr_assert_eq(check("[\"\xe4\xb8\"]", p, &at), 1, "cut-short character");
    cr_assert_str_eq(p, "[0]");
    cr_assert_eq(check("{\"x\":\"\xe4\xb8\xad\xf0\x9f\x98\x80\"}", p, &at), 0, "valid UTF-8");
}

Test(share, counts_per_client_and_forgets) {
    ul_api_share_t s = {0};
    for (uint64_t c = 1; c <= 1000; c++)
        cr_assert_eq(ul_api_share_add(&s, c * 7919, UL_API_SHARE_SEQS, 3, 4), 0);
    cr_assert_eq(ul_api_share_add(&s, 7919, UL_API_SHARE_SEQS, 2, 4), UL_EFULL);
    cr_assert_eq(ul_api_share_add(&s, 7919, UL_API_SHARE_SEQS, 1, 4), 0);
    cr_assert_eq(ul_api_share_get(&s, 7919, UL_API_SHARE_SEQS), 4);
    cr_assert_eq(ul_api_share_add(&s, 7919, UL_API_SHARE_JOBS, 1, 1), 0);
    cr_assert_eq(ul_api_share_add(&s, 7919, UL_API_SHARE_JOBS, 1, 1), UL_EFULL);
    for (uint64_t c = 2; c <= 1000; c++) ul_api_share_del(&s, c * 7919, UL_API_SHARE_SEQS, 3);
    cr_assert_eq(s.used, 1, "clients with nothing in flight are forgotten");
    cr_assert_eq(ul_api_share_get(&s, 7919, UL_API_SHARE_SEQS), 4, "survives the deletions");
    ul_api_share_del(&s, 7919, UL_API_SHARE_SEQS, 4);
    cr_assert_eq(s.used, 1, "jobs still counted");
    ul_api_share_del(&s, 7919, UL_API_SHARE_JOBS, 1);
    cr_assert_eq(s.used, 0);
    cr_assert_eq(ul_api_share_add(&s, 5, UL_API_SHARE_SEQS, 100, 0), 0, "0: no limit");
    ul_api_share_free(&s);
}

/* Jobs (api/job.c) run at a lower priority than the loop, on a thread that ends with the
 * job: the pool thread that started it keeps its priority, so the large frees and heap
 * trims the same pool runs for the loop (net/budget.c) never hold the allocator's locks at
 * the job's low priority (a niced pool thread preempted inside them stalled the loop 16-55
 * ms at a time under a tokenize flood). One pool thread, so the plain work after the job
 * runs on the very thread that ran it. */
typedef struct {
    ul_api_job_t job; /* first */
    int nice, in_job, status;
} prio_job_t;

static int my_nice(void) { return getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid)); }

static void prio_run(ul_api_job_t *j) {
    prio_job_t *p = (prio_job_t *)j;
    p->nice = my_nice();
    p->in_job = ul_api_job_thread();
}

static void prio_done(ul_api_job_t *j, int status) { ((prio_job_t *)j)->status = status + 1; }

static void pool_work(uv_work_t *w) {
    int *n = w->data;
    n[0] = my_nice();
    n[1] = ul_api_job_thread();
}

static void pool_done(uv_work_t *w, int status) { (void)w, (void)status; }

Test(jobs, run_below_the_loop_and_leave_the_pool_as_it_was) {
    setenv("UV_THREADPOOL_SIZE", "1", 1);
    uv_loop_t loop;
    cr_assert_eq(uv_loop_init(&loop), 0);
    static ul_http_server_t srv;
    srv.loop = &loop;
    ul_api_t a = {0};
    a.server = &srv;
    ul_http_req_t req = {0}, *rp = &req;
    const int base = my_nice();
    for (int round = 0; round < 2; round++) {
        prio_job_t p = {.job = {.req = &rp, .run = prio_run, .done = prio_done}};
        cr_assert_eq(ul_api_job_submit(&a, &p.job), 0);
        cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
        cr_assert_eq(p.status, 1, "done() with status 0");
        cr_assert(p.in_job);
        cr_assert_eq(p.nice, base + 10 < 19 ? base + 10 : 19, "the job runs 10 levels nicer");
        int n[2] = {-100, -1};
        uv_work_t w = {.data = n};
        cr_assert_eq(uv_queue_work(&loop, &w, pool_work, pool_done), 0);
        cr_assert_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
        cr_assert_eq(n[0], base, "round %d: the pool thread is back at nice %d, not %d", round,
                     base, n[0]);
        cr_assert_eq(n[1], 0);
    }
    cr_assert_eq(uv_loop_close(&loop), 0);
    ul_api_share_free(&a.share);
}
