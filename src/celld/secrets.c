/* A sandbox's secrets (secrets.h). */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "secrets.h"

static bool name_ok(const char *k)
{
	size_t n = strlen(k);
	if (!n || n > SECRETS_NAME_MAX ||
	    !(k[0] == '_' || (k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z')))
		return false;
	for (size_t i = 1; i < n; i++) {
		char c = k[i];
		if (!(c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		      (c >= '0' && c <= '9')))
			return false;
	}
	return true;
}

/* Check map (named field) and add its pairs to out. */
static int take(json_t *map, const char *field, json_t *out, size_t *total, struct cell_error *err)
{
	if (!json_is_object(map))
		return cell_err_msg(err, EINVAL, "%s must be an object of NAME: value strings",
				    field);
	const char *k;
	json_t *v;
	json_object_foreach(map, k, v)
	{
		if (!name_ok(k))
			return cell_err_msg(err, EINVAL,
					    "%s: name '%.64s' is not an environment variable "
					    "name ([A-Za-z_][A-Za-z0-9_]*, at most %d bytes)",
					    field, k, SECRETS_NAME_MAX);
		if (!json_is_string(v))
			return cell_err_msg(err, EINVAL, "%s.%s must be a string", field, k);
		size_t n = json_string_length(v);
		if (n > SECRETS_VALUE_MAX || memchr(json_string_value(v), '\0', n))
			return cell_err_msg(err, EINVAL,
					    "%s.%s must be at most %u bytes, without NUL", field, k,
					    SECRETS_VALUE_MAX);
		*total += strlen(k) + n;
		if (json_object_set(out, k, v) < 0)
			return cell_err(err, ENOMEM, "%s", field);
	}
	if (json_object_size(out) > SECRETS_MAX_ITEMS || *total > SECRETS_TOTAL_MAX)
		return cell_err_msg(err, EINVAL,
				    "%s: at most %d secrets of %u bytes in all (names and values)",
				    field, SECRETS_MAX_ITEMS, SECRETS_TOTAL_MAX);
	return 0;
}

int secrets_parse(json_t *secret_env, const char *ext, json_t **out, struct cell_error *err)
{
	*out = NULL;
	if (json_is_null(secret_env))
		secret_env = NULL;
	if (!secret_env && !ext)
		return 0;
	json_t *all = json_object();
	if (!all)
		return cell_err(err, ENOMEM, "secrets");
	size_t total = 0;
	int r = 0;
	if (ext) {
		json_error_t jerr;
		json_t *m = json_loads(ext, JSON_REJECT_DUPLICATES, &jerr);
		if (!m)
			r = cell_err_msg(err, EINVAL,
					 "extensions.cell.secrets must be a JSON object of NAME: "
					 "value strings (%.80s)",
					 jerr.text);
		else
			r = take(m, "extensions.cell.secrets", all, &total, err);
		json_decref(m);
	}
	if (!r && secret_env)
		r = take(secret_env, "secretEnv", all, &total, err);
	if (r < 0 || !json_object_size(all)) {
		json_decref(all);
		return r;
	}
	*out = all;
	return 0;
}

int secrets_save(int dirfd, json_t *secrets, struct cell_error *err)
{
	char *text = json_dumps(secrets, JSON_COMPACT);
	if (!text)
		return cell_err(err, ENOMEM, "secrets");
	static const char tmp[] = SECRETS_FILE ".tmp";
	unlinkat(dirfd, tmp, 0);
	int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		int e = errno;
		free(text);
		return cell_err(err, e, "creating %s", tmp);
	}
	size_t n = strlen(text);
	ssize_t w = write(fd, text, n);
	int e = w == (ssize_t)n ? 0 : (w < 0 ? errno : EIO);
	explicit_bzero(text, n);
	free(text);
	if (!e && fsync(fd) < 0)
		e = errno;
	close(fd);
	if (!e && renameat(dirfd, tmp, dirfd, SECRETS_FILE) < 0)
		e = errno;
	if (e) {
		unlinkat(dirfd, tmp, 0);
		return cell_err(err, e, "writing %s", SECRETS_FILE);
	}
	return 0;
}

json_t *secrets_load(int dirfd)
{
	if (dirfd < 0)
		return NULL;
	int fd = openat(dirfd, SECRETS_FILE, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0)
		return NULL;
	json_t *o = json_loadfd(fd, 0, NULL);
	close(fd);
	if (!json_is_object(o)) {
		json_decref(o);
		return NULL;
	}
	return o;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

json_t *secrets_names(int dirfd)
{
	json_t *s = secrets_load(dirfd);
	json_t *arr = json_array();
	size_t n = json_object_size(s), i = 0;
	const char **v = n ? calloc(n, sizeof(*v)) : NULL;
	const char *k;
	json_t *val;
	if (n && !v) {
		json_decref(s);
		json_decref(arr);
		return NULL;
	}
	json_object_foreach(s, k, val)
	{
		v[i++] = k;
	}
	if (n)
		qsort(v, n, sizeof(*v), by_name);
	for (i = 0; arr && i < n; i++)
		json_array_append_new(arr, json_string(v[i]));
	free(v);
	json_decref(s);
	return arr;
}
