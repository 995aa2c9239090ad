/* cell fs: files and directories inside a sandbox (celld's execd file routes): ls, stat,
 * find, mkdir, rm, mv, chmod. One request per command; several paths go in one request. */
#include <errno.h>
#include <getopt.h>
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

#define FS_PATHS_MAX 256 /* celld's bound on paths per request */
#define FS_DEPTH_MAX 32

static void usage(FILE *f)
{
	fprintf(
	    f, "Usage: cell fs COMMAND [OPTIONS] ID ARGS...\n"
	       "\n"
	       "Files and directories inside sandbox ID (paths are absolute, inside the sandbox).\n"
	       "  ls [-R|--depth N] ID DIR          list DIR (N levels, 1-32; -R is 32)\n"
	       "  stat ID PATH...                   type, mode, owner, size and time of paths\n"
	       "  find ID DIR PATTERN               files below DIR whose name matches PATTERN\n"
	       "                                    (a glob; with '/', matched against the path\n"
	       "                                    below DIR, '**' any number of components)\n"
	       "  mkdir [-m MODE] [--owner U] [--group G] ID DIR...\n"
	       "                                    create directories and missing parents\n"
	       "  rm [-r] ID PATH...                remove files or symbolic links; -r also\n"
	       "                                    directories with everything in them\n"
	       "  mv ID SRC DEST                    rename (DEST ending in '/' is a directory)\n"
	       "  chmod [--owner U] [--group G] MODE ID PATH...\n"
	       "                                    set the mode (octal, at most 777) and owner\n"
	       "\n"
	       "Options:\n"
	       "  -R                 (ls) every level (32)\n"
	       "      --depth N      (ls) N levels (1 to 32, default 1)\n"
	       "  -m, --mode MODE    (mkdir) mode of new directories, octal (default 755)\n"
	       "      --owner U      (mkdir, chmod) owner: a name in the sandbox or a number\n"
	       "      --group G      (mkdir, chmod) group: a name in the sandbox or a number\n"
	       "  -r, --recursive    (rm) also remove directories with everything in them (as\n"
	       "                     rm -r: files and links among PATH go too)\n"
	       "      --json         (ls, stat, find) print celld's answer as JSON\n"
	       "      --socket PATH  celld's socket\n"
	       "  -h, --help         this help ('cell fs COMMAND --help' is the same)\n");
}

/* Parsed options of one subcommand. */
struct fs_opts {
	const char *name; /* "fs ls": the command in messages */
	int depth;
	bool recursive;
	const char *mode, *owner, *group;
};

enum { OPT_DEPTH = 0x2000, OPT_OWNER, OPT_GROUP };

/* Options of any subcommand; the ones it does not take are usage errors naming them.
 * Returns -1 to go on with argv[optind...], else the exit code. */
static int parse_opts(int argc, char **argv, const char *allowed, struct fs_opts *o)
{
	static const struct option longopts[] = {{"depth", required_argument, NULL, OPT_DEPTH},
						 {"owner", required_argument, NULL, OPT_OWNER},
						 {"group", required_argument, NULL, OPT_GROUP},
						 {"recursive", no_argument, NULL, 'r'},
						 {"mode", required_argument, NULL, 'm'},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	static const char *const names[] = {
	    [OPT_DEPTH - OPT_DEPTH] = "--depth",
	    [OPT_OWNER - OPT_DEPTH] = "--owner",
	    [OPT_GROUP - OPT_DEPTH] = "--group",
	};
	optind = 0;
	opterr = 0;
	int c;
	/* '+': options end at the first operand, so a chmod MODE such as "-w" is never one. */
	while ((c = getopt_long(argc, argv, "+:hrRm:", longopts, NULL)) != -1) {
		char flag[3] = {'-', (char)c, '\0'};
		const char *label = c >= OPT_DEPTH && c <= OPT_GROUP ? names[c - OPT_DEPTH] : flag;
		bool ok = true;
		switch (c) {
		case 'h':
			usage(stdout);
			return CLI_EXIT_OK;
		case '?':
		case ':': {
			/* A short option is optopt (it may sit in a cluster such as -rx); a long
			 * one is the word getopt just passed (optopt is 0 or its value). */
			const char *word = argv[optind - 1];
			char shortopt[3] = {'-', (char)optopt, '\0'};
			bool is_long = optopt <= 0 || optopt > 0x7f || !strncmp(word, "--", 2);
			const char *what = is_long ? word : shortopt;
			return cli_error_usage(
			    o->name, CLI_EXIT_USAGE,
			    c == '?' ? "unknown option '%s'" : "option '%s' needs a value", what);
		}
		case 'r':
			ok = strchr(allowed, 'r');
			o->recursive = true;
			break;
		case 'R':
			ok = strchr(allowed, 'R');
			o->depth = FS_DEPTH_MAX;
			label = "-R";
			break;
		case 'm':
			ok = strchr(allowed, 'm');
			o->mode = optarg;
			label = "-m";
			break;
		case OPT_DEPTH: {
			ok = strchr(allowed, 'd');
			char *end;
			errno = 0;
			long v = strtol(optarg, &end, 10);
			if (ok && (errno || end == optarg || *end || v < 1 || v > FS_DEPTH_MAX))
				return cli_error_usage(o->name, CLI_EXIT_USAGE,
						       "--depth must be a number from 1 to %d",
						       FS_DEPTH_MAX);
			o->depth = (int)v;
			break;
		}
		case OPT_OWNER:
			ok = strchr(allowed, 'o');
			o->owner = optarg;
			break;
		case OPT_GROUP:
			ok = strchr(allowed, 'o');
			o->group = optarg;
			break;
		default:
			if (cli_global_opt(c, optarg))
				break;
			return cli_error_usage(o->name, CLI_EXIT_USAGE, "unknown option");
		}
		if (!ok)
			return cli_error_usage(o->name, CLI_EXIT_USAGE, "%s: not an option of %s",
					       label, o->name);
	}
	return -1;
}

/* ID and at least `min` (at most `max`) absolute paths after it. */
static int check_operands(const struct fs_opts *o, int n, char **args, int min, int max,
			  const char *what)
{
	if (n < 1 + min || n > 1 + max)
		return cli_error_usage(o->name, CLI_EXIT_USAGE, "expected ID and %s", what);
	const char *id = cli_resolve_id(args[0]);
	if (!id)
		return CLI_EXIT_FAIL;
	args[0] = (char *)id; /* the id the operands named, for the request */
	for (int i = 1; i < n; i++)
		if (args[i][0] != '/')
			return cli_error_usage(o->name, CLI_EXIT_USAGE,
					       "%s: paths in the sandbox must be absolute",
					       args[i]);
	return -1;
}

/* "&path=a&path=b..." (or "key=" for the first) of n paths; NULL on ENOMEM. */
static char *path_query(char **paths, int n, const char *key)
{
	char *q = strdup("");
	for (int i = 0; q && i < n; i++) {
		_cleanup_free_ char *enc = cell_client_urlencode(paths[i]);
		char *next = NULL;
		if (!enc || asprintf(&next, "%s%s%s=%s", q, i ? "&" : "", key, enc) < 0)
			next = NULL;
		free(q);
		q = next;
	}
	return q;
}

/* One request to /v1/sandboxes/ID/<execd>/<route>; a failure is printed and returns 1. */
static int fs_call(const struct fs_opts *o, const char *method, const char *id, const char *route,
		   const char *query, json_t *body, json_t **out)
{
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "/v1/sandboxes/%s" CLI_EXECD_PREFIX "/%s%s%s", id, route,
		     query ? "?" : "", query ? query : "") < 0) {
		cli_error("%s: %s", o->name, strerror(ENOMEM));
		return CLI_EXIT_FAIL;
	}
	struct cell_error err = {0};
	json_t *ans = NULL;
	if (cli_client_api(method, path, body, o->name, &ans, NULL, &err) < 0) {
		cli_error("%s", err.msg);
		json_decref(ans);
		return CLI_EXIT_FAIL;
	}
	if (out)
		*out = ans;
	else
		json_decref(ans);
	return CLI_EXIT_OK;
}

/* FileInfo fields as table cells. */
static void info_row(struct cli_table *t, json_t *info, const char *fallback_path)
{
	char mode[32], size[32];
	json_t *m = json_object_get(info, "mode"), *s = json_object_get(info, "size");
	snprintf(mode, sizeof(mode), "%03" JSON_INTEGER_FORMAT, json_integer_value(m));
	snprintf(size, sizeof(size), "%" JSON_INTEGER_FORMAT, json_integer_value(s));
	const char *path = json_string_value(json_object_get(info, "path"));
	const char *str[] = {"type", "owner", "group", "modified_at"};
	const char *v[4];
	for (size_t i = 0; i < 4; i++) {
		v[i] = json_string_value(json_object_get(info, str[i]));
		if (!v[i])
			v[i] = "?";
	}
	cli_table_add(t, (const char *const[]){v[0], mode, v[1], v[2], size, v[3],
					       path ? path : fallback_path});
}

/* Prints ans (taken) of ls or stat: celld's JSON with --json, else a table of its
 * entries. ls's answer is an array; stat's an object keyed by the n paths asked, in their
 * order. */
static int print_infos(json_t *ans, char **paths, int n)
{
	int rc;
	if (cli.json) {
		rc = cli_output_json(ans) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
		json_decref(ans);
		return rc;
	}
	struct cli_table t;
	cli_table_init(&t, 7);
	cli_table_add(&t, (const char *const[]){"TYPE", "MODE", "OWNER", "GROUP", "SIZE",
						"MODIFIED", "PATH"});
	size_t i;
	json_t *e;
	if (!paths)
		json_array_foreach(ans, i, e) info_row(&t, e, "?");
	for (int k = 0; paths && k < n; k++)
		if (json_is_object(e = json_object_get(ans, paths[k])))
			info_row(&t, e, paths[k]);
	json_decref(ans);
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static int fs_ls(struct fs_opts *o, int n, char **args)
{
	int rc = check_operands(o, n, args, 1, 1, "DIR");
	if (rc >= 0)
		return rc;
	_cleanup_free_ char *q = path_query(args + 1, 1, "path");
	_cleanup_free_ char *query = NULL;
	if (!q || asprintf(&query, "%s&depth=%d", q, o->depth ? o->depth : 1) < 0)
		return CLI_EXIT_FAIL;
	json_t *ans = NULL;
	rc = fs_call(o, "GET", args[0], "directories/list", query, NULL, &ans);
	return rc != CLI_EXIT_OK ? rc : print_infos(ans, NULL, 0);
}

static int fs_stat(struct fs_opts *o, int n, char **args)
{
	int rc = check_operands(o, n, args, 1, FS_PATHS_MAX, "PATH...");
	if (rc >= 0)
		return rc;
	_cleanup_free_ char *q = path_query(args + 1, n - 1, "path");
	json_t *ans = NULL;
	if (!q)
		return CLI_EXIT_FAIL;
	rc = fs_call(o, "GET", args[0], "files/info", q, NULL, &ans);
	return rc != CLI_EXIT_OK ? rc : print_infos(ans, args + 1, n - 1);
}

static int fs_find(struct fs_opts *o, int n, char **args)
{
	if (n != 3)
		return cli_error_usage(o->name, CLI_EXIT_USAGE, "expected ID, DIR and PATTERN");
	int rc = check_operands(o, 2, args, 1, 1, "DIR");
	if (rc >= 0)
		return rc;
	_cleanup_free_ char *d = path_query(args + 1, 1, "path");
	_cleanup_free_ char *p = path_query(args + 2, 1, "pattern");
	_cleanup_free_ char *query = NULL;
	if (!d || !p || asprintf(&query, "%s&%s", d, p) < 0)
		return CLI_EXIT_FAIL;
	json_t *ans = NULL;
	rc = fs_call(o, "GET", args[0], "files/search", query, NULL, &ans);
	if (rc != CLI_EXIT_OK)
		return rc;
	if (cli.json) {
		rc = cli_output_json(ans) < 0 ? CLI_EXIT_FAIL : CLI_EXIT_OK;
	} else {
		size_t i;
		json_t *e;
		json_array_foreach(ans, i, e)
		{
			const char *path = json_string_value(json_object_get(e, "path"));
			if (path) {
				cli_output_safe(path, stdout);
				putchar('\n');
			}
		}
		rc = fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
	}
	json_decref(ans);
	return rc;
}

/* MODE as the API's number whose decimal digits are the octal permission ("755" → 755). */
static int mode_value(const struct fs_opts *o, const char *s, json_int_t *v)
{
	size_t len = strlen(s);
	if (len < 1 || len > 4 || strspn(s, "01234567") != len)
		return cli_error_usage(o->name, CLI_EXIT_USAGE,
				       "mode '%s': octal permission digits such as 755", s);
	*v = strtoll(s, NULL, 10);
	return -1;
}

/* {mode?, owner?, group?}: an owner or group of digits is sent as the number. */
static json_t *perm_object(const struct fs_opts *o, json_int_t mode, bool has_mode)
{
	json_t *p = json_object();
	if (!p)
		return NULL;
	if (has_mode)
		json_object_set_new(p, "mode", json_integer(mode));
	const char *keys[] = {"owner", "group"}, *vals[] = {o->owner, o->group};
	for (size_t i = 0; i < 2; i++) {
		if (!vals[i])
			continue;
		size_t len = strlen(vals[i]);
		if (len && len <= 9 && strspn(vals[i], "0123456789") == len)
			json_object_set_new(p, keys[i], json_integer(strtoll(vals[i], NULL, 10)));
		else
			json_object_set_new(p, keys[i], json_string(vals[i]));
	}
	return p;
}

/* POST route with {path: perm} for every path. */
static int post_perms(struct fs_opts *o, const char *route, int n, char **args, json_int_t mode,
		      bool has_mode)
{
	json_t *body = json_object();
	for (int i = 1; body && i < n; i++) {
		json_t *p = perm_object(o, mode, has_mode);
		if (!p || json_object_set_new(body, args[i], p) < 0) {
			json_decref(body);
			body = NULL;
		}
	}
	if (!body)
		return CLI_EXIT_FAIL;
	int rc = fs_call(o, "POST", args[0], route, NULL, body, NULL);
	json_decref(body);
	return rc;
}

static int fs_mkdir(struct fs_opts *o, int n, char **args)
{
	int rc = check_operands(o, n, args, 1, FS_PATHS_MAX, "DIR...");
	if (rc >= 0)
		return rc;
	json_int_t mode = 755;
	if (o->mode && (rc = mode_value(o, o->mode, &mode)) >= 0)
		return rc;
	return post_perms(o, "directories", n, args, mode, true);
}

static int fs_chmod(struct fs_opts *o, int n, char **args)
{
	if (n < 1)
		return cli_error_usage(o->name, CLI_EXIT_USAGE, "expected MODE, ID and PATH...");
	json_int_t mode;
	int rc = mode_value(o, args[0], &mode);
	if (rc >= 0)
		return rc;
	rc = check_operands(o, n - 1, args + 1, 1, FS_PATHS_MAX, "PATH...");
	if (rc >= 0)
		return rc;
	return post_perms(o, "files/permissions", n - 1, args + 1, mode, true);
}

/* DELETE route?path=... for n paths. */
static int delete_paths(struct fs_opts *o, const char *id, const char *route, char **paths, int n)
{
	if (n == 0)
		return CLI_EXIT_OK;
	_cleanup_free_ char *q = path_query(paths, n, "path");
	if (!q)
		return CLI_EXIT_FAIL;
	return fs_call(o, "DELETE", id, route, q, NULL, NULL);
}

/* rm removes files and symbolic links (DELETE /files refuses a directory). rm -r does what
 * rm -r does: a directory goes with everything in it, and any other path as rm removes it
 * (a symbolic link itself, never what it points to). The types come from one files/info
 * request first; a path whose type changes in between is refused by the route, never
 * removed the wrong way. */
static int fs_rm(struct fs_opts *o, int n, char **args)
{
	int rc = check_operands(o, n, args, 1, FS_PATHS_MAX, "PATH...");
	if (rc >= 0)
		return rc;
	if (!o->recursive)
		return delete_paths(o, args[0], "files", args + 1, n - 1);
	_cleanup_free_ char *q = path_query(args + 1, n - 1, "path");
	json_t *info = NULL;
	if (!q)
		return CLI_EXIT_FAIL;
	rc = fs_call(o, "GET", args[0], "files/info", q, NULL, &info);
	if (rc != CLI_EXIT_OK)
		return rc;
	char *dirs[FS_PATHS_MAX], *others[FS_PATHS_MAX];
	int nd = 0, no = 0;
	for (int i = 1; i < n; i++) {
		json_t *type = json_object_get(json_object_get(info, args[i]), "type");
		if (!strcmp(json_string_value(type) ? json_string_value(type) : "", "directory"))
			dirs[nd++] = args[i];
		else
			others[no++] = args[i];
	}
	json_decref(info);
	rc = delete_paths(o, args[0], "files", others, no);
	if (rc == CLI_EXIT_OK)
		rc = delete_paths(o, args[0], "directories", dirs, nd);
	return rc;
}

static int fs_mv(struct fs_opts *o, int n, char **args)
{
	int rc = check_operands(o, n, args, 2, 2, "SRC and DEST");
	if (rc >= 0)
		return rc;
	json_t *body = json_pack("[{s:s, s:s}]", "src", args[1], "dest", args[2]);
	if (!body)
		return CLI_EXIT_FAIL;
	rc = fs_call(o, "POST", args[0], "files/mv", NULL, body, NULL);
	json_decref(body);
	return rc;
}

struct fs_command {
	const char *name;
	const char *allowed; /* option letters: d depth/-R, r, m, o owner/group */
	int (*fn)(struct fs_opts *o, int n, char **args);
};

static const struct fs_command fs_commands[] = {
    {"ls", "dR", fs_ls}, {"stat", "", fs_stat}, {"find", "", fs_find},	  {"mkdir", "mo", fs_mkdir},
    {"rm", "r", fs_rm},	 {"mv", "", fs_mv},	{"chmod", "o", fs_chmod},
};

int cmd_fs(int argc, char **argv)
{
	if (argc < 2)
		return cli_error_usage("fs", CLI_EXIT_USAGE,
				       "expected a command (ls, stat, find, "
				       "mkdir, rm, mv, chmod)");
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(stdout);
		return CLI_EXIT_OK;
	}
	for (size_t i = 0; i < CELL_ARRAY_SIZE(fs_commands); i++) {
		const struct fs_command *fc = &fs_commands[i];
		if (strcmp(argv[1], fc->name))
			continue;
		char name[16];
		snprintf(name, sizeof(name), "fs %s", fc->name);
		struct fs_opts o = {.name = name};
		int rc = parse_opts(argc - 1, argv + 1, fc->allowed, &o);
		if (rc >= 0)
			return rc;
		return fc->fn(&o, argc - 1 - optind, argv + 1 + optind);
	}
	return cli_error_usage("fs", CLI_EXIT_USAGE, "%s: no such command", argv[1]);
}
