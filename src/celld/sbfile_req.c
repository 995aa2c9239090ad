/* The files service's pure pieces (sbfile_req.h). */
#include <limits.h>
#include <string.h>

#include "sbfile_req.h"

bool sbfile_name_ok(const char *s, size_t n)
{
	if (n == 0 || n > SBFILE_NAME_MAX || s[0] == '-')
		return false;
	for (size_t i = 0; i < n; i++) {
		char ch = s[i];
		bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
			  (ch >= '0' && ch <= '9') || ch == '_' || ch == '-' || ch == '.' ||
			  (ch == '$' && i == n - 1);
		if (!ok)
			return false;
	}
	return true;
}

bool sbfile_path_ok(const char *path)
{
	return path && path[0] == '/' && strlen(path) < PATH_MAX;
}

/* The length of the UTF-8 sequence at p (0: invalid). */
static size_t utf8_seq(const unsigned char *p)
{
	unsigned c = p[0], n, min;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, min = 0x80;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, min = 0x800;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, min = 0x10000;
	else
		return 0;
	unsigned cp = c & (0x3f >> (n - 1));
	for (unsigned i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (p[i] & 0x3f);
	}
	bool ok = cp >= min && cp <= 0x10ffff && (cp < 0xd800 || cp > 0xdfff);
	return ok ? n : 0;
}

bool sbfile_text_ok(const char *s)
{
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = utf8_seq(p);
		if (!n)
			return false;
		p += n;
	}
	return true;
}

/* The owner o into req as num_key (an id) or name_key (a name); nothing when unchanged. */
static int set_owner(json_t *req, const struct sbfile_owner *o, const char *num_key,
		     const char *name_key)
{
	if (o->id >= 0)
		return json_object_set_new(req, num_key, json_integer(o->id));
	if (o->name[0])
		return json_object_set_new(req, name_key, json_string(o->name));
	return 0;
}

json_t *sbfile_req_perm(const char *path, const struct sbfile_perm *p)
{
	json_t *req = json_pack("{s:s}", "path", path);
	if (!req)
		return NULL;
	if ((p->mode >= 0 && json_object_set_new(req, "mode", json_integer(p->mode)) < 0) ||
	    set_owner(req, &p->user, "uid", "owner") < 0 ||
	    set_owner(req, &p->group, "gid", "group") < 0) {
		json_decref(req);
		return NULL;
	}
	return req;
}

json_t *sbfile_req_audit(const json_t *req, const char *user, bool ok)
{
	json_t *d = json_deep_copy(req);
	if (!d)
		return NULL;
	json_object_del(d, "old");
	json_object_del(d, "new");
	json_object_set_new(d, "user", user ? json_string(user) : json_null());
	json_object_set_new(d, "ok", json_boolean(ok));
	return d;
}

json_t *sbfile_req_audit_write(const char *path, int64_t size, const char *user, bool ok)
{
	return json_pack("{s:s, s:I, s:o, s:b}", "path", path, "size", (json_int_t)size, "user",
			 user ? json_string(user) : json_null(), "ok", ok);
}
