/* Admission: how much each API key, and all of them together, may hold at once — sandboxes,
 * running commands, open streams, snapshots and their bytes — so that no key holder can fill
 * celld's fd table, threads or memory and lock out the others or the operator.
 * policies/quotas/default.json sets the quotas (cell-policy(5)); celld lowers the all-keys ones at
 * start when its fd limit could not hold them, keeping a reserve for the Unix socket.
 *
 * The Unix socket (root and group cell: the operator) is never refused by a quota; it only
 * meets the host's own limits, and those answer 503, not a client error. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/quantity.h"
#include "admission.h"
#include "config.h"
#include "fields.h"

#define QUOTA_FILE "quotas/default.json"
#define QUOTA_MAX  (64u << 10)
/* fds kept back from every quota for the Unix socket, the listeners, the watcher and the
 * files of a create (a quarter of the limit on a host whose limit is small). */
#define FD_RESERVE 1024u
/* What each unit costs in celld's fd table at most: a sandbox its pidfd, dir and held
 * overlay; a running command its relay; a stream its relay (its socket is one of the TCP
 * connections, counted apart); a snapshot nothing (it is files on disk). */
static const unsigned fd_cost[ADM_KINDS] = {
    [ADM_SANDBOXES] = 3, [ADM_COMMANDS] = 1, [ADM_STREAMS] = 1};
/* Connections of key holders the HTTP server takes at most (fewer when the fd limit is
 * small: a quarter of what it leaves). */
#define TCP_CONNECTIONS_MAX 4096u

static const char *const kind_names[ADM_KINDS] = {
    [ADM_SANDBOXES] = "sandboxes",
    [ADM_COMMANDS] = "runningCommands",
    [ADM_STREAMS] = "streams",
    [ADM_SNAPSHOTS] = "snapshots",
    [ADM_SNAPSHOT_BYTES] = "snapshotBytes",
};
#define GIB	  (1ull << 30)
#define BYTES_MAX (1ull << 60) /* an exbibyte: any bytes quota above is a typo */
#define COUNT_MAX 1000000u
/* Kinds a file older than them may leave out (the built-in value applies). */
#define KIND_OPTIONAL(k) ((k) >= ADM_SNAPSHOTS)

struct adm_principal {
	char id[24];   /* "key:" + 16 hex of the key's SHA-256, never the key */
	char name[33]; /* the tenant's (keys.h); the id until a key names it */
	uint64_t used[ADM_KINDS];
	struct adm_principal *next;
};

static struct {
	pthread_mutex_t lock;
	uint64_t per_key[ADM_KINDS], all_keys[ADM_KINDS];
	uint64_t used_all[ADM_KINDS]; /* every key together */
	unsigned tcp_connections;
	struct adm_principal *principals;
} adm = {
    .tcp_connections = TCP_CONNECTIONS_MAX,
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .per_key = {[ADM_SANDBOXES] = 1000,
		[ADM_COMMANDS] = 1024,
		[ADM_STREAMS] = 256,
		[ADM_SNAPSHOTS] = 100,
		[ADM_SNAPSHOT_BYTES] = 100 * GIB},
    .all_keys = {[ADM_SANDBOXES] = 4000,
		 [ADM_COMMANDS] = 2048,
		 [ADM_STREAMS] = 1024,
		 [ADM_SNAPSHOTS] = 1000,
		 [ADM_SNAPSHOT_BYTES] = 1024 * GIB},
};

/* ---- the policy ---- */

static int quota_fail(struct cell_error *err, const char *field, const char *why)
{
	return cell_err_msg(err, EINVAL, "%s/%s: %s %s", celld.policies_dir, QUOTA_FILE, field,
			    why);
}

/* snapshotBytes: an integer, or a size as resourceLimits writes one ("100Gi"). */
static int load_bytes(json_t *v, const char *name, uint64_t *out, struct cell_error *err)
{
	uint64_t b = 0;
	if (json_is_integer(v) && json_integer_value(v) >= 1)
		b = (uint64_t)json_integer_value(v);
	else if (!json_is_string(v) || cell_parse_bytes(json_string_value(v), &b) < 0)
		b = 0;
	if (b < 1 || b > BYTES_MAX)
		return quota_fail(
		    err, name, "must be a size from 1 byte to 1Ei (an integer, or e.g. \"100Gi\")");
	*out = b;
	return 0;
}

static int load_section(json_t *root, const char *section, uint64_t *out, struct cell_error *err)
{
	json_t *o = json_object_get(root, section);
	if (!json_is_object(o))
		return quota_fail(err, section, "must be an object");
	for (int k = 0; k < ADM_KINDS; k++) {
		char name[64];
		snprintf(name, sizeof(name), "%s.%s", section, kind_names[k]);
		json_t *v = json_object_get(o, kind_names[k]);
		if (!v && KIND_OPTIONAL(k))
			continue;
		if (k == ADM_SNAPSHOT_BYTES) {
			if (load_bytes(v, name, &out[k], err) < 0)
				return -EINVAL;
			continue;
		}
		if (!json_is_integer(v) || json_integer_value(v) < 1 ||
		    json_integer_value(v) > COUNT_MAX)
			return quota_fail(err, name, "must be an integer from 1 to 1000000");
		out[k] = (uint64_t)json_integer_value(v);
	}
	return 0;
}

/* The TCP side — connections waiting for their head (gate.c), connections of key holders,
 * and the all-keys quotas — must fit in celld's fd table, less the reserve: the waiting
 * connections take at most an eighth of it, those of key holders a quarter, and the quotas
 * are lowered together (in proportion) when they do not fit in the rest; each is said. */
static void fit_fd_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return;
	uint64_t reserve = rl.rlim_cur / 4 < FD_RESERVE ? rl.rlim_cur / 4 : FD_RESERVE;
	uint64_t budget = rl.rlim_cur - reserve, need = 0;
	if (celld.listen) {
		uint64_t conns =
		    budget / 4 < TCP_CONNECTIONS_MAX ? budget / 4 : TCP_CONNECTIONS_MAX;
		adm.tcp_connections = conns ? (unsigned)conns : 1;
		if (celld.tcp_pending_max > budget / 8) {
			celld.tcp_pending_max = budget / 8 ? (unsigned)(budget / 8) : 1;
			if (celld.tcp_pending_per_ip > celld.tcp_pending_max)
				celld.tcp_pending_per_ip = celld.tcp_pending_max;
			log_warn("tcp: celld's fd limit (%llu) holds %u connections waiting for "
				 "their head, %u per client",
				 (unsigned long long)rl.rlim_cur, celld.tcp_pending_max,
				 celld.tcp_pending_per_ip);
		}
		uint64_t fixed = adm.tcp_connections + celld.tcp_pending_max;
		budget = fixed < budget ? budget - fixed : 0;
	}
	for (int k = 0; k < ADM_KINDS; k++)
		need += adm.all_keys[k] * fd_cost[k];
	if (need <= budget)
		return;
	for (int k = 0; k < ADM_KINDS; k++) {
		if (!fd_cost[k]) /* no fd: nothing to fit */
			continue;
		uint64_t v = adm.all_keys[k] * budget / need;
		adm.all_keys[k] = v ? v : 1;
		if (adm.per_key[k] > adm.all_keys[k])
			adm.per_key[k] = adm.all_keys[k];
	}
	log_warn("quotas: celld's fd limit (%llu) cannot hold the quotas of %s besides %u TCP "
		 "connections; all keys together may now hold %" PRIu64 " sandboxes, %" PRIu64
		 " running commands and %" PRIu64
		 " streams (raise the limit, e.g. LimitNOFILE=, to keep them)",
		 (unsigned long long)rl.rlim_cur, QUOTA_FILE, adm.tcp_connections,
		 adm.all_keys[ADM_SANDBOXES], adm.all_keys[ADM_COMMANDS],
		 adm.all_keys[ADM_STREAMS]);
}

int admission_load(struct cell_error *err)
{
	json_t *root;
	int r = config_policy_json(QUOTA_FILE, QUOTA_MAX, &root, err);
	if (r == -ENOENT) {
		log_info("quotas: no %s/%s; built-in quotas", celld.policies_dir, QUOTA_FILE);
	} else if (r < 0) {
		return r;
	} else {
		r = load_section(root, "perKey", adm.per_key, err);
		if (r == 0)
			r = load_section(root, "allKeys", adm.all_keys, err);
		for (int k = 0; r == 0 && k < ADM_KINDS; k++)
			if (adm.per_key[k] > adm.all_keys[k]) {
				char name[64];
				snprintf(name, sizeof(name), "perKey.%s", kind_names[k]);
				r = quota_fail(err, name, "is above allKeys");
			}
		json_decref(root);
		if (r < 0)
			return r;
	}
	fit_fd_limit();
	log_info("quotas: each API key %" PRIu64 " sandboxes, %" PRIu64
		 " running commands, %" PRIu64 " streams, %" PRIu64 " snapshots of %" PRIu64
		 " bytes; all keys %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64 ", %" PRIu64
		 "; the Unix socket is not limited",
		 adm.per_key[ADM_SANDBOXES], adm.per_key[ADM_COMMANDS], adm.per_key[ADM_STREAMS],
		 adm.per_key[ADM_SNAPSHOTS], adm.per_key[ADM_SNAPSHOT_BYTES],
		 adm.all_keys[ADM_SANDBOXES], adm.all_keys[ADM_COMMANDS], adm.all_keys[ADM_STREAMS],
		 adm.all_keys[ADM_SNAPSHOTS], adm.all_keys[ADM_SNAPSHOT_BYTES]);
	return 0;
}

unsigned admission_tcp_connections(void)
{
	return adm.tcp_connections;
}

/* ---- principals ---- */

struct adm_principal *admission_principal(const char *key)
{
	if (!key)
		return NULL; /* the Unix socket */
	char hex[CELL_SHA256_HEX_LEN + 1];
	cell_sha256_hex(key, strlen(key), hex);
	char id[sizeof(((struct adm_principal *)0)->id)];
	snprintf(id, sizeof(id), "key:%.16s", hex);
	return admission_principal_by_id(id);
}

struct adm_principal *admission_principal_by_id(const char *id)
{
	if (!id || strncmp(id, "key:", 4))
		return NULL;
	pthread_mutex_lock(&adm.lock);
	struct adm_principal *p = adm.principals;
	while (p && strcmp(p->id, id))
		p = p->next;
	if (!p && (p = calloc(1, sizeof(*p)))) {
		snprintf(p->id, sizeof(p->id), "%s", id);
		snprintf(p->name, sizeof(p->name), "%s", p->id);
		p->next = adm.principals;
		adm.principals = p;
	}
	pthread_mutex_unlock(&adm.lock);
	return p;
}

const char *admission_principal_id(const struct adm_principal *p)
{
	return p ? p->id : "unix";
}

void admission_principal_set_name(struct adm_principal *p, const char *name)
{
	pthread_mutex_lock(&adm.lock);
	snprintf(p->name, sizeof(p->name), "%s", name);
	pthread_mutex_unlock(&adm.lock);
}

const char *admission_principal_name(const struct adm_principal *p)
{
	return p ? p->name : "operator";
}

/* ---- taking and giving back ---- */

int admission_take_n(struct adm_principal *p, enum adm_kind kind, uint64_t n, bool force,
		     struct cell_error *err)
{
	if (!p)
		return 0;
	pthread_mutex_lock(&adm.lock);
	int r = 0;
	if (!force && p->used[kind] + n > adm.per_key[kind])
		r = cell_err_msg(err, EUSERS,
				 "this API key already holds %" PRIu64 " %s, %" PRIu64
				 " more would pass its quota of %" PRIu64 " (%s perKey.%s)",
				 p->used[kind], kind_names[kind], n, adm.per_key[kind], QUOTA_FILE,
				 kind_names[kind]);
	else if (!force && adm.used_all[kind] + n > adm.all_keys[kind])
		r = cell_err_msg(err, EUSERS,
				 "the API keys together hold %" PRIu64 " %s, %" PRIu64
				 " more would pass their quota of %" PRIu64 " (%s allKeys.%s)",
				 adm.used_all[kind], kind_names[kind], n, adm.all_keys[kind],
				 QUOTA_FILE, kind_names[kind]);
	if (r == 0) {
		p->used[kind] += n;
		adm.used_all[kind] += n;
	}
	pthread_mutex_unlock(&adm.lock);
	return r;
}

int admission_take(struct adm_principal *p, enum adm_kind kind, bool force, struct cell_error *err)
{
	return admission_take_n(p, kind, 1, force, err);
}

void admission_put_n(struct adm_principal *p, enum adm_kind kind, uint64_t n)
{
	if (!p)
		return;
	pthread_mutex_lock(&adm.lock);
	if (n > p->used[kind])
		n = p->used[kind];
	p->used[kind] -= n;
	adm.used_all[kind] -= n < adm.used_all[kind] ? n : adm.used_all[kind];
	pthread_mutex_unlock(&adm.lock);
}

void admission_put(struct adm_principal *p, enum adm_kind kind)
{
	admission_put_n(p, kind, 1);
}

json_t *admission_json(void)
{
	json_t *o = json_object();
	pthread_mutex_lock(&adm.lock);
	for (int k = 0; k < ADM_KINDS; k++)
		json_object_set_new(
		    o, kind_names[k],
		    json_pack("{s:I, s:I, s:I}", "perKey", (json_int_t)adm.per_key[k], "allKeys",
			      (json_int_t)adm.all_keys[k], "used", (json_int_t)adm.used_all[k]));
	pthread_mutex_unlock(&adm.lock);
	return o;
}
