/* The API keys (keys.h). A key is kept only as its SHA-256: a given key is hashed once and
 * compared with every stored hash, each comparison constant-time and none skipped, so
 * neither a key's bytes nor which tenant matched shows in the time taken. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "admission.h"
#include "keys.h"

#define KEYS_FILE_MAX (256u << 10)

struct key {
	char hash[CELL_SHA256_HEX_LEN + 1];
	struct adm_principal *who;
};

static struct key keys[KEYS_MAX];
static size_t n_keys;
static struct adm_principal *default_who;

static bool name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > KEYS_NAME_MAX || s[0] == '.' || s[0] == '-' || s[0] == '_')
		return false;
	return strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789._-") == n;
}

/* A tenant's key in the keys file; the default key is taken as it was always taken (any
 * bytes of its file's first line). */
static bool key_ok(const char *s)
{
	size_t n = strlen(s);
	if (n < 16 || n > KEYS_KEY_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] == 0x7f)
			return false;
	return true;
}

int keys_add(const char *name, const char *key, struct cell_error *err)
{
	if (!name_ok(name))
		return cell_err_msg(err, EINVAL,
				    "tenant name '%.40s' must be 1-%d characters of [a-z0-9._-]",
				    name, KEYS_NAME_MAX);
	if (!key[0])
		return cell_err_msg(err, EINVAL, "the key of tenant '%s' is empty", name);
	if (n_keys == KEYS_MAX)
		return cell_err_msg(err, EINVAL, "more than %d API keys", KEYS_MAX);
	char hash[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(key, strlen(key), hash);
	for (size_t i = 0; i < n_keys; i++) {
		if (!strcmp(keys[i].hash, hash))
			return cell_err_msg(err, EINVAL, "tenant '%s' has the key of tenant '%s'",
					    name, admission_principal_name(keys[i].who));
		if (!strcmp(admission_principal_name(keys[i].who), name))
			return cell_err_msg(err, EINVAL, "tenant '%s' is named twice", name);
	}
	struct adm_principal *who = admission_principal(key);
	if (!who)
		return cell_err(err, ENOMEM, "API key of %s", name);
	admission_principal_set_name(who, name);
	memcpy(keys[n_keys].hash, hash, sizeof(hash));
	keys[n_keys].who = who;
	n_keys++;
	if (!strcmp(name, KEYS_DEFAULT))
		default_who = who;
	return 0;
}

/* One line (NUL-terminated, no newline): "NAME KEY", or blank, or a comment. */
static int add_line(char *line, struct cell_error *err)
{
	char *p = line + strspn(line, " \t\r");
	if (!*p || *p == '#')
		return 0;
	char *name = strsep(&p, " \t");
	if (p)
		p += strspn(p, " \t");
	char *key = p ? strsep(&p, " \t\r") : NULL;
	if (p && p[strspn(p, " \t\r")])
		return cell_err_msg(err, EINVAL, "more than NAME KEY on the line");
	if (!key || !*key)
		return cell_err_msg(err, EINVAL, "no key after the name '%.40s'", name);
	if (!strcmp(name, KEYS_DEFAULT))
		return cell_err_msg(err, EINVAL,
				    "'" KEYS_DEFAULT "' is the name of the api-key file's key");
	if (!key_ok(key))
		return cell_err_msg(err, EINVAL,
				    "the key of tenant '%.40s' must be 16-%d printable characters "
				    "without blanks",
				    name, KEYS_KEY_MAX);
	return keys_add(name, key, err);
}

int keys_load_file(const char *path, struct cell_error *err)
{
	char *text = NULL;
	size_t len = 0;
	struct cell_error rerr = {0};
	int r = cell_read_file_at(AT_FDCWD, path, KEYS_FILE_MAX, &text, &len, &rerr);
	if (r == -ENOENT)
		return 0;
	if (r < 0)
		return cell_err(err, -r, "reading the keys file %s: %s", path, rerr.msg);
	_cleanup_free_ char *owned = text;
	if (strlen(text) != len)
		return cell_err_msg(err, EINVAL, "keys file %s: a NUL byte", path);
	struct stat st;
	if (stat(path, &st) == 0 && (st.st_mode & 077))
		log_warn("keys file %s is readable by others (mode %o)", path, st.st_mode & 0777);
	size_t before = n_keys;
	char *rest = text;
	for (unsigned lineno = 1; rest; lineno++) {
		char *line = strsep(&rest, "\n");
		struct cell_error lerr = {0};
		if (add_line(line, &lerr) < 0)
			return cell_err_msg(err, EINVAL, "keys file %s line %u: %s", path, lineno,
					    lerr.msg);
	}
	log_info("API keys: %zu tenant%s from %s", n_keys - before, n_keys - before == 1 ? "" : "s",
		 path);
	return 0;
}

struct adm_principal *keys_match(const char *given, size_t len)
{
	if (!given)
		return NULL;
	char hash[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(given, len, hash);
	struct adm_principal *found = NULL;
	for (size_t i = 0; i < n_keys; i++) {
		/* Branch-free selection: every key is compared, whichever matches. */
		uintptr_t eq = CRYPTO_memcmp(hash, keys[i].hash, CELL_SHA256_HEX_LEN) == 0;
		found = (struct adm_principal *)((uintptr_t)found |
						 ((uintptr_t)keys[i].who & (uintptr_t)-eq));
	}
	return found;
}

struct adm_principal *keys_default(void)
{
	return default_who;
}

size_t keys_count(void)
{
	return n_keys;
}

bool keys_tenancy(void)
{
	return n_keys > 1;
}
