/* The runtime's rtnetlink module (include/cell/netlink.h), as celld will use it for a
 * sandbox's network, in two network namespaces the test makes: A stands for the host, B for
 * a sandbox. Each is held by a child that unshared it (killed with the test, so the
 * namespaces, and every link in them, end with the test whatever happens). No packet leaves
 * them: only TEST-NET addresses, and only between A and B.
 *
 *   A: veth "cell0badf00d"  192.0.2.1/32, route 198.51.100.2/32 dev cell0badf00d scope link,
 *      203.0.113.1/32 on lo (an address B reaches only through its default route)
 *   B: "eth0" (the peer, made in B directly) 198.51.100.2/32 and no other route than
 *      default via 192.0.2.1 dev eth0 onlink (so every packet from B proves the onlink
 *      route: without RTNH_F_ONLINK the kernel refuses a gateway in no subnet of eth0's)
 * and then again with B's address in the point-to-point form (198.51.100.2/32 peer
 * 192.0.2.1), which also gives B a host route to the gateway.
 *
 * The suite runs under the harness like every integration suite (root, skips, the run's
 * ledger), although it asks its celld nothing: the module is runtime code, and this is
 * where root-only tests of it live. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/netlink.h"
#include "harness.h"

#define VETH "cell0badf00d"

/* ---- sockets made in a namespace (a socket keeps the namespace it was made in) ---- */

struct sock_job {
	int ns, type, fd, error;
};

static void *sock_thread(void *arg)
{
	struct sock_job *j = arg;
	if (setns(j->ns, CLONE_NEWNET) < 0) {
		j->error = errno;
		return NULL;
	}
	j->fd = socket(AF_INET, j->type | SOCK_CLOEXEC, 0);
	if (j->fd < 0)
		j->error = errno;
	return NULL;
}

static int socket_in(int ns, int type)
{
	struct sock_job j = {.ns = ns, .type = type, .fd = -1};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, sock_thread, &j), 0);
	pthread_join(th, NULL);
	ck_assert_msg(j.fd >= 0, "socket in a namespace: %s", strerror(j.error));
	struct timeval tv = {.tv_sec = 3};
	ck_assert_int_eq(setsockopt(j.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)), 0);
	return j.fd;
}

static struct in_addr ip(const char *s)
{
	struct in_addr a;
	ck_assert_int_eq(inet_pton(AF_INET, s, &a), 1);
	return a;
}

static struct sockaddr_in sin_of(const char *addr, uint16_t port)
{
	return (struct sockaddr_in){
	    .sin_family = AF_INET, .sin_port = htons(port), .sin_addr = ip(addr)};
}

static int udp_bound(int ns, const char *addr, uint16_t port)
{
	int fd = socket_in(ns, SOCK_DGRAM);
	struct sockaddr_in sa = sin_of(addr, port);
	ck_assert_msg(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "bind %s:%u: %s", addr,
		      port, strerror(errno));
	return fd;
}

/* A datagram from fd to addr:port arrives on to, from the address from. */
static void udp_exchange(int fd, int to, const char *addr, uint16_t port, const char *from,
			 const char *payload)
{
	struct sockaddr_in dst = sin_of(addr, port);
	ck_assert_msg(sendto(fd, payload, strlen(payload), 0, (struct sockaddr *)&dst,
			     sizeof(dst)) == (ssize_t)strlen(payload),
		      "send to %s: %s", addr, strerror(errno));
	char buf[64] = {0};
	struct sockaddr_in src;
	socklen_t slen = sizeof(src);
	ssize_t n = recvfrom(to, buf, sizeof(buf) - 1, 0, (struct sockaddr *)&src, &slen);
	ck_assert_msg(n >= 0, "nothing arrived at %s: %s", addr, strerror(errno));
	ck_assert_str_eq(buf, payload);
	char s[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &src.sin_addr, s, sizeof(s));
	ck_assert_str_eq(s, from);
}

/* An interface's flags and MTU as the namespace ns sees them (ioctl on a socket there). */
static void link_state(int ns, const char *name, short *flags, int *mtu)
{
	int fd = socket_in(ns, SOCK_DGRAM);
	struct ifreq ifr = {0};
	snprintf(ifr.ifr_name, sizeof(ifr.ifr_name), "%s", name);
	ck_assert_msg(ioctl(fd, SIOCGIFFLAGS, &ifr) == 0, "%s flags: %s", name, strerror(errno));
	*flags = ifr.ifr_flags;
	ck_assert_msg(ioctl(fd, SIOCGIFMTU, &ifr) == 0, "%s mtu: %s", name, strerror(errno));
	*mtu = ifr.ifr_mtu;
	close(fd);
}

/* Reads a sysctl of the namespace ns ("" when missing). */
struct read_job {
	int ns;
	const char *path;
	char value[32];
};

static void *read_thread(void *arg)
{
	struct read_job *j = arg;
	if (setns(j->ns, CLONE_NEWNET) < 0)
		return NULL;
	int fd = open(j->path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, j->value, sizeof(j->value) - 1);
	close(fd);
	if (n > 0)
		j->value[strcspn(j->value, "\n")] = '\0';
	return NULL;
}

static char *sysctl_in(int ns, const char *path)
{
	static struct read_job j;
	memset(&j, 0, sizeof(j));
	j.ns = ns;
	j.path = path;
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, read_thread, &j), 0);
	pthread_join(th, NULL);
	return j.value;
}

static void probe_veth(void)
{
	/* Checked before the feature is used: a kernel built without veth cannot run this. */
	if (h_kernel_config("CONFIG_VETH") == 'n')
		h_skip_host("kernel-veth", "the kernel has no veth driver (CONFIG_VETH unset)");
}

#define OK(call)                                                                                   \
	do {                                                                                       \
		struct cell_error err_ = {0};                                                      \
		int r_ = (call);                                                                   \
		ck_assert_msg(r_ >= 0, "%s: %d %s", #call, r_, err_.msg);                          \
	} while (0)
#define E (&err_)

/* The whole data path of one sandbox, made with the module; the caller has nl[0] in A and
 * nl[1] in B. */
static void configure(struct cell_nl *a, struct cell_nl *b, int ns_b)
{
	struct in_addr host = ip("192.0.2.1"), sb = ip("198.51.100.2");
	OK(cell_nl_veth_create(a, VETH, "eth0", ns_b, E));
	OK(cell_nl_link_set_up(a, VETH, true, E));
	OK(cell_nl_addr_add4(a, VETH, host, 32, NULL, E));
	OK(cell_nl_route_add4_dev(a, VETH, sb, 32, E));
	OK(cell_nl_link_set_up(b, "eth0", true, E));
	OK(cell_nl_addr_add4(b, "eth0", sb, 32, &host, E));
	OK(cell_nl_route_add4_default_onlink(b, "eth0", host, E));
}

START_TEST(veth_connects_two_namespaces)
{
	probe_veth();
	struct h_netns A, B;
	h_netns_hold(&A);
	h_netns_hold(&B);
	struct cell_nl a, b;
	OK(cell_nl_open(&a, A.fd, E));
	OK(cell_nl_open(&b, B.fd, E));

	char names[8][IFNAMSIZ];
	ck_assert_int_eq(cell_nl_link_list(&a, "cell", names, 8, NULL), 0);
	/* A fresh namespace has lo only, down. */
	ck_assert_int_eq(cell_nl_link_list(&b, "", names, 8, NULL), 1);
	ck_assert_str_eq(names[0], "lo");

	/* IPv6 off in the sandbox's namespace before its eth0 exists, as the header says;
	 * written there, not in A. */
	bool ipv6 = access("/proc/sys/net/ipv6", F_OK) == 0;
	if (ipv6) {
		OK(cell_net_sysctl(B.fd, "net/ipv6/conf/all/disable_ipv6", "1", E));
		OK(cell_net_sysctl(B.fd, "net/ipv6/conf/default/disable_ipv6", "1", E));
		ck_assert_str_eq(sysctl_in(B.fd, "/proc/sys/net/ipv6/conf/default/disable_ipv6"),
				 "1");
		ck_assert_str_eq(sysctl_in(A.fd, "/proc/sys/net/ipv6/conf/default/disable_ipv6"),
				 "0");
	}

	struct in_addr host = ip("192.0.2.1"), sb = ip("198.51.100.2");
	OK(cell_nl_veth_create(&a, VETH, "eth0", B.fd, E));
	int ia = 0, ib = 0;
	OK(ia = cell_nl_link_index(&a, VETH, E));
	OK(ib = cell_nl_link_index(&b, "eth0", E));
	ck_assert_int_gt(ia, 0);
	ck_assert_int_gt(ib, 0);
	/* Each end exists only in its own namespace. */
	ck_assert_int_eq(cell_nl_link_index(&a, "eth0", NULL), -ENODEV);
	ck_assert_int_eq(cell_nl_link_index(&b, VETH, NULL), -ENODEV);
	if (ipv6)
		ck_assert_str_eq(sysctl_in(B.fd, "/proc/sys/net/ipv6/conf/eth0/disable_ipv6"), "1");

	/* The host side's per-veth sysctls, in A. */
	OK(cell_net_sysctl(A.fd, "net/ipv4/conf/" VETH "/rp_filter", "1", E));
	OK(cell_net_sysctl(A.fd, "net/ipv4/conf/" VETH "/proxy_arp", "0", E));
	ck_assert_str_eq(sysctl_in(A.fd, "/proc/sys/net/ipv4/conf/" VETH "/rp_filter"), "1");

	short flags;
	int mtu;
	OK(cell_nl_link_set_mtu(&a, VETH, 1400, E));
	OK(cell_nl_link_set_mtu(&b, "eth0", 1400, E));
	link_state(A.fd, VETH, &flags, &mtu);
	ck_assert_int_eq(mtu, 1400);
	ck_assert(!(flags & IFF_UP));
	OK(cell_nl_link_set_up(&a, VETH, true, E));
	OK(cell_nl_link_set_up(&a, "lo", true, E));
	OK(cell_nl_link_set_up(&b, "eth0", true, E));
	OK(cell_nl_link_set_up(&b, "lo", true, E));
	link_state(A.fd, VETH, &flags, &mtu);
	ck_assert(flags & IFF_UP);
	link_state(B.fd, "eth0", &flags, &mtu);
	ck_assert(flags & IFF_UP);
	ck_assert_int_eq(mtu, 1400);

	OK(cell_nl_addr_add4(&a, VETH, host, 32, NULL, E));
	OK(cell_nl_addr_add4(&a, "lo", ip("203.0.113.1"), 32, NULL, E));
	OK(cell_nl_addr_add4(&b, "eth0", sb, 32, NULL, E));

	/* B has no default route yet: 203.0.113.1 is unreachable from it. */
	int ub = udp_bound(B.fd, "198.51.100.2", 4000);
	struct sockaddr_in far = sin_of("203.0.113.1", 4001);
	ck_assert_int_eq(sendto(ub, "x", 1, 0, (struct sockaddr *)&far, sizeof(far)), -1);
	ck_assert_int_eq(errno, ENETUNREACH);

	OK(cell_nl_route_add4_dev(&a, VETH, sb, 32, E));
	OK(cell_nl_route_add4_default_onlink(&b, "eth0", host, E));

	/* A -> B over the host route and the point-to-point peer address; B -> A's lo address
	 * over the onlink default route (through A's strict rp_filter on the veth), and the
	 * answer back. */
	int ua = udp_bound(A.fd, "192.0.2.1", 4002);
	int ul = udp_bound(A.fd, "203.0.113.1", 4001);
	udp_exchange(ua, ub, "198.51.100.2", 4000, "192.0.2.1", "host to sandbox");
	udp_exchange(ub, ua, "192.0.2.1", 4002, "198.51.100.2", "sandbox to gateway");
	udp_exchange(ub, ul, "203.0.113.1", 4001, "198.51.100.2", "sandbox via default route");
	udp_exchange(ul, ub, "198.51.100.2", 4000, "203.0.113.1", "and back");
	close(ua);
	close(ul);
	close(ub);

	/* Reconciliation's view: the host side's links by prefix. */
	ck_assert_int_eq(cell_nl_link_list(&a, "cell", names, 8, NULL), 1);
	ck_assert_str_eq(names[0], VETH);
	ck_assert_int_eq(cell_nl_link_list(&a, "", names, 8, NULL), 2); /* lo too */
	ck_assert_int_eq(cell_nl_link_list(&b, "cell", names, 8, NULL), 0);
	struct cell_error err = {0};
	ck_assert_int_eq(cell_nl_link_list(&a, "", names, 1, &err), -ENOSPC);
	ck_assert_ptr_nonnull(strstr(err.msg, "room for 1"));

	/* Down, as a paused network might be; and the link is still there. */
	OK(cell_nl_link_set_up(&a, VETH, false, E));
	link_state(A.fd, VETH, &flags, &mtu);
	ck_assert(!(flags & IFF_UP));
	ck_assert_int_eq(cell_nl_link_index(&a, VETH, NULL), ia);

	/* Deleting the sandbox's end removes both. */
	OK(cell_nl_link_delete(&b, "eth0", E));
	ck_assert_int_eq(cell_nl_link_index(&b, "eth0", NULL), -ENODEV);
	ck_assert_int_eq(cell_nl_link_index(&a, VETH, NULL), -ENODEV);
	ck_assert_int_eq(cell_nl_link_list(&a, "cell", names, 8, NULL), 0);
	/* Again with B's address in the point-to-point form, then deleting the host's end. */
	configure(&a, &b, B.fd);
	ua = udp_bound(A.fd, "192.0.2.1", 4002);
	ub = udp_bound(B.fd, "198.51.100.2", 4000);
	udp_exchange(ua, ub, "198.51.100.2", 4000, "192.0.2.1", "host to sandbox, again");
	udp_exchange(ub, ua, "192.0.2.1", 4002, "198.51.100.2", "sandbox to gateway, again");
	close(ua);
	close(ub);
	OK(cell_nl_link_delete(&a, VETH, E));
	ck_assert_int_eq(cell_nl_link_index(&b, "eth0", NULL), -ENODEV);
	ck_assert_int_eq(cell_nl_link_list(&a, "cell", names, 8, NULL), 0);

	cell_nl_close(&a);
	cell_nl_close(&b);
	cell_nl_close(&b); /* twice is harmless */
	h_netns_release(&A);
	h_netns_release(&B);
}
END_TEST

START_TEST(errors_name_the_interface)
{
	probe_veth();
	struct h_netns A, B;
	h_netns_hold(&A);
	h_netns_hold(&B);
	struct cell_nl a, b;
	OK(cell_nl_open(&a, A.fd, E));
	OK(cell_nl_open(&b, B.fd, E));
	struct cell_error err = {0};
	char names[4][IFNAMSIZ];

	/* A name the kernel has already: -EEXIST, saying which. */
	OK(cell_nl_veth_create(&a, VETH, "eth0", B.fd, E));
	ck_assert_int_eq(cell_nl_veth_create(&a, VETH, "eth1", B.fd, &err), -EEXIST);
	ck_assert_int_eq(err.code, EEXIST);
	ck_assert_msg(strstr(err.msg, "creating veth " VETH) && strstr(err.msg, "File exists"),
		      "%s", err.msg);
	/* The peer's name taken in B: refused too, and nothing is left in A. */
	ck_assert_int_eq(cell_nl_veth_create(&a, "cell00000002", "eth0", B.fd, &err), -EEXIST);
	ck_assert_int_eq(cell_nl_link_index(&a, "cell00000002", NULL), -ENODEV);
	ck_assert_int_eq(cell_nl_link_list(&b, "eth", names, 4, NULL), 1); /* eth0 only */

	/* Addresses and routes that exist already. */
	OK(cell_nl_addr_add4(&a, VETH, ip("192.0.2.1"), 32, NULL, E));
	ck_assert_int_eq(cell_nl_addr_add4(&a, VETH, ip("192.0.2.1"), 32, NULL, &err), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "adding 192.0.2.1/32 to " VETH));
	OK(cell_nl_link_set_up(&a, VETH, true, E));
	OK(cell_nl_route_add4_dev(&a, VETH, ip("198.51.100.2"), 32, E));
	ck_assert_int_eq(cell_nl_route_add4_dev(&a, VETH, ip("198.51.100.2"), 32, &err), -EEXIST);
	ck_assert_ptr_nonnull(strstr(err.msg, "198.51.100.2/32 dev " VETH));
	ck_assert_int_eq(cell_nl_addr_add4(&a, VETH, ip("192.0.2.9"), 33, NULL, &err), -EINVAL);

	/* Links that do not exist: -ENODEV, naming them. */
	ck_assert_int_eq(cell_nl_link_delete(&a, "cell0000dead", &err), -ENODEV);
	ck_assert_ptr_nonnull(strstr(err.msg, "deleting link cell0000dead"));
	ck_assert_int_eq(cell_nl_link_set_up(&a, "cell0000dead", true, &err), -ENODEV);
	ck_assert_ptr_nonnull(strstr(err.msg, "cell0000dead"));
	ck_assert_int_eq(cell_nl_addr_add4(&a, "cell0000dead", ip("192.0.2.3"), 32, NULL, &err),
			 -ENODEV);
	ck_assert_ptr_nonnull(strstr(err.msg, "cell0000dead"));
	ck_assert_int_eq(
	    cell_nl_route_add4_default_onlink(&a, "cell0000dead", ip("192.0.2.3"), &err), -ENODEV);
	ck_assert_ptr_nonnull(strstr(err.msg, "cell0000dead"));

	/* Bad namespace fds. */
	int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(devnull, 0);
	struct cell_nl x;
	ck_assert_int_eq(cell_nl_open(&x, -5, &err), -EBADF);
	ck_assert_ptr_null(x.sock);
	ck_assert_int_eq(cell_nl_open(&x, devnull, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "network namespace"));
	int closed = dup(devnull);
	close(closed);
	ck_assert_int_eq(cell_nl_open(&x, closed, &err), -EBADF);
	ck_assert_int_eq(cell_nl_veth_create(&a, "cell00000003", "eth1", devnull, &err), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "creating veth cell00000003"));
	ck_assert_int_eq(cell_nl_link_index(&a, "cell00000003", NULL), -ENODEV);
	ck_assert_int_eq(cell_net_sysctl(devnull, "net/ipv4/ip_forward", "0", &err), -EINVAL);
	close(devnull);

	/* Names refused before any syscall: a closed handle would say EBADF otherwise. */
	struct cell_nl closed_nl = {0};
	const char *bad[] = {"cell0123456789ab", "", ".", "..", "a/b", "a b", "a:1", "a\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ck_assert_msg(cell_nl_veth_create(&closed_nl, bad[i], "eth0", -1, &err) == -EINVAL,
			      "'%s'", bad[i]);
		ck_assert_int_eq(cell_nl_veth_create(&closed_nl, "cellok", bad[i], -1, &err),
				 -EINVAL);
		ck_assert_int_eq(cell_nl_link_delete(&closed_nl, bad[i], &err), -EINVAL);
		ck_assert_int_eq(cell_nl_link_set_up(&closed_nl, bad[i], true, &err), -EINVAL);
		ck_assert_int_eq(cell_nl_link_index(&closed_nl, bad[i], &err), -EINVAL);
	}
	ck_assert_int_eq(cell_nl_veth_create(&closed_nl, "cell0123456789ab", "eth0", -1, &err),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err.msg, "no valid interface name"));
	ck_assert_int_eq(cell_nl_veth_create(&closed_nl, "cellok", "eth0", -1, &err), -EBADF);
	ck_assert_int_eq(cell_nl_link_set_up(NULL, "cellok", true, &err), -EBADF);
	/* 15 bytes is the most: accepted. */
	OK(cell_nl_veth_create(&a, "cell0123456789a", "eth1", B.fd, E));

	/* Sysctl paths outside net/, climbing, or odd. */
	const char *bad_paths[] = {"kernel/hostname",
				   "net/../kernel/hostname",
				   "net/./ipv4",
				   "net//ipv4",
				   "net/ipv4/",
				   "/net/ipv4/ip_forward",
				   "net/ipv4/conf/a b/rp_filter"};
	for (size_t i = 0; i < sizeof(bad_paths) / sizeof(bad_paths[0]); i++)
		ck_assert_msg(cell_net_sysctl(A.fd, bad_paths[i], "1", &err) == -EINVAL, "%s",
			      bad_paths[i]);
	ck_assert_int_eq(cell_net_sysctl(A.fd, "net/ipv4/ip_forward", "1\n0", &err), -EINVAL);
	ck_assert_int_eq(cell_net_sysctl(A.fd, "net/ipv4/conf/nosuch/rp_filter", "1", &err),
			 -ENOENT);

	cell_nl_close(&a);
	cell_nl_close(&b);
	h_netns_release(&A);
	h_netns_release(&B);
}
END_TEST

static int cmp_long(const void *x, const void *y)
{
	long a = *(const long *)x, b = *(const long *)y;
	return (a > b) - (a < b);
}

static long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000L + ts.tv_nsec;
}

#define ROUNDS 200

/* What the data path of one sandbox costs: opening a handle in its namespace, the veth,
 * both ends up, addresses, routes, and the delete. Printed, never judged (the target
 * is a network adding <= 2 ms to a create; `make bench` will measure the whole create). */
START_TEST(timing_of_one_pair)
{
	probe_veth();
	struct h_netns A, B;
	h_netns_hold(&A);
	h_netns_hold(&B);
	struct cell_nl a;
	OK(cell_nl_open(&a, A.fd, E));
	static long total[ROUNDS], setup[ROUNDS], del[ROUNDS], open_b[ROUNDS];
	for (int i = 0; i < ROUNDS; i++) {
		long t0 = now_ns();
		struct cell_nl b;
		OK(cell_nl_open(&b, B.fd, E));
		open_b[i] = now_ns() - t0;
		configure(&a, &b, B.fd);
		cell_nl_close(&b);
		long t1 = now_ns();
		OK(cell_nl_link_delete(&a, VETH, E));
		long t2 = now_ns();
		setup[i] = t1 - t0;
		del[i] = t2 - t1;
		total[i] = t2 - t0;
	}
	char names[2][IFNAMSIZ];
	ck_assert_int_eq(cell_nl_link_list(&a, "cell", names, 2, NULL), 0);
	qsort(total, ROUNDS, sizeof(long), cmp_long);
	qsort(setup, ROUNDS, sizeof(long), cmp_long);
	qsort(del, ROUNDS, sizeof(long), cmp_long);
	qsort(open_b, ROUNDS, sizeof(long), cmp_long);
	printf("it_netlink: one veth pair with addresses and routes, %d rounds: "
	       "create+configure median %.3f ms (p90 %.3f; of which opening the handle in the "
	       "sandbox's namespace %.3f), delete median %.3f ms (p90 %.3f), "
	       "total median %.3f ms (p90 %.3f, max %.3f)\n",
	       ROUNDS, setup[ROUNDS / 2] / 1e6, setup[ROUNDS * 9 / 10] / 1e6,
	       open_b[ROUNDS / 2] / 1e6, del[ROUNDS / 2] / 1e6, del[ROUNDS * 9 / 10] / 1e6,
	       total[ROUNDS / 2] / 1e6, total[ROUNDS * 9 / 10] / 1e6, total[ROUNDS - 1] / 1e6);
	cell_nl_close(&a);
	h_netns_release(&A);
	h_netns_release(&B);
}
END_TEST

static Suite *netlink_suite(void)
{
	Suite *s = suite_create("netlink");
	tcase_add_test(h_tcase(s, "veth_connects_two_namespaces", 60),
		       veth_connects_two_namespaces);
	tcase_add_test(h_tcase(s, "errors_name_the_interface", 60), errors_name_the_interface);
	tcase_add_test(h_tcase(s, "timing_of_one_pair", 120), timing_of_one_pair);
	return s;
}

int main(void)
{
	return h_main(netlink_suite());
}
