/* Host-wide uid range reservations: one file per slot in a directory every celld on the
 * host shares (default /run/cell/uid-ranges, 0700 root), so two celld side by side (tests,
 * a bench, two state dirs) never give the same host uid range to two live sandboxes. Two
 * sandboxes sharing a range could signal, ptrace and read each other's files as "the same
 * user" on the host: the range is the sandbox's identity.
 *
 * <dir>/<slot> holds "<absolute state dir>\n<sandbox id>\n". Its owner keeps it open with
 * an exclusive flock for as long as the sandbox exists in that celld, so a running celld's
 * reservations are live without anything else. A file nobody holds (its celld was killed
 * or restarted) is live while <state dir>/sandboxes/<id>/state.json exists and records
 * that slot's uidBase; otherwise it is stale and may be reclaimed.
 *
 * Every scan, creation and reclaim runs under an exclusive flock on the directory itself
 * (each caller opens its own description of it, so threads of one celld exclude each
 * other too): a reserver creates its file and takes the file's flock before it lets go of
 * the directory, so nobody can see a fresh reservation unheld and call it stale, and two
 * celld racing over one stale slot reclaim it one after the other — the second finds it
 * held. Releasing needs no directory lock: only the holder of a file's flock removes it,
 * and nobody reclaims a held file. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/id.h"
#include "cell/runtime.h"
#include "config.h"
#include "uidrange.h"
#include "fields.h"

#define LOCK_WAIT_MS   10000 /* a stuck celld holding the dir lock fails creates, bounded */
#define CONTENT_MAX    (PATH_MAX + CELL_ID_MAX + 4)
#define STATE_JSON_MAX (1u << 20) /* store.c's limit */
#define RECLAIM_TMP    ".reclaim"
/* The sandboxes' ranges, and one more just past them: the on-disk ids of named volumes
 * (volstore.h), which no account may have either. */
#define UID_SPACE_END ((uint64_t)CELLD_UID_FIRST + ((uint64_t)CELLD_SLOTS + 1) * CELL_UID_RANGE)

struct held {
	int fd; /* open, flocked reservation file; -1 when the slot is not ours */
	char id[CELL_ID_MAX + 1];
};

static struct {
	char *dir;
	int dirfd;
	pthread_mutex_t lock; /* guards held[] (never held while waiting on another process) */
	/* Queues this celld's own reservations: one thread at a time polls the dir's flock,
	 * the rest block here (woken in turn, not polling against each other, so a burst of
	 * creates never starves one of them past LOCK_WAIT_MS). Taken before the flock. */
	pthread_mutex_t reserving;
	struct held *held; /* CELLD_SLOTS entries */
} ur = {.dirfd = -1, .lock = PTHREAD_MUTEX_INITIALIZER, .reserving = PTHREAD_MUTEX_INITIALIZER};

/* ---- host users ---- */

/* "never overlapping host users": an id of /etc/passwd or /etc/group inside the range space
 * would be shared with some sandbox's users (that account could then kill, ptrace or read
 * the files of the sandbox's processes, and they its files). */
static int check_id_file(const char *path, const int *id_fields, size_t n_id_fields,
			 struct cell_error *err)
{
	_cleanup_fclose_ FILE *f = fopen(path, "re");
	if (!f)
		return errno == ENOENT ? 0 : cell_err(err, errno, "reading %s", path);
	_cleanup_free_ char *line = NULL;
	size_t cap = 0;
	unsigned lineno = 0;
	while (getline(&line, &cap, f) >= 0) {
		lineno++;
		line[strcspn(line, "\n")] = '\0';
		char *fields[8] = {0}, *rest = line;
		for (size_t i = 0; i < CELL_ARRAY_SIZE(fields) && rest; i++)
			fields[i] = strsep(&rest, ":");
		for (size_t i = 0; i < n_id_fields; i++) {
			const char *v = fields[id_fields[i]];
			char *end;
			errno = 0;
			unsigned long long id = v ? strtoull(v, &end, 10) : 0;
			if (!v || errno || end == v || *end || *v == '-')
				continue;
			if (id >= CELLD_UID_FIRST && id < UID_SPACE_END)
				return cell_err_msg(
				    err, EEXIST,
				    "%s line %u: %s has id %llu, inside the sandbox "
				    "uid range space "
				    "%u..%llu, so some sandbox would share it; give "
				    "that account an "
				    "id below %u",
				    path, lineno, fields[0], id, CELLD_UID_FIRST,
				    (unsigned long long)UID_SPACE_END - 1, CELLD_UID_FIRST);
		}
	}
	if (ferror(f))
		return cell_err(err, EIO, "reading %s", path);
	return 0;
}

/* ---- setup ---- */

static int open_dir(const char *dir, struct cell_error *err)
{
	if (dir[0] != '/')
		return cell_err(err, EINVAL, "--uid-ranges-dir %s must be absolute", dir);
	_cleanup_free_ char *parent = strdup(dir);
	if (!parent)
		return cell_err(err, ENOMEM, "uid ranges dir");
	char *slash = strrchr(parent, '/');
	if (slash != parent) {
		*slash = '\0';
		int r = cell_mkdir_p(parent, 0755, err);
		if (r < 0)
			return r;
	}
	if (mkdir(dir, 0700) < 0 && errno != EEXIST)
		return cell_err(err, errno, "creating %s", dir);
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", dir);
	struct stat st;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return cell_err(err, errno, "stat %s", dir);
	}
	/* Anyone else able to write here could plant reservations naming live-looking
	 * sandboxes (exhausting the space) or remove ours (making two sandboxes share). */
	if (st.st_uid != 0) {
		close(fd);
		return cell_err_msg(err, EPERM, "%s is owned by uid %u, not root", dir,
				    (unsigned)st.st_uid);
	}
	if ((st.st_mode & 07777) != 0700 && fchmod(fd, 0700) < 0) {
		close(fd);
		return cell_err(err, errno, "chmod 0700 %s", dir);
	}
	return fd;
}

int uidrange_init(const char *dir, struct cell_error *err)
{
	static const int passwd_ids[] = {2, 3}, group_ids[] = {2}; /* uid, gid; gid */
	int r = check_id_file("/etc/passwd", passwd_ids, 2, err);
	if (r == 0)
		r = check_id_file("/etc/group", group_ids, 1, err);
	if (r < 0)
		return r;
	if (!dir)
		dir = CELLD_UID_RANGES_DIR;
	ur.held = calloc(CELLD_SLOTS, sizeof(*ur.held));
	ur.dir = strdup(dir);
	if (!ur.held || !ur.dir)
		return cell_err(err, ENOMEM, "uid range table");
	for (unsigned i = 0; i < CELLD_SLOTS; i++)
		ur.held[i].fd = -1;
	int fd = open_dir(dir, err);
	if (fd < 0)
		return fd;
	ur.dirfd = fd;
	return 0;
}

const char *uidrange_dir(void)
{
	return ur.dir;
}

/* ---- the directory lock ---- */

static void sleep_ms(long ms)
{
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
	nanosleep(&ts, NULL);
}

/* A new open file description of the dir, flocked exclusively; close it to unlock. */
static int dir_lock(struct cell_error *err)
{
	int fd = openat(ur.dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return cell_err(err, errno, "opening %s", ur.dir);
	int64_t waited = 0;
	long pause = 1;
	while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		if (errno != EWOULDBLOCK && errno != EINTR) {
			int e = errno;
			close(fd);
			return cell_err(err, e, "locking %s", ur.dir);
		}
		if (waited >= LOCK_WAIT_MS) {
			close(fd);
			return cell_err_msg(err, ETIMEDOUT,
					    "%s stayed locked by another process for %d ms", ur.dir,
					    LOCK_WAIT_MS);
		}
		sleep_ms(pause);
		waited += pause;
		if (pause < 16)
			pause *= 2;
	}
	return fd;
}

/* ---- reservation files ---- */

static void slot_name(int slot, char buf[16])
{
	snprintf(buf, 16, "%d", slot);
}

static bool held_by_us(int slot, const char *id, bool *same_id)
{
	pthread_mutex_lock(&ur.lock);
	bool held = ur.held[slot].fd >= 0;
	if (same_id)
		*same_id = held && id && !strcmp(ur.held[slot].id, id);
	pthread_mutex_unlock(&ur.lock);
	return held;
}

static void set_held(int slot, const char *id, int fd)
{
	pthread_mutex_lock(&ur.lock);
	ur.held[slot].fd = fd;
	snprintf(ur.held[slot].id, sizeof(ur.held[slot].id), "%s", id);
	pthread_mutex_unlock(&ur.lock);
}

static int write_content(int fd, const char *id, const char *name, struct cell_error *err)
{
	_cleanup_free_ char *text = NULL;
	int len = asprintf(&text, "%s\n%s\n", celld.state_dir, id);
	if (len < 0)
		return cell_err(err, ENOMEM, "reservation %s/%s", ur.dir, name);
	if (pwrite(fd, text, (size_t)len, 0) != len)
		return cell_err(err, errno ? errno : EIO, "writing %s/%s", ur.dir, name);
	return 0;
}

/* A new file under `name` (O_EXCL), flocked and filled. fd, -EEXIST, or -errno. */
static int create_file(const char *name, const char *id, struct cell_error *err)
{
	int fd = openat(ur.dirfd, name, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return errno == EEXIST ? -EEXIST
				       : cell_err(err, errno, "creating %s/%s", ur.dir, name);
	/* Nobody else has it open: the lock cannot fail short of a kernel error. */
	int r = flock(fd, LOCK_EX | LOCK_NB) < 0
		    ? cell_err(err, errno, "locking %s/%s", ur.dir, name)
		    : write_content(fd, id, name, err);
	if (r < 0) {
		unlinkat(ur.dirfd, name, 0);
		close(fd);
		return r;
	}
	return fd;
}

struct owner {
	char dir[PATH_MAX];
	char id[CELL_ID_MAX + 1];
	bool valid;
};

static void parse_owner(int fd, struct owner *o)
{
	char buf[CONTENT_MAX + 1];
	memset(o, 0, sizeof(*o));
	ssize_t n = pread(fd, buf, CONTENT_MAX, 0);
	if (n <= 0)
		return;
	buf[n] = '\0';
	char *nl1 = strchr(buf, '\n');
	char *nl2 = nl1 ? strchr(nl1 + 1, '\n') : NULL;
	if (!nl2 || nl2[1] || (size_t)n != strlen(buf))
		return;
	*nl1 = *nl2 = '\0';
	if (buf[0] != '/' || strlen(buf) >= sizeof(o->dir) || !cell_id_valid(nl1 + 1))
		return;
	snprintf(o->dir, sizeof(o->dir), "%s", buf);
	snprintf(o->id, sizeof(o->id), "%s", nl1 + 1);
	o->valid = true;
}

static bool owner_is(const struct owner *o, const char *id)
{
	return o->valid && !strcmp(o->dir, celld.state_dir) && !strcmp(o->id, id);
}

/* An unheld file is still live while its owner's state.json records this slot's range.
 * Only a missing state.json, or one with another uidBase, makes it stale: when the file
 * cannot be judged (unreadable, not JSON) the range stays reserved, because a leaked slot
 * costs one range but a shared one costs isolation. A malformed reservation (a celld died
 * between creating and filling it) names nobody and is stale. */
static bool owner_live(const struct owner *o, int slot)
{
	if (!o->valid)
		return false;
	_cleanup_free_ char *path = NULL;
	if (asprintf(&path, "%s/sandboxes/%s/state.json", o->dir, o->id) < 0)
		return true;
	_cleanup_free_ char *text = NULL;
	int r = cell_read_file_at(AT_FDCWD, path, STATE_JSON_MAX, &text, NULL, NULL);
	if (r == -ENOENT || r == -ENOTDIR)
		return false;
	if (r < 0)
		return true;
	json_t *j = json_loads(text, 0, NULL);
	if (!json_is_object(j)) {
		json_decref(j);
		return true;
	}
	json_t *base = json_object_get(j, "uidBase");
	bool live =
	    json_is_integer(base) && json_integer_value(base) == (json_int_t)uidrange_base(slot);
	json_decref(j);
	return live;
}

/* Replace the stale file `name` (held open and flocked as old_fd) with a fresh one of ours:
 * the fresh file is complete and flocked before it is renamed over the old one, so the name
 * never appears free or unheld. Returns the new fd or -errno. */
static int reclaim(const char *name, int old_fd, const char *id, struct cell_error *err)
{
	struct stat a, b;
	if (fstat(old_fd, &a) < 0 || fstatat(ur.dirfd, name, &b, AT_SYMLINK_NOFOLLOW) < 0 ||
	    a.st_ino != b.st_ino || a.st_dev != b.st_dev)
		return cell_err_msg(err, EAGAIN, "%s/%s changed while it was being reclaimed",
				    ur.dir, name);
	unlinkat(ur.dirfd, RECLAIM_TMP, 0); /* left by a celld that died here */
	int fd = create_file(RECLAIM_TMP, id, err);
	if (fd < 0)
		return fd == -EEXIST ? cell_err(err, EEXIST, "creating %s/%s", ur.dir, RECLAIM_TMP)
				     : fd;
	if (renameat(ur.dirfd, RECLAIM_TMP, ur.dirfd, name) < 0) {
		int e = errno;
		unlinkat(ur.dirfd, RECLAIM_TMP, 0);
		close(fd);
		return cell_err(err, e, "renaming over %s/%s", ur.dir, name);
	}
	return fd;
}

#define ADOPT_WAIT_MS 5000

enum take { TAKE_NEW, TAKE_ADOPT };

/* With the dir lock held: make slot ours for id. 0 (held now), 1 (someone else's live
 * reservation; described in other when given), -errno. */
static int take_slot(int slot, const char *id, enum take how, struct owner *other,
		     struct cell_error *err)
{
	char name[16];
	slot_name(slot, name);
	for (int attempt = 0; attempt < 3; attempt++) {
		int fd = create_file(name, id, err);
		if (fd >= 0) {
			set_held(slot, id, fd);
			return 0;
		}
		if (fd != -EEXIST)
			return fd;
		_cleanup_close_ int old = openat(ur.dirfd, name, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
		if (old < 0) {
			if (errno == ENOENT) /* released meanwhile (releases take no dir lock) */
				continue;
			return cell_err(err, errno, "opening %s/%s", ur.dir, name);
		}
		struct owner o;
		if (flock(old, LOCK_EX | LOCK_NB) < 0) {
			if (errno != EWOULDBLOCK)
				return cell_err(err, errno, "locking %s/%s", ur.dir, name);
			/* Held: a running celld's reservation (or a second celld on our own
			 * state dir, which is no less a conflict). */
			if (other)
				parse_owner(old, other);
			return 1;
		}
		parse_owner(old, &o);
		if (how == TAKE_ADOPT && owner_is(&o, id)) {
			/* Our own reservation, left unheld by the celld before this one. */
			set_held(slot, id, move_fd(old));
			return 0;
		}
		if (owner_live(&o, slot)) {
			if (other)
				*other = o;
			return 1;
		}
		int nfd = reclaim(name, old, id, err);
		if (nfd < 0)
			return nfd;
		log_info("uid range slot %d: reclaimed a stale reservation (%s%s%s)", slot,
			 o.valid ? o.dir : "malformed", o.valid ? " sandbox " : "",
			 o.valid ? o.id : "");
		set_held(slot, id, nfd);
		return 0;
	}
	return cell_err_msg(err, EAGAIN, "%s/%s keeps changing", ur.dir, name);
}

static int reserve_queued(const char *id, int *slot, struct cell_error *err)
{
	_cleanup_close_ int lock = dir_lock(err);
	if (lock < 0)
		return lock;
	for (int s = 0; s < (int)CELLD_SLOTS; s++) {
		if (held_by_us(s, NULL, NULL))
			continue;
		int r = take_slot(s, id, TAKE_NEW, NULL, err);
		if (r < 0)
			return r;
		if (r == 0) {
			*slot = s;
			return 0;
		}
	}
	return cell_err_msg(err, ENOSPC, "no free uid range: all %u slots of %s are reserved",
			    CELLD_SLOTS, ur.dir);
}

int uidrange_reserve(const char *id, int *slot, struct cell_error *err)
{
	*slot = -1;
	/* The queue counts against the same bound as the flock: a stuck holder fails a burst
	 * of creates within LOCK_WAIT_MS, not one after another. */
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += LOCK_WAIT_MS / 1000;
	int e = pthread_mutex_timedlock(&ur.reserving, &deadline);
	if (e)
		return cell_err_msg(err, e == ETIMEDOUT ? ETIMEDOUT : e,
				    "%s: other reservations of this celld kept it busy for %d ms",
				    ur.dir, LOCK_WAIT_MS);
	int r = reserve_queued(id, slot, err);
	pthread_mutex_unlock(&ur.reserving);
	return r;
}

int uidrange_adopt(const char *id, int slot, struct cell_error *err)
{
	if (slot < 0 || (unsigned)slot >= CELLD_SLOTS)
		return cell_err_msg(err, EINVAL, "uid slot %d is out of range", slot);
	bool same = false;
	if (held_by_us(slot, id, &same)) {
		if (same)
			return 0;
		pthread_mutex_lock(&ur.lock);
		char holder[CELL_ID_MAX + 1];
		snprintf(holder, sizeof(holder), "%s", ur.held[slot].id);
		pthread_mutex_unlock(&ur.lock);
		return cell_err_msg(
		    err, EBUSY,
		    "uid range slot %d (host uids %u..%u) is already held by sandbox "
		    "%s of this celld (%s)",
		    slot, uidrange_base(slot), uidrange_base(slot) + CELL_UID_RANGE - 1, holder,
		    celld.state_dir);
	}
	/* Our own file, still flocked: the celld before us may be a killed process whose
	 * threads are still exiting (the flock goes with its last thread). Only one celld runs
	 * per state dir (celld.lock), so wait for it a bounded while, dir lock released. */
	struct owner other = {0};
	int r;
	for (int waited = 0;; waited += 10) {
		_cleanup_close_ int lock = dir_lock(err);
		if (lock < 0)
			return lock;
		memset(&other, 0, sizeof(other));
		r = take_slot(slot, id, TAKE_ADOPT, &other, err);
		if (r != 1 || !owner_is(&other, id) || waited >= ADOPT_WAIT_MS)
			break;
		close(move_fd(lock));
		usleep(10000);
	}
	if (r != 1)
		return r;
	if (owner_is(&other, id))
		/* Held, and naming this very sandbox: a second celld runs on our state dir and
		 * owns it. Not ours to fail or stop. */
		return cell_err_msg(
		    err, EALREADY,
		    "uid range slot %d of sandbox %s is held by another celld running "
		    "on %s",
		    slot, id, celld.state_dir);
	return cell_err_msg(
	    err, EBUSY,
	    "uid range slot %d (host uids %u..%u) of sandbox %s (%s) is held by %s%s%s "
	    "(%s/%d)",
	    slot, uidrange_base(slot), uidrange_base(slot) + CELL_UID_RANGE - 1, id,
	    celld.state_dir, other.valid ? "sandbox " : "another celld",
	    other.valid ? other.id : "", other.valid ? other.dir : "", ur.dir, slot);
}

void uidrange_release(const char *id, int slot)
{
	if (slot < 0 || (unsigned)slot >= CELLD_SLOTS || !ur.held)
		return;
	pthread_mutex_lock(&ur.lock);
	int fd = -1;
	if (ur.held[slot].fd >= 0 && !strcmp(ur.held[slot].id, id)) {
		fd = ur.held[slot].fd;
		ur.held[slot].fd = -1;
		ur.held[slot].id[0] = '\0';
	}
	pthread_mutex_unlock(&ur.lock);
	if (fd < 0)
		return;
	char name[16];
	slot_name(slot, name);
	/* Unlinked while still flocked, and only when the name is still our file: nobody
	 * reclaims a held file, so it cannot have been replaced; checked all the same. */
	struct stat a, b;
	if (fstat(fd, &a) == 0 && fstatat(ur.dirfd, name, &b, AT_SYMLINK_NOFOLLOW) == 0 &&
	    a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
		if (unlinkat(ur.dirfd, name, 0) < 0)
			log_warn("releasing %s/%s: %s", ur.dir, name, strerror(errno));
	} else {
		log_warn("releasing uid range slot %d of sandbox %s: %s/%s is no longer ours", slot,
			 id, ur.dir, name);
	}
	close(fd);
}
