/* test_pin.c - pinned reply memory (reply.c's pins, replay.c's arena, the
 * keyspace's values): a reply segment that points into a replay arena or a
 * stored value keeps its bytes until it is written or dropped, whatever
 * happens to the table or the key in between. Run under ASan by `make test`,
 * which turns any use after free/munmap or leak into a failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "db_internal.h"
#include "replay.h"
#include "table.h" /* white box: the table's storage */
#include "check.h"
#include "server.h"

#define ITEM 8192

/* A client with no connection: replies pile up in its segments. */
static client *fakeClient(ir_server *s) {
    client *c = calloc(1, sizeof(*c));
    c->srv = s;
    c->id = s->next_client_id++;
    c->bulklen = -1;
    c->flags = CLIENT_CLOSED; /* freeClient must not call the transport */
    c->next = s->clients;
    if (s->clients) s->clients->prev = c;
    s->clients = c;
    s->nclients++;
    return c;
}

static int segsRef(const client *c, const ir_pin *pin) {
    int n = 0;
    for (int i = 0; i < c->nsegs; i++) n += c->segs[i].pin == pin && c->segs[i].ref != NULL;
    return n;
}

/* The bytes segment i still has to send. */
static const char *segBytes(const client *c, int i) {
    const ir_seg *s = &c->segs[i];
    return (s->ref ? s->ref : c->obuf + s->off) + (i == 0 ? c->sent : 0);
}

static int allBytes(const char *p, size_t n, char ch) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != ch) return 0;
    return 1;
}

static ir_table *mkTable(ir_server *s, const char *name) {
    ir_table_opts o = {.capacity = 4,
                       .alpha = 1.0,
                       .beta = 0.4,
                       .epsilon = 1e-6,
                       .maxbytes = 4 * ITEM,
                       .seed = 99};
    ir_table *t = NULL;
    const char *err;
    CHECK(tableCreate(s->tables, name, strlen(name), &o, &t, &err) == 0);
    return t;
}

static void addItem(ir_table *t, char ch) {
    static char buf[ITEM];
    memset(buf, ch, sizeof(buf));
    ir_item_in it = {buf, ITEM, 1.0, 0};
    uint64_t id;
    const char *err;
    CHECK(tableAdd(t, &it, 1, &id, &err) == 0);
}

/* Reference every live item (oldest first) as a reply would. */
static void replyItems(client *c, ir_table *t) {
    for (uint64_t id = t->oldest_id; id < t->next_id; id++) {
        ir_item_view v;
        tableItem(t, id, &v);
        addReplyRefPinned(c, v.data, v.len, &t->pin);
    }
}

static void testArenaOverwrite(void) {
    ir_config cfg;
    ir_config_init(&cfg);
    ir_server *s = server_new(&cfg);
    client *c = fakeClient(s);
    ir_table *t = mkTable(s, "t");
    addItem(t, 'a');
    addItem(t, 'b');
    addItem(t, 'c');
    addItem(t, 'd');
    replyItems(c, t); /* segments: a b c d, each a reference */
    ir_pin *pin = t->pin;
    CHECK(pin && pin->refs == 4 && segsRef(c, pin) == 4 && c->nsegs == 4);
    c->sent = 100; /* the stack took 100 bytes of 'a' */
    c->pending_bytes -= 100;

    /* A fifth item goes where 'a' was: only that segment is copied, and only
     * its unsent part. */
    addItem(t, 'e');
    CHECK(t->pin == pin && pin->refs == 3 && segsRef(c, pin) == 3);
    CHECK(c->segs[0].ref == NULL && c->segs[0].len == ITEM - 100 && c->sent == 0);
    CHECK(c->olen == ITEM - 100 && allBytes(segBytes(c, 0), ITEM - 100, 'a'));
    CHECK(allBytes(segBytes(c, 1), ITEM, 'b') && allBytes(segBytes(c, 3), ITEM, 'd'));
    CHECK(s->pins.nused == 1 && s->pins.ndetached == 0);

    /* An ADD that rewrites nothing pinned copies nothing. */
    client *d = fakeClient(s);
    CHECK(t->pin == pin);
    addItem(t, 'f'); /* over 'b' */
    CHECK(pin->refs == 2 && c->segs[1].ref == NULL && allBytes(segBytes(c, 1), ITEM, 'b'));
    CHECK(d->nsegs == 0 && d->olen == 0);

    /* Dropping the table keeps the arena mapped for the last two segments. */
    uint64_t before = serverUsedMemory(s);
    CHECK(tableDrop(s->tables, "t", 1) == 0);
    CHECK(s->pins.ndetached == 1 && s->pins.detached_bytes == 4 * ITEM);
    CHECK(serverUsedMemory(s) + 4 * ITEM + 4 * 36 >= before); /* the items still count */
    CHECK(allBytes(segBytes(c, 2), ITEM, 'c') && allBytes(segBytes(c, 3), ITEM, 'd'));
    clientDiscardReply(c); /* unmaps it */
    CHECK(s->pins.ndetached == 0 && s->pins.detached_bytes == 0 && s->pins.nused == 0);

    /* A client freed with pinned segments releases them. */
    t = mkTable(s, "u");
    addItem(t, 'x');
    addItem(t, 'y');
    replyItems(d, t);
    replyItems(d, t);
    CHECK(t->pin && t->pin->refs == 4);
    tablesFlush(s->tables); /* FLUSHALL */
    CHECK(s->pins.ndetached == 1 && allBytes(segBytes(d, 3), ITEM, 'y'));
    freeClient(d);
    CHECK(s->pins.ndetached == 0 && s->pins.nused == 0);
    freeClient(c);
    server_free(s);
}

/* A batch that wraps the ring more than once: every overwritten reference is
 * copied before its bytes change, once. */
static void testArenaBigBatch(void) {
    ir_config cfg;
    ir_config_init(&cfg);
    ir_server *s = server_new(&cfg);
    client *c = fakeClient(s);
    ir_table *t = mkTable(s, "t");
    addItem(t, 'a');
    addItem(t, 'b');
    replyItems(c, t);
    static char bufs[10][ITEM];
    ir_item_in its[10];
    uint64_t ids[10];
    for (int k = 0; k < 10; k++) {
        memset(bufs[k], '0' + k, ITEM);
        its[k] = (ir_item_in){bufs[k], ITEM, 1.0, 0};
    }
    const char *err;
    CHECK(tableAdd(t, its, 10, ids, &err) == 0);
    CHECK(t->pin == NULL && s->pins.nused == 0 && c->nsegs == 2);
    CHECK(allBytes(segBytes(c, 0), ITEM, 'a') && allBytes(segBytes(c, 1), ITEM, 'b'));
    ir_item_view v;
    tableItem(t, ids[9], &v);
    CHECK(allBytes(v.data, ITEM, '9'));
    freeClient(c);
    server_free(s);
}

static void testValues(void) {
    ir_config cfg;
    ir_config_init(&cfg);
    ir_server *s = server_new(&cfg);
    client *c = fakeClient(s);
    ir_db *db = s->db;
    char *big = malloc(ITEM);
    memset(big, 'v', ITEM);
    dbkey k = dbKey(db, "k", 1);
    dbEntry *e = dbAdd(db, &k, OBJ_STRING, 0);
    strSetValue(db, e, big, ITEM, 0);
    addReplyBulkPinned(c, e->v.str.ptr, e->v.str.len, &e->v.str.pin);
    addReplyBulkPinned(c, e->v.str.ptr, e->v.str.len, &e->v.str.pin);
    ir_pin *pin = e->v.str.pin;
    CHECK(pin && pin->refs == 2);
    /* "$8192\r\n" ref "\r\n$8192\r\n" ref "\r\n" */
    CHECK(c->nsegs == 5 && c->segs[1].pin == pin && c->segs[3].pin == pin);
    uint64_t used = serverUsedMemory(s);
    CHECK(dbDelete(db, &k) == 1);
    CHECK(s->pins.ndetached == 1 && serverUsedMemory(s) + 256 >= used);
    CHECK(allBytes(segBytes(c, 1), ITEM, 'v') && allBytes(segBytes(c, 3), ITEM, 'v'));
    /* small values are copied, never pinned */
    e = dbAdd(db, &k, OBJ_STRING, 0);
    strSetValue(db, e, big, IR_REF_MIN - 1, 0);
    addReplyBulkPinned(c, e->v.str.ptr, e->v.str.len, &e->v.str.pin);
    CHECK(e->v.str.pin == NULL && s->pins.nused == 1);
    freeClient(c);
    CHECK(s->pins.ndetached == 0 && s->pins.nused == 0 && s->pins.detached_bytes == 0);
    free(big);
    server_free(s);
}

/* Anything not pinned is copied when it is added, however big: a command may
 * free or rewrite its buffer before the reply is written (ACL GETUSER builds
 * three descriptions in one buffer, LPOP frees the element it replies with). */
static void testUnpinnedBodiesAreCopied(void) {
    ir_config cfg;
    ir_config_init(&cfg);
    ir_server *s = server_new(&cfg);
    client *c = fakeClient(s);
    char *buf = malloc(ITEM);
    memset(buf, 'k', ITEM);
    addReplyBulk(c, buf, ITEM);
    memset(buf, 'x', ITEM); /* reused, as replyUser's sbuf was */
    addReplyVerbatim(c, buf, ITEM, "txt");
    free(buf);
    CHECK(!c->has_refs);
    for (int i = 0; i < c->nsegs; i++) CHECK(c->segs[i].ref == NULL);
    const char *out = segBytes(c, 0);
    CHECK(!memcmp(out, "$8192\r\n", 7) && allBytes(out + 7, ITEM, 'k'));
    CHECK(!memcmp(out + 7 + ITEM, "\r\n$8192\r\n", 9) && allBytes(out + 16 + ITEM, ITEM, 'x'));
    CHECK(c->pending_bytes == 2 * (7 + ITEM + 2));
    freeClient(c);
    server_free(s);
}

int main(void) {
    testUnpinnedBodiesAreCopied();
    testArenaOverwrite();
    testArenaBigBatch();
    testValues();
    return checkSummary();
}
