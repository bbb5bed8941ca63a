/* Work proportional to what a client sent (tokenizing a long text, detokenizing many ids,
 * rendering a chat template over a large request, building their answers) runs off the
 * loop thread on libuv's thread pool, so one large request cannot stall every stream,
 * health probe and accept. Jobs queue here first: at most a quarter of the CPUs the process
 * may use run at once, at least one (the pool also serves others, and the machine's cores
 * belong to the backend and the loop first: on 2 cores a second tokenizer thread doubled
 * the honest streams' inter-token p99 under a tokenize flood), at
 * most JOBS_WAITING waiting (more is a 503) and JOBS_PER_CLIENT per client waiting or
 * running (more is a 429), so one client's flood waits behind itself. A pool thread that
 * runs a job lowers its own priority (nice JOB_NICE) once: a job takes the CPU the backend
 * and the loop leave. Loop thread only, except run() and ul_api_job_thread(). */
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "api/gen.h"
#include "uvllm/err.h"
#include "uvllm/log.h"

#define JOBS_WAITING 64
#define JOBS_PER_CLIENT 4
#define JOB_NICE 10

static _Thread_local int t_niced, t_in_job;

int ul_api_job_thread(void) { return t_in_job; }

static void work_cb(uv_work_t *w) {
    ul_api_job_t *j = w->data;
    if (!t_niced) {
        t_niced = 1;
        int rc = setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), JOB_NICE);
        (void)rc; /* best effort: not being able to yield is no reason to fail */
    }
    t_in_job = 1;
    j->run(j);
    t_in_job = 0;
}

static void start_next(ul_api_t *a);

static void finish(ul_api_job_t *j, int status) {
    ul_api_t *a = j->api;
    j->state = 0;
    if (a->server) ul_http_mem_release(a->server, j->charge);
    ul_api_share_del(&a->share, j->client, UL_API_SHARE_JOBS, 1);
    j->done(j, status);
}

static void after_cb(uv_work_t *w, int status) {
    ul_api_job_t *j = w->data;
    ul_api_t *a = j->api;
    a->jobs_running--;
    finish(j, status == UV_ECANCELED ? UL_ECANCELED : 0);
    start_next(a);
}

static int jobs_running_max(void) {
    static int n;
    if (!n) n = uv_available_parallelism() >= 8 ? (int)uv_available_parallelism() / 4 : 1;
    return n;
}

static void start_next(ul_api_t *a) {
    while (a->jobs_running < jobs_running_max() && !ul_queue_empty(&a->jobs_waiting)) {
        ul_queue_t *q = ul_queue_head(&a->jobs_waiting);
        ul_queue_remove(q);
        a->jobs_queued--;
        ul_api_job_t *j = UL_QUEUE_DATA(q, ul_api_job_t, node);
        if (!*j->req) { /* the client left while it waited: nothing to compute */
            finish(j, UL_ECANCELED);
            continue;
        }
        j->work.data = j;
        if (uv_queue_work(a->server->loop, &j->work, work_cb, after_cb)) {
            finish(j, UL_ENOMEM);
            continue;
        }
        j->state = 2;
        a->jobs_running++;
        a->jobs_total++;
    }
}

int ul_api_job_precheck(ul_api_t *a, const ul_http_req_t *req) {
    if (a->jobs_queued + a->jobs_pending >= JOBS_WAITING) return UL_EFULL;
    uint64_t client = ul_api_client_of(a, req);
    if (ul_api_share_get(&a->share, client, UL_API_SHARE_JOBS) >= JOBS_PER_CLIENT) return UL_EBUSY;
    return 0;
}

static void hold_release(void *data, uint64_t client) {
    ul_api_t *a = data;
    a->jobs_pending--;
    ul_api_share_del(&a->share, client, UL_API_SHARE_JOBS, 1);
}

int ul_api_job_hold(ul_api_t *a, ul_http_req_t *req) {
    uint64_t client = ul_api_client_of(a, req);
    int rc = ul_api_share_add(&a->share, client, UL_API_SHARE_JOBS, 1, JOBS_PER_CLIENT);
    if (rc) return rc == UL_EFULL ? UL_EBUSY : rc;
    a->jobs_pending++;
    ul_http_req_hold(req, hold_release, a, client);
    return 0;
}

int ul_api_job_submit(ul_api_t *a, ul_api_job_t *j) {
    if (!a->jobs_init) {
        ul_queue_init(&a->jobs_waiting);
        a->jobs_init = 1;
    }
    j->api = a;
    j->client = ul_api_client_of(a, *j->req);
    if (a->jobs_queued >= JOBS_WAITING) {
        a->jobs_refused++;
        return UL_EFULL;
    }
    int st = j->charge ? ul_http_mem_charge(*j->req, j->charge) : 0;
    if (st) {
        a->jobs_refused++;
        return st == 413 ? UL_E2BIG : UL_ENOMEM;
    }
    if (ul_api_share_add(&a->share, j->client, UL_API_SHARE_JOBS, 1, JOBS_PER_CLIENT)) {
        if (j->charge) ul_http_mem_release(a->server, j->charge);
        a->jobs_refused++;
        return UL_EBUSY;
    }
    j->state = 1;
    ul_queue_init(&j->node);
    ul_queue_insert_tail(&a->jobs_waiting, &j->node);
    a->jobs_queued++;
    start_next(a);
    return 0;
}

int ul_api_job_refuse(ul_api_t *a, ul_http_req_t *req, int rc) {
    ul_api_bad_t bad = {.status = 503, .type = "server_error", .code = "server_busy"};
    if (rc == UL_EBUSY) {
        bad =
            (ul_api_bad_t){.status = 429, .type = "rate_limit_error", .code = "too_many_requests"};
        snprintf(bad.msg, sizeof bad.msg,
                 "too many large requests of this client are being processed; retry when one "
                 "is answered");
    } else if (rc == UL_E2BIG) {
        bad = (ul_api_bad_t){.status = 413, .code = "request_too_large"};
        snprintf(bad.msg, sizeof bad.msg,
                 "processing this request would take more memory than this server gives one "
                 "connection; send less at once");
    } else {
        snprintf(bad.msg, sizeof bad.msg, "%s",
                 rc == UL_EFULL ? "too many large requests are being processed; retry later"
                                : "the server's memory for requests is full; retry later");
    }
    if (bad.status != 413) ul_http_resp_header(req, "Retry-After", "1");
    return ul_api_reject(a, req, &bad);
}

int ul_api_job_inline(ul_api_t *a, ul_http_req_t *req, ul_api_job_t *j, int small,
                      const char **body, size_t *len, char **owned) {
    if (small || !a->server) {
        *body = req->body;
        *len = req->body_len;
        j->run(j);
        j->done(j, 0);
        return 1;
    }
    *owned = ul_http_req_take_body(req, len);
    *body = *owned ? *owned : "";
    return 0;
}

int ul_api_job_start(ul_api_t *a, ul_http_req_t *req, ul_api_job_t *j,
                     void (*on_abort)(ul_http_req_t *req, void *data, int reason), void *data) {
    ul_http_req_set_cbs(req, &(ul_http_req_cbs_t){.on_abort = on_abort}, data);
    int rc = ul_api_job_submit(a, j);
    if (rc) {
        ul_http_req_set_cbs(req, NULL, NULL);
        ul_api_job_refuse(a, req, rc);
    }
    return rc;
}
