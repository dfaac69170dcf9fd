/* reply.c - building and sending replies.
 *
 * A client's pending output is a list of segments: bytes copied into c->obuf,
 * or references to memory owned elsewhere (a stored value, a replay arena).
 * References are how a 13 MB GET or a 512-item REPLAY.SAMPLE reaches the
 * socket without a copy. Only pinned memory is ever referenced: a reference
 * counts on its memory's pin (server.h) and stays until it is written, however
 * slow the reader; an owner that must free or rewrite pinned memory detaches
 * it (values, dropped tables) or has the overlapping segments copied first
 * (pinOverwrite: REPLAY.ADD wrapping the arena). Everything else (argument
 * echoes, collection members, a command's temporary buffers) is copied when
 * it is added, so no reply can outlive the memory it came from, whatever the
 * command does with that memory afterwards. processCommand() calls
 * clientFlush() when has_refs is set, so pinned bodies leave without a copy.
 */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "replay_err.h"
#include "server.h"

const struct ir_shared_replies shared = {
    .ok = IR_STR("+OK\r\n"),
    .pong = IR_STR("+PONG\r\n"),
    .czero = IR_STR(":0\r\n"),
    .cone = IR_STR(":1\r\n"),
    .cnegone = IR_STR(":-1\r\n"),
    .nullbulk = IR_STR("$-1\r\n"),
    .nullarray = IR_STR("*-1\r\n"),
    .emptyarray = IR_STR("*0\r\n"),
    .wrongtypeerr =
        IR_STR("-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"),
    .syntaxerr = IR_STR("-ERR syntax error\r\n"),
    .notinteger = IR_STR("-ERR value is not an integer or out of range\r\n"),
    .outofrange = IR_STR("-ERR index out of range\r\n"),
    .nokeyerr = IR_STR("-ERR no such key\r\n"),
};

static void oom(void) {
    serverLog("out of memory allocating reply buffer");
    abort();
}

static void obufReserve(client *c, size_t extra) {
    if (c->olen + extra <= c->ocap) return;
    size_t cap = c->ocap ? c->ocap : PROTO_REPLY_CHUNK_BYTES;
    while (cap < c->olen + extra) cap *= 2;
    char *p = realloc(c->obuf, cap);
    if (!p) oom();
    c->obuf = p;
    c->ocap = cap;
}

static ir_seg *segPush(client *c) {
    if (c->nsegs == c->segcap) {
        int cap = c->segcap ? c->segcap * 2 : 16;
        ir_seg *s = realloc(c->segs, (size_t)cap * sizeof(*s));
        if (!s) oom();
        c->segs = s;
        c->segcap = cap;
    }
    return &c->segs[c->nsegs++];
}

/* Where replies to a client that is closing (or muted) go: nowhere. A caller that
 * reserved space (addReplyBulkReserve ...) still writes into it, so it gets
 * this scratch buffer, which nobody sends (one per thread: each server
 * thread has its own). */
static char *discardSpace(size_t len) {
    static _Thread_local char *scratch;
    static _Thread_local size_t cap;
    if (len > cap || (cap > (1u << 20) && len <= (1u << 20))) { /* grows; a big one shrinks back */
        size_t n = len > 4096 ? len : 4096;
        char *p = realloc(scratch, n);
        if (!p) oom();
        scratch = p;
        cap = n;
    }
    return scratch;
}

/* Reserve len bytes at the end of the owned output and return them. After a
 * protocol error or an output limit (CLOSE_AFTER_REPLY, CLOSE_ASAP) nothing more
 * is appended, whichever addReply* a command or a publisher uses. */
static char *replyAppendSpace(client *c, size_t len) {
    if (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_MUTED))
        return discardSpace(len);
    obufReserve(c, len);
    ir_seg *last = c->nsegs ? &c->segs[c->nsegs - 1] : NULL;
    if (last && !last->ref && last->off + last->len == c->olen) {
        last->len += len;
    } else {
        ir_seg *s = segPush(c);
        s->ref = NULL;
        s->off = c->olen;
        s->len = len;
        s->pin = NULL;
    }
    char *dst = c->obuf + c->olen;
    c->olen += len;
    c->pending_bytes += len;
    return dst;
}

void addReplyProto(client *c, const char *s, size_t len) {
    if (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_MUTED)) return;
    if (len) memcpy(replyAppendSpace(c, len), s, len);
}

/* The canned null bulk and null array are RESP2's: a RESP3 client gets "_"
 * for both, as Redis sends it, wherever a handler replies with them. */
void addReplyStr(client *c, ir_str s) {
    if (c->resp >= 3 && (s.p == shared.nullbulk.p || s.p == shared.nullarray.p)) {
        addReplyProto(c, "_\r\n", 3);
        return;
    }
    addReplyProto(c, s.p, s.len);
}

void addReplyRefPinned(client *c, const void *p, size_t len, ir_pin **holder) {
    if (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_MUTED)) return;
    if (len < IR_REF_MIN) {
        addReplyProto(c, p, len);
        return;
    }
    ir_pin *pin = pinAcquire(&c->srv->pins, holder);
    ir_seg *s = segPush(c);
    pin->refs++;
    s->ref = p;
    s->off = 0;
    s->len = len;
    s->pin = pin;
    c->pending_bytes += len;
    c->has_refs = 1; /* flushed at the end of the command, but never copied */
}

void addReplyStatus(client *c, const char *status) {
    size_t n = strlen(status);
    char *d = replyAppendSpace(c, n + 3);
    d[0] = '+';
    memcpy(d + 1, status, n);
    memcpy(d + 1 + n, "\r\n", 2);
}

void addReplyHelp(client *c, const char *const *lines, size_t n) {
    addReplyArrayLen(c, (long)n);
    for (size_t i = 0; i < n; i++) addReplyStatus(c, lines[i]);
}

/* Errors may not contain newlines: replace them, as Redis does. */
static void addReplyErrorLength(client *c, const char *s, size_t len) {
    if (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_MUTED)) return;
    if (!len || s[0] != '-') addReplyProto(c, "-ERR ", 5);
    char *d = replyAppendSpace(c, len + 2);
    for (size_t i = 0; i < len; i++) d[i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    memcpy(d + len, "\r\n", 2);
}

void addReplyError(client *c, const char *err) { addReplyErrorLength(c, err, strlen(err)); }

static void addReplyErrorVa(client *c, const char *fmt, va_list ap) {
    char buf[1024];
    int n = vsnprintf(buf, sizeof(buf), fmt, ap);
    if (n < 0) n = 0;
    if ((size_t)n >= sizeof(buf)) n = sizeof(buf) - 1;
    addReplyErrorLength(c, buf, (size_t)n);
}

void addReplyErrorFormat(client *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    addReplyErrorVa(c, fmt, ap);
    va_end(ap);
}

void replyReplayError(client *c, ir_errcode code, const char *fmt, ...) {
    char buf[1024];
    int h = snprintf(buf, sizeof(buf), "-%s ", replayErrorName(code));
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + h, sizeof(buf) - (size_t)h, fmt, ap);
    va_end(ap);
    if (n < 0) n = 0;
    if ((size_t)(h + n) >= sizeof(buf)) n = (int)sizeof(buf) - 1 - h;
    addReplyErrorLength(c, buf, (size_t)(h + n));
}

void rejectCommandFormat(client *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    addReplyErrorVa(c, fmt, ap);
    va_end(ap);
}

/* Redis names the command in lower case, whatever the client sent. */
void addReplyErrorArity(client *c) {
    addReplyErrorFormat(c, "wrong number of arguments for '%s' command",
                        c->cmd ? c->cmd->name : c->argv[0].ptr);
}

void addReplySubcommandArity(client *c, const char *container) {
    char lower[32];
    size_t n = c->argv[1].len < sizeof(lower) - 1 ? c->argv[1].len : sizeof(lower) - 1;
    for (size_t i = 0; i < n; i++) lower[i] = (char)tolower((unsigned char)c->argv[1].ptr[i]);
    lower[n] = '\0';
    addReplyErrorFormat(c, "wrong number of arguments for '%s|%s' command", container, lower);
}

static void addReplyPrefixed(client *c, char prefix, long long ll) {
    char buf[32];
    buf[0] = prefix;
    int n = ll2string(buf + 1, sizeof(buf) - 3, ll);
    buf[n + 1] = '\r';
    buf[n + 2] = '\n';
    addReplyProto(c, buf, (size_t)n + 3);
}

void addReplyLongLong(client *c, long long ll) {
    if (ll == 0) addReplyStr(c, shared.czero);
    else if (ll == 1) addReplyStr(c, shared.cone);
    else addReplyPrefixed(c, ':', ll);
}

void addReplyArrayLen(client *c, long len) { addReplyPrefixed(c, '*', len); }

/* RESP3 aggregates; in RESP2 a map is a flat array of 2n elements and a set
 * or push message an array, as Redis sends them. */
void addReplyMapLen(client *c, long pairs) {
    if (c->resp >= 3) addReplyPrefixed(c, '%', pairs);
    else addReplyPrefixed(c, '*', 2 * pairs);
}
void addReplySetLen(client *c, long len) { addReplyPrefixed(c, c->resp >= 3 ? '~' : '*', len); }
void addReplyPushLen(client *c, long len) { addReplyPrefixed(c, c->resp >= 3 ? '>' : '*', len); }

void addReplyNull(client *c) {
    if (c->resp >= 3) addReplyProto(c, "_\r\n", 3);
    else addReplyStr(c, shared.nullbulk);
}
void addReplyNullArray(client *c) {
    if (c->resp >= 3) addReplyProto(c, "_\r\n", 3);
    else addReplyStr(c, shared.nullarray);
}
void addReplyBool(client *c, int b) {
    if (c->resp >= 3) addReplyProto(c, b ? "#t\r\n" : "#f\r\n", 4);
    else addReplyLongLong(c, b ? 1 : 0);
}

/* Copied: the caller's memory may change or go once this returns. */
void addReplyBulk(client *c, const void *p, size_t len) {
    if (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_MUTED)) return;
    memcpy(addReplyBulkReserve(c, len), p, len);
}

void addReplyBulkPinned(client *c, const void *p, size_t len, ir_pin **holder) {
    addReplyPrefixed(c, '$', (long long)len);
    addReplyRefPinned(c, p, len, holder);
    addReplyProto(c, "\r\n", 2);
}

void addReplyBulkCString(client *c, const char *s) {
    if (!s) addReplyNull(c);
    else addReplyBulk(c, s, strlen(s));
}

void addReplyVerbatim(client *c, const char *txt, size_t len, const char *ext) {
    if (c->resp < 3) {
        addReplyBulk(c, txt, len);
        return;
    }
    addReplyPrefixed(c, '=', (long long)len + 4);
    char head[4] = {ext[0], ext[1], ext[2], ':'};
    addReplyProto(c, head, 4);
    addReplyProto(c, txt, len);
    addReplyProto(c, "\r\n", 2);
}

void addReplyBulkLongLong(client *c, long long ll) {
    char buf[32];
    int n = ll2string(buf, sizeof(buf), ll);
    addReplyBulk(c, buf, (size_t)n);
}

void addReplyDouble(client *c, double d) {
    char buf[64];
    int n = double2text(buf, sizeof(buf), d);
    addReplyDoubleText(c, buf, (size_t)n);
}

void addReplyDoubleText(client *c, const char *text, size_t len) {
    if (c->resp >= 3) {
        addReplyProto(c, ",", 1);
        addReplyProto(c, text, len);
        addReplyProto(c, "\r\n", 2);
    } else {
        addReplyBulk(c, text, len);
    }
}

char *addReplyBulkReserve(client *c, size_t len) {
    addReplyPrefixed(c, '$', (long long)len);
    char *body = replyAppendSpace(c, len + 2);
    memcpy(body + len, "\r\n", 2);
    return body;
}

char *addReplyReserve(client *c, size_t len) { return replyAppendSpace(c, len); }

char *addReplyBulkBegin(client *c, size_t total, size_t head) {
    addReplyPrefixed(c, '$', (long long)total);
    return replyAppendSpace(c, head);
}

/* ---- sending ----------------------------------------------------------- */

/* ---- pins --------------------------------------------------------------- */

ir_pin *pinAcquire(ir_pins *pool, ir_pin **holder) {
    if (*holder) return *holder;
    ir_pin *p = pool->free;
    if (p) {
        pool->free = p->next;
    } else {
        p = malloc(sizeof(*p));
        if (!p) oom();
        pool->nalloc++;
    }
    p->refs = 0;
    p->holder = holder;
    p->mem = NULL;
    p->maplen = 0;
    p->bytes = 0;
    p->pool = pool;
    p->next = NULL;
    pool->nused++;
    *holder = p;
    return p;
}

void pinRelease(ir_pin *p) {
    if (--p->refs) return;
    ir_pins *pool = p->pool;
    if (p->holder) {
        *p->holder = NULL;
    } else {
        if (p->maplen) munmap(p->mem, p->maplen);
        else free(p->mem);
        pool->detached_bytes -= p->bytes;
        pool->ndetached--;
    }
    p->holder = NULL;
    p->mem = NULL;
    p->next = pool->free;
    pool->free = p;
    pool->nused--;
}

void pinDetach(ir_pin *p, void *mem, size_t maplen, uint64_t bytes) {
    *p->holder = NULL;
    p->holder = NULL;
    p->mem = mem;
    p->maplen = maplen;
    p->bytes = bytes;
    p->pool->detached_bytes += bytes;
    p->pool->ndetached++;
}

void pinsFree(ir_pins *pool) {
    while (pool->free) {
        ir_pin *n = pool->free->next;
        free(pool->free);
        pool->free = n;
        pool->nalloc--;
    }
}

/* Copy what is unsent of reference segment i into obuf, so it points at
 * nothing foreign any more (and release its pin). */
static void segOwn(client *c, int i) {
    ir_seg *s = &c->segs[i];
    size_t skip = (i == 0) ? c->sent : 0;
    size_t n = s->len - skip;
    obufReserve(c, n);
    memcpy(c->obuf + c->olen, s->ref + skip, n);
    ir_pin *pin = s->pin;
    s->ref = NULL;
    s->pin = NULL;
    s->off = c->olen;
    s->len = n;
    c->olen += n;
    if (i == 0) c->sent = 0;
    if (pin) pinRelease(pin);
}

void pinOverwrite(ir_pin *pin, const char *lo, const char *hi) {
    ir_server *srv = pin->pool->srv;
    for (client *c = srv ? srv->clients : NULL; c; c = c->next) {
        for (int i = 0; i < c->nsegs; i++) {
            const ir_seg *s = &c->segs[i];
            if (s->pin != pin) continue;
            const char *b = s->ref + (i == 0 ? c->sent : 0), *e = s->ref + s->len;
            if (b < hi && e > lo) {
                int last = pin->refs == 1;
                segOwn(c, i);
                if (last) return; /* the pin went back to the pool */
            }
        }
    }
}

void clientDiscardReply(client *c) {
    for (int i = 0; i < c->nsegs; i++)
        if (c->segs[i].pin) pinRelease(c->segs[i].pin);
    c->pending_bytes = 0;
    c->nsegs = 0;
    c->olen = 0;
    c->sent = 0;
    c->has_refs = 0;
}

/* Move the owned bytes still pending to the front of obuf once the written
 * prefix is large, so a slow reader's buffer does not grow without bound. */
static void replyCompact(client *c) {
    size_t lo = c->olen;
    for (int i = 0; i < c->nsegs; i++)
        if (!c->segs[i].ref && c->segs[i].off < lo) lo = c->segs[i].off;
    if (lo < PROTO_REPLY_CHUNK_BYTES || lo < c->olen / 2) return;
    memmove(c->obuf, c->obuf + lo, c->olen - lo);
    for (int i = 0; i < c->nsegs; i++)
        if (!c->segs[i].ref) c->segs[i].off -= lo;
    c->olen -= lo;
}

static void clientFlushNow(client *c);

void clientFlush(client *c) {
    uint64_t t0 = ir_cycles();
    clientFlushNow(c);
    c->srv->cycles_reply += ir_cycles() - t0;
}

int clientUnauthOutputOver(client *c) {
    if (c->pending_bytes <= UNAUTH_OUTPUT_LIMIT || !authRequired(c)) return 0;
    /* one already on its way out adds no more replies */
    if (c->flags & (CLIENT_CLOSE_ASAP | CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSED)) return 0;
    /* a pipeline's replies wait for the end of its input: what the socket
     * takes now is not held against a client that reads them */
    clientFlush(c);
    return c->pending_bytes > UNAUTH_OUTPUT_LIMIT;
}

static void clientFlushNow(client *c) {
    if (c->flags & CLIENT_CLOSED) return;
    while (c->pending_bytes) {
        struct iovec iov[IR_MAX_IOV];
        int n = 0;
        size_t want = 0;
        for (int i = 0; i < c->nsegs && n < IR_MAX_IOV; i++) {
            const ir_seg *s = &c->segs[i];
            const char *base = s->ref ? s->ref : c->obuf + s->off;
            size_t skip = (i == 0) ? c->sent : 0;
            iov[n].iov_base = (void *)(base + skip);
            iov[n].iov_len = s->len - skip;
            want += iov[n].iov_len;
            n++;
        }
        ssize_t w = c->tp->ops->writev(c->tp, c->conn, iov, n);
        if (w < 0) {
            c->flags |= CLIENT_CLOSE_ASAP;
            clientDiscardReply(c);
            return;
        }
        c->srv->net_output_bytes += (uint64_t)w;
        c->pending_bytes -= (size_t)w;
        if (w) c->writes++;
        /* drop fully written segments */
        size_t left = (size_t)w;
        int drop = 0;
        while (drop < c->nsegs && left) {
            size_t rem = c->segs[drop].len - c->sent;
            if (left >= rem) {
                left -= rem;
                c->sent = 0;
                if (c->segs[drop].pin) pinRelease(c->segs[drop].pin);
                drop++;
            } else {
                c->sent += left;
                left = 0;
            }
        }
        if (drop) {
            memmove(c->segs, c->segs + drop, (size_t)(c->nsegs - drop) * sizeof(ir_seg));
            c->nsegs -= drop;
        }
        if (c->nsegs == 0) {
            c->olen = 0;
            c->sent = 0;
            c->has_refs = 0;
        }
        if ((size_t)w < want) break; /* the stack is full for now */
    }
    if (c->pending_bytes) {
        c->has_refs = 0; /* what is left is pinned: it waits for the socket */
        replyCompact(c);
        c->tp->ops->want_writable(c->tp, c->conn, 1);
    } else {
        c->tp->ops->want_writable(c->tp, c->conn, 0);
    }
}
