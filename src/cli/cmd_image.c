/* cell image build | ls: local images under the images dir (no celld needed). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "commands.h"
#include "error.h"
#include "global.h"
#include "image_import.h"
#include "output.h"
#include "table.h"

#ifndef CELL_DATA_DIR
#define CELL_DATA_DIR "/usr/local/share/cell"
#endif

#define MANIFEST_MAX (1u << 20)

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "Usage: cell image build NAME [--images DIR] [--recipe R] [--suite S] [--mirror URL]\n"
	    "       cell image ls [--images DIR] [--json]\n"
	    "\n"
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
	    "      --json            (ls) print the manifests as a JSON array\n"
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

static int image_ls(int argc, char **argv)
{
	enum { OPT_IMAGES = 0x2000 };
	static const struct option longopts[] = {
	    {"images", required_argument, NULL, OPT_IMAGES}, CLI_GLOBAL_LONGOPTS, {0}};
	const char *images = NULL;
	int c;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		if (cli_global_opt(c, optarg))
			continue;
		if (c == 'h') {
			usage(stdout);
			return CLI_EXIT_OK;
		}
		if (c == OPT_IMAGES) {
			images = optarg;
			continue;
		}
		return cli_error_option("image", CLI_EXIT_USAGE);
	}
	if (optind != argc)
		return cli_error_usage("image", CLI_EXIT_USAGE, "image ls takes no arguments");
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

int cmd_image(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
	}
	const char *sub = argv[1];
	char prog[32];
	optind = 0;
	if (!strcmp(sub, "build") || !strcmp(sub, "ls") || !strcmp(sub, "list")) {
		snprintf(prog, sizeof(prog), "cell image %s", sub);
		argv[1] = prog; /* getopt's messages name the command */
		if (sub[0] == 'b')
			return image_build(argc - 1, argv + 1);
		return image_ls(argc - 1, argv + 1);
	}
	if (!strcmp(sub, "import") || !strcmp(sub, "commit"))
		return (sub[1] == 'm' ? image_import_import : image_import_commit)(argc - 1,
										   argv + 1);
	return cli_error_usage("image", CLI_EXIT_USAGE, "unknown subcommand '%s' (build, ls)", sub);
}
