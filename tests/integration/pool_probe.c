/* pool_probe: a static helper run inside a sandbox by it_hardening. It takes as much of one
 * of the kernel's per-user pools as the kernel gives, says how much, and holds it:
 *
 *   pool_probe inotify|timers|mqueue|ptys HOLD_SECONDS [MAX]
 *
 * inotify: inotify instances (max_user_instances, charged per user up the namespaces)
 * timers:  POSIX timers, each a preallocated queued signal (RLIMIT_SIGPENDING's count)
 * mqueue:  POSIX message queues of the largest size allowed without privilege
 *          (RLIMIT_MSGQUEUE's bytes)
 * ptys:    terminals from /dev/ptmx (the devpts instance's max=, the host's spare pool)
 *
 * It stops at the first refusal (or after MAX, LIMIT by default), prints "took N errno NAME" (NAME
 * as strerrorname_np, "none" when it stopped at MAX) and holds everything for HOLD_SECONDS before
 * it exits. The file limit is raised to its hard limit first, so that fds are not what runs out. */
#include <errno.h>
#include <fcntl.h>
#include <mqueue.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define LIMIT 200000

static int take_inotify(long i)
{
	(void)i;
	return inotify_init1(IN_CLOEXEC) < 0 ? -errno : 0;
}

static int take_timer(long i)
{
	(void)i;
	timer_t t;
	struct sigevent ev = {.sigev_notify = SIGEV_SIGNAL, .sigev_signo = SIGRTMIN};
	return timer_create(CLOCK_MONOTONIC, &ev, &t) < 0 ? -errno : 0;
}

static int take_mqueue(long i)
{
	char name[64];
	snprintf(name, sizeof(name), "/pool_probe.%d.%ld", (int)getpid(), i);
	struct mq_attr attr = {.mq_maxmsg = 10, .mq_msgsize = 8192};
	mqd_t q = mq_open(name, O_RDWR | O_CREAT | O_EXCL, 0600, &attr);
	if (q == (mqd_t)-1)
		return -errno;
	mq_unlink(name); /* held by the descriptor alone */
	return 0;
}

static int take_pty(long i)
{
	(void)i;
	return open("/dev/ptmx", O_RDWR | O_NOCTTY | O_CLOEXEC) < 0 ? -errno : 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*take)(long i);
	} kinds[] = {{"inotify", take_inotify},
		     {"timers", take_timer},
		     {"mqueue", take_mqueue},
		     {"ptys", take_pty}};
	if (argc != 3 && argc != 4) {
		fprintf(stderr,
			"usage: pool_probe inotify|timers|mqueue|ptys HOLD_SECONDS [MAX]\n");
		return 2;
	}
	int (*take)(long) = NULL;
	for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++)
		if (!strcmp(argv[1], kinds[k].name))
			take = kinds[k].take;
	if (!take) {
		fprintf(stderr, "pool_probe: unknown kind %s\n", argv[1]);
		return 2;
	}
	struct rlimit nofile;
	if (getrlimit(RLIMIT_NOFILE, &nofile) == 0) {
		nofile.rlim_cur = nofile.rlim_max;
		setrlimit(RLIMIT_NOFILE, &nofile);
	}
	long max = argc == 4 ? atol(argv[3]) : LIMIT;
	long n = 0;
	int r = 0;
	while (n < max && (r = take(n)) == 0)
		n++;
	printf("took %ld errno %s\n", n, r ? strerrorname_np(-r) : "none");
	fflush(stdout);
	sleep((unsigned)atoi(argv[2]));
	return 0;
}
