/* script.c - Lua scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT, as
 * Redis 7.0 runs them, on Redis's own Lua 5.1 (deps/lua of Debian's redis
 * source package, meson.build; or Debian's liblua5.1 with -Dlua=system).
 *
 * Each server has one Lua state (created at its first script) and one script
 * client: redis.call() hands its arguments to that client and runs the command
 * through call(), the server's normal dispatch, then turns the RESP reply the
 * command wrote into Lua values (Redis's conversion rules). A script runs to
 * its end before the server reads anything else, so it is atomic.
 *
 * The sandbox is Redis's: only the base, table, string and math libraries and
 * cjson, bit, cmsgpack and struct (on the system Lua: cjson and bit when
 * Debian's packages were found at build time); no os, io, loadfile, dofile,
 * print, setfenv, getfenv or newproxy. Scripts are Lua source only: a body or
 * chunk that starts with ESC (precompiled bytecode, which Lua 5.1 does not
 * verify, so a crafted one reads and writes any memory) is refused everywhere
 * one is compiled, and string.dump, which makes them, is gone. The globals table is
 * a read-only proxy: creating or changing a global is refused ("Attempt to
 * modify a readonly table"), reading one that does not exist is an error, and
 * the library tables (redis, string, math, ...) are read-only proxies too.
 * Stock Lua 5.1 has no read-only tables, so this is done with metatables;
 * pairs() over a library table therefore sees nothing.
 *
 * Busy scripts, as Redis: a count hook checks the clock every 100,000
 * instructions; past lua-time-limit (busy-reply-threshold) it polls the
 * transport from inside the script's command (transport.h, poll_reentrant)
 * so the other clients are served: BUSY to all but the allow_busy commands
 * (SCRIPT KILL, FUNCTION KILL, FUNCTION STATS, SHUTDOWN NOSAVE, MULTI ...).
 * The script's own client is protected meanwhile (no input read; freed only
 * after the script if it disconnects). A killed script raises at every line,
 * so pcall cannot keep it alive. On a transport that cannot poll re-entrantly
 * (lwIP on DPDK) a script that has not written is stopped at the limit
 * instead. Not done: SCRIPT DEBUG (the Lua debugger).
 */
#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

#include "acl.h"
#include "commands.h"
#include "debug.h"
#include "script.h"
#include "sha1.h"

#ifdef IR_HAVE_LUA_CJSON
int luaopen_cjson(lua_State *L);
#endif
#ifdef IR_HAVE_LUA_BITOP
int luaopen_bit(lua_State *L);
#endif
#ifdef IR_HAVE_LUA_CMSGPACK
int luaopen_cmsgpack(lua_State *L);
#endif
#ifdef IR_HAVE_LUA_STRUCT
int luaopen_struct(lua_State *L);
#endif

typedef struct ir_scripting {
    lua_State *L;
    lua_State *fL;         /* the functions' (FUNCTION LOAD), created at the first */
    client *fake;          /* runs the commands scripts call */
    client *caller;        /* the client whose script runs, NULL between scripts */
    int ro;                /* the running script may not write (EVAL_RO, no-writes) */
    int compat;            /* the running script has no shebang */
    int wrote;             /* the running script has run a write command */
    int oom_at_start;      /* used memory was over maxmemory when it started */
    int stopping;          /* the running script is over lua-time-limit: every line raises */
    int busy;              /* the running script is past lua-time-limit: others get BUSY */
    int kill;              /* SCRIPT KILL / FUNCTION KILL / SHUTDOWN NOSAVE asked to stop it */
    int is_eval;           /* the running script is EVAL's (not a function) */
    const char *name;      /* the running function's name (FUNCTION STATS) */
    struct timespec start; /* when the running script started */
    int64_t start_ms;      /* the same, wall clock: the script's commands' time */
    uint64_t nscripts;     /* in the cache */
    uint64_t body_bytes;   /* their bodies */
    uint64_t runs;         /* for the periodic GC step */
    ir_arg *argv;          /* redis.call's arguments (reused) */
    int argcap;
    char *abuf; /* their bytes, NUL after each */
    size_t acap;
    char *rbuf; /* a reply spread over several segments, joined */
    size_t rcap;
} ir_scripting;

static const char *const REG_CTX = "__ir_scripting";

long long scriptTimeLimitMs = 5000;
int scriptDisableDenyScript;

static void oom(void) {
    serverLog("out of memory in the Lua scripting engine");
    abort();
}

static ir_scripting *ctxOf(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, REG_CTX);
    ir_scripting *sc = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return sc;
}

/* ---- errors as Redis's scripts see them ------------------------------------
 * An error is a table {err = "CODE message"}: from "-CODE message" (a reply),
 * or from a plain message, which gets the code ERR. */
static void pushErrorTable(lua_State *L, const char *s, size_t len) {
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    if (len && s[0] == '-') {
        const char *sp = memchr(s, ' ', len);
        if (!sp) {
            luaL_addstring(&b, "ERR ");
            luaL_addlstring(&b, s + 1, len - 1);
        } else {
            luaL_addlstring(&b, s + 1, len - 1);
        }
    } else {
        luaL_addstring(&b, "ERR ");
        luaL_addlstring(&b, s, len);
    }
    luaL_pushresult(&b);
    /* no trailing newline in the table's message */
    size_t n;
    const char *m = lua_tolstring(L, -1, &n);
    size_t keep = n;
    while (keep && (m[keep - 1] == '\r' || m[keep - 1] == '\n')) keep--;
    if (keep != n) {
        lua_pushlstring(L, m, keep);
        lua_remove(L, -2);
    }
    lua_newtable(L);
    lua_insert(L, -2);
    lua_setfield(L, -2, "err");
}

static void pushError(lua_State *L, const char *msg) { pushErrorTable(L, msg, strlen(msg)); }

/* The pcall error handler: every error becomes a table {err=, source=, line=}
 * naming the script's line that raised it (the caller's line when a C
 * function such as redis.call or error raised it). */
static int errorHandler(lua_State *L) {
    if (!lua_istable(L, 1)) {
        const char *s = lua_tostring(L, 1);
        lua_pushfstring(L, "ERR %s", s ? s : "(error object is not a string)");
        lua_newtable(L);
        lua_insert(L, -2);
        lua_setfield(L, -2, "err");
        lua_replace(L, 1);
    }
    lua_Debug ar;
    int level = 1;
    if (lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar) && ar.what &&
        !strcmp(ar.what, "C"))
        level = 2;
    if (lua_getstack(L, level, &ar) && lua_getinfo(L, "Sl", &ar)) {
        lua_pushstring(L, ar.source);
        lua_setfield(L, 1, "source");
        lua_pushinteger(L, ar.currentline);
        lua_setfield(L, 1, "line");
    }
    lua_settop(L, 1);
    return 1;
}

/* ---- RESP -> Lua ------------------------------------------------------------ */

typedef struct {
    const char *p, *end;
} rparse;

static const char *lineEnd(rparse *r) {
    const char *e = r->p;
    while (e + 1 < r->end && !(e[0] == '\r' && e[1] == '\n')) e++;
    return e;
}

static long long lineNumber(rparse *r, const char *e) {
    long long v = 0;
    string2ll(r->p + 1, (size_t)(e - r->p - 1), &v);
    return v;
}

static void pushReply(lua_State *L, rparse *r);

static void pushAggregate(lua_State *L, rparse *r, long long n, const char *kind) {
    lua_newtable(L);
    if (kind) { /* {map = {...}} or {set = {...}} */
        lua_newtable(L);
        for (long long i = 0; i < n; i++) {
            pushReply(L, r);
            if (!strcmp(kind, "map")) pushReply(L, r);
            else lua_pushboolean(L, 1);
            lua_settable(L, -3);
        }
        lua_setfield(L, -2, kind);
        return;
    }
    for (long long i = 0; i < n; i++) {
        lua_pushnumber(L, (lua_Number)(i + 1));
        pushReply(L, r);
        lua_settable(L, -3);
    }
}

static void pushReply(lua_State *L, rparse *r) {
    if (!lua_checkstack(L, 5)) {
        serverLog("lua stack limit reached converting a reply");
        abort();
    }
    if (r->p >= r->end) {
        lua_pushboolean(L, 0);
        return;
    }
    const char *e = lineEnd(r);
    char t = r->p[0];
    switch (t) {
    case '+':
        lua_newtable(L);
        lua_pushlstring(L, r->p + 1, (size_t)(e - r->p - 1));
        lua_setfield(L, -2, "ok");
        r->p = e + 2;
        return;
    case '-':
        pushErrorTable(L, r->p, (size_t)(e - r->p));
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "ignore_error_stats_update");
        r->p = e + 2;
        return;
    case ':':
        lua_pushnumber(L, (lua_Number)lineNumber(r, e));
        r->p = e + 2;
        return;
    case '$':
    case '=': {
        long long n = lineNumber(r, e);
        r->p = e + 2;
        if (n < 0) {
            lua_pushboolean(L, 0);
            return;
        }
        if (t == '=' && n >= 4) { /* {verbatim_string = {format = "txt", string = ...}} */
            lua_newtable(L);
            lua_newtable(L);
            lua_pushlstring(L, r->p, 3);
            lua_setfield(L, -2, "format");
            lua_pushlstring(L, r->p + 4, (size_t)n - 4);
            lua_setfield(L, -2, "string");
            lua_setfield(L, -2, "verbatim_string");
        } else {
            lua_pushlstring(L, r->p, (size_t)n);
        }
        r->p += n + 2;
        return;
    }
    case '*':
    case '>':
    case '~':
    case '%': {
        long long n = lineNumber(r, e);
        r->p = e + 2;
        if (n < 0) {
            lua_pushboolean(L, 0);
            return;
        }
        pushAggregate(L, r, n, t == '%' ? "map" : t == '~' ? "set" : NULL);
        return;
    }
    case '_':
        lua_pushnil(L);
        r->p = e + 2;
        return;
    case '#':
        lua_pushboolean(L, r->p[1] == 't');
        r->p = e + 2;
        return;
    case ',': {
        double d = 0;
        char buf[128];
        size_t n = (size_t)(e - r->p - 1);
        if (n >= sizeof(buf)) n = sizeof(buf) - 1;
        memcpy(buf, r->p + 1, n);
        buf[n] = '\0';
        d = strtod(buf, NULL);
        lua_newtable(L);
        lua_pushnumber(L, d);
        lua_setfield(L, -2, "double");
        r->p = e + 2;
        return;
    }
    case '(':
        lua_newtable(L);
        lua_pushlstring(L, r->p + 1, (size_t)(e - r->p - 1));
        lua_setfield(L, -2, "big_number");
        r->p = e + 2;
        return;
    case '|': { /* attributes: skipped, the value follows */
        long long n = lineNumber(r, e);
        r->p = e + 2;
        for (long long i = 0; i < 2 * n; i++) {
            pushReply(L, r);
            lua_pop(L, 1);
        }
        pushReply(L, r);
        return;
    }
    default:
        lua_pushboolean(L, 0);
        r->p = r->end;
        return;
    }
}

/* ---- Lua -> RESP (the script's result, to the caller) ----------------------- */

static void replyStatusSafe(client *c, const char *s, size_t len) {
    char *d = addReplyReserve(c, len + 3);
    d[0] = '+';
    for (size_t i = 0; i < len; i++) d[1 + i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
    memcpy(d + 1 + len, "\r\n", 2);
}

/* The table's err message with a leading '-', as addReplyError takes it. */
static void replyErrorMessage(client *c, const char *msg, size_t len) {
    char *buf = malloc(len + 2);
    if (!buf) oom();
    buf[0] = '-';
    memcpy(buf + 1, msg, len);
    buf[len + 1] = '\0';
    addReplyError(c, buf);
    free(buf);
}

static void replyFromLua(client *c, ir_scripting *sc, lua_State *L) {
    if (!lua_checkstack(L, 4)) {
        addReplyError(c, "reached lua stack limit");
        lua_pop(L, 1);
        return;
    }
    int t = lua_type(L, -1);
    switch (t) {
    case LUA_TSTRING: {
        /* copied: a reference into a Lua string would outlive the script's
         * hold on it (the collector may free it before the reply is written) */
        size_t n;
        const char *s = lua_tolstring(L, -1, &n);
        char *d = addReplyBulkReserve(c, n);
        if (n) memcpy(d, s, n);
        break;
    }
    case LUA_TBOOLEAN:
        if (sc->fake->resp == 2) {
            if (lua_toboolean(L, -1)) addReplyLongLong(c, 1);
            else addReplyNull(c);
        } else {
            addReplyBool(c, lua_toboolean(L, -1));
        }
        break;
    case LUA_TNUMBER: addReplyLongLong(c, (long long)lua_tonumber(L, -1)); break;
    case LUA_TTABLE: {
        lua_pushstring(L, "err");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TSTRING) {
            size_t n;
            const char *m = lua_tolstring(L, -1, &n);
            lua_getfield(L, -2, "ignore_error_stats_update");
            int counted = lua_toboolean(L, -1);
            lua_pop(L, 1);
            replyErrorMessage(c, m, n);
            if (counted) c->srv->error_stats_skip = 1;
            lua_pop(L, 2);
            return;
        }
        lua_pop(L, 1);
        lua_pushstring(L, "ok");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TSTRING) {
            size_t n;
            const char *s = lua_tolstring(L, -1, &n);
            replyStatusSafe(c, s, n);
            lua_pop(L, 2);
            return;
        }
        lua_pop(L, 1);
        lua_pushstring(L, "double");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TNUMBER) {
            addReplyDouble(c, lua_tonumber(L, -1));
            lua_pop(L, 2);
            return;
        }
        lua_pop(L, 1);
        lua_pushstring(L, "big_number");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TSTRING) {
            size_t n;
            const char *s = lua_tolstring(L, -1, &n);
            char *d;
            if (c->resp >= 3) {
                char hdr[32];
                int hl = snprintf(hdr, sizeof(hdr), "(");
                addReplyProto(c, hdr, (size_t)hl);
                d = addReplyReserve(c, n + 2);
            } else {
                d = addReplyBulkReserve(c, n);
            }
            for (size_t i = 0; i < n; i++) d[i] = (s[i] == '\r' || s[i] == '\n') ? ' ' : s[i];
            if (c->resp >= 3) memcpy(d + n, "\r\n", 2);
            lua_pop(L, 2);
            return;
        }
        lua_pop(L, 1);
        lua_pushstring(L, "verbatim_string");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TTABLE) {
            lua_pushstring(L, "format");
            lua_rawget(L, -2);
            lua_pushstring(L, "string");
            lua_rawget(L, -3);
            if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TSTRING) {
                size_t n;
                const char *s = lua_tolstring(L, -1, &n);
                char fmt[4] = {0};
                size_t fl;
                const char *f = lua_tolstring(L, -2, &fl);
                memcpy(fmt, f, fl < 3 ? fl : 3);
                addReplyVerbatim(c, s, n, fmt);
                lua_pop(L, 4);
                return;
            }
            lua_pop(L, 2);
        }
        lua_pop(L, 1);
        lua_pushstring(L, "map");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TTABLE) {
            long n = 0;
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_pop(L, 1);
                n++;
            }
            addReplyMapLen(c, n);
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_pushvalue(L, -2);
                replyFromLua(c, sc, L); /* the key */
                replyFromLua(c, sc, L); /* the value */
            }
            lua_pop(L, 2);
            return;
        }
        lua_pop(L, 1);
        lua_pushstring(L, "set");
        lua_rawget(L, -2);
        if (lua_type(L, -1) == LUA_TTABLE) {
            long n = 0;
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_pop(L, 1);
                n++;
            }
            addReplySetLen(c, n);
            lua_pushnil(L);
            while (lua_next(L, -2)) {
                lua_pop(L, 1);
                lua_pushvalue(L, -1);
                replyFromLua(c, sc, L);
            }
            lua_pop(L, 2);
            return;
        }
        lua_pop(L, 1);
        /* an array: up to the first nil */
        long n = 0;
        for (;;) {
            lua_pushnumber(L, (lua_Number)(n + 1));
            lua_rawget(L, -2);
            int nil = lua_isnil(L, -1);
            lua_pop(L, 1);
            if (nil) break;
            n++;
        }
        addReplyArrayLen(c, n);
        for (long i = 1; i <= n; i++) {
            lua_pushnumber(L, (lua_Number)i);
            lua_rawget(L, -2);
            replyFromLua(c, sc, L);
        }
        break;
    }
    default: addReplyNull(c);
    }
    lua_pop(L, 1);
}

/* ---- redis.* --------------------------------------------------------------- */

static int hasFlagWord(const char *words, const char *w) {
    size_t wl = strlen(w);
    for (const char *p = words; p && *p;) {
        size_t n = strcspn(p, " ");
        if (n == wl && !strncmp(p, w, n)) return 1;
        p += n;
        p += strspn(p, " ");
    }
    return 0;
}

/* The reply the script client got, as one buffer. */
static const char *fakeReply(ir_scripting *sc, size_t *len) {
    client *f = sc->fake;
    if (f->nsegs == 1 && !f->segs[0].ref) {
        *len = f->segs[0].len;
        return f->obuf + f->segs[0].off;
    }
    size_t total = 0;
    for (int i = 0; i < f->nsegs; i++) total += f->segs[i].len;
    if (total + 1 > sc->rcap) {
        char *p = realloc(sc->rbuf, total + 1);
        if (!p) oom();
        sc->rbuf = p;
        sc->rcap = total + 1;
    }
    size_t off = 0;
    for (int i = 0; i < f->nsegs; i++) {
        const ir_seg *s = &f->segs[i];
        memcpy(sc->rbuf + off, s->ref ? s->ref : f->obuf + s->off, s->len);
        off += s->len;
    }
    *len = total;
    return sc->rbuf;
}

/* The arguments of redis.call/pcall/acl_check_cmd, strings or numbers written
 * as %.17g, into sc->argv (the Lua stack emptied): their number, or 0 with
 * the error pushed. */
static int scriptCallArgs(lua_State *L, ir_scripting *sc) {
    int argc = lua_gettop(L);
    if (argc == 0) {
        pushError(L, "Please specify at least one argument for this redis lib call");
        return 0;
    }
    /* the arguments: strings, or numbers written as %.17g */
    if (argc > sc->argcap) {
        ir_arg *a = realloc(sc->argv, (size_t)argc * sizeof(*a));
        if (!a) oom();
        sc->argv = a;
        sc->argcap = argc;
    }
    size_t need = 0;
    int bad = 0;
    for (int j = 1; j <= argc; j++) {
        int t = lua_type(L, j);
        if (t == LUA_TNUMBER) need += 64;
        else if (t == LUA_TSTRING) need += lua_objlen(L, j) + 1;
        else {
            bad = 1;
            break;
        }
    }
    if (bad) {
        lua_settop(L, 0);
        pushError(L, "Lua redis lib command arguments must be strings or integers");
        return 0;
    }
    if (need > sc->acap) {
        char *p = realloc(sc->abuf, need);
        if (!p) oom();
        sc->abuf = p;
        sc->acap = need;
    }
    size_t off = 0;
    for (int j = 1; j <= argc; j++) {
        ir_arg *a = &sc->argv[j - 1];
        a->ptr = sc->abuf + off;
        a->owned = 0;
        if (lua_type(L, j) == LUA_TNUMBER) {
            int n = snprintf(a->ptr, 64, "%.17g", (double)lua_tonumber(L, j));
            a->len = (size_t)n;
        } else {
            size_t n;
            const char *s = lua_tolstring(L, j, &n);
            memcpy(a->ptr, s, n);
            a->ptr[n] = '\0';
            a->len = n;
        }
        off += a->len + 1;
    }
    lua_settop(L, 0);

    return argc;
}

/* redis.call / redis.pcall: raise = 1 raises the error, 0 returns it. */
static int redisGenericCommand(lua_State *L, int raise) {
    ir_scripting *sc = ctxOf(L);
    if (!sc || !sc->caller) {
        pushError(L, "redis.call/pcall can only be called inside a script invocation");
        return lua_error(L);
    }
    int argc = scriptCallArgs(L, sc);
    if (argc <= 0) return raise ? lua_error(L) : 1;

    client *f = sc->fake;
    ir_server *s = f->srv;
    f->argc = argc;
    f->argv = sc->argv;
    const ir_command *cmd = lookupCommand(f->argv[0].ptr, f->argv[0].len);
    const char *err = NULL;
    const char *subflags = cmd ? commandSubFlags(cmd, f) : NULL;
    if (!cmd) err = "Unknown Redis command called from script";
    else if ((cmd->arity > 0 && cmd->arity != argc) || argc < -cmd->arity)
        err = "Wrong number of args calling Redis command from script";
    else if (!(scriptDisableDenyScript && cmd->proc == debugCommand) &&
             (hasFlagWord(cmd->sflags, "noscript") ||
              (subflags && hasFlagWord(subflags, "noscript"))))
        err = "This Redis command is not allowed from script";
    else if (sc->ro && ((cmd->flags & CMD_WRITE) || hasFlagWord(cmd->sflags, "may_replicate")))
        err = "Write commands are not allowed from read-only scripts.";
    else if (s->cfg.maxmemory && !sc->wrote && sc->oom_at_start && (cmd->flags & CMD_DENYOOM))
        err = "-OOM " IR_OOM_MSG;
    int acl_pos, acl_r;
    if (!err && cmd && (acl_r = aclCheck(f, cmd, ACL_CTX_LUA, &acl_pos)) != ACL_OK)
        err = aclScriptDeniedMessage(acl_r);
    if (err) {
        /* counted here, as Redis counts a command a script could not run; the
         * script's own error reply is then not counted again */
        const char *e = err[0] == '-' ? err + 1 : err;
        if (err[0] == '-') {
            errorStatsCount(s, e, strlen(e));
        } else {
            char buf[128];
            int n = snprintf(buf, sizeof(buf), "ERR %s", e);
            errorStatsCount(s, buf, (size_t)n);
        }
        if (cmd) {
            f->lastsub = commandSubName(cmd, f);
            commandStatsRejected(f, cmd);
        }
        f->argc = 0;
        f->argv = NULL;
        pushError(L, err);
        lua_pushboolean(L, 1);
        lua_setfield(L, -2, "ignore_error_stats_update");
        return raise ? lua_error(L) : 1;
    }
    if (cmd->flags & CMD_WRITE) sc->wrote = 1;
    f->lastcmd = cmd;
    call(f, cmd);
    f->cmd = NULL;
    f->argc = 0;
    f->argv = NULL;
    size_t len;
    const char *reply = fakeReply(sc, &len);
    rparse r = {reply, reply + len};
    int is_err = len && reply[0] == '-';
    pushReply(L, &r);
    clientDiscardReply(f);
    if (raise && is_err) return lua_error(L);
    return 1;
}

static int luaRedisCall(lua_State *L) { return redisGenericCommand(L, 1); }

/* redis.acl_check_cmd(command, arg, ...): may the script's user run it? */
static int luaAclCheckCmd(lua_State *L) {
    ir_scripting *sc = ctxOf(L);
    if (!sc || !sc->caller) {
        pushError(L, "redis.acl_check_cmd can only be called inside a script invocation");
        return lua_error(L);
    }
    int argc = scriptCallArgs(L, sc);
    if (argc <= 0) return lua_error(L);
    const ir_command *cmd = lookupCommand(sc->argv[0].ptr, sc->argv[0].len);
    if (!cmd || (cmd->arity > 0 && cmd->arity != argc) || argc < -cmd->arity) {
        pushError(L, "Invalid command passed to redis.acl_check_cmd()");
        return lua_error(L);
    }
    client *f = sc->fake;
    f->argc = argc;
    f->argv = sc->argv;
    int pos;
    int ok = aclPermits(f, cmd, &pos) == ACL_OK;
    f->argc = 0;
    f->argv = NULL;
    lua_pushboolean(L, ok);
    return 1;
}
static int luaRedisPCall(lua_State *L) { return redisGenericCommand(L, 0); }

/* pcall as Redis replaces it: an error table caught comes back as its message. */
static int luaPcall(lua_State *L) {
    int argc = lua_gettop(L);
    luaL_checkany(L, 1);
    lua_pushboolean(L, 1);
    lua_insert(L, 1);
    if (lua_pcall(L, argc - 1, LUA_MULTRET, 0)) {
        lua_remove(L, 1);
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "err");
            if (lua_isstring(L, -1)) lua_replace(L, -2);
            else lua_pop(L, 1);
        }
        lua_pushboolean(L, 0);
        lua_insert(L, 1);
    }
    return lua_gettop(L);
}

static int luaSha1hex(lua_State *L) {
    if (lua_gettop(L) != 1) {
        pushError(L, "wrong number of arguments");
        return lua_error(L);
    }
    size_t len = 0;
    const char *s = lua_tolstring(L, 1, &len);
    char hex[41];
    ir_sha1hex(hex, s ? s : "", s ? len : 0);
    lua_pushstring(L, hex);
    return 1;
}

static int luaErrorReply(lua_State *L) {
    if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
        pushError(L, "wrong number or type of arguments");
        return 1;
    }
    size_t n;
    const char *e = lua_tolstring(L, -1, &n);
    if (n && e[0] == '-') {
        pushErrorTable(L, e, n);
    } else {
        lua_pushfstring(L, "-%s", e);
        size_t m;
        const char *d = lua_tolstring(L, -1, &m);
        pushErrorTable(L, d, m);
        lua_remove(L, -2);
    }
    return 1;
}

static int luaStatusReply(lua_State *L) {
    if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
        pushError(L, "wrong number or type of arguments");
        return 1;
    }
    lua_newtable(L);
    lua_pushvalue(L, -2);
    lua_setfield(L, -2, "ok");
    return 1;
}

#define LL_DEBUG 0
#define LL_VERBOSE 1
#define LL_NOTICE 2
#define LL_WARNING 3

static int luaLog(lua_State *L) {
    int argc = lua_gettop(L);
    if (argc < 2) {
        pushError(L, "redis.log() requires two arguments or more.");
        return lua_error(L);
    }
    if (!lua_isnumber(L, 1)) {
        pushError(L, "First argument must be a number (log level).");
        return lua_error(L);
    }
    int level = (int)lua_tonumber(L, 1);
    if (level < LL_DEBUG || level > LL_WARNING) {
        pushError(L, "Invalid debug level.");
        return lua_error(L);
    }
    ir_scripting *sc = ctxOf(L);
    int verbose = sc && sc->fake && sc->fake->srv->cfg.verbose;
    if (level < (verbose ? LL_VERBOSE : LL_NOTICE)) return 0;
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    int first = 1;
    for (int j = 2; j <= argc; j++) {
        size_t n;
        const char *s = lua_tolstring(L, j, &n);
        if (!s) continue;
        if (!first) luaL_addchar(&b, ' ');
        luaL_addlstring(&b, s, n);
        first = 0;
    }
    luaL_pushresult(&b);
    serverLog("%s", lua_tostring(L, -1));
    return 0;
}

static int luaSetResp(lua_State *L) {
    ir_scripting *sc = ctxOf(L);
    if (!sc || !sc->caller) {
        pushError(L, "redis.setresp can only be called inside a script invocation");
        return lua_error(L);
    }
    if (lua_gettop(L) != 1) {
        pushError(L, "redis.setresp() requires one argument.");
        return lua_error(L);
    }
    int resp = (int)lua_tonumber(L, 1);
    if (resp != 2 && resp != 3) {
        pushError(L, "RESP version must be 2 or 3.");
        return lua_error(L);
    }
    sc->fake->resp = resp;
    return 0;
}

/* redis.set_repl: scripts' writes are always replicated one by one (as
 * Redis 7 does by default); the call is checked, as Redis checks it. */
static int luaSetRepl(lua_State *L) {
    ir_scripting *sc = ctxOf(L);
    if (!sc || !sc->caller) {
        pushError(L, "redis.set_repl can only be called inside a script invocation");
        return lua_error(L);
    }
    if (lua_gettop(L) != 1) {
        pushError(L, "redis.set_repl() requires two arguments.");
        return lua_error(L);
    }
    int flags = (int)lua_tonumber(L, 1);
    if (flags & ~3) {
        pushError(L,
                  "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.");
        return lua_error(L);
    }
    return 0;
}

static int luaReplicateCommands(lua_State *L) {
    lua_pushboolean(L, 1);
    return 1;
}

static int luaBreakpoint(lua_State *L) {
    lua_pushboolean(L, 0); /* no debugging session */
    return 1;
}

static int luaDebugNoop(lua_State *L) { return 0; }

/* ---- lua-time-limit ---------------------------------------------------------- */

static long long runningMs(const ir_scripting *sc) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (long long)(now.tv_sec - sc->start.tv_sec) * 1000 +
           (now.tv_nsec - sc->start.tv_nsec) / 1000000;
}

/* Every 100,000 instructions: past lua-time-limit, serve the other clients
 * (a nested poll, when the transport allows it) until the script ends or is
 * killed; where it does not, stop a script that has not written (no other
 * client could ever stop it). */
static void timeHook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    ir_scripting *sc = ctxOf(L);
    if (!sc || !sc->caller) return;
    client *c = sc->caller;
    /* the network stack decides whether others can be served meanwhile */
    ir_transport *t = c->srv->tp;
    if (!sc->kill && !sc->busy) {
        long long ms = runningMs(sc);
        if (scriptTimeLimitMs <= 0 || ms < scriptTimeLimitMs) return;
        if (!t || !t->poll_reentrant) {
            if (sc->wrote) return;
            if (!sc->stopping) {
                sc->stopping = 1;
                serverLog("Lua script stopped after %lld ms (lua-time-limit %lld ms)", ms,
                          scriptTimeLimitMs);
                lua_sethook(L, timeHook, LUA_MASKLINE, 0); /* raise again at every line */
            }
            char msg[256];
            snprintf(
                msg, sizeof(msg),
                "Script stopped: it ran longer than lua-time-limit (%lld ms) without writing, and "
                "this network stack cannot serve other clients while a script runs; raise "
                "lua-time-limit or shorten the script",
                scriptTimeLimitMs);
            pushError(L, msg);
            lua_error(L);
            return;
        }
        serverLog("Slow script detected: still in execution after %lld milliseconds. You can try "
                  "killing the script using the %s command. Script name is: %s.",
                  ms, sc->is_eval ? "SCRIPT KILL" : "FUNCTION KILL", sc->name);
        sc->busy = 1;
        c->flags |= CLIENT_PROTECTED; /* no input from it; not freed if it goes */
        if (!(c->flags & CLIENT_CLOSED)) c->tp->ops->want_readable(c->tp, c->conn, 0);
    }
    if (!sc->kill) {
        t->ops->poll(t, 0);
        if (c->srv->local) c->srv->local->ops->poll(c->srv->local, 0);
        if (c->srv->shutdown_asap) sc->kill = 1; /* SHUTDOWN NOSAVE: it ends now, written or not */
        if (!sc->kill) return;
    }
    if (c->srv->shutdown_asap) serverLog("Lua script stopped: the server shuts down.");
    else serverLog("Lua script killed by user with SCRIPT KILL.");
    lua_sethook(L, timeHook, LUA_MASKLINE, 0); /* every line: pcall cannot keep it running */
    pushError(L, "Script killed by user with SCRIPT KILL...");
    lua_error(L);
}

int scriptBusy(const ir_server *s) { return s->scripting && s->scripting->busy; }
int scriptBusyIsEval(const ir_server *s) { return s->scripting && s->scripting->is_eval; }

const char *scriptBusyText(int is_eval) {
    return is_eval ? "BUSY Redis is busy running a script. You can only call SCRIPT KILL or "
                     "SHUTDOWN NOSAVE."
                   : "BUSY Redis is busy running a script. You can only call FUNCTION KILL or "
                     "SHUTDOWN NOSAVE.";
}

void addReplyBusyScript(client *c, int is_eval) {
    addReplyErrorFormat(c, "-%s", scriptBusyText(is_eval));
}

/* SCRIPT KILL (is_eval) and FUNCTION KILL */
static void scriptKill(client *c, int is_eval) {
    ir_scripting *sc = c->srv->scripting;
    if (!sc || !sc->busy) {
        addReplyError(c, "-NOTBUSY No scripts in execution right now.");
    } else if (sc->wrote) {
        addReplyError(c,
                      "-UNKILLABLE Sorry the script already executed write commands against the "
                      "dataset. You can either wait the script termination or kill the server in a "
                      "hard way using the SHUTDOWN NOSAVE command.");
    } else if (is_eval != sc->is_eval) { /* SCRIPT KILL of a function, FUNCTION KILL of an EVAL */
        addReplyBusyScript(c, sc->is_eval);
    } else {
        sc->kill = 1;
        addReplyStatus(c, "OK");
    }
}

void functionKill(client *c) { scriptKill(c, 0); }

int scriptRunningFunction(const ir_server *s, const char **name, const client **caller,
                          long long *ms) {
    const ir_scripting *sc = s->scripting;
    if (!sc || !sc->busy) return 0;
    *name = sc->name;
    *caller = sc->caller;
    *ms = runningMs(sc);
    return 1;
}

/* ---- the sandbox ------------------------------------------------------------ */

/* level 1: the script's line (an assignment, through __newindex); 0: none
 * (rawset, a C function, as Redis's Lua reports it). */
static int readonlyErrorAt(lua_State *L, int level) {
    luaL_where(L, level);
    lua_pushstring(L, "Attempt to modify a readonly table");
    lua_concat(L, 2);
    return lua_error(L);
}

static int readonlyError(lua_State *L) { return readonlyErrorAt(L, 1); }

static int nonexistentGlobal(lua_State *L) {
    const char *name = lua_tostring(L, 2);
    return luaL_error(L, "Script attempted to access nonexistent global variable '%s'",
                      name ? name : "?");
}

/* Proxies: the read-only tables, by identity (weak keys). */
static const char *const REG_RO = "__ir_readonly";

static void markReadonly(lua_State *L, int idx) {
    lua_getfield(L, LUA_REGISTRYINDEX, REG_RO);
    lua_pushvalue(L, idx);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

/* What getmetatable() shows of a proxy: its __index is the proxy itself (the
 * upvalue), never the real table behind it, and it cannot be written. */
static int roMetaIndex(lua_State *L) {
    const char *k = lua_tostring(L, 2);
    if (k && !strcmp(k, "__index")) lua_pushvalue(L, lua_upvalueindex(1));
    else if (k && !strcmp(k, "__newindex")) lua_pushcfunction(L, readonlyError);
    else lua_pushnil(L);
    return 1;
}

/* Replace the table at the top of the stack by a read-only proxy of it. With
 * shown_meta, getmetatable(proxy) answers a read-only stand-in for the proxy's
 * metatable (so `getmetatable(_G).__index = ...` is refused, and reading its
 * __index gives the proxy, not the real table: the real one was reachable that
 * way); without, getmetatable answers false. */
static void makeReadonlyDepth(lua_State *L, int shown_meta) {
    int t = lua_gettop(L);
    lua_newtable(L); /* t+1: the proxy */
    lua_newtable(L); /* t+2: its metatable */
    lua_pushvalue(L, t);
    lua_setfield(L, t + 2, "__index");
    lua_pushcfunction(L, readonlyError);
    lua_setfield(L, t + 2, "__newindex");
    if (shown_meta) {
        lua_newtable(L); /* t+3: the stand-in */
        lua_newtable(L); /* t+4: the stand-in's metatable */
        lua_pushvalue(L, t + 1);
        lua_pushcclosure(L, roMetaIndex, 1);
        lua_setfield(L, t + 4, "__index");
        lua_pushcfunction(L, readonlyError);
        lua_setfield(L, t + 4, "__newindex");
        lua_pushboolean(L, 0);
        lua_setfield(L, t + 4, "__metatable");
        lua_setmetatable(L, t + 3);
        markReadonly(L, t + 3);
    } else {
        lua_pushboolean(L, 0);
    }
    lua_setfield(L, t + 2, "__metatable");
    lua_setmetatable(L, t + 1);
    markReadonly(L, t + 1);
    lua_remove(L, t);
}

static void makeReadonly(lua_State *L) { makeReadonlyDepth(L, 1); }

static int isReadonly(lua_State *L, int idx) {
    lua_getfield(L, LUA_REGISTRYINDEX, REG_RO);
    lua_pushvalue(L, idx);
    lua_rawget(L, -2);
    int ro = lua_toboolean(L, -1);
    lua_pop(L, 2);
    return ro;
}

/* setmetatable that refuses the read-only proxies (as Redis's read-only tables). */
static int luaSetmetatable(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    if (isReadonly(L, 1)) return readonlyErrorAt(L, 0);
    int t = lua_type(L, 2);
    luaL_argcheck(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table expected");
    if (luaL_getmetafield(L, 1, "__metatable"))
        return luaL_error(L, "cannot change a protected metatable");
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* Precompiled chunks: Lua 5.1 does not verify bytecode, so a crafted one reads
 * and writes any memory. Redis's Lua has no loader for them (its f_parser
 * parses every chunk as source, so ESC is a syntax error); Debian's liblua5.1
 * loads them, so on it the server refuses them itself, in the words Redis's
 * parser uses where a script body is compiled. */
#ifdef IR_LUA_REDIS
static int refuseBinary(lua_State *L, const char *s, size_t len) {
    (void)L, (void)s, (void)len;
    return 0; /* the parser says no */
}
#else
static int refuseBinary(lua_State *L, const char *s, size_t len) {
    if (len && s[0] == LUA_SIGNATURE[0]) {
        lua_pushnil(L);
        lua_pushliteral(L, "binary chunks are not loaded");
        return 2;
    }
    return 0;
}
#endif
#define BYTECODE_NEAR "unexpected symbol near 'char(27)'"

static int loadResult(lua_State *L, int status) {
    if (status == 0) return 1;
    lua_pushnil(L);
    lua_insert(L, -2);
    return 2;
}

static int luaLoadstring(lua_State *L) {
    size_t len;
    const char *s = luaL_checklstring(L, 1, &len);
    const char *name = luaL_optstring(L, 2, s);
    int r = refuseBinary(L, s, len);
    if (r) return r;
    return loadResult(L, luaL_loadbuffer(L, s, len, name));
}

static int luaLoad(lua_State *L) {
    luaL_checktype(L, 1, LUA_TFUNCTION);
    const char *name = luaL_optstring(L, 2, "=(load)");
    lua_settop(L, 2);
    lua_pushliteral(L, ""); /* 3: the chunk so far */
    for (;;) {
        lua_pushvalue(L, 1);
        lua_call(L, 0, 1);
        if (lua_isnil(L, -1)) {
            lua_pop(L, 1);
            break;
        }
        if (!lua_isstring(L, -1)) return luaL_error(L, "reader function must return a string");
        if (lua_objlen(L, -1) == 0) {
            lua_pop(L, 1);
            break;
        }
        lua_concat(L, 2);
    }
    size_t len;
    const char *s = lua_tolstring(L, 3, &len);
    int r = refuseBinary(L, s, len);
    if (r) return r;
    return loadResult(L, luaL_loadbuffer(L, s, len, name));
}

/* unpack without stock Lua 5.1's overflow: e - i + 1 wraps for ranges like
 * (-2, 2^31-1) and the loop then writes past the stack (Redis patches its
 * bundled Lua the same way: "too many results to unpack"). */
static int luaUnpack(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    int i = luaL_optint(L, 2, 1);
    int e = luaL_opt(L, luaL_checkint, 3, luaL_getn(L, 1));
    if (i > e) return 0;
    long long n = (long long)e - (long long)i + 1;
    if (n >= INT_MAX || !lua_checkstack(L, (int)n))
        return luaL_error(L, "too many results to unpack");
    for (long long k = 0; k < n; k++) lua_rawgeti(L, 1, (int)(i + k));
    return (int)n;
}

#ifdef IR_HAVE_LUA_BITOP
/* bit.tohex with Debian's lua-bitop 1.0.2 negates its digit count, so
 * tohex(x, -2^31) overflows a stack buffer (CVE-2024-31449, which Redis fixed in
 * its copy): the count is normalized as bitop reads it and INT32_MIN is taken
 * as INT32_MIN + 1 (uppercase, clamped to 8 digits), as Redis's fix does. */
static int luaBitTohex(lua_State *L) {
    if (lua_gettop(L) >= 2 && lua_isnumber(L, 2)) {
        union {
            lua_Number n;
            uint64_t b;
        } u;
        u.n = lua_tonumber(L, 2) + 6755399441055744.0; /* bitop's 2^52 + 2^51 trick */
        int32_t n = (int32_t)(uint32_t)u.b;
        if (n == INT32_MIN) n = INT32_MIN + 1;
        lua_pushnumber(L, n);
        lua_replace(L, 2);
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}
#endif

/* rawset that refuses the read-only proxies. */
static int luaRawset(lua_State *L) {
    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    luaL_checkany(L, 3);
    if (isReadonly(L, 1)) return readonlyErrorAt(L, 0);
    lua_settop(L, 3);
    lua_rawset(L, 1);
    return 1;
}

/* Open a library; a module that only returns its table (Debian's cjson) is
 * made the global `name` too, as Redis's bundled one sets it. */
static void loadLib(lua_State *L, const char *name, lua_CFunction open) {
    lua_pushcfunction(L, open);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    if (name[0] && lua_istable(L, -1)) {
        lua_getglobal(L, name);
        int missing = lua_isnil(L, -1);
        lua_pop(L, 1);
        if (missing) lua_setglobal(L, name);
    }
    lua_settop(L, 0);
}

static void setFn(lua_State *L, const char *name, lua_CFunction f) {
    lua_pushcfunction(L, f);
    lua_setfield(L, -2, name);
}

static void setNum(lua_State *L, const char *name, int v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, name);
}

static lua_State *newState(ir_scripting *sc) {
    lua_State *L = luaL_newstate();
    if (!L) oom();
    loadLib(L, "", luaopen_base);
    loadLib(L, LUA_TABLIBNAME, luaopen_table);
    loadLib(L, LUA_STRLIBNAME, luaopen_string);
    loadLib(L, LUA_MATHLIBNAME, luaopen_math);
#ifdef IR_HAVE_LUA_CJSON
    loadLib(L, "cjson", luaopen_cjson);
#endif
#ifdef IR_HAVE_LUA_BITOP
    loadLib(L, "bit", luaopen_bit);
#endif
#ifdef IR_HAVE_LUA_CMSGPACK
    loadLib(L, "cmsgpack", luaopen_cmsgpack);
#endif
#ifdef IR_HAVE_LUA_STRUCT
    loadLib(L, "struct", luaopen_struct);
#endif
    lua_getglobal(L, "string"); /* no bytecode out either */
    lua_pushnil(L);
    lua_setfield(L, -2, "dump");
    lua_settop(L, 0);
    lua_pushlightuserdata(L, sc);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_CTX);
    lua_newtable(L);
    lua_newtable(L);
    lua_pushstring(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_RO);

    /* what Redis removes from the globals */
    static const char *const removed[] = {"dofile",  "loadfile", "print",  "setfenv",
                                          "getfenv", "newproxy", "module", "require"};
    for (size_t i = 0; i < sizeof(removed) / sizeof(removed[0]); i++) {
        lua_pushnil(L);
        lua_setglobal(L, removed[i]);
    }
    lua_pushcfunction(L, luaPcall);
    lua_setglobal(L, "pcall");
    lua_pushcfunction(L, luaRawset);
    lua_setglobal(L, "rawset");
    lua_pushcfunction(L, luaUnpack);
    lua_setglobal(L, "unpack");
    lua_pushcfunction(L, luaSetmetatable);
    lua_setglobal(L, "setmetatable");
    lua_pushcfunction(L, luaLoadstring);
    lua_setglobal(L, "loadstring");
    lua_pushcfunction(L, luaLoad);
    lua_setglobal(L, "load");

    lua_newtable(L); /* redis */
    setFn(L, "call", luaRedisCall);
    setFn(L, "pcall", luaRedisPCall);
    setFn(L, "log", luaLog);
    setNum(L, "LOG_DEBUG", LL_DEBUG);
    setNum(L, "LOG_VERBOSE", LL_VERBOSE);
    setNum(L, "LOG_NOTICE", LL_NOTICE);
    setNum(L, "LOG_WARNING", LL_WARNING);
    setFn(L, "setresp", luaSetResp);
    setFn(L, "sha1hex", luaSha1hex);
    setFn(L, "acl_check_cmd", luaAclCheckCmd);
    setFn(L, "error_reply", luaErrorReply);
    setFn(L, "status_reply", luaStatusReply);
    setFn(L, "set_repl", luaSetRepl);
    setNum(L, "REPL_NONE", 0);
    setNum(L, "REPL_AOF", 1);
    setNum(L, "REPL_SLAVE", 2);
    setNum(L, "REPL_REPLICA", 2);
    setNum(L, "REPL_ALL", 3);
    setFn(L, "replicate_commands", luaReplicateCommands);
    setFn(L, "breakpoint", luaBreakpoint);
    setFn(L, "debug", luaDebugNoop);
    lua_pushstring(L, IR_REDIS_VERSION);
    lua_setfield(L, -2, "REDIS_VERSION");
    lua_pushnumber(L, 0x07000f); /* 7.0.15 */
    lua_setfield(L, -2, "REDIS_VERSION_NUM");
    lua_setglobal(L, "redis");

#ifdef IR_HAVE_LUA_BITOP
    lua_getglobal(L, "bit");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "tohex");
        lua_pushcclosure(L, luaBitTohex, 1);
        lua_setfield(L, -2, "tohex");
    }
    lua_pop(L, 1);
#endif
    /* the library tables become read-only proxies */
    static const char *const libs[] = {"redis", "string", "math",     "table", "coroutine",
                                       "cjson", "bit",    "cmsgpack", "struct"};
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
        lua_getglobal(L, libs[i]);
        if (lua_istable(L, -1)) {
            makeReadonly(L);
            lua_setglobal(L, libs[i]);
        } else {
            lua_pop(L, 1);
        }
    }
    /* the string metatable (the only basic type with one) is read-only too, and
     * its __index is the read-only string library, not the real one */
    lua_pushliteral(L, "");
    if (lua_getmetatable(L, -1)) {
        lua_getglobal(L, "string");
        lua_setfield(L, -2, "__index");
        lua_pushvalue(L, -1);
        makeReadonlyDepth(L, 0);
        lua_setfield(L, -2, "__metatable");
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    /* reading a global that does not exist is an error */
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    lua_newtable(L);
    lua_pushcfunction(L, nonexistentGlobal);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
    /* and the globals scripts see are a read-only proxy of them */
    makeReadonly(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_GLOBALSINDEX, "_G"); /* raw: the real table has no __newindex */
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    lua_setfield(L, LUA_REGISTRYINDEX, "__ir_globals");
    lua_replace(L, LUA_GLOBALSINDEX);
    lua_settop(L, 0);
    return L;
}

/* ---- the cache and the engine ---------------------------------------------- */

static ir_scripting *scripting(ir_server *s) {
    if (s->scripting) return s->scripting;
    ir_scripting *sc = calloc(1, sizeof(*sc));
    client *f = calloc(1, sizeof(*f));
    if (!sc || !f) oom();
    f->srv = s;
    f->resp = 2;
    aclInitClient(f);
    f->authenticated = 1;
    f->bulklen = -1;
    f->flags = CLIENT_SCRIPT;
    f->id = UINT64_MAX; /* never a connection's id */
    snprintf(f->addr, sizeof(f->addr), "lua");
    snprintf(f->laddr, sizeof(f->laddr), "lua");
    sc->fake = f;
    sc->L = newState(sc);
    s->scripting = sc;
    return sc;
}

int64_t scriptStartMs(const ir_server *s) {
    return s->scripting && s->scripting->caller ? s->scripting->start_ms : 0;
}

/* A full collection before lua_close, as Redis does since CVE-2024-46981: a
 * finalizer that runs while the state is being torn down can otherwise reach
 * freed objects. */
static void closeState(lua_State *L) {
    lua_gc(L, LUA_GCCOLLECT, 0);
    lua_close(L);
}

void scriptingFree(ir_server *s) {
    ir_scripting *sc = s->scripting;
    if (!sc) return;
    closeState(sc->L);
    if (sc->fL) closeState(sc->fL);
    clientDiscardReply(sc->fake);
    free(sc->fake->obuf);
    free(sc->fake->segs);
    free(sc->fake);
    free(sc->argv);
    free(sc->abuf);
    free(sc->rbuf);
    free(sc);
    s->scripting = NULL;
}

void scriptingInfo(const ir_server *s, uint64_t *lua_bytes, uint64_t *nscripts,
                   uint64_t *script_bytes) {
    const ir_scripting *sc = s->scripting;
    /* no engine until the first script: nothing */
    *lua_bytes = sc ? (uint64_t)lua_gc(sc->L, LUA_GCCOUNT, 0) * 1024u +
                          (uint64_t)lua_gc(sc->L, LUA_GCCOUNTB, 0)
                    : 0;
    *nscripts = sc ? sc->nscripts : 0;
    *script_bytes = sc ? sc->body_bytes : 0;
}

static int shebangFlag(const char *f, size_t n) {
    static const struct {
        const char *name;
        int bit;
    } known[] = {{"no-writes", SF_NO_WRITES},
                 {"allow-oom", SF_ALLOW_OOM},
                 {"allow-stale", SF_ALLOW_STALE},
                 {"no-cluster", SF_NO_CLUSTER},
                 {"allow-cross-slot-keys", SF_ALLOW_CROSS_SLOT}};
    for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
        if (strlen(known[i].name) == n && !memcmp(known[i].name, f, n)) return known[i].bit;
    return 0;
}

/* Parse a shebang line ("#!lua flags=no-writes,allow-oom"): its flags and
 * length (the newline stays, so line numbers do not move). -1 after replying
 * the error, in Redis's words. */
static int shebang(client *c, const char *body, size_t len, int *flags, size_t *skip) {
    *flags = SF_EVAL_COMPAT;
    *skip = 0;
    if (len < 2 || body[0] != '#' || body[1] != '!') return 0;
    const char *nl = memchr(body, '\n', len);
    if (!nl) {
        addReplyError(c, "Invalid script shebang");
        return -1;
    }
    *skip = (size_t)(nl - body);
    *flags = 0;
    const char *p = body, *end = nl;
    for (int part = 0;; part++) {
        while (p < end && isspace((unsigned char)*p)) p++;
        if (p == end) break;
        const char *w = p;
        while (p < end && !isspace((unsigned char)*p)) p++;
        int wl = (int)(p - w);
        if (part == 0) {
            if (wl != 5 || memcmp(w, "#!lua", 5)) {
                addReplyErrorFormat(c, "Unexpected engine in script shebang: %.*s", wl, w);
                return -1;
            }
        } else if (wl >= 6 && !memcmp(w, "flags=", 6)) {
            const char *f = w + 6;
            while (f < p) { /* comma-separated; an empty one is unknown */
                const char *e = memchr(f, ',', (size_t)(p - f));
                if (!e) e = p;
                int bit = shebangFlag(f, (size_t)(e - f));
                if (!bit) {
                    addReplyErrorFormat(c, "Unexpected flag in script shebang: %.*s", (int)(e - f),
                                        f);
                    return -1;
                }
                *flags |= bit;
                f = e < p ? e + 1 : p;
                if (e < p && f == p) { /* a trailing comma: an empty flag */
                    addReplyError(c, "Unexpected flag in script shebang: ");
                    return -1;
                }
            }
        } else {
            addReplyErrorFormat(c, "Unknown lua shebang option: %.*s", wl, w);
            return -1;
        }
    }
    return 0;
}

/* Compile body into the cache (if not there yet) and write its SHA1 to sha.
 * -1 after replying the error. */
static int createFunction(client *c, ir_scripting *sc, const char *body, size_t len, char sha[41]) {
    lua_State *L = sc->L;
    char name[43] = "f_";
    ir_sha1hex(name + 2, body, len);
    memcpy(sha, name + 2, 41);
    lua_getfield(L, LUA_REGISTRYINDEX, name);
    int have = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (have) return 0;
    int flags;
    size_t skip;
    if (shebang(c, body, len, &flags, &skip) != 0) return -1;
    if (refuseBinary(L, body + skip, len - skip)) {
        lua_pop(L, 2);
        addReplyError(c, "Error compiling script (new function): user_script:1: " BYTECODE_NEAR);
        return -1;
    }
    if (luaL_loadbuffer(L, body + skip, len - skip, "@user_script")) {
        const char *m = lua_tostring(L, -1);
        addReplyErrorFormat(c, "Error compiling script (new function): %s", m ? m : "?");
        lua_pop(L, 1);
        return -1;
    }
    lua_setfield(L, LUA_REGISTRYINDEX, name);
    name[0] = 's'; /* s_<sha>: its shebang flags */
    lua_pushnumber(L, flags);
    lua_setfield(L, LUA_REGISTRYINDEX, name);
    sc->nscripts++;
    sc->body_bytes += len;
    return 0;
}

static void setArray(lua_State *L, const char *name, const ir_arg *a, int n) {
    lua_getfield(L, LUA_REGISTRYINDEX, "__ir_globals");
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushlstring(L, a[i].ptr, a[i].len);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, name); /* the real globals: no metamethod for existing or new keys */
    lua_pop(L, 1);
}

/* Run the function on L's stack for c: below it the error handler, above it
 * nargs arguments; its reply (or error, naming the script `errname`) goes to
 * c. Pops all of them. The script's flags (SF_*) decide what it may do. */
static void runScript(client *c, ir_scripting *sc, lua_State *L, int flags, int ro,
                      const char *errname, int nargs) {
    ir_server *s = c->srv;
    int oom_now = s->cfg.maxmemory && serverUsedMemory(s) > s->cfg.maxmemory;
    if (!(flags & SF_EVAL_COMPAT)) {
        if (!(flags & SF_NO_WRITES) && ro) {
            lua_pop(L, 2 + nargs);
            addReplyError(c, "Can not execute a script with write flag using *_ro command.");
            return;
        }
        if (oom_now && !(flags & (SF_ALLOW_OOM | SF_NO_WRITES))) {
            lua_pop(L, 2 + nargs);
            addReplyError(c, "-OOM allow-oom flag is not set on the script, "
                             "can not run it when used memory > 'maxmemory'");
            return;
        }
    }
    client *f = sc->fake;
    sc->caller = c;
    sc->is_eval = L == sc->L;
    sc->name = errname;
    sc->busy = sc->kill = 0;
    sc->ro = ro || (!(flags & SF_EVAL_COMPAT) && (flags & SF_NO_WRITES));
    sc->compat = !!(flags & SF_EVAL_COMPAT);
    sc->wrote = 0;
    sc->oom_at_start = oom_now && !(!(flags & SF_EVAL_COMPAT) && (flags & SF_ALLOW_OOM));
    f->db = c->db;
    f->user = c->user; /* redis.call runs with the caller's permissions */
    f->resp = 2;
    f->flags = CLIENT_SCRIPT | (c->flags & CLIENT_MULTI);
    sc->stopping = 0;
    clock_gettime(CLOCK_MONOTONIC, &sc->start);
    sc->start_ms = (int64_t)ir_mstime();
    lua_sethook(L, timeHook, LUA_MASKCOUNT, 100000);
    int err = lua_pcall(L, nargs, 1, -2 - nargs);
    lua_sethook(L, NULL, 0, 0);
    if (sc->busy) { /* the others get their replies again; its own input resumes */
        sc->busy = 0;
        c->flags &= ~CLIENT_PROTECTED;
        if (!(c->flags & CLIENT_CLOSED)) c->tp->ops->want_readable(c->tp, c->conn, 1);
    }
    sc->kill = 0;
    if (++sc->runs % 50 == 0) lua_gc(L, LUA_GCSTEP, 50);
    if (err) {
        if (!lua_istable(L, -1)) {
            const char *m = lua_tostring(L, -1);
            addReplyErrorFormat(c, "Error running script %s, %.100s\n", errname,
                                m ? m : "execution failure");
        } else {
            lua_getfield(L, -1, "ignore_error_stats_update");
            int counted = lua_toboolean(L, -1);
            lua_pop(L, 1);
            lua_getfield(L, -1, "err");
            lua_getfield(L, -2, "source");
            lua_getfield(L, -3, "line");
            const char *msg = lua_tostring(L, -3);
            const char *src = lua_tostring(L, -2);
            const char *line = lua_tostring(L, -1);
            lua_pushfstring(L, "-%s", msg ? msg : "");
            if (src && line) lua_pushfstring(L, " script: %s, on %s:%s.", errname, src, line);
            else lua_pushliteral(L, "");
            lua_concat(L, 2);
            size_t n;
            const char *full = lua_tolstring(L, -1, &n);
            addReplyError(c, full);
            if (counted) s->error_stats_skip = 1;
            lua_pop(L, 4);
        }
        lua_pop(L, 1);
    } else {
        replyFromLua(c, sc, L);
    }
    lua_pop(L, 1); /* the error handler */
    sc->caller = NULL;
    f->flags = CLIENT_SCRIPT;
    f->db = 0;
}

static void evalGeneric(client *c, int evalsha, int ro) {
    long long numkeys;
    if (getLongLongFromArg(c, 2, &numkeys) != 0) return;
    if (numkeys > c->argc - 3) {
        addReplyError(c, "Number of keys can't be greater than number of args");
        return;
    }
    if (numkeys < 0) {
        addReplyError(c, "Number of keys can't be negative");
        return;
    }
    ir_server *s = c->srv;
    ir_scripting *sc = scripting(s);
    lua_State *L = sc->L;
    char name[43] = "f_";
    if (evalsha) { /* Redis takes the first 40 characters, case-insensitively */
        size_t n = c->argv[1].len < 40 ? c->argv[1].len : 40;
        for (size_t i = 0; i < n; i++)
            name[2 + i] = (char)tolower((unsigned char)c->argv[1].ptr[i]);
        name[2 + n] = '\0';
    } else {
        char sha[41];
        if (createFunction(c, sc, c->argv[1].ptr, c->argv[1].len, sha) != 0) return;
        memcpy(name + 2, sha, 41);
    }
    lua_pushcfunction(L, errorHandler);
    lua_getfield(L, LUA_REGISTRYINDEX, name);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 2);
        addReplyError(c, "-NOSCRIPT No matching script. Please use EVAL.");
        return;
    }
    name[0] = 's';
    lua_getfield(L, LUA_REGISTRYINDEX, name);
    int flags = (int)lua_tonumber(L, -1);
    lua_pop(L, 1);
    setArray(L, "KEYS", c->argv + 3, (int)numkeys);
    setArray(L, "ARGV", c->argv + 3 + numkeys, c->argc - 3 - (int)numkeys);
    runScript(c, sc, L, flags, ro, name + 2, 0);
}

void evalCommand(client *c) { evalGeneric(c, 0, 0); }
void evalShaCommand(client *c) { evalGeneric(c, 1, 0); }
void evalRoCommand(client *c) { evalGeneric(c, 0, 1); }
void evalShaRoCommand(client *c) { evalGeneric(c, 1, 1); }

/* SCRIPT LOAD | EXISTS | FLUSH | KILL | HELP */
void scriptCommand(client *c) {
    static const struct {
        const char *name;
        int arity;
    } subs[] = {{"load", 3}, {"exists", -3}, {"flush", -2}, {"kill", 2}, {"help", 2}};
    int known = -1;
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (argEq(c, 1, subs[i].name)) known = (int)i;
    if (known < 0) {
        addReplyErrorFormat(c, "unknown subcommand '%.128s'. Try SCRIPT HELP.", c->argv[1].ptr);
        return;
    }
    int ar = subs[known].arity;
    if ((ar > 0 && c->argc != ar) || (ar < 0 && c->argc < -ar)) {
        addReplySubcommandArity(c, "script");
        return;
    }
    ir_server *s = c->srv;
    if (argEq(c, 1, "help")) {
        static const char *const help[] = {
            "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
            "EXISTS <sha1> [<sha1> ...]",
            "    Return information about the existence of the scripts in the script cache.",
            "FLUSH [ASYNC|SYNC]",
            "    Flush the Lua scripts cache. Very dangerous on replicas.",
            "    When called without the optional mode argument, the behavior is determined by the",
            "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
            "    * ASYNC: Asynchronously flush the scripts cache.",
            "    * SYNC: Synchronously flush the scripts cache.",
            "KILL",
            "    Kill the currently executing Lua script.",
            "LOAD <script>",
            "    Load a script into the scripts cache without executing it.",
            "HELP",
            "    Prints this help.",
        };
        addReplyHelpOf(c, help);
    } else if (argEq(c, 1, "flush")) {
        if (c->argc == 3 && !argEq(c, 2, "sync") && !argEq(c, 2, "async")) {
            addReplyError(c, "SCRIPT FLUSH only support SYNC|ASYNC option");
            return;
        }
        if (c->argc > 3) {
            addReplyError(c, "SCRIPT FLUSH only support SYNC|ASYNC option");
            return;
        }
        if (s->scripting) {
            ir_scripting *sc = s->scripting;
            closeState(sc->L);
            sc->nscripts = sc->body_bytes = 0;
            sc->L = newState(sc);
        }
        addReplyStr(c, shared.ok);
    } else if (argEq(c, 1, "exists")) {
        ir_scripting *sc = scripting(s);
        addReplyArrayLen(c, c->argc - 2);
        for (int j = 2; j < c->argc; j++) {
            int found = 0;
            if (c->argv[j].len == 40) {
                char name[43] = "f_";
                for (int i = 0; i < 40; i++)
                    name[2 + i] = (char)tolower((unsigned char)c->argv[j].ptr[i]);
                name[42] = '\0';
                lua_getfield(sc->L, LUA_REGISTRYINDEX, name);
                found = !lua_isnil(sc->L, -1);
                lua_pop(sc->L, 1);
            }
            addReplyLongLong(c, found);
        }
    } else if (argEq(c, 1, "load")) {
        ir_scripting *sc = scripting(s);
        char sha[41];
        if (createFunction(c, sc, c->argv[2].ptr, c->argv[2].len, sha) != 0) return;
        addReplyBulk(c, sha, 40);
    } else {
        scriptKill(c, 1);
    }
}

/* ---- functions: the Lua side -------------------------------------------------
 *
 * The functions' state has EVAL's sandbox, and one more level of globals: the
 * table the libraries' code runs with (LUA_GLOBALSINDEX) is an empty read-only
 * table whose metatable's __index is switched, by C only, between the globals
 * EVAL's scripts see (while a function runs) and the load API (while a
 * library's code runs at FUNCTION LOAD): a table holding only `redis`, itself
 * holding only register_function, log, the LOG_* levels and the version
 * fields. Reading anything else there is "Script attempted to access
 * nonexistent global variable". Closures a library creates keep that table
 * as their environment, so at run time they see the full globals. */

static const char *const REG_FN_META = "__ir_fn_meta"; /* the switched metatable */
static const char *const REG_FN_RUN = "__ir_fn_run";   /* EVAL's globals (a proxy) */
static const char *const REG_FN_API = "__ir_fn_api";   /* the load API (a proxy) */
static const char *const REG_FN_LOAD = "__ir_fn_load"; /* the load in progress, or nil */

typedef struct fnLoadCtx {
    scriptFnRegister cb;
    void *arg;
    struct timespec start;
    long long timeout_ms;
} fnLoadCtx;

static const struct {
    const char *name;
    int bit;
} scriptFlags[] = {{"no-writes", SF_NO_WRITES},
                   {"allow-oom", SF_ALLOW_OOM},
                   {"allow-stale", SF_ALLOW_STALE},
                   {"no-cluster", SF_NO_CLUSTER},
                   {"allow-cross-slot-keys", SF_ALLOW_CROSS_SLOT}};

int scriptFlagByName(const char *name, size_t len) {
    for (size_t i = 0; i < sizeof(scriptFlags) / sizeof(scriptFlags[0]); i++)
        if (strlen(scriptFlags[i].name) == len && !strncasecmp(scriptFlags[i].name, name, len))
            return scriptFlags[i].bit;
    return 0;
}

const char *scriptFlagName(int bit) {
    for (size_t i = 0; i < sizeof(scriptFlags) / sizeof(scriptFlags[0]); i++)
        if (scriptFlags[i].bit == bit) return scriptFlags[i].name;
    return NULL;
}

static fnLoadCtx *loadCtxOf(lua_State *L) {
    lua_getfield(L, LUA_REGISTRYINDEX, REG_FN_LOAD);
    fnLoadCtx *lc = lua_touserdata(L, -1);
    lua_pop(L, 1);
    return lc;
}

/* A string argument (a number converts, as Lua's tostring), or NULL. */
static const char *fnString(lua_State *L, int idx, size_t *len) {
    return lua_isstring(L, idx) ? lua_tolstring(L, idx, len) : NULL;
}

/* Raise err (as a Redis error table) after dropping ref. */
static int fnRegisterFail(lua_State *L, int ref, const char *err) {
    if (ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, ref);
    pushError(L, err);
    return lua_error(L);
}

/* redis.register_function(name, callback) or
 * redis.register_function{function_name=, callback=, description=, flags={...}} */
static int luaRegisterFunction(lua_State *L) {
    fnLoadCtx *lc = loadCtxOf(L);
    if (!lc)
        return fnRegisterFail(
            L, LUA_NOREF, "redis.register_function can only be called on FUNCTION LOAD command");
    int argc = lua_gettop(L);
    if (argc < 1 || argc > 2)
        return fnRegisterFail(L, LUA_NOREF, "wrong number of arguments to redis.register_function");
    const char *name = NULL, *desc = NULL;
    size_t nlen = 0, dlen = 0;
    int flags = 0, ref = LUA_NOREF;
    if (argc == 2) {
        if (!(name = fnString(L, 1, &nlen)))
            return fnRegisterFail(L, ref,
                                  "first argument to redis.register_function must be a string");
        if (!lua_isfunction(L, 2))
            return fnRegisterFail(L, ref,
                                  "second argument to redis.register_function must be a function");
        ref = luaL_ref(L, LUA_REGISTRYINDEX); /* pops the function; name stays at 1 */
    } else {
        if (!lua_istable(L, 1))
            return fnRegisterFail(L, ref,
                                  "calling redis.register_function with a single argument is "
                                  "only applicable to Lua table (representing named arguments).");
        lua_settop(L, 3); /* 2: the name's value, 3: the description's (kept alive here) */
        lua_pushnil(L);
        while (lua_next(L, 1)) {
            if (lua_type(L, -2) != LUA_TSTRING) {
                if (lua_type(L, -2) == LUA_TNUMBER) /* a string to Lua, but no argument's name */
                    return fnRegisterFail(L, ref,
                                          "unknown argument given to redis.register_function");
                return fnRegisterFail(
                    L, ref, "named argument key given to redis.register_function is not a string");
            }
            const char *key = lua_tostring(L, -2);
            if (!strcasecmp(key, "function_name")) {
                lua_pushvalue(L, -1);
                lua_replace(L, 2);
                if (!(name = fnString(L, 2, &nlen)))
                    return fnRegisterFail(
                        L, ref,
                        "function_name argument given to redis.register_function must be a string");
            } else if (!strcasecmp(key, "description")) {
                lua_pushvalue(L, -1);
                lua_replace(L, 3);
                if (!(desc = fnString(L, 3, &dlen)))
                    return fnRegisterFail(
                        L, ref,
                        "description argument given to redis.register_function must be a string");
            } else if (!strcasecmp(key, "callback")) {
                if (!lua_isfunction(L, -1))
                    return fnRegisterFail(
                        L, ref,
                        "callback argument given to redis.register_function must be a function");
                if (ref != LUA_NOREF) luaL_unref(L, LUA_REGISTRYINDEX, ref);
                ref = luaL_ref(L, LUA_REGISTRYINDEX);
                continue;
            } else if (!strcasecmp(key, "flags")) {
                if (!lua_istable(L, -1))
                    return fnRegisterFail(
                        L, ref,
                        "flags argument to redis.register_function must be a table "
                        "representing function flags");
                flags = 0;
                for (int j = 1;; j++) {
                    lua_rawgeti(L, -1, j);
                    if (lua_isnil(L, -1)) {
                        lua_pop(L, 1);
                        break;
                    }
                    size_t fl;
                    const char *f =
                        lua_type(L, -1) == LUA_TSTRING ? lua_tolstring(L, -1, &fl) : NULL;
                    int bit = f ? scriptFlagByName(f, fl) : 0;
                    lua_pop(L, 1);
                    if (!bit) return fnRegisterFail(L, ref, "unknown flag given");
                    flags |= bit;
                }
            } else {
                return fnRegisterFail(L, ref, "unknown argument given to redis.register_function");
            }
            lua_pop(L, 1);
        }
        if (!name)
            return fnRegisterFail(L, ref,
                                  "redis.register_function must get a function name argument");
        if (ref == LUA_NOREF)
            return fnRegisterFail(L, ref, "redis.register_function must get a callback argument");
    }
    const char *err = lc->cb(lc->arg, name, nlen, desc, dlen, flags, ref);
    if (err) return fnRegisterFail(L, ref, err);
    return 0;
}

static void fnLoadHook(lua_State *L, lua_Debug *ar) {
    (void)ar;
    fnLoadCtx *lc = loadCtxOf(L);
    if (!lc || lc->timeout_ms <= 0) return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    long long ms = (long long)(now.tv_sec - lc->start.tv_sec) * 1000 +
                   (now.tv_nsec - lc->start.tv_nsec) / 1000000;
    if (ms <= lc->timeout_ms) return;
    lua_sethook(L, fnLoadHook, LUA_MASKLINE,
                0); /* raise again at every line: pcall cannot keep it */
    pushError(L, "FUNCTION LOAD timeout");
    lua_error(L);
}

/* A table with a metatable whose __index raises "nonexistent global". */
static void newStrictTable(lua_State *L) {
    lua_newtable(L);
    lua_newtable(L);
    lua_pushcfunction(L, nonexistentGlobal);
    lua_setfield(L, -2, "__index");
    lua_setmetatable(L, -2);
}

static lua_State *newFunctionsState(ir_scripting *sc) {
    lua_State *L = newState(sc);
    /* the load API: { redis = { register_function, log, LOG_*, REDIS_VERSION* } } */
    newStrictTable(L);
    newStrictTable(L);
    setFn(L, "register_function", luaRegisterFunction);
    setFn(L, "log", luaLog);
    setNum(L, "LOG_DEBUG", LL_DEBUG);
    setNum(L, "LOG_VERBOSE", LL_VERBOSE);
    setNum(L, "LOG_NOTICE", LL_NOTICE);
    setNum(L, "LOG_WARNING", LL_WARNING);
    lua_pushstring(L, IR_REDIS_VERSION);
    lua_setfield(L, -2, "REDIS_VERSION");
    lua_pushnumber(L, 0x07000f);
    lua_setfield(L, -2, "REDIS_VERSION_NUM");
    makeReadonly(L);
    lua_setfield(L, -2, "redis");
    makeReadonly(L);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_FN_API);
    /* EVAL's globals (newState made them a read-only proxy) */
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_FN_RUN);
    /* the libraries' globals: empty, read-only, __index switched */
    lua_newtable(L);
    lua_newtable(L);
    lua_pushvalue(L, LUA_GLOBALSINDEX);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, readonlyError);
    lua_setfield(L, -2, "__newindex");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_FN_META);
    lua_setmetatable(L, -2);
    markReadonly(L, -1);
    lua_replace(L, LUA_GLOBALSINDEX);
    lua_settop(L, 0);
    return L;
}

static lua_State *functionsState(ir_server *s) {
    ir_scripting *sc = scripting(s);
    if (!sc->fL) sc->fL = newFunctionsState(sc);
    return sc->fL;
}

static void fnSetGlobals(lua_State *L, const char *which) {
    lua_getfield(L, LUA_REGISTRYINDEX, REG_FN_META);
    lua_getfield(L, LUA_REGISTRYINDEX, which);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}

int scriptFnLoad(ir_server *s, const char *code, size_t len, long long timeout_ms,
                 scriptFnRegister cb, void *arg, char *err, size_t errlen) {
    lua_State *L = functionsState(s);
    if (refuseBinary(L, code, len)) {
        lua_pop(L, 2);
        snprintf(err, errlen, "Error compiling function: user_function:1: " BYTECODE_NEAR);
        return -1;
    }
    if (luaL_loadbuffer(L, code, len, "@user_function")) {
        const char *m = lua_tostring(L, -1);
        snprintf(err, errlen, "Error compiling function: %s", m ? m : "?");
        lua_pop(L, 1);
        return -1;
    }
    fnLoadCtx lc = {cb, arg, {0, 0}, timeout_ms};
    clock_gettime(CLOCK_MONOTONIC, &lc.start);
    lua_pushlightuserdata(L, &lc);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_FN_LOAD);
    fnSetGlobals(L, REG_FN_API);
    lua_sethook(L, fnLoadHook, LUA_MASKCOUNT, 100000);
    int rc = 0;
    if (lua_pcall(L, 0, 0, 0)) {
        const char *m = NULL;
        if (lua_istable(L, -1)) {
            lua_getfield(L, -1, "err");
            m = lua_tostring(L, -1);
            snprintf(err, errlen, "Error registering functions: %s", m ? m : "?");
            lua_pop(L, 1);
        } else {
            m = lua_tostring(L, -1);
            snprintf(err, errlen, "Error registering functions: ERR %s", m ? m : "?");
        }
        lua_pop(L, 1);
        rc = -1;
    }
    lua_sethook(L, NULL, 0, 0);
    fnSetGlobals(L, REG_FN_RUN);
    lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, REG_FN_LOAD);
    return rc;
}

void scriptFnUnref(ir_server *s, int ref) {
    if (s->scripting && s->scripting->fL) luaL_unref(s->scripting->fL, LUA_REGISTRYINDEX, ref);
}

static void pushArgTable(lua_State *L, const ir_arg *a, int n) {
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushlstring(L, a[i].ptr, a[i].len);
        lua_rawseti(L, -2, i + 1);
    }
}

void scriptFnCall(client *c, int ref, const char *name, int flags, int ro, int numkeys) {
    ir_scripting *sc = scripting(c->srv);
    lua_State *L = functionsState(c->srv);
    lua_pushcfunction(L, errorHandler);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    pushArgTable(L, c->argv + 3, numkeys);
    pushArgTable(L, c->argv + 3 + numkeys, c->argc - 3 - numkeys);
    runScript(c, sc, L, flags & ~SF_EVAL_COMPAT, ro, name, 2);
}

uint64_t scriptFnMemory(const ir_server *s) {
    const ir_scripting *sc = s->scripting;
    if (!sc || !sc->fL) return 0;
    return (uint64_t)lua_gc(sc->fL, LUA_GCCOUNT, 0) * 1024u +
           (uint64_t)lua_gc(sc->fL, LUA_GCCOUNTB, 0);
}
