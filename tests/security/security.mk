# The escape battery's helper, tests/security/escape.c: one static program (libc only), so
# it runs in any image. `cell selftest` finds it next to the cell binary as cell-escape,
# else in $(PREFIX)/libexec/cell. Included by the top Makefile; uses its BUILD, CC, WARN.
ESCAPE := $(BUILD)/cell-escape

all: $(ESCAPE)
integration check: $(ESCAPE)

# No SAN: sanitizer runtimes cannot be linked -static. -MMD: header changes rebuild it.
$(ESCAPE): tests/security/escape.c
	@mkdir -p $(dir $@)
	$(CC) -std=gnu11 -O2 -g $(WARN) -D_GNU_SOURCE -MMD -MP -MF $@.d -static -o $@ $< -lpthread
