/* test_addr.c - the server's own IP address parser (ir_parse_ip, util.c) against the C
 * library's inet_pton: the same verdict and the same bytes for every string here, and
 * for random strings over the characters addresses are made of. */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "server.h"

static void same(const char *s) {
    unsigned char ours[16], lib4[4], lib6[16];
    int fam = ir_parse_ip(s, strlen(s), ours);
    int is4 = inet_pton(AF_INET, s, lib4) == 1, is6 = !is4 && inet_pton(AF_INET6, s, lib6) == 1;
    int want = is4 ? 4 : is6 ? 6 : 0;
    CHECKF(fam == want, "'%s': %d, inet_pton says %d", s, fam, want);
    if (fam == 4 && is4) CHECKF(memcmp(ours, lib4, 4) == 0, "'%s': bytes differ", s);
    if (fam == 6 && is6) CHECKF(memcmp(ours, lib6, 16) == 0, "'%s': bytes differ", s);
}

int main(void) {
    static const char *cases[] = {
        "127.0.0.1",
        "0.0.0.0",
        "255.255.255.255",
        "10.83.0.2",
        "1.2.3",
        "1.2.3.4.5",
        "256.1.1.1",
        "01.2.3.4",
        "1.2.3.04",
        "1..2.3",
        "",
        ".",
        "1.2.3.4 ",
        " 1.2.3.4",
        "a.b.c.d",
        "::",
        "::1",
        "1::",
        "fe80::1",
        "2001:db8::ff00:42:8329",
        "2001:0db8:0000:0000:0000:ff00:0042:8329",
        "::ffff:10.0.0.1",
        "::ffff:1.2.3",
        "1:2:3:4:5:6:7:8",
        "1:2:3:4:5:6:7",
        "1:2:3:4:5:6:7:8:9",
        "1::2::3",
        ":1:2:3:4:5:6:7",
        "1:2:3:4:5:6:7:",
        "12345::1",
        "g::1",
        "1:2:3:4:5:6:1.2.3.4",
        "1:2:3:4:5:6:7:1.2.3.4",
        "::1.2.3.4",
        "1::1.2.3.4",
        ":::",
        "1:::2",
        "::ffff:01.2.3.4",
        "ABCD:EF01::",
        "0:0:0:0:0:0:0:0",
        "1::2:3:4:5:6:7",
        "1::2:3:4:5:6:7:8",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) same(cases[i]);
    /* random strings over the alphabet of addresses */
    static const char alpha[] = "0123456789abcdefABCDEF:.:.:";
    srand(7);
    char buf[48];
    for (int k = 0; k < 200000; k++) {
        int n = rand() % 40;
        for (int i = 0; i < n; i++) buf[i] = alpha[rand() % (int)(sizeof(alpha) - 1)];
        buf[n] = '\0';
        same(buf);
    }
    return checkSummary();
}
