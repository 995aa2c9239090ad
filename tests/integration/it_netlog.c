/* celld's log of dropped packets (src/celld/netlog.c) over the runtime's nftables table
 * (src/runtime/nft.c) with its packet log on, driven through their APIs without a celld.
 * Root. Every test first moves itself into a fresh network namespace (unshare(CLONE_NEWNET)
 * in Check's forked child): the test's namespace is the host, with the table and the log's
 * socket; a "sandbox" namespace S behind veth cellp0001 and a test "internet" I on TEST-NET
 * addresses with a blocked host (10.0.0.1) beside them. No packet can leave the machine,
 * and everything goes with the namespaces when the test's process exits. The log's lines go
 * to stderr, which each test points at a file and reads. The flood test prints what the
 * log cost (never asserted: timings decide nothing).
 *
 * The last test is the whole path in a celld: the test moves into a fresh network
 * namespace whose only uplink is a veth pair with nobody behind it (a packet that passed
 * the table would go nowhere)
 * and starts a second world there, whose sandbox tries a blocked address; celld's log must
 * name the sandbox. Then the test floods from the sandbox's namespace: celld's lines stay
 * bounded, and the test prints the CPU celld spent meanwhile. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/nft.h"
#include "harness.h"
#include "netlog.h"

#define TABLE	  "celltest"
#define LOG_GROUP 4244
/* Datagrams of the accepted-traffic measurement. */
#define ACCEPTED_N 200000

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int rc = system(cmd);
	ck_assert_msg(rc == 0, "%s: status %d", cmd, rc);
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* ---- the namespaces ---- */

static int self_ns;
static struct h_netns S, I;
static struct cell_nft *nft;

static void enter(int ns)
{
	ck_assert_int_eq(setns(ns, CLONE_NEWNET), 0);
}

/* The host (this namespace), S behind cellp0001 as sandbox 192.0.2.2, I as the internet
 * with 203.0.113.10 and the blocked 10.0.0.1; the table with the log on and S in it. */
static void setup(enum cell_nft_policy policy)
{
	ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare: %s", strerror(errno));
	self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(self_ns, 0);
	h_netns_hold(&S);
	h_netns_hold(&I);
	sh("ip link set lo up && echo 1 >/proc/sys/net/ipv4/ip_forward");
	/* no IPv6 in S, as in a sandbox (its solicitations would be logged too) */
	sh("nsenter --net=/proc/%d/ns/net sh -c "
	   "'echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6 && "
	   "echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6'",
	   S.pid);
	sh("ip link add cellp0001 type veth peer name eth0 netns %d", S.pid);
	sh("ip link add uplink type veth peer name eth0 netns %d", I.pid);
	sh("ip addr add 192.0.2.1/32 dev cellp0001 && ip link set cellp0001 up && "
	   "ip route add 192.0.2.2/32 dev cellp0001");
	sh("ip addr add 198.51.100.1/24 dev uplink && ip link set uplink up && "
	   "ip route add 203.0.113.0/24 via 198.51.100.10 && "
	   "ip route add 10.0.0.1/32 via 198.51.100.10");
	sh("nsenter --net=/proc/%d/ns/net sh -c 'ip link set lo up && "
	   "ip addr add 192.0.2.2/32 dev eth0 && ip link set eth0 up && "
	   "ip route add 192.0.2.1/32 dev eth0 && "
	   "ip route add default via 192.0.2.1 dev eth0 src 192.0.2.2'",
	   S.pid);
	sh("nsenter --net=/proc/%d/ns/net sh -c 'ip link set lo up && "
	   "ip addr add 198.51.100.10/24 dev eth0 && ip addr add 203.0.113.10/32 dev eth0 && "
	   "ip addr add 10.0.0.1/32 dev eth0 && ip link set eth0 up && "
	   "ip route add 192.0.2.0/24 via 198.51.100.1'",
	   I.pid);
	struct cell_nft_range blocked = {.first = 0x0a000000, .last = 0x0affffff}; /* 10/8 */
	struct cell_nft_table_opts o = {.name = TABLE,
					.prefix = 24,
					.blocked = &blocked,
					.n_blocked = 1,
					.log_group = LOG_GROUP};
	inet_pton(AF_INET, "192.0.2.0", &o.subnet);
	struct cell_error err = {0};
	ck_assert_msg(cell_nft_open(&o, &nft, &err) == 0, "%s", err.msg);
	struct cell_nft_sandbox sb = {.ifname = "cellp0001", .policy = policy};
	inet_pton(AF_INET, "192.0.2.2", &sb.addr);
	inet_pton(AF_INET, "192.0.2.1", &sb.host_addr);
	ck_assert_msg(cell_nft_sandbox_add(nft, &sb, &err) == 0, "%s", err.msg);
}

static void teardown_ns(void)
{
	cell_nft_close(nft);
	h_netns_release(&S);
	h_netns_release(&I);
	close(self_ns);
}

/* celld's lookup: cellp0001 is sandbox sb-test. */
static int lookups;
static bool lookup(const char *ifname, char *id, size_t size)
{
	lookups++;
	if (strcmp(ifname, "cellp0001"))
		return false;
	snprintf(id, size, "sb-test");
	return true;
}

/* stderr into a file while the log writes. */
static int logfd = -1, saved_err = -1;

static void capture(void)
{
	char path[] = "/tmp/it_netlog.log.XXXXXX";
	logfd = mkstemp(path);
	ck_assert_int_ge(logfd, 0);
	unlink(path);
	saved_err = dup(STDERR_FILENO);
	ck_assert_int_ge(saved_err, 0);
	ck_assert_int_ge(dup2(logfd, STDERR_FILENO), 0);
}

/* What was written (malloc'd), stderr back. */
static char *captured(void)
{
	ck_assert_int_ge(dup2(saved_err, STDERR_FILENO), 0);
	close(saved_err);
	off_t len = lseek(logfd, 0, SEEK_END);
	char *text = calloc(1, (size_t)len + 1);
	ck_assert_ptr_nonnull(text);
	ck_assert_int_eq(pread(logfd, text, (size_t)len, 0), len);
	close(logfd);
	return text;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

/* Connect from S to dst:port (nothing is listening: a dropped SYN, or a refusal). */
static void try_tcp(const char *dst, int port)
{
	enter(S.fd);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(fd, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	inet_pton(AF_INET, dst, &a.sin_addr);
	int rc = connect(fd, (struct sockaddr *)&a, sizeof(a));
	ck_assert(rc < 0 && errno == EINPROGRESS);
	struct pollfd p = {.fd = fd, .events = POLLOUT};
	ck_assert_int_eq(poll(&p, 1, 300), 0); /* dropped: no answer */
	close(fd);
	enter(self_ns);
}

/* A blocked connection and one to the host each give one line naming the sandbox, the
 * addresses, ports and reason. */
START_TEST(test_blocked_connection_logged)
{
	setup(CELL_NFT_PUBLIC);
	capture();
	struct cell_error err = {0};
	ck_assert_msg(netlog_start(LOG_GROUP, lookup, &err) == 0, "%s", err.msg);
	try_tcp("10.0.0.1", 80);
	try_tcp("192.0.2.1", 8080);
	sleep_ms(200);
	struct netlog_stats st;
	netlog_stats(&st);
	netlog_stop();
	char *text = captured();
	ck_assert_msg(strstr(text, "sandbox sb-test: blocked tcp 192.0.2.2:") &&
			  strstr(text, " -> 10.0.0.1:80 (blocked range)"),
		      "%s", text);
	ck_assert_msg(strstr(text, " -> 192.0.2.1:8080 (the host: only its DNS resolver is open)"),
		      "%s", text);
	ck_assert_uint_ge(st.packets, 2);
	ck_assert_uint_eq(st.malformed, 0);
	ck_assert_int_ge(lookups, 1);
	free(text);
	teardown_ns();
}
END_TEST

/* An allowlist's refusal says "not allowed by its policy"; an interface of no sandbox is
 * named as such. */
START_TEST(test_denied_and_unknown)
{
	setup(CELL_NFT_ALLOWLIST);
	capture();
	struct cell_error err = {0};
	ck_assert_int_eq(netlog_start(LOG_GROUP, NULL, &err), 0); /* no lookup: no sandbox */
	try_tcp("203.0.113.10", 443);
	sleep_ms(200);
	netlog_stop();
	char *text = captured();
	ck_assert_msg(strstr(text, "network: interface cellp0001 (no sandbox): blocked tcp "
				   "192.0.2.2:") &&
			  strstr(text, " -> 203.0.113.10:443 (not allowed by its policy)"),
		      "%s", text);
	free(text);
	teardown_ns();
}
END_TEST

/* The group held by another socket: netlog_start says so; freed, it binds. */
START_TEST(test_group_taken)
{
	ck_assert_int_eq(unshare(CLONE_NEWNET), 0);
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	ck_assert_ptr_nonnull(nl);
	ck_assert_int_eq(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	struct nfgenmsg *g = mnl_nlmsg_put_extra_header(nlh, sizeof(*g));
	g->nfgen_family = AF_UNSPEC;
	g->res_id = htons(LOG_GROUP);
	struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
	mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
	ck_assert_int_ge(mnl_socket_sendto(nl, nlh, nlh->nlmsg_len), 0);
	ck_assert_int_gt(mnl_socket_recvfrom(nl, buf, sizeof(buf)), 0);
	struct cell_error err = {0};
	ck_assert_int_eq(netlog_start(LOG_GROUP, lookup, &err), -EBUSY);
	ck_assert_msg(strstr(err.msg, "NFLOG group 4244 is bound by another program") &&
			  strstr(err.msg, "--nflog-group"),
		      "%s", err.msg);
	ck_assert_int_eq(netlog_start(0, lookup, &err), -EINVAL);
	mnl_socket_close(nl);
	ck_assert_msg(netlog_start(LOG_GROUP, lookup, &err) == 0, "%s", err.msg);
	ck_assert_int_eq(netlog_start(LOG_GROUP, lookup, &err), 0); /* running: no-op */
	netlog_stop();
	netlog_stop();
}
END_TEST

/* What the last flood sent (datagrams the kernel took), shared with its process. */
static long *flood_sent;

/* UDP datagrams from namespace ns to dst:9, rate a second for secs seconds, from a child
 * process; rate 0: n = secs of them as fast as they go. */
static pid_t flood_from(int ns, const char *dst, int rate, double secs)
{
	if (!flood_sent) {
		flood_sent = mmap(NULL, sizeof(*flood_sent), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		ck_assert(flood_sent != MAP_FAILED);
	}
	*flood_sent = 0;
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid)
		return pid;
	if (setns(ns, CLONE_NEWNET) < 0)
		_exit(1);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(9)};
	inet_pton(AF_INET, dst, &a.sin_addr);
	double t0 = now_s();
	long sent = 0, done = 0;
	for (;;) {
		double t = now_s() - t0;
		if (rate && t >= secs)
			break;
		long due = rate ? (long)(t * rate) : (long)secs;
		for (; sent < due; sent++) {
			if (sendto(fd, "x", 1, 0, (struct sockaddr *)&a, sizeof(a)) == 1)
				done++;
			else if (errno != ENOBUFS && errno != EPERM)
				_exit(2);
		}
		if (!rate)
			break;
		usleep(1000);
	}
	*flood_sent = done;
	_exit(0);
}

static pid_t flood(const char *dst, int rate, double secs)
{
	return flood_from(S.fd, dst, rate, secs);
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/* 100k blocked packets a second for 5 s: all dropped, the lines bounded by the log's limits
 * (the kernel's and celld's), each ended second summed up in one line. Prints the CPU the
 * log took, and what the table costs accepted traffic with the log on and off. */
START_TEST(test_flood_bounded)
{
	setup(CELL_NFT_PUBLIC);
	capture();
	struct cell_error err = {0};
	ck_assert_msg(netlog_start(LOG_GROUP, lookup, &err) == 0, "%s", err.msg);
	struct cell_nft_counters c0, c1;
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c0, &err), 0);
	const int rate = 100000;
	const double secs = 5;
	double cpu0 = cpu_s(), t0 = now_s();
	pid_t pid = flood("10.0.0.1", rate, secs);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "flooder: %d", status);
	sleep_ms(1200); /* the last second's summary */
	double wall = now_s() - t0, cpu = cpu_s() - cpu0;
	struct netlog_stats st;
	netlog_stats(&st);
	netlog_stop();
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c1, &err), 0);
	char *text = captured();
	uint64_t dropped = c1.blocked.packets - c0.blocked.packets;
	int lines = count(text, "sandbox sb-test: blocked udp");
	int more = count(text, "more packets, not logged");
	/* windows of one second each: at most NETLOG_LINES_PER_S lines in each */
	int most = NETLOG_LINES_PER_S * ((int)wall + 2);
	ck_assert_msg(lines >= NETLOG_LINES_PER_S && lines <= most, "%d lines (at most %d)", lines,
		      most);
	ck_assert_int_ge(more, 1);
	ck_assert_msg(dropped == (uint64_t)*flood_sent, "%llu of %ld sent were dropped",
		      (unsigned long long)dropped, *flood_sent);
	/* what the kernel handed over: its burst and rate, never the flood */
	uint64_t kmost = CELL_NFT_LOG_BURST + (uint64_t)(CELL_NFT_LOG_RATE * (wall + 1));
	ck_assert_msg(st.packets <= kmost, "%llu packets reached the log (at most %llu)",
		      (unsigned long long)st.packets, (unsigned long long)kmost);
	ck_assert_uint_eq(st.lines + st.suppressed, st.packets);
	printf("it_netlog: flood of %llu blocked packets in %.1f s: %llu reached celld's log, "
	       "%d lines + %d summaries written, %.3f s CPU in the log's process\n",
	       (unsigned long long)dropped, wall, (unsigned long long)st.packets, lines, more, cpu);
	free(text);

	/* Accepted traffic with the log on, then off (same rules, the drops' ends differ). */
	double per[2];
	for (int on = 1; on >= 0; on--) {
		if (!on) {
			cell_nft_sandbox_remove(nft, "cellp0001", &err);
			cell_nft_close(nft);
			struct cell_nft_table_opts o = {.name = TABLE, .prefix = 24};
			inet_pton(AF_INET, "192.0.2.0", &o.subnet);
			ck_assert_int_eq(cell_nft_open(&o, &nft, &err), 0);
			struct cell_nft_sandbox sb = {.ifname = "cellp0001",
						      .policy = CELL_NFT_PUBLIC};
			inet_pton(AF_INET, "192.0.2.2", &sb.addr);
			inet_pton(AF_INET, "192.0.2.1", &sb.host_addr);
			ck_assert_int_eq(cell_nft_sandbox_add(nft, &sb, &err), 0);
		}
		double best = 1e9;
		for (int k = 0; k < 5; k++) {
			double a = now_s();
			pid = flood("203.0.113.10", 0, ACCEPTED_N);
			ck_assert_int_eq(waitpid(pid, &status, 0), pid);
			ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c1, &err), 0);
			double t = (now_s() - a) / ACCEPTED_N * 1e9;
			if (t < best)
				best = t;
		}
		per[on] = best;
	}
	ck_assert_uint_eq(c1.blocked.packets, 0);
	printf("it_netlog: accepted UDP through the table, best of 5 runs of %d: %.0f ns a "
	       "packet with the log, %.0f ns without\n",
	       ACCEPTED_N, per[1], per[0]);
	fflush(stdout);
	teardown_ns();
}
END_TEST

/* utime + stime of a process, in seconds. */
static double proc_cpu_s(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	char *st = h_read_file(path);
	const char *p = strrchr(st, ')');
	ck_assert_ptr_nonnull(p);
	unsigned long long ut = 0, stt = 0;
	/* after the comm: state (3), then fields 4..13, utime (14), stime (15) */
	ck_assert_int_eq(
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &stt), 2);
	free(st);
	return (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
}

/* A celld in a network namespace of the test's own: its public sandbox's connection to a
 * blocked range is in celld's log, naming the sandbox, the address and the reason. */
START_TEST(test_celld_logs_blocked)
{
	ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare: %s", strerror(errno));
	sh("ip link set lo up && ip link add uplink0 type veth peer name uplink1 && "
	   "ip link set uplink0 up && ip link set uplink1 up && "
	   "ip addr add 203.0.113.1/24 dev uplink0 && ip route add default via 203.0.113.2");
	static const char *const flags[] = {"--network-default",
					    "public",
					    "--dns-upstream",
					    "203.0.113.2",
					    "--nflog-group",
					    "4245",
					    NULL};
	struct h_world *w = h_world_add(&(struct h_world_opts){.name = "net", .flags = flags});
	char *id = h_world_create(w, "busybox", NULL);
	/* dropped: no answer, nc times out (busybox nc: exit 1, "timed out") */
	char *out = h_world_sh(w, id, "nc -w 2 10.1.2.3 80 </dev/null 2>&1; echo rc=$?");
	ck_assert_msg(strstr(out, "timed out") && strstr(out, "rc=1"), "%s", out);
	free(out);
	json_t *ins = h_world_inspect(w, id);
	char want[160];
	snprintf(want, sizeof(want), "sandbox %s: blocked tcp %s:", id,
		 h_jstr(ins, "network.address"));
	char *log = NULL;
	for (int i = 0; i < 30; i++) {
		free(log);
		log = h_read_file(w->log);
		if (strstr(log, want) && strstr(log, " -> 10.1.2.3:80 (blocked range)"))
			break;
		sleep_ms(100);
	}
	ck_assert_msg(strstr(log, want) && strstr(log, " -> 10.1.2.3:80 (blocked range)"),
		      "no '%s… -> 10.1.2.3:80 (blocked range)' in celld's log:\n%s", want,
		      h_world_log_tail(w));
	ck_assert(strstr(log, "network: logging dropped packets from NFLOG group 4245"));
	free(log);

	/* 100k blocked datagrams a second for 5 s from the sandbox's own namespace */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)h_jint(ins, "pid"));
	json_decref(ins);
	int ns = open(path, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(ns, 0);
	double cpu0 = proc_cpu_s(h_world_pid(w)), t0 = now_s();
	int status;
	pid_t pid = flood_from(ns, "10.1.2.3", 100000, 5);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "flooder: %d", status);
	sleep_ms(1200);
	double wall = now_s() - t0, cpu = proc_cpu_s(h_world_pid(w)) - cpu0;
	close(ns);
	log = h_read_file(w->log);
	snprintf(want, sizeof(want), "sandbox %s: blocked udp ", id);
	int lines = count(log, want);
	int more = count(log, "more packets, not logged");
	free(log);
	ck_assert_msg(lines >= 1 && lines <= NETLOG_LINES_PER_S * ((int)wall + 2), "%d lines",
		      lines);
	ck_assert_int_ge(more, 1);
	ins = h_world_inspect(w, id);
	long long blocked = h_jint(ins, "network.counters.blocked.packets");
	printf("it_netlog: celld under %lld blocked packets in %.1f s: %d lines + %d summaries, "
	       "%.3f s of celld's CPU\n",
	       blocked, wall, lines, more, cpu);
	fflush(stdout);
	ck_assert_int_ge(blocked, *flood_sent);
	json_decref(ins);
	free(id);
}
END_TEST

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "it_netlog: needs root (network namespaces, nftables)\n");
		return 1;
	}
	Suite *s = suite_create("netlog");
	TCase *tc = tcase_create("netlog");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_blocked_connection_logged);
	tcase_add_test(tc, test_denied_and_unknown);
	tcase_add_test(tc, test_group_taken);
	tcase_add_test(tc, test_flood_bounded);
	suite_add_tcase(s, tc);
	TCase *tw = h_tcase(s, "celld", 180);
	tcase_add_test(tw, test_celld_logs_blocked);
	return h_main(s);
}
