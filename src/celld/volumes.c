/* Host volumes (extensions["cell.volumes"], Unix socket only): each checked, its host path
 * resolved, and the id mapping that decides who owns what the sandbox writes there chosen
 * and recorded with the sandbox.
 *
 * A volume is a host directory the sandbox writes into, and whoever reaches that directory
 * on the host later meets what it wrote: a set-id binary, a file capability, a file owned by
 * some host account. So the sandbox's root is never host root there, nor any system account:
 *
 *   owner     (the default for a directory an ordinary account owns) the sandbox's root is
 *             that owner: files come back owned by the user who shared the directory, as
 *             they would had they written them; every other sandbox id stays in the
 *             sandbox's own range, and files of other host accounts show as nobody.
 *   range     (the default when a system account such as root owns the directory) no
 *             mapping at all: what the sandbox writes belongs to its own reserved uid range,
 *             and host accounts' files are only reachable through their "other" bits.
 *   identity  host ids 0..65535 are the sandbox's: its root is host root on the volume.
 *             Only when the operator asks for it by name, and logged as a warning.
 *
 * An ordinary account is one login.defs gives to users (UID_MIN..UID_MAX, default
 * 1000..60000), not nobody; the same for groups (GID_MIN..GID_MAX). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "volumes.h"
#include "fields.h"
#include "uidrange.h"

#define VOLUMES_MAX    32
#define LOGIN_DEFS     "/etc/login.defs"
#define OVERFLOW_ID    65534u /* nobody / nogroup */
#define DEFAULT_MIN    1000u
#define DEFAULT_MAX    60000u
#define LOGIN_DEFS_MAX (256u << 10)

static const char *const map_names[] = {
    [CELL_VOLUME_MAP_RANGE] = "range",
    [CELL_VOLUME_MAP_OWNER] = "owner",
    [CELL_VOLUME_MAP_IDENTITY] = "identity",
};

/* ---- ordinary accounts ---- */

static struct {
	unsigned uid_min, uid_max, gid_min, gid_max;
} accounts = {DEFAULT_MIN, DEFAULT_MAX, DEFAULT_MIN, DEFAULT_MAX};
static pthread_once_t accounts_once = PTHREAD_ONCE_INIT;

static void read_login_defs(void)
{
	_cleanup_free_ char *text = NULL;
	if (cell_read_file_at(AT_FDCWD, LOGIN_DEFS, LOGIN_DEFS_MAX, &text, NULL, NULL) < 0)
		return;
	static const struct {
		const char *key;
		unsigned *v;
	} keys[] = {{"UID_MIN", &accounts.uid_min},
		    {"UID_MAX", &accounts.uid_max},
		    {"GID_MIN", &accounts.gid_min},
		    {"GID_MAX", &accounts.gid_max}};
	for (char *line = text; line && *line;
	     line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		for (size_t i = 0; i < CELL_ARRAY_SIZE(keys); i++) {
			size_t len = strlen(keys[i].key);
			unsigned v;
			char after;
			if (!strncmp(line, keys[i].key, len) &&
			    (line[len] == ' ' || line[len] == '\t') &&
			    sscanf(line + len, "%u%c", &v, &after) >= 1 && v > 0)
				*keys[i].v = v;
		}
	}
	/* A login.defs that would call root or the sandboxes' range ordinary is not believed. */
	if (accounts.uid_min == 0 || accounts.uid_max >= CELLD_UID_FIRST ||
	    accounts.uid_min > accounts.uid_max) {
		accounts.uid_min = DEFAULT_MIN;
		accounts.uid_max = DEFAULT_MAX;
	}
	if (accounts.gid_min == 0 || accounts.gid_max >= CELLD_UID_FIRST ||
	    accounts.gid_min > accounts.gid_max) {
		accounts.gid_min = DEFAULT_MIN;
		accounts.gid_max = DEFAULT_MAX;
	}
}

static bool ordinary_uid(uint32_t uid)
{
	pthread_once(&accounts_once, read_login_defs);
	return uid >= accounts.uid_min && uid <= accounts.uid_max && uid != OVERFLOW_ID;
}

static bool ordinary_gid(uint32_t gid)
{
	pthread_once(&accounts_once, read_login_defs);
	return gid >= accounts.gid_min && gid <= accounts.gid_max && gid != OVERFLOW_ID;
}

/* ---- one volume ---- */

static bool has_dotdot(const char *path)
{
	for (const char *p = path; (p = strstr(p, "..")); p += 2)
		if ((p == path || p[-1] == '/') && (p[2] == '/' || p[2] == '\0'))
			return true;
	return false;
}

static int parse_map(json_t *v, size_t i, int *map, struct cell_error *err)
{
	char name[64];
	const char *text = NULL;
	snprintf(name, sizeof(name), "cell.volumes[%zu].map", i);
	int r = field_string(v, "map", name, false, &text, err);
	*map = -1; /* not given: chosen from the owner */
	if (r <= 0)
		return r;
	for (size_t k = 0; k < CELL_ARRAY_SIZE(map_names); k++)
		if (!strcmp(text, map_names[k]))
			return *map = (int)k, 0;
	return field_fail(err, "%s must be \"owner\", \"range\" or \"identity\"", name);
}

/* The map for a host path owned by st, as asked (map >= 0) or chosen; why says what was
 * decided, for inspect and the create's warnings. */
static int choose_map(int map, const struct stat *st, size_t i, const char *host,
		      struct cell_volume *vol, char *why, size_t why_size, struct cell_error *err)
{
	bool owner_ok = ordinary_uid(st->st_uid);
	if (map == CELL_VOLUME_MAP_OWNER && !owner_ok)
		return field_fail(err,
				  "cell.volumes[%zu].map owner: %s is owned by uid %u, a system "
				  "account; the sandbox's root may only become an ordinary "
				  "account (uid %u-%u): use map range, or give the directory to "
				  "an ordinary user",
				  i, host, (unsigned)st->st_uid, accounts.uid_min,
				  accounts.uid_max);
	if (map < 0)
		map = owner_ok ? CELL_VOLUME_MAP_OWNER : CELL_VOLUME_MAP_RANGE;
	vol->map = map;
	switch (vol->map) {
	case CELL_VOLUME_MAP_OWNER:
		vol->owner_uid = (uint32_t)st->st_uid;
		vol->owner_gid = (uint32_t)st->st_gid;
		vol->map_gid = ordinary_gid(st->st_gid);
		snprintf(why, why_size,
			 "the sandbox's root is uid %u%s, the owner of %s; other ids are the "
			 "sandbox's own",
			 (unsigned)st->st_uid, vol->map_gid ? " and its group" : "", host);
		break;
	case CELL_VOLUME_MAP_RANGE:
		if (owner_ok)
			snprintf(why, why_size, "the sandbox's own ids, as asked");
		else
			snprintf(why, why_size,
				 "%s is owned by uid %u, a system account: the sandbox's own ids, "
				 "so files of host accounts there are reachable only through their "
				 "permission bits for others",
				 host, (unsigned)st->st_uid);
		break;
	case CELL_VOLUME_MAP_IDENTITY:
		snprintf(why, why_size,
			 "identity map, as asked: the sandbox's root is host root on %s (set-id "
			 "files and file capabilities it makes there work on the host)",
			 host);
		break;
	}
	return 0;
}

static json_t *volume_json(const struct cell_volume *v, const char *why)
{
	json_t *o = json_pack("{s:s, s:s, s:b, s:s, s:s}", "host", v->host, "dest", v->dest,
			      "readOnly", v->read_only, "map", map_names[v->map], "why", why);
	if (o && v->map == CELL_VOLUME_MAP_OWNER) {
		json_object_set_new(o, "uid", json_integer(v->owner_uid));
		if (v->map_gid)
			json_object_set_new(o, "gid", json_integer(v->owner_gid));
	}
	return o;
}

static int parse_volume(json_t *v, size_t i, json_t *out, json_t *warnings, struct cell_error *err)
{
	char name[64];
	const char *host, *dest;
	bool ro = false;
	if (!json_is_object(v))
		return field_fail(err, "cell.volumes[%zu] must be an object", i);
	snprintf(name, sizeof(name), "cell.volumes[%zu].host", i);
	int r = field_string(v, "host", name, true, &host, err);
	if (r < 0)
		return r;
	snprintf(name, sizeof(name), "cell.volumes[%zu].dest", i);
	if ((r = field_string(v, "dest", name, true, &dest, err)) < 0)
		return r;
	snprintf(name, sizeof(name), "cell.volumes[%zu].readOnly", i);
	if ((r = field_bool(v, "readOnly", name, &ro, err)) < 0)
		return r;
	int map;
	if ((r = parse_map(v, i, &map, err)) < 0)
		return r;
	if (host[0] != '/')
		return field_fail(err, "cell.volumes[%zu].host must be an absolute path", i);
	if (dest[0] != '/' || has_dotdot(dest) || strlen(dest) >= PATH_MAX || !strcmp(dest, "/"))
		return field_fail(err,
				  "cell.volumes[%zu].dest must be an absolute path below / "
				  "without '..'",
				  i);
	/* The canonical host path is what gets mounted (the runtime refuses a symlink on the
	 * way to it): later symlink swaps of the path the client named change nothing. */
	_cleanup_free_ char *real = realpath(host, NULL);
	struct stat st;
	if (!real || stat(real, &st) < 0)
		return field_fail(err, "cell.volumes[%zu].host %s: %s", i, host, strerror(errno));
	struct cell_volume vol = {.host = real, .dest = dest, .read_only = ro};
	char why[PATH_MAX + 256];
	if ((r = choose_map(map, &st, i, real, &vol, why, sizeof(why), err)) < 0)
		return r;
	if (vol.map == CELL_VOLUME_MAP_IDENTITY)
		log_warn("volume %s: %s", real, why);
	/* The create says so when the sandbox's root is host root, or when it cannot own what
	 * the directory holds (the client may have expected to write there). */
	char *w = NULL;
	if ((vol.map == CELL_VOLUME_MAP_IDENTITY ||
	     (vol.map == CELL_VOLUME_MAP_RANGE && map < 0)) &&
	    asprintf(&w, "volume %s: %s", real, why) >= 0)
		json_array_append_new(warnings, json_string(w));
	free(w);
	return json_array_append_new(out, volume_json(&vol, why)) < 0
		   ? cell_err(err, ENOMEM, "volumes")
		   : 0;
}

/* ---- the list ---- */

int volumes_parse(const char *text, struct create_spec *spec, struct cell_error *err)
{
	json_error_t jerr;
	json_t *arr = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_array(arr)) {
		json_decref(arr);
		return field_fail(err, "cell.volumes must be a JSON array encoded as a string");
	}
	if (json_array_size(arr) > VOLUMES_MAX) {
		json_decref(arr);
		return field_fail(err, "cell.volumes: at most %d volumes", VOLUMES_MAX);
	}
	json_t *out = json_array();
	if (!spec->warnings)
		spec->warnings = json_array();
	size_t i;
	json_t *v;
	int r = 0;
	json_array_foreach(arr, i,
			   v) if ((r = parse_volume(v, i, out, spec->warnings, err)) < 0) break;
	json_decref(arr);
	spec->volumes_json = out;
	if (r < 0)
		return r;
	return volumes_from_json(out, &spec->volumes, &spec->n_volumes, err);
}

int volumes_from_json(json_t *arr, struct cell_volume **out, size_t *n_out, struct cell_error *err)
{
	*out = NULL;
	*n_out = 0;
	size_t n = json_array_size(arr), i;
	if (!n)
		return 0;
	struct cell_volume *vols = calloc(n, sizeof(*vols));
	if (!vols)
		return cell_err(err, ENOMEM, "volumes");
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		struct cell_volume *vol = &vols[i];
		vol->host = json_string_value(json_object_get(v, "host"));
		vol->dest = json_string_value(json_object_get(v, "dest"));
		vol->read_only = json_is_true(json_object_get(v, "readOnly"));
		/* A record made before maps existed had the identity map. */
		const char *map = json_string_value(json_object_get(v, "map"));
		vol->map = CELL_VOLUME_MAP_IDENTITY;
		for (size_t k = 0; map && k < CELL_ARRAY_SIZE(map_names); k++)
			if (!strcmp(map, map_names[k]))
				vol->map = (enum cell_volume_map)k;
		json_t *uid = json_object_get(v, "uid"), *gid = json_object_get(v, "gid");
		vol->owner_uid = (uint32_t)json_integer_value(uid);
		vol->owner_gid = (uint32_t)json_integer_value(gid);
		vol->map_gid = json_is_integer(gid);
		/* Never trust a record to make the sandbox's root a system account. */
		if (!vol->host || !vol->dest ||
		    (vol->map == CELL_VOLUME_MAP_OWNER &&
		     (!json_is_integer(uid) || !ordinary_uid(vol->owner_uid) ||
		      (vol->map_gid && !ordinary_gid(vol->owner_gid))))) {
			free(vols);
			return cell_err_msg(err, EINVAL, "volumes[%zu] of the record is invalid",
					    i);
		}
	}
	*out = vols;
	*n_out = n;
	return 0;
}
