# cell — build, run, test, bench.  See README.md.
CC       ?= gcc
BUILD    ?= build
PREFIX   ?= /usr/local
STATE_DIR ?= /var/lib/cell
IMAGES_DIR ?= $(STATE_DIR)/images

WARN     := -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-format-nonliteral
CFLAGS   ?= -O2 -g
CFLAGS   += -std=gnu11 $(WARN) -Iinclude -D_GNU_SOURCE -D_FORTIFY_SOURCE=2 \
	    -fstack-protector-strong -MMD -MP \
	    -DCELL_LIBEXEC_DIR='"$(PREFIX)/libexec/cell"' \
	    -DCELL_DATA_DIR='"$(PREFIX)/share/cell"'
SAN      ?=

COMMON_SRC  := $(wildcard src/common/*.c)
RUNTIME_SRC := $(wildcard src/runtime/*.c)
CELLD_SRC   := $(wildcard src/celld/*.c)
INIT_SRC    := $(wildcard src/init/*.c)
CLI_SRC     := $(wildcard src/cli/*.c)

obj = $(patsubst %.c,$(BUILD)/%.o,$(1))

CELLD_LIBS := -lmicrohttpd -ljansson -lcrypto -lpthread
CLI_LIBS   := -lcurl -ljansson -lcrypto
# cell-init is static: it runs in any image, whatever libc (or none) the image has.
INIT_LIBS  := -static -ljansson -lcrypto -lpthread

BINS := $(BUILD)/celld $(BUILD)/cell $(BUILD)/cell-init

.PHONY: all clean check unit integration bench run install asan format format-check vmcheck images
all: $(BINS)

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SAN) -c $< -o $@

$(BUILD)/celld: $(call obj,$(CELLD_SRC) $(RUNTIME_SRC) $(COMMON_SRC))
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(CELLD_LIBS)

$(BUILD)/cell: $(call obj,$(CLI_SRC) $(COMMON_SRC))
	$(CC) $(CFLAGS) $(SAN) -o $@ $^ $(CLI_LIBS)

$(BUILD)/cell-init: $(call obj,$(INIT_SRC) $(COMMON_SRC))
	$(CC) $(CFLAGS) -o $@ $^ $(INIT_LIBS) 2>&1 | { grep -v 'statically linked applications requires' || true; }
	@test -x $@

-include tests/Makefile.inc

clean:
	rm -rf $(BUILD)

format:
	clang-format -i $$(git ls-files '*.c' '*.h')

format-check:
	clang-format --dry-run --Werror $$(git ls-files '*.c' '*.h')

asan:
	$(MAKE) BUILD=build-asan SAN='-fsanitize=address,undefined -fno-omit-frame-pointer' all

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
