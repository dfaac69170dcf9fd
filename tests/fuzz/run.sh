#!/usr/bin/env bash
# run.sh - build the RESP fuzz harness with clang (libFuzzer + ASan + UBSan) and run it.
#
#   tests/fuzz/run.sh [SECONDS] [extra libFuzzer flags...]   build, then fuzz for SECONDS (default 60)
#   tests/fuzz/run.sh --build                                 build only (skipped when up to date)
#   tests/fuzz/run.sh --replay                                build, then replay the seed corpus once
#
# The harness is build-fuzz/fuzz_resp (override the directory with FUZZ_BUILD).
# Fuzzing starts from a scratch copy of tests/fuzz/corpus under build-fuzz/, so
# the repository's seed corpus never grows; new crash/leak/timeout inputs land in
# build-fuzz/artifacts/. Extra flags go to libFuzzer (e.g. -only_ascii=1, -jobs=2).
# Exit status: 0 when the run ended without a finding, non-zero otherwise.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=${FUZZ_BUILD:-build-fuzz}
BIN=$OUT/fuzz_resp
CC=${FUZZ_CC:-clang}
CFLAGS=(-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer
        -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
        -Ifstack_redis -Ifstack_redis/replay -I"$OUT"
        -Wno-constant-logical-operand)
# what meson.build gives the library: the project version (written there only) and
# the Lua it links: Redis's own (deps/lua of the redis source package make deps
# unpacks, built below with the sanitizers, as meson builds it), else Debian's
# liblua5.1 with the cjson and bit modules when pkg-config finds them
VERSION=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" meson.build | head -1)
CFLAGS+=("-DIR_VERSION_STR=\"$VERSION\"")
LIBS=(-lm -lz)
LUA_SRC=${REDIS_SRC:-build-deps/redis-src}/deps/lua/src
LUA_OBJS=()
if [[ -f $LUA_SRC/lapi.c ]]; then
    LUA_SRC=$(cd "$LUA_SRC" && pwd)
    CFLAGS+=(-isystem "$LUA_SRC" -DIR_HAVE_LUA_CJSON=1 -DIR_HAVE_LUA_BITOP=1 -DIR_HAVE_LUA_CMSGPACK=1
             -DIR_HAVE_LUA_STRUCT=1 -DIR_LUA_REDIS=1 "-DIR_LUA_FROM=\"redis deps/lua\"")
    for n in lapi lcode ldebug ldo ldump lfunc lgc llex lmem lobject lopcodes lparser lstate \
             lstring ltable ltm lundump lvm lzio strbuf fpconv lauxlib lbaselib ldblib liolib \
             lmathlib loslib ltablib lstrlib loadlib linit lua_cjson lua_struct lua_cmsgpack lua_bit; do
        LUA_OBJS+=("$LUA_SRC/$n.c")
    done
else
    CFLAGS+=("-DIR_LUA_FROM=\"system liblua5.1\"")
    for mod in lua5.1:"" lua5.1-cjson:IR_HAVE_LUA_CJSON lua5.1-bitop:IR_HAVE_LUA_BITOP; do
        pc=${mod%%:*} def=${mod#*:}
        if pkg-config --exists "$pc"; then
            read -r -a f <<<"$(pkg-config --cflags "$pc")"; CFLAGS+=("${f[@]}")
            read -r -a l <<<"$(pkg-config --libs "$pc")"; LIBS+=("${l[@]}")
            [[ -n $def ]] && CFLAGS+=("-D$def=1")
        fi
    done
fi

build() {
    command -v "$CC" >/dev/null || { echo "fuzz: $CC not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
    mkdir -p "$OUT"
    local srcs=(fstack_redis/*.c fstack_redis/replay/*.c fstack_redis/replay/selectors/*.c
                tests/fuzz/fuzz_resp.c)
    local stale=0
    if [[ ! -x $BIN ]]; then stale=1; else
        for f in "${srcs[@]}" fstack_redis/*.h fstack_redis/replay/*.h fstack_redis/commands.json \
                 fstack_redis/gen_commands.py tests/fuzz/run.sh meson.build; do
            [[ $f -nt $BIN ]] && { stale=1; break; }
        done
    fi
    if (( stale )); then
        echo "fuzz: building $BIN"
        # the command table, generated from commands.json as the meson build does
        python3 fstack_redis/gen_commands.py fstack_redis/commands.json "$OUT/commands_table.inc"
        if (( ${#LUA_OBJS[@]} )); then
            # Redis's Lua with Redis's flags (deps/Makefile), instrumented like the rest
            # but for float-cast-overflow: Lua 5.1's lua_number2int is a plain cast
            # (LUA_ANSI), checked by a round trip right after (ltable.c, lvm.c), so a
            # number beyond int is detected by Lua, not used
            mkdir -p "$OUT/lua"
            (cd "$OUT/lua" && "$CC" -std=gnu99 -w -g -O1 -fno-omit-frame-pointer \
                -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined \
                -fno-sanitize=float-cast-overflow \
                -DLUA_ANSI -DENABLE_CJSON_GLOBAL -DREDIS_STATIC= -DLUA_USE_MKSTEMP \
                -c "${LUA_OBJS[@]}")
            rm -f "$OUT/libredis_lua.a"
            ar rcs "$OUT/libredis_lua.a" "$OUT"/lua/*.o
            LIBS=("$OUT/libredis_lua.a" "${LIBS[@]}")
        fi
        "$CC" "${CFLAGS[@]}" "${srcs[@]}" "${LIBS[@]}" -o "$BIN.tmp"
        mv "$BIN.tmp" "$BIN"
    fi
}

# ASan: abort on the first report; allocation failures are findings, not NULLs.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1:allocator_may_return_null=0:detect_stack_use_after_return=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}

case "${1:-}" in
--build)
    build
    exit 0
    ;;
--replay)
    build
    mkdir -p "$OUT/artifacts"
    exec "$BIN" -runs=0 -rss_limit_mb=3072 -timeout=10 -artifact_prefix="$OUT/artifacts/" tests/fuzz/corpus
    ;;
esac

SECONDS_TO_RUN=${1:-60}
shift || true
[[ $SECONDS_TO_RUN =~ ^[0-9]+$ ]] || { echo "usage: $0 [SECONDS|--build|--replay] [libFuzzer flags]" >&2; exit 2; }
build

WORK=$OUT/corpus-work
ART=$OUT/artifacts
mkdir -p "$WORK" "$ART"
cp -n tests/fuzz/corpus/* "$WORK"/ 2>/dev/null || true
LOG=$OUT/fuzz-$(date +%Y%m%d-%H%M%S)-$$.log

start=$(date +%s)
set +e
# the full log goes to $LOG; the terminal gets libFuzzer's pulse lines and findings
"$BIN" -max_total_time="$SECONDS_TO_RUN" -dict=tests/fuzz/resp.dict -max_len=73728 \
    -rss_limit_mb=3072 -malloc_limit_mb=2048 -timeout=10 -print_final_stats=1 \
    -artifact_prefix="$ART/" "$@" "$WORK" 2>&1 | tee "$LOG" \
    | grep -a -E --line-buffered '(pulse|INITED|DONE|ERROR|SUMMARY|invariant|runtime error|Test unit written)' >&2
rc=${PIPESTATUS[0]}
set -e
elapsed=$(( $(date +%s) - start ))

last() { grep -Eo "$1" "$LOG" | tail -1 | grep -Eo '[0-9]+' | tail -1 || true; }
runs=$(last 'stat::number_of_executed_units: *[0-9]+')
cov=$(grep -Eo 'cov: [0-9]+ ft: [0-9]+' "$LOG" | tail -1 || true)
crashes=$(grep -c 'Test unit written to' "$LOG" || true)
echo "fuzz: ${runs:-?} runs in $elapsed s, ${cov:-cov: ?}, ${crashes:-0} crashes (log $LOG)"
if (( rc != 0 || crashes != 0 )); then
    echo "fuzz: FAILED (libFuzzer exit $rc); reproduce with: $BIN <file from $ART/>" >&2
    exit 1
fi
