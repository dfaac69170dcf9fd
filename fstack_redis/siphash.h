/* siphash.h - SipHash-c-d (Aumasson & Bernstein), written from the paper.
 *
 * A leaf header (inline, no other include of this project) for whoever hashes
 * with a secret key: the keyspace's dict (db.c) uses c=1, d=3, what Redis and
 * CPython use for hash tables; lwIP's TCP initial sequence numbers
 * (dataplane/lwip_glue.c, RFC 6528's F()) use 2-4, whose known test vectors
 * of the reference tests/c/test_db.c checks.
 */
#ifndef IR_SIPHASH_H
#define IR_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t sipRotl64(uint64_t x, int b) { return (x << b) | (x >> (64 - b)); }

static inline uint64_t sipLoad64le(const uint8_t *p) {
    return (uint64_t)p[0] | (uint64_t)p[1] << 8 | (uint64_t)p[2] << 16 | (uint64_t)p[3] << 24 |
           (uint64_t)p[4] << 32 | (uint64_t)p[5] << 40 | (uint64_t)p[6] << 48 |
           (uint64_t)p[7] << 56;
}

#define SIP_ROUND \
    do { \
        v0 += v1; \
        v1 = sipRotl64(v1, 13); \
        v1 ^= v0; \
        v0 = sipRotl64(v0, 32); \
        v2 += v3; \
        v3 = sipRotl64(v3, 16); \
        v3 ^= v2; \
        v0 += v3; \
        v3 = sipRotl64(v3, 21); \
        v3 ^= v0; \
        v2 += v1; \
        v1 = sipRotl64(v1, 17); \
        v1 ^= v2; \
        v2 = sipRotl64(v2, 32); \
    } while (0)

static inline uint64_t siphash(const void *in, size_t inlen, const uint8_t k[16], int crounds,
                               int drounds) {
    const uint8_t *m = in;
    uint64_t k0 = sipLoad64le(k), k1 = sipLoad64le(k + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0;
    uint64_t v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0;
    uint64_t v3 = 0x7465646279746573ULL ^ k1;
    const uint8_t *end = m + (inlen & ~(size_t)7);
    uint64_t b = (uint64_t)inlen << 56;

    for (; m != end; m += 8) {
        uint64_t w = sipLoad64le(m);
        v3 ^= w;
        for (int i = 0; i < crounds; i++) SIP_ROUND;
        v0 ^= w;
    }
    switch (inlen & 7) {
    case 7: b |= (uint64_t)m[6] << 48; /* fall through */
    case 6: b |= (uint64_t)m[5] << 40; /* fall through */
    case 5: b |= (uint64_t)m[4] << 32; /* fall through */
    case 4: b |= (uint64_t)m[3] << 24; /* fall through */
    case 3: b |= (uint64_t)m[2] << 16; /* fall through */
    case 2: b |= (uint64_t)m[1] << 8;  /* fall through */
    case 1: b |= (uint64_t)m[0]; break;
    case 0: break;
    }
    v3 ^= b;
    for (int i = 0; i < crounds; i++) SIP_ROUND;
    v0 ^= b;
    v2 ^= 0xff;
    for (int i = 0; i < drounds; i++) SIP_ROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

static inline uint64_t siphash13(const void *in, size_t inlen, const uint8_t k[16]) {
    return siphash(in, inlen, k, 1, 3);
}

static inline uint64_t siphash24(const void *in, size_t inlen, const uint8_t k[16]) {
    return siphash(in, inlen, k, 2, 4);
}

#endif /* IR_SIPHASH_H */
