/* Parsers of the cell CLI's option values and operands: ids, -e, -v, --timeout. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/id.h"
#include "error.h"
#include "parse.h"

bool cli_parse_id(const char *id)
{
	if (cell_id_valid(id))
		return true;
	cli_error("invalid sandbox id '%s': expected 1-%d characters of [a-z0-9-]", id,
		  CELL_ID_MAX);
	return false;
}

int cli_parse_env(json_t *obj, const char *arg)
{
	const char *eq = strchr(arg, '=');
	_cleanup_free_ char *key = strndup(arg, eq ? (size_t)(eq - arg) : strlen(arg));
	if (!key)
		return -ENOMEM;
	if (!key[0]) {
		cli_error("-e '%s': empty variable name", arg);
		return -EINVAL;
	}
	const char *val = eq ? eq + 1 : getenv(key);
	if (!val) {
		cli_error("-e %s: not set in this environment (use -e %s=VALUE)", key, key);
		return -EINVAL;
	}
	if (json_object_set_new(obj, key, json_string(val)) < 0) {
		cli_error("-e %s: value is not valid UTF-8", key);
		return -EINVAL;
	}
	return 0;
}

#define ENV_FILE_MAX (1u << 20)

int cli_parse_env_file(json_t *obj, const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		cli_error("--env-file %s: %s", path, strerror(errno));
		return -EINVAL;
	}
	char *line = NULL;
	size_t cap = 0, total = 0;
	ssize_t n;
	int r = 0;
	unsigned lineno = 0;
	while (r == 0 && (n = getline(&line, &cap, f)) >= 0) {
		lineno++;
		total += (size_t)n;
		if (total > ENV_FILE_MAX) {
			cli_error("--env-file %s: larger than 1 MiB", path);
			r = -EFBIG;
			break;
		}
		line[strcspn(line, "\r\n")] = '\0';
		const char *p = line + strspn(line, " \t");
		if (!*p || *p == '#')
			continue;
		if (*p == '=') {
			cli_error("--env-file %s:%u: empty variable name", path, lineno);
			r = -EINVAL;
		} else {
			r = cli_parse_env(obj, p);
		}
	}
	if (r == 0 && ferror(f)) {
		cli_error("--env-file %s: %s", path, strerror(errno));
		r = -EIO;
	}
	free(line);
	fclose(f);
	return r;
}

/* The options after DEST: "ro", "rw", "map=owner|range|identity", comma-separated. 1 when
 * text is such a list (ro and map filled), 0 when it is not one (it is part of DEST). */
static int volume_options(const char *text, bool *ro, const char **map)
{
	static const char *const maps[] = {"owner", "range", "identity"};
	bool ro_seen = false;
	const char *map_seen = NULL;
	for (const char *p = text; *p;) {
		size_t len = strcspn(p, ",");
		if (len == 2 && (!strncmp(p, "ro", 2) || !strncmp(p, "rw", 2))) {
			ro_seen = p[1] == 'o';
		} else if (len > 4 && !strncmp(p, "map=", 4)) {
			map_seen = NULL;
			for (size_t i = 0; i < CELL_ARRAY_SIZE(maps); i++)
				if (len - 4 == strlen(maps[i]) && !strncmp(p + 4, maps[i], len - 4))
					map_seen = maps[i];
			if (!map_seen)
				return 0;
		} else {
			return 0;
		}
		p += len;
		p += *p == ',';
	}
	*ro = ro_seen;
	*map = map_seen;
	return 1;
}

int cli_parse_volume(json_t *arr, const char *arg)
{
	_cleanup_free_ char *spec = strdup(arg);
	if (!spec)
		return -ENOMEM;
	bool ro = false;
	const char *map = NULL;
	char *colon = strchr(spec, ':');
	if (!colon || colon == spec || !colon[1]) {
		cli_error("-v '%s': expected HOST:DEST[:OPTIONS]", arg);
		return -EINVAL;
	}
	*colon = '\0';
	char *dest = colon + 1;
	char *opts = strrchr(dest, ':');
	if (opts && volume_options(opts + 1, &ro, &map) == 1)
		*opts = '\0';
	else if (opts && opts[1] && !strchr(opts + 1, '/')) {
		cli_error("-v '%s': options '%s' are not ro, rw or map=owner|range|identity", arg,
			  opts + 1);
		return -EINVAL;
	}
	if (dest[0] != '/') {
		cli_error("-v '%s': destination '%s' must be an absolute path", arg, dest);
		return -EINVAL;
	}
	/* A bare name (no '/', not "." or ".."-led) is one of celld's named volumes. */
	if (!strchr(spec, '/') && spec[0] != '.') {
		if (map) {
			cli_error(
			    "-v '%s': map= is for host paths; a named volume's ids are always "
			    "the sandbox's",
			    arg);
			return -EINVAL;
		}
		char name[16];
		snprintf(name, sizeof(name), "v%zu", json_array_size(arr));
		json_t *v = json_pack("{s:s, s:s, s:b, s:{s:s}}", "name", name, "mountPath", dest,
				      "readOnly", ro, "pvc", "claimName", spec);
		if (!v) {
			cli_error("-v '%s': names and paths must be valid UTF-8", arg);
			return -EINVAL;
		}
		return json_array_append_new(arr, v) < 0 ? -ENOMEM : 0;
	}
	_cleanup_free_ char *host = realpath(spec, NULL);
	if (!host) {
		cli_error("-v '%s': host path %s: %s", arg, spec, strerror(errno));
		return -errno;
	}
	json_t *v = json_pack("{s:s, s:s, s:b}", "host", host, "dest", dest, "readOnly", ro);
	if (!v) {
		cli_error("-v '%s': paths must be valid UTF-8", arg);
		return -EINVAL;
	}
	if (map)
		json_object_set_new(v, "map", json_string(map));
	return json_array_append_new(arr, v) < 0 ? -ENOMEM : 0;
}

/* A sandbox's user namespace maps 65536 ids (CELL_UID_RANGE): 0-65535. */
#define CLI_ID_MAX 65535

/* One decimal id of --user: digits only (no sign, no space, no hex), at most CLI_ID_MAX. */
static bool parse_id_number(const char *s, size_t len, long long *out)
{
	if (len == 0 || len > 5)
		return false;
	long long v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		v = v * 10 + (s[i] - '0');
	}
	if (v > CLI_ID_MAX)
		return false;
	*out = v;
	return true;
}

int cli_parse_user(const char *arg, long long *uid, long long *gid)
{
	const char *colon = strchr(arg, ':');
	size_t ulen = colon ? (size_t)(colon - arg) : strlen(arg);
	if (!parse_id_number(arg, ulen, uid) ||
	    (colon && !parse_id_number(colon + 1, strlen(colon + 1), gid))) {
		/* Account names start with a letter or '_'. */
		bool name = (arg[0] >= 'a' && arg[0] <= 'z') || (arg[0] >= 'A' && arg[0] <= 'Z') ||
			    arg[0] == '_';
		cli_error("--user '%s': expected UID[:GID], numbers 0-%d%s", arg, CLI_ID_MAX,
			  name ? " (names are not resolved: the default image's `user` is 1000, "
				 "root is 0)"
			       : "");
		return -EINVAL;
	}
	if (!colon)
		*gid = *uid;
	return 0;
}

int cli_parse_seconds_ms(const char *arg, long long *ms)
{
	char *end = NULL;
	errno = 0;
	double s = strtod(arg, &end);
	if (errno || end == arg || *end || !isfinite(s) || s <= 0 || s > 1e9) {
		cli_error("--timeout '%s': expected a positive number of seconds", arg);
		return -EINVAL;
	}
	double x = s * 1000.0;
	*ms = (long long)x;
	if ((double)*ms < x) /* round up: 0.0005 s is 1 ms, never "no timeout" */
		(*ms)++;
	return 0;
}

bool cli_parse_port(const char *s, bool zero_ok, unsigned *out)
{
	char *end;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (!s[0] || *end || errno || v > 65535 || (!v && !zero_ok) || s[0] == '-' || s[0] == '+')
		return false;
	*out = (unsigned)v;
	return true;
}
