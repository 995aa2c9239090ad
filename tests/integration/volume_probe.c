/* volume_probe: a static helper of it_volumes, run inside a sandbox and on the host.
 *
 *   volume_probe setcap PATH   give PATH the file capability cap_setuid+ep (a version 2
 *                              security.capability, what setcap(8) writes); prints "ok" or
 *                              the errno's name. From inside a user namespace the kernel
 *                              stores it as a version 3 set bound to the uid the sandbox's
 *                              root has on that filesystem: the test reads what landed.
 *   volume_probe euid          print the effective uid and gid ("euid egid"): planted as a
 *                              set-id file by the sandbox and run on the host by an
 *                              unprivileged user, it shows whom that file makes them.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#define VFS_CAP_REVISION_2	0x02000000u
#define VFS_CAP_FLAGS_EFFECTIVE 0x000001u
#define CAP_SETUID		7

struct vfs_cap_v2 {
	uint32_t magic_etc;
	struct {
		uint32_t permitted, inheritable;
	} data[2];
};

static int setcap(const char *path)
{
	struct vfs_cap_v2 cap = {.magic_etc = VFS_CAP_REVISION_2 | VFS_CAP_FLAGS_EFFECTIVE};
	cap.data[0].permitted = 1u << CAP_SETUID; /* little-endian, as every host cell runs on */
	if (setxattr(path, "security.capability", &cap, sizeof(cap), 0) < 0) {
		printf("%s\n", strerrorname_np(errno));
		return 1;
	}
	printf("ok\n");
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "setcap"))
		return setcap(argv[2]);
	if (argc == 2 && !strcmp(argv[1], "euid")) {
		printf("%u %u\n", (unsigned)geteuid(), (unsigned)getegid());
		return 0;
	}
	fprintf(stderr, "usage: volume_probe setcap PATH | volume_probe euid\n");
	return 2;
}
