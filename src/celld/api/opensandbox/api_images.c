/* cell's own routes of images (celld(8), "Images"): the layer store's images and those cell
 * built (<images>/<name>/rootfs) listed and inspected, pulls streamed as server-sent events,
 * tags; removals and prunes on the Unix socket only, since the store is every tenant's.
 *
 *   GET    /v1/images                 [{name, digest, source, bytes, sharedBytes, uniqueBytes}]
 *   GET    /v1/images/NAME, ?name=    one image: its config's summary and its layers
 *   POST   /v1/images/pull            {image, auth?: {username, password}} → events
 *   POST   /v1/images/tag             {source, name}
 *   DELETE /v1/images/NAME[?force=true]
 *   POST   /v1/images/prune */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <microhttpd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "admission.h"
#include "api.h"
#include "config.h"
#include "http/errors.h"
#include "http/http.h"
#include "image_pull.h"
#include "image_events.h"
#include "image_store.h"
#include "registry.h"
#include "sandbox.h"
#include "snapshots.h"
#include "http/url.h"

#define PULL_EVENTS_MAX (4u << 20) /* bytes of events a slow client may leave unread */

/* ---- who may see a store image ---- */

/* A name pulled with a request's own credentials is its principal's; the Unix socket (the
 * operator) sees every name. */
static bool sees(struct http_req *r, const struct store_image *img)
{
	struct adm_principal *who = http_principal(r);
	if (!img->private_to[0] || !who)
		return true;
	return !strcmp(img->private_to, admission_principal_id(who));
}

/* The normalized name of what a client wrote: a reference as a pull names it
 * ("busybox" → "docker.io/library/busybox:latest"); a digest as it is. */
static int normalize(const char *in, char *out, size_t size, struct cell_error *err)
{
	if (!strncmp(in, "sha256:", 7)) {
		struct oci_digest d;
		int r = oci_digest_parse(in, &d, err);
		if (r < 0)
			return r;
		snprintf(out, size, "%s", d.text);
		return 0;
	}
	struct oci_ref ref, q;
	int r = oci_ref_parse(in, &ref, err);
	if (r < 0)
		return r;
	if (ref.short_name && (r = oci_ref_qualify(&ref, "docker.io", &q, err)) == 0)
		ref = q;
	if (r < 0)
		return r;
	return oci_ref_format(&ref, out, size) < 0 ? cell_err_msg(err, ENAMETOOLONG, "too long")
						   : 0;
}

/* The store image a client names (a name as written, normalized, or a digest): 0, or
 * -ENOENT (also for another principal's private name). */
static int find_image(struct http_req *r, const char *name, struct store_image *img,
		      char norm[STORE_NAME_MAX], struct cell_error *err)
{
	snprintf(norm, STORE_NAME_MAX, "%s", name);
	int rc = store_image_get(name, img, err);
	if (rc == -ENOENT || rc == -EINVAL) {
		struct cell_error e2 = {0};
		if (normalize(name, norm, STORE_NAME_MAX, &e2) == 0) {
			cell_err_clear(err);
			rc = store_image_get(norm, img, err);
		}
	}
	if (rc == 0 && !sees(r, img)) {
		store_image_free(img);
		rc = -ENOENT;
	}
	if (rc == -ENOENT || rc == -EINVAL) {
		cell_err_clear(err);
		rc = cell_err_msg(err, ENOENT, "no image '%.200s'", name);
	}
	return rc;
}

/* A built image: <images>/<name>/rootfs, a name of one path component. */
static bool built_image(const char *name)
{
	if (!name[0] || name[0] == '.' || strchr(name, '/') || strlen(name) > 200)
		return false;
	char path[4096];
	struct stat st;
	snprintf(path, sizeof(path), "%s/%s/rootfs", celld.images_dir, name);
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ---- GET /v1/images ---- */

/* The store images who sees, each with its layers (a new array of store_image). */
static size_t visible_images(struct http_req *r, json_t *listed, struct store_image **out,
			     const char ***names)
{
	size_t n = json_array_size(listed), k = 0;
	*out = calloc(n ? n : 1, sizeof(**out));
	*names = calloc(n ? n : 1, sizeof(**names));
	if (!*out || !*names)
		return 0;
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(listed, i);
		const char *name = json_string_value(json_object_get(o, "name"));
		struct cell_error err = {0};
		if (!name || store_image_get(name, &(*out)[k], &err) < 0)
			continue;
		if (!sees(r, &(*out)[k])) {
			store_image_free(&(*out)[k]);
			continue;
		}
		(*names)[k++] = name;
	}
	return k;
}

int api_image_list(struct http_req *r)
{
	json_t *listed = store_image_list();
	json_t *out = json_array();
	if (!listed || !out) {
		json_decref(listed);
		json_decref(out);
		return http_no_memory(r);
	}
	struct store_image *imgs = NULL;
	const char **names = NULL;
	size_t n = visible_images(r, listed, &imgs, &names);
	/* A layer shared by two images of other digests counts as shared for both. */
	for (size_t i = 0; i < n; i++) {
		uint64_t unique = 0;
		for (size_t l = 0; l < imgs[i].n_layers; l++) {
			bool shared = false;
			for (size_t j = 0; j < n && !shared; j++) {
				if (j == i || !strcmp(imgs[j].digest, imgs[i].digest))
					continue;
				for (size_t m = 0; m < imgs[j].n_layers && !shared; m++)
					shared = !strcmp(imgs[j].layers[m], imgs[i].layers[l]);
			}
			if (!shared)
				unique += store_layer_bytes(imgs[i].layers[l]);
		}
		uint64_t bytes = imgs[i].bytes;
		json_array_append_new(
		    out, json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:b}", "name", names[i],
				   "digest", imgs[i].digest, "source", "registry", "bytes",
				   (json_int_t)bytes, "sharedBytes",
				   (json_int_t)(bytes > unique ? bytes - unique : 0), "uniqueBytes",
				   (json_int_t)unique, "layers", (json_int_t)imgs[i].n_layers,
				   "private", imgs[i].private_to[0] != '\0'));
	}
	for (size_t i = 0; i < n; i++)
		store_image_free(&imgs[i]);
	free(imgs);
	free(names);
	json_decref(listed);
	/* The images cell built: a directory each, no digest, nothing shared. */
	_cleanup_closedir_ DIR *d = opendir(celld.images_dir);
	struct dirent *de;
	while (d && (de = readdir(d)))
		if (built_image(de->d_name))
			json_array_append_new(out, json_pack("{s:s, s:n, s:s}", "name", de->d_name,
							     "digest", "source", "built"));
	return http_json(r, 200, out);
}

/* ---- GET /v1/images/NAME ---- */

/* The name of an images route: the rest of the raw path, unescaped, or ?name=. */
static int path_name(struct http_req *r, char *buf, size_t size)
{
	const char *q = http_query(r, "name");
	const char *raw = http_raw_path(r);
	const char *p = raw ? strstr(raw, "/images/") : NULL;
	if (q && q[0]) {
		snprintf(buf, size, "%s", q);
		return 0;
	}
	if (!p || !p[8] || strlen(p + 8) >= size)
		return -EINVAL;
	snprintf(buf, size, "%s", p + 8);
	char *qm = strchr(buf, '?');
	if (qm)
		*qm = '\0';
	return url_unescape(buf, false) < 0 ? -EINVAL : 0;
}

static json_t *config_summary(json_t *config)
{
	json_t *c = json_object_get(config, "config");
	json_t *o = json_object();
	static const char *const keys[] = {"Env", "WorkingDir",	  "User",   "Entrypoint",
					   "Cmd", "ExposedPorts", "Labels", "StopSignal"};
	for (size_t i = 0; o && i < CELL_ARRAY_SIZE(keys); i++) {
		json_t *v = json_object_get(c, keys[i]);
		if (v && !json_is_null(v))
			json_object_set(o, keys[i], v);
	}
	return o;
}

int api_image_get(struct http_req *r)
{
	char name[STORE_NAME_MAX + 64], norm[STORE_NAME_MAX];
	if (path_name(r, name, sizeof(name)) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "name an image: /v1/images/NAME or ?name=NAME");
	struct store_image img;
	struct cell_error err = {0};
	int rc = find_image(r, name, &img, norm, &err);
	if (rc == -ENOENT && built_image(name))
		return http_json(
		    r, 200,
		    json_pack("{s:s, s:n, s:s}", "name", name, "digest", "source", "built"));
	if (rc < 0)
		return http_fail(r, -rc, rc == -ENOENT ? "IMAGE_NOT_FOUND" : NULL, "%s", err.msg);
	json_t *layers = json_array();
	for (size_t i = 0; layers && i < img.n_layers; i++)
		json_array_append_new(layers,
				      json_pack("{s:s, s:I}", "diffId", img.layers[i], "bytes",
						(json_int_t)store_layer_bytes(img.layers[i])));
	json_t *o = json_pack(
	    "{s:s, s:s, s:s, s:s, s:I, s:o, s:o, s:O, s:O, s:O, s:b}", "name",
	    strncmp(name, "sha256:", 7) ? norm : name, "digest", img.digest, "configDigest",
	    img.config_digest, "source", "registry", "bytes", (json_int_t)img.bytes, "layers",
	    layers ? layers : json_array(), "config", config_summary(img.config), "os",
	    json_object_get(img.config, "os") ? json_object_get(img.config, "os") : json_null(),
	    "architecture",
	    json_object_get(img.config, "architecture")
		? json_object_get(img.config, "architecture")
		: json_null(),
	    "created",
	    json_object_get(img.config, "created") ? json_object_get(img.config, "created")
						   : json_null(),
	    "private", img.private_to[0] != '\0');
	store_image_free(&img);
	if (!o)
		return http_no_memory(r);
	return http_json(r, 200, o);
}

/* ---- which images sandboxes and snapshots use ---- */

struct users {
	json_t *sandboxes, *snapshots;
};

/* Who uses the image named name of digest: sandboxes (their image's name or digest) and
 * snapshots (their meta's image or imageDigest). */
static void image_users(const char *name, const char *digest, struct users *u)
{
	u->sandboxes = json_array();
	u->snapshots = json_array();
	struct sandbox **all;
	size_t n = registry_snapshot(&all);
	for (size_t i = 0; i < n; i++) {
		const struct sandbox *sb = all[i];
		if ((sb->image && !strcmp(sb->image, name)) ||
		    (sb->image_digest && !strcmp(sb->image_digest, digest)))
			json_array_append_new(u->sandboxes, json_string(sb->id));
	}
	sandbox_unref_all(all, n);
	json_t *snaps = NULL;
	struct cell_error err = {0};
	if (snapshot_list(NULL, &snaps, &err) < 0) {
		cell_err_drop(&err, "listing snapshots for an image's users");
		return;
	}
	size_t k;
	json_t *m;
	json_array_foreach(snaps, k, m)
	{
		const char *im = json_string_value(json_object_get(m, "image"));
		const char *id = json_string_value(json_object_get(m, "imageDigest"));
		const char *sid = json_string_value(json_object_get(m, "id"));
		if (sid && ((im && !strcmp(im, name)) || (id && !strcmp(id, digest))))
			json_array_append_new(u->snapshots, json_string(sid));
	}
	json_decref(snaps);
}

static bool keep_used(const char *digest, void *cls)
{
	(void)cls;
	struct users u;
	image_users("", digest, &u);
	bool used = json_array_size(u.sandboxes) || json_array_size(u.snapshots);
	json_decref(u.sandboxes);
	json_decref(u.snapshots);
	return used;
}

/* ---- DELETE /v1/images/NAME[?force=true] ---- */

int api_image_delete(struct http_req *r)
{
	if (http_is_tcp(r))
		return http_error(r, 403, "FORBIDDEN",
				  "images are removed on celld's Unix socket only: the store is "
				  "every tenant's");
	char name[STORE_NAME_MAX + 64], norm[STORE_NAME_MAX];
	if (path_name(r, name, sizeof(name)) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "name an image: /v1/images/NAME or ?name=NAME");
	const char *force = http_query(r, "force");
	bool forced = force && (!strcmp(force, "true") || !strcmp(force, "1"));
	struct store_image img;
	struct cell_error err = {0};
	int rc = find_image(r, name, &img, norm, &err);
	if (rc < 0)
		return http_fail(r, -rc, rc == -ENOENT ? "IMAGE_NOT_FOUND" : NULL, "%s", err.msg);
	if (!strncmp(name, "sha256:", 7)) {
		store_image_free(&img);
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "remove an image by its name: a digest names no tag");
	}
	struct users u;
	image_users(norm, img.digest, &u);
	store_image_free(&img);
	if (!forced && (json_array_size(u.sandboxes) || json_array_size(u.snapshots))) {
		char *sbs = json_dumps(u.sandboxes, JSON_COMPACT);
		char *sns = json_dumps(u.snapshots, JSON_COMPACT);
		json_decref(u.sandboxes);
		json_decref(u.snapshots);
		int ret = http_error(r, 409, "IMAGE_IN_USE",
				     "image %s is in use: sandboxes %s, snapshots %s (force=true "
				     "removes its name only)",
				     norm, sbs ? sbs : "?", sns ? sns : "?");
		free(sbs);
		free(sns);
		return ret;
	}
	json_decref(u.sandboxes);
	json_decref(u.snapshots);
	rc = store_name_remove(norm, &err);
	if (rc < 0)
		return http_fail(r, -rc, rc == -ENOENT ? "IMAGE_NOT_FOUND" : NULL, "%s", err.msg);
	uint64_t freed = 0;
	if (!forced) {
		/* Its layers go unless another image or a user keeps them; a pull under way
		 * keeps them all until the next prune. */
		rc = store_prune(keep_used, NULL, &freed, &err);
		if (rc == -EBUSY)
			cell_err_drop(&err, "a pull holds the store: the layers stay for a prune");
		else if (rc < 0)
			return http_internal(r, &err);
	}
	image_event("image.removed", json_pack("{s:s, s:b, s:I}", "name", norm, "untaggedOnly",
					       forced, "freedBytes", (json_int_t)freed));
	return http_json(r, 200,
			 json_pack("{s:s, s:b, s:I}", "removed", norm, "untaggedOnly", forced,
				   "freedBytes", (json_int_t)freed));
}

/* ---- POST /v1/images/prune ---- */

int api_image_prune(struct http_req *r)
{
	if (http_is_tcp(r))
		return http_error(r, 403, "FORBIDDEN",
				  "the image store is pruned on celld's Unix socket only: it is "
				  "every tenant's");
	uint64_t freed = 0;
	struct cell_error err = {0};
	int rc = store_prune(keep_used, NULL, &freed, &err);
	if (rc == -EBUSY)
		return http_error(r, 409, "STORE_BUSY", "%s", err.msg);
	if (rc < 0)
		return http_internal(r, &err);
	image_event("images.pruned", json_pack("{s:I}", "freedBytes", (json_int_t)freed));
	return http_json(r, 200, json_pack("{s:I}", "freedBytes", (json_int_t)freed));
}

/* ---- POST /v1/images/tag {source, name} ---- */

int api_image_tag(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	const char *source = json_string_value(json_object_get(body, "source"));
	const char *name = json_string_value(json_object_get(body, "name"));
	if (!source || !source[0] || !name || !name[0]) {
		json_decref(body);
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "source and name are required: {\"source\": IMAGE, \"name\": "
				  "NEW_NAME}");
	}
	char norm[STORE_NAME_MAX], src_norm[STORE_NAME_MAX];
	struct cell_error err = {0};
	if (!strncmp(name, "sha256:", 7) || normalize(name, norm, sizeof(norm), &err) < 0) {
		json_decref(body);
		return http_error(r, 400, "INVALID_ARGUMENT", "name: %s",
				  err.msg[0] ? err.msg : "a digest is no name");
	}
	struct store_image img;
	int rc = find_image(r, source, &img, src_norm, &err);
	json_decref(body);
	if (rc < 0)
		return http_fail(r, -rc, rc == -ENOENT ? "IMAGE_NOT_FOUND" : NULL, "%s", err.msg);
	rc = store_image_put(norm, &img, &err);
	if (rc == 0 && img.private_to[0])
		rc = store_name_private(norm, img.private_to, &err);
	char digest[STORE_DIGEST_MAX];
	snprintf(digest, sizeof(digest), "%s", img.digest);
	store_image_free(&img);
	if (rc < 0)
		return http_internal(r, &err);
	image_event("image.tagged", json_pack("{s:s, s:s, s:s}", "name", norm, "source", src_norm,
					      "digest", digest));
	return http_json(r, 200, json_pack("{s:s, s:s}", "name", norm, "digest", digest));
}

/* ---- POST /v1/images/pull {image, auth?} ---- */

/* A pull's events: written by the pull's thread, read by the connection's. */
struct pull_stream {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned refs;
	char *buf;
	size_t len, off;
	bool ended, dropped;
	char image[STORE_NAME_MAX + 64];
	bool has_creds;
	struct oci_creds creds;
	char owner[32]; /* admission_principal_id of who pulls with its own credentials */
};

static void ps_unref(struct pull_stream *s)
{
	pthread_mutex_lock(&s->lock);
	bool last = --s->refs == 0;
	pthread_mutex_unlock(&s->lock);
	if (!last)
		return;
	explicit_bzero(&s->creds, sizeof(s->creds));
	pthread_mutex_destroy(&s->lock);
	pthread_cond_destroy(&s->cond);
	free(s->buf);
	free(s);
}

/* One event, "event: TYPE\ndata: {..., "type": TYPE}\n\n" (o's reference taken). */
static void ps_event(struct pull_stream *s, const char *type, json_t *o)
{
	if (!o)
		return;
	json_object_set_new(o, "type", json_string(type));
	char *text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (!text)
		return;
	pthread_mutex_lock(&s->lock);
	size_t add = strlen(type) + strlen(text) + 20;
	if (s->len - s->off + add > PULL_EVENTS_MAX) {
		s->dropped = true; /* a client that reads nothing misses progress, not the end */
	} else {
		if (s->off) {
			memmove(s->buf, s->buf + s->off, s->len - s->off);
			s->len -= s->off;
			s->off = 0;
		}
		char *b = realloc(s->buf, s->len + add + 1);
		if (b) {
			s->buf = b;
			s->len += (size_t)snprintf(b + s->len, add + 1, "event: %s\ndata: %s\n\n",
						   type, text);
		}
	}
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	free(text);
}

static void on_progress(void *cls, const struct image_pull_progress *p)
{
	ps_event(cls, "progress",
		 json_pack("{s:s, s:I, s:I, s:s, s:I, s:I}", "layer", p->digest, "index",
			   (json_int_t)p->index, "count", (json_int_t)p->count, "state",
			   image_pull_state_name(p->state), "done", (json_int_t)p->done, "total",
			   (json_int_t)p->total));
}

static const char *pull_code(int errnum)
{
	switch (errnum) {
	case ENOENT:
		return "IMAGE_NOT_FOUND";
	case EACCES:
		return "REGISTRY_UNAUTHORIZED";
	case EBADMSG:
		return "DIGEST_MISMATCH";
	case EFBIG:
		return "IMAGE_TOO_LARGE";
	case ETIMEDOUT:
		return "REGISTRY_TIMEOUT";
	case ENOEXEC:
		return "IMAGE_PLATFORM";
	default:
		return "PULL_FAILED";
	}
}

static void *pull_thread(void *arg)
{
	struct pull_stream *s = arg;
	ps_event(s, "status", json_pack("{s:s, s:s}", "status", "pulling", "image", s->image));
	struct image_pull_result res;
	struct cell_error err = {0};
	int rc = image_pull(s->image, s->has_creds ? &s->creds : NULL, on_progress, s, &res, &err);
	if (rc == 0 && s->has_creds && s->owner[0])
		rc = store_name_private(res.name, s->owner, &err);
	explicit_bzero(&s->creds, sizeof(s->creds));
	if (rc == 0) {
		log_info("pull: %s done (%s)", res.name, res.digest);
		ps_event(s, "done",
			 json_pack("{s:s, s:s, s:I, s:I, s:I, s:b}", "name", res.name, "digest",
				   res.digest, "fetchedBytes", (json_int_t)res.fetched, "layers",
				   (json_int_t)res.layers, "layersFetched",
				   (json_int_t)res.layers_fetched, "joined", res.joined));
	} else {
		const struct errors_answer *a = errors_lookup(-rc);
		log_warn("pull: %s: %s", s->image, err.msg);
		ps_event(s, "error",
			 json_pack("{s:s, s:s, s:i}", "code", pull_code(-rc), "message", err.msg,
				   "status", (int)a->status));
	}
	pthread_mutex_lock(&s->lock);
	s->ended = true;
	pthread_cond_broadcast(&s->cond);
	pthread_mutex_unlock(&s->lock);
	ps_unref(s);
	return NULL;
}

static ssize_t pull_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	(void)pos;
	struct pull_stream *s = cls;
	pthread_mutex_lock(&s->lock);
	while (s->off == s->len && !s->ended) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_sec += 15;
		if (pthread_cond_timedwait(&s->cond, &s->lock, &ts) == ETIMEDOUT)
			break;
	}
	ssize_t n;
	if (s->off < s->len) {
		size_t k = s->len - s->off < max ? s->len - s->off : max;
		memcpy(buf, s->buf + s->off, k);
		s->off += k;
		n = (ssize_t)k;
	} else if (s->ended) {
		n = MHD_CONTENT_READER_END_OF_STREAM;
	} else {
		static const char ping[] = ": ping\n\n";
		n = (ssize_t)(max < sizeof(ping) - 1 ? max : sizeof(ping) - 1);
		memcpy(buf, ping, (size_t)n);
	}
	pthread_mutex_unlock(&s->lock);
	return n;
}

static void pull_free(void *cls)
{
	ps_unref(cls);
}

int api_image_pull(struct http_req *r)
{
	json_t *body;
	if (http_json_body(r, &body) < 0)
		return 0;
	const char *image = json_string_value(json_object_get(body, "image"));
	json_t *auth = json_object_get(body, "auth");
	if (!image || !image[0] || strlen(image) >= STORE_NAME_MAX) {
		json_decref(body);
		return http_error(r, 400, "INVALID_ARGUMENT",
				  "image is required: a registry reference (\"busybox\", "
				  "\"127.0.0.1:5000/x:1\")");
	}
	struct oci_ref ref;
	struct cell_error err = {0};
	if (oci_ref_parse(image, &ref, &err) < 0) {
		json_decref(body);
		return http_error(r, 400, "INVALID_ARGUMENT", "image: %s", err.msg);
	}
	struct pull_stream *s = calloc(1, sizeof(*s));
	if (!s) {
		json_decref(body);
		return http_no_memory(r);
	}
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->refs = 1;
	snprintf(s->image, sizeof(s->image), "%s", image);
	if (auth && !json_is_null(auth)) {
		const char *u = json_string_value(json_object_get(auth, "username"));
		const char *p = json_string_value(json_object_get(auth, "password"));
		if (!json_is_object(auth) || !u || !p || !u[0] ||
		    strlen(u) >= sizeof(s->creds.user) || strlen(p) >= sizeof(s->creds.pass)) {
			json_decref(body);
			ps_unref(s);
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "auth must be {\"username\": ..., \"password\": ...}");
		}
		s->has_creds = true;
		snprintf(s->creds.user, sizeof(s->creds.user), "%s", u);
		snprintf(s->creds.pass, sizeof(s->creds.pass), "%s", p);
		struct adm_principal *who = http_principal(r);
		if (who)
			snprintf(s->owner, sizeof(s->owner), "%s", admission_principal_id(who));
	}
	json_decref(body);
	struct MHD_Response *resp =
	    MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16 << 10, pull_read, s, pull_free);
	if (!resp) {
		ps_unref(s);
		return http_no_memory(r);
	}
	/* The pull runs on a thread of its own: a client that goes away leaves it to finish
	 * (another caller may be waiting for it). */
	s->refs++;
	pthread_t t;
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	int pr = pthread_create(&t, &attr, pull_thread, s);
	pthread_attr_destroy(&attr);
	if (pr != 0) {
		s->refs--;
		MHD_destroy_response(resp);
		return http_fail(r, pr, NULL, "no thread for the pull: %s", strerror(pr));
	}
	MHD_add_response_header(resp, "Content-Type", "text/event-stream");
	MHD_add_response_header(resp, "Cache-Control", "no-cache");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	return http_respond(r, 200, resp);
}
