/* t_bitops.c - bitmaps over string values: SETBIT, GETBIT, BITCOUNT, BITPOS,
 * BITOP, BITFIELD and BITFIELD_RO, with Redis 7.0's replies and errors.
 *
 * Bit 0 is the most significant bit of the first byte (SETBIT's numbering);
 * a string is an infinite run of zero bits past its end for readers, and
 * writers grow it with zero bytes. Ranges given in bytes (the default) or
 * bits (BIT) are turned into one inclusive bit range [first, last] before
 * counting or searching, so both units share one loop.
 */
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "server.h"

/* ---- arguments --------------------------------------------------------------- */

/* Redis's bit offset: an integer >= 0 whose byte is below proto-max-bulk-len.
 * With bits > 0 (BITFIELD) "#n" means n * bits. */
static int bitOffsetOrReply(client *c, int i, int bits, uint64_t *offset) {
    const char *p = c->argv[i].ptr;
    size_t len = c->argv[i].len;
    int hash = bits > 0 && len > 0 && p[0] == '#';
    long long v;
    if (!string2ll(p + hash, len - (size_t)hash, &v) ||
        (hash && __builtin_mul_overflow(v, (long long)bits, &v)) || v < 0 ||
        (uint64_t)(v >> 3) >= c->srv->cfg.proto_max_bulk_len) {
        addReplyError(c, "bit offset is not an integer or out of range");
        return -1;
    }
    *offset = (uint64_t)v;
    return 0;
}

/* The string value at argv[1] for a writer that reaches bit `maxbit`: created
 * or grown with zero bytes as needed (*grown = 1 then), writable. NULL after
 * replying WRONGTYPE. */
static dbEntry *stringForBitWrite(client *c, ir_db *db, const dbkey *k, uint64_t maxbit,
                                  int *grown) {
    size_t need = (size_t)(maxbit >> 3) + 1;
    dbEntry *e = lookupKey(db, k);
    if (e && e->type != OBJ_STRING) {
        addReplyStr(c, shared.wrongtypeerr);
        return NULL;
    }
    *grown = 0;
    if (!e) {
        e = dbAdd(db, k, OBJ_STRING, 0);
        strSetValue(db, e, "", 0, 0);
        *grown = 1;
    }
    size_t old = e->v.str.len;
    if (need > old) *grown = 1;
    strWritable(db, e, need > old ? need : old, 0);
    return e;
}

/* ---- bits ------------------------------------------------------------------- */

static inline int bitAt(const uint8_t *p, size_t len, uint64_t bit) {
    uint64_t byte = bit >> 3;
    return byte < len && (p[byte] >> (7 - (bit & 7))) & 1;
}

/* Set bits in [first, last] of p (all inside it). */
static long long popcountRange(const uint8_t *p, uint64_t first, uint64_t last) {
    uint64_t b0 = first >> 3, b1 = last >> 3;
    uint8_t head = (uint8_t)(0xff >> (first & 7)), tail = (uint8_t)(0xff << (7 - (last & 7)));
    if (b0 == b1) return __builtin_popcount((unsigned)(p[b0] & head & tail));
    long long n =
        __builtin_popcount((unsigned)(p[b0] & head)) + __builtin_popcount((unsigned)(p[b1] & tail));
    uint64_t i = b0 + 1;
    for (; i + 8 <= b1; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        n += __builtin_popcountll(w);
    }
    for (; i < b1; i++) n += __builtin_popcount(p[i]);
    return n;
}

/* The first bit equal to `bit` in [first, last] of p (all inside it), or -1. */
static long long findBit(const uint8_t *p, uint64_t first, uint64_t last, int bit) {
    uint8_t flip = bit ? 0 : 0xff; /* search for ones in p ^ flip */
    uint64_t b0 = first >> 3, b1 = last >> 3;
    for (uint64_t i = b0; i <= b1; i++) {
        if (i > b0 && i < b1) { /* whole bytes: skip 8 at a time while they hold none */
            uint64_t skip = bit ? 0 : UINT64_MAX, w;
            while (i + 8 <= b1) {
                memcpy(&w, p + i, 8);
                if (w != skip) break;
                i += 8;
            }
        }
        uint8_t v = (uint8_t)(p[i] ^ flip);
        if (i == b0) v &= (uint8_t)(0xff >> (first & 7));
        if (i == b1) v &= (uint8_t)(0xff << (7 - (last & 7)));
        if (v) return (long long)(i * 8 + (uint64_t)(__builtin_clz(v) - 24));
    }
    return -1;
}

/* Redis's range arguments: start and end in bytes or (isbit) bits, negative
 * from the end, clamped to the string of len bytes. 0 with the inclusive bit
 * range, -1 when it is empty. */
static int bitRange(long long start, long long end, int isbit, size_t len, uint64_t *first,
                    uint64_t *last) {
    long long total = isbit ? (long long)len * 8 : (long long)len;
    if (start < 0) start += total;
    if (end < 0) end += total;
    if (start < 0) start = 0;
    if (end < 0) end = 0;
    if (end >= total) end = total - 1;
    if (start > end) return -1;
    *first = isbit ? (uint64_t)start : (uint64_t)start * 8;
    *last = isbit ? (uint64_t)end : (uint64_t)end * 8 + 7;
    return 0;
}

/* BIT | BYTE at argv[i]: 1 for BIT, 0 for BYTE, -1 after a syntax error. */
static int unitOrReply(client *c, int i) {
    if (argEq(c, i, "bit")) return 1;
    if (argEq(c, i, "byte")) return 0;
    addReplyStr(c, shared.syntaxerr);
    return -1;
}

/* ---- commands --------------------------------------------------------------- */

/* SETBIT key offset value: the old bit. */
void setbitCommand(client *c) {
    ir_db *db = dbFor(c);
    uint64_t offset;
    long long on;
    if (bitOffsetOrReply(c, 2, 0, &offset) != 0) return;
    if (!string2ll(c->argv[3].ptr, c->argv[3].len, &on) || (on & ~1)) {
        addReplyError(c, "bit is not an integer or out of range");
        return;
    }
    dbkey k = argKey(db, c, 1);
    int grown;
    dbEntry *e = stringForBitWrite(c, db, &k, offset, &grown);
    if (!e) return;
    uint8_t *p = (uint8_t *)e->v.str.ptr + (offset >> 3);
    int shift = 7 - (int)(offset & 7), old = (*p >> shift) & 1;
    int changed = grown || old != (int)on;
    if (changed) {
        *p = (uint8_t)((*p & ~(1 << shift)) | ((int)on << shift));
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_STRING, "setbit", k.p, k.len, db->id);
    }
    c->srv->cmd_changes = changed; /* rdb_changes_since_last_save counts changes only */
    addReplyStr(c, old ? shared.cone : shared.czero);
}

/* GETBIT key offset */
void getbitCommand(client *c) {
    uint64_t offset;
    if (bitOffsetOrReply(c, 2, 0, &offset) != 0) return;
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_STRING);
    if (!e) return;
    int bit = bitAt((const uint8_t *)e->v.str.ptr, e->v.str.len, offset);
    addReplyStr(c, bit ? shared.cone : shared.czero);
}

/* BITCOUNT key [start end [BIT | BYTE]] */
void bitcountCommand(client *c) {
    dbEntry *e = lookupKeyOrReply(c, 1, shared.czero, OBJ_STRING);
    if (!e) return;
    size_t len = e->v.str.len;
    long long start = 0, end = -1;
    int isbit = 0;
    if (c->argc == 4 || c->argc == 5) {
        if (getLongLongFromArg(c, 2, &start) != 0 || getLongLongFromArg(c, 3, &end) != 0) return;
        if (start < 0 && end < 0 && start > end) {
            addReplyStr(c, shared.czero);
            return;
        }
        if (c->argc == 5 && (isbit = unitOrReply(c, 4)) < 0) return;
    } else if (c->argc != 2) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    uint64_t first, last;
    if (bitRange(start, end, isbit, len, &first, &last) != 0) {
        addReplyStr(c, shared.czero);
        return;
    }
    addReplyLongLong(c, popcountRange((const uint8_t *)e->v.str.ptr, first, last));
}

/* BITPOS key bit [start [end [BIT | BYTE]]] */
void bitposCommand(client *c) {
    long long bit;
    if (getLongLongFromArg(c, 2, &bit) != 0) return;
    if (bit != 0 && bit != 1) {
        addReplyError(c, "The bit argument must be 1 or 0.");
        return;
    }
    ir_db *db = dbFor(c);
    dbkey k = argKey(db, c, 1);
    dbEntry *e = lookupKey(db, &k);
    if (!e) { /* an endless run of zeroes */
        addReplyLongLong(c, bit ? -1 : 0);
        return;
    }
    if (e->type != OBJ_STRING) {
        addReplyStr(c, shared.wrongtypeerr);
        return;
    }
    size_t len = e->v.str.len;
    long long start = 0, end = -1;
    int isbit = 0, end_given = 0;
    if (c->argc >= 4 && c->argc <= 6) {
        if (getLongLongFromArg(c, 3, &start) != 0) return;
        if (c->argc == 6 && (isbit = unitOrReply(c, 5)) < 0) return;
        if (c->argc >= 5) {
            if (getLongLongFromArg(c, 4, &end) != 0) return;
            end_given = 1;
        }
    } else if (c->argc != 3) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    uint64_t first, last;
    if (bitRange(start, end, isbit, len, &first, &last) != 0) {
        addReplyLongLong(c, -1);
        return;
    }
    long long pos = findBit((const uint8_t *)e->v.str.ptr, first, last, (int)bit);
    /* no clear bit in the range: without an end, the zeroes past it count */
    if (pos < 0 && bit == 0 && !end_given) pos = (long long)last + 1;
    addReplyLongLong(c, pos);
}

/* BITOP AND | OR | XOR | NOT destkey key [key ...]: the length of the result. */
void bitopCommand(client *c) {
    enum { AND, OR, XOR, NOT } op;
    if (argEq(c, 1, "and")) op = AND;
    else if (argEq(c, 1, "or")) op = OR;
    else if (argEq(c, 1, "xor")) op = XOR;
    else if (argEq(c, 1, "not")) op = NOT;
    else {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    if (op == NOT && c->argc != 4) {
        addReplyError(c, "BITOP NOT must be called with a single source key.");
        return;
    }
    ir_db *db = dbFor(c);
    int n = c->argc - 3;
    enum { NSMALL = 16 };
    const dbEntry *small[NSMALL];
    const dbEntry **src = n <= NSMALL ? small : dbMalloc((size_t)n * sizeof(*src));
    size_t maxlen = 0;
    for (int j = 0; j < n; j++) {
        dbkey k = argKey(db, c, 3 + j);
        const dbEntry *e = lookupKey(db, &k);
        if (e && e->type != OBJ_STRING) {
            addReplyStr(c, shared.wrongtypeerr);
            if (src != small) free(src);
            return;
        }
        src[j] = e;
        if (e && e->v.str.len > maxlen) maxlen = e->v.str.len;
    }
    char *res = NULL;
    if (maxlen) {
        res = dbMalloc(maxlen + 1);
        uint8_t *r = (uint8_t *)res;
        size_t l0 = src[0] ? src[0]->v.str.len : 0;
        if (l0) memcpy(r, src[0]->v.str.ptr, l0);
        memset(r + l0, 0, maxlen - l0);
        if (op == NOT)
            for (size_t i = 0; i < maxlen; i++) r[i] = (uint8_t)~r[i];
        for (int j = 1; j < n; j++) {
            size_t l = src[j] ? src[j]->v.str.len : 0;
            const uint8_t *s = l ? (const uint8_t *)src[j]->v.str.ptr : NULL;
            if (op == AND) {
                for (size_t i = 0; i < l; i++) r[i] &= s[i];
                memset(r + l, 0, maxlen - l); /* a shorter source is padded with zeroes */
            } else if (op == OR) {
                for (size_t i = 0; i < l; i++) r[i] |= s[i];
            } else {
                for (size_t i = 0; i < l; i++) r[i] ^= s[i];
            }
        }
    }
    if (src != small) free(src);
    dbkey dk = argKey(db, c, 2);
    if (maxlen) {
        dbEntry *e = lookupKey(db, &dk);
        if (!e) {
            e = dbAdd(db, &dk, OBJ_STRING, 0);
        } else {
            dbMakeString(db, e);
            removeExpire(db, e);
        }
        strTakeBuffer(db, e, res, maxlen, maxlen + 1);
        signalModifiedKey(c, db, dk.p, dk.len);
        notifyKeyspaceEvent(NOTIFY_STRING, "set", dk.p, dk.len, db->id);
    } else if (dbDelete(db, &dk)) {
        signalModifiedKey(c, db, dk.p, dk.len);
        notifyKeyspaceEvent(NOTIFY_GENERIC, "del", dk.p, dk.len, db->id);
    }
    addReplyLongLong(c, (long long)maxlen);
}

/* ---- BITFIELD --------------------------------------------------------------- */

enum { BF_GET, BF_SET, BF_INCRBY };
enum { OW_WRAP, OW_SAT, OW_FAIL };

typedef struct bfOp {
    int opcode, owtype, bits, sign;
    uint64_t offset;
    long long value; /* SET's value, INCRBY's increment */
} bfOp;

/* i<bits> or u<bits>: 1..64 signed, 1..63 unsigned (a u64 does not fit a reply). */
static int bfTypeOrReply(client *c, int i, int *sign, int *bits) {
    const char *p = c->argv[i].ptr;
    size_t len = c->argv[i].len;
    long long n;
    *sign = len && p[0] == 'i';
    if (!len || (p[0] != 'i' && p[0] != 'u') || !string2ll(p + 1, strnlen(p + 1, len - 1), &n) ||
        n < 1 || n > (*sign ? 64 : 63)) {
        addReplyError(c, "Invalid bitfield type. Use something like i16 u8. Note that u64 is "
                         "not supported but i64 is.");
        return -1;
    }
    *bits = (int)n;
    return 0;
}

/* Parse the operation at argv[*j] (an OVERFLOW changes *owtype and yields
 * none): 1 with *op filled, 0 for OVERFLOW, -1 after replying an error.
 * *j is left on the operation's last argument. */
static int bfParse(client *c, int *j, int *owtype, bfOp *op) {
    int i = *j, rem = c->argc - i - 1;
    if (argEq(c, i, "overflow") && rem >= 1) {
        if (argEq(c, i + 1, "wrap")) *owtype = OW_WRAP;
        else if (argEq(c, i + 1, "sat")) *owtype = OW_SAT;
        else if (argEq(c, i + 1, "fail")) *owtype = OW_FAIL;
        else {
            addReplyError(c, "Invalid OVERFLOW type specified");
            return -1;
        }
        *j = i + 1;
        return 0;
    }
    if (argEq(c, i, "get") && rem >= 2) op->opcode = BF_GET;
    else if (argEq(c, i, "set") && rem >= 3) op->opcode = BF_SET;
    else if (argEq(c, i, "incrby") && rem >= 3) op->opcode = BF_INCRBY;
    else {
        addReplyStr(c, shared.syntaxerr);
        return -1;
    }
    if (bfTypeOrReply(c, i + 1, &op->sign, &op->bits) != 0) return -1;
    if (bitOffsetOrReply(c, i + 2, op->bits, &op->offset) != 0) return -1;
    op->value = 0;
    if (op->opcode != BF_GET && getLongLongFromArg(c, i + 3, &op->value) != 0) return -1;
    op->owtype = *owtype;
    *j = i + (op->opcode == BF_GET ? 2 : 3);
    return 1;
}

static uint64_t bfGet(const uint8_t *p, size_t len, uint64_t offset, int bits) {
    uint64_t v = 0;
    for (int i = 0; i < bits; i++) v = (v << 1) | (uint64_t)bitAt(p, len, offset + (uint64_t)i);
    return v;
}

static void bfSet(uint8_t *p, uint64_t offset, int bits, uint64_t v) {
    for (int i = 0; i < bits; i++) {
        uint64_t b = offset + (uint64_t)i;
        int shift = 7 - (int)(b & 7), on = (v >> (bits - 1 - i)) & 1;
        p[b >> 3] = (uint8_t)((p[b >> 3] & ~(1 << shift)) | (on << shift));
    }
}

static int64_t signExtend(uint64_t v, int bits) {
    if (bits < 64 && (v >> (bits - 1)) & 1) v |= UINT64_MAX << bits;
    else if (bits < 64) v &= ~(UINT64_MAX << bits);
    int64_t s;
    memcpy(&s, &v, sizeof(s));
    return s;
}

/* old + incr (SET: old is the value, incr 0) stored in an unsigned or signed
 * field of `bits`: 0 and *res when it fits, else +1 / -1 (over / under) with
 * *res the wrapped or saturated value. As Redis 7.0, a SET of a value far
 * below a narrow signed field's range (its check wraps) counts as over. */
static int bfApply(const bfOp *op, uint64_t old, long long incr, uint64_t *res) {
    __int128 sum;
    int dir = 0;
    if (!op->sign) {
        uint64_t max = (UINT64_C(1) << op->bits) - 1;
        sum = (__int128)old + incr;
        if (old > max || sum > (__int128)max) dir = 1;
        else if (sum < 0) dir = -1;
        *res = (uint64_t)sum; /* modulo 2^64, then the field's bits below */
        if (!dir) return 0;
        if (op->owtype == OW_SAT) *res = dir > 0 ? max : 0;
        else *res &= max;
        return dir;
    }
    int64_t v = (int64_t)old, max = op->bits == 64 ? INT64_MAX : (INT64_C(1) << (op->bits - 1)) - 1;
    int64_t min = -max - 1;
    sum = (__int128)v + incr;
    if (sum > max || (op->bits < 64 && v < max - INT64_MAX)) dir = 1;
    else if (sum < min) dir = -1;
    *res = (uint64_t)v + (uint64_t)incr;
    if (!dir) return 0;
    if (op->owtype == OW_SAT) *res = (uint64_t)(dir > 0 ? max : min);
    else *res = (uint64_t)signExtend(*res, op->bits);
    return dir;
}

/* BITFIELD key [GET type offset | [OVERFLOW WRAP|SAT|FAIL] SET type offset value |
 *     [OVERFLOW WRAP|SAT|FAIL] INCRBY type offset increment ...]; ro: BITFIELD_RO.
 * The arguments are checked in a first pass (every error before any reply)
 * and parsed again to run: no allocation for the list of operations. */
static void bitfieldGeneric(client *c, int ro) {
    ir_db *db = dbFor(c);
    int owtype = OW_WRAP, nops = 0, writes = 0;
    uint64_t maxbit = 0;
    bfOp op;
    for (int j = 2; j < c->argc; j++) {
        int r = bfParse(c, &j, &owtype, &op);
        if (r < 0) return;
        if (r == 0) continue;
        nops++;
        if (op.opcode == BF_GET) continue;
        writes = 1;
        if (op.offset + (uint64_t)op.bits - 1 > maxbit) maxbit = op.offset + (uint64_t)op.bits - 1;
    }
    dbkey k = argKey(db, c, 1);
    dbEntry *e;
    int grown = 0;
    if (!writes) {
        e = lookupKey(db, &k);
        if (e && e->type != OBJ_STRING) {
            addReplyStr(c, shared.wrongtypeerr);
            return;
        }
    } else {
        if (ro) {
            addReplyError(c, "BITFIELD_RO only supports the GET subcommand");
            return;
        }
        if (!(e = stringForBitWrite(c, db, &k, maxbit, &grown))) return;
    }
    addReplyArrayLen(c, nops);
    int changes = 0;
    owtype = OW_WRAP;
    for (int j = 2; j < c->argc; j++) {
        if (bfParse(c, &j, &owtype, &op) != 1) continue; /* checked above: no errors */
        const uint8_t *p = e ? (const uint8_t *)e->v.str.ptr : NULL;
        size_t len = e ? e->v.str.len : 0;
        uint64_t old = bfGet(p, len, op.offset, op.bits);
        if (op.opcode == BF_GET) {
            addReplyLongLong(c, op.sign ? signExtend(old, op.bits) : (long long)old);
            continue;
        }
        uint64_t nv;
        if (op.sign) old = (uint64_t)signExtend(old, op.bits);
        int ow = op.opcode == BF_SET ? bfApply(&op, (uint64_t)op.value, 0, &nv)
                                     : bfApply(&op, old, op.value, &nv);
        if (ow && op.owtype == OW_FAIL) {
            addReplyNull(c);
            continue;
        }
        uint64_t reply = op.opcode == BF_SET ? old : nv;
        addReplyLongLong(c, op.sign ? signExtend(reply, op.bits) : (long long)reply);
        bfSet((uint8_t *)e->v.str.ptr, op.offset, op.bits, nv);
        uint64_t mask = op.bits == 64 ? UINT64_MAX : (UINT64_C(1) << op.bits) - 1;
        if (grown || (old & mask) != (nv & mask)) changes++;
    }
    if (changes) {
        signalModifiedKey(c, db, k.p, k.len);
        notifyKeyspaceEvent(NOTIFY_STRING, "setbit", k.p, k.len, db->id);
    }
    c->srv->cmd_changes = changes;
}

void bitfieldCommand(client *c) { bitfieldGeneric(c, 0); }

void bitfieldroCommand(client *c) { bitfieldGeneric(c, 1); }
