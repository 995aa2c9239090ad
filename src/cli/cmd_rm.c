/* cell rm: delete sandboxes (every process killed, disk removed). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "delete.h"
#include "error.h"
#include "global.h"
#include "parse.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: cell rm ID...\n"
		   "\n"
		   "Delete each sandbox: its processes are killed and its disk removed. Every id\n"
		   "is tried (unless celld cannot be reached); the exit status is 1 when any of\n"
		   "them failed, with one message per failed id.\n"
		   "\n"
		   "Options:\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static int delete_one(const char *id, void *cls, struct cell_error *err)
{
	(void)cls;
	return cli_delete_sandbox(id, err);
}

int cmd_rm(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "h", "rm", usage);
	if (rc >= 0)
		return rc;
	return cli_each(argc, argv, "rm", "sandbox id", true, delete_one, NULL);
}
