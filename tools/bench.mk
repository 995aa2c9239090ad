# `make bench` glue, included from the Makefile (-include tools/bench.mk).
# The harness is tools/bench; tools/bench-exec.c is its HTTP latency/throughput client.
# Knobs (environment): BENCH_N, BENCH_EXEC_N, BENCH_BYTES, BENCH_WARMUP, BENCH_OUT, BENCH_KEEP.

BENCH_EXEC := $(BUILD)/bench-exec

$(BENCH_EXEC): tools/bench-exec.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -o $@ $< -lcurl -ljansson

.PHONY: bench
bench: all $(BENCH_EXEC)
	BUILD=$(BUILD) tools/bench
