/* cell image import FILE [NAME] [--ref REF] and cell image commit ID NAME [--snapshot]: an
 * archive streamed to POST /v1/images/import, a sandbox's or a snapshot's layer made an
 * image (POST /v1/sandboxes/{id}/commit, POST /v1/snapshots/{id}/commit). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "client.h"
#include "error.h"
#include "global.h"
#include "image_import.h"
#include "output.h"

static void usage(FILE *f)
{
	fprintf(f,
		"Usage: cell image import FILE [NAME] [--ref REF]\n"
		"       cell image commit ID NAME [--snapshot]\n"
		"\n"
		"import: an OCI image layout as a tar (plain or gzip; docker save's newer format\n"
		"        is one) or a docker save archive into celld's layer store, streamed\n"
		"        (FILE - reads stdin). NAME: what to call it (a reference, e.g.\n"
		"        myorg/tool:1.0), else the archive's own name for it (RepoTags, the\n"
		"        index's annotations). --ref picks one of several images of the archive.\n"
		"commit: a paused or stopped sandbox's writable layer (or a snapshot's) as a new\n"
		"        image over the image it sits on. ID: a sandbox id or a snapshot id\n"
		"        (asked of celld; --snapshot says which).\n"
		"\n"
		"Names are celld's, for every key: a name another key's image has is refused.\n"
		"\n"
		"Options:\n"
		"      --ref REF      (import) the image of the archive that REF names\n"
		"      --snapshot     (commit) ID is a snapshot's\n"
		"      --json         print celld's JSON\n"
		"      --socket PATH  celld's socket\n"
		"  -h, --help         this help\n");
}

struct bar {
	bool on;
	unsigned long long total;
	time_t last;
};

static void bar_show(void *cls, unsigned long long sent)
{
	struct bar *b = cls;
	time_t now = time(NULL);
	if (!b->on || (now == b->last && sent != b->total))
		return;
	b->last = now;
	char s[32], t[32];
	cli_output_size(sent, s, sizeof(s));
	if (b->total) {
		int width = 30, done = (int)(sent * (unsigned long long)width / b->total);
		fprintf(stderr, "\rimporting [%-*.*s] %s / ", width, done > width ? width : done,
			"##############################", s);
		cli_output_size(b->total, t, sizeof(t));
		fprintf(stderr, "%s   ", t);
	} else {
		fprintf(stderr, "\rimporting %s sent   ", s);
	}
	fflush(stderr);
}

/* A 2xx answer's JSON, or the failure printed (what names the request). */
static json_t *answer_json(struct cell_client_resp *resp, const char *what, long want)
{
	json_t *o = resp->body.len ? json_loadb(resp->body.data, resp->body.len, 0, NULL) : NULL;
	if (resp->status != want) {
		const char *msg = json_string_value(json_object_get(o, "message"));
		const char *code = json_string_value(json_object_get(o, "code"));
		cli_error("%s: %s%s%s (HTTP %ld)", what, code ? code : "", code ? ": " : "",
			  msg ? msg : "refused", resp->status);
		json_decref(o);
		return NULL;
	}
	return o;
}

static char *query(const char *name, const char *ref)
{
	_cleanup_free_ char *n = name ? cell_client_urlencode(name) : NULL;
	_cleanup_free_ char *r = ref ? cell_client_urlencode(ref) : NULL;
	char *out = NULL;
	if (asprintf(&out, "/v1/images/import%s%s%s%s%s", n || r ? "?" : "", n ? "name=" : "",
		     n ? n : "", r ? (n ? "&ref=" : "ref=") : "", r ? r : "") < 0)
		return NULL;
	return out;
}

int image_import_import(int argc, char **argv)
{
	enum { OPT_REF = 0x2000 };
	static const struct option longopts[] = {
	    {"ref", required_argument, NULL, OPT_REF}, CLI_GLOBAL_LONGOPTS, {0}};
	const char *ref = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == OPT_REF)
			ref = optarg;
		else
			return cli_error_option("image import", CLI_EXIT_USAGE);
	}
	if (optind >= argc || argc - optind > 2)
		return cli_error_usage("image import", CLI_EXIT_USAGE, "give FILE and maybe NAME");
	const char *file = argv[optind], *name = argc - optind == 2 ? argv[optind + 1] : NULL;
	_cleanup_close_ int fd = strcmp(file, "-") ? open(file, O_RDONLY | O_CLOEXEC) : dup(0);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0)
		return cli_error_usage("image import", CLI_EXIT_USAGE, "%s: %s", file,
				       strerror(errno));
	struct bar b = {.on = !cli.json && isatty(2),
			.total = S_ISREG(st.st_mode) ? (unsigned long long)st.st_size : 0};
	_cleanup_free_ char *path = query(name, ref);
	if (!path) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	struct cell_client_resp resp = {0};
	struct cell_error err = {0};
	int r = cell_client_post_fd(cli_client(), path, fd, "application/x-tar", bar_show, &b,
				    &resp, &err);
	if (b.on)
		fputc('\n', stderr);
	if (r < 0) {
		cell_client_resp_free(&resp);
		cli_error("image import %s: %s", file, err.msg);
		return CLI_EXIT_FAIL;
	}
	json_t *o = answer_json(&resp, "image import", 201);
	cell_client_resp_free(&resp);
	if (!o)
		return CLI_EXIT_FAIL;
	if (cli.json) {
		cli_output_json(o);
	} else {
		printf("%s %s (%lld layers, %lld new)\n",
		       json_string_value(json_object_get(o, "name")) ?: "",
		       json_string_value(json_object_get(o, "digest")) ?: "",
		       (long long)json_integer_value(json_object_get(o, "layers")),
		       (long long)json_integer_value(json_object_get(o, "layersAdded")));
	}
	json_decref(o);
	return CLI_EXIT_OK;
}

int image_import_commit(int argc, char **argv)
{
	enum { OPT_SNAPSHOT = 0x2000 };
	static const struct option longopts[] = {
	    {"snapshot", no_argument, NULL, OPT_SNAPSHOT}, CLI_GLOBAL_LONGOPTS, {0}};
	bool snapshot = false;
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == OPT_SNAPSHOT)
			snapshot = true;
		else
			return cli_error_option("image commit", CLI_EXIT_USAGE);
	}
	if (argc - optind != 2)
		return cli_error_usage("image commit", CLI_EXIT_USAGE, "give ID and NAME");
	const char *id = argv[optind], *name = argv[optind + 1];
	_cleanup_free_ char *enc = cell_client_urlencode(id);
	_cleanup_free_ char *probe = NULL, *path = NULL;
	json_t *out = NULL;
	long status = 0;
	struct cell_error err = {0};
	if (!snapshot) {
		/* A sandbox's id, else a snapshot's: ask which. */
		if (!enc || asprintf(&probe, "/v1/sandboxes/%s", enc) < 0)
			probe = NULL;
		if (probe &&
		    cli_client_api("GET", probe, NULL, "image commit", &out, &status, &err) < 0) {
			if (status != 404) {
				cli_error("%s", err.msg);
				return CLI_EXIT_FAIL;
			}
			snapshot = true;
		}
		json_decref(out);
		out = NULL;
	}
	if (!enc ||
	    asprintf(&path, "/v1/%s/%s/commit", snapshot ? "snapshots" : "sandboxes", enc) < 0) {
		cli_error("out of memory");
		return CLI_EXIT_FAIL;
	}
	json_t *body = json_pack("{s:s}", "name", name);
	int r = cli_client_api("POST", path, body, "image commit", &out, &status, &err);
	json_decref(body);
	if (r < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	if (cli.json)
		cli_output_json(out);
	else
		printf("%s %s\n", json_string_value(json_object_get(out, "name")) ?: "",
		       json_string_value(json_object_get(out, "digest")) ?: "");
	json_decref(out);
	return CLI_EXIT_OK;
}
