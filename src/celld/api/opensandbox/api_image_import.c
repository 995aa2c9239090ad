/* cell's own routes that make images: POST /v1/images/import?name=&ref= (the archive as the
 * body, streamed through a pipe to a thread running image_import.c), POST
 * /v1/sandboxes/{id}/commit and POST /v1/snapshots/{id}/commit ({name}: image_commit.c).
 *
 * Names are global and recorded with their owner: any key may import or commit, but a
 * name that names another tenant's image is 409 IMAGE_NAME_TAKEN (tenancy_sees_id on the
 * owner the store recorded). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cell/log.h"
#include "admission.h"
#include "api.h"
#include "http/http.h"
#include "image_events.h"
#include "image_commit.h"
#include "image_import.h"
#include "sandbox.h"
#include "tenancy.h"

#define REF_MAX 512

struct import_job {
	int wfd, rfd;
	bool started, joined;
	pthread_t thread;
	char name[STORE_NAME_MAX], ref[REF_MAX + 1], owner[64];
	struct adm_principal *who;
	struct import_opts opts;
	struct import_result res;
	struct cell_error err;
	int rc;
};

/* The name may move from its owner's image only when who sees that owner's things. */
static bool may_take(const char *owner, void *cls)
{
	return tenancy_sees_id(cls, owner);
}

static void *run(void *cls)
{
	struct import_job *j = cls;
	j->rc = image_import(j->rfd, &j->opts, &j->res, &j->err);
	/* From here a write of the rest of the body fails (EPIPE) at once. */
	close(j->rfd);
	j->rfd = -1;
	return NULL;
}

static void job_join(struct import_job *j)
{
	if (j->wfd >= 0) {
		close(j->wfd);
		j->wfd = -1;
	}
	if (j->started && !j->joined) {
		pthread_join(j->thread, NULL);
		j->joined = true;
	}
}

static void job_free(void *cls)
{
	struct import_job *j = cls;
	job_join(j);
	if (j->rfd >= 0)
		close(j->rfd);
	free(j);
}

static int query_copy(struct http_req *r, const char *key, char *out, size_t size)
{
	const char *v = http_query(r, key);
	if (!v || !v[0])
		return 0;
	if (strlen(v) >= size)
		return http_error(r, 400, "INVALID_ARGUMENT", "%s is longer than %zu bytes", key,
				  size - 1),
		       -1;
	memcpy(out, v, strlen(v) + 1);
	return 1;
}

int api_image_import_begin(struct http_req *r)
{
	struct import_job *j = calloc(1, sizeof(*j));
	if (!j)
		return http_no_memory(r);
	j->wfd = j->rfd = -1;
	http_set_state(r, j, job_free);
	char given[STORE_NAME_MAX] = "";
	int qn = query_copy(r, "name", given, sizeof(given));
	int qr = qn < 0 ? -1 : query_copy(r, "ref", j->ref, sizeof(j->ref));
	if (qn < 0 || qr < 0)
		return 0;
	struct cell_error err = {0};
	if (qn && image_import_name(given, j->name, &err) < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "%s", err.msg);
	j->who = http_principal(r);
	snprintf(j->owner, sizeof(j->owner), "%s", admission_principal_id(j->who));
	j->opts = (struct import_opts){.name = qn ? j->name : NULL,
				       .ref = qr ? j->ref : NULL,
				       .owner_id = j->owner,
				       .may_take = may_take,
				       .cls = j->who};
	int fds[2];
	if (pipe2(fds, O_CLOEXEC) < 0)
		return http_fail(r, errno, NULL, "pipe: %s", strerror(errno));
	j->rfd = fds[0];
	j->wfd = fds[1];
	fcntl(j->wfd, F_SETPIPE_SZ, 1 << 20); /* fewer wake-ups; the default is fine too */
	int e = pthread_create(&j->thread, NULL, run, j);
	if (e)
		return http_fail(r, e, NULL, "starting the import: %s", strerror(e));
	j->started = true;
	return 0;
}

int api_image_import_data(struct http_req *r, const char *data, size_t len)
{
	struct import_job *j = http_state(r);
	if (!j || j->wfd < 0)
		return 0; /* answered early, or the import ended: the rest is dropped */
	while (len) {
		ssize_t w = write(j->wfd, data, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w < 0) {
			/* EPIPE: the import ended (its answer says how); the rest is dropped */
			close(j->wfd);
			j->wfd = -1;
			return 0;
		}
		data += w;
		len -= (size_t)w;
	}
	return 0;
}

int api_image_import(struct http_req *r)
{
	struct import_job *j = http_state(r);
	if (!j || !j->started)
		return http_error(r, 500, "INTERNAL", "import state lost");
	job_join(j);
	int rc = j->rc;
	if (rc < 0)
		log_info("image import failed: %s", j->err.msg);
	if (rc == -EBADMSG)
		return http_error(r, 400, "DIGEST_MISMATCH", "%s", j->err.msg);
	if (rc == -IMPORT_ENAME_REQUIRED)
		return http_error(r, 400, "IMAGE_NAME_REQUIRED",
				  "%s (POST /v1/images/import?name=NAME)", j->err.msg);
	if (rc == -STORE_ENAME_TAKEN)
		return http_error(r, 409, "IMAGE_NAME_TAKEN", "%s", j->err.msg);
	if (rc == -EINVAL || rc == -EFBIG || rc == -ENOEXEC || rc == -EPROTONOSUPPORT)
		return http_error(r, 400, "INVALID_IMAGE_ARCHIVE", "%s", j->err.msg);
	if (rc < 0)
		return http_internal(r, &j->err);
	log_info("image %s imported: %s, %zu layers (%zu new), %llu bytes", j->res.name,
		 j->res.digest, j->res.layers, j->res.layers_added,
		 (unsigned long long)j->res.bytes);
	image_event("image.imported",
		    json_pack("{s:s, s:s, s:I, s:I, s:I}", "name", j->res.name, "digest",
			      j->res.digest, "layers", (json_int_t)j->res.layers, "layersAdded",
			      (json_int_t)j->res.layers_added, "bytes", (json_int_t)j->res.bytes));
	return http_json(r, 201,
			 json_pack("{s:s, s:s, s:I, s:I, s:I}", "name", j->res.name, "digest",
				   j->res.digest, "layers", (json_int_t)j->res.layers,
				   "layersAdded", (json_int_t)j->res.layers_added, "bytes",
				   (json_int_t)j->res.bytes));
}

/* ---- commits ---- */

static int commit_answer(struct http_req *r, int rc, const struct commit_result *res,
			 const struct cell_error *err)
{
	if (rc == -ENOENT)
		return http_fail(r, ENOENT, "NOT_FOUND", "%s", err->msg);
	if (rc == -EBUSY)
		return http_error(r, 409, "SANDBOX_BUSY", "%s", err->msg);
	if (rc == -STORE_ENAME_TAKEN)
		return http_error(r, 409, "IMAGE_NAME_TAKEN", "%s", err->msg);
	if (rc == -EINVAL)
		return http_error(r, 400, "INVALID_ARGUMENT", "%s", err->msg);
	if (rc < 0)
		return http_internal(r, err);
	log_info("image %s committed from %s: %s, %zu layers", res->name, res->source, res->digest,
		 res->layers);
	image_event("image.committed",
		    json_pack("{s:s, s:s, s:s, s:I}", "name", res->name, "digest", res->digest,
			      "source", res->source, "layers", (json_int_t)res->layers));
	return http_json(r, 201,
			 json_pack("{s:s, s:s, s:I, s:I, s:I, s:I}", "name", res->name, "digest",
				   res->digest, "layers", (json_int_t)res->layers, "bytes",
				   (json_int_t)res->bytes, "entries", (json_int_t)res->entries,
				   "skipped", (json_int_t)res->skipped));
}

/* The body's {name}, normalized. */
static int commit_name(struct http_req *r, char name[STORE_NAME_MAX])
{
	json_t *body = NULL;
	if (http_json_body(r, &body) < 0)
		return -1;
	const char *n = json_string_value(json_object_get(body, "name"));
	const char *k;
	json_t *v;
	json_object_foreach(body, k, v)
	{
		if (strcmp(k, "name")) {
			json_decref(body);
			return http_error(r, 400, "INVALID_ARGUMENT",
					  "%.64s is not a field of a commit (only name)", k),
			       -1;
		}
	}
	struct cell_error err = {0};
	int rc = !n ? cell_err_msg(&err, EINVAL, "name is required: the new image's name")
		    : image_import_name(n, name, &err);
	json_decref(body);
	if (rc < 0)
		return http_error(r, 400, "INVALID_ARGUMENT", "%s", err.msg), -1;
	return 0;
}

/* A commit for r's principal: the name recorded as its, moved only from what it sees. */
static struct commit_opts commit_opts(struct http_req *r, const char *name)
{
	struct adm_principal *who = http_principal(r);
	return (struct commit_opts){.name = name,
				    .owner_id = admission_principal_id(who),
				    .may_take = may_take,
				    .cls = who};
}

int api_sandbox_commit(struct http_req *r)
{
	char name[STORE_NAME_MAX];
	if (commit_name(r, name) < 0)
		return 0;
	struct sandbox *sb = api_find_sandbox(r);
	if (!sb)
		return 0;
	const struct commit_opts o = commit_opts(r, name);
	struct commit_result res = {0};
	struct cell_error err = {0};
	int rc = image_commit_sandbox(sb, &o, &res, &err);
	sandbox_unref(sb);
	return commit_answer(r, rc, &res, &err);
}

int api_snapshot_commit(struct http_req *r)
{
	char name[STORE_NAME_MAX];
	if (commit_name(r, name) < 0)
		return 0;
	const struct commit_opts o = commit_opts(r, name);
	struct commit_result res = {0};
	struct cell_error err = {0};
	int rc = image_commit_snapshot(http_principal(r), http_param(r, 0), &o, &res, &err);
	if (rc == -ENOENT)
		return http_fail(r, ENOENT, "SNAPSHOT_NOT_FOUND", "%s", err.msg);
	return commit_answer(r, rc, &res, &err);
}
