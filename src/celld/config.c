/* celld's configuration: one global, set by main.c before the daemons start and read-only
 * afterwards. A leaf, so every module can read it without depending on main.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/ipv4.h"
#include "config.h"

struct celld_config celld = {.init_fd = -1,
			     .sandboxes_fd = -1,
			     .policies_fd = -1,
			     .tcp_pending_max = CELLD_DEFAULT_PENDING_MAX,
			     .tcp_pending_per_ip = CELLD_DEFAULT_PENDING_PER_IP,
			     .tcp_keyless_per_ip = CELLD_DEFAULT_KEYLESS_PER_IP,
			     .tcp_head_timeout_s = CELLD_DEFAULT_HEAD_TIMEOUT_S,
			     .proxy_max = CELLD_DEFAULT_PROXY_MAX,
			     .network_default = "public",
			     .nflog_group = CELLD_DEFAULT_NFLOG_GROUP};

int config_add_volume_root(const char *dir)
{
	struct stat st;
	char *real = dir[0] == '/' ? realpath(dir, NULL) : NULL;
	if (!real || stat(real, &st) < 0 || !S_ISDIR(st.st_mode)) {
		int e = real ? errno : (dir[0] == '/' ? errno : EINVAL);
		fprintf(stderr, "celld: --volume-root %s: %s\n", dir,
			dir[0] != '/' ? "must be an absolute path"
			: real	      ? "not a directory"
				      : strerror(e));
		free(real);
		return -(e ? e : ENOTDIR);
	}
	if (!strcmp(real, "/")) {
		fprintf(stderr, "celld: --volume-root /: would let TCP clients mount any host "
				"path; name the directories they may use\n");
		free(real);
		return -EINVAL;
	}
	char **grown = realloc(celld.volume_roots, (celld.n_volume_roots + 1) * sizeof(*grown));
	if (!grown) {
		free(real);
		return -ENOMEM;
	}
	celld.volume_roots = grown;
	celld.volume_roots[celld.n_volume_roots++] = real;
	return 0;
}

int config_set_subnet(const char *cidr)
{
	uint32_t first;
	unsigned len;
	int r = cell_ipv4_cidr_parse(cidr, &first, &len);
	if (r == 0 && (len < 8 || len > 28))
		r = -EINVAL;
	if (r < 0) {
		fprintf(stderr, "celld: --subnet %s: %s\n", cidr,
			r == -ERANGE ? "host bits are set"
				     : "expected an IPv4 a.b.c.d/len with len 8..28");
		return -EINVAL;
	}
	celld.subnet = first;
	celld.subnet_prefix = len;
	return 0;
}

int config_policy_json(const char *file, size_t max, json_t **out, struct cell_error *err)
{
	_cleanup_free_ char *text = NULL;
	struct cell_error rerr = {0};
	*out = NULL;
	int r = cell_read_file_at(celld.policies_fd, file, max, &text, NULL, &rerr);
	if (r < 0)
		return cell_err(err, -r, "reading %s/%s", celld.policies_dir, file);
	json_error_t jerr;
	json_t *root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(root)) {
		json_decref(root);
		return cell_err_msg(err, EINVAL, "%s/%s: not a JSON object (line %d: %s)",
				    celld.policies_dir, file, jerr.line, jerr.text);
	}
	*out = root;
	return 0;
}
