/* cell skill: celld's skills registry (POST/GET/DELETE /v1/skills). A sandbox gets a
 * registered skill with `cell create --skill NAME@VERSION`. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "output.h"
#include "table.h"

#define SKILL_FILE_MAX (64ll << 20) /* celld's bound on an upload */
#define SKILL_BOUNDARY "cell-skill-7f3a9c1e5b2d4086"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cell skill add NAME VERSION FILE\n"
		"       cell skill ls [--json]\n"
		"       cell skill rm NAME[@VERSION]...\n"
		"\n"
		"Skills are packages (a tar.gz or zip with an entrypoint.sh at its top or in its\n"
		"single top directory) kept by celld. A sandbox created with --skill NAME@VERSION\n"
		"gets it extracted into /root/.cell/skills/NAME/VERSION and its entrypoint.sh\n"
		"run once per version.\n"
		"\n"
		"  add  register FILE as NAME@VERSION (a version is immutable)\n"
		"  ls   NAME VERSION SIZE SHA256 CREATED: every registered version\n"
		"  rm   remove one version, or every version of NAME\n"
		"\n"
		"Options:\n"
		"      --json         (ls, add) print celld's JSON\n"
		"      --socket PATH  celld's socket\n"
		"  -h, --help         this help\n");
}

static int read_file(const char *path, char **data, size_t *len)
{
	_cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return cli_error_usage("skill", CLI_EXIT_USAGE, "add: %s: %s", path,
				       strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_size > SKILL_FILE_MAX)
		return cli_error_usage("skill", CLI_EXIT_USAGE,
				       "add: %s: not a regular file of at most 64 MiB", path);
	char *buf = malloc((size_t)st.st_size + 1);
	size_t got = 0;
	while (buf && got < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
		if (n <= 0) {
			free(buf);
			return cli_error_usage("skill", CLI_EXIT_USAGE, "add: reading %s: %s", path,
					       n < 0 ? strerror(errno) : "cut short");
		}
		got += (size_t)n;
	}
	if (!buf) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	*data = buf;
	*len = got;
	return -1;
}

static int skill_add(const char *name, const char *version, const char *file)
{
	_cleanup_free_ char *data = NULL;
	size_t len = 0;
	int rc = read_file(file, &data, &len);
	if (rc >= 0)
		return rc;
	_cleanup_free_ char *head = NULL;
	if (asprintf(&head,
		     "--" SKILL_BOUNDARY "\r\nContent-Disposition: form-data; name=\"name\"\r\n\r\n"
		     "%s\r\n--" SKILL_BOUNDARY "\r\nContent-Disposition: form-data; "
		     "name=\"version\"\r\n\r\n%s\r\n--" SKILL_BOUNDARY "\r\nContent-Disposition: "
		     "form-data; name=\"file\"; filename=\"skill\"\r\nContent-Type: "
		     "application/octet-stream\r\n\r\n",
		     name, version) < 0)
		head = NULL;
	static const char tail[] = "\r\n--" SKILL_BOUNDARY "--\r\n";
	size_t hl = head ? strlen(head) : 0, total = hl + len + sizeof(tail) - 1;
	_cleanup_free_ char *body = head ? malloc(total) : NULL;
	if (!body) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	memcpy(body, head, hl);
	memcpy(body + hl, data, len);
	memcpy(body + hl + len, tail, sizeof(tail) - 1);
	struct cell_client_req req = {.method = "POST",
				      .path = "/v1/skills",
				      .body = body,
				      .body_len = total,
				      .content_type =
					  "multipart/form-data; boundary=" SKILL_BOUNDARY};
	struct cell_client_resp resp = {0};
	struct cell_error err = {0};
	if (cell_client_request(cli_client(), &req, &resp, &err) < 0) {
		cell_client_resp_free(&resp);
		cli_error("add skill: %s", err.msg);
		return CLI_EXIT_FAIL;
	}
	json_t *o = resp.body.len ? json_loadb(resp.body.data, resp.body.len, 0, NULL) : NULL;
	long status = resp.status;
	cell_client_resp_free(&resp);
	if (status != 201) {
		const char *msg = json_string_value(json_object_get(o, "message"));
		cli_error("add skill %s@%s: %s (HTTP %ld)", name, version, msg ? msg : "refused",
			  status);
		json_decref(o);
		return CLI_EXIT_FAIL;
	}
	if (cli.json)
		cli_output_json(o);
	else
		printf("%s@%s %s\n", name, version,
		       json_string_value(json_object_get(o, "sha256")) ?: "");
	json_decref(o);
	return CLI_EXIT_OK;
}

static int skill_ls(void)
{
	json_t *resp, *items;
	int rc = cli_client_items("/v1/skills", "list skills", &resp, &items);
	if (rc >= 0)
		return rc;
	struct cli_table t;
	cli_table_init(&t, 6);
	cli_table_add(
	    &t, (const char *const[]){"NAME", "VERSION", "OWNER", "SIZE", "SHA256", "CREATED"});
	size_t i;
	json_t *v;
	json_array_foreach(items, i, v)
	{
		char size[32] = "-", sha[16] = "-";
		json_t *b = json_object_get(v, "size");
		if (json_is_integer(b))
			cli_output_size((unsigned long long)json_integer_value(b), size,
					sizeof(size));
		const char *s = json_string_value(json_object_get(v, "sha256"));
		if (s)
			snprintf(sha, sizeof(sha), "%.12s", s);
		const char *n = json_string_value(json_object_get(v, "name"));
		const char *ver = json_string_value(json_object_get(v, "version"));
		const char *c = json_string_value(json_object_get(v, "createdAt"));
		const char *own = json_string_value(json_object_get(v, "owner"));
		cli_table_add(&t, (const char *const[]){n ? n : "?", ver ? ver : "?",
							own ? own : "-", size, sha, c ? c : "-"});
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	json_decref(resp);
	return CLI_EXIT_OK;
}

static int remove_one(const char *arg, void *cls, struct cell_error *err)
{
	(void)cls;
	_cleanup_free_ char *copy = strdup(arg);
	if (!copy)
		return cell_err(err, ENOMEM, "remove skill");
	char *at = strchr(copy, '@');
	if (at)
		*at++ = '\0';
	_cleanup_free_ char *n = cell_client_urlencode(copy);
	_cleanup_free_ char *v = at ? cell_client_urlencode(at) : NULL;
	_cleanup_free_ char *path = NULL;
	if (!n || (at && !v) ||
	    asprintf(&path, "/v1/skills/%s%s%s", n, at ? "/" : "", at ? v : "") < 0)
		return cell_err(err, ENOMEM, "remove skill");
	return cli_client_api("DELETE", path, NULL, "remove skill", NULL, NULL, err);
}

int cmd_skill(int argc, char **argv)
{
	int rc = cli_global_opts_only(argc, argv, "+h", "skill", usage);
	if (rc >= 0)
		return rc;
	if (optind >= argc)
		return cli_error_usage("skill", CLI_EXIT_USAGE, "expected add, ls or rm");
	const char *sub = argv[optind++];
	if ((rc = cli_global_opts_only(argc, argv, "h", "skill", usage)) >= 0)
		return rc;
	if (!strcmp(sub, "add")) {
		if (argc - optind != 3)
			return cli_error_usage("skill", CLI_EXIT_USAGE,
					       "add: expected NAME VERSION FILE");
		return skill_add(argv[optind], argv[optind + 1], argv[optind + 2]);
	}
	if (!strcmp(sub, "ls")) {
		if (optind != argc)
			return cli_error_usage("skill", CLI_EXIT_USAGE,
					       "ls: unexpected argument '%s'", argv[optind]);
		return skill_ls();
	}
	if (!strcmp(sub, "rm"))
		return cli_each(argc, argv, "skill", "skill name", false, remove_one, NULL);
	return cli_error_usage("skill", CLI_EXIT_USAGE, "unknown subcommand '%s' (add, ls, rm)",
			       sub);
}
