/* exchange_probe: a static helper of it_held, run in the background inside a sandbox. It
 * swaps two names as fast as it can with renameat2(RENAME_EXCHANGE) — a directory and a
 * symlink to a host path — so that a path resolved while it runs may meet either, at any
 * component and at any moment. It runs until killed.
 *
 *   exchange_probe A B
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <linux/fs.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: exchange_probe A B\n");
		return 2;
	}
	for (unsigned long n = 0;; n++)
		if (syscall(SYS_renameat2, AT_FDCWD, argv[1], AT_FDCWD, argv[2], RENAME_EXCHANGE) <
		    0) {
			perror("renameat2");
			return 1;
		}
}
