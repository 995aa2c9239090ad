/* The seccomp profiles of <policies>/seccomp/<name>.json: read, validated and compiled once at
 * start (twice each: plain, and with a notification listener for sandboxes that log their
 * denied calls). A broken profile stops celld with the file and field named, rather than
 * starting sandboxes with less protection than their profile says. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/seccomp.h"
#include "config.h"
#include "seccomp_policy.h"
#include "fields.h"

#define PROFILES_MAX 64

struct policy {
	struct cell_seccomp_profile *profile;
	struct cell_seccomp_prog plain, logged;
};

static struct policy policies[PROFILES_MAX];
static size_t n_policies;

static const struct policy *find(const char *name)
{
	for (size_t i = 0; name && i < n_policies; i++)
		if (!strcmp(cell_seccomp_profile_name(policies[i].profile), name))
			return &policies[i];
	return NULL;
}

bool seccomp_policy_exists(const char *name)
{
	return find(name) != NULL;
}

const struct cell_seccomp_prog *seccomp_policy_prog(const char *name, bool log)
{
	const struct policy *p = find(name);
	return p ? (log ? &p->logged : &p->plain) : NULL;
}

const struct cell_seccomp_profile *seccomp_policy_profile(const char *name)
{
	const struct policy *p = find(name);
	return p ? p->profile : NULL;
}

void seccomp_policy_names(char *buf, size_t size)
{
	size_t len = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n_policies && len < size; i++)
		len += snprintf(buf + len, size - len, "%s%s", i ? ", " : "",
				cell_seccomp_profile_name(policies[i].profile));
}

static int load_one(int dirfd, const char *file, struct cell_error *err)
{
	char name[CELL_SECCOMP_NAME_MAX + 1], path[PATH_MAX];
	size_t stem = strlen(file) - strlen(".json");
	snprintf(path, sizeof(path), "%s/seccomp/%s", celld.policies_dir, file);
	if (stem > CELL_SECCOMP_NAME_MAX)
		return cell_err(err, EINVAL, "%s: the file name is too long for a profile name",
				path);
	memcpy(name, file, stem);
	name[stem] = '\0';
	if (!cell_seccomp_name_valid(name))
		return cell_err_msg(err, EINVAL,
				    "%s: '%s' is not a valid profile name ([a-z0-9][a-z0-9_-]*)",
				    path, name);
	if (n_policies == PROFILES_MAX)
		return cell_err_msg(err, E2BIG, "%s: more than %d seccomp profiles", path,
				    PROFILES_MAX);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = cell_read_file_at(dirfd, file, CELL_SECCOMP_FILE_MAX, &text, &len, err);
	if (r < 0)
		return cell_err_wrap(err, "%s: ", path);
	struct policy *p = &policies[n_policies];
	r = cell_seccomp_profile_parse(path, name, text, len, &p->profile, err);
	if (r == 0)
		r = cell_seccomp_compile(p->profile, false, &p->plain, err);
	if (r == 0)
		r = cell_seccomp_compile(p->profile, true, &p->logged, err);
	if (r < 0) {
		cell_seccomp_prog_free(&p->plain);
		cell_seccomp_profile_free(p->profile);
		p->profile = NULL;
		return r;
	}
	log_info("seccomp profile %s: %u BPF instructions (%u with logging)", name, p->plain.len,
		 p->logged.len);
	n_policies++;
	return 0;
}

static bool is_profile_file(const char *name)
{
	size_t len = strlen(name);
	return name[0] != '.' && len > 5 && !strcmp(name + len - 5, ".json");
}

int seccomp_policies_load(struct cell_error *err)
{
	int fd = openat(celld.policies_fd, "seccomp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "seccomp profiles %s/seccomp", celld.policies_dir);
	_cleanup_closedir_ DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return cell_err(err, errno, "listing %s/seccomp", celld.policies_dir);
	}
	struct dirent *de;
	while ((de = readdir(d)))
		if (is_profile_file(de->d_name) && load_one(dirfd(d), de->d_name, err) < 0)
			return -EINVAL;
	/* Every create without cell.seccomp gets this one: there is no "no filter". */
	if (!find("default"))
		return cell_err_msg(err, ENOENT, "%s/seccomp/default.json: missing",
				    celld.policies_dir);
	return 0;
}
