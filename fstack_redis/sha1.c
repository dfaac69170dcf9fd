/* sha1.c - SHA-1 (FIPS 180-4), for the script cache's keys (EVALSHA) and
 * redis.sha1hex. Written from the specification; one call hashes a buffer. */
#include <stdint.h>
#include <string.h>

#include "sha1.h"

static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void block(uint32_t h[5], const unsigned char *p) {
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5A827999u;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ED9EBA1u;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8F1BBCDCu;
        } else {
            f = b ^ c ^ d;
            k = 0xCA62C1D6u;
        }
        uint32_t t = rol(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol(b, 30);
        b = a;
        a = t;
    }
    h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

void ir_sha1(unsigned char out[20], const void *data, size_t len) {
    uint32_t h[5] = {0x67452301u, 0xEFCDAB89u, 0x98BADCFEu, 0x10325476u, 0xC3D2E1F0u};
    const unsigned char *p = data;
    size_t left = len;
    while (left >= 64) {
        block(h, p);
        p += 64;
        left -= 64;
    }
    unsigned char tail[128];
    memset(tail, 0, sizeof(tail));
    if (left) memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t n = left + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8u;
    for (int i = 0; i < 8; i++) tail[n - 1 - i] = (unsigned char)(bits >> (8 * i));
    block(h, tail);
    if (n == 128) block(h, tail + 64);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (unsigned char)(h[i] >> 24);
        out[4 * i + 1] = (unsigned char)(h[i] >> 16);
        out[4 * i + 2] = (unsigned char)(h[i] >> 8);
        out[4 * i + 3] = (unsigned char)h[i];
    }
}

void ir_sha1hex(char out[41], const void *data, size_t len) {
    unsigned char d[20];
    ir_sha1(d, data, len);
    for (int i = 0; i < 20; i++) {
        out[2 * i] = "0123456789abcdef"[d[i] >> 4];
        out[2 * i + 1] = "0123456789abcdef"[d[i] & 15];
    }
    out[40] = '\0';
}
