/* test_shm.c - the same-host transport end to end, under ASan/UBSan in make test.
 *
 * A real server (ir_run on the kernel stack, port 0, an shm socket) runs on a
 * thread; the client's side (ir_shm_*) talks RESP to it through the rings:
 * small requests, a value many times the ring both ways, a pipeline that
 * fills both rings at once, a leased reply (ir_shm_peek) that wraps, and a
 * connection closed with its views still alive.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "inreplay.h"

static char sock_path[64];

static void *serve(void *arg) {
    ir_config *cfg = arg;
    int rc = ir_run(cfg);
    CHECKF(rc == IR_OK, "ir_run: %d %s", rc, ir_last_error());
    return NULL;
}

static void sendAll(ir_shm_client *c, const char *buf, size_t len);
static void sendStr(ir_shm_client *c, const char *s) { sendAll(c, s, strlen(s)); }

static void sendAll(ir_shm_client *c, const char *buf, size_t len) {
    long n = ir_shm_write(c, buf, len, 10000);
    CHECKF(n == (long)len, "write %zu: %ld (%s)", len, n, ir_last_error());
}

/* Read exactly len bytes of reply. */
static void readExact(ir_shm_client *c, char *buf, size_t len) {
    size_t got = 0;
    while (got < len) {
        long n = ir_shm_read(c, buf + got, len - got, 10000);
        CHECKF(n > 0, "read: %ld after %zu of %zu (%s)", n, got, len, ir_last_error());
        if (n <= 0) return;
        got += (size_t)n;
    }
}

static void expectReply(ir_shm_client *c, const char *want) {
    size_t len = strlen(want);
    char *got = calloc(1, len + 1);
    readExact(c, got, len);
    CHECKF(!memcmp(got, want, len), "reply '%.60s', want '%.60s'", got, want);
    free(got);
}

static ir_shm_client *connectTo(void) {
    ir_shm_client *c = NULL;
    char run_id[48];
    for (int i = 0; i < 200 && !c; i++) {
        if (ir_shm_connect(sock_path, &c, run_id, sizeof(run_id)) != IR_OK) usleep(10000);
    }
    CHECKF(c != NULL, "connect %s: %s", sock_path, ir_last_error());
    if (c) CHECKF(strlen(run_id) == 40, "run_id '%s'", run_id);
    return c;
}

static void testSmall(ir_shm_client *c) {
    sendStr(c, "PING\r\n");
    expectReply(c, "+PONG\r\n");
    sendStr(c, "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
    expectReply(c, "+OK\r\n$1\r\nv\r\n");
}

/* 3 MB through 64 KB rings, each way. */
static void testBigValue(ir_shm_client *c) {
    size_t n = 3 << 20;
    char head[64];
    int hl = snprintf(head, sizeof(head), "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%zu\r\n", n);
    char *val = malloc(n + 2);
    for (size_t i = 0; i < n; i++) val[i] = (char)('a' + i % 26);
    memcpy(val + n, "\r\n", 2);
    sendAll(c, head, (size_t)hl);
    sendAll(c, val, n + 2);
    expectReply(c, "+OK\r\n");
    sendStr(c, "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
    char *got = malloc(n + 16);
    int want = snprintf(head, sizeof(head), "$%zu\r\n", n);
    readExact(c, got, (size_t)want + n + 2);
    CHECK(!memcmp(got, head, (size_t)want));
    CHECK(!memcmp(got + want, val, n + 2));
    free(got);
    free(val);
}

/* 5,000 pipelined INCRs: requests and replies each many rings long. */
static void testPipeline(ir_shm_client *c) {
    const char req[] = "*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n";
    size_t per = sizeof(req) - 1;
    char *all = malloc(per * 5000);
    for (int i = 0; i < 5000; i++) memcpy(all + (size_t)i * per, req, per);
    sendAll(c, all, per * 5000);
    char want[32];
    for (int i = 1; i <= 5000; i++) {
        snprintf(want, sizeof(want), ":%d\r\n", i);
        expectReply(c, want);
    }
    free(all);
}

/* A reply leased in place, wrapping the ring, then the connection closed
 * while the view is still held: reading it must not fault. */
static void testLease(void) {
    ir_shm_client *c = connectTo();
    if (!c) return;
    const void *p = NULL;
    char line[64];
    size_t n = 40000; /* a 64 KB ring: the second GET wraps */
    char head[64];
    int hl = snprintf(head, sizeof(head), "*3\r\n$3\r\nSET\r\n$1\r\nw\r\n$%zu\r\n", n);
    char *val = malloc(n + 2);
    memset(val, 'w', n);
    memcpy(val + n, "\r\n", 2);
    sendAll(c, head, (size_t)hl);
    sendAll(c, val, n + 2);
    expectReply(c, "+OK\r\n");
    for (int round = 0; round < 3; round++) {
        sendStr(c, "*2\r\n$3\r\nGET\r\n$1\r\nw\r\n");
        long l = ir_shm_read_line(c, line, sizeof(line), 10000);
        CHECKF(l > 0 && line[0] == '$', "line %ld", l);
        long got = ir_shm_peek(c, n + 2, 10000, &p);
        CHECKF(got == (long)(n + 2), "peek %ld", got);
        if (got > 0) CHECK(!memcmp(p, val, n + 2));
    }
    ir_shm_ref(c); /* a view still alive */
    ir_shm_close(c);
    CHECK(((const char *)p)[0] == 'w'); /* still mapped */
    ir_shm_unref(c);
    free(val);
}

int main(void) {
    snprintf(sock_path, sizeof(sock_path), "/tmp/ir-test-shm-%d.sock", (int)getpid());
    ir_config cfg;
    ir_config_init(&cfg);
    cfg.port = 0;
    cfg.shm_socket = sock_path;
    cfg.shm_ring_size = 64 * 1024;
    cfg.save_on_shutdown = 0;
    pthread_t th;
    pthread_create(&th, NULL, serve, &cfg);
    ir_shm_client *c = connectTo();
    if (c) {
        ir_shm_set_spin(c, 20);
        testSmall(c);
        testBigValue(c);
        testPipeline(c);
        ir_shm_close(c);
    }
    testLease();
    ir_stop();
    pthread_join(th, NULL);
    CHECK(access(sock_path, F_OK) != 0); /* removed at shutdown */
    return checkSummary();
}
