/* rtnetlink through libmnl (include/cell/netlink.h says what and why).
 *
 * One request at a time: build it in a stack buffer, send it with NLM_F_ACK and the next
 * sequence number, then read answers into a bounded stack buffer until the ACK (or a
 * dump's NLMSG_DONE) of that sequence number arrives. Answers of other sequence numbers
 * (a request given up after the timeout) are skipped; answers from another port id than
 * the kernel's (0) are refused. */
#include <errno.h>
#include <fcntl.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/netlink.h"

/* Requests are small: a veth's is the largest (two names, two nests, an fd). */
#define REQ_MAX 1024

bool cell_nl_name_valid(const char *name)
{
	if (!name)
		return false;
	size_t len = strnlen(name, IFNAMSIZ);
	if (len == 0 || len >= IFNAMSIZ || !strcmp(name, ".") || !strcmp(name, ".."))
		return false;
	/* The kernel's dev_valid_name: '/' would make a path of /proc/sys/net/.../<dev> and
	 * /sys/class/net/<dev>, ':' an alias, whitespace a name no tool can print. */
	for (const char *c = name; *c; c++)
		if (*c == '/' || *c == ':' || *c == ' ' || (*c >= '\t' && *c <= '\r'))
			return false;
	return true;
}

static int check_name(const char *what, const char *name, struct cell_error *err)
{
	if (cell_nl_name_valid(name))
		return 0;
	return cell_err_msg(err, EINVAL,
			    "%s: '%.*s' is no valid interface name (1 to %d bytes, "
			    "no '/', ':' or whitespace)",
			    what, name ? IFNAMSIZ * 2 : 6, name ? name : "(null)", IFNAMSIZ - 1);
}

static int check_handle(const struct cell_nl *nl, const char *what, struct cell_error *err)
{
	if (!nl || !nl->sock)
		return cell_err_msg(err, EBADF, "%s: the netlink handle is closed", what);
	return 0;
}

/* ---- opening a socket in a namespace ---- */

static int open_here(int *fd_out, struct cell_error *err)
{
	int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
	if (fd < 0)
		return cell_err(err, errno, "netlink route socket");
	*fd_out = fd;
	return 0;
}

typedef int (*in_netns_fn)(void *arg, struct cell_error *err);

struct netns_job {
	int netns_fd;
	in_netns_fn fn;
	void *arg;
	int result;
	struct cell_error err;
};

static void *netns_thread(void *arg)
{
	struct netns_job *job = arg;
	/* setns(CLONE_NEWNET) changes this thread only; it exits right after, so no other
	 * code ever runs in the namespace on it. */
	if (setns(job->netns_fd, CLONE_NEWNET) < 0)
		job->result = cell_err(&job->err, errno, "entering the network namespace of fd %d",
				       job->netns_fd);
	else
		job->result = job->fn(job->arg, &job->err);
	return NULL;
}

/* Run fn in the network namespace netns_fd refers to, on a thread of its own; -1: here. */
static int in_netns(int netns_fd, in_netns_fn fn, void *arg, struct cell_error *err)
{
	if (netns_fd == -1)
		return fn(arg, err);
	if (netns_fd < 0)
		return cell_err_msg(err, EBADF, "network namespace fd %d is no file descriptor",
				    netns_fd);
	struct netns_job job = {.netns_fd = netns_fd, .fn = fn, .arg = arg};
	pthread_t th;
	int r = pthread_create(&th, NULL, netns_thread, &job);
	if (r != 0)
		return cell_err(err, r, "thread for network namespace fd %d", netns_fd);
	pthread_join(th, NULL);
	if (job.result < 0 && err)
		*err = job.err;
	return job.result;
}

static int open_socket_fn(void *arg, struct cell_error *err)
{
	return open_here(arg, err);
}

int cell_nl_open(struct cell_nl *nl, int netns_fd, struct cell_error *err)
{
	*nl = (struct cell_nl){0};
	_cleanup_close_ int fd = -1;
	int r = in_netns(netns_fd, open_socket_fn, &fd, err);
	if (r < 0)
		return r;
	int one = 1;
	/* CAP_ACK: an error ACK carries no copy of the request; EXT_ACK: it carries the
	 * kernel's message, which goes into the cell_error. */
	if (setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one)) < 0 ||
	    setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one)) < 0)
		return cell_err(err, errno, "netlink socket options");
	struct timeval tv = {.tv_sec = CELL_NL_TIMEOUT_MS / 1000,
			     .tv_usec = (CELL_NL_TIMEOUT_MS % 1000) * 1000};
	if (setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
		return cell_err(err, errno, "netlink socket receive timeout");
	struct mnl_socket *sock = mnl_socket_fdopen(fd);
	if (!sock)
		return cell_err(err, errno, "netlink socket");
	fd = -1; /* the mnl_socket owns it now */
	if (mnl_socket_bind(sock, 0, MNL_SOCKET_AUTOPID) < 0) {
		r = cell_err(err, errno, "binding the netlink socket");
		mnl_socket_close(sock);
		return r;
	}
	nl->sock = sock;
	nl->portid = mnl_socket_get_portid(sock);
	/* Any start works (answers are matched to this socket's port id as well); one from
	 * the clock makes a stray answer of an earlier socket with a recycled port id miss. */
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	nl->seq = (uint32_t)ts.tv_nsec;
	return 0;
}

void cell_nl_close(struct cell_nl *nl)
{
	if (nl && nl->sock) {
		mnl_socket_close(nl->sock);
		nl->sock = NULL;
	}
}

/* ---- one request and its answers ---- */

/* Called for each answer of the request that is no ACK, error or NLMSG_DONE. */
typedef int (*answer_fn)(const struct nlmsghdr *nlh, void *arg);

/* The kernel's explanation in an extended ACK, or NULL. */
static const char *ext_ack_msg(const struct nlmsghdr *nlh)
{
	if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS))
		return NULL;
	/* With NETLINK_CAP_ACK the request is not echoed: the TLVs follow nlmsgerr's header. */
	size_t off = sizeof(struct nlmsgerr);
	if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) {
		const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
		off += e->msg.nlmsg_len - sizeof(struct nlmsghdr);
	}
	if (off > mnl_nlmsg_get_payload_len(nlh))
		return NULL;
	const struct nlattr *attr;
	mnl_attr_for_each(attr, nlh, off)
	{
		if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
		    mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) == 0)
			return mnl_attr_get_str(attr);
	}
	return NULL;
}

/* One datagram from the kernel into buf: its length, 0 for a datagram another socket sent
 * (dropped), or -errno with err filled. Any process of the namespace may send to a netlink
 * socket's port id (a sandbox's root, for a handle in its namespace): only the sender
 * address tells the kernel's answers apart (udev's CVE-2009-1185 trusted the contents). */
static ssize_t recv_from_kernel(struct cell_nl *nl, char *buf, size_t size, struct cell_error *err)
{
	struct sockaddr_nl from;
	struct iovec iov = {.iov_base = buf, .iov_len = size};
	struct msghdr msg = {
	    .msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1};
	for (;;) {
		ssize_t n = recvmsg(mnl_socket_get_fd(nl->sock), &msg, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return cell_err_msg(err, ETIMEDOUT,
						    "no netlink answer within %d ms",
						    CELL_NL_TIMEOUT_MS);
			return cell_err(err, errno, "receiving from netlink");
		}
		if (msg.msg_namelen != sizeof(from) || from.nl_family != AF_NETLINK ||
		    from.nl_pid != 0)
			return 0;
		if (msg.msg_flags & MSG_TRUNC)
			return cell_err_msg(err, EMSGSIZE, "a netlink answer larger than %zu bytes",
					    size);
		return n;
	}
}

/* Send the request in nlh and read its answers. Returns 0, the kernel's -errno (with
 * *kmsg its explanation, copied into kmsg_buf) or another -errno with err filled. */
static int transact(struct cell_nl *nl, struct nlmsghdr *nlh, answer_fn fn, void *arg,
		    char *kmsg_buf, size_t kmsg_size, struct cell_error *err)
{
	kmsg_buf[0] = '\0';
	uint32_t seq = ++nl->seq;
	nlh->nlmsg_seq = seq;
	nlh->nlmsg_pid = 0;
	nlh->nlmsg_flags |= NLM_F_ACK;
	bool dump = (nlh->nlmsg_flags & NLM_F_DUMP) == NLM_F_DUMP;
	if (mnl_socket_sendto(nl->sock, nlh, nlh->nlmsg_len) < 0)
		return cell_err(err, errno, "sending to netlink");
	char buf[CELL_NL_RECV_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	int result = 0;
	for (;;) {
		ssize_t n = recv_from_kernel(nl, buf, sizeof(buf), err);
		if (n < 0)
			return (int)n;
		if (n == 0)
			continue; /* not the kernel's: dropped */
		int len = (int)n;
		for (const struct nlmsghdr *m = (const struct nlmsghdr *)buf; mnl_nlmsg_ok(m, len);
		     m = mnl_nlmsg_next(m, &len)) {
			if (m->nlmsg_pid != nl->portid)
				continue; /* not an answer to this socket */
			if (m->nlmsg_seq != seq)
				continue; /* an answer to an earlier request, given up */
			if (m->nlmsg_type == NLMSG_ERROR) {
				if (mnl_nlmsg_get_payload_len(m) < sizeof(struct nlmsgerr))
					return cell_err_msg(err, EPROTO,
							    "short netlink error message");
				const struct nlmsgerr *e = mnl_nlmsg_get_payload(m);
				const char *k = ext_ack_msg(m);
				if (k)
					snprintf(kmsg_buf, kmsg_size, "%s", k);
				/* A dump's errors come here too; its ACK does not (a dump ends
				 * with NLMSG_DONE). */
				if (e->error < 0)
					return e->error;
				if (!dump)
					return result;
				continue;
			}
			if (m->nlmsg_type == NLMSG_DONE) {
				if (mnl_nlmsg_get_payload_len(m) >= sizeof(int)) {
					int e = *(const int *)mnl_nlmsg_get_payload(m);
					if (e < 0)
						return e;
				}
				return result;
			}
			if (m->nlmsg_type < NLMSG_MIN_TYPE)
				continue; /* NLMSG_NOOP, NLMSG_OVERRUN */
			if (fn && result == 0)
				result = fn(m, arg); /* a failure is kept; the rest is drained */
		}
	}
}

/* transact, with a kernel error turned into err: "<what>: <strerror> (<kernel's msg>)". */
static int request(struct cell_nl *nl, struct nlmsghdr *nlh, answer_fn fn, void *arg,
		   struct cell_error *err, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));

static int request(struct cell_nl *nl, struct nlmsghdr *nlh, answer_fn fn, void *arg,
		   struct cell_error *err, const char *fmt, ...)
{
	char kmsg[256];
	struct cell_error local = {0};
	int r = transact(nl, nlh, fn, arg, kmsg, sizeof(kmsg), &local);
	if (r >= 0)
		return r;
	char what[CELL_ERROR_MSG_MAX / 2];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (local.code) { /* a failure of the socket itself */
		if (err) {
			*err = local;
			cell_err_wrap(err, "%s: ", what);
		}
		return r;
	}
	if (kmsg[0])
		return cell_err_msg(err, -r, "%s: %s (%s)", what, strerror(-r), kmsg);
	return cell_err(err, -r, "%s", what);
}

static struct nlmsghdr *new_msg(char *buf, uint16_t type, uint16_t flags)
{
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = type;
	nlh->nlmsg_flags = NLM_F_REQUEST | flags;
	return nlh;
}

static struct ifinfomsg *put_ifinfo(struct nlmsghdr *nlh)
{
	struct ifinfomsg *ifi = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifi));
	ifi->ifi_family = AF_UNSPEC;
	return ifi;
}

/* ---- links ---- */

int cell_nl_veth_create(struct cell_nl *nl, const char *name, const char *peer_name,
			int peer_netns_fd, struct cell_error *err)
{
	int r;
	if ((r = check_name("creating a veth", name, err)) < 0 ||
	    (r = check_name("creating a veth's peer", peer_name, err)) < 0 ||
	    (r = check_handle(nl, "creating a veth", err)) < 0)
		return r;
	if (peer_netns_fd < -1)
		return cell_err_msg(err, EBADF,
				    "creating veth %s: peer netns fd %d is no file "
				    "descriptor",
				    name, peer_netns_fd);
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
	put_ifinfo(nlh);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	struct nlattr *linkinfo = mnl_attr_nest_start(nlh, IFLA_LINKINFO);
	mnl_attr_put_strz(nlh, IFLA_INFO_KIND, "veth");
	struct nlattr *data = mnl_attr_nest_start(nlh, IFLA_INFO_DATA);
	struct nlattr *peer = mnl_attr_nest_start(nlh, VETH_INFO_PEER);
	/* VETH_INFO_PEER holds an ifinfomsg of the peer, then the peer's attributes. */
	struct ifinfomsg *pifi = mnl_nlmsg_get_payload_tail(nlh);
	memset(pifi, 0, sizeof(*pifi));
	pifi->ifi_family = AF_UNSPEC;
	nlh->nlmsg_len += MNL_ALIGN(sizeof(*pifi));
	mnl_attr_put_strz(nlh, IFLA_IFNAME, peer_name);
	if (peer_netns_fd >= 0)
		mnl_attr_put_u32(nlh, IFLA_NET_NS_FD, (uint32_t)peer_netns_fd);
	mnl_attr_nest_end(nlh, peer);
	mnl_attr_nest_end(nlh, data);
	mnl_attr_nest_end(nlh, linkinfo);
	if (peer_netns_fd >= 0)
		return request(nl, nlh, NULL, NULL, err,
			       "creating veth %s (peer %s in netns fd %d)", name, peer_name,
			       peer_netns_fd);
	return request(nl, nlh, NULL, NULL, err, "creating veth %s (peer %s)", name, peer_name);
}

int cell_nl_link_delete(struct cell_nl *nl, const char *name, struct cell_error *err)
{
	int r;
	if ((r = check_name("deleting a link", name, err)) < 0 ||
	    (r = check_handle(nl, "deleting a link", err)) < 0)
		return r;
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = new_msg(buf, RTM_DELLINK, 0);
	put_ifinfo(nlh);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return request(nl, nlh, NULL, NULL, err, "deleting link %s", name);
}

int cell_nl_link_set_up(struct cell_nl *nl, const char *name, bool up, struct cell_error *err)
{
	int r;
	if ((r = check_name("setting a link up", name, err)) < 0 ||
	    (r = check_handle(nl, "setting a link up", err)) < 0)
		return r;
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	/* No NLM_F_CREATE: a name that does not exist is -ENODEV, never a new link. */
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWLINK, 0);
	struct ifinfomsg *ifi = put_ifinfo(nlh);
	ifi->ifi_change = IFF_UP;
	ifi->ifi_flags = up ? IFF_UP : 0;
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	return request(nl, nlh, NULL, NULL, err, "setting link %s %s", name, up ? "up" : "down");
}

int cell_nl_link_set_mtu(struct cell_nl *nl, const char *name, uint32_t mtu, struct cell_error *err)
{
	int r;
	if ((r = check_name("setting a link's MTU", name, err)) < 0 ||
	    (r = check_handle(nl, "setting a link's MTU", err)) < 0)
		return r;
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWLINK, 0);
	put_ifinfo(nlh);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	mnl_attr_put_u32(nlh, IFLA_MTU, mtu);
	return request(nl, nlh, NULL, NULL, err, "setting the MTU of link %s to %u", name, mtu);
}

static int index_answer(const struct nlmsghdr *nlh, void *arg)
{
	if (nlh->nlmsg_type != RTM_NEWLINK ||
	    mnl_nlmsg_get_payload_len(nlh) < sizeof(struct ifinfomsg))
		return -EPROTO;
	const struct ifinfomsg *ifi = mnl_nlmsg_get_payload(nlh);
	*(int *)arg = ifi->ifi_index;
	return 0;
}

/* The ifindex of a name already checked. */
static int link_index(struct cell_nl *nl, const char *name, const char *what,
		      struct cell_error *err)
{
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = new_msg(buf, RTM_GETLINK, 0);
	put_ifinfo(nlh);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	/* Leave out the VF and statistics blocks: the answer stays small. */
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	int index = 0;
	int r = request(nl, nlh, index_answer, &index, err, "%s: looking up link %s", what, name);
	if (r < 0)
		return r;
	if (index <= 0)
		return cell_err_msg(err, EPROTO, "%s: looking up link %s: no index in the answer",
				    what, name);
	return index;
}

struct bytes_ctx {
	uint64_t rx, tx;
	bool found;
};

static int bytes_answer(const struct nlmsghdr *nlh, void *arg)
{
	struct bytes_ctx *ctx = arg;
	if (nlh->nlmsg_type != RTM_NEWLINK)
		return -EPROTO;
	const struct nlattr *attr;
	mnl_attr_for_each(attr, nlh, sizeof(struct ifinfomsg))
	{
		if (mnl_attr_get_type(attr) != IFLA_STATS64)
			continue;
		struct rtnl_link_stats64 st;
		if (mnl_attr_get_payload_len(attr) < sizeof(st))
			return -EPROTO;
		memcpy(&st, mnl_attr_get_payload(attr), sizeof(st));
		ctx->rx = st.rx_bytes;
		ctx->tx = st.tx_bytes;
		ctx->found = true;
	}
	return 0;
}

int cell_nl_link_bytes(struct cell_nl *nl, const char *name, uint64_t *rx, uint64_t *tx,
		       struct cell_error *err)
{
	int r;
	if ((r = check_name("reading a link's counters", name, err)) < 0 ||
	    (r = check_handle(nl, "reading a link's counters", err)) < 0)
		return r;
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = new_msg(buf, RTM_GETLINK, 0);
	put_ifinfo(nlh);
	mnl_attr_put_strz(nlh, IFLA_IFNAME, name);
	struct bytes_ctx ctx = {0};
	r = request(nl, nlh, bytes_answer, &ctx, err, "reading the counters of link %s", name);
	if (r < 0)
		return r;
	if (!ctx.found)
		return cell_err_msg(err, EPROTO, "link %s: no counters in the answer", name);
	*rx = ctx.rx;
	*tx = ctx.tx;
	return 0;
}

int cell_nl_link_index(struct cell_nl *nl, const char *name, struct cell_error *err)
{
	int r;
	if ((r = check_name("looking up a link", name, err)) < 0 ||
	    (r = check_handle(nl, "looking up a link", err)) < 0)
		return r;
	return link_index(nl, name, "ifindex", err);
}

struct list_ctx {
	const char *prefix;
	size_t prefix_len;
	char (*names)[IFNAMSIZ];
	size_t cap, count;
};

static int list_answer(const struct nlmsghdr *nlh, void *arg)
{
	struct list_ctx *ctx = arg;
	if (nlh->nlmsg_type != RTM_NEWLINK)
		return 0;
	const struct nlattr *attr;
	mnl_attr_for_each(attr, nlh, sizeof(struct ifinfomsg))
	{
		if (mnl_attr_get_type(attr) != IFLA_IFNAME)
			continue;
		if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) < 0)
			return -EPROTO;
		const char *name = mnl_attr_get_str(attr);
		if (strnlen(name, IFNAMSIZ) >= IFNAMSIZ)
			return -EPROTO;
		if (strncmp(name, ctx->prefix, ctx->prefix_len))
			return 0;
		if (ctx->count < ctx->cap)
			snprintf(ctx->names[ctx->count], IFNAMSIZ, "%s", name);
		ctx->count++;
		return 0;
	}
	return 0;
}

int cell_nl_link_list(struct cell_nl *nl, const char *prefix, char (*names)[IFNAMSIZ], size_t cap,
		      struct cell_error *err)
{
	int r;
	if (!prefix || strnlen(prefix, IFNAMSIZ) >= IFNAMSIZ)
		return cell_err_msg(err, EINVAL,
				    "listing links: the prefix is longer than an interface name");
	if ((r = check_handle(nl, "listing links", err)) < 0)
		return r;
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = new_msg(buf, RTM_GETLINK, NLM_F_DUMP);
	put_ifinfo(nlh);
	mnl_attr_put_u32(nlh, IFLA_EXT_MASK, RTEXT_FILTER_SKIP_STATS);
	struct list_ctx ctx = {
	    .prefix = prefix, .prefix_len = strlen(prefix), .names = names, .cap = cap};
	r = request(nl, nlh, list_answer, &ctx, err, "listing links named %s*", prefix);
	if (r < 0)
		return r;
	if (ctx.count > cap)
		return cell_err_msg(err, ENOSPC, "listing links named %s*: %zu, room for %zu",
				    prefix, ctx.count, cap);
	return (int)ctx.count;
}

/* ---- addresses and routes ---- */

static const char *ip4(struct in_addr a, char buf[INET_ADDRSTRLEN])
{
	const unsigned char *b = (const unsigned char *)&a.s_addr;
	snprintf(buf, INET_ADDRSTRLEN, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
	return buf;
}

int cell_nl_addr_add4(struct cell_nl *nl, const char *name, struct in_addr local,
		      unsigned prefix_len, const struct in_addr *peer, struct cell_error *err)
{
	int r;
	char a[INET_ADDRSTRLEN], p[INET_ADDRSTRLEN];
	if ((r = check_name("adding an address", name, err)) < 0 ||
	    (r = check_handle(nl, "adding an address", err)) < 0)
		return r;
	if (prefix_len > 32)
		return cell_err_msg(err, EINVAL, "adding %s/%u to %s: a prefix length is 0 to 32",
				    ip4(local, a), prefix_len, name);
	int index = link_index(nl, name, "adding an address", err);
	if (index < 0)
		return index;
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL);
	struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
	ifa->ifa_family = AF_INET;
	ifa->ifa_prefixlen = (unsigned char)prefix_len;
	ifa->ifa_scope = RT_SCOPE_UNIVERSE;
	ifa->ifa_index = (unsigned)index;
	/* IFA_LOCAL is the interface's own address; IFA_ADDRESS the peer's on a
	 * point-to-point link, else the same. */
	mnl_attr_put(nlh, IFA_LOCAL, sizeof(local), &local);
	mnl_attr_put(nlh, IFA_ADDRESS, sizeof(local), peer ? peer : &local);
	if (peer)
		return request(nl, nlh, NULL, NULL, err, "adding %s/%u peer %s to %s",
			       ip4(local, a), prefix_len, ip4(*peer, p), name);
	return request(nl, nlh, NULL, NULL, err, "adding %s/%u to %s", ip4(local, a), prefix_len,
		       name);
}

static int route_add4(struct cell_nl *nl, const char *name, struct in_addr dst, unsigned prefix_len,
		      const struct in_addr *gw, const char *what, struct cell_error *err)
{
	int index = link_index(nl, name, what, err);
	if (index < 0)
		return index;
	char buf[REQ_MAX] __attribute__((aligned(NLMSG_ALIGNTO)));
	struct nlmsghdr *nlh = new_msg(buf, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_EXCL);
	struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
	rtm->rtm_family = AF_INET;
	rtm->rtm_dst_len = (unsigned char)prefix_len;
	rtm->rtm_table = RT_TABLE_MAIN;
	rtm->rtm_protocol = RTPROT_STATIC;
	rtm->rtm_type = RTN_UNICAST;
	/* Via a device only: the destination is on the link. Via a gateway: anywhere. */
	rtm->rtm_scope = gw ? RT_SCOPE_UNIVERSE : RT_SCOPE_LINK;
	if (gw)
		rtm->rtm_flags = RTNH_F_ONLINK;
	if (prefix_len > 0)
		mnl_attr_put(nlh, RTA_DST, sizeof(dst), &dst);
	if (gw)
		mnl_attr_put(nlh, RTA_GATEWAY, sizeof(*gw), gw);
	mnl_attr_put_u32(nlh, RTA_OIF, (uint32_t)index);
	return request(nl, nlh, NULL, NULL, err, "%s", what);
}

int cell_nl_route_add4_dev(struct cell_nl *nl, const char *name, struct in_addr dst,
			   unsigned prefix_len, struct cell_error *err)
{
	int r;
	char d[INET_ADDRSTRLEN];
	if ((r = check_name("adding a route", name, err)) < 0 ||
	    (r = check_handle(nl, "adding a route", err)) < 0)
		return r;
	if (prefix_len > 32)
		return cell_err_msg(err, EINVAL,
				    "adding a route to %s/%u via %s: a prefix length is 0 to 32",
				    ip4(dst, d), prefix_len, name);
	char what[128];
	snprintf(what, sizeof(what), "adding the route %s/%u dev %s", ip4(dst, d), prefix_len,
		 name);
	return route_add4(nl, name, dst, prefix_len, NULL, what, err);
}

int cell_nl_route_add4_default_onlink(struct cell_nl *nl, const char *name, struct in_addr gw,
				      struct cell_error *err)
{
	int r;
	char g[INET_ADDRSTRLEN];
	if ((r = check_name("adding a default route", name, err)) < 0 ||
	    (r = check_handle(nl, "adding a default route", err)) < 0)
		return r;
	char what[128];
	snprintf(what, sizeof(what), "adding the default route via %s dev %s onlink", ip4(gw, g),
		 name);
	return route_add4(nl, name, (struct in_addr){0}, 0, &gw, what, err);
}

/* ---- sysctls of a namespace ---- */

#define SYSCTL_PATH_MAX 255

static bool sysctl_path_valid(const char *path)
{
	size_t len = strnlen(path, SYSCTL_PATH_MAX + 1);
	if (len > SYSCTL_PATH_MAX || strncmp(path, "net/", 4))
		return false;
	/* Components of [A-Za-z0-9_.-], none empty, "." or "..". */
	const char *c = path + 4;
	for (;;) {
		const char *end = strchrnul(c, '/');
		size_t n = (size_t)(end - c);
		if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
			return false;
		for (const char *p = c; p < end; p++)
			if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
			      (*p >= '0' && *p <= '9') || *p == '_' || *p == '.' || *p == '-'))
				return false;
		if (!*end)
			return true;
		c = end + 1;
	}
}

struct sysctl_job {
	const char *path; /* below net/ */
	const char *value;
};

static int sysctl_fn(void *arg, struct cell_error *err)
{
	struct sysctl_job *job = arg;
	/* /proc/sys/net shows the network sysctls of the opener's (this thread's) namespace. */
	_cleanup_close_ int dir = open("/proc/sys/net", O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (dir < 0)
		return cell_err(err, errno, "opening /proc/sys/net");
	struct open_how how = {.flags = O_WRONLY | O_CLOEXEC | O_NOCTTY,
			       .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
					  RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};
	_cleanup_close_ int fd = (int)syscall(SYS_openat2, dir, job->path + 4, &how, sizeof(how));
	if (fd < 0)
		return cell_err(err, errno, "opening /proc/sys/%s", job->path);
	size_t len = strlen(job->value);
	ssize_t n = write(fd, job->value, len);
	if (n < 0)
		return cell_err(err, errno, "writing '%s' to /proc/sys/%s", job->value, job->path);
	if ((size_t)n != len)
		return cell_err_msg(err, EIO, "writing '%s' to /proc/sys/%s: short write",
				    job->value, job->path);
	return 0;
}

int cell_net_sysctl(int netns_fd, const char *path, const char *value, struct cell_error *err)
{
	if (!path || !sysctl_path_valid(path))
		return cell_err_msg(err, EINVAL,
				    "sysctl '%.64s': not a path net/... of [A-Za-z0-9_.-] "
				    "components, at most %d bytes",
				    path ? path : "(null)", SYSCTL_PATH_MAX);
	if (!value || strnlen(value, 64) >= 64 || strpbrk(value, "\n"))
		return cell_err_msg(err, EINVAL, "sysctl %s: the value is no single short line",
				    path);
	struct sysctl_job job = {.path = path, .value = value};
	return in_netns(netns_fd, sysctl_fn, &job, err);
}
