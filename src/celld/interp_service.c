/* The host's copy of cell's code-interpreter service, for images that lack it (see
 * interp_service.h). A read-only bind rather than a copy into the sandbox's layer: the
 * sandbox cannot change it, it costs nothing per sandbox, and a sandbox started after an
 * upgrade of celld runs the service that celld speaks to. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/log.h"
#include "image_lookup.h"
#include "interp_service.h"

static char *service_dir;      /* resolved, or NULL: this host has none */
static char missing_dir[1024]; /* where it was looked for, for the refusal */

int interp_service_init(const char *dir, struct cell_error *err)
{
	snprintf(missing_dir, sizeof(missing_dir), "%s", dir);
	char *real = realpath(dir, NULL);
	if (!real) {
		if (errno != ENOENT)
			return cell_err(err, errno, "code-interpreter service %s", dir);
		log_info("code-interpreter service: none at %s (images must bring their own)", dir);
		return 0;
	}
	int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	bool complete = fd >= 0 && faccessat(fd, "code-interpreter.sh", X_OK, 0) == 0 &&
			faccessat(fd, "code_interpreter.py", R_OK, 0) == 0;
	if (fd >= 0)
		close(fd);
	if (!complete) {
		log_warn("code-interpreter service: %s lacks code-interpreter.sh or "
			 "code_interpreter.py; images must bring their own",
			 real);
		free(real);
		return 0;
	}
	service_dir = real;
	log_info("code-interpreter service: %s", service_dir);
	return 0;
}

static bool entrypoint_is_launcher(json_t *ep)
{
	const char *argv0 = json_string_value(json_array_get(ep, 0));
	return argv0 && !strcmp(argv0, INTERP_SERVICE_LAUNCHER);
}

/* The service needs a python3 where an image keeps one (the launcher looks there, then on
 * PATH). */
static int image_has_python(struct create_spec *spec, struct cell_error *err)
{
	static const char *const where[] = {"usr/bin/python3", "usr/local/bin/python3",
					    "opt/conda/bin/python3"};
	for (size_t i = 0; i < sizeof(where) / sizeof(where[0]); i++) {
		int r = image_lookup(spec->image_layers, spec->rootfs, where[i], err);
		if (r != 0)
			return r;
	}
	return 0;
}

int interp_service_choose(struct create_spec *spec, struct cell_error *err)
{
	bool asked = spec->interpreter_asked;
	if (!asked && !entrypoint_is_launcher(spec->entrypoint))
		return 0;
	int has = image_lookup(spec->image_layers, spec->rootfs, INTERP_SERVICE_LAUNCHER + 1, err);
	if (has < 0)
		return has;
	if (!has) {
		if (!service_dir) {
			if (!asked)
				return 0; /* the start says the entrypoint is not in the image */
			return cell_err_msg(err, ENOEXEC,
					    "image %s has no code-interpreter service and this "
					    "host has no copy of cell's (looked in %s)",
					    spec->image, missing_dir);
		}
		int py = image_has_python(spec, err);
		if (py < 0)
			return py;
		if (!py)
			return cell_err_msg(
			    err, ENOEXEC,
			    "image %s has no python3 (in /usr/bin, /usr/local/bin "
			    "or /opt/conda/bin): the code interpreter needs Python 3 "
			    "with ipykernel",
			    spec->image);
		spec->interpreter_bind = true;
	}
	return 0;
}

int interp_service_volume(struct cell_volume *vol, struct cell_error *err)
{
	if (!service_dir)
		return cell_err_msg(err, ENOENT,
				    "the sandbox runs cell's code-interpreter service, which this "
				    "host no longer has (looked in %s)",
				    missing_dir);
	*vol = (struct cell_volume){
	    .host = service_dir,
	    .source_fd = -1,
	    .dest = INTERP_SERVICE_DEST,
	    .read_only = true,
	    .map = CELL_VOLUME_MAP_RANGE,
	};
	return 0;
}
