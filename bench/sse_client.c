/* SSE load client for bench/sse.sh: opens N concurrent streaming
 * POST /v1/completions requests (libuv, one thread, one socket per stream),
 * decodes HTTP/1.1 chunked bodies and counts the SSE events of each stream,
 * time-stamping each event when its terminating blank line arrives. At the
 * end it prints ONE JSON object: delivered events per second (over the whole
 * run and over the window in which every stream was live), the p50/p99/max
 * gap between consecutive events of a stream, time to first event, error
 * counts, and the server's CPU time over the run (utime+stime from
 * /proc/PID/stat when --pid is given).
 *
 * Connects are ramped (--ramp handshakes in flight at once) so the listen
 * backlog does not drop SYNs and turn into 1 s retransmit stalls that would
 * be the client's fault, not the server's.
 *
 * Build: cc -O2 -o sse_client sse_client.c -luv -lm */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

enum { ST_HEAD, ST_BODY, ST_DONE, ST_FAILED };
enum { CH_SIZE, CH_DATA, CH_DATA_END, CH_END };

typedef struct stream_s {
    uv_tcp_t tcp;
    uv_connect_t conn_req;
    uv_write_t write_req;
    int idx;
    int state;
    char head[16384]; /* response head until the blank line */
    size_t head_len;
    int chunked;
    int ch_state;
    uint64_t ch_left;
    char line[256]; /* current SSE line prefix; longer lines are truncated */
    size_t line_len;
    int event_has_data;
    int saw_done;
    uint64_t *ts; /* [cap] event arrival times, ns */
    int n_ev, cap;
    const char *why; /* failure reason */
} stream_t;

static struct {
    const char *host, *path, *prompt;
    int port, n, max_tokens, ramp, pid, timeout_s;
} g_opt = {"127.0.0.1", "/v1/completions", "hello", 0, 100, 64, 128, 0, 300};

static uv_loop_t *g_loop;
static stream_t *g_streams;
static int g_next, g_in_connect, g_finished;
static uint64_t g_t0, g_t_end;
static char g_req[1024];
static size_t g_req_len;
static uv_timer_t g_timer;
static char g_rbuf[1 << 16];
static int g_fail_connect, g_fail_status, g_fail_closed, g_short, g_timeout_cnt;

static void start_more(void);

static double cpu_seconds(int pid) {
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')'); /* comm may hold spaces: fields count from here */
    if (!p) return -1;
    unsigned long long ut = 0, st = 0;
    /* after ")": state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime(14)
     * stime(15) */
    if (sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

/* Run-queue wait of all the server's threads (ns, from schedstat): time it
 * was runnable but another process held the core. Large values mean the
 * machine's noise, not the server, set the pace. */
static double runq_wait_seconds(int pid) {
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d) return -1;
    double total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p2[320];
        snprintf(p2, sizeof p2, "/proc/%d/task/%s/schedstat", pid, e->d_name);
        FILE *f = fopen(p2, "r");
        if (!f) continue;
        unsigned long long run = 0, wait = 0;
        if (fscanf(f, "%llu %llu", &run, &wait) == 2) total += (double)wait / 1e9;
        fclose(f);
    }
    closedir(d);
    return total;
}

static void on_close(uv_handle_t *h) { (void)h; }

static void finish(stream_t *s, int state, const char *why) {
    if (s->state == ST_DONE || s->state == ST_FAILED) return;
    s->state = state;
    s->why = why;
    g_finished++;
    uv_close((uv_handle_t *)&s->tcp, on_close);
    if (g_finished == g_opt.n) {
        g_t_end = uv_hrtime();
        uv_timer_stop(&g_timer);
        uv_close((uv_handle_t *)&g_timer, NULL);
    }
}

/* One SSE line (without its '\n'); an empty line ends an event. */
static void sse_line(stream_t *s, uint64_t now) {
    size_t n = s->line_len;
    if (n && s->line[n - 1] == '\r') n--;
    if (n == 0) {
        if (s->event_has_data && !s->saw_done) {
            if (s->n_ev == s->cap) {
                s->cap = s->cap ? s->cap * 2 : 64;
                s->ts = realloc(s->ts, (size_t)s->cap * sizeof *s->ts);
                if (!s->ts) abort();
            }
            s->ts[s->n_ev++] = now;
        }
        s->event_has_data = 0;
        return;
    }
    if (n >= 5 && !memcmp(s->line, "data:", 5)) {
        const char *v = s->line + 5;
        size_t vn = n - 5;
        if (vn && *v == ' ') v++, vn--;
        if (vn == 6 && !memcmp(v, "[DONE]", 6))
            s->saw_done = 1;
        else
            s->event_has_data = 1;
    }
}

static void sse_bytes(stream_t *s, const char *p, size_t n, uint64_t now) {
    for (size_t i = 0; i < n; i++) {
        if (p[i] == '\n') {
            sse_line(s, now);
            s->line_len = 0;
            if (s->saw_done) return;
        } else if (s->line_len < sizeof s->line) {
            s->line[s->line_len++] = p[i];
        }
    }
}

static void body_bytes(stream_t *s, const char *p, size_t n, uint64_t now) {
    if (!s->chunked) {
        sse_bytes(s, p, n, now);
        return;
    }
    size_t i = 0;
    while (i < n && s->ch_state != CH_END && !s->saw_done) {
        char c = p[i];
        switch (s->ch_state) {
        case CH_SIZE:
            i++;
            if (c == '\n') {
                if (s->ch_left == 0)
                    s->ch_state = CH_END;
                else
                    s->ch_state = CH_DATA;
            } else if (c >= '0' && c <= '9')
                s->ch_left = s->ch_left * 16 + (uint64_t)(c - '0');
            else if (c >= 'a' && c <= 'f')
                s->ch_left = s->ch_left * 16 + (uint64_t)(c - 'a' + 10);
            else if (c >= 'A' && c <= 'F')
                s->ch_left = s->ch_left * 16 + (uint64_t)(c - 'A' + 10);
            else if (c != '\r')
                s->ch_state = CH_SIZE; /* extension: ignored until '\n' */
            break;
        case CH_DATA: {
            size_t take = n - i < s->ch_left ? n - i : (size_t)s->ch_left;
            sse_bytes(s, p + i, take, now);
            i += take;
            s->ch_left -= take;
            if (s->ch_left == 0) s->ch_state = CH_DATA_END;
            break;
        }
        case CH_DATA_END:
            i++;
            if (c == '\n') s->ch_state = CH_SIZE;
            break;
        }
    }
}

static int head_has(const char *head, const char *needle) {
    size_t nl = strlen(needle);
    for (const char *p = head; *p; p++)
        if (!strncasecmp(p, needle, nl)) return 1;
    return 0;
}

static void on_read(uv_stream_t *h, ssize_t nread, const uv_buf_t *buf) {
    stream_t *s = h->data;
    uint64_t now = uv_hrtime();
    if (nread < 0) {
        if (s->state == ST_HEAD)
            g_fail_closed++, finish(s, ST_FAILED, "closed before head");
        else if (!s->saw_done)
            g_fail_closed++, finish(s, ST_FAILED, "closed before [DONE]");
        else
            finish(s, ST_DONE, NULL);
        return;
    }
    const char *p = buf->base;
    size_t n = (size_t)nread;
    if (s->state == ST_HEAD) {
        size_t room = sizeof s->head - 1 - s->head_len;
        size_t take = n < room ? n : room;
        memcpy(s->head + s->head_len, p, take);
        s->head_len += take;
        s->head[s->head_len] = 0;
        char *end = strstr(s->head, "\r\n\r\n");
        if (!end) {
            if (s->head_len == sizeof s->head - 1)
                g_fail_status++, finish(s, ST_FAILED, "head too big");
            return;
        }
        *end = 0;
        int status = 0;
        if (sscanf(s->head, "HTTP/1.%*d %d", &status) != 1 || status != 200) {
            g_fail_status++;
            finish(s, ST_FAILED, "status not 200");
            return;
        }
        s->chunked = head_has(s->head, "transfer-encoding: chunked");
        size_t used = (size_t)(end + 4 - s->head) - (s->head_len - take);
        p += used;
        n -= used;
        s->state = ST_BODY;
    }
    body_bytes(s, p, n, now);
    if (s->saw_done) {
        if (s->n_ev < g_opt.max_tokens) g_short++; /* the server may add a finish event */
        finish(s, ST_DONE, NULL);
    }
}

static void on_alloc(uv_handle_t *h, size_t sz, uv_buf_t *buf) {
    (void)h, (void)sz;
    buf->base = g_rbuf;
    buf->len = sizeof g_rbuf;
}

static void on_write(uv_write_t *req, int status) {
    stream_t *s = req->data;
    if (status < 0) g_fail_closed++, finish(s, ST_FAILED, "write failed");
}

static void on_connect(uv_connect_t *req, int status) {
    stream_t *s = req->data;
    g_in_connect--;
    if (status < 0) {
        g_fail_connect++;
        finish(s, ST_FAILED, uv_strerror(status));
    } else {
        uv_buf_t b = uv_buf_init(g_req, (unsigned)g_req_len);
        s->write_req.data = s;
        uv_write(&s->write_req, (uv_stream_t *)&s->tcp, &b, 1, on_write);
        uv_read_start((uv_stream_t *)&s->tcp, on_alloc, on_read);
    }
    start_more();
}

static void start_more(void) {
    struct sockaddr_in addr;
    uv_ip4_addr(g_opt.host, g_opt.port, &addr);
    while (g_next < g_opt.n && g_in_connect < g_opt.ramp) {
        stream_t *s = &g_streams[g_next];
        s->idx = g_next++;
        uv_tcp_init(g_loop, &s->tcp);
        uv_tcp_nodelay(&s->tcp, 1);
        s->tcp.data = s;
        s->conn_req.data = s;
        g_in_connect++;
        int rc = uv_tcp_connect(&s->conn_req, &s->tcp, (const struct sockaddr *)&addr, on_connect);
        if (rc < 0) {
            g_in_connect--;
            g_fail_connect++;
            s->state = ST_HEAD;
            finish(s, ST_FAILED, uv_strerror(rc));
        }
    }
}

static void on_timeout(uv_timer_t *t) {
    (void)t;
    for (int i = 0; i < g_opt.n; i++) {
        stream_t *s = &g_streams[i];
        if (i >= g_next) {
            s->state = ST_FAILED; /* never started */
            g_finished++;
            g_timeout_cnt++;
        } else if (s->state == ST_HEAD || s->state == ST_BODY) {
            g_timeout_cnt++;
            finish(s, ST_FAILED, "timeout");
        }
    }
    g_next = g_opt.n;
    if (!g_t_end) g_t_end = uv_hrtime();
    if (!uv_is_closing((uv_handle_t *)&g_timer)) uv_close((uv_handle_t *)&g_timer, NULL);
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static double pct_ms(const uint64_t *v, size_t n, double q) {
    if (!n) return -1;
    size_t i = (size_t)(q * (double)(n - 1) + 0.5);
    return (double)v[i] / 1e6;
}

static void report(double cpu0, double cpu1, double rq0, double rq1) {
    size_t n_gap = 0, total = 0;
    uint64_t win_lo = 0, win_hi = UINT64_MAX;
    int n_live = 0;
    for (int i = 0; i < g_opt.n; i++) {
        stream_t *s = &g_streams[i];
        total += (size_t)s->n_ev;
        if (s->n_ev > 1) n_gap += (size_t)s->n_ev - 1;
        if (s->n_ev > 0) {
            n_live++;
            if (s->ts[0] > win_lo) win_lo = s->ts[0];
            if (s->ts[s->n_ev - 1] < win_hi) win_hi = s->ts[s->n_ev - 1];
        }
    }
    uint64_t *gaps = malloc((n_gap + 1) * sizeof *gaps);
    uint64_t *ttft = malloc(((size_t)g_opt.n + 1) * sizeof *ttft);
    if (!gaps || !ttft) abort();
    size_t k = 0, nt = 0, in_win = 0;
    for (int i = 0; i < g_opt.n; i++) {
        stream_t *s = &g_streams[i];
        for (int j = 0; j < s->n_ev; j++) {
            if (j) gaps[k++] = s->ts[j] - s->ts[j - 1];
            if (s->ts[j] >= win_lo && s->ts[j] <= win_hi) in_win++;
        }
    }
    (void)nt;
    qsort(gaps, n_gap, sizeof *gaps, cmp_u64);
    double wall = (double)(g_t_end - g_t0) / 1e9;
    double win = win_hi > win_lo && n_live == g_opt.n ? (double)(win_hi - win_lo) / 1e9 : 0;
    int ok = 0;
    for (int i = 0; i < g_opt.n; i++)
        if (g_streams[i].state == ST_DONE && g_streams[i].n_ev >= g_opt.max_tokens) ok++;
    printf("{\"streams\":%d,\"max_tokens\":%d,\"ok\":%d,\"events\":%zu,\"wall_s\":%.3f,"
           "\"events_per_s\":%.1f,\"all_live_window_s\":%.3f,\"all_live_events_per_s\":%.1f,"
           "\"gap_p50_ms\":%.2f,\"gap_p99_ms\":%.2f,\"gap_max_ms\":%.2f,",
           g_opt.n, g_opt.max_tokens, ok, total, wall, wall > 0 ? (double)total / wall : 0, win,
           win > 0 ? (double)in_win / win : 0, pct_ms(gaps, n_gap, 0.5), pct_ms(gaps, n_gap, 0.99),
           n_gap ? (double)gaps[n_gap - 1] / 1e6 : -1);
    printf("\"err_connect\":%d,\"err_status\":%d,\"err_closed\":%d,\"err_timeout\":%d,"
           "\"short_streams\":%d,\"server_cpu_s\":%.2f,\"server_cpu_pct\":%.1f,"
           "\"server_runq_wait_s\":%.2f}\n",
           g_fail_connect, g_fail_status, g_fail_closed, g_timeout_cnt, g_short,
           cpu0 >= 0 && cpu1 >= 0 ? cpu1 - cpu0 : -1,
           cpu0 >= 0 && cpu1 >= 0 && wall > 0 ? 100 * (cpu1 - cpu0) / wall : -1,
           rq0 >= 0 && rq1 >= 0 ? rq1 - rq0 : -1);
    for (int i = 0, shown = 0; i < g_opt.n && shown < 3; i++)
        if (g_streams[i].state == ST_FAILED && g_streams[i].why)
            fprintf(stderr, "sse_client: stream %d failed: %s\n", i, g_streams[i].why), shown++;
    free(gaps);
    free(ttft);
}

static int usage(void) {
    fprintf(stderr, "usage: sse_client --port P [--host H] [--streams N] [--max-tokens M]\n"
                    "         [--ramp K] [--pid SERVER_PID] [--timeout S] [--path P]\n");
    return 2;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        if (!strcmp(a, "--host"))
            g_opt.host = v;
        else if (!strcmp(a, "--port"))
            g_opt.port = atoi(v);
        else if (!strcmp(a, "--streams"))
            g_opt.n = atoi(v);
        else if (!strcmp(a, "--max-tokens"))
            g_opt.max_tokens = atoi(v);
        else if (!strcmp(a, "--ramp"))
            g_opt.ramp = atoi(v);
        else if (!strcmp(a, "--pid"))
            g_opt.pid = atoi(v);
        else if (!strcmp(a, "--timeout"))
            g_opt.timeout_s = atoi(v);
        else if (!strcmp(a, "--path"))
            g_opt.path = v;
        else
            return usage();
        i++;
    }
    if (g_opt.port <= 0 || g_opt.n <= 0 || g_opt.max_tokens <= 0 || g_opt.ramp <= 0) return usage();
    char body[256];
    int bl = snprintf(body, sizeof body,
                      "{\"model\":\"bench\",\"prompt\":\"%s\",\"max_tokens\":%d,\"stream\":true}",
                      g_opt.prompt, g_opt.max_tokens);
    g_req_len =
        (size_t)snprintf(g_req, sizeof g_req,
                         "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\n"
                         "Accept: text/event-stream\r\nContent-Length: %d\r\n\r\n%s",
                         g_opt.path, g_opt.host, g_opt.port, bl, body);
    g_streams = calloc((size_t)g_opt.n, sizeof *g_streams);
    if (!g_streams) return 1;
    g_loop = uv_default_loop();
    uv_timer_init(g_loop, &g_timer);
    uv_timer_start(&g_timer, on_timeout, (uint64_t)g_opt.timeout_s * 1000, 0);
    double cpu0 = g_opt.pid ? cpu_seconds(g_opt.pid) : -1;
    double rq0 = g_opt.pid ? runq_wait_seconds(g_opt.pid) : -1;
    g_t0 = uv_hrtime();
    start_more();
    uv_run(g_loop, UV_RUN_DEFAULT);
    double cpu1 = g_opt.pid ? cpu_seconds(g_opt.pid) : -1;
    double rq1 = g_opt.pid ? runq_wait_seconds(g_opt.pid) : -1;
    report(cpu0, cpu1, rq0, rq1);
    for (int i = 0; i < g_opt.n; i++) free(g_streams[i].ts);
    free(g_streams);
    return uv_loop_close(g_loop) == 0 ? 0 : 1;
}
