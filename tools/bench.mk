# `make bench` glue, included from the Makefile (-include tools/bench.mk).
# The harness is tools/bench; tools/bench-exec.c is its HTTP latency/throughput client, built
# on the client library (src/client, the objects cell links too).
# Knobs (environment): BENCH_N, BENCH_EXEC_N, BENCH_BYTES, BENCH_WARMUP, BENCH_PROXY_BYTES,
# BENCH_PROXY_N, BENCH_ONLY (exec, snapshot, sdk, pull, interpreter or stats), BENCH_PULL_N,
# BENCH_PULL_RUN_N, BENCH_PULL_LAYER_MB (tools/bench-pull, leg 10), BENCH_INTERP_N,
# BENCH_INTERP_CREATE_N, BENCH_INTERP_IMAGES (leg 11), BENCH_STATS_N, BENCH_STATS_WINDOW
# (tools/bench-stats, leg 12), BENCH_OUT, BENCH_KEEP.

BENCH_EXEC := $(BUILD)/bench-exec

$(BENCH_EXEC): $(call obj,tools/bench-exec.c $(CLIENT_SRC) $(COMMON_SRC))
	$(CC) $(CFLAGS) $(SAN) -o $@ $(filter %.o,$^) -Wl,--gc-sections -lcurl -ljansson -lcrypto -lwslay

# The throughput leg's two ends and the proxy leg's app: static, so that one binary runs on the
# host and in a busybox sandbox.
BENCH_TCP := $(BUILD)/bench-tcp

$(BENCH_TCP): tools/bench-tcp.c
	$(CC) $(CFLAGS) -static -o $@ $<

.PHONY: bench bench-baseline
bench: all $(BENCH_EXEC) $(BENCH_TCP)
	BUILD=$(BUILD) tools/bench

# What a change did to cell's own speed: BASE's build (any commit) against this tree's, legs 2,
# 3 and 9 alternating in one run (tools/bench-baseline; BENCH_BASE_ROUNDS rounds).
bench-baseline: all $(BENCH_EXEC) $(BENCH_TCP)
	BUILD=$(BUILD) tools/bench-baseline $(BASE)
