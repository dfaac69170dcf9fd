/* resp.c - the incremental RESP2 request parser.
 *
 * Bytes arrive in chunks of any size (irs_data). Unparsed bytes wait in the
 * bounded query buffer; a complete request becomes c->argv and runs. The result
 * is the same whether a request arrives whole, byte by byte, or split anywhere:
 * every decision waits until the bytes it depends on are present.
 *
 * Bulks of PROTO_MBULK_BIG_ARG bytes or more get a buffer of their own, filled
 * straight from the incoming chunks (no second copy through the query buffer);
 * SET takes that buffer over as the stored value.
 *
 * Checks and error texts follow Redis's networking.c (processMultibulkBuffer,
 * processInlineBuffer); protocol errors reply, then close the connection.
 */
#include <ctype.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "server.h"

#define C_OK 0
#define C_ERR -1
#define ARG_BORROWED SIZE_MAX /* argoff of an argument that points into the input (below) */

static void oom(void) {
    serverLog("out of memory in the request parser");
    abort();
}

static void setProtocolError(client *c, const char *errstr) {
    if (c->srv->cfg.verbose) serverLog("Protocol error (%s) from client %s", errstr, c->addr);
    c->flags |= CLIENT_CLOSE_AFTER_REPLY | CLIENT_PROTOCOL_ERROR;
}

/* ---- argument storage -------------------------------------------------- */

static void argvReserve(client *c, long want) {
    if (c->argc < c->argv_cap) return;
    long cap = c->argv_cap ? (long)c->argv_cap * 2 : 8;
    if (cap < want && want <= 1024) cap = want;
    ir_arg *a = realloc(c->argv, (size_t)cap * sizeof(*a));
    size_t *o = realloc(c->argoff, (size_t)cap * sizeof(*o));
    if (!a || !o) oom();
    c->argv = a;
    c->argoff = o;
    c->argv_cap = (int)cap;
}

/* Append a small argument: its bytes go to argbuf, NUL-terminated. */
static void argAppend(client *c, const char *p, size_t len) {
    argvReserve(c, c->multibulklen);
    if (c->arglen + len + 1 > c->argcap) {
        size_t cap = c->argcap ? c->argcap : 256;
        while (cap < c->arglen + len + 1) cap *= 2;
        char *b = realloc(c->argbuf, cap);
        if (!b) oom();
        c->argbuf = b;
        c->argcap = cap;
    }
    memcpy(c->argbuf + c->arglen, p, len);
    c->argbuf[c->arglen + len] = '\0';
    c->argoff[c->argc] = c->arglen;
    c->argv[c->argc].ptr = NULL; /* resolved from argoff before dispatch */
    c->argv[c->argc].len = len;
    c->argv[c->argc].owned = 0;
    c->argc++;
    c->arglen += len + 1;
}

/* Point small arguments into argbuf (its address is final once parsed). */
static void argvResolve(client *c) {
    for (int i = 0; i < c->argc; i++)
        if (!c->argv[i].owned && c->argoff[i] != ARG_BORROWED)
            c->argv[i].ptr = c->argbuf + c->argoff[i];
}

void resetClientArgs(client *c) {
    for (int i = 0; i < c->argc; i++)
        if (c->argv[i].owned) free(c->argv[i].ptr);
    if (c->big_arg) {
        free(c->argv[c->argc].ptr);
        c->big_arg = 0;
    }
    c->argc = 0;
    c->arglen = 0;
    c->borrow_cmd = 0;
    c->reqtype = PROTO_REQ_NONE;
    c->multibulklen = 0;
    c->bulklen = -1;
    c->big_have = 0;
    /* Give back memory a single huge request needed. */
    if (c->argcap > (1 << 20)) {
        free(c->argbuf);
        c->argbuf = NULL;
        c->argcap = 0;
    }
}

/* ---- inline requests ----------------------------------------------------- */

static int hexDigit(int ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    ch = tolower(ch);
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* Split a line like sdssplitargs: "quoted \x41 strings", 'single', bare words.
 * Returns 0, or -1 on unbalanced quotes. Arguments go to c->argv. */
static int splitInlineArgs(client *c, const char *p, const char *end) {
    char *tmp = NULL;
    size_t tcap = 0;
    int rc = 0;
    for (;;) {
        while (p < end && isspace((unsigned char)*p)) p++;
        if (p >= end) break;
        size_t tlen = 0;
        int inq = 0, insq = 0, done = 0;
        while (!done) {
            if (tlen + 1 > tcap) {
                tcap = tcap ? tcap * 2 : 64;
                char *t = realloc(tmp, tcap);
                if (!t) oom();
                tmp = t;
            }
            if (inq) {
                if (p >= end) {
                    rc = -1;
                    goto out;
                }
                if (*p == '\\' && p + 3 < end && p[1] == 'x' &&
                    hexDigit((unsigned char)p[2]) >= 0 && hexDigit((unsigned char)p[3]) >= 0) {
                    tmp[tlen++] =
                        (char)(hexDigit((unsigned char)p[2]) * 16 + hexDigit((unsigned char)p[3]));
                    p += 3;
                } else if (*p == '\\' && p + 1 < end) {
                    char ch;
                    p++;
                    switch (*p) {
                    case 'n': ch = '\n'; break;
                    case 'r': ch = '\r'; break;
                    case 't': ch = '\t'; break;
                    case 'b': ch = '\b'; break;
                    case 'a': ch = '\a'; break;
                    default: ch = *p; break;
                    }
                    tmp[tlen++] = ch;
                } else if (*p == '"') {
                    /* closing quote must be followed by a space or nothing */
                    if (p + 1 < end && !isspace((unsigned char)p[1])) {
                        rc = -1;
                        goto out;
                    }
                    done = 1;
                } else {
                    tmp[tlen++] = *p;
                }
            } else if (insq) {
                if (p >= end) {
                    rc = -1;
                    goto out;
                }
                if (*p == '\\' && p + 1 < end && p[1] == '\'') {
                    p++;
                    tmp[tlen++] = '\'';
                } else if (*p == '\'') {
                    if (p + 1 < end && !isspace((unsigned char)p[1])) {
                        rc = -1;
                        goto out;
                    }
                    done = 1;
                } else {
                    tmp[tlen++] = *p;
                }
            } else {
                if (p >= end) {
                    done = 1;
                    break;
                }
                switch (*p) {
                case ' ':
                case '\n':
                case '\r':
                case '\t':
                case '\0': done = 1; break;
                case '"': inq = 1; break;
                case '\'': insq = 1; break;
                default: tmp[tlen++] = *p; break;
                }
            }
            if (p < end) p++;
        }
        argAppend(c, tmp ? tmp : "", tlen);
    }
out:
    free(tmp);
    return rc;
}

static int processInlineBuffer(client *c) {
    char *start = c->qbuf + c->qpos;
    size_t avail = c->qlen - c->qpos;
    /* Redis looks for the newline with strchr(): a NUL byte before it means
     * "no complete line yet", until the 64 KiB limit turns it into an error. */
    char *newline = memchr(start, '\n', avail);
    if (newline && memchr(start, '\0', (size_t)(newline - start))) newline = NULL;
    if (!newline) {
        if (avail > PROTO_INLINE_MAX_SIZE) {
            addReplyError(c, "Protocol error: too big inline request");
            setProtocolError(c, "too big inline request");
        }
        return C_ERR;
    }
    char *lineend = newline;
    if (lineend != start && lineend[-1] == '\r') lineend--;
    c->multibulklen = 0;
    if (splitInlineArgs(c, start, lineend) != 0) {
        resetClientArgs(c);
        addReplyError(c, "Protocol error: unbalanced quotes in request");
        setProtocolError(c, "unbalanced quotes in inline request");
        return C_ERR;
    }
    c->qpos += (size_t)(newline - start) + 1;
    return C_OK;
}

/* ---- multibulk requests ------------------------------------------------- */

/* A big bulk: move what the query buffer holds into its own buffer. */
static void beginBigArg(client *c) {
    argvReserve(c, c->multibulklen);
    size_t need = (size_t)c->bulklen + 2;
    char *buf = malloc(need);
    if (!buf) oom();
    size_t avail = c->qlen - c->qpos;
    size_t take = avail < need ? avail : need;
    memcpy(buf, c->qbuf + c->qpos, take);
    c->qpos += take;
    c->argv[c->argc].ptr = buf;
    c->argv[c->argc].len = (size_t)c->bulklen;
    c->argv[c->argc].owned = 1;
    c->big_arg = 1;
    c->big_have = take;
}

/* The big bulk is complete: it becomes argv[argc]. */
static void finishBigArg(client *c) {
    ir_arg *a = &c->argv[c->argc];
    a->ptr[a->len] = '\0'; /* overwrites the CR we do not check, as Redis doesn't */
    c->argoff[c->argc] = 0;
    c->argc++;
    c->big_arg = 0;
    c->big_have = 0;
    c->bulklen = -1;
    c->multibulklen--;
}

/* Parsing where the input lies. When a read starts with no request pending, the
 * parser works on the transport's buffer itself (qborrowed) instead of copying it into
 * qbuf first; only an unfinished request's bytes are copied, after. Small arguments are
 * copied into argbuf as always. A big body of a command whose commands.json entry says
 * "bodies_by_reference" (REPLAY.ADD: it copies its items into the table and reads
 * nothing else of them) is not copied at all: its argument points into the buffer
 * (borrowed: argoff ARG_BORROWED), is not NUL-terminated and is valid only until the read returns, so a
 * request that does not finish within the read, or a command that blocks, first gets
 * owned copies (argvOwnBorrowed). On the shm transport the buffer is the client's
 * request ring, which that client may still write to: such a command only copies from
 * its bodies, so a client that changes one under it changes only its own item. A body
 * such a command gets copied after all (it did not lie whole in one read, or its
 * request outlived the read) is counted in INFO stats by_reference_bodies_copied. What
 * follows a copied body in the read that completes it is parsed in place again. */
static int commandBorrows(client *c) {
    if (!c->borrow_cmd) {
        const ir_command *cmd =
            c->argc ? lookupCommand(c->argbuf + c->argoff[0], c->argv[0].len) : NULL;
        c->borrow_cmd = cmd && cmd->by_reference ? 1 : -1;
    }
    return c->borrow_cmd > 0;
}

/* The big bulk whose header was just read, as a borrowed argument if it may be one
 * and lies whole in the buffer: 1 if so (parsed), 0 to copy it instead. */
static int borrowBigArg(client *c) {
    size_t need = (size_t)c->bulklen + 2;
    if (!c->qborrowed || c->qlen - c->qpos < need || !commandBorrows(c)) return 0;
    argvReserve(c, c->multibulklen);
    c->argv[c->argc] = (ir_arg){c->qbuf + c->qpos, (size_t)c->bulklen, 0};
    c->argoff[c->argc] = ARG_BORROWED;
    c->argc++;
    c->qpos += need;
    c->bulklen = -1;
    c->multibulklen--;
    return 1;
}

/* Borrowed arguments become owned copies (the buffer they point into is going). */
static void argvOwnBorrowed(client *c) {
    for (int i = 0; i < c->argc; i++) {
        ir_arg *a = &c->argv[i];
        if (a->owned || c->argoff[i] != ARG_BORROWED) continue;
        c->srv->by_ref_copied++;
        char *p = malloc(a->len + 1);
        if (!p) oom();
        memcpy(p, a->ptr, a->len);
        p[a->len] = '\0';
        a->ptr = p;
        a->owned = 1;
        c->argoff[i] = 0;
    }
}

static int processMultibulkBuffer(client *c) {
    long long ll;
    if (c->multibulklen == 0) {
        char *start = c->qbuf + c->qpos;
        size_t avail = c->qlen - c->qpos;
        char *newline = memchr(start, '\r', avail);
        if (!newline) {
            if (avail > PROTO_INLINE_MAX_SIZE) {
                addReplyError(c, "Protocol error: too big mbulk count string");
                setProtocolError(c, "too big mbulk count string");
            }
            return C_ERR;
        }
        if ((size_t)(newline - start) + 2 > avail) return C_ERR; /* wait for \n */
        if (!string2ll(start + 1, (size_t)(newline - (start + 1)), &ll) || ll > INT_MAX) {
            addReplyError(c, "Protocol error: invalid multibulk length");
            setProtocolError(c, "invalid mbulk count");
            return C_ERR;
        } else if (ll > 10 && authRequired(c)) {
            addReplyError(c, "Protocol error: unauthenticated multibulk length");
            setProtocolError(c, "unauth mbulk count");
            return C_ERR;
        }
        c->qpos += (size_t)(newline - start) + 2;
        if (ll <= 0) return C_OK; /* "*0" or "*-1": nothing to run */
        c->multibulklen = (long)ll;
        c->bulklen = -1;
    }
    while (c->multibulklen) {
        if (c->bulklen == -1) {
            char *start = c->qbuf + c->qpos;
            size_t avail = c->qlen - c->qpos;
            char *newline = memchr(start, '\r', avail);
            if (!newline) {
                if (avail > PROTO_INLINE_MAX_SIZE) {
                    addReplyError(c, "Protocol error: too big bulk count string");
                    setProtocolError(c, "too big bulk count string");
                }
                break;
            }
            if ((size_t)(newline - start) + 2 > avail) break;
            if (start[0] != '$') {
                addReplyErrorFormat(c, "Protocol error: expected '$', got '%c'", start[0]);
                setProtocolError(c, "expected $ but got something else");
                return C_ERR;
            }
            if (!string2ll(start + 1, (size_t)(newline - (start + 1)), &ll) || ll < 0 ||
                (uint64_t)ll > c->srv->cfg.proto_max_bulk_len) {
                addReplyError(c, "Protocol error: invalid bulk length");
                setProtocolError(c, "invalid bulk length");
                return C_ERR;
            } else if (ll > 16384 && authRequired(c)) {
                addReplyError(c, "Protocol error: unauthenticated bulk length");
                setProtocolError(c, "unauth bulk length");
                return C_ERR;
            }
            c->qpos += (size_t)(newline - start) + 2;
            c->bulklen = ll;
            if (ll >= PROTO_MBULK_BIG_ARG) {
                if (borrowBigArg(c)) continue;
                if (commandBorrows(c)) c->srv->by_ref_copied++; /* not whole in this read */
                beginBigArg(c);
                if (c->big_have < (size_t)ll + 2) return C_ERR; /* irs_data fills the rest */
                finishBigArg(c);
                continue;
            }
        }
        if (c->qlen - c->qpos < (size_t)c->bulklen + 2) break;
        argAppend(c, c->qbuf + c->qpos, (size_t)c->bulklen);
        c->qpos += (size_t)c->bulklen + 2;
        c->bulklen = -1;
        c->multibulklen--;
    }
    return c->multibulklen == 0 ? C_OK : C_ERR;
}

/* ---- driving ------------------------------------------------------------ */

static int clientClosing(const client *c) {
    return (c->flags & (CLIENT_CLOSE_AFTER_REPLY | CLIENT_CLOSE_ASAP | CLIENT_CLOSED)) != 0;
}

static void runCommand(client *c) {
    argvResolve(c);
    processCommand(c);
    /* a blocked client keeps its argv: the command runs again when served */
    if (!(c->flags & CLIENT_BLOCKED)) resetClientArgs(c);
}

/* Parse and run the requests in qbuf[qpos, qlen) until one is unfinished. */
static void runRequests(client *c) {
    /* a blocked client's input waits until it is unblocked (blocked.c) */
    while (c->qpos < c->qlen && !clientClosing(c) && !(c->flags & CLIENT_BLOCKED)) {
        if (c->reqtype == PROTO_REQ_NONE)
            c->reqtype = c->qbuf[c->qpos] == '*' ? PROTO_REQ_MULTIBULK : PROTO_REQ_INLINE;
        int r = c->reqtype == PROTO_REQ_INLINE ? processInlineBuffer(c) : processMultibulkBuffer(c);
        if (r != C_OK) break;
        if (c->argc == 0) resetClientArgs(c); /* empty line, "*0", "*-10" */
        else runCommand(c);
    }
}

void processInputBuffer(client *c) {
    runRequests(c);
    /* keep only the unparsed tail */
    if (c->qpos == c->qlen) {
        c->qpos = c->qlen = 0;
        if (c->qcap > (1 << 20)) {
            free(c->qbuf);
            c->qbuf = NULL;
            c->qcap = 0;
        }
    } else if (c->qpos) {
        memmove(c->qbuf, c->qbuf + c->qpos, c->qlen - c->qpos);
        c->qlen -= c->qpos;
        c->qpos = 0;
    }
}

static size_t feedChunks(client *c, const char *buf, size_t len);

static int queryAppend(client *c, const char *buf, size_t len) {
    if (c->qborrowed) { /* input for a client whose read is being parsed: never expected */
        serverLog("Closing client %s: input arrived inside its own read", c->addr);
        c->flags |= CLIENT_CLOSE_ASAP;
        return -1;
    }
    if (c->qlen + len > c->srv->cfg.client_query_buffer_limit) {
        serverLog("Closing client %s that reached max query buffer length", c->addr);
        c->flags |= CLIENT_CLOSE_ASAP;
        return -1;
    }
    if (c->qlen + len > c->qcap) {
        size_t cap = c->qcap ? c->qcap : PROTO_REPLY_CHUNK_BYTES;
        while (cap < c->qlen + len) cap *= 2;
        char *q = realloc(c->qbuf, cap);
        if (!q) oom();
        c->qbuf = q;
        c->qcap = cap;
    }
    memcpy(c->qbuf + c->qlen, buf, len);
    c->qlen += len;
    return 0;
}

static void requestDeadline(client *c);

/* A command that blocked in a read its transport keeps (the same-host rings): the
 * read's bytes stay where they lie from its first body read by reference on (from
 * the end of the request if it has none), so those bodies stay valid while it waits
 * and the requests behind it wait in the ring, not in qbuf; input stops until it is
 * done (clientResumeInput), and the bytes it parsed are skipped when the rest comes
 * again (irs_data). A client that writes into what it sent changes only its own
 * items, as with any body read by reference. Returns the bytes taken. */
static size_t holdInput(client *c, const char *buf, size_t pos) {
    size_t keep = pos;
    for (int i = 0; i < c->argc; i++)
        if (c->argoff[i] == ARG_BORROWED && !c->argv[i].owned) {
            size_t at = (size_t)(c->argv[i].ptr - buf);
            if (at < keep) keep = at;
        }
    c->holding = 1;
    c->held_in = pos - keep;
    c->tp->ops->want_readable(c->tp, c->conn, 0);
    return keep;
}

/* A read that starts with no request pending, parsed where it lies; what the read
 * leaves unfinished (or waiting behind a blocked command) is copied into qbuf, or
 * left where it lies (holdInput). Returns the bytes taken. */
static size_t feedBorrowed(client *c, const char *buf, size_t len) {
    char *own = c->qbuf;
    size_t own_cap = c->qcap;
    c->qbuf = (char *)buf; /* read, never written (arguments are copied out of it) */
    c->qcap = c->qlen = len;
    c->qpos = 0;
    c->qborrowed = 1;
    runRequests(c);
    size_t pos = c->qpos;
    c->qborrowed = 0;
    c->qbuf = own;
    c->qcap = own_cap;
    c->qlen = c->qpos = 0;
    if ((c->flags & CLIENT_BLOCKED) && c->tp->keeps_input && !c->multibulklen && !clientClosing(c))
        return holdInput(c, buf, pos);
    if (c->argc && (c->multibulklen || (c->flags & CLIENT_BLOCKED))) argvOwnBorrowed(c);
    if (pos < len && !clientClosing(c)) return pos + feedChunks(c, buf + pos, len - pos);
    return len;
}

/* Whether the next bytes can be parsed where they lie: nothing waits in qbuf and no
 * big bulk is being filled. A request may be under way (its small arguments are in
 * argbuf, its big ones owned): the read goes on with it in place. */
static int canBorrow(const client *c) {
    return c->qlen == c->qpos && !c->big_arg && !c->qborrowed &&
           (c->reqtype == PROTO_REQ_NONE ||
            (c->reqtype == PROTO_REQ_MULTIBULK && c->multibulklen)) &&
           !(c->flags & CLIENT_BLOCKED);
}

/* Feed bytes to the parser and run every request they complete; returns the bytes
 * taken (all of them, unless a command blocked and its transport keeps input). */
size_t clientFeed(client *c, const char *buf, size_t len) {
    size_t took = canBorrow(c) ? feedBorrowed(c, buf, len) : feedChunks(c, buf, len);
    requestDeadline(c);
    return took;
}

void clientResumeInput(client *c) {
    if (c->holding) { /* its input waits in the transport: deliver it again */
        c->holding = 0;
        if (!(c->flags & CLIENT_CLOSED)) c->tp->ops->want_readable(c->tp, c->conn, 1);
    }
    c->req_start_ms = 0; /* what waited behind the blocked command starts now */
    processInputBuffer(c);
    requestDeadline(c);
}

static void requestDeadline(client *c) {
    /* A request left unfinished starts the request deadline (server_tick). */
    int partial = c->qlen > c->qpos || c->big_arg || c->multibulklen;
    if (!partial) c->req_start_ms = 0;
    else if (!c->req_start_ms) c->req_start_ms = c->srv->now_ms ? c->srv->now_ms : 1;
}

static size_t feedChunks(client *c, const char *buf, size_t len) {
    const size_t all = len;
    while (len && !clientClosing(c)) {
        if (c->big_arg) {
            ir_arg *a = &c->argv[c->argc];
            size_t need = a->len + 2 - c->big_have;
            size_t take = len < need ? len : need;
            memcpy(a->ptr + c->big_have, buf, take);
            c->big_have += take;
            buf += take;
            len -= take;
            if (c->big_have < a->len + 2) return all;
            finishBigArg(c);
            if (c->multibulklen == 0) runCommand(c);
            /* what follows the body in this read (the request's last arguments, the
             * next requests and their bodies) is parsed where it lies, not copied */
            if (len && !clientClosing(c) && canBorrow(c))
                return all - len + feedBorrowed(c, buf, len);
            continue;
        }
        if (queryAppend(c, buf, len) == 0) processInputBuffer(c);
        return all;
    }
    return all;
}
