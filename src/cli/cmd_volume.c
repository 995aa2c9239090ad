/* cell volume: celld's named volumes (made by the first sandbox that mounts one: cell create
 * -v NAME:DEST, or a create's volumes[].pvc). */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "table.h"

static void usage(FILE *f)
{
	fprintf(f, "Usage: cell volume ls [--json]\n"
		   "       cell volume rm NAME...\n"
		   "\n"
		   "Named volumes live in celld's state dir, each with its own disk quota, and\n"
		   "outlive the sandboxes that mount them. A sandbox mounts one with\n"
		   "`cell create -v NAME:/path` (made on first use).\n"
		   "\n"
		   "  ls   NAME SIZE USED ACCESS USED-BY: every volume\n"
		   "  rm   remove each volume and its files; refused while a sandbox uses it\n"
		   "\n"
		   "Options:\n"
		   "      --json         (ls) print the volumes as a JSON array\n"
		   "      --socket PATH  celld's socket\n"
		   "  -h, --help         this help\n");
}

static void size_of(json_t *bytes, char *buf, size_t size)
{
	snprintf(buf, size, "-");
	if (json_is_integer(bytes))
		cli_output_size((unsigned long long)json_integer_value(bytes), buf, size);
}

static int volume_ls(void)
{
	json_t *resp, *items;
	int rc = cli_client_items("/v1/volumes", "list volumes", &resp, &items);
	if (rc >= 0)
		return rc;
	struct cli_table t;
	cli_table_init(&t, 5);
	cli_table_add(&t, (const char *const[]){"NAME", "SIZE", "USED", "ACCESS", "USED-BY"});
	size_t i;
	json_t *v;
	json_array_foreach(items, i, v)
	{
		char size[32], used[32], users[256] = "-";
		size_of(json_object_get(v, "sizeBytes"), size, sizeof(size));
		size_of(json_object_get(v, "usedBytes"), used, sizeof(used));
		json_t *by = json_object_get(v, "usedBy");
		size_t k, off = 0;
		json_t *id;
		json_array_foreach(by, k, id)
		{
			int n = snprintf(users + off, sizeof(users) - off, "%s%s", k ? "," : "",
					 json_string_value(id));
			if (n < 0 || (size_t)n >= sizeof(users) - off)
				break;
			off += (size_t)n;
		}
		const char *name = json_string_value(json_object_get(v, "name"));
		const char *access = json_string_value(json_object_get(v, "accessMode"));
		cli_table_add(&t, (const char *const[]){name ? name : "?", size, used,
							access ? access : "-", users});
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	json_decref(resp);
	return CLI_EXIT_OK;
}

static int remove_one(const char *name, void *cls, struct cell_error *err)
{
	(void)cls;
	_cleanup_free_ char *enc = cell_client_urlencode(name);
	_cleanup_free_ char *path = NULL;
	if (!enc || asprintf(&path, "/v1/volumes/%s", enc) < 0)
		return cell_err(err, ENOMEM, "remove volume");
	return cli_client_api("DELETE", path, NULL, "remove volume", NULL, NULL, err);
}

int cmd_volume(int argc, char **argv)
{
	/* "+": stop at the subcommand; after it, options and names may mix. */
	int rc = cli_global_opts_only(argc, argv, "+h", "volume", usage);
	if (rc >= 0)
		return rc;
	if (optind >= argc)
		return cli_error_usage("volume", CLI_EXIT_USAGE, "expected ls or rm");
	const char *sub = argv[optind++];
	if ((rc = cli_global_opts_only(argc, argv, "h", "volume", usage)) >= 0)
		return rc;
	if (!strcmp(sub, "ls")) {
		if (optind != argc)
			return cli_error_usage("volume", CLI_EXIT_USAGE,
					       "ls: unexpected argument '%s'", argv[optind]);
		return volume_ls();
	}
	if (!strcmp(sub, "rm"))
		return cli_each(argc, argv, "volume", "volume name", false, remove_one, NULL);
	return cli_error_usage("volume", CLI_EXIT_USAGE, "unknown subcommand '%s' (ls, rm)", sub);
}
