/* celld's audit log and the request context of a thread (audit.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "audit.h"
#include "audit_budget.h"
#include "config.h"
#include "timefmt.h"

/* ---- the request a thread answers ---- */

static __thread char ctx_rid[136];
static __thread char ctx_who[80];

void audit_context_set(const char *request_id, const char *who)
{
	snprintf(ctx_rid, sizeof(ctx_rid), "%s", request_id ? request_id : "");
	snprintf(ctx_who, sizeof(ctx_who), "%s", who ? who : "");
}

const char *audit_request_id(void)
{
	return ctx_rid;
}

const char *audit_who(void)
{
	return ctx_who[0] ? ctx_who : "celld";
}

/* ---- writing ---- */

/* The actions of security.log: who made, changed or ended a sandbox, what the network
 * refused or was told to allow, who failed to authenticate, what the budget dropped.
 * Kept apart so that a flood of commands or file changes never rotates them out. */
static const char *const security_actions[] = {
    "create",	      "adopt",		"delete",	 "pause",	"resume",
    "start",	      "stop",		"init-died",	 "snapshot",	"provision",
    "network.denied", "network.policy", "audit.dropped", "auth.failed",
};

bool audit_action_security(const char *action)
{
	for (size_t i = 0; i < sizeof(security_actions) / sizeof(security_actions[0]); i++)
		if (!strcmp(action, security_actions[i]))
			return true;
	return false;
}

enum { LOG_SECURITY, LOG_AUDIT, LOG_COUNT };
static const char *const log_names[LOG_COUNT] = {AUDIT_SECURITY_FILE, AUDIT_FILE};

struct logfile {
	int fd; /* -1: closed, records dropped */
	uint64_t size, max;
};

static struct {
	pthread_mutex_t lock;
	char *dir;
	struct logfile f[LOG_COUNT];
	uint64_t seq; /* the last one written, in either file */
	struct audit_budget budget;
} lg = {.lock = PTHREAD_MUTEX_INITIALIZER, .f = {{.fd = -1}, {.fd = -1}}};

static struct audit_budget_policy budget_policy;
static bool budget_policy_loaded;

const char *audit_dir(void)
{
	return lg.dir;
}

/* The seq of the last whole line of dir/name (0: none). */
static uint64_t last_seq(int dfd, const char *name)
{
	_cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || st.st_size == 0)
		return 0;
	size_t want =
	    st.st_size < (off_t)(2 * AUDIT_LINE_MAX) ? (size_t)st.st_size : 2 * AUDIT_LINE_MAX;
	_cleanup_free_ char *buf = malloc(want + 1);
	if (!buf)
		return 0;
	ssize_t n = pread(fd, buf, want, st.st_size - (off_t)want);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	/* From the last "seq" member in the tail: lines start with it. */
	uint64_t best = 0;
	for (char *p = buf; (p = strstr(p, "{\"seq\":")); p++) {
		unsigned long long v = strtoull(p + 7, NULL, 10);
		if (v > best)
			best = v;
	}
	return best;
}

static int open_log(int dfd, int which, struct cell_error *err)
{
	const char *name = log_names[which];
	int fd = openat(dfd, name, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0)
		return cell_err(err, errno, "opening %s/%s", lg.dir, name);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		int e = errno;
		close(fd);
		return cell_err(err, e, "stat %s/%s", lg.dir, name);
	}
	fchmod(fd, 0600);
	lg.f[which].size = (uint64_t)st.st_size;
	/* A torn last line (a crash mid-write) is ended, so the next record starts a line
	 * of its own; the reader skips the torn one. */
	if (st.st_size > 0) {
		char last = '\n';
		int rfd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
		if (rfd >= 0) {
			if (pread(rfd, &last, 1, st.st_size - 1) != 1)
				last = '\n';
			close(rfd);
		}
		if (last != '\n' && write(fd, "\n", 1) == 1)
			lg.f[which].size++;
	}
	lg.f[which].fd = fd;
	return 0;
}

static void close_logs_locked(void)
{
	for (int i = 0; i < LOG_COUNT; i++) {
		if (lg.f[i].fd >= 0)
			close(lg.f[i].fd);
		lg.f[i].fd = -1;
	}
}

int audit_policy_load(struct cell_error *err)
{
	char file[4200];
	snprintf(file, sizeof(file), "%s/%s", celld.policies_dir ? celld.policies_dir : ".",
		 AUDIT_BUDGET_FILE);
	struct audit_budget_policy p = audit_budget_default;
	json_t *root;
	int r = config_policy_json(AUDIT_BUDGET_FILE, 64 << 10, &root, err);
	if (r == -ENOENT) {
		log_info("audit budget: no %s; built-in defaults", file);
	} else if (r < 0) {
		return r;
	} else {
		r = audit_budget_parse(root, file, &p, err);
		json_decref(root);
		if (r < 0)
			return r;
	}
	pthread_mutex_lock(&lg.lock);
	budget_policy = p;
	budget_policy_loaded = true;
	lg.budget.policy = p;
	pthread_mutex_unlock(&lg.lock);
	log_info("audit budget per key: %" PRIu64 " records/s (burst %" PRIu64 "), %" PRIu64
		 " bytes/s (burst %" PRIu64 ")",
		 p.records_per_second, p.records_burst, p.bytes_per_second, p.bytes_burst);
	return 0;
}

void audit_budget_set(const struct audit_budget_policy *p)
{
	pthread_mutex_lock(&lg.lock);
	budget_policy = *p;
	budget_policy_loaded = true;
	lg.budget.policy = *p;
	pthread_mutex_unlock(&lg.lock);
}

int audit_open(const char *dir, uint64_t max_bytes, uint64_t security_max_bytes,
	       struct cell_error *err)
{
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s", dir);
	if (chmod(dir, 0700) < 0)
		return cell_err(err, errno, "chmod %s", dir);
	_cleanup_close_ int dfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0)
		return cell_err(err, errno, "opening %s", dir);
	pthread_mutex_lock(&lg.lock);
	close_logs_locked();
	free(lg.dir);
	lg.dir = strdup(dir);
	lg.f[LOG_AUDIT].max = max_bytes ? max_bytes : AUDIT_MAX_DEFAULT;
	lg.f[LOG_SECURITY].max = security_max_bytes ? security_max_bytes : AUDIT_MAX_DEFAULT;
	audit_budget_free(&lg.budget);
	lg.budget.policy = budget_policy_loaded ? budget_policy : audit_budget_default;
	/* One counter for both files, going on from where the last celld left it. */
	lg.seq = 0;
	for (int i = 0; i < LOG_COUNT; i++) {
		char one[64];
		snprintf(one, sizeof(one), "%s.1", log_names[i]);
		uint64_t s = last_seq(dfd, log_names[i]);
		if (!s)
			s = last_seq(dfd, one);
		if (s > lg.seq)
			lg.seq = s;
	}
	int r = lg.dir ? 0 : cell_err(err, ENOMEM, "audit log");
	for (int i = 0; r == 0 && i < LOG_COUNT; i++)
		r = open_log(dfd, i, err);
	if (r < 0)
		close_logs_locked();
	pthread_mutex_unlock(&lg.lock);
	return r;
}

/* dir/name → .1 → … → .AUDIT_KEEP (the oldest dropped), a new dir/name. Lock held. */
static void rotate_locked(int which)
{
	const char *name = log_names[which];
	char from[4096], to[4096];
	for (int i = AUDIT_KEEP; i >= 1; i--) {
		if (i > 1)
			snprintf(from, sizeof(from), "%s/%s.%d", lg.dir, name, i - 1);
		else
			snprintf(from, sizeof(from), "%s/%s", lg.dir, name);
		snprintf(to, sizeof(to), "%s/%s.%d", lg.dir, name, i);
		if (rename(from, to) < 0 && errno != ENOENT)
			log_warn("audit: renaming %s: %s", from, strerror(errno));
	}
	close(lg.f[which].fd);
	lg.f[which].fd = -1;
	struct cell_error err = {0};
	_cleanup_close_ int dfd = open(lg.dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || open_log(dfd, which, &err) < 0)
		log_error("audit: a new %s/%s: %s", lg.dir, name,
			  err.msg[0] ? err.msg : strerror(errno));
}

/* line ("{...}\n", without its seq) into its file with the next seq first. Lock held. */
static void write_locked(int which, const char *line, size_t len)
{
	struct logfile *f = &lg.f[which];
	char prefix[40];
	int plen = snprintf(prefix, sizeof(prefix), "{\"seq\":%" PRIu64 ",", lg.seq + 1);
	/* An empty object ("{}\n") would take a comma it cannot have. */
	if (len < 3 || line[0] != '{' || line[1] == '}')
		return;
	if (f->fd >= 0 && f->size > 0 && f->size + len + (size_t)plen > f->max)
		rotate_locked(which);
	if (f->fd < 0)
		return;
	/* One writev(2) on an O_APPEND descriptor: the line lands whole or (a crash) torn at
	 * its end. */
	struct iovec iov[2] = {{prefix, (size_t)plen}, {(char *)line + 1, len - 1}};
	ssize_t w = writev(f->fd, iov, 2);
	if (w < 0) {
		log_error("audit: writing %s/%s: %s", lg.dir, log_names[which], strerror(errno));
		return;
	}
	lg.seq++;
	f->size += (uint64_t)w;
}

/* The summary of what one principal had dropped, into security.log. Lock held. */
static void write_drops_locked(const struct audit_drops *d)
{
	char t[CELLD_TIME_LEN];
	audit_time_now(t);
	size_t len = 0;
	char *line = audit_line(t, "", "celld", NULL, "audit.dropped", audit_drops_json(d), &len);
	if (!line) {
		log_error("audit: out of memory for a summary of %" PRIu64 " dropped records",
			  d->count);
		return;
	}
	write_locked(LOG_SECURITY, line, len);
	free(line);
}

void audit_flush_drops(void)
{
	pthread_mutex_lock(&lg.lock);
	struct audit_drops d;
	while (audit_budget_take_pending(&lg.budget, &d))
		write_drops_locked(&d);
	pthread_mutex_unlock(&lg.lock);
}

void audit_close(void)
{
	audit_flush_drops();
	pthread_mutex_lock(&lg.lock);
	close_logs_locked();
	free(lg.dir);
	lg.dir = NULL;
	audit_budget_free(&lg.budget);
	pthread_mutex_unlock(&lg.lock);
}

void audit_time_now(char buf[CELLD_TIME_LEN])
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	struct tm tm;
	gmtime_r(&ts.tv_sec, &tm);
	char day[CELLD_TIME_LEN];
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(buf, CELLD_TIME_LEN, "%.20s.%03dZ", day, (int)(ts.tv_nsec / 1000000));
}

char *audit_json_line(json_t *head, json_t *extra, size_t flags, size_t max, size_t *len)
{
	if (!head)
		return NULL;
	json_t *o = json_copy(head);
	const char *k;
	json_t *v;
	json_object_foreach(extra, k, v)
	{
		if (o && !json_object_get(o, k))
			json_object_set(o, k, v);
	}
	char *text = o ? json_dumps(o, flags) : NULL;
	json_decref(o);
	if (text && strlen(text) > max) {
		/* Members larger than a line may be are dropped, the fact kept. */
		free(text);
		json_object_set_new(head, "truncated", json_true());
		text = json_dumps(head, flags);
	}
	json_decref(head);
	if (!text)
		return NULL;
	size_t n = strlen(text);
	char *line = realloc(text, n + 2);
	if (!line) {
		free(text);
		return NULL;
	}
	line[n] = '\n';
	line[n + 1] = '\0';
	*len = n + 1;
	return line;
}

char *audit_line(const char *time_text, const char *request_id, const char *who,
		 const char *sandbox_id, const char *action, json_t *details, size_t *len)
{
	json_t *head = json_pack("{s:s, s:s, s:s, s:s?, s:s}", "time", time_text, "requestId",
				 request_id ? request_id : "", "who", who ? who : "celld",
				 "sandbox", sandbox_id, "action", action);
	return audit_json_line(head, details, JSON_COMPACT, AUDIT_LINE_MAX, len);
}

/* Who the budget limits: a key holder, not the operator, nor celld itself. */
static bool budgeted(const char *who)
{
	return who && who[0] && strcmp(who, "unix") && strcmp(who, "celld");
}

void audit_log_as(const char *request_id, const char *who, const char *sandbox_id,
		  const char *action, json_t *details)
{
	char t[CELLD_TIME_LEN];
	audit_time_now(t);
	size_t len = 0;
	char *line = audit_line(t, request_id, who, sandbox_id, action, details, &len);
	json_decref(details);
	if (!line) {
		log_error("audit: out of memory for a record of %s", action);
		return;
	}
	bool security = audit_action_security(action);
	pthread_mutex_lock(&lg.lock);
	bool pass = true;
	if (budgeted(who)) {
		struct audit_drops due;
		bool has_due;
		pass = audit_budget_admit(&lg.budget, who, action, len, security, celld_now_ms(),
					  &due, &has_due);
		if (has_due)
			write_drops_locked(&due);
	}
	if (pass)
		write_locked(security ? LOG_SECURITY : LOG_AUDIT, line, len);
	pthread_mutex_unlock(&lg.lock);
	free(line);
}

void audit_log(const char *sandbox_id, const char *action, json_t *details)
{
	audit_log_as(audit_request_id(), audit_who(), sandbox_id, action, details);
}

/* ---- failed authentication ---- */

#define AUTH_RECORDS_PER_SECOND 10
#define AUTH_REQUEST_MAX	256

/* Every listener's together: a keyless client must not rotate security.log out. */
static struct {
	pthread_mutex_t lock;
	struct audit_bucket bucket;
	uint64_t suppressed; /* refused since the last record */
} auth = {.lock = PTHREAD_MUTEX_INITIALIZER};

static const struct audit_budget_policy auth_policy = {
    .records_per_second = AUTH_RECORDS_PER_SECOND,
    .records_burst = AUTH_RECORDS_PER_SECOND,
    .bytes_per_second = UINT64_C(1) << 40,
    .bytes_burst = UINT64_C(1) << 40,
};

void audit_client_text(const struct sockaddr *sa, char *buf, size_t size)
{
	snprintf(buf, size, "?");
	if (!sa)
		return;
	if (sa->sa_family == AF_INET) {
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, size);
		return;
	}
	if (sa->sa_family != AF_INET6)
		return;
	struct in6_addr a = ((const struct sockaddr_in6 *)sa)->sin6_addr;
	if (IN6_IS_ADDR_V4MAPPED(&a)) {
		inet_ntop(AF_INET, a.s6_addr + 12, buf, size);
		return;
	}
	/* One host usually holds a whole /64: the client is the /64. */
	memset(a.s6_addr + 8, 0, 8);
	if (inet_ntop(AF_INET6, &a, buf, size))
		strncat(buf, "/64", size - strlen(buf) - 1);
}

size_t audit_request_text(const char *head, size_t len, char *out, size_t size)
{
	/* "METHOD target": the first two words of the request line, the target without its
	 * query (a signed URL's or a preview link's token is a credential of its own), bytes
	 * outside printable ASCII as '?'. */
	size_t o = 0, words = 0;
	for (size_t i = 0; i < len && o + 1 < size; i++) {
		char c = head[i];
		if (c == '\r' || c == '\n')
			break;
		if (c == ' ') {
			if (++words == 2)
				break;
		} else if (words == 1 && c == '?') {
			break;
		} else if ((unsigned char)c < 0x21 || (unsigned char)c > 0x7e) {
			c = '?';
		}
		out[o++] = c;
	}
	out[o] = '\0';
	return o;
}

void audit_auth_failed(const char *listener, const char *client, const char *request_id,
		       const char *request, size_t request_len)
{
	pthread_mutex_lock(&auth.lock);
	bool pass = audit_bucket_take(&auth.bucket, &auth_policy, celld_now_ms(), 1, false);
	uint64_t before = auth.suppressed;
	if (pass)
		auth.suppressed = 0;
	else
		auth.suppressed++;
	pthread_mutex_unlock(&auth.lock);
	if (!pass)
		return;
	char req[AUTH_REQUEST_MAX + 1];
	audit_request_text(request, request_len, req, sizeof(req));
	json_t *d = json_pack("{s:s, s:s, s:s}", "listener", listener ? listener : "", "client",
			      client ? client : "?", "request", req);
	if (d && before)
		json_object_set_new(d, "suppressedBefore", json_integer((json_int_t)before));
	audit_log_as(request_id, "anonymous", NULL, "auth.failed", d);
}

/* ---- reading ---- */

struct ring {
	json_t **v;
	size_t cap, n, head; /* the oldest at head */
};

static void ring_push(struct ring *r, json_t *o)
{
	if (r->n < r->cap) {
		r->v[(r->head + r->n++) % r->cap] = o;
		return;
	}
	json_decref(r->v[r->head]);
	r->v[r->head] = o;
	r->head = (r->head + 1) % r->cap;
}

static void read_file(const char *path, const char *sandbox_id, time_t since, struct ring *ring)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	while ((n = getline(&line, &cap, f)) > 0) {
		/* A line without its ending is torn (a crash mid-write, or one being written). */
		if (line[n - 1] != '\n')
			break;
		if (sandbox_id && !strstr(line, sandbox_id))
			continue;
		json_t *o = json_loadb(line, (size_t)n, 0, NULL);
		if (!json_is_object(o)) {
			json_decref(o);
			continue;
		}
		const char *sid = json_string_value(json_object_get(o, "sandbox"));
		const char *tt = json_string_value(json_object_get(o, "time"));
		time_t t = 0;
		if ((sandbox_id && (!sid || strcmp(sid, sandbox_id))) ||
		    (since && (!tt || celld_parse_time(tt, &t) < 0 || t < since))) {
			json_decref(o);
			continue;
		}
		ring_push(ring, o);
	}
	free(line);
	fclose(f);
}

/* The records of one log (rotated files oldest first, then the live one), the last
 * `limit` of them, into *out (oldest first). */
static int read_log(const char *dir, const char *name, const char *sandbox_id, time_t since,
		    size_t limit, json_t **out, struct cell_error *err)
{
	*out = NULL;
	struct ring ring = {.v = calloc(limit, sizeof(json_t *)), .cap = limit};
	json_t *arr = json_array();
	if (!ring.v || !arr) {
		free(ring.v);
		json_decref(arr);
		return cell_err(err, ENOMEM, "reading the audit log");
	}
	char path[4096];
	/* Oldest first: .AUDIT_KEEP … .1, then the live file. A rotation while reading may
	 * show a record twice or skip some: the reader of an audit trail asks again. */
	for (int i = AUDIT_KEEP; i >= 0; i--) {
		if (i)
			snprintf(path, sizeof(path), "%s/%s.%d", dir, name, i);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, name);
		read_file(path, sandbox_id, since, &ring);
	}
	int r = 0;
	for (size_t i = 0; i < ring.n; i++) {
		json_t *o = ring.v[(ring.head + i) % ring.cap];
		if (r == 0 && json_array_append(arr, o) < 0)
			r = cell_err(err, ENOMEM, "reading the audit log");
		json_decref(o);
	}
	free(ring.v);
	if (r < 0) {
		json_decref(arr);
		return r;
	}
	*out = arr;
	return 0;
}

int audit_record_cmp(json_t *a, json_t *b)
{
	const char *ta = json_string_value(json_object_get(a, "time")),
		   *tb = json_string_value(json_object_get(b, "time"));
	/* celld writes one format (audit_time_now): its text sorts as its time does. */
	int c = strcmp(ta ? ta : "", tb ? tb : "");
	if (c)
		return c < 0 ? -1 : 1;
	json_int_t sa = json_integer_value(json_object_get(a, "seq")),
		   sb = json_integer_value(json_object_get(b, "seq"));
	return sa < sb ? -1 : sa > sb;
}

json_t *audit_merge(json_t *a, json_t *b, size_t limit)
{
	size_t na = json_array_size(a), nb = json_array_size(b), i = 0, j = 0;
	size_t skip = na + nb > limit ? na + nb - limit : 0;
	json_t *out = json_array();
	while (out && (i < na || j < nb)) {
		json_t *x;
		if (j >= nb ||
		    (i < na && audit_record_cmp(json_array_get(a, i), json_array_get(b, j)) <= 0))
			x = json_array_get(a, i++);
		else
			x = json_array_get(b, j++);
		if (skip) {
			skip--;
			continue;
		}
		if (json_array_append(out, x) < 0) {
			json_decref(out);
			out = NULL;
		}
	}
	return out;
}

int audit_read(const char *dir, const char *sandbox_id, time_t since, size_t limit, json_t **out,
	       struct cell_error *err)
{
	*out = NULL;
	if (!limit || limit > AUDIT_READ_LIMIT_MAX)
		limit = AUDIT_READ_LIMIT_MAX;
	/* What the budget dropped is told before anyone reads the trail. */
	if (lg.dir && !strcmp(dir, lg.dir))
		audit_flush_drops();
	json_t *sec = NULL, *rest = NULL;
	int r = read_log(dir, AUDIT_SECURITY_FILE, sandbox_id, since, limit, &sec, err);
	if (r == 0)
		r = read_log(dir, AUDIT_FILE, sandbox_id, since, limit, &rest, err);
	json_t *all = r == 0 ? audit_merge(sec, rest, limit) : NULL;
	json_decref(sec);
	json_decref(rest);
	if (r < 0)
		return r;
	if (!all)
		return cell_err(err, ENOMEM, "reading the audit log");
	*out = all;
	return 0;
}
