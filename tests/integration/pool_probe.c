/* pool_probe: a static helper run inside a sandbox by it_hardening. It takes as much of one
 * of the kernel's per-user pools (include/cell/pool.h) as the kernel gives, says how
 * much, and holds it:
 *
 *   pool_probe inotify|timers|mqueue|ptys HOLD_SECONDS [MAX]
 *
 * It stops at the first refusal (or after MAX, LIMIT by default), prints "took N errno
 * NAME" (NAME as strerrorname_np, "none" when it stopped at MAX) and holds everything for
 * HOLD_SECONDS before it exits. */
#include <stdlib.h>

#include "../../include/cell/pool.h"

#define LIMIT 200000

int main(int argc, char **argv)
{
	enum pool p = argc == 3 || argc == 4 ? pool_named(argv[1]) : POOL_N;
	if (p == POOL_N) {
		fprintf(stderr,
			"usage: pool_probe inotify|timers|mqueue|ptys HOLD_SECONDS [MAX]\n");
		return 2;
	}
	int why;
	long n = pool_take_all(p, argc == 4 ? atol(argv[3]) : LIMIT, &why);
	printf("took %ld errno %s\n", n, why ? strerrorname_np(why) : "none");
	fflush(stdout);
	sleep((unsigned)atoi(argv[2]));
	return 0;
}
