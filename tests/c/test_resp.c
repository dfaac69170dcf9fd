/* test_resp.c - the RESP parser and dispatcher through an in-memory transport.
 *
 * The transport here is a test peer, not a stand-in for the code under test:
 * it records what the server writes and whether it closed the connection,
 * so every request can be fed whole, byte by byte and split at random points,
 * and the replies compared.
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server.h"

struct ir_conn {
    char *out;
    size_t len, cap;
    int closed;
    size_t accept_limit; /* bytes per writev (0 = all), to exercise partial writes */
};

static ssize_t tWritev(ir_transport *t, ir_conn *c, const struct iovec *iov, int n) {
    (void)t;
    size_t took = 0;
    for (int i = 0; i < n; i++) {
        size_t l = iov[i].iov_len;
        if (c->accept_limit && took + l > c->accept_limit) l = c->accept_limit - took;
        if (c->len + l > c->cap) {
            c->cap = (c->len + l) * 2 + 64;
            c->out = realloc(c->out, c->cap);
        }
        memcpy(c->out + c->len, iov[i].iov_base, l);
        c->len += l;
        took += l;
        if (c->accept_limit && took == c->accept_limit) break;
    }
    return (ssize_t)took;
}
static void tWant(ir_transport *t, ir_conn *c, int on) { (void)t, (void)c, (void)on; }
static void tClose(ir_transport *t, ir_conn *c) { (void)t, c->closed = 1; }
static void tPeer(ir_transport *t, ir_conn *c, char *b, size_t l) {
    (void)t, (void)c;
    snprintf(b, l, "127.0.0.1:1");
}
static const ir_transport_ops test_ops = {
    .name = "test",
    .writev = tWritev,
    .want_writable = tWant,
    .want_readable = tWant,
    .close = tClose,
    .peername = tPeer,
};

static ir_server *srv;
static ir_transport tp = {.ops = &test_ops};

/* Feed `req` in chunks: split == 0 whole, 1 byte by byte, else random splits. */
static ir_conn *run(const char *req, size_t len, int split, unsigned seed) {
    ir_conn *c = calloc(1, sizeof(*c));
    client *cl = irs_accept(srv, &tp, c);
    size_t off = 0;
    srand(seed);
    while (off < len && !c->closed) {
        size_t n = split == 0 ? len - off : split == 1 ? 1 : 1 + (size_t)rand() % 97;
        if (n > len - off) n = len - off;
        irs_data(cl, req + off, n);
        off += n;
    }
    if (!c->closed) {
        freeClient(cl); /* the test's own hang-up, not the server's close */
        c->closed = 0;
    }
    return c;
}

static void freeConn(ir_conn *c) {
    free(c->out);
    free(c);
}

/* The reply must be `want` for every way of splitting, with the same close. */
static void expect(const char *name, const char *req, size_t len, const char *want, size_t wlen,
                   int closes) {
    for (int split = 0; split < 5; split++) {
        ir_conn *c = run(req, len, split > 2 ? 2 : split, (unsigned)split * 7919u);
        int same = c->len == wlen && (wlen == 0 || memcmp(c->out, want, wlen) == 0);
        CHECKF(same, "%s (split mode %d): got %zu bytes '%.*s'", name, split, c->len,
               (int)(c->len > 200 ? 200 : c->len), c->out ? c->out : "");
        if (closes >= 0)
            CHECKF(c->closed == closes, "%s (split mode %d): closed=%d, want %d", name, split,
                   c->closed, closes);
        freeConn(c);
    }
}
#define EXPECT(name, req, want, closes) \
    expect(name, req, sizeof(req) - 1, want, sizeof(want) - 1, closes)

static void testBasics(void) {
    EXPECT("ping", "*1\r\n$4\r\nPING\r\n", "+PONG\r\n", 0);
    EXPECT("inline ping", "PING\r\n", "+PONG\r\n", 0);
    EXPECT("inline lf only", "PING\n", "+PONG\r\n", 0);
    EXPECT("ping msg", "*2\r\n$4\r\nping\r\n$5\r\nhello\r\n", "$5\r\nhello\r\n", 0);
    EXPECT("pipeline", "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
           "+OK\r\n$1\r\nv\r\n", 0);
    EXPECT("inline quotes", "ECHO \"a b\\x41\\n\"\r\n", "$5\r\na bA\n\r\n", 0);
    EXPECT("inline single quotes", "ECHO 'it\\'s'\r\n", "$4\r\nit's\r\n", 0);
    EXPECT("empty line ignored", "\r\nPING\r\n", "+PONG\r\n", 0);
    EXPECT("negative count ignored", "*-10\r\nPING\r\n", "+PONG\r\n", 0);
    EXPECT("zero count ignored", "*0\r\nPING\r\n", "+PONG\r\n", 0);
    EXPECT("binary bulk", "*2\r\n$4\r\nECHO\r\n$4\r\n\r\n\0\1\r\n", "$4\r\n\r\n\0\1\r\n", 0);
    EXPECT("quit", "QUIT\r\nPING\r\n", "+OK\r\n", 1);
    /* Redis finds the inline newline with strchr(): a NUL hides it */
    EXPECT("nul hides inline newline", "ECHO \"x\0y\"\r\n", "", 0);
}

static void testErrors(void) {
    EXPECT("unknown command", "*3\r\n$3\r\nfoo\r\n$1\r\na\r\n$1\r\nb\r\n",
           "-ERR unknown command 'foo', with args beginning with: 'a' 'b' \r\n", 0);
    EXPECT("unknown inline", "foo\r\n",
           "-ERR unknown command 'foo', with args beginning with: \r\n", 0);
    EXPECT("arity", "*1\r\n$3\r\nGET\r\n*1\r\n$4\r\nPING\r\n",
           "-ERR wrong number of arguments for 'get' command\r\n+PONG\r\n", 0);
    EXPECT("bad count", "*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n", 1);
    EXPECT("count over INT_MAX", "*3000000000\r\n",
           "-ERR Protocol error: invalid multibulk length\r\n", 1);
    EXPECT("expected $", "*1\r\nfoo\r\n", "-ERR Protocol error: expected '$', got 'f'\r\n", 1);
    EXPECT("negative bulk", "*1\r\n$-1\r\n", "-ERR Protocol error: invalid bulk length\r\n", 1);
    EXPECT("bad bulk", "*1\r\n$x\r\n", "-ERR Protocol error: invalid bulk length\r\n", 1);
    EXPECT("bulk over limit", "*1\r\n$600000000\r\n",
           "-ERR Protocol error: invalid bulk length\r\n", 1);
    EXPECT("unbalanced", "ECHO \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n",
           1);
    EXPECT("reply before error kept", "PING\r\n*x\r\n",
           "+PONG\r\n-ERR Protocol error: invalid multibulk length\r\n", 1);

    /* 64 KiB without CR/LF */
    size_t n = PROTO_INLINE_MAX_SIZE + 10;
    char *big = malloc(n + 1);
    memset(big, 'a', n);
    big[0] = '*';
    expect("too big mbulk count", big, n, "-ERR Protocol error: too big mbulk count string\r\n",
           sizeof("-ERR Protocol error: too big mbulk count string\r\n") - 1, 1);
    big[0] = 'a';
    expect("too big inline", big, n, "-ERR Protocol error: too big inline request\r\n",
           sizeof("-ERR Protocol error: too big inline request\r\n") - 1, 1);
    memcpy(big, "*1\r\n$", 5);
    expect("too big bulk count", big, n, "-ERR Protocol error: too big bulk count string\r\n",
           sizeof("-ERR Protocol error: too big bulk count string\r\n") - 1, 1);
    free(big);
}

/* A 1 MiB value holding CR LF and NUL bytes, through the big-argument path,
 * with the transport taking at most 1000 bytes per write. */
static void testBigValue(void) {
    size_t vlen = 1 << 20;
    char *val = malloc(vlen);
    for (size_t i = 0; i < vlen; i++) val[i] = "\r\n\0x"[i % 4];
    char hdr[64];
    int h = snprintf(hdr, sizeof(hdr), "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%zu\r\n", vlen);
    const char get[] = "*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n";
    size_t rlen = (size_t)h + vlen + 2 + sizeof(get) - 1;
    char *req = malloc(rlen);
    memcpy(req, hdr, (size_t)h);
    memcpy(req + h, val, vlen);
    memcpy(req + h + vlen, "\r\n", 2);
    memcpy(req + h + vlen + 2, get, sizeof(get) - 1);
    for (int split = 0; split < 3; split++) {
        ir_conn *c = calloc(1, sizeof(*c));
        c->accept_limit = split == 2 ? 1000 : 0;
        client *cl = irs_accept(srv, &tp, c);
        size_t off = 0;
        srand(42);
        while (off < rlen) {
            size_t k = split == 0 ? rlen : split == 1 ? 4096 : 1 + (size_t)rand() % 70000;
            if (k > rlen - off) k = rlen - off;
            irs_data(cl, req + off, k);
            off += k;
        }
        /* drain what the transport did not take */
        for (int i = 0; i < 100000 && cl->pending_bytes; i++) irs_writable(cl);
        char want_hdr[64];
        int wh = snprintf(want_hdr, sizeof(want_hdr), "+OK\r\n$%zu\r\n", vlen);
        int ok = c->len == (size_t)wh + vlen + 2 && memcmp(c->out, want_hdr, (size_t)wh) == 0 &&
                 memcmp(c->out + wh, val, vlen) == 0 && memcmp(c->out + wh + vlen, "\r\n", 2) == 0;
        CHECKF(ok, "1 MiB SET/GET round trip (split mode %d): got %zu bytes", split, c->len);
        freeClient(cl);
        freeConn(c);
    }
    free(req);
    free(val);
}

/* REPLAY.ADD ... PACKED with a 40 KB body, which the parser takes by reference when a
 * read holds it whole: fed in reads that are each a buffer of their own, scribbled over
 * and freed as soon as irs_data returns (as a transport reuses its buffer), whole, in
 * 4 KB reads and at random cuts. The stored item must be the bytes sent, whatever the
 * cut; ASan reports any read of a buffer after its read returned. */
static void testBorrowedBody(void) {
    size_t vlen = 40000;
    char *val = malloc(vlen);
    for (size_t i = 0; i < vlen; i++) val[i] = (char)(i * 7 + 3);
    char hdr[160];
    int h = snprintf(hdr, sizeof(hdr),
                     "*4\r\n$13\r\nREPLAY.CREATE\r\n$1\r\nq\r\n$5\r\nQUEUE\r\n$2\r\n10\r\n"
                     "*6\r\n$10\r\nREPLAY.ADD\r\n$1\r\nq\r\n$6\r\nPACKED\r\n$1\r\n1\r\n"
                     "$3\r\nMAX\r\n$%zu\r\n",
                     vlen);
    const char tail[] = "\r\n*4\r\n$13\r\nREPLAY.SAMPLE\r\n$1\r\nq\r\n$1\r\n1\r\n"
                        "$6\r\nPACKED\r\n*2\r\n$11\r\nREPLAY.DROP\r\n$1\r\nq\r\n";
    size_t rlen = (size_t)h + vlen + sizeof(tail) - 1;
    char *req = malloc(rlen);
    memcpy(req, hdr, (size_t)h);
    memcpy(req + h, val, vlen);
    memcpy(req + h + vlen, tail, sizeof(tail) - 1);
    for (int split = 0; split < 4; split++) {
        ir_conn *c = calloc(1, sizeof(*c));
        client *cl = irs_accept(srv, &tp, c);
        size_t off = 0;
        srand(7u + (unsigned)split);
        while (off < rlen) {
            size_t k = split == 0 ? rlen : split == 1 ? 4096 : 1 + (size_t)rand() % 50000;
            if (k > rlen - off) k = rlen - off;
            char *chunk = malloc(k);
            memcpy(chunk, req + off, k);
            irs_data(cl, chunk, k);
            memset(chunk, 0xAA, k);
            free(chunk);
            off += k;
        }
        /* +OK, the ids bulk ($8 + id 0), then SAMPLE's PACKED bulk: id, weight, item */
        const char want0[] = "+OK\r\n$8\r\n\0\0\0\0\0\0\0\0\r\n";
        char samp[32];
        int sh = snprintf(samp, sizeof(samp), "$%zu\r\n", 12 + vlen);
        size_t at = sizeof(want0) - 1 + (size_t)sh + 12;
        int ok = c->len == at + vlen + 2 + 5 && !memcmp(c->out, want0, sizeof(want0) - 1) &&
                 !memcmp(c->out + sizeof(want0) - 1, samp, (size_t)sh) &&
                 !memcmp(c->out + at, val, vlen) && !memcmp(c->out + at + vlen, "\r\n+OK\r\n", 7);
        CHECKF(ok, "PACKED body by reference (split mode %d): got %zu bytes", split, c->len);
        if (!c->closed) freeClient(cl); /* else the server freed it */
        freeConn(c);
    }
    free(req);
    free(val);
}

/* A PACKED body cut between two reads must be copied (and is counted in INFO stats
 * by_reference_bodies_copied); what follows it in the read that completes it (the next
 * requests, another 40 KB body among them) is parsed where it lies: the query buffer is
 * never used, and the second body, whole in that read, is taken by reference (not
 * counted). A body whole in one read is never counted. */
static void testAfterCopiedBody(void) {
    size_t vlen = 40000;
    char *val = malloc(vlen);
    for (size_t i = 0; i < vlen; i++) val[i] = (char)(i * 5 + 1);
    char hdr[200];
    int h = snprintf(hdr, sizeof(hdr),
                     "*4\r\n$13\r\nREPLAY.CREATE\r\n$1\r\nr\r\n$5\r\nQUEUE\r\n$2\r\n10\r\n"
                     "*6\r\n$10\r\nREPLAY.ADD\r\n$1\r\nr\r\n$6\r\nPACKED\r\n$1\r\n1\r\n"
                     "$3\r\nMAX\r\n$%zu\r\n",
                     vlen);
    char mid[120];
    int m = snprintf(mid, sizeof(mid),
                     "\r\n*6\r\n$10\r\nREPLAY.ADD\r\n$1\r\nr\r\n$6\r\nPACKED\r\n$1\r\n1\r\n"
                     "$3\r\nMAX\r\n$%zu\r\n",
                     vlen);
    const char tail[] = "\r\n*2\r\n$11\r\nREPLAY.DROP\r\n$1\r\nr\r\n";
    size_t rlen = (size_t)h + vlen + (size_t)m + vlen + sizeof(tail) - 1;
    char *req = malloc(rlen);
    size_t at = 0;
    memcpy(req + at, hdr, (size_t)h), at += (size_t)h;
    memcpy(req + at, val, vlen), at += vlen;
    memcpy(req + at, mid, (size_t)m), at += (size_t)m;
    memcpy(req + at, val, vlen), at += vlen;
    memcpy(req + at, tail, sizeof(tail) - 1);
    for (int cut = 0; cut < 2; cut++) {
        ir_conn *c = calloc(1, sizeof(*c));
        client *cl = irs_accept(srv, &tp, c);
        uint64_t before = srv->by_ref_copied;
        size_t first = cut ? (size_t)h + vlen / 2 : rlen; /* cut: inside the first body */
        size_t lens[2] = {first, rlen - first};
        int qbuf_used = 0;
        for (size_t off = 0, i = 0; i < 2 && lens[i]; off += lens[i], i++) {
            char *chunk = malloc(lens[i]);
            memcpy(chunk, req + off, lens[i]);
            irs_data(cl, chunk, lens[i]);
            memset(chunk, 0xAA, lens[i]);
            free(chunk);
            if (cl->qcap) qbuf_used = 1;
        }
        const char want[] = "+OK\r\n$8\r\n\0\0\0\0\0\0\0\0\r\n$8\r\n\1\0\0\0\0\0\0\0\r\n+OK\r\n";
        CHECKF(c->len == sizeof(want) - 1 && !memcmp(c->out, want, sizeof(want) - 1),
               "after a copied body (cut %d): the replies", cut);
        CHECKF(srv->by_ref_copied - before == (uint64_t)cut,
               "after a copied body (cut %d): %llu bodies counted as copied", cut,
               (unsigned long long)(srv->by_ref_copied - before));
        CHECKF(!qbuf_used, "after a copied body (cut %d): the rest parsed in place", cut);
        if (!c->closed) freeClient(cl);
        freeConn(c);
    }
    free(req);
    free(val);
}

/* SLOWLOG and LATENCY through the dispatcher (ASan/UBSan: entries freed on
 * trim and reset, arguments a command took over still logged). */
static int has(const ir_conn *c, const char *needle) {
    size_t n = strlen(needle);
    for (size_t i = 0; c->out && i + n <= c->len; i++)
        if (!memcmp(c->out + i, needle, n)) return 1;
    return 0;
}

static void testSlowlog(void) {
    size_t vlen = 200000;
    char *req = malloc(vlen + 4096);
    size_t n = (size_t)sprintf(req,
                               "CONFIG SET slowlog-log-slower-than 0\r\n"
                               "CONFIG SET slowlog-max-len 4\r\n"
                               "*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n$%zu\r\n",
                               vlen);
    memset(req + n, 'v', vlen);
    n += vlen;
    n += (size_t)sprintf(req + n, "\r\nMULTI\r\nSET a 1\r\nRPUSH l");
    for (int i = 0; i < 40; i++) n += (size_t)sprintf(req + n, " e%d", i);
    n += (size_t)sprintf(req + n, "\r\nEXEC\r\nSLOWLOG GET -1\r\nSLOWLOG LEN\r\n"
                                  "CLIENT SETNAME me\r\nSLOWLOG GET 1\r\n");
    ir_conn *c = run(req, n, 2, 11);
    CHECKF(has(c, "... (199872 more bytes)"), "slowlog: the big SET logged with its marker");
    CHECKF(has(c, "$23\r\n... (11 more arguments)\r\n"), "slowlog: 42 args cut at 32");
    CHECKF(has(c, "$1\r\na\r\n$1\r\n1\r\n"), "slowlog: MULTI's SET a 1 keeps its args");
    CHECKF(has(c, ":4\r\n"), "slowlog: trimmed to slowlog-max-len");
    CHECKF(has(c, "$2\r\nme\r\n"), "slowlog: the client's name");
    freeConn(c);
    EXPECT("slowlog reset",
           "SLOWLOG RESET\r\nCONFIG SET slowlog-log-slower-than -1\r\n"
           "SLOWLOG RESET\r\nSLOWLOG LEN\r\n",
           "+OK\r\n+OK\r\n+OK\r\n:0\r\n", 0);
    const char lat[] = "CONFIG SET latency-monitor-threshold 1\r\nDEBUG SLEEP 0.003\r\n"
                       "DEBUG SLEEP 0.002\r\nLATENCY LATEST\r\nLATENCY HISTORY command\r\n"
                       "LATENCY GRAPH command\r\nLATENCY DOCTOR\r\nLATENCY HISTOGRAM debug\r\n"
                       "LATENCY RESET\r\nLATENCY LATEST\r\n"
                       "CONFIG SET latency-monitor-threshold 0\r\n";
    c = run(lat, sizeof(lat) - 1, 0, 1);
    CHECKF(has(c, "$7\r\ncommand\r\n"), "latency: the command event");
    CHECKF(has(c, "command - high"), "latency: the graph");
    CHECKF(has(c, "histogram_usec"), "latency: the histogram");
    CHECKF(has(c, ":1\r\n*0\r\n+OK\r\n"), "latency: reset");
    freeConn(c);
    EXPECT("slowlog defaults back",
           "CONFIG SET slowlog-log-slower-than 10000 slowlog-max-len 128\r\n", "+OK\r\n", 0);
    free(req);
}

/* ll2string (every reply header) against snprintf's "%lld": edge values, every
 * power of ten and its neighbours, and a too-small buffer (0, nothing past dstlen). */
static void testLl2string(void) {
    long long vals[128];
    int n = 0;
    vals[n++] = 0;
    vals[n++] = LLONG_MAX;
    vals[n++] = LLONG_MIN;
    vals[n++] = LLONG_MIN + 1;
    for (long long p = 1; p <= LLONG_MAX / 10; p *= 10) {
        vals[n++] = p - 1;
        vals[n++] = p;
        vals[n++] = -p;
        vals[n++] = -(p + 1);
    }
    for (int i = 0; i < n; i++) {
        char want[32], got[32];
        snprintf(want, sizeof(want), "%lld", vals[i]);
        int len = ll2string(got, sizeof(got), vals[i]);
        CHECKF(len == (int)strlen(want) && strcmp(got, want) == 0, "%lld: got %s (%d)", vals[i],
               got, len);
    }
    char small[4] = {'x', 'x', 'x', 'x'};
    CHECK(ll2string(small, 3, 123) == 0 && small[3] == 'x');
    CHECK(ll2string(small, 4, 123) == 3 && strcmp(small, "123") == 0);
    CHECK(ll2string(small, 4, -12) == 3 && strcmp(small, "-12") == 0);
}

int main(void) {
    testLl2string();
    ir_config cfg;
    ir_config_init(&cfg);
    cfg.enable_debug_command = "yes"; /* the latency tests sleep with DEBUG SLEEP */
    srv = server_new(&cfg);
    g_server = srv;
    tp.srv = srv;
    testBasics();
    testErrors();
    testBigValue();
    testBorrowedBody();
    testAfterCopiedBody();
    testSlowlog();
    server_free(srv);
    return checkSummary();
}
