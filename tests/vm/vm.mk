# `make vmcheck`: the integration suites on a pure cgroup v2 machine, Debian's stock kernel
# booted in qemu (tools/vmtest; tests/vm/init and tests/vm/stage2 run inside). Root, and
# tools/install-deps --vm. Included by the top Makefile; uses its BUILD, IMAGES_DIR and
# tests/Makefile.inc's IT_TESTS and TEST_IMAGE_CACHE.
#
# VM_SUITES: the suites to run; by default every it_*. it_default, it_security and it_mirror
# need the default image, which the VM cannot build (no network): it is copied in from where
# `make integration` finds it ($(IMAGES_DIR) when current, else $(TEST_IMAGE_CACHE)). With the
# default VM_SUITES and no current default image there, those three are left out, and said
# so; a VM_SUITES given on the command line is run as given.
# VMTEST_FLAGS: more tools/vmtest options (--timeout S, --mem MIB, --keep ...).
# Results: $(BUILD)/vmcheck/ (report.tap, console.log, each suite's log and TAP).
VM_SUITES    ?= $(notdir $(IT_TESTS))
VMTEST_FLAGS ?=
VM_DEFAULT_IMAGE_SUITES := it_default it_security it_mirror

vmcheck: all $(IT_TESTS)
	@if [ "$$(id -u)" != 0 ]; then echo "make vmcheck: needs root" >&2; exit 1; fi
	@dimg=$(TEST_IMAGE_CACHE); suites="$(VM_SUITES)"; \
	if rootfs/build-image default $(abspath $(IMAGES_DIR)) --check 2>/dev/null; then \
		dimg=$(abspath $(IMAGES_DIR)); \
	elif [ "$(origin VM_SUITES)" = file ] && \
		! rootfs/build-image default $$dimg --check 2>/dev/null; then \
		echo "make vmcheck: no current default image in $$dimg (make integration builds" \
			"it): $(VM_DEFAULT_IMAGE_SUITES) not run" >&2; \
		suites="$(filter-out $(VM_DEFAULT_IMAGE_SUITES),$(VM_SUITES))"; \
	fi; \
	set -x; tools/vmtest --build $(BUILD) --src $(CURDIR) --suites "$$suites" \
		--default-images $$dimg $(VMTEST_FLAGS)
