/* t_sample_reply.c - the parts of a REPLAY.SAMPLE reply that every kind of
 * table shares: whether the reply fits the client's limits before anything
 * is drawn, WITHSTATS (the shard's side of exact sampling across a group)
 * and WITHINFO (Reverb's sample info). Used by t_replay.c (opaque items)
 * and t_traj.c (trajectory columns).
 *
 * Why a file of its own: both handler files build these replies, and with
 * the builder here neither calls the other for it (no cycle).
 */
#include <string.h>

#include "replay.h"
#include "replay_host.h"
#include "t_sample_reply.h"

/* The shard's side of exact sampling across a group (WITHSTATS): its total
 * and minimum positive stored priority (float64), its live size (int64), and
 * each drawn item's probability inside the shard (n float64): 24 + 8n bytes.
 * A client that knows every shard's total computes each draw's global
 * probability and importance weight from these (pyctl/sharded.py). A
 * uniform sampler reports mass 1 per item (total = size, minimum 1). */
void addSampleStats(client *c, ir_table *t, size_t n) {
    double total, mn;
    uint64_t live;
    const double *p = tableSampleShardStats(t, n, &total, &mn, &live);
    char head[24];
    memcpy(head, &total, 8);
    memcpy(head + 8, &mn, 8);
    memcpy(head + 16, &live, 8);
    hostReplyBulkPart(c, head, sizeof(head));
    hostReplyBulkPart(c, (const char *)p, 8 * n);
}

int sampleReplyFits(client *c, size_t n, uint64_t bulk, uint64_t total, int exact) {
    uint64_t max_bulk = hostProtoMaxBulkLen(c), maxmemory = hostMaxmemory(c);
    if (bulk > max_bulk) {
        hostReplyErrorFormat(c,
                             "a sample of %zu items would put %llu bytes in one reply string, "
                             "above proto-max-bulk-len (%llu): sample fewer items",
                             n, (unsigned long long)bulk, (unsigned long long)max_bulk);
        return -1;
    }
    uint64_t obl = hostOutputBufferLimit(c);
    if (exact && obl && total > obl) {
        hostReplyErrorFormat(c,
                             "a sample of %zu items would be a reply of %llu bytes, above the "
                             "client-output-buffer-limit (%llu): sample fewer items",
                             n, (unsigned long long)total, (unsigned long long)obl);
        return -1;
    }
    if (maxmemory) {
        uint64_t used = hostUsedMemory(c);
        uint64_t room = used < maxmemory ? maxmemory - used : 0;
        if (total > room) {
            hostReplyErrorFormat(c,
                                 "a sample of %zu items would be a reply of %llu bytes, above "
                                 "maxmemory's headroom (%llu bytes): sample fewer items",
                                 n, (unsigned long long)total, (unsigned long long)room);
            return -1;
        }
    }
    return 0;
}

/* WITHINFO: Reverb's sample info, 8 + 20n bytes: the table's size when the
 * sample began (int64), then per item its probability (n float64: of that
 * draw, as the sampler drew it), its stored priority (n float64) and its
 * times sampled, this draw included (n uint32). */
void addSampleInfo(client *c, ir_table *t, size_t n) {
    tableSampleProb(t, n);
    ir_sample_view v;
    tableSampleView(t, n, &v);
    hostReplyBulkPart(c, (const char *)&v.size0, 8);
    hostReplyBulkPart(c, (const char *)v.prob, 8 * n);
    hostReplyBulkPart(c, (const char *)v.stored, 8 * n);
    hostReplyBulkPart(c, (const char *)v.times, 4 * n);
}
