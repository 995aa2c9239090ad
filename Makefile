# cell — build, run, test, bench.  See README.md.
CC       ?= gcc
BUILD    ?= build
# Absolute, whichever way it was given: the compiler's dependency files name their targets
# by it, and a relative and an absolute spelling of one dir do not match (a header's change
# would then not rebuild what includes it).
BUILD_ORIGIN := $(origin BUILD)
override BUILD := $(abspath $(BUILD))
PREFIX   ?= /usr/local
STATE_DIR ?= /var/lib/cell
IMAGES_DIR ?= $(STATE_DIR)/images

WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -Iinclude -D_GNU_SOURCE -D_FORTIFY_SOURCE=2 \
	    -fstack-protector-strong -MMD -MP -ffunction-sections -fdata-sections \
	    -DCELL_LIBEXEC_DIR='"$(PREFIX)/libexec/cell"' \
	    -DCELL_DATA_DIR='"$(PREFIX)/share/cell"'
SAN      ?=

COMMON_SRC  := $(wildcard src/common/*.c)
RUNTIME_SRC := $(wildcard src/runtime/*.c)
# celld's core is flat; its HTTP layer and each API front have a folder of their own
# (HACKING.md). Its files include one another by their path under src/celld.
CELLD_SRC   := $(wildcard src/celld/*.c src/celld/http/*.c src/celld/api/*.c src/celld/api/*/*.c)
INIT_SRC    := $(wildcard src/init/*.c)
CLI_SRC     := $(wildcard src/cli/*.c)
OCI_SRC     := $(wildcard src/oci/*.c)
# The HTTP client library (include/cell/client.h): linked into cell and the bench client.
CLIENT_SRC  := $(wildcard src/client/*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))

# libmnl: rtnetlink (src/runtime/netlink.c); libnftnl: celld's nftables table (src/runtime/nft.c).
# libwslay: WebSocket framing (the PTY routes), the handshake and I/O are ours.
# zlib: inflate for skill archives (tar.gz and zip, src/celld/skillpkg.c).
# libarchive: an image layer's tar, gzip and zstd (src/celld/layer_unpack.c), read only: the
# files are made by cell's own fd-relative code.
# libcurl: image pulls from registries (src/celld/image_pull.c): TLS, HTTP/2, proxies and
# redirects from a well-kept client rather than HTTP written anew.
ARCHIVE_LIBS := $(shell pkg-config --libs libarchive 2>/dev/null || echo -larchive)
CELLD_LIBS := -lmicrohttpd -lcurl -ljansson -lcrypto -lpthread -lcap -lseccomp -lnftnl -lmnl -lwslay -lz \
	      $(ARCHIVE_LIBS)
# The CLI's HTTP client is libcurl; --as-needed keeps the loader from mapping libraries no
# symbol of cell comes from (each mapped object costs start-up time on every `cell run`);
# --gc-sections drops the functions of the client library that cell never calls.
CLI_LIBS   := -Wl,--as-needed -Wl,-O1 -Wl,--gc-sections -lcurl -ljansson -lcrypto -lwslay
# cell-init is static: it runs in any image, whatever libc (or none) the image has.
INIT_LIBS  := -static -Wl,--gc-sections -ljansson -lcrypto -lpthread

# cell-oci: the runtime and jansson, libcap, libseccomp; --as-needed drops what no symbol
# it keeps comes from (the runtime's netlink and nftables code is not reached).
OCI_LIBS   := -Wl,--as-needed -Wl,--gc-sections -ljansson -lcap -lseccomp -lnftnl -lmnl -lcrypto \
	      -lpthread

BINS := $(BUILD)/celld $(BUILD)/cell $(BUILD)/cell-init $(BUILD)/cell-oci

.PHONY: all clean check unit integration bench run install uninstall asan format format-check vmcheck images layercheck
all: $(BINS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -c $< -o $@

$(call obj,$(CELLD_SRC)): CFLAGS += -iquote src/celld

$(BUILD)/celld: $(call obj,$(CELLD_SRC) $(RUNTIME_SRC) $(COMMON_SRC))
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(CELLD_LIBS)

$(BUILD)/cell: $(call obj,$(CLI_SRC) $(CLIENT_SRC) $(COMMON_SRC))
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(CLI_LIBS)

$(BUILD)/cell-oci: $(call obj,$(OCI_SRC) $(RUNTIME_SRC) $(COMMON_SRC))
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(OCI_LIBS)

# cell-init is linked -static, which the sanitizer runtimes cannot be: with SAN set, its
# objects (and the common ones it shares with celld and cell) are compiled a second time
# without SAN into $(BUILD)/nosan/. Without SAN it shares the ordinary objects.
ifeq ($(strip $(SAN)),)
INIT_OBJ := $(call obj,$(INIT_SRC) $(COMMON_SRC))
else
INIT_OBJ := $(patsubst %.c,$(BUILD)/nosan/%.o,$(INIT_SRC) $(COMMON_SRC))

$(BUILD)/nosan/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@
endif

$(BUILD)/cell-init: $(INIT_OBJ)
	$(CC) $(CFLAGS) -o $@ $^ $(INIT_LIBS) 2>&1 | { grep -v 'statically linked applications requires' || true; }
	@test -x $@

-include tests/Makefile.inc
-include tests/sdk/sdk.mk
-include tests/e2b/e2b.mk
-include tests/interpreter/interpreter.mk
-include tools/bench.mk
-include tests/security/security.mk
-include tests/vm/vm.mk

clean:
	rm -rf $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

# tools/layercheck: no import circle between source files, no include up the layers.
layercheck: $(BINS)
	tools/layercheck $(BUILD)

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

# celld and cell with ASan/UBSan, cell-init without (see INIT_OBJ), into build-asan unless
# BUILD is given (make BUILD=/tmp/x asan).
ASAN_BUILD := $(if $(filter file,$(BUILD_ORIGIN)),$(abspath build-asan),$(BUILD))
asan:
	$(MAKE) BUILD=$(ASAN_BUILD) SAN='-fsanitize=address,undefined -fno-omit-frame-pointer' all

# Dependency files only: the test image cache under $(BUILD) has dirs named *.d (etc/rc2.d),
# and images built into $(BUILD)/images have files named so (usr/sbin/invoke-rc.d).
-include $(shell find $(BUILD) \( -path '*/tests/images-cache' -o -path '$(BUILD)/images' \) -prune -o -name '*.d' -type f -print 2>/dev/null)

# ---- run, images, install (rootfs/ and tools/) ----
DESTDIR     ?=
CELLD_FLAGS ?=
MAN_PAGES   := $(wildcard man/*.[1-8])
POLICIES    := $(wildcard policies/*.md policies/*/*.json)

# sudo make run: dependencies, a build, the default image (first time only, ~5 min), then
# celld in the foreground (^C stops it).
run:
	@[ "$$(id -u)" = 0 ] || { echo "make run: needs root (sudo make run)" >&2; exit 1; }
	tools/install-deps
	$(MAKE) all
	@if [ ! -f $(IMAGES_DIR)/default/manifest.json ]; then \
		echo "make run: building image 'default' into $(IMAGES_DIR) (first run only, a few minutes)"; \
		rootfs/build-image default $(IMAGES_DIR); \
	fi
	exec $(BUILD)/celld --state-dir $(STATE_DIR) --images $(IMAGES_DIR) $(CELLD_FLAGS)

# The small test image (seconds): busybox into $(IMAGES_DIR).
images:
	@[ "$$(id -u)" = 0 ] || { echo "make images: needs root" >&2; exit 1; }
	rootfs/build-image busybox $(IMAGES_DIR)

# Build and install with the same PREFIX: the binaries look for their files under it.
# The systemd unit goes to $(SYSTEMD_UNIT_DIR) (default $(PREFIX)/lib/systemd/system, a
# directory systemd reads for /usr and /usr/local alike), with celld's path written in; the
# completions to bash-completion's and zsh's directories under $(PREFIX)/share. Group cell
# (celld's socket is mode 0660, group cell) is made on this host only: not under a DESTDIR
# (a package's scripts make it there), and not when it exists.
SYSTEMD_UNIT_DIR ?= $(PREFIX)/lib/systemd/system
BASH_COMPLETION_DIR ?= $(PREFIX)/share/bash-completion/completions
ZSH_COMPLETION_DIR ?= $(PREFIX)/share/zsh/site-functions
install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/sbin \
		$(DESTDIR)$(PREFIX)/libexec/cell $(DESTDIR)$(PREFIX)/share/cell/rootfs
	install -m 0755 $(BUILD)/cell $(DESTDIR)$(PREFIX)/bin/cell
	install -m 0755 $(BUILD)/celld $(DESTDIR)$(PREFIX)/sbin/celld
	install -m 0755 $(BUILD)/cell-oci $(DESTDIR)$(PREFIX)/sbin/cell-oci
	install -m 0755 $(BUILD)/cell-init $(DESTDIR)$(PREFIX)/libexec/cell/cell-init
	install -m 0755 $(BUILD)/cell-escape $(DESTDIR)$(PREFIX)/libexec/cell/cell-escape
	install -m 0755 rootfs/build-image $(DESTDIR)$(PREFIX)/share/cell/rootfs/build-image
	install -m 0644 rootfs/default.packages rootfs/code-interpreter.packages rootfs/README.md \
		$(DESTDIR)$(PREFIX)/share/cell/rootfs/
	install -d $(DESTDIR)$(PREFIX)/share/cell/interpreter
	install -m 0755 src/interpreter/code-interpreter.sh $(DESTDIR)$(PREFIX)/share/cell/interpreter/
	install -m 0644 src/interpreter/code_interpreter.py src/interpreter/kernel_startup.py \
		$(DESTDIR)$(PREFIX)/share/cell/interpreter/
	@for f in $(POLICIES); do \
		install -D -m 0644 $$f $(DESTDIR)$(PREFIX)/share/cell/$$f || exit 1; \
	done
	@for f in $(MAN_PAGES); do \
		sec=$${f##*.}; \
		install -d $(DESTDIR)$(PREFIX)/share/man/man$$sec && \
		install -m 0644 $$f $(DESTDIR)$(PREFIX)/share/man/man$$sec/ || exit 1; \
		echo "install $$f -> $(PREFIX)/share/man/man$$sec/"; \
	done
	install -d $(DESTDIR)$(SYSTEMD_UNIT_DIR) $(DESTDIR)$(BASH_COMPLETION_DIR) \
		$(DESTDIR)$(ZSH_COMPLETION_DIR)
	sed 's|@SBINDIR@|$(PREFIX)/sbin|g' dist/systemd/celld.service \
		>$(DESTDIR)$(SYSTEMD_UNIT_DIR)/celld.service.tmp
	mv $(DESTDIR)$(SYSTEMD_UNIT_DIR)/celld.service.tmp $(DESTDIR)$(SYSTEMD_UNIT_DIR)/celld.service
	chmod 0644 $(DESTDIR)$(SYSTEMD_UNIT_DIR)/celld.service
	$(BUILD)/cell completion bash >$(DESTDIR)$(BASH_COMPLETION_DIR)/cell
	$(BUILD)/cell completion zsh >$(DESTDIR)$(ZSH_COMPLETION_DIR)/_cell
	chmod 0644 $(DESTDIR)$(BASH_COMPLETION_DIR)/cell $(DESTDIR)$(ZSH_COMPLETION_DIR)/_cell
	@if [ -z "$(DESTDIR)" ] && ! getent group cell >/dev/null; then \
		echo "groupadd --system cell"; groupadd --system cell || exit 1; \
	fi

# Removes each file install put there, by its path, then cell's own directories when they
# are empty; shared ones (bin, man1, the unit and completion directories) stay. Group cell
# stays too: install cannot tell whether it made it or found it, and users may have been
# added to it since (groupdel cell removes it).
INSTALLED := bin/cell sbin/celld sbin/cell-oci libexec/cell/cell-init libexec/cell/cell-escape \
	share/cell/rootfs/build-image share/cell/rootfs/default.packages \
	share/cell/rootfs/code-interpreter.packages share/cell/rootfs/README.md \
	share/cell/interpreter/code-interpreter.sh share/cell/interpreter/code_interpreter.py \
	share/cell/interpreter/kernel_startup.py \
	$(addprefix share/cell/,$(POLICIES)) \
	$(foreach f,$(MAN_PAGES),share/man/man$(subst .,,$(suffix $(f)))/$(notdir $(f)))
# Deepest first: a directory goes once its own are gone.
INSTALLED_DIRS := $(filter-out share/cell/policies/,$(sort $(dir $(addprefix share/cell/,$(POLICIES))))) \
	share/cell/policies \
	share/cell/rootfs share/cell/interpreter share/cell libexec/cell
uninstall:
	@for f in $(INSTALLED); do \
		rm -f -- "$(DESTDIR)$(PREFIX)/$$f" || exit 1; \
	done
	rm -f -- $(DESTDIR)$(SYSTEMD_UNIT_DIR)/celld.service $(DESTDIR)$(BASH_COMPLETION_DIR)/cell \
		$(DESTDIR)$(ZSH_COMPLETION_DIR)/_cell
	@for d in $(INSTALLED_DIRS); do \
		[ ! -d "$(DESTDIR)$(PREFIX)/$$d" ] || rmdir -- "$(DESTDIR)$(PREFIX)/$$d" 2>/dev/null || \
			echo "uninstall: $(PREFIX)/$$d is not empty, kept"; \
	done
