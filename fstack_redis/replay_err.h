/* The REPLAY.* and PARAM.* error codes: the first word of an error reply is its code (Redis's
 * convention, like WRONGTYPE, NOAUTH, BUSYGROUP), the human text follows. This list is
 * the one definition: replyReplayError() writes "-<CODE> <text>", pyctl/errors.py maps
 * each code to an exception class, and tests/test_error_codes.py reads this list to
 * check both and the README's table. Errors not listed here keep Redis's "ERR ..." form.
 *
 * X(code, when): BADPRIO's text starts with the index of the refused priority
 * ("-BADPRIO 3 invalid priority 'x': ..."), its one value in a fixed position, as
 * MOVED puts its slot. */
#ifndef IR_REPLAY_ERR_H
#define IR_REPLAY_ERR_H

/* the host's client (server.h's, or the module host's): opaque here */
typedef struct client client;

#define IR_REPLAY_ERRORS(X) \
    X(RATELIMITED, "the table's rate limiter held the call") \
    X(NOTABLE, "no such table (or it was dropped while the client waited)") \
    X(BUSYTABLE, "REPLAY.CREATE of a table that exists") \
    X(EMPTY, "a sample from a table with no items") \
    X(BADPRIO, "a priority that is not a finite number >= 0 or MAX (index first)") \
    X(MIXEDSIZE, "REPLAY.SAMPLE ... PACKED from a table whose items differ in size") \
    X(WRONGKIND, "an opaque-item command on a trajectory table, or the reverse") \
    X(NOSTREAM, "no such trajectory stream") \
    X(STALE, "PARAM.PUSH of a gradient more than MAXSTALE versions behind the table") \
    X(SYNCTIMEOUT, "a SYNC PARAM.PUSH whose round did not complete within its TIMEOUT")

/* Redis's words for a write refused under maxmemory (after "-OOM " or EXECABORT's prefix). */
#define IR_OOM_MSG "command not allowed when used memory > 'maxmemory'."

typedef enum {
#define IR_ERR_ENUM(code, when) IR_ERR_##code,
    IR_REPLAY_ERRORS(IR_ERR_ENUM)
#undef IR_ERR_ENUM
        IR_ERR__COUNT
} ir_errcode;

/* An error code's name ("NOTABLE"), as the reply's first word; each host's
 * replyReplayError writes it. */
static inline const char *replayErrorName(ir_errcode code) {
    static const char *const names[IR_ERR__COUNT] = {
#define IR_ERR_NAME(code, when) [IR_ERR_##code] = #code,
        IR_REPLAY_ERRORS(IR_ERR_NAME)
#undef IR_ERR_NAME
    };
    return names[code];
}

/* "-<CODE> " then fmt: one error reply, formatted on the stack (no allocation). */
void replyReplayError(client *c, ir_errcode code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
