/* Denied calls of sandboxes created with cell.seccompLog: their filter turns each denial into
 * a user notification, and this one thread (epoll over every listener) answers it with the
 * errno the profile's rule gives, records {time, pid, syscall, arch} in a bounded per-sandbox
 * ring and logs it (rate-limited).
 *
 * A notification is only ever answered with an error, never "continue": the call was
 * denied by the filter, and the answer cannot be swayed by anything the sandbox controls
 * (nothing is read from its memory, so there is no time-of-check race to win). A listener
 * lives only in celld: after a celld restart it is gone, and the kernel then fails those
 * calls with ENOSYS, unlogged (still denied). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/seccomp.h>

#include "cell/cleanup.h"
#include "cell/log.h"
#include "cell/seccomp.h"
#include "events.h"
#include "seccomp_log.h"
#include "seccomp_policy.h"
#include "cell/id.h"
#include "fields.h"
#include "timefmt.h"

#define RING_SIZE	256
#define LOG_WINDOW_S	10 /* at most LOG_PER_WINDOW log lines per sandbox per window */
#define LOG_PER_WINDOW	20
#define X32_SYSCALL_BIT 0x40000000u

struct denial {
	int64_t ms;
	pid_t pid;
	int nr;
	uint32_t arch;
	int errnum;
};

struct watch {
	char id[CELL_ID_MAX + 1];
	uint64_t key; /* in the epoll event: an event that outlives its watch finds nothing */
	int fd;	      /* the listener; -1 once every process of the sandbox is gone */
	const struct cell_seccomp_profile *profile;
	struct denial ring[RING_SIZE];
	size_t head, n;
	uint64_t denied;
	time_t window;
	unsigned logged, suppressed;
	struct watch *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct watch *watches;
static uint64_t next_key = 1;
static int epfd = -1;
static struct seccomp_notif_sizes sizes;

static struct watch *find_locked(const char *id, struct watch ***link)
{
	for (struct watch **w = &watches; *w; w = &(*w)->next)
		if (!strcmp((*w)->id, id)) {
			if (link)
				*link = w;
			return *w;
		}
	return NULL;
}

static void close_listener_locked(struct watch *w)
{
	if (w->fd < 0)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, w->fd, NULL);
	close(w->fd);
	w->fd = -1;
}

int seccomp_log_attach(const char *id, const char *profile, int listener, struct cell_error *err)
{
	_cleanup_close_ int fd = listener;
	const struct cell_seccomp_profile *p = seccomp_policy_profile(profile);
	if (!p)
		return cell_err_msg(err, ENOENT, "seccomp profile '%s' is not loaded", profile);
	if (epfd < 0)
		return cell_err_msg(err, EBADF, "the seccomp log is not running");
	pthread_mutex_lock(&lock);
	struct watch *w = find_locked(id, NULL);
	if (!w && (w = calloc(1, sizeof(*w)))) {
		snprintf(w->id, sizeof(w->id), "%s", id);
		w->fd = -1;
		w->next = watches;
		watches = w;
	}
	int r = 0;
	if (!w) {
		r = cell_err(err, ENOMEM, "seccomp log of sandbox %s", id);
	} else {
		close_listener_locked(w); /* a start again: the old processes are gone */
		w->profile = p;
		w->key = next_key++;
		struct epoll_event ev = {.events = EPOLLIN, .data.u64 = w->key};
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0)
			r = cell_err(err, errno, "watching the seccomp listener of sandbox %s", id);
		else
			w->fd = move_fd(fd);
	}
	pthread_mutex_unlock(&lock);
	return r;
}

void seccomp_log_detach(const char *id)
{
	struct watch **link;
	pthread_mutex_lock(&lock);
	struct watch *w = find_locked(id, &link);
	if (w) {
		close_listener_locked(w);
		*link = w->next;
	}
	pthread_mutex_unlock(&lock);
	free(w);
}

static const char *errno_name(int e)
{
	const char *s = strerrorname_np(e);
	return s ? s : "E?";
}

/* x32 calls reach the kernel as x86_64 ones with the x32 bit in the number. */
static const char *arch_of(const struct denial *d)
{
	if (d->arch == AUDIT_ARCH_X86_64 && ((unsigned)d->nr & X32_SYSCALL_BIT))
		return "x32";
	return cell_seccomp_arch_name(d->arch);
}

/* A denial the log wrote a line for, reported as an event once the lock is released. */
struct said {
	bool set;
	char id[CELL_ID_MAX + 1];
	char syscall[64];
	char arch[16];
	char errname[24];
};

static void log_denial_locked(struct watch *w, const struct denial *d, struct said *said)
{
	time_t now = (time_t)(d->ms / 1000);
	if (now - w->window >= LOG_WINDOW_S) {
		if (w->suppressed)
			log_info("sandbox %s: %u more denied calls not logged", w->id,
				 w->suppressed);
		w->window = now;
		w->logged = 0;
		w->suppressed = 0;
	}
	if (w->logged >= LOG_PER_WINDOW) {
		w->suppressed++;
		return;
	}
	w->logged++;
	char name[64];
	cell_seccomp_syscall_name(d->arch, d->nr, name, sizeof(name));
	log_info("sandbox %s: seccomp denied %s (arch %s, pid %d) with %s", w->id, name, arch_of(d),
		 (int)d->pid, errno_name(d->errnum));
	said->set = true;
	snprintf(said->id, sizeof(said->id), "%s", w->id);
	snprintf(said->syscall, sizeof(said->syscall), "%s", name);
	snprintf(said->arch, sizeof(said->arch), "%s", arch_of(d));
	snprintf(said->errname, sizeof(said->errname), "%s", errno_name(d->errnum));
}

/* One pending notification: answer it with the profile's errno and record it. */
static void answer_locked(struct watch *w, struct seccomp_notif *req,
			  struct seccomp_notif_resp *resp, struct said *said)
{
	memset(req, 0, sizes.seccomp_notif);
	if (ioctl(w->fd, SECCOMP_IOCTL_NOTIF_RECV, req) < 0)
		return; /* ENOENT: the caller was killed before we got to it */
	int e = cell_seccomp_profile_errno(w->profile, req->data.arch, req->data.nr,
					   (const uint64_t *)req->data.args);
	/* The filter only notifies calls a rule denies; should the two ever disagree, the
	 * call is denied all the same. */
	if (e <= 0)
		e = EPERM;
	memset(resp, 0, sizes.seccomp_notif_resp);
	resp->id = req->id;
	resp->error = -e;
	/* A dead caller's pid may already be someone else's: record only live ones. */
	if (ioctl(w->fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req->id) < 0)
		return;
	if (ioctl(w->fd, SECCOMP_IOCTL_NOTIF_SEND, resp) < 0)
		return;
	struct denial *d = &w->ring[w->head];
	*d = (struct denial){.ms = celld_now_ms(),
			     .pid = (pid_t)req->pid,
			     .nr = req->data.nr,
			     .arch = req->data.arch,
			     .errnum = e};
	w->head = (w->head + 1) % RING_SIZE;
	if (w->n < RING_SIZE)
		w->n++;
	w->denied++;
	log_denial_locked(w, d, said);
}

static void handle_event(const struct epoll_event *ev, struct seccomp_notif *req,
			 struct seccomp_notif_resp *resp)
{
	struct said said = {0};
	pthread_mutex_lock(&lock);
	struct watch *w = watches;
	while (w && w->key != ev->data.u64)
		w = w->next;
	if (w && w->fd >= 0) {
		if (ev->events & EPOLLIN)
			answer_locked(w, req, resp, &said);
		else if (ev->events & (EPOLLHUP | EPOLLERR))
			close_listener_locked(w); /* no process of the filter is left */
	}
	pthread_mutex_unlock(&lock);
	/* Sampled as the log lines are; outside the lock (events take their own). */
	if (said.set)
		events_emit(said.id, "seccomp.denied",
			    json_pack("{s:s, s:s, s:s}", "syscall", said.syscall, "arch", said.arch,
				      "errno", said.errname));
}

static void *log_thread(void *arg)
{
	(void)arg;
	struct seccomp_notif *req = calloc(1, sizes.seccomp_notif);
	struct seccomp_notif_resp *resp = calloc(1, sizes.seccomp_notif_resp);
	if (!req || !resp) {
		log_error("seccomp log: out of memory; logged sandboxes get ENOSYS");
		return NULL;
	}
	struct epoll_event evs[16];
	for (;;) {
		int n = epoll_wait(epfd, evs, CELL_ARRAY_SIZE(evs), -1);
		if (n < 0 && errno != EINTR)
			log_error("seccomp log: %s", strerror(errno));
		for (int i = 0; i < n; i++)
			handle_event(&evs[i], req, resp);
	}
	return NULL;
}

int seccomp_log_start(struct cell_error *err)
{
	if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) < 0)
		return cell_err(err, errno, "seccomp notification sizes");
	/* The kernel writes its own sizes; never hand it a smaller buffer than ours. */
	if (sizes.seccomp_notif < sizeof(struct seccomp_notif))
		sizes.seccomp_notif = sizeof(struct seccomp_notif);
	if (sizes.seccomp_notif_resp < sizeof(struct seccomp_notif_resp))
		sizes.seccomp_notif_resp = sizeof(struct seccomp_notif_resp);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0)
		return cell_err(err, errno, "epoll for the seccomp log");
	pthread_t t;
	int r = pthread_create(&t, NULL, log_thread, NULL);
	if (r)
		return cell_err(err, r, "starting the seccomp log thread");
	pthread_detach(t);
	return 0;
}

static json_t *denial_json(const struct denial *d)
{
	char name[64];
	cell_seccomp_syscall_name(d->arch, d->nr, name, sizeof(name));
	return json_pack("{s:o, s:I, s:i, s:s, s:s, s:s}", "time",
			 celld_time_json((time_t)(d->ms / 1000)), "timestampMs", (json_int_t)d->ms,
			 "pid", (int)d->pid, "syscall", name, "arch", arch_of(d), "errno",
			 errno_name(d->errnum));
}

json_t *seccomp_log_json(const char *id, const char *profile, bool log)
{
	json_t *o = json_pack("{s:s?, s:b}", "profile", profile[0] ? profile : NULL, "log", log);
	if (!o || !log)
		return o;
	json_t *recent = json_array();
	pthread_mutex_lock(&lock);
	struct watch *w = find_locked(id, NULL);
	size_t n = w ? w->n : 0;
	for (size_t i = 0; i < n; i++)
		json_array_append_new(
		    recent, denial_json(&w->ring[(w->head + RING_SIZE - n + i) % RING_SIZE]));
	json_object_set_new(o, "denied", json_integer(w ? (json_int_t)w->denied : 0));
	/* false after a celld restart (the listener died with the old celld) or once every
	 * process of the sandbox has exited. */
	json_object_set_new(o, "listening", json_boolean(w && w->fd >= 0));
	pthread_mutex_unlock(&lock);
	json_object_set_new(o, "recent", recent);
	return o;
}
