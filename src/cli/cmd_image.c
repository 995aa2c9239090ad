/* cell image: images of celld's layer store (pull, ls, inspect, rm, prune, tag through the
 * API) and the local images cell builds (build, and ls --images DIR without celld). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "client.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "image_import.h"
#include "output.h"
#include "signals.h"
#include "table.h"

#ifndef CELL_DATA_DIR
#define CELL_DATA_DIR "/usr/local/share/cell"
#endif

#define MANIFEST_MAX (1u << 20)

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: cell image pull REF [--user USER]\n"
	    "       cell image ls [-q] [--format json] [--images DIR]\n"
	    "       cell image inspect REF\n"
	    "       cell image rm [-f] REF...\n"
	    "       cell image prune\n"
	    "       cell image tag SOURCE NAME\n"
	    "       cell image import FILE [NAME] [--ref REF] (see cell image import -h)\n"
	    "       cell image commit ID NAME [--snapshot] (see cell image commit -h)\n"
	    "       cell image build NAME [--images DIR] [--recipe R] [--suite S] [--mirror URL]\n"
	    "\n"
	    "pull:    pull REF (\"busybox\", \"127.0.0.1:5000/x:1\") into celld's layer store;\n"
	    "         per-layer progress on a terminal, plain lines otherwise. --user USER\n"
	    "         reads the password from stdin; it is sent to celld for this pull only\n"
	    "ls:      the store's images (size, shared and unique bytes) and the built ones;\n"
	    "         -q: names only. With --images DIR: the built images of DIR, read\n"
	    "         without celld (<DIR>/*/manifest.json)\n"
	    "inspect: an image's config (Env, WorkingDir, User, Entrypoint, Cmd, ports,\n"
	    "         labels) and layers, as JSON\n"
	    "rm:      remove names (the Unix socket only); refused while a sandbox or snapshot\n"
	    "         uses the image, unless -f, which removes the name alone\n"
	    "prune:   remove the layers no image name, sandbox or snapshot keeps\n"
	    "tag:     another name for an image, its layers shared\n"
	    "build: build image NAME with rootfs/build-image (recipes: default = Debian\n"
	    "       minbase + tools, a few minutes; busybox = a tiny test image, seconds).\n"
	    "       Needs root. The new image replaces an old one only once it is complete.\n"
	    "ls:    list the images in the images dir (reads <DIR>/*/manifest.json).\n"
	    "\n"
	    "Options:\n"
	    "      --images DIR      images dir (env CELL_IMAGES_DIR, default %s)\n"
	    "      --recipe R        recipe, when NAME is not one (default or busybox)\n"
	    "      --suite S         suite (default bookworm; jammy, noble with an Ubuntu\n"
	    "                        --mirror)\n"
	    "      --mirror URL      package mirror (default http://deb.debian.org/debian)\n"
	    "      --components C    archive components (default main; Ubuntu main,universe)\n"
	    "      --json, --format json\n"
	    "                        (ls) print the images as a JSON array\n"
	    "  -q                    (ls) names only\n"
	    "  -f, --force           (rm) remove the name even while the image is used\n"
	    "      --user USER       (pull) the registry's user; the password on stdin\n"
	    "  -h, --help            this help\n"
	    "\n"
	    "Example: sudo cell image build noble --recipe default --suite noble \\\n"
	    "             --mirror http://archive.ubuntu.com/ubuntu\n",
	    CLI_DEFAULT_IMAGES);
}

static const char *images_dir(const char *flag)
{
	if (flag)
		return flag;
	const char *env = getenv("CELL_IMAGES_DIR");
	return env && env[0] ? env : CLI_DEFAULT_IMAGES;
}

/* The build script: $CELL_ROOTFS_DIR/build-image, else <dir of this executable>/../rootfs
 * (the build tree: build/cell → rootfs/), else the installed CELL_DATA_DIR/rootfs. */
static char *find_build_script(void)
{
	char *p = NULL;
	const char *env = getenv("CELL_ROOTFS_DIR");
	if (env && env[0]) {
		if (asprintf(&p, "%s/build-image", env) < 0)
			return NULL;
		if (access(p, X_OK) == 0)
			return p;
		cli_error("CELL_ROOTFS_DIR=%s: %s: %s", env, p, strerror(errno));
		free(p);
		return NULL;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n > 0) {
		exe[n] = '\0';
		if (asprintf(&p, "%s/../rootfs/build-image", dirname(exe)) < 0)
			return NULL;
		if (access(p, X_OK) == 0)
			return p;
		free(p);
	}
	if (asprintf(&p, "%s/rootfs/build-image", CELL_DATA_DIR) < 0)
		return NULL;
	if (access(p, X_OK) == 0)
		return p;
	cli_error("image build: build-image script not found (looked next to the cell binary "
		  "and in %s/rootfs; set CELL_ROOTFS_DIR)",
		  CELL_DATA_DIR);
	free(p);
	return NULL;
}

static int image_build(int argc, char **argv)
{
	enum { OPT_IMAGES = 0x2000, OPT_SUITE, OPT_MIRROR, OPT_RECIPE, OPT_COMPONENTS };
	static const struct option longopts[] = {
	    {"images", required_argument, NULL, OPT_IMAGES},
	    {"suite", required_argument, NULL, OPT_SUITE},
	    {"mirror", required_argument, NULL, OPT_MIRROR},
	    {"recipe", required_argument, NULL, OPT_RECIPE},
	    {"components", required_argument, NULL, OPT_COMPONENTS},
	    CLI_GLOBAL_LONGOPTS,
	    {0}};
	const char *images = NULL;
	/* Options passed on to the script as they are; it validates them. */
	const char *pass[4][2] = {
	    {"--suite", NULL}, {"--mirror", NULL}, {"--recipe", NULL}, {"--components", NULL}};
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		switch (c) {
		case 'h':
			usage(stdout);
			return CLI_EXIT_OK;
		case OPT_IMAGES:
			images = optarg;
			break;
		case OPT_SUITE:
		case OPT_MIRROR:
		case OPT_RECIPE:
		case OPT_COMPONENTS:
			pass[c - OPT_SUITE][1] = optarg;
			break;
		default:
			return cli_error_option("image", CLI_EXIT_USAGE);
		}
	}
	if (argc - optind != 1)
		return cli_error_usage("image", CLI_EXIT_USAGE, "image build takes one NAME");
	_cleanup_free_ char *script = find_build_script();
	if (!script)
		return CLI_EXIT_FAIL;
	const char *args[4 + 2 * CELL_ARRAY_SIZE(pass)];
	size_t n = 0;
	args[n++] = script;
	args[n++] = argv[optind];
	args[n++] = images_dir(images);
	for (size_t i = 0; i < CELL_ARRAY_SIZE(pass); i++) {
		if (pass[i][1]) {
			args[n++] = pass[i][0];
			args[n++] = pass[i][1];
		}
	}
	args[n] = NULL;
	fflush(NULL);
	execv(script, (char *const *)args);
	cli_error("image build: running %s: %s", script, strerror(errno));
	return CLI_EXIT_FAIL;
}

static int name_cmp(const void *a, const void *b)
{
	const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
	const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));
	return strcmp(x ? x : "", y ? y : "");
}

/* Read <images>/<name>/manifest.json; an image dir without one gets a stub entry. */
static json_t *read_manifest(int dirfd, const char *name)
{
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "%s/manifest.json", name) < 0)
		return NULL;
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	struct cell_error err = {0};
	json_t *m = NULL;
	if (cell_read_file_at(dirfd, path, MANIFEST_MAX, &text, &len, &err) == 0)
		m = json_loadb(text, len, 0, NULL);
	if (!json_is_object(m)) {
		json_decref(m);
		m = json_pack("{s:s, s:s}", "name", name, "error",
			      err.code ? err.msg : "manifest.json is not a JSON object");
	}
	/* The directory name is what celld looks up; it wins over the manifest's field. */
	if (m)
		json_object_set_new(m, "name", json_string(name));
	return m;
}

static int store_ls(bool quiet);

static int image_ls(int argc, char **argv)
{
	enum { OPT_IMAGES = 0x2000, OPT_FORMAT };
	static const struct option longopts[] = {{"images", required_argument, NULL, OPT_IMAGES},
						 {"format", required_argument, NULL, OPT_FORMAT},
						 CLI_GLOBAL_LONGOPTS,
						 {0}};
	const char *images = NULL;
	bool quiet = false;
	int c;
	while ((c = getopt_long(argc, argv, "hq", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == 'q') {
			quiet = true;
			continue;
		}
		if (c == OPT_FORMAT) {
			if (strcmp(optarg, "json"))
				return cli_error_usage("image", CLI_EXIT_USAGE,
						       "--format takes json");
			cli.json = true;
			continue;
		}
		if (c == OPT_IMAGES) {
			images = optarg;
			continue;
		}
		return cli_error_option("image", CLI_EXIT_USAGE);
	}
	if (optind != argc)
		return cli_error_usage("image", CLI_EXIT_USAGE, "image ls takes no arguments");
	if (!images)
		return store_ls(quiet);
	const char *dir = images_dir(images);
	_cleanup_closedir_ DIR *d = opendir(dir);
	if (!d) {
		cli_error("image ls: images dir %s: %s", dir, strerror(errno));
		return CLI_EXIT_FAIL;
	}
	json_t *all = json_array();
	struct dirent *de;
	while ((de = readdir(d))) {
		/* Dot entries include .build-NAME.<pid>, an image still being built. */
		if (de->d_name[0] == '.')
			continue;
		if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
			continue;
		json_t *m = read_manifest(dirfd(d), de->d_name);
		if (m)
			json_array_append_new(all, m);
	}
	size_t n = json_array_size(all);
	json_t **v = calloc(n ? n : 1, sizeof(*v));
	for (size_t i = 0; v && i < n; i++)
		v[i] = json_incref(json_array_get(all, i));
	if (v)
		qsort(v, n, sizeof(*v), name_cmp);
	json_array_clear(all);
	for (size_t i = 0; v && i < n; i++)
		json_array_append_new(all, v[i]);
	free(v);
	if (cli.json) {
		cli_output_json(all);
		json_decref(all);
		return CLI_EXIT_OK;
	}
	if (quiet) {
		size_t k;
		json_t *o;
		json_array_foreach(all, k, o)
		    printf("%s\n", json_string_value(json_object_get(o, "name")));
		json_decref(all);
		return CLI_EXIT_OK;
	}
	struct cli_table t;
	cli_table_init(&t, 5);
	cli_table_add(&t, (const char *const[]){"NAME", "SUITE", "PACKAGES", "SIZE", "BUILT"});
	size_t i;
	json_t *m;
	json_array_foreach(all, i, m)
	{
		char size[32] = "-", pkgs[32] = "-";
		json_t *sz = json_object_get(m, "sizeBytes");
		if (json_is_integer(sz))
			cli_output_size((unsigned long long)json_integer_value(sz), size,
					sizeof(size));
		json_t *p = json_object_get(m, "packages");
		if (json_is_array(p))
			snprintf(pkgs, sizeof(pkgs), "%zu", json_array_size(p));
		const char *suite = json_string_value(json_object_get(m, "suite"));
		const char *built = json_string_value(json_object_get(m, "builtAt"));
		const char *errm = json_string_value(json_object_get(m, "error"));
		const char *row[5] = {
		    json_string_value(json_object_get(m, "name")), suite ? suite : "-", pkgs, size,
		    errm ? "(incomplete: no valid manifest.json)" : (built ? built : "-")};
		cli_table_add(&t, row);
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	json_decref(all);
	return CLI_EXIT_OK;
}

/* ---- the layer store, through celld ---- */

/* Options of the store's subcommands: the global ones, -h, and those of optstring/longopts
 * handled by fn (NULL: none). Returns -1 to go on, else the exit status. */
static int store_opts(int argc, char **argv, const char *optstring, const struct option *more,
		      bool (*fn)(int c, void *cls), void *cls)
{
	struct option longopts[8] = {CLI_GLOBAL_LONGOPTS};
	size_t n = 0;
	while (longopts[n].name)
		n++;
	for (size_t i = 0; more && more[i].name && n + 1 < CELL_ARRAY_SIZE(longopts); i++)
		longopts[n++] = more[i];
	int c;
	while ((c = getopt_long(argc, argv, optstring, longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		if (fn && fn(c, cls))
			continue;
		return cli_error_option("image", CLI_EXIT_USAGE);
	}
	return -1;
}

static int store_ls(bool quiet)
{
	json_t *items = NULL;
	long status = 0;
	struct cell_error err = {0};
	if (cli_client_api("GET", "/v1/images", NULL, "list images", &items, &status, &err) < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	if (cli.json) {
		cli_output_json(items);
		json_decref(items);
		return CLI_EXIT_OK;
	}
	size_t i;
	json_t *o;
	if (quiet) {
		json_array_foreach(items, i, o)
		    printf("%s\n", json_string_value(json_object_get(o, "name")));
		json_decref(items);
		return CLI_EXIT_OK;
	}
	struct cli_table t;
	cli_table_init(&t, 5);
	cli_table_add(&t, (const char *const[]){"NAME", "DIGEST", "SIZE", "SHARED", "UNIQUE"});
	json_array_foreach(items, i, o)
	{
		char size[32] = "-", shared[32] = "-", unique[32] = "-", digest[20] = "-";
		const char *d = json_string_value(json_object_get(o, "digest"));
		if (d && !strncmp(d, "sha256:", 7))
			snprintf(digest, sizeof(digest), "%.12s", d + 7);
		if (!strcmp(json_string_value(json_object_get(o, "source")) ?: "", "registry")) {
			cli_output_size(
			    (unsigned long long)json_integer_value(json_object_get(o, "bytes")),
			    size, sizeof(size));
			cli_output_size((unsigned long long)json_integer_value(
					    json_object_get(o, "sharedBytes")),
					shared, sizeof(shared));
			cli_output_size((unsigned long long)json_integer_value(
					    json_object_get(o, "uniqueBytes")),
					unique, sizeof(unique));
		}
		const char *name = json_string_value(json_object_get(o, "name"));
		cli_table_add(
		    &t, (const char *const[]){name ? name : "?", digest, size, shared, unique});
	}
	cli_table_print(&t, stdout);
	cli_table_free(&t);
	json_decref(items);
	return CLI_EXIT_OK;
}

/* /v1/images/<ref> with ref escaped as one path segment per component. */
static char *image_path(const char *ref)
{
	_cleanup_free_ char *enc = cell_client_urlencode(ref);
	char *p = NULL;
	if (!enc || asprintf(&p, "/v1/images/x?name=%s", enc) < 0)
		return NULL;
	return p;
}

static int image_inspect(int argc, char **argv)
{
	int rc = store_opts(argc, argv, "h", NULL, NULL, NULL);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_error_usage("image", CLI_EXIT_USAGE, "image inspect takes one REF");
	_cleanup_free_ char *path = image_path(argv[optind]);
	json_t *out = NULL;
	long status = 0;
	struct cell_error err = {0};
	if (!path || cli_client_api("GET", path, NULL, "inspect image", &out, &status, &err) < 0) {
		cli_error("%s", err.msg[0] ? err.msg : "out of memory");
		return CLI_EXIT_FAIL;
	}
	cli_output_json(out);
	json_decref(out);
	return CLI_EXIT_OK;
}

static bool rm_opt(int c, void *cls)
{
	if (c != 'f')
		return false;
	*(bool *)cls = true;
	return true;
}

static int remove_one(const char *name, void *cls, struct cell_error *err)
{
	bool force = *(bool *)cls;
	_cleanup_free_ char *path = image_path(name);
	_cleanup_free_ char *full = NULL;
	if (!path || asprintf(&full, "%s%s", path, force ? "&force=true" : "") < 0)
		return cell_err(err, ENOMEM, "remove image");
	return cli_client_api("DELETE", full, NULL, "remove image", NULL, NULL, err);
}

static int image_rm(int argc, char **argv)
{
	static const struct option more[] = {{"force", no_argument, NULL, 'f'}, {0}};
	bool force = false;
	int rc = store_opts(argc, argv, "hf", more, rm_opt, &force);
	if (rc >= 0)
		return rc;
	return cli_each(argc, argv, "image", "image name", false, remove_one, &force);
}

static int image_prune(int argc, char **argv)
{
	int rc = store_opts(argc, argv, "h", NULL, NULL, NULL);
	if (rc >= 0)
		return rc;
	if (optind != argc)
		return cli_error_usage("image", CLI_EXIT_USAGE, "image prune takes no arguments");
	json_t *out = NULL;
	long status = 0;
	struct cell_error err = {0};
	if (cli_client_api("POST", "/v1/images/prune", NULL, "prune images", &out, &status, &err) <
	    0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	char freed[32];
	cli_output_size((unsigned long long)json_integer_value(json_object_get(out, "freedBytes")),
			freed, sizeof(freed));
	printf("freed %s\n", freed);
	json_decref(out);
	return CLI_EXIT_OK;
}

static int image_tag(int argc, char **argv)
{
	int rc = store_opts(argc, argv, "h", NULL, NULL, NULL);
	if (rc >= 0)
		return rc;
	if (argc - optind != 2)
		return cli_error_usage("image", CLI_EXIT_USAGE, "image tag takes SOURCE and NAME");
	json_t *body = json_pack("{s:s, s:s}", "source", argv[optind], "name", argv[optind + 1]);
	json_t *out = NULL;
	long status = 0;
	struct cell_error err = {0};
	rc = cli_client_api("POST", "/v1/images/tag", body, "tag image", &out, &status, &err);
	json_decref(body);
	if (rc < 0) {
		cli_error("%s", err.msg);
		return CLI_EXIT_FAIL;
	}
	printf("%s\n", json_string_value(json_object_get(out, "name")) ?: argv[optind + 1]);
	json_decref(out);
	return CLI_EXIT_OK;
}

/* ---- pull, with its progress ---- */

#define PULL_LAYERS_SHOWN 128

struct pull_view {
	bool tty;
	unsigned count, drawn; /* layers known; lines drawn last time */
	struct {
		char id[16], state[16];
		uint64_t done, total, rate_base;
		double rate_t0, rate;
	} l[PULL_LAYERS_SHOWN];
	double last_draw;
	json_t *end; /* the done or error event */
};

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void draw(struct pull_view *v, bool force)
{
	double t = now_s();
	if (!force && t - v->last_draw < 0.1)
		return;
	v->last_draw = t;
	if (v->drawn)
		printf("\033[%uA", v->drawn);
	for (unsigned i = 0; i < v->count; i++) {
		char done[32], total[32], line[160];
		cli_output_size(v->l[i].done, done, sizeof(done));
		cli_output_size(v->l[i].total, total, sizeof(total));
		if (!strcmp(v->l[i].state, "downloading")) {
			int width = 30,
			    fill = v->l[i].total ? (int)(width * v->l[i].done / v->l[i].total) : 0;
			char bar[40];
			for (int k = 0; k < width; k++)
				bar[k] = k < fill ? '=' : k == fill ? '>' : ' ';
			bar[width] = '\0';
			char rate[32];
			cli_output_size((uint64_t)v->l[i].rate, rate, sizeof(rate));
			snprintf(line, sizeof(line), "%s: downloading [%s] %s/%s %s/s", v->l[i].id,
				 bar, done, total, rate);
		} else if (!strcmp(v->l[i].state, "exists")) {
			snprintf(line, sizeof(line), "%s: already exists", v->l[i].id);
		} else if (!strcmp(v->l[i].state, "done")) {
			snprintf(line, sizeof(line), "%s: pull complete (%s)", v->l[i].id, total);
		} else {
			snprintf(line, sizeof(line), "%s: %s", v->l[i].id, v->l[i].state);
		}
		printf("\r\033[2K%s\n", line);
	}
	v->drawn = v->count;
	fflush(stdout);
}

static int on_pull_event(void *ctx, const char *data, size_t len)
{
	struct pull_view *v = ctx;
	json_t *ev = json_loadb(data, len, 0, NULL);
	if (!ev)
		return 0;
	const char *type = json_string_value(json_object_get(ev, "type")) ?: "";
	if (!strcmp(type, "done") || !strcmp(type, "error")) {
		json_decref(v->end);
		v->end = ev;
		return 0;
	}
	if (!strcmp(type, "status")) {
		printf("pulling %s\n", json_string_value(json_object_get(ev, "image")) ?: "?");
		fflush(stdout);
	} else if (!strcmp(type, "progress")) {
		json_int_t idx = json_integer_value(json_object_get(ev, "index"));
		json_int_t count = json_integer_value(json_object_get(ev, "count"));
		const char *layer = json_string_value(json_object_get(ev, "layer")) ?: "";
		const char *state = json_string_value(json_object_get(ev, "state")) ?: "";
		if (idx >= 0 && idx < PULL_LAYERS_SHOWN) {
			if (count > 0 && count <= PULL_LAYERS_SHOWN && (unsigned)count > v->count)
				v->count = (unsigned)count;
			typeof(v->l[0]) *l = &v->l[idx];
			bool changed = strcmp(l->state, state) != 0;
			snprintf(l->id, sizeof(l->id), "%.12s",
				 strchr(layer, ':') ? strchr(layer, ':') + 1 : layer);
			snprintf(l->state, sizeof(l->state), "%s", state);
			l->done = (uint64_t)json_integer_value(json_object_get(ev, "done"));
			l->total = (uint64_t)json_integer_value(json_object_get(ev, "total"));
			double t = now_s();
			if (changed) {
				l->rate_t0 = t;
				l->rate_base = l->done;
			} else if (t > l->rate_t0) {
				l->rate = (double)(l->done - l->rate_base) / (t - l->rate_t0);
			}
			if (v->tty)
				draw(v, changed);
			else if (changed)
				printf("%s: %s\n", l->id, state);
		}
	}
	json_decref(ev);
	return 0;
}

/* The password of --user: a line of stdin (echo off on a terminal). */
static int read_password(char *buf, size_t size)
{
	bool tty = isatty(STDIN_FILENO);
	struct termios old, quiet;
	if (tty && tcgetattr(STDIN_FILENO, &old) == 0) {
		quiet = old;
		quiet.c_lflag &= ~(tcflag_t)ECHO;
		fprintf(stderr, "Password: ");
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
	} else {
		tty = false;
	}
	char *line = fgets(buf, (int)size, stdin);
	if (tty) {
		tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
		fprintf(stderr, "\n");
	}
	if (!line)
		return -1;
	buf[strcspn(buf, "\r\n")] = '\0';
	return 0;
}

static bool pull_opt(int c, void *cls)
{
	if (c != 'u')
		return false;
	*(const char **)cls = optarg;
	return true;
}

static int image_pull(int argc, char **argv)
{
	static const struct option more[] = {{"user", required_argument, NULL, 'u'}, {0}};
	const char *user = NULL;
	int rc = store_opts(argc, argv, "hu:", more, pull_opt, &user);
	if (rc >= 0)
		return rc;
	if (argc - optind != 1)
		return cli_error_usage("image", CLI_EXIT_USAGE, "image pull takes one REF");
	json_t *body = json_pack("{s:s}", "image", argv[optind]);
	if (user) {
		char pass[1024];
		if (read_password(pass, sizeof(pass)) < 0) {
			json_decref(body);
			cli_error("image pull: no password on stdin for --user %s", user);
			return CLI_EXIT_USAGE;
		}
		json_object_set_new(body, "auth",
				    json_pack("{s:s, s:s}", "username", user, "password", pass));
		explicit_bzero(pass, sizeof(pass));
	}
	char *text = json_dumps(body, JSON_COMPACT);
	json_decref(body);
	if (!text)
		return CLI_EXIT_FAIL;
	struct pull_view *v = calloc(1, sizeof(*v));
	if (!v) {
		free(text);
		return CLI_EXIT_FAIL;
	}
	v->tty = isatty(STDOUT_FILENO);
	cli_signals_install();
	struct cell_client_req req = {
	    .method = "POST", .path = "/v1/images/pull", .body = text, .abortable = true};
	struct cell_error err = {0};
	long status = 0;
	rc = cell_client_stream(cli_client(), &req, on_pull_event, v, "pull image", &status, &err);
	explicit_bzero(text, strlen(text));
	free(text);
	if (v->tty && v->count)
		draw(v, true);
	int exit_code = CLI_EXIT_OK;
	const char *type = json_string_value(json_object_get(v->end, "type"));
	if (rc < 0) {
		cli_error("%s", err.msg);
		exit_code = CLI_EXIT_FAIL;
	} else if (!type || strcmp(type, "done")) {
		cli_error("image pull %s: %s", argv[optind],
			  json_string_value(json_object_get(v->end, "message"))
			      ?: "the pull ended without its result");
		exit_code = CLI_EXIT_FAIL;
	} else {
		char fetched[32];
		cli_output_size(
		    (unsigned long long)json_integer_value(json_object_get(v->end, "fetchedBytes")),
		    fetched, sizeof(fetched));
		printf("%s: %s (%s fetched)\n",
		       json_string_value(json_object_get(v->end, "name")) ?: "?",
		       json_string_value(json_object_get(v->end, "digest")) ?: "?", fetched);
	}
	json_decref(v->end);
	free(v);
	return exit_code;
}

int cmd_image(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
	}
	const char *sub = argv[1];
	char prog[32];
	optind = 0;
	static const struct {
		const char *name;
		int (*fn)(int argc, char **argv);
	} subs[] = {{"build", image_build}, {"ls", image_ls},		{"list", image_ls},
		    {"pull", image_pull},   {"inspect", image_inspect}, {"rm", image_rm},
		    {"prune", image_prune}, {"tag", image_tag}};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(subs); i++) {
		if (strcmp(sub, subs[i].name))
			continue;
		snprintf(prog, sizeof(prog), "cell image %s", sub);
		argv[1] = prog; /* getopt's messages name the command */
		return subs[i].fn(argc - 1, argv + 1);
	}
	if (!strcmp(sub, "import") || !strcmp(sub, "commit"))
		return (sub[1] == 'm' ? image_import_import : image_import_commit)(argc - 1,
										   argv + 1);
	return cli_error_usage(
	    "image", CLI_EXIT_USAGE,
	    "unknown subcommand '%s' (pull, ls, inspect, rm, prune, tag, import, "
	    "commit, build)",
	    sub);
}
