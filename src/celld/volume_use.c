/* Which sandboxes use a named volume, read from their records (a sandbox's volumes are
 * fixed once it is published), and the access rules a new user is held to:
 *
 *   ReadWriteOnce     one sandbox writes it at a time; any number read it
 *   ReadOnlyMany      every sandbox mounts it read-only
 *   ReadWriteMany     any number write it (only with celld --volume-shared-writers;
 *                     without it such a volume is held to ReadWriteOnce)
 *   ReadWriteOncePod  one sandbox uses it at a time
 *
 * "Uses" means the sandbox exists, whatever its state: a paused sandbox's mount is still
 * there, and a failed one can be started again on it. A new sandbox is published before it
 * is checked, so two creates racing for one volume see each other and never both win. */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <string.h>

#include "admission.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "config.h"
#include "registry.h"
#include "sandbox.h"
#include "tenancy.h"
#include "volstore.h"
#include "volume_use.h"

/* Whether s's record mounts volume; *rw: read-write at least once. */
static bool mounts(const struct sandbox *s, const char *volume, bool *rw)
{
	bool found = false;
	*rw = false;
	size_t i;
	json_t *e;
	json_array_foreach(s->volumes, i, e)
	{
		const char *named = json_string_value(json_object_get(e, "volume"));
		if (!named || strcmp(named, volume))
			continue;
		found = true;
		*rw = *rw || !json_is_true(json_object_get(e, "readOnly"));
	}
	return found;
}

static json_t *users(const char *volume, bool everyone, const struct adm_principal *who)
{
	struct sandbox **all;
	size_t n = registry_snapshot(&all);
	json_t *ids = json_array();
	for (size_t i = 0; i < n; i++) {
		bool rw;
		if (mounts(all[i], volume, &rw) && (everyone || tenancy_sees(who, all[i]->owner)))
			json_array_append_new(ids, json_string(all[i]->id));
	}
	sandbox_unref_all(all, n);
	return ids;
}

json_t *volume_use_users(const char *volume)
{
	return users(volume, true, NULL);
}

json_t *volume_use_users_seen(const char *volume, const struct adm_principal *who)
{
	return users(volume, false, who);
}

/* How a message about sb's volume names another sandbox: its id when sb's owner sees it,
 * else not at all. */
static const char *other_name(const struct sandbox *sb, const struct sandbox *other)
{
	return tenancy_sees(sb->owner, other->owner) ? other->id : "(not yours)";
}

static int check_access(const struct sandbox *sb, const struct volstore_info *info,
			struct cell_error *err)
{
	bool mine_rw;
	mounts(sb, info->name, &mine_rw);
	enum volstore_access a = info->access;
	if (a == VOL_RWX && !celld.volume_shared_writers)
		a = VOL_RWO;
	if (a == VOL_ROX && mine_rw)
		return cell_err_msg(err, EINVAL,
				    "volumes: volume %s is ReadOnlyMany: mount it with readOnly "
				    "true",
				    info->name);
	struct sandbox **all;
	size_t n = registry_snapshot(&all);
	int r = 0;
	for (size_t i = 0; i < n && r == 0; i++) {
		bool rw;
		if (all[i] == sb || !mounts(all[i], info->name, &rw))
			continue;
		if (a == VOL_RWOP)
			r = cell_err_msg(err, EBUSY,
					 "volumes: volume %s is ReadWriteOncePod and sandbox %s "
					 "uses it",
					 info->name, other_name(sb, all[i]));
		else if (a == VOL_RWO && rw && mine_rw)
			r = cell_err_msg(err, EBUSY,
					 "volumes: volume %s is mounted read-write by sandbox %s "
					 "(one writer at a time; mount it readOnly, or delete "
					 "that sandbox first)",
					 info->name, other_name(sb, all[i]));
	}
	sandbox_unref_all(all, n);
	return r;
}

/* The image's directory at dest (the image is the operator's, still resolved inside its
 * root without following symlinks). */
static int image_dir_stat(const char *rootfs, const char *dest, struct stat *st)
{
	if (!rootfs || !dest)
		return -EINVAL;
	_cleanup_close_ int root = open(rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root < 0)
		return -errno;
	_cleanup_close_ int fd = cell_open_in_root(root, dest, O_PATH | O_DIRECTORY, 0, 1);
	if (fd < 0)
		return fd;
	return fstat(fd, st) < 0 ? -errno : 0;
}

/* The volume of one claim, made or found. 1 when made. */
static int claim_one(struct sandbox *sb, json_t *c, struct volstore_info *info,
		     struct cell_error *err)
{
	const char *name = json_string_value(json_object_get(c, "volume"));
	*info = (struct volstore_info){
	    .bytes = (uint64_t)json_integer_value(json_object_get(c, "bytes"))};
	snprintf(info->name, sizeof(info->name), "%s", name);
	if (!json_is_true(json_object_get(c, "create"))) {
		int r = volstore_get(name, info, err);
		/* another tenant's is as missing */
		if (r == -ENOENT || (r == 0 && !tenancy_sees_id(sb->owner, info->owner)))
			return cell_err_msg(err, EINVAL,
					    "volumes: volume %s does not exist and "
					    "pvc.createIfNotExists is false",
					    name);
		return r;
	}
	if (volstore_access_parse(json_string_value(json_object_get(c, "access")), &info->access) <
	    0)
		return cell_err_msg(err, EINVAL, "volumes: access mode of %s", name);
	const char *owner = admission_principal_id(sb->owner);
	snprintf(info->owner, sizeof(info->owner), "%s", owner ? owner : "");
	if (json_is_true(json_object_get(c, "deleteOnSandboxTermination")))
		snprintf(info->delete_with, sizeof(info->delete_with), "%s", sb->id);
	/* Mounted whole on a directory of the image: a new volume looks like it (a home or
	 * /workspace an ordinary account owns stays writable for that account). */
	struct stat like;
	bool have_like =
	    !json_object_get(c, "subPath") &&
	    image_dir_stat(sb->rootfs, json_string_value(json_object_get(c, "dest")), &like) == 0;
	int r = volstore_create(info, have_like ? &like : NULL, err);
	/* Found, not made: another tenant's is neither mounted nor said to be theirs. */
	if (r == 0 && !tenancy_sees_id(sb->owner, info->owner))
		return cell_err_msg(err, EEXIST,
				    "volumes: the volume name %s is taken: choose another", name);
	return r;
}

int volume_use_claim(struct sandbox *sb, json_t *claims, json_t **made, struct cell_error *err)
{
	*made = json_array();
	if (!*made)
		return cell_err(err, ENOMEM, "volumes");
	size_t i;
	json_t *c;
	json_array_foreach(claims, i, c)
	{
		struct volstore_info info;
		int r = claim_one(sb, c, &info, err);
		if (r == 1)
			json_array_append_new(*made, json_string(info.name));
		if (r >= 0)
			r = check_access(sb, &info, err);
		if (r < 0)
			return r;
	}
	return 0;
}

/* name removed unless a sandbox uses it; why for the log. */
static void remove_unused(const char *name, const char *why)
{
	json_t *users = volume_use_users(name);
	size_t n = json_array_size(users);
	json_decref(users);
	if (n) {
		log_info("volume %s kept: %zu sandbox(es) use it", name, n);
		return;
	}
	struct cell_error err = {0};
	if (volstore_remove(name, &err) < 0 && err.code != ENOENT)
		log_warn("volume %s: removing it %s: %s", name, why, err.msg);
}

void volume_use_undo(json_t *made)
{
	size_t i;
	json_t *v;
	json_array_foreach(made, i, v) remove_unused(json_string_value(v), "after a failed create");
}

void volume_use_release(const char *id, json_t *volumes)
{
	size_t i;
	json_t *e;
	json_array_foreach(volumes, i, e)
	{
		const char *name = json_string_value(json_object_get(e, "volume"));
		struct volstore_info info;
		struct cell_error err = {0};
		if (name && volstore_get(name, &info, &err) == 0 && !strcmp(info.delete_with, id))
			remove_unused(name, "with its sandbox");
	}
}
