/* A recorded container, opened and locked for one command (container.h). */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "container.h"
#include "hooks.h"
#include "status.h"

int oci_container_load(const struct oci_cli *cli, const char *id, struct oci_container *c,
		       struct cell_error *err)
{
	*c = (struct oci_container){.rootfd = -1, .dirfd = -1};
	c->rootfd = oci_root_open(cli->root, err);
	if (c->rootfd < 0)
		return c->rootfd;
	c->dirfd = oci_container_open(c->rootfd, id, err);
	if (c->dirfd < 0)
		return c->dirfd;
	int r = oci_state_read(c->dirfd, &c->st, err);
	return r < 0 ? cell_err_wrap(err, "container %s: ", id) : 0;
}

void oci_container_close(struct oci_container *c)
{
	oci_state_clear(&c->st);
	cell_closep(&c->dirfd);
	cell_closep(&c->rootfd);
}

int oci_bundle_spec(const char *bundle, struct oci_spec **out, struct cell_error *err)
{
	*out = NULL;
	_cleanup_close_ int bfd = open(bundle, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (bfd < 0)
		return cell_err(err, errno, "bundle %s", bundle);
	_cleanup_free_ char *text = NULL;
	size_t len = 0;
	int r = cell_read_file_at(bfd, "config.json", OCI_SPEC_FILE_MAX, &text, &len, err);
	if (r == 0)
		r = oci_spec_parse(text, len, out, err);
	return r < 0 ? cell_err_wrap(err, "%s/config.json: ", bundle) : 0;
}

int oci_container_spec(const struct oci_container *c, struct oci_spec **out, struct cell_error *err)
{
	*out = NULL;
	if (!c->st.bundle)
		return cell_err_msg(err, ENOENT, "container %s: no bundle recorded", c->st.id);
	return oci_bundle_spec(c->st.bundle, out, err);
}

const struct cell_cgroup_ops *oci_cgroups(struct cell_error *err)
{
	cell_cgroup_no_nesting();
	return cell_cgroup_detect(err);
}

void oci_container_hooks(const struct oci_container *c, enum oci_hook_kind kind)
{
	struct cell_error err = {0};
	struct oci_spec *spec = NULL;
	json_t *state = oci_state_json(&c->st);
	if (oci_container_spec(c, &spec, &err) < 0 || oci_hooks_run(spec, kind, state, &err) < 0)
		log_warn("%s", err.msg);
	json_decref(state);
	oci_spec_free(spec);
}
