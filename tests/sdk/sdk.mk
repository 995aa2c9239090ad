# tests/sdk/sdk.mk: the official OpenSandbox TypeScript SDK (npm, pinned in
# tests/sdk/package-lock.json) driving a real celld built in $(BUILD).
# Needs root, node >= 20 and npm. Included from the top-level Makefile.
#
# --test-reporter=tap keeps node's closing "# pass N / # fail N" summary on a terminal too.

.PHONY: sdk-check
sdk-check: all
	cd tests/sdk && npm ci --no-audit --no-fund && \
		CELL_BUILD=$(abspath $(BUILD)) node --test --test-reporter=tap
