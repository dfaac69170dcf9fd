/* geo.c - the GEO commands: GEOADD, GEODIST, GEOHASH, GEOPOS, GEORADIUS,
 * GEORADIUSBYMEMBER, their _RO forms, GEOSEARCH and GEOSEARCHSTORE.
 *
 * A geo index is a sorted set whose scores are 52-bit geohashes, as Redis
 * 7.0 stores them (so ZRANGE ... WITHSCORES agrees with stock Redis): the
 * longitude in [-180, 180] and the latitude in [-85.05112878, 85.05112878]
 * (Web Mercator's limits) are each cut into 2^26 cells; the cell numbers'
 * bits interleave, the latitude's in the even positions and the longitude's
 * in the odd ones. A position decodes to the middle of its cell.
 *
 * A search picks the geohash precision (step) whose cell is about the size
 * of the searched area, then reads the cell holding the center and its eight
 * neighbours as score ranges of the set (each a contiguous range, because
 * every point of a cell shares its prefix), skipping the neighbours the area
 * cannot reach, and keeps the points inside the circle or box. The choices
 * (step, neighbours, their order, the distance formula, the reply's number
 * formats) follow Redis's so that the same members come back in the same
 * order with the same digits.
 *
 * GEOADD becomes ZADD (arguments rewritten, then zaddGeo) and replicates as
 * the ZADD, as Redis does.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "commands.h"
#include "db_internal.h"
#include "notify.h"
#include "replication.h"
#include "server.h"

#define LAT_MIN (-85.05112878)
#define LAT_MAX 85.05112878
#define LON_MIN (-180.0)
#define LON_MAX 180.0
#define STEP_MAX 26
#define EARTH_R 6372797.560856 /* the quadratic mean radius Redis uses, meters */
#define MERC_MAX 20037726.37
#define RAD(deg) ((deg) * (M_PI / 180.0))
#define DEG(rad) ((rad) / (M_PI / 180.0))

typedef struct {
    uint64_t bits;
    int step;
} ghash;

typedef struct {
    double lonmin, lonmax, latmin, latmax;
} garea;

/* Spread the low 32 bits of v to the even bit positions. */
static uint64_t spread(uint32_t v) {
    uint64_t x = v;
    x = (x | (x << 16)) & 0x0000FFFF0000FFFFULL;
    x = (x | (x << 8)) & 0x00FF00FF00FF00FFULL;
    x = (x | (x << 4)) & 0x0F0F0F0F0F0F0F0FULL;
    x = (x | (x << 2)) & 0x3333333333333333ULL;
    x = (x | (x << 1)) & 0x5555555555555555ULL;
    return x;
}

/* The even bit positions of v, packed. */
static uint32_t squash(uint64_t v) {
    uint64_t x = v & 0x5555555555555555ULL;
    x = (x | (x >> 1)) & 0x3333333333333333ULL;
    x = (x | (x >> 2)) & 0x0F0F0F0F0F0F0F0FULL;
    x = (x | (x >> 4)) & 0x00FF00FF00FF00FFULL;
    x = (x | (x >> 8)) & 0x0000FFFF0000FFFFULL;
    x = (x | (x >> 16)) & 0x00000000FFFFFFFFULL;
    return (uint32_t)x;
}

/* Encode within the given ranges (GEOHASH uses latitudes -90..90). */
static int encodeIn(double lonmin, double lonmax, double latmin, double latmax, double lon,
                    double lat, int step, ghash *h) {
    if (lon > LON_MAX || lon < LON_MIN || lat > LAT_MAX || lat < LAT_MIN) return 0;
    if (lat < latmin || lat > latmax || lon < lonmin || lon > lonmax) return 0;
    double fy = (lat - latmin) / (latmax - latmin), fx = (lon - lonmin) / (lonmax - lonmin);
    fy *= (double)(1ULL << step);
    fx *= (double)(1ULL << step);
    h->bits = spread((uint32_t)fy) | (spread((uint32_t)fx) << 1);
    h->step = step;
    return 1;
}

static int encode(double lon, double lat, int step, ghash *h) {
    return encodeIn(LON_MIN, LON_MAX, LAT_MIN, LAT_MAX, lon, lat, step, h);
}

static void cellOf(ghash h, garea *a) {
    uint32_t y = squash(h.bits), x = squash(h.bits >> 1);
    double n = (double)(1ULL << h.step);
    a->latmin = LAT_MIN + (y * 1.0 / n) * (LAT_MAX - LAT_MIN);
    a->latmax = LAT_MIN + ((y + 1) * 1.0 / n) * (LAT_MAX - LAT_MIN);
    a->lonmin = LON_MIN + (x * 1.0 / n) * (LON_MAX - LON_MIN);
    a->lonmax = LON_MIN + ((x + 1) * 1.0 / n) * (LON_MAX - LON_MIN);
}

/* A score's position: the middle of its cell, clamped to the valid ranges. */
static void decodeScore(double score, double *lon, double *lat) {
    ghash h = {score < 0 ? (uint64_t)(int64_t)score : (uint64_t)score, STEP_MAX};
    garea a;
    cellOf(h, &a);
    double x = (a.lonmin + a.lonmax) / 2, y = (a.latmin + a.latmax) / 2;
    *lon = x > LON_MAX ? LON_MAX : x < LON_MIN ? LON_MIN : x;
    *lat = y > LAT_MAX ? LAT_MAX : y < LAT_MIN ? LAT_MIN : y;
}

/* Move a cell one column (dx) or row (dy) over, wrapping at the edges. */
static ghash moved(ghash h, int dx, int dy) {
    uint64_t lonbits = h.bits & 0xAAAAAAAAAAAAAAAAULL, latbits = h.bits & 0x5555555555555555ULL;
    int shift = 64 - h.step * 2;
    if (dx) {
        uint64_t fill = 0x5555555555555555ULL >> shift; /* the latitude bits in use */
        lonbits = dx > 0 ? lonbits + (fill + 1) : (lonbits | fill) - (fill + 1);
        lonbits &= 0xAAAAAAAAAAAAAAAAULL >> shift;
    }
    if (dy) {
        uint64_t fill = 0xAAAAAAAAAAAAAAAAULL >> shift;
        latbits = dy > 0 ? latbits + (fill + 1) : (latbits | fill) - (fill + 1);
        latbits &= 0x5555555555555555ULL >> shift;
    }
    h.bits = lonbits | latbits;
    return h;
}

static double latDistance(double lat1, double lat2) {
    return EARTH_R * fabs(RAD(lat2) - RAD(lat1));
}

/* Haversine on a sphere of radius EARTH_R. */
static double distance(double lon1, double lat1, double lon2, double lat2) {
    double v = sin((RAD(lon2) - RAD(lon1)) / 2);
    if (v == 0.0) return latDistance(lat1, lat2);
    double p1 = RAD(lat1), p2 = RAD(lat2);
    double u = sin((p2 - p1) / 2);
    double a = u * u + cos(p1) * cos(p2) * v * v;
    return 2.0 * EARTH_R * asin(sqrt(a));
}

/* ---- the searched shape --------------------------------------------------- */

typedef struct {
    int box;                      /* 0: circle of radius, 1: box width x height */
    double lon, lat;              /* center */
    double radius, width, height; /* in the unit */
    double unit;                  /* meters per unit */
} gshape;

typedef struct {
    ghash cells[9]; /* center, N, S, E, W, NE, NW, SE, SW; bits 0 step 0 = skipped */
} gcells;

static int stepsFor(double meters, double lat) {
    if (meters == 0) return 26;
    int step = 1;
    while (meters < MERC_MAX) {
        meters *= 2;
        step++;
    }
    step -= 2;
    if (lat > 66 || lat < -66) {
        step--;
        if (lat > 80 || lat < -80) step--;
    }
    return step < 1 ? 1 : step > 26 ? 26 : step;
}

static void searchCells(const gshape *s, gcells *out) {
    double hm = s->unit * (s->box ? s->height / 2 : s->radius);
    double wm = s->unit * (s->box ? s->width / 2 : s->radius);
    double dlat = DEG(hm / EARTH_R);
    double dlon_top = DEG(wm / EARTH_R / cos(RAD(s->lat + dlat)));
    double dlon_bot = DEG(wm / EARTH_R / cos(RAD(s->lat - dlat)));
    int south = s->lat < 0;
    double minlon = south ? s->lon - dlon_bot : s->lon - dlon_top;
    double maxlon = south ? s->lon + dlon_bot : s->lon + dlon_top;
    double minlat = s->lat - dlat, maxlat = s->lat + dlat;
    double reach = s->box
                       ? sqrt((s->width / 2) * (s->width / 2) + (s->height / 2) * (s->height / 2))
                       : s->radius;
    reach *= s->unit;
    int step = stepsFor(reach, s->lat);
    ghash c;
    garea a, n, so, e, w;
    for (int pass = 0; pass < 2; pass++) {
        encode(s->lon, s->lat, step, &c);
        cellOf(c, &a);
        if (pass) break;
        cellOf(moved(c, 0, 1), &n);
        cellOf(moved(c, 0, -1), &so);
        cellOf(moved(c, 1, 0), &e);
        cellOf(moved(c, -1, 0), &w);
        int coarser =
            n.latmax < maxlat || so.latmin > minlat || e.lonmax < maxlon || w.lonmin > minlon;
        if (!(step > 1 && coarser)) break;
        step--;
    }
    static const int dirs[9][2] = {{0, 0}, {0, 1},  {0, -1}, {1, 0},  {-1, 0},
                                   {1, 1}, {-1, 1}, {1, -1}, {-1, -1}};
    for (int i = 0; i < 9; i++) out->cells[i] = moved(c, dirs[i][0], dirs[i][1]);
    if (step >= 2) {
        const ghash zero = {0, 0};
        if (a.latmin < minlat) out->cells[2] = out->cells[8] = out->cells[7] = zero;
        if (a.latmax > maxlat) out->cells[1] = out->cells[5] = out->cells[6] = zero;
        if (a.lonmin < minlon) out->cells[4] = out->cells[8] = out->cells[6] = zero;
        if (a.lonmax > maxlon) out->cells[3] = out->cells[7] = out->cells[5] = zero;
    }
}

/* Is the point (lon, lat) in the shape? Its distance from the center (meters). */
static int inShape(const gshape *s, double lon, double lat, double *dist) {
    if (!s->box) {
        *dist = distance(s->lon, s->lat, lon, lat);
        return *dist <= s->radius * s->unit;
    }
    if (latDistance(lat, s->lat) > s->height * s->unit / 2) return 0;
    if (distance(lon, lat, s->lon, lat) > s->width * s->unit / 2) return 0;
    *dist = distance(s->lon, s->lat, lon, lat);
    return 1;
}

/* ---- results --------------------------------------------------------------- */

typedef struct {
    const char *m;
    size_t len;
    double score, dist, lon, lat;
} gpoint;

typedef struct {
    const gshape *s;
    gpoint *v;
    size_t n, cap;
    size_t limit; /* ANY's count, 0 = all */
} gresult;

static gpoint *gpoints; /* reused between searches: no allocation per search once grown */
static size_t gpoints_cap;

static int collect(const dbEntry *fe, double score, void *arg) {
    gresult *r = arg;
    double lon, lat, dist = 0;
    decodeScore(score, &lon, &lat);
    if (inShape(r->s, lon, lat, &dist)) {
        if (r->n == r->cap) {
            r->cap = r->cap ? r->cap * 2 : 64;
            r->v = ir_xrealloc(r->v, r->cap * sizeof(*r->v));
        }
        r->v[r->n++] = (gpoint){fe->key, fe->klen, score, dist, lon, lat};
    }
    return r->limit && r->n >= r->limit;
}

static void searchSet(dbColl *co, const gshape *s, gresult *r) {
    gcells g;
    searchCells(s, &g);
    int last = 0;
    for (int i = 0; i < 9; i++) {
        ghash h = g.cells[i];
        if (h.bits == 0 && h.step == 0) continue;
        if (last && h.bits == g.cells[last].bits && h.step == g.cells[last].step) continue;
        if (r->n && r->limit && r->n >= r->limit) break;
        int shift = 52 - h.step * 2;
        double min = (double)(h.bits << shift), max = (double)((h.bits + 1) << shift);
        zsetScoreRange(co, min, max, collect, r);
        last = i;
    }
}

static int byDistAsc(const void *a, const void *b) {
    double x = ((const gpoint *)a)->dist, y = ((const gpoint *)b)->dist;
    return x > y ? 1 : x == y ? 0 : -1;
}

static int byDistDesc(const void *a, const void *b) { return -byDistAsc(a, b); }

/* ---- argument helpers ------------------------------------------------------ */

/* Redis's getDoubleFromObjectOrReply: msg, or "value is not a valid float". */
static int argDoubleOrReply(client *c, int i, double *out, const char *msg) {
    const char *p = c->argv[i].ptr;
    size_t len = c->argv[i].len;
    char *end = NULL;
    double d = 0;
    int ok = len > 0 && !isspace((unsigned char)p[0]);
    if (ok) {
        errno = 0;
        d = strtod(p, &end);
        ok = (size_t)(end - p) == len && !isnan(d) &&
             !(errno == ERANGE && (d == HUGE_VAL || d == -HUGE_VAL || fpclassify(d) == FP_ZERO));
    }
    if (!ok) {
        addReplyError(c, msg ? msg : "value is not a valid float");
        return 0;
    }
    *out = d;
    return 1;
}

static int lonLatOrReply(client *c, int i, double *lon, double *lat) {
    if (!argDoubleOrReply(c, i, lon, NULL) || !argDoubleOrReply(c, i + 1, lat, NULL)) return 0;
    if (*lon < LON_MIN || *lon > LON_MAX || *lat < LAT_MIN || *lat > LAT_MAX) {
        addReplyErrorFormat(c, "invalid longitude,latitude pair %f,%f", *lon, *lat);
        return 0;
    }
    return 1;
}

static double unitOrReply(client *c, int i) {
    const char *u = c->argv[i].ptr;
    if (!strcasecmp(u, "m")) return 1;
    if (!strcasecmp(u, "km")) return 1000;
    if (!strcasecmp(u, "ft")) return 0.3048;
    if (!strcasecmp(u, "mi")) return 1609.34;
    addReplyError(c, "unsupported unit provided. please use M, KM, FT, MI");
    return -1;
}

static int radiusOrReply(client *c, int i, gshape *s) {
    double r;
    if (!argDoubleOrReply(c, i, &r, "need numeric radius")) return 0;
    if (r < 0) {
        addReplyError(c, "radius cannot be negative");
        return 0;
    }
    s->radius = r;
    s->box = 0;
    return (s->unit = unitOrReply(c, i + 1)) >= 0;
}

static int boxOrReply(client *c, int i, gshape *s) {
    double w, h;
    if (!argDoubleOrReply(c, i, &w, "need numeric width") ||
        !argDoubleOrReply(c, i + 1, &h, "need numeric height"))
        return 0;
    if (h < 0 || w < 0) {
        addReplyError(c, "height or width cannot be negative");
        return 0;
    }
    s->width = w;
    s->height = h;
    s->box = 1;
    return (s->unit = unitOrReply(c, i + 2)) >= 0;
}

/* A member's position; 0 if it is not in the set. */
static int memberPos(dbColl *co, const ir_arg *m, double *lon, double *lat) {
    dbEntry *fe = collFind(co, m->ptr, m->len);
    if (!fe) return 0;
    decodeScore(zsetEntryScore(fe), lon, lat);
    return 1;
}

/* ---- replies --------------------------------------------------------------- */

/* Distances: four decimals, rounded as Redis's fixed-point formatter. */
static void addReplyDistance(client *c, double d) {
    char buf[64];
    long long v = d == 0 ? 0 : llrint(d * 10000.0);
    unsigned long long a = v < 0 ? 0ULL - (unsigned long long)v : (unsigned long long)v;
    int n = snprintf(buf, sizeof(buf), "%s%llu.%04llu", v < 0 ? "-" : "", a / 10000, a % 10000);
    addReplyBulk(c, buf, (size_t)n);
}

/* Coordinates: Redis's human long double text (a double in RESP3). */
static void addReplyCoord(client *c, double d) {
    char buf[128];
    int n = ld2stringHuman(buf, sizeof(buf), (long double)d);
    addReplyDoubleText(c, buf, (size_t)n);
}

static void addReplyPos(client *c, double lon, double lat) {
    addReplyArrayLen(c, 2);
    addReplyCoord(c, lon);
    addReplyCoord(c, lat);
}

/* ---- commands -------------------------------------------------------------- */

/* GEOADD key [NX|XX] [CH] longitude latitude member [...]: ZADD with geohash scores. */
void geoaddCommand(client *c) {
    int first = 2, nx = 0, xx = 0;
    for (; first < c->argc; first++) {
        if (argEq(c, first, "nx")) nx = 1;
        else if (argEq(c, first, "xx")) xx = 1;
        else if (!argEq(c, first, "ch")) break;
    }
    if ((c->argc - first) % 3 || (nx && xx)) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    int n = (c->argc - first) / 3, argc = first + 2 * n;
    ir_arg small[32], *argv = argc <= 32 ? small : ir_xrealloc(NULL, (size_t)argc * sizeof(ir_arg));
    char nbuf[32 * 24], *num = argc <= 32 ? nbuf : ir_xrealloc(NULL, (size_t)n * 24);
    argv[0] = (ir_arg){"zadd", 4, 0};
    for (int i = 1; i < first; i++) argv[i] = (ir_arg){c->argv[i].ptr, c->argv[i].len, 0};
    int ok = 1;
    for (int j = 0; j < n && ok; j++) {
        double lon, lat;
        ghash h = {0, 0};
        ok = lonLatOrReply(c, first + 3 * j, &lon, &lat);
        if (!ok) break;
        encode(lon, lat, STEP_MAX, &h);
        char *p = num + 24 * j;
        int len = snprintf(p, 24, "%llu", (unsigned long long)h.bits);
        argv[first + 2 * j] = (ir_arg){p, (size_t)len, 0};
        const ir_arg *m = &c->argv[first + 3 * j + 2];
        argv[first + 2 * j + 1] = (ir_arg){m->ptr, m->len, 0};
    }
    if (ok) {
        ir_arg *saved = c->argv;
        int saved_argc = c->argc;
        c->argv = argv;
        c->argc = argc;
        zaddGeo(c);
        c->argv = saved;
        c->argc = saved_argc;
        if (replActive() && repl_cmd_dirty) { /* replicated as the ZADD, as Redis */
            ir_str rv_small[32],
                *rv = argc <= 32 ? rv_small : ir_xrealloc(NULL, (size_t)argc * sizeof(ir_str));
            for (int i = 0; i < argc; i++) rv[i] = (ir_str){argv[i].ptr, argv[i].len};
            replRewrite(c, argc, rv);
            if (rv != rv_small) free(rv);
        }
    }
    if (argv != small) free(argv);
    if (num != nbuf) free(num);
}

#define G_COORDS (1 << 0)  /* GEORADIUS: the center is longitude latitude */
#define G_MEMBER (1 << 1)  /* GEORADIUSBYMEMBER: the center is a member */
#define G_NOSTORE (1 << 2) /* the _RO forms */
#define G_SEARCH (1 << 3)  /* GEOSEARCH's arguments */
#define G_SEARCHSTORE (1 << 4)

static void georadiusGeneric(client *c, int srcarg, int flags) {
    int missing;
    dbEntry *e = lookupTyped(c, srcarg, OBJ_ZSET, &missing);
    if (!e && !missing) return;
    dbColl *co = e ? e->v.coll : NULL;
    gshape s = {0};
    int base, storearg = 0, storedist = 0;
    if (flags & G_COORDS) {
        base = 6;
        if (!lonLatOrReply(c, 2, &s.lon, &s.lat) || !radiusOrReply(c, 4, &s)) return;
    } else if (flags & G_MEMBER) {
        base = 5;
        if (co) {
            if (!memberPos(co, &c->argv[2], &s.lon, &s.lat)) {
                addReplyError(c, "could not decode requested zset member");
                return;
            }
            if (!radiusOrReply(c, 3, &s)) return;
        }
    } else {
        base = 2;
        if (flags & G_SEARCHSTORE) {
            base = 3;
            storearg = 1;
        }
    }
    int withdist = 0, withhash = 0, withcoord = 0, frommember = 0, fromloc = 0, byradius = 0,
        bybox = 0, any = 0, sort = 0; /* 1 asc, -1 desc */
    long long count = 0;
    int rem = c->argc - base;
    for (int i = 0; i < rem; i++) {
        int a = base + i;
        if (argEq(c, a, "withdist")) withdist = 1;
        else if (argEq(c, a, "withhash")) withhash = 1;
        else if (argEq(c, a, "withcoord")) withcoord = 1;
        else if (argEq(c, a, "any")) any = 1;
        else if (argEq(c, a, "asc")) sort = 1;
        else if (argEq(c, a, "desc")) sort = -1;
        else if (argEq(c, a, "count") && i + 1 < rem) {
            if (getLongLongFromArg(c, a + 1, &count) != 0) return;
            if (count <= 0) {
                addReplyError(c, "COUNT must be > 0");
                return;
            }
            i++;
        } else if ((argEq(c, a, "store") || argEq(c, a, "storedist")) && i + 1 < rem &&
                   !(flags & (G_NOSTORE | G_SEARCH))) {
            storedist = argEq(c, a, "storedist");
            storearg = a + 1;
            i++;
        } else if (argEq(c, a, "storedist") && (flags & G_SEARCHSTORE)) {
            storedist = 1;
        } else if (argEq(c, a, "frommember") && i + 1 < rem && (flags & G_SEARCH) && !fromloc) {
            if (co && !memberPos(co, &c->argv[a + 1], &s.lon, &s.lat)) {
                addReplyError(c, "could not decode requested zset member");
                return;
            }
            frommember = 1;
            i++;
        } else if (argEq(c, a, "fromlonlat") && i + 2 < rem && (flags & G_SEARCH) && !frommember) {
            if (!lonLatOrReply(c, a + 1, &s.lon, &s.lat)) return;
            fromloc = 1;
            i += 2;
        } else if (argEq(c, a, "byradius") && i + 2 < rem && (flags & G_SEARCH) && !bybox) {
            if (!radiusOrReply(c, a + 1, &s)) return;
            byradius = 1;
            i += 2;
        } else if (argEq(c, a, "bybox") && i + 3 < rem && (flags & G_SEARCH) && !byradius) {
            if (!boxOrReply(c, a + 1, &s)) return;
            bybox = 1;
            i += 3;
        } else {
            addReplyStr(c, shared.syntaxerr);
            return;
        }
    }
    if (storearg && (withdist || withhash || withcoord)) {
        addReplyErrorFormat(c, "%s is not compatible with WITHDIST, WITHHASH and WITHCOORD options",
                            flags & G_SEARCHSTORE ? "GEOSEARCHSTORE" : "STORE option in GEORADIUS");
        return;
    }
    if ((flags & G_SEARCH) && !(frommember || fromloc)) {
        addReplyErrorFormat(c, "exactly one of FROMMEMBER or FROMLONLAT can be specified for %s",
                            c->argv[0].ptr);
        return;
    }
    if ((flags & G_SEARCH) && !(byradius || bybox)) {
        addReplyErrorFormat(c, "exactly one of BYRADIUS and BYBOX can be specified for %s",
                            c->argv[0].ptr);
        return;
    }
    if (any && !count) {
        addReplyError(c, "the ANY argument requires COUNT argument");
        return;
    }
    const char *event = flags & G_SEARCH ? "geosearchstore" : "georadiusstore";
    if (!co) {
        if (storearg) zsetStoreMembers(c, storearg, 0, NULL, NULL, NULL, event);
        else addReplyStr(c, shared.emptyarray);
        return;
    }
    if (count && !sort && !any) sort = 1;
    gresult r = {&s, gpoints, 0, gpoints_cap, any ? (size_t)count : 0};
    searchSet(co, &s, &r);
    gpoints = r.v;
    gpoints_cap = r.cap;
    if (!r.n && !storearg) {
        addReplyStr(c, shared.emptyarray);
        return;
    }
    size_t nret = count && (size_t)count < r.n ? (size_t)count : r.n;
    if (sort) qsort(r.v, r.n, sizeof(*r.v), sort > 0 ? byDistAsc : byDistDesc);
    if (!storearg) {
        int opts = withdist + withhash + withcoord;
        addReplyArrayLen(c, (long)nret);
        for (size_t i = 0; i < nret; i++) {
            const gpoint *p = &r.v[i];
            if (opts) addReplyArrayLen(c, opts + 1);
            addReplyBulk(c, p->m, p->len);
            if (withdist) addReplyDistance(c, p->dist / s.unit);
            if (withhash) addReplyLongLong(c, (long long)p->score);
            if (withcoord) addReplyPos(c, p->lon, p->lat);
        }
        return;
    }
    /* the store: the members' bytes are copied before the target is replaced */
    const char **m = ir_xrealloc(NULL, (nret ? nret : 1) * sizeof(*m));
    size_t *len = ir_xrealloc(NULL, (nret ? nret : 1) * sizeof(*len));
    double *sc = ir_xrealloc(NULL, (nret ? nret : 1) * sizeof(*sc));
    for (size_t i = 0; i < nret; i++) {
        m[i] = r.v[i].m;
        len[i] = r.v[i].len;
        sc[i] = storedist ? r.v[i].dist / s.unit : r.v[i].score;
    }
    zsetStoreMembers(c, storearg, nret, m, len, sc, event);
    free(m);
    free(len);
    free(sc);
}

void georadiusCommand(client *c) { georadiusGeneric(c, 1, G_COORDS); }
void georadiusbymemberCommand(client *c) { georadiusGeneric(c, 1, G_MEMBER); }
void georadiusroCommand(client *c) { georadiusGeneric(c, 1, G_COORDS | G_NOSTORE); }
void georadiusbymemberroCommand(client *c) { georadiusGeneric(c, 1, G_MEMBER | G_NOSTORE); }
void geosearchCommand(client *c) { georadiusGeneric(c, 1, G_SEARCH); }
void geosearchstoreCommand(client *c) { georadiusGeneric(c, 2, G_SEARCH | G_SEARCHSTORE); }

/* GEOHASH key [member ...]: standard 11-character geohashes (latitudes -90..90). */
void geohashCommand(client *c) {
    static const char alphabet[] = "0123456789bcdefghjkmnpqrstuvwxyz";
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_ZSET, &missing);
    if (!e && !missing) return;
    addReplyArrayLen(c, c->argc - 2);
    for (int j = 2; j < c->argc; j++) {
        double lon, lat;
        if (!e || !memberPos(e->v.coll, &c->argv[j], &lon, &lat)) {
            addReplyNull(c);
            continue;
        }
        ghash h = {0, 0};
        encodeIn(-180, 180, -90, 90, lon, lat, 26, &h);
        char buf[11];
        for (int i = 0; i < 10; i++) buf[i] = alphabet[(h.bits >> (52 - (i + 1) * 5)) & 0x1f];
        buf[10] = '0'; /* 52 bits make ten characters and two bits: the 11th is as Redis's */
        addReplyBulk(c, buf, 11);
    }
}

/* GEOPOS key [member ...] */
void geoposCommand(client *c) {
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_ZSET, &missing);
    if (!e && !missing) return;
    addReplyArrayLen(c, c->argc - 2);
    for (int j = 2; j < c->argc; j++) {
        double lon, lat;
        if (!e || !memberPos(e->v.coll, &c->argv[j], &lon, &lat)) addReplyNullArray(c);
        else addReplyPos(c, lon, lat);
    }
}

/* GEODIST key member1 member2 [M|KM|FT|MI] */
void geodistCommand(client *c) {
    double unit = 1;
    if (c->argc == 5) {
        if ((unit = unitOrReply(c, 4)) < 0) return;
    } else if (c->argc > 5) {
        addReplyStr(c, shared.syntaxerr);
        return;
    }
    int missing;
    dbEntry *e = lookupTyped(c, 1, OBJ_ZSET, &missing);
    if (!e) {
        if (missing) addReplyNull(c);
        return;
    }
    double x1, y1, x2, y2;
    if (!memberPos(e->v.coll, &c->argv[2], &x1, &y1) ||
        !memberPos(e->v.coll, &c->argv[3], &x2, &y2)) {
        addReplyNull(c);
        return;
    }
    addReplyDistance(c, distance(x1, y1, x2, y2) / unit);
}
