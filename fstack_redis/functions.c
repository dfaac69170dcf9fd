/* functions.c - Redis 7.0 functions: FUNCTION LOAD/LIST/DELETE/FLUSH/DUMP/
 * RESTORE/STATS/KILL/HELP, FCALL and FCALL_RO.
 *
 * A library is its code ("#!lua name=<lib>" then Lua) and the functions its
 * code registered with redis.register_function when it was loaded; script.c
 * runs that code and the functions (in a Lua state of their own), this file
 * keeps the libraries: names, descriptions, flags, and the Lua reference of
 * each function. Library names are case-sensitive, function names are one
 * case-insensitive namespace over all libraries, as in Redis.
 *
 * FUNCTION DUMP writes Redis's payload: per library the RDB opcode 245
 * (FUNCTION2) and the code as an RDB string, then the RDB version and a
 * CRC-64, so payloads move between inreplay and Redis both ways (RESTORE
 * reads LZF-compressed code, which Redis writes). The libraries are in every
 * snapshot (snapshot.c, record FUNC) and in the RDB image a replica loads;
 * LOAD, DELETE, FLUSH and RESTORE are replicated as called, FCALL as the
 * commands its function ran (as EVAL).
 *
 * A function past busy-reply-threshold is busy as an EVAL is (script.c):
 * FUNCTION STATS shows it, FUNCTION KILL stops it if it has not written.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"
#include "db_internal.h"
#include "functions.h"
#include "rdb.h"
#include "replication.h"
#include "script.h"

#define FN_LOAD_TIMEOUT_MS 500
#define RDB_OPCODE_FUNCTION_PRE_GA 246
#define RDB_OPCODE_FUNCTION2 245

typedef struct fnFunc {
    char *name;
    char *desc; /* NULL: none */
    int flags;  /* SF_* */
    int ref;    /* the callback in the functions' Lua state */
} fnFunc;

typedef struct fnLib {
    char *name;
    char *code; /* all of it, shebang included */
    size_t codelen;
    fnFunc *f;
    int nf, cap;
} fnLib;

typedef struct ir_functions {
    fnLib **libs; /* in load order */
    int n, cap;
} ir_functions;

static void oom(void) {
    serverLog("out of memory (functions)");
    abort();
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom();
    return p;
}

static char *xstrndup(const char *s, size_t n) {
    char *p = xmalloc(n + 1);
    memcpy(p, s, n);
    p[n] = '\0';
    return p;
}

static ir_functions *fset(ir_server *s) {
    if (!s->functions) {
        s->functions = calloc(1, sizeof(ir_functions));
        if (!s->functions) oom();
    }
    return s->functions;
}

static void libFree(ir_server *s, fnLib *l) {
    for (int i = 0; i < l->nf; i++) {
        scriptFnUnref(s, l->f[i].ref);
        free(l->f[i].name);
        free(l->f[i].desc);
    }
    free(l->f);
    free(l->name);
    free(l->code);
    free(l);
}

static int libIndex(const ir_functions *fs, const char *name, size_t len) {
    for (int i = 0; i < fs->n; i++)
        if (strlen(fs->libs[i]->name) == len && !memcmp(fs->libs[i]->name, name, len)) return i;
    return -1;
}

/* The function of that name (case-insensitive) in any library but skip. */
static fnFunc *findFunc(const ir_functions *fs, const char *name, size_t len, const fnLib *skip) {
    for (int i = 0; i < fs->n; i++) {
        fnLib *l = fs->libs[i];
        if (l == skip) continue;
        for (int j = 0; j < l->nf; j++)
            if (strlen(l->f[j].name) == len && !strncasecmp(l->f[j].name, name, len))
                return &l->f[j];
    }
    return NULL;
}

static void setAppend(ir_functions *fs, fnLib *l) {
    if (fs->n == fs->cap) {
        int cap = fs->cap ? fs->cap * 2 : 8;
        fnLib **p = realloc(fs->libs, (size_t)cap * sizeof(*p));
        if (!p) oom();
        fs->libs = p;
        fs->cap = cap;
    }
    fs->libs[fs->n++] = l;
}

static void setRemoveAt(ir_functions *fs, int i) {
    memmove(fs->libs + i, fs->libs + i + 1, (size_t)(fs->n - i - 1) * sizeof(*fs->libs));
    fs->n--;
}

static void setClear(ir_server *s, ir_functions *fs) {
    for (int i = 0; i < fs->n; i++) libFree(s, fs->libs[i]);
    fs->n = 0;
}

static int validName(const char *p, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!isalnum((unsigned char)p[i]) && p[i] != '_') return 0;
    return 1;
}

static const char *const BAD_NAME =
    "Library names can only contain letters, numbers, or underscores(_) and must be at least one "
    "character long";

/* redis.register_function's callback: add the function to the library being loaded. */
static const char *registerCb(void *arg, const char *name, size_t len, const char *desc,
                              size_t dlen, int flags, int ref) {
    fnLib *l = arg;
    if (!validName(name, len)) return BAD_NAME;
    for (int j = 0; j < l->nf; j++)
        if (strlen(l->f[j].name) == len && !memcmp(l->f[j].name, name, len))
            return "Function already exists in the library";
    if (l->nf == l->cap) {
        int cap = l->cap ? l->cap * 2 : 4;
        fnFunc *p = realloc(l->f, (size_t)cap * sizeof(*p));
        if (!p) oom();
        l->f = p;
        l->cap = cap;
    }
    fnFunc *f = &l->f[l->nf++];
    f->name = xstrndup(name, len);
    f->desc = desc ? xstrndup(desc, dlen) : NULL;
    f->flags = flags;
    f->ref = ref;
    return NULL;
}

/* One shebang word, as Redis splits the line (sdssplitargs: quotes and their
 * escapes). 1 with the word in out (malloc'd), 0 at the end, -1 when malformed. */
static int nextWord(const char **pp, const char *end, char **out, size_t *olen) {
    const char *p = *pp;
    while (p < end && isspace((unsigned char)*p)) p++;
    if (p == end) {
        *pp = p;
        return 0;
    }
    char *w = xmalloc((size_t)(end - p) + 1);
    size_t n = 0;
    int inq = 0, insq = 0;
    for (;;) {
        if (inq) {
            if (p == end) goto bad;
            if (*p == '\\' && p + 3 < end && p[1] == 'x' && isxdigit((unsigned char)p[2]) &&
                isxdigit((unsigned char)p[3])) {
                char hex[3] = {p[2], p[3], 0};
                w[n++] = (char)strtol(hex, NULL, 16);
                p += 4;
                continue;
            }
            if (*p == '\\' && p + 1 < end) {
                char e = p[1];
                w[n++] = e == 'n'   ? '\n'
                         : e == 'r' ? '\r'
                         : e == 't' ? '\t'
                         : e == 'b' ? '\b'
                         : e == 'a' ? '\a'
                                    : e;
                p += 2;
                continue;
            }
            if (*p == '"') {
                p++;
                if (p < end && !isspace((unsigned char)*p))
                    goto bad; /* closing quote must be followed by a space */
                break;
            }
            w[n++] = *p++;
        } else if (insq) {
            if (p == end) goto bad;
            if (*p == '\\' && p + 1 < end && p[1] == '\'') {
                w[n++] = '\'';
                p += 2;
                continue;
            }
            if (*p == '\'') {
                p++;
                if (p < end && !isspace((unsigned char)*p)) goto bad;
                break;
            }
            w[n++] = *p++;
        } else {
            if (p == end || isspace((unsigned char)*p)) break;
            if (*p == '"') inq = 1;
            else if (*p == '\'') insq = 1;
            else w[n++] = *p;
            p++;
        }
    }
    w[n] = '\0';
    *out = w;
    *olen = n;
    *pp = p;
    return 1;
bad:
    free(w);
    return -1;
}

/* Load code as a library into fs (replace: an existing one of its name goes,
 * if the new one loads). The library, or NULL with err set. */
static fnLib *libCreate(ir_server *s, ir_functions *fs, const char *code, size_t len, int replace,
                        long long timeout_ms, char *err, size_t errlen) {
    if (len < 2 || code[0] != '#' || code[1] != '!') {
        snprintf(err, errlen, "Missing library metadata");
        return NULL;
    }
    const char *nl = memchr(code, '\n', len);
    if (!nl) {
        snprintf(err, errlen, "Invalid library metadata");
        return NULL;
    }
    const char *p = code;
    char *engine = NULL, *name = NULL, *w;
    size_t wl, namelen = 0;
    int rc, first = 1, ok = 1;
    while ((rc = nextWord(&p, nl, &w, &wl)) == 1) {
        if (first) {
            engine = w; /* "#!lua" */
            first = 0;
            continue;
        }
        if (wl >= 5 && !strncasecmp(w, "name=", 5)) {
            if (name) {
                snprintf(err, errlen,
                         "Invalid metadata value, name argument was given multiple times");
                free(w);
                ok = 0;
                break;
            }
            name = xstrndup(w + 5, wl - 5);
            namelen = wl - 5;
            free(w);
            continue;
        }
        snprintf(err, errlen, "Invalid metadata value given: %s", w);
        free(w);
        ok = 0;
        break;
    }
    fnLib *l = NULL;
    if (rc < 0 || (ok && !engine)) {
        snprintf(err, errlen, "Invalid library metadata");
        ok = 0;
    }
    if (ok && !name) {
        snprintf(err, errlen, "Library name was not given");
        ok = 0;
    }
    if (ok && !validName(name, namelen)) {
        snprintf(err, errlen, "%s", BAD_NAME);
        ok = 0;
    }
    if (ok && strcasecmp(engine + 2, "lua")) {
        snprintf(err, errlen, "Engine '%s' not found", engine + 2);
        ok = 0;
    }
    int old = ok ? libIndex(fs, name, namelen) : -1;
    if (ok && old >= 0 && !replace) {
        snprintf(err, errlen, "Library '%s' already exists", name);
        ok = 0;
    }
    if (ok) {
        l = calloc(1, sizeof(*l));
        if (!l) oom();
        l->name = name;
        name = NULL;
        l->code = xstrndup(code, len);
        l->codelen = len;
        size_t skip = (size_t)(nl - code);
        if (scriptFnLoad(s, code + skip, len - skip, timeout_ms, registerCb, l, err, errlen) != 0) {
            ok = 0;
        } else if (l->nf == 0) {
            snprintf(err, errlen, "No functions registered");
            ok = 0;
        } else {
            for (int j = 0; j < l->nf; j++) {
                if (findFunc(fs, l->f[j].name, strlen(l->f[j].name),
                             old >= 0 ? fs->libs[old] : NULL)) {
                    snprintf(err, errlen, "Function %s already exists", l->f[j].name);
                    ok = 0;
                    break;
                }
            }
        }
        if (!ok) {
            libFree(s, l);
            l = NULL;
        }
    }
    free(engine);
    free(name);
    if (!ok) return NULL;
    if (old >= 0) {
        libFree(s, fs->libs[old]);
        setRemoveAt(fs, old);
    }
    setAppend(fs, l);
    return l;
}

static void changed(client *c) {
    c->srv->dirty++;
    replMarkDirty();
}

static int oomRefused(client *c) {
    ir_server *s = c->srv;
    if (s->cfg.maxmemory && serverUsedMemory(s) > s->cfg.maxmemory) {
        s->oom_rejections++;
        addReplyError(c, "-OOM " IR_OOM_MSG);
        return 1;
    }
    return 0;
}

static void subSyntaxError(client *c) {
    addReplyErrorFormat(
        c, "unknown subcommand or wrong number of arguments for '%.128s'. Try FUNCTION HELP.",
        c->argv[1].ptr);
}

static void functionLoad(client *c) {
    int replace = 0, pos = 2;
    while (pos < c->argc - 1) {
        if (argEq(c, pos, "replace")) {
            replace = 1;
            pos++;
            continue;
        }
        addReplyErrorFormat(c, "Unknown option given: %s", c->argv[pos].ptr);
        return;
    }
    if (pos >= c->argc) {
        addReplyError(c, "Function code is missing");
        return;
    }
    if (oomRefused(c)) return;
    char err[512];
    fnLib *l = libCreate(c->srv, fset(c->srv), c->argv[pos].ptr, c->argv[pos].len, replace,
                         FN_LOAD_TIMEOUT_MS, err, sizeof(err));
    if (!l) {
        addReplyError(c, err);
        return;
    }
    changed(c);
    addReplyBulkCString(c, l->name);
}

static void replyFlags(client *c, int flags) {
    long n = 0;
    for (int b = 1; b < SF_EVAL_COMPAT; b <<= 1)
        if (flags & b) n++;
    addReplySetLen(c, n);
    for (int b = 1; b < SF_EVAL_COMPAT; b <<= 1)
        if (flags & b) addReplyStatus(c, scriptFlagName(b));
}

static void functionList(client *c) {
    int withcode = 0;
    const ir_arg *pat = NULL;
    for (int i = 2; i < c->argc; i++) {
        if (!withcode && argEq(c, i, "withcode")) {
            withcode = 1;
            continue;
        }
        if (!pat && argEq(c, i, "libraryname")) {
            if (i >= c->argc - 1) {
                addReplyError(c, "library name argument was not given");
                return;
            }
            pat = &c->argv[++i];
            continue;
        }
        addReplyErrorFormat(c, "Unknown argument %s", c->argv[i].ptr);
        return;
    }
    ir_functions *fs = fset(c->srv);
    long n = 0;
    for (int i = 0; i < fs->n; i++)
        if (!pat ||
            stringmatchlen(pat->ptr, pat->len, fs->libs[i]->name, strlen(fs->libs[i]->name), 1))
            n++;
    addReplyArrayLen(c, n);
    for (int i = 0; i < fs->n; i++) {
        fnLib *l = fs->libs[i];
        if (pat && !stringmatchlen(pat->ptr, pat->len, l->name, strlen(l->name), 1)) continue;
        addReplyMapLen(c, withcode ? 4 : 3);
        addReplyBulkCString(c, "library_name");
        addReplyBulkCString(c, l->name);
        addReplyBulkCString(c, "engine");
        addReplyBulkCString(c, "LUA");
        addReplyBulkCString(c, "functions");
        addReplyArrayLen(c, l->nf);
        for (int j = 0; j < l->nf; j++) {
            addReplyMapLen(c, 3);
            addReplyBulkCString(c, "name");
            addReplyBulkCString(c, l->f[j].name);
            addReplyBulkCString(c, "description");
            addReplyBulkCString(c, l->f[j].desc); /* NULL: a null */
            addReplyBulkCString(c, "flags");
            replyFlags(c, l->f[j].flags);
        }
        if (withcode) {
            addReplyBulkCString(c, "library_code");
            addReplyBulk(c, l->code, l->codelen);
        }
    }
}

static void functionDelete(client *c) {
    ir_functions *fs = fset(c->srv);
    int i = libIndex(fs, c->argv[2].ptr, c->argv[2].len);
    if (i < 0) {
        addReplyError(c, "Library not found");
        return;
    }
    libFree(c->srv, fs->libs[i]);
    setRemoveAt(fs, i);
    changed(c);
    addReplyStatus(c, "OK");
}

static void functionFlush(client *c) {
    if (c->argc > 3) {
        subSyntaxError(c);
        return;
    }
    if (c->argc == 3 && !argEq(c, 2, "sync") && !argEq(c, 2, "async")) {
        addReplyError(c, "FUNCTION FLUSH only supports SYNC|ASYNC option");
        return;
    }
    setClear(c->srv, fset(c->srv));
    changed(c);
    addReplyStatus(c, "OK");
}

/* The payload of FUNCTION DUMP (without version and CRC) into b. */
static void putLibraries(const ir_functions *fs, rdbBuf *b) {
    for (int i = 0; fs && i < fs->n; i++) {
        rdbPutByte(b, RDB_OPCODE_FUNCTION2);
        rdbPutString(b, fs->libs[i]->code, fs->libs[i]->codelen, RDB_RAW_STRINGS);
    }
}

void functionsRdbPut(const ir_server *s, rdbBuf *b) { putLibraries(s->functions, b); }

static void functionDump(client *c) {
    rdbBuf b = {0};
    putLibraries(fset(c->srv), &b);
    rdbPutLE(&b, RDB_VERSION, 2);
    if (!b.oom) rdbPutLE(&b, crc64Jones(0, b.p, b.len), 8);
    if (b.oom) {
        serverLog("out of memory (FUNCTION DUMP of %zu bytes)", b.cap);
        abort();
    }
    addReplyBulk(c, b.p, b.len);
    free(b.p);
}

/* Move src's libraries into dst (replace: a library of the same name goes);
 * nothing changes on a collision. 0, or -1 with err. */
static int setJoin(ir_server *s, ir_functions *dst, ir_functions *src, int replace, char *err,
                   size_t errlen) {
    for (int i = 0; i < src->n; i++) {
        if (libIndex(dst, src->libs[i]->name, strlen(src->libs[i]->name)) >= 0 && !replace) {
            snprintf(err, errlen, "Library %s already exists", src->libs[i]->name);
            return -1;
        }
    }
    for (int i = 0; i < src->n; i++) {
        fnLib *l = src->libs[i];
        for (int j = 0; j < l->nf; j++) {
            fnFunc *f = findFunc(dst, l->f[j].name, strlen(l->f[j].name), NULL);
            if (!f) continue;
            /* a function of a library that is replaced does not collide */
            int replaced = 0;
            for (int k = 0; replace && k < dst->n && !replaced; k++) {
                fnLib *d = dst->libs[k];
                if (libIndex(src, d->name, strlen(d->name)) < 0) continue;
                for (int m = 0; m < d->nf; m++)
                    if (&d->f[m] == f) replaced = 1;
            }
            if (!replaced) {
                snprintf(err, errlen, "Function %s already exists", l->f[j].name);
                return -1;
            }
        }
    }
    for (int i = 0; i < src->n; i++) {
        fnLib *l = src->libs[i];
        int old = libIndex(dst, l->name, strlen(l->name));
        if (old >= 0) {
            libFree(s, dst->libs[old]);
            setRemoveAt(dst, old);
        }
        setAppend(dst, l);
    }
    src->n = 0;
    return 0;
}

/* Load a FUNCTION DUMP payload's records (p..end, without version and CRC)
 * into tmp. 0, or -1 with err. */
static int loadPayload(ir_server *s, ir_functions *tmp, const unsigned char *p,
                       const unsigned char *end, char *err, size_t errlen) {
    while (p < end) {
        unsigned type = *p++;
        if (type == RDB_OPCODE_FUNCTION_PRE_GA) {
            snprintf(err, errlen, "Pre-GA function format not supported");
            return -1;
        }
        if (type != RDB_OPCODE_FUNCTION2) {
            snprintf(err, errlen, "given type is not a function");
            return -1;
        }
        char *code;
        size_t len;
        if (rdbReadString(&p, end, &code, &len) != 0) {
            snprintf(err, errlen, "Failed loading library payload");
            return -1;
        }
        /* with LOAD's time limit (Redis has none here): a crafted payload
         * cannot hang the server, and a dumped library loaded within it once */
        fnLib *l = libCreate(s, tmp, code, len, 0, FN_LOAD_TIMEOUT_MS, err, errlen);
        free(code);
        if (!l) return -1;
    }
    return 0;
}

ir_functions *functionsPrepare(ir_server *s, char *const *codes, const size_t *lens, size_t n,
                               char *err, size_t errlen) {
    ir_functions *set = calloc(1, sizeof(*set));
    if (!set) oom();
    for (size_t i = 0; i < n; i++) {
        if (!libCreate(s, set, codes[i], lens[i], 0, 0, err, errlen)) {
            functionsDiscard(s, set);
            return NULL;
        }
    }
    return set;
}

void functionsDiscard(ir_server *s, ir_functions *set) {
    if (!set) return;
    setClear(s, set);
    free(set->libs);
    free(set);
}

void functionsInstall(ir_server *s, ir_functions *set) {
    ir_functions *cur = fset(s);
    setClear(s, cur);
    free(cur->libs);
    free(cur);
    s->functions = set;
}

static void functionRestore(client *c) {
    if (c->argc > 4) {
        subSyntaxError(c);
        return;
    }
    int policy = 'A';
    if (c->argc == 4) {
        if (argEq(c, 3, "append")) policy = 'A';
        else if (argEq(c, 3, "replace")) policy = 'R';
        else if (argEq(c, 3, "flush")) policy = 'F';
        else {
            addReplyError(
                c, "Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.");
            return;
        }
    }
    if (oomRefused(c)) return;
    const unsigned char *p = (const unsigned char *)c->argv[2].ptr;
    size_t len = c->argv[2].len;
    uint64_t crc = 0;
    for (int i = 0; len >= 10 && i < 8; i++) crc |= (uint64_t)p[len - 8 + i] << (8 * i);
    if (len < 10 || (p[len - 10] | (p[len - 9] << 8)) > RDB_VERSION ||
        crc64Jones(0, p, len - 8) != crc) {
        addReplyError(c, "DUMP payload version or checksum are wrong");
        return;
    }
    ir_server *s = c->srv;
    ir_functions tmp = {0};
    char err[512];
    int rc = loadPayload(s, &tmp, p, p + len - 10, err, sizeof(err));
    if (rc == 0) {
        ir_functions *cur = fset(s);
        if (policy == 'F') setClear(s, cur);
        rc = setJoin(s, cur, &tmp, policy == 'R', err, sizeof(err));
    }
    setClear(s, &tmp);
    free(tmp.libs);
    if (rc != 0) {
        addReplyError(c, err);
        return;
    }
    changed(c);
    addReplyStatus(c, "OK");
}

static void functionStats(client *c) {
    if (scriptBusy(c->srv) && scriptBusyIsEval(c->srv)) {
        addReplyBusyScript(c, 1);
        return;
    }
    ir_functions *fs = fset(c->srv);
    long nf = 0;
    for (int i = 0; i < fs->n; i++) nf += fs->libs[i]->nf;
    addReplyMapLen(c, 2);
    addReplyBulkCString(c, "running_script");
    const char *name;
    const client *caller;
    long long ms;
    if (!scriptRunningFunction(c->srv, &name, &caller, &ms)) {
        addReplyNull(c);
    } else {
        addReplyMapLen(c, 3);
        addReplyBulkCString(c, "name");
        addReplyBulkCString(c, name);
        addReplyBulkCString(c, "command");
        addReplyArrayLen(c, caller->argc);
        for (int i = 0; i < caller->argc; i++)
            addReplyBulk(c, caller->argv[i].ptr, caller->argv[i].len);
        addReplyBulkCString(c, "duration_ms");
        addReplyLongLong(c, ms);
    }
    addReplyBulkCString(c, "engines");
    addReplyMapLen(c, 1);
    addReplyBulkCString(c, "LUA");
    addReplyMapLen(c, 2);
    addReplyBulkCString(c, "libraries_count");
    addReplyLongLong(c, fs->n);
    addReplyBulkCString(c, "functions_count");
    addReplyLongLong(c, nf);
}

static void functionHelp(client *c) {
    static const char *const help[] = {
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME "
        "argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using "
        "FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a "
        "restore "
        "policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, "
        "abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, "
        "replace "
        "the old",
        "      libraries with the new libraries (notice that even on this option there is a chance "
        "of "
        "failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    };
    addReplyHelpOf(c, help);
}

/* FUNCTION <subcommand>: arity and flags are commands.c's subcommand table's. */
void functionCommand(client *c) {
    static const struct {
        const char *name;
        int arity;
        void (*proc)(client *c);
    } subs[] = {
        {"load", -3, functionLoad},   {"list", -2, functionList}, {"delete", 3, functionDelete},
        {"flush", -2, functionFlush}, {"dump", 2, functionDump},  {"restore", -3, functionRestore},
        {"stats", 2, functionStats},  {"kill", 2, functionKill},  {"help", 2, functionHelp}};
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        if (!argEq(c, 1, subs[i].name)) continue;
        int ar = subs[i].arity;
        if ((ar > 0 && c->argc != ar) || (ar < 0 && c->argc < -ar)) {
            addReplySubcommandArity(c, "function");
            return;
        }
        subs[i].proc(c);
        return;
    }
    addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try FUNCTION HELP.", c->argv[1].ptr);
}

static void fcallGeneric(client *c, int ro) {
    ir_functions *fs = fset(c->srv);
    fnFunc *f = findFunc(fs, c->argv[1].ptr, c->argv[1].len, NULL);
    if (!f) {
        addReplyError(c, "Function not found");
        return;
    }
    long long numkeys;
    if (!string2ll(c->argv[2].ptr, c->argv[2].len, &numkeys)) {
        addReplyError(c, "Bad number of keys provided");
        return;
    }
    if (numkeys > c->argc - 3) {
        addReplyError(c, "Number of keys can't be greater than number of args");
        return;
    }
    if (numkeys < 0) {
        addReplyError(c, "Number of keys can't be negative");
        return;
    }
    scriptFnCall(c, f->ref, f->name, f->flags, ro, (int)numkeys);
}

void fcallCommand(client *c) { fcallGeneric(c, 0); }
void fcallRoCommand(client *c) { fcallGeneric(c, 1); }

void functionsFree(ir_server *s) {
    ir_functions *fs = s->functions;
    if (!fs) return;
    /* the Lua state goes with the scripting engine: only the C side here */
    for (int i = 0; i < fs->n; i++) {
        fnLib *l = fs->libs[i];
        for (int j = 0; j < l->nf; j++) {
            free(l->f[j].name);
            free(l->f[j].desc);
        }
        free(l->f);
        free(l->name);
        free(l->code);
        free(l);
    }
    free(fs->libs);
    free(fs);
    s->functions = NULL;
}

int functionsLibraryCode(const ir_server *s, size_t i, const char **code, size_t *len) {
    const ir_functions *fs = s->functions;
    if (!fs || i >= (size_t)fs->n) return 0;
    *code = fs->libs[i]->code;
    *len = fs->libs[i]->codelen;
    return 1;
}

void functionsInfo(const ir_server *s, uint64_t *nfuncs, uint64_t *nlibs) {
    const ir_functions *fs = s->functions;
    *nfuncs = *nlibs = 0;
    for (int i = 0; fs && i < fs->n; i++) {
        (*nlibs)++;
        *nfuncs += (uint64_t)fs->libs[i]->nf;
    }
}
