# tests/interpreter/interpreter.mk: the code-interpreter service (src/interpreter) over
# HTTP, run on the host against Debian's python3 with python3-jupyter-client and
# python3-ipykernel (tools/install-deps --ci). Python's unittest, standard library only; no
# root, nothing leaves 127.0.0.1. Included from the top-level Makefile.
#
# CELL_INTERP_PYTHON picks the python (default /usr/bin/python3, not one a PATH puts first).

CELL_INTERP_PYTHON ?= /usr/bin/python3

.PHONY: interpreter-check
interpreter-check:
	@mkdir -p $(TEST_RUN_DIR); \
	CELL_INTERP_PYTHON=$(CELL_INTERP_PYTHON) CELL_TEST_SKIPS=$(TEST_SKIPS) \
		$(CELL_INTERP_PYTHON) tests/interpreter/test_interpreter.py
