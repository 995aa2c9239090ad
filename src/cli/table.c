/* Aligned tables of the cell CLI (ls, image ls). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "output.h"
#include "table.h"

void cli_table_init(struct cli_table *t, size_t cols)
{
	t->cols = cols;
	t->rows = 0;
	t->cells = NULL;
}

int cli_table_add(struct cli_table *t, const char *const *row)
{
	char **cells = realloc(t->cells, (t->rows + 1) * t->cols * sizeof(*cells));
	if (!cells)
		return -ENOMEM;
	t->cells = cells;
	for (size_t c = 0; c < t->cols; c++)
		cells[t->rows * t->cols + c] = strdup(row[c] ? row[c] : "");
	t->rows++;
	return 0;
}

void cli_table_print(const struct cli_table *t, FILE *f)
{
	size_t width[16] = {0};
	size_t cols = t->cols < 16 ? t->cols : 16;
	for (size_t r = 0; r < t->rows; r++)
		for (size_t c = 0; c < cols; c++) {
			const char *s = t->cells[r * t->cols + c];
			size_t n = s ? strlen(s) : 0;
			if (n > width[c])
				width[c] = n;
		}
	for (size_t r = 0; r < t->rows; r++) {
		for (size_t c = 0; c < cols; c++) {
			const char *s = t->cells[r * t->cols + c];
			s = s ? s : "";
			cli_output_safe(s, f);
			if (c + 1 < cols)
				fprintf(f, "%*s", (int)(width[c] - strlen(s) + 2), "");
		}
		fputc('\n', f);
	}
}

void cli_table_free(struct cli_table *t)
{
	for (size_t i = 0; i < t->rows * t->cols; i++)
		free(t->cells[i]);
	free(t->cells);
	t->cells = NULL;
	t->rows = 0;
}
