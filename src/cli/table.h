/* A simple left-aligned table of the cell CLI: rows of `cols` strings; column widths from
 * the contents. Cells are printed with control characters replaced. */
#pragma once

#include <stddef.h>
#include <stdio.h>

struct cli_table {
	size_t cols;
	size_t rows;
	char **cells; /* rows * cols, malloc'd strings */
};

void cli_table_init(struct cli_table *t, size_t cols);
int cli_table_add(struct cli_table *t, const char *const *row);
void cli_table_print(const struct cli_table *t, FILE *f);
void cli_table_free(struct cli_table *t);
