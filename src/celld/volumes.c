/* A create's volumes, checked and turned into the sandbox's record of them:
 *
 *   volumes[] (the OpenSandbox field): {name, mountPath, readOnly?, subPath?} and one
 *             backend: pvc {claimName, createIfNotExists, deleteOnSandboxTermination,
 *             storage, accessModes} is one of celld's named volumes (volstore.c); host
 *             {path} a host directory, on the Unix socket or under an operator's
 *             --volume-root only.
 *   extensions["cell.volumes"] (Unix socket only): host volumes with cell's own options.
 *
 * Every host path is resolved, and the id mapping that decides who owns what the sandbox
 * writes there chosen and recorded with the sandbox.
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
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "volumes.h"
#include "config.h"
#include "resource_policy.h"
#include "volstore.h"
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
    [CELL_VOLUME_MAP_STORE] = "store",
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

static int parse_map(json_t *v, const char *label, int *map, struct cell_error *err)
{
	char name[64];
	const char *text = NULL;
	snprintf(name, sizeof(name), "%s.map", label);
	int r = field_string(v, "map", name, false, &text, err);
	*map = -1; /* not given: chosen from the owner */
	if (r <= 0)
		return r;
	for (size_t k = 0; k < CELL_ARRAY_SIZE(map_names); k++)
		if (k != CELL_VOLUME_MAP_STORE && !strcmp(text, map_names[k]))
			return *map = (int)k, 0;
	return field_fail(err, "%s must be \"owner\", \"range\" or \"identity\"", name);
}

/* The map for a host path owned by st, as asked (map >= 0) or chosen; why says what was
 * decided, for inspect and the create's warnings. */
static int choose_map(int map, const struct stat *st, const char *label, const char *host,
		      struct cell_volume *vol, char *why, size_t why_size, struct cell_error *err)
{
	bool owner_ok = ordinary_uid(st->st_uid);
	if (map == CELL_VOLUME_MAP_OWNER && !owner_ok)
		return field_fail(err,
				  "%s.map owner: %s is owned by uid %u, a system "
				  "account; the sandbox's root may only become an ordinary "
				  "account (uid %u-%u): use map range, or give the directory to "
				  "an ordinary user",
				  label, host, (unsigned)st->st_uid, accounts.uid_min,
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
	case CELL_VOLUME_MAP_STORE: /* named volumes only: parse_map never gives it */
		return field_fail(err, "%s.map is not a host volume's map", label);
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

static int check_dest(const char *dest, const char *field, struct cell_error *err)
{
	struct cell_error why = {0};
	if (cell_mount_check_dest(dest, &why) < 0)
		return field_fail(err, "%s: %s", field, why.msg);
	return 0;
}

/* One host volume, checked (map: -1 to choose from the owner) and recorded in out. */
static int add_host(const char *label, const char *host, const char *dest, bool ro, int map,
		    json_t *out, json_t *warnings, struct cell_error *err)
{
	if (host[0] != '/')
		return field_fail(err, "%s.host must be an absolute path", label);
	/* The canonical host path is what gets mounted (the runtime refuses a symlink on the
	 * way to it): later symlink swaps of the path the client named change nothing. */
	_cleanup_free_ char *real = realpath(host, NULL);
	struct stat st;
	if (!real || stat(real, &st) < 0)
		return field_fail(err, "%s.host %s: %s", label, host, strerror(errno));
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return field_fail(err, "%s.host %s is not a directory or a file", label, host);
	struct cell_volume vol = {.host = real, .dest = dest, .read_only = ro};
	char why[PATH_MAX + 256];
	int r = choose_map(map, &st, label, real, &vol, why, sizeof(why), err);
	if (r < 0)
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

static int parse_volume(json_t *v, size_t i, json_t *out, json_t *warnings, struct cell_error *err)
{
	char label[48], name[96];
	const char *host, *dest;
	bool ro = false;
	snprintf(label, sizeof(label), "cell.volumes[%zu]", i);
	if (!json_is_object(v))
		return field_fail(err, "%s must be an object", label);
	snprintf(name, sizeof(name), "%s.host", label);
	int r = field_string(v, "host", name, true, &host, err);
	if (r < 0)
		return r;
	snprintf(name, sizeof(name), "%s.dest", label);
	if ((r = field_string(v, "dest", name, true, &dest, err)) < 0 ||
	    (r = check_dest(dest, name, err)) < 0)
		return r;
	snprintf(name, sizeof(name), "%s.readOnly", label);
	if ((r = field_bool(v, "readOnly", name, &ro, err)) < 0)
		return r;
	int map;
	if ((r = parse_map(v, label, &map, err)) < 0)
		return r;
	return add_host(label, host, dest, ro, map, out, warnings, err);
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
	if (!spec->volumes_json)
		spec->volumes_json = json_array();
	if (!spec->warnings)
		spec->warnings = json_array();
	size_t i;
	json_t *v;
	int r = 0;
	json_array_foreach(arr, i, v)
	{
		if ((r = parse_volume(v, i, spec->volumes_json, spec->warnings, err)) < 0)
			break;
	}
	json_decref(arr);
	return r;
}

/* ---- volumes[], the OpenSandbox field ---- */

/* Under one of the operator's --volume-root dirs (canonical paths). */
static bool under_volume_root(const char *real)
{
	for (size_t i = 0; i < celld.n_volume_roots; i++) {
		const char *root = celld.volume_roots[i];
		size_t n = strlen(root);
		if (!strncmp(real, root, n) && (real[n] == '\0' || real[n] == '/' || n == 1))
			return true;
	}
	return false;
}

/* subPath: relative, no '.' or '..' component, not empty. */
static int check_sub_path(const char *sub, const char *field, struct cell_error *err)
{
	if (!sub[0] || sub[0] == '/' || strlen(sub) > 1024)
		return field_fail(err, "%s must be a relative path of 1-1024 bytes", field);
	for (const char *c = sub; *c;) {
		size_t len = strcspn(c, "/");
		if (!len || (len == 1 && c[0] == '.') || (len == 2 && !strncmp(c, "..", 2)))
			return field_fail(err, "%s has an empty, '.' or '..' component", field);
		c += len;
		c += *c == '/';
	}
	return 0;
}

static int api_host(json_t *host, const char *label, const char *sub, const char *dest, bool ro,
		    bool over_tcp, struct create_spec *spec, struct cell_error *err)
{
	char name[96];
	const char *path;
	snprintf(name, sizeof(name), "%s.host.path", label);
	if (!json_is_object(host))
		return field_fail(err, "%s.host must be an object", label);
	if (field_string(host, "path", name, true, &path, err) < 0)
		return -EINVAL;
	_cleanup_free_ char *full = NULL;
	if (asprintf(&full, "%s%s%s", path, sub ? "/" : "", sub ? sub : "") < 0)
		return cell_err(err, ENOMEM, "volumes");
	if (over_tcp) {
		_cleanup_free_ char *real = realpath(full, NULL);
		if (!real || !under_volume_root(real))
			return field_fail(err,
					  "%s: host paths are refused over TCP unless they are "
					  "under a directory the operator allows (celld "
					  "--volume-root); use a named volume (pvc) instead",
					  name);
	}
	return add_host(label, full, dest, ro, -1, spec->volumes_json, spec->warnings, err);
}

static int parse_access(json_t *modes, const char *label, const char **access,
			struct cell_error *err)
{
	*access = "ReadWriteOnce";
	if (!modes || json_is_null(modes))
		return 0;
	enum volstore_access a;
	if (!json_is_array(modes) || json_array_size(modes) != 1 ||
	    !json_is_string(json_array_get(modes, 0)) ||
	    volstore_access_parse(json_string_value(json_array_get(modes, 0)), &a) < 0)
		return field_fail(err,
				  "%s.pvc.accessModes must name one of ReadWriteOnce, "
				  "ReadOnlyMany, ReadWriteMany, ReadWriteOncePod",
				  label);
	if (a == VOL_RWX && !celld.volume_shared_writers)
		return field_fail(err,
				  "%s.pvc.accessModes ReadWriteMany: this celld allows one writer "
				  "per volume (the operator may allow more: "
				  "--volume-shared-writers)",
				  label);
	*access = volstore_access_name(a);
	return 0;
}

static int api_pvc(json_t *pvc, const char *label, const char *sub, const char *dest, bool ro,
		   struct create_spec *spec, struct cell_error *err)
{
	char name[128];
	const char *claim, *storage = NULL;
	bool create = true, drop = false;
	if (!json_is_object(pvc))
		return field_fail(err, "%s.pvc must be an object", label);
	snprintf(name, sizeof(name), "%s.pvc.claimName", label);
	if (field_string(pvc, "claimName", name, true, &claim, err) < 0)
		return -EINVAL;
	if (!volstore_name_valid(claim))
		return field_fail(err,
				  "%s '%.64s' must be a DNS label ([a-z0-9] and '-', at most %d)",
				  name, claim, VOLSTORE_NAME_MAX);
	snprintf(name, sizeof(name), "%s.pvc.createIfNotExists", label);
	if (field_bool(pvc, "createIfNotExists", name, &create, err) < 0)
		return -EINVAL;
	snprintf(name, sizeof(name), "%s.pvc.deleteOnSandboxTermination", label);
	if (field_bool(pvc, "deleteOnSandboxTermination", name, &drop, err) < 0)
		return -EINVAL;
	json_t *sc = json_object_get(pvc, "storageClass");
	if (sc && !json_is_null(sc))
		return field_fail(err,
				  "%s.pvc.storageClass: cell keeps every volume on its state "
				  "dir's disk and has no storage classes",
				  label);
	snprintf(name, sizeof(name), "%s.pvc.storage", label);
	json_t *st = json_object_get(pvc, "storage");
	if (st && !json_is_null(st) && field_string(pvc, "storage", name, false, &storage, err) < 0)
		return -EINVAL;
	const char *access;
	uint64_t bytes;
	int r = parse_access(json_object_get(pvc, "accessModes"), label, &access, err);
	if (r == 0)
		r = limits_volume_bytes(storage, name, &bytes, err);
	if (r < 0)
		return r;
	json_t *entry = json_pack("{s:s, s:s, s:b, s:s}", "volume", claim, "dest", dest, "readOnly",
				  ro, "map", map_names[CELL_VOLUME_MAP_STORE]);
	if (entry && sub)
		json_object_set_new(entry, "subPath", json_string(sub));
	json_t *c = json_pack("{s:s, s:b, s:I, s:s, s:b, s:s}", "volume", claim, "create", create,
			      "bytes", (json_int_t)bytes, "access", access,
			      "deleteOnSandboxTermination", drop, "dest", dest);
	if (c && sub)
		json_object_set_new(c, "subPath", json_string(sub));
	if (!entry || !c || json_array_append_new(spec->volumes_json, entry) < 0 ||
	    json_array_append_new(spec->volume_claims, c) < 0)
		return cell_err(err, ENOMEM, "volumes");
	return 0;
}

static int api_volume(json_t *v, size_t i, bool over_tcp, struct create_spec *spec,
		      struct cell_error *err)
{
	char label[48], name[96];
	snprintf(label, sizeof(label), "volumes[%zu]", i);
	if (!json_is_object(v))
		return field_fail(err, "%s must be an object", label);
	const char *vname, *dest, *sub = NULL;
	bool ro = false;
	snprintf(name, sizeof(name), "%s.name", label);
	if (field_string(v, "name", name, true, &vname, err) < 0)
		return -EINVAL;
	if (strlen(vname) > 63 || !volstore_name_valid(vname))
		return field_fail(err, "%s '%.64s' must be a DNS label of at most 63 bytes", name,
				  vname);
	snprintf(name, sizeof(name), "%s.mountPath", label);
	if (field_string(v, "mountPath", name, true, &dest, err) < 0 ||
	    check_dest(dest, name, err) < 0)
		return -EINVAL;
	snprintf(name, sizeof(name), "%s.readOnly", label);
	if (field_bool(v, "readOnly", name, &ro, err) < 0)
		return -EINVAL;
	snprintf(name, sizeof(name), "%s.subPath", label);
	if (field_string(v, "subPath", name, false, &sub, err) < 0 ||
	    (sub && check_sub_path(sub, name, err) < 0))
		return -EINVAL;
	json_t *host = json_object_get(v, "host"), *pvc = json_object_get(v, "pvc"),
	       *oss = json_object_get(v, "ossfs");
	int backends = (host && !json_is_null(host)) + (pvc && !json_is_null(pvc)) +
		       (oss && !json_is_null(oss));
	if (backends != 1)
		return field_fail(err, "%s must have exactly one of host, pvc and ossfs", label);
	if (oss && !json_is_null(oss))
		return field_fail(err,
				  "%s.ossfs: cell mounts no object storage; use a named "
				  "volume (pvc)",
				  label);
	if (host && !json_is_null(host))
		return api_host(host, label, sub, dest, ro, over_tcp, spec, err);
	return api_pvc(pvc, label, sub, dest, ro, spec, err);
}

/* No two volumes share a name or a mountPath. */
static int check_unique(json_t *arr, struct cell_error *err)
{
	size_t i, j;
	json_t *a, *b;
	json_array_foreach(arr, i, a)
	{
		for (j = 0; j < i; j++) {
			b = json_array_get(arr, j);
			const char *na = json_string_value(json_object_get(a, "name"));
			const char *nb = json_string_value(json_object_get(b, "name"));
			if (na && nb && !strcmp(na, nb))
				return field_fail(
				    err, "volumes[%zu].name '%s' is also volumes[%zu]'s", i, na, j);
			const char *ma = json_string_value(json_object_get(a, "mountPath"));
			const char *mb = json_string_value(json_object_get(b, "mountPath"));
			if (ma && mb && !strcmp(ma, mb))
				return field_fail(err,
						  "volumes[%zu].mountPath '%s' is also "
						  "volumes[%zu]'s",
						  i, ma, j);
		}
	}
	return 0;
}

int volumes_parse_api(json_t *arr, bool over_tcp, struct create_spec *spec, struct cell_error *err)
{
	if (!arr || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return field_fail(err, "volumes must be an array");
	if (json_array_size(arr) > VOLUMES_MAX)
		return field_fail(err, "volumes: at most %d volumes", VOLUMES_MAX);
	int r = check_unique(arr, err);
	if (r < 0)
		return r;
	if (!spec->volumes_json)
		spec->volumes_json = json_array();
	if (!spec->warnings)
		spec->warnings = json_array();
	if (!spec->volume_claims)
		spec->volume_claims = json_array();
	if (!spec->volumes_json || !spec->warnings || !spec->volume_claims)
		return cell_err(err, ENOMEM, "volumes");
	size_t i;
	json_t *v;
	json_array_foreach(arr, i, v)
	{
		if ((r = api_volume(v, i, over_tcp, spec, err)) < 0)
			return r;
	}
	return 0;
}

int volumes_finish(struct create_spec *spec, struct cell_error *err)
{
	size_t n = json_array_size(spec->volumes_json);
	if (n > VOLUMES_MAX)
		return field_fail(err, "volumes and cell.volumes: at most %d in all", VOLUMES_MAX);
	/* Two volumes on one dest: the second would hide the first. */
	for (size_t i = 0; i < n; i++)
		for (size_t j = 0; j < i; j++) {
			const char *a = json_string_value(
			    json_object_get(json_array_get(spec->volumes_json, i), "dest"));
			const char *b = json_string_value(
			    json_object_get(json_array_get(spec->volumes_json, j), "dest"));
			if (a && b && !strcmp(a, b))
				return field_fail(err, "two volumes are mounted on %s", a);
		}
	/* What a start will read back from the record must read back. */
	struct cell_volume *vols = NULL;
	size_t n_vols;
	int r = volumes_from_json(spec->volumes_json, &vols, &n_vols, err);
	free(vols);
	return r;
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
		vol->source_fd = -1;
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
		const char *named = json_string_value(json_object_get(v, "volume"));
		bool store = vol->map == CELL_VOLUME_MAP_STORE;
		vol->store_base = store ? VOLSTORE_UID_BASE : 0;
		/* Never trust a record to make the sandbox's root a system account. */
		if ((store ? !named || !volstore_name_valid(named) || vol->host : !vol->host) ||
		    !vol->dest ||
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

int volumes_open_named(json_t *arr, struct cell_volume *vols, size_t n, struct cell_error *err)
{
	for (size_t i = 0; i < n; i++) {
		if (vols[i].host)
			continue;
		json_t *v = json_array_get(arr, i);
		const char *name = json_string_value(json_object_get(v, "volume"));
		const char *sub = json_string_value(json_object_get(v, "subPath"));
		char rel[2048];
		int r = volstore_open(name, sub, &vols[i].source_fd, rel, sizeof(rel), err);
		if (r == 0 && !(vols[i].sub_path = strdup(rel)))
			r = cell_err(err, ENOMEM, "volume %s", name);
		if (r < 0) {
			cell_err_wrap(err, "volume %s: ", name);
			volumes_close_named(vols, n);
			return r;
		}
	}
	return 0;
}

void volumes_close_named(struct cell_volume *vols, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (vols[i].host)
			continue;
		if (vols[i].source_fd >= 0)
			close(vols[i].source_fd);
		vols[i].source_fd = -1;
		free((char *)vols[i].sub_path);
		vols[i].sub_path = NULL;
	}
}
