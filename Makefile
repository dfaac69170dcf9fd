# inreplay: the two commands are `make demo` and `make test`; both install
# whatever is missing on a Debian machine first and are safe to re-run.
PY        ?= python3
BUILD     ?= build
ASAN      ?= build-asan
APT_PKGS  := build-essential pkg-config redis-server redis-tools clang libclang-rt-14-dev \
             iproute2 ethtool dpdk dpdk-dev libdpdk-dev liblwip-dev zlib1g-dev libzstd-dev dpkg-dev tcl patch \
             liblua5.1-0-dev lua-cjson-dev lua-bitop-dev clang-format chromium
# lwIP for the DPDK stack is built from Debian's source package (apt-get source)
LWIP_SRC  := build-deps/lwip-src
# redismodule.h for REPLAY.* as a Redis module (fstack_redis/module/) comes from
# Debian's redis source package, unpacked as Redis's own test suite uses it
REDIS_SRC := build-deps/redis-src
SUDO      := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
STAMP     := .deps-stamp
EXTRAS    ?= dev,bench,rl,ray,torchrl,rllib,sb3,jax,offline

.PHONY: all deps build test test-c test-py test-fuzz lint format docs demo bench bench-peers soak fuzz clean
FUZZ_SECONDS ?= 300

all: build

# System packages (only the missing ones), then the Python package's dependencies and
# tools (read from pyproject.toml). The package itself is not installed: a checkout's
# pyctl (python3 -m pyctl from here) uses the library in build/; `pip install .`
# builds and installs the whole package (docs/install.md).
deps: $(STAMP) $(LWIP_SRC)/src/core/tcp.c $(REDIS_SRC)/src/redismodule.h
$(LWIP_SRC)/src/core/tcp.c: | $(STAMP)
	dataplane/lwip/fetch-source.sh $(dir $(LWIP_SRC))
$(REDIS_SRC)/src/redismodule.h: | $(STAMP)
	tests/redis_suite/fetch-source.sh $(dir $(REDIS_SRC))
$(STAMP): pyproject.toml Makefile
	@missing=$$(for p in $(APT_PKGS); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:" $$missing; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $$missing; \
	fi
	$(PY) -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; \
	  print("\n".join(p["dependencies"] + [r for x in "$(EXTRAS)".split(",") \
	                                       for r in p["optional-dependencies"][x]]))' \
	  | $(PY) -m pip install -q -r /dev/stdin
	@touch $@

build: deps
	@[ -f $(BUILD)/build.ninja ] || meson setup $(BUILD) -Dwerror=true
	meson compile -C $(BUILD)

$(ASAN)/build.ninja: | deps
	meson setup $(ASAN) -Dwerror=true -Dbuildtype=debug -Db_sanitize=address,undefined \
	  -Db_lundef=false

test-c: build $(ASAN)/build.ninja
	meson test -C $(BUILD) --print-errorlogs
	meson compile -C $(ASAN)
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 meson test -C $(ASAN) --print-errorlogs

lint: deps
	$(PY) -m ruff check pyctl inreplay tests bench rl actors learner integrations fstack_redis/gen_commands.py \
	  fstack_redis/module/gen_module_table.py docs/hooks

# The C code's format (.clang-format; tests/test_format.py checks it).
format: deps
	git ls-files '*.c' '*.h' | xargs clang-format -i

test-py: build
	$(PY) -m pytest -q tests

# 30 minutes of inserting and sampling at full speed: memory must stay flat.
soak: build
	$(PY) bench/soak.py --json $(BUILD)/bench-soak.json
	$(PY) bench/report.py --soak $(BUILD)/bench-soak.json

# The RESP parser + dispatch under libFuzzer, ASan and UBSan (clang).
test-fuzz: deps
	tests/fuzz/run.sh 60

fuzz: deps
	tests/fuzz/run.sh $(FUZZ_SECONDS)

# The documentation site (mkdocs.yml, docs/) into build/site, warnings as errors: a
# broken link or anchor fails. Its command, configuration and flag references are
# generated from the sources at build time (docs/hooks/reference.py), so it needs the
# library. tests/test_docs.py checks the links, runs the code samples and screenshots it.
docs: build
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

test: test-c lint docs test-py test-fuzz

demo: build
	$(PY) -m pyctl demo

# Needs root for the veth/namespace path (bench/latency.py --loopback otherwise).
# Four systems (redis, kernel, kernel-poll, dpdk) on the shared veth
# and the kernel-stack three on a default-offloads veth, at MTU 1500 and 9000; the
# DPDK breakdowns of every workload a goal judges; CartPole on both stacks. ~35 min.
bench: build
	$(PY) bench/sumtree.py --json $(BUILD)/bench-sumtree.json
	$(PY) bench/server_time.py --items 100000,2000000 --rounds 5 --json $(BUILD)/bench-server-time.json
	@[ ! -f $(BUILD)/bench-latency.json ] || cp $(BUILD)/bench-latency.json $(BUILD)/bench-latency.prev.json
	$(PY) bench/latency.py --mtu 1500,9000 --paths shared,kernel-default \
	  --json $(BUILD)/bench-latency.json --plots $(BUILD)/bench-plots
	-$(PY) bench/latency.py --systems dpdk --dpdk-pmd af_xdp --mtu 1500 --paths shared \
	  --sizes 64,65536,1048576,13631488 --batches 512 --json $(BUILD)/bench-latency-xdp.json
	rm -f $(BUILD)/bench-module.json
	-$(PY) bench/latency.py --systems kernel,redis-module --mtu 1500 --paths shared \
	  --sizes 64,65536,1048576,13631488 --batches 512 --packed-batches 512 \
	  --json $(BUILD)/bench-module.json
	$(PY) bench/latency.py --loopback --unix --shm --systems kernel,kernel-poll,redis \
	  --json $(BUILD)/bench-latency-local.json
	$(PY) bench/throughput.py --json $(BUILD)/bench-throughput.json
	rm -f $(BUILD)/bench-breakdown.json
	-$(PY) bench/breakdown.py --mtu 1500,9000 --json $(BUILD)/bench-breakdown.json \
	  --workloads get:64,get:64KB,get:1MB,get:13MB,sample:512x128,sample-packed:512x128,sample:512x28224,sample-packed:512x28224
	@# exit 3 = not solved: a result the report shows, not a reason to stop the bench
	$(PY) -m pyctl demo --stack kernel --out $(BUILD)/bench-cartpole-kernel || [ $$? = 3 ]
	$(PY) -m pyctl demo --stack dpdk --out $(BUILD)/bench-cartpole || [ $$? = 3 ]
	$(PY) -m pyctl demo --env-id ALE/Breakout-v5 --minutes 2 --learning-starts 5000 \
	  --publish-every 5 --out $(BUILD)/bench-breakout
	$(PY) bench/swarm.py --json $(BUILD)/bench-swarm.json
	$(PY) bench/swarm.py --item-bytes 640,49404 --phases learner,apex --seconds 10 \
	  --json $(BUILD)/bench-swarm-atari.json
	$(PY) bench/compress.py --json $(BUILD)/bench-compress.json
	$(PY) bench/trajectory_bytes.py --json $(BUILD)/bench-trajectory.json --readme docs/concepts/trajectories.md
	$(PY) bench/trajectory_bytes.py --apex --transitions 2000000 --demo $(BUILD)/bench-breakout/summary.json \
	  --json $(BUILD)/bench-apex-frames.json --readme docs/concepts/trajectories.md
	$(PY) bench/limiter.py --seconds 600 --json $(BUILD)/bench-limiter.json
	$(PY) bench/params.py --json $(BUILD)/bench-params.json
	rm -f $(BUILD)/bench-integrations.json
	-$(PY) bench/integrations.py --torchrl --rllib --sb3 --jax --reverb --rounds 2 --steps 12800 \
	  --json $(BUILD)/bench-integrations.json
	@[ ! -f $(BUILD)/bench-peers.json ] || mv $(BUILD)/bench-peers.json $(BUILD)/bench-peers.prev.json
	-$(PY) bench/peers.py --json $(BUILD)/bench-peers.json
	$(PY) bench/report.py --sumtree $(BUILD)/bench-sumtree.json \
	  --swarm $(BUILD)/bench-swarm.json --swarm $(BUILD)/bench-swarm-atari.json \
	  --compress $(BUILD)/bench-compress.json --limiter $(BUILD)/bench-limiter.json \
	  --params $(BUILD)/bench-params.json \
	  --server-time $(BUILD)/bench-server-time.json \
	  --latency $(BUILD)/bench-latency.json --throughput $(BUILD)/bench-throughput.json \
	  --latency-prev $(BUILD)/bench-latency.prev.json \
	  --demo $(BUILD)/bench-cartpole/summary.json \
	  --demo-kernel $(BUILD)/bench-cartpole-kernel/summary.json \
	  --breakout $(BUILD)/bench-breakout/summary.json \
	  $$([ -f $(BUILD)/bench-breakdown.json ] && echo --breakdown $(BUILD)/bench-breakdown.json) \
	  $$([ -f $(BUILD)/bench-latency-xdp.json ] && echo --nics $(BUILD)/bench-latency-xdp.json) \
	  $$([ -f $(BUILD)/bench-module.json ] && echo --module-host $(BUILD)/bench-module.json) \
	  $$([ -f $(BUILD)/bench-peers.json ] && echo --peers $(BUILD)/bench-peers.json) \
	  $$([ -f $(BUILD)/bench-peers.prev.json ] && echo --peers-prev $(BUILD)/bench-peers.prev.json) \
	  $$([ -f $(BUILD)/bench-integrations.json ] && echo --integrations $(BUILD)/bench-integrations.json)
	-$(PY) bench/tcp_recovery.py --json $(BUILD)/bench-tcp-recovery.json

# inreplay against Reverb 0.14, TorchRL 0.14, cpprb and Redis + a learner-side
# tree (the Ape-X loop at 128 B, 640 B and 28 KB items). Makes build/peers-venv (Reverb +
# TensorFlow) and build/peers-venv-torchrl (torch 2.14.1 for TorchRL's extension) on first
# use. PEERS_ARGS=--quick took 11 min on a loaded 2-core machine (the full run is longer).
# the same-host shm path, cpprb's single learner and echo 0.2.1's stream
# (build/peers-venv-echo) against QUEUE tables; the last run's JSON is kept as
# bench-peers.prev.json, whose TCP and DPDK figures this run's must keep.
bench-peers: build
	@[ ! -f $(BUILD)/bench-peers.json ] || mv $(BUILD)/bench-peers.json $(BUILD)/bench-peers.prev.json
	$(PY) bench/peers.py --json $(BUILD)/bench-peers.json $(PEERS_ARGS)
	$(PY) bench/report.py --peers $(BUILD)/bench-peers.json \
	  $$([ -f $(BUILD)/bench-peers.prev.json ] && echo --peers-prev $(BUILD)/bench-peers.prev.json)

# Redis 7.0.15's own unit tests (Debian's source package,
# fetched into build-deps/) in external-server mode against stock redis-server and
# inreplay on the kernel stack and, as root with a DPDK build, on DPDK; the JSON
# summary has the per-unit figures. `make test` runs five units on the kernel stack
# (tests/test_redis_suite.py). Arguments: REDIS_SUITE_ARGS='--singledb --units ...'.
.PHONY: redis-suite
redis-suite: build
	$(PY) tests/redis_suite/run.py --json $(BUILD)/redis-suite.json $(REDIS_SUITE_ARGS)
	$(PY) bench/report.py --redis-suite $(BUILD)/redis-suite.json

clean:
	rm -rf $(BUILD) $(ASAN) build-fuzz build-deps $(STAMP)

# The fault matrix through the impairment bridge (bench/impair.c; root): loss,
# delay, reorder, duplication and a loss burst, each direction and both, 13 MB values,
# both stacks. `make test` runs each fault once in both directions with 2 MB values.
.PHONY: faults
faults: build
	INREPLAY_FAULTS=full $(PY) -m pytest -q tests/test_impair.py tests/test_faults.py \
	  tests/test_tcp_recovery.py

# The fault benchmark (root): both stacks under 0.1/1/5% loss, reordering and
# duplication, GET 64 B-13 MB, SAMPLE 512 x 28 KB, first replies on fresh connections;
# the fault block and goals of docs/stacks/index.md. FAULTS_ARGS=--quick: about 8 minutes.
.PHONY: bench-faults
bench-faults: build
	$(PY) bench/faults.py $(FAULTS_ARGS) --json $(BUILD)/bench-faults.json
	$(PY) bench/report.py --faults $(BUILD)/bench-faults.json
