/* celld's log of the packets its nftables table drops (netlog.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "cell/id.h"
#include "cell/log.h"
#include "cell/nft.h"
#include "netlog.h"

#define SEC_NS 1000000000ull
/* Interfaces the thread keeps a window for at once; past it, the newcomers share one. */
#define IFS_CAP	 1024
#define IFS_LIVE 512
/* An interface silent this long is forgotten (its window has nothing left to say). */
#define IDLE_NS (10 * SEC_NS)
/* The socket's receive buffer: a second of every rule's burst of many sandboxes. */
#define RCVBUF (1 << 20)

static const struct {
	const char *prefix, *why;
} reasons[] = {
    {"spoofed", "spoofed source address"},
    {"blocked", "blocked range"},
    {"denied", "not allowed by its policy"},
    {"host", "the host: only its DNS resolver is open"},
    {"ipv6", "IPv6: sandboxes have none"},
    {"dns", "DNS to a resolver other than its own"},
    {"conntrack", "over its bound of tracked connections"},
};

/* ---- parsing ---- */

/* The attributes after the nfgenmsg, the first of each type into tb: -EINVAL unless they
 * tile the message exactly (libmnl's walk stops quietly at a bad one). */
static int attrs(const struct nlmsghdr *nlh, const struct nlattr **tb)
{
	size_t off = MNL_NLMSG_HDRLEN + MNL_ALIGN(sizeof(struct nfgenmsg));
	if (off > nlh->nlmsg_len)
		return -EINVAL;
	while (off < nlh->nlmsg_len) {
		size_t left = nlh->nlmsg_len - off;
		const struct nlattr *a = (const struct nlattr *)((const char *)nlh + off);
		if (left < sizeof(*a) || a->nla_len < sizeof(*a) || a->nla_len > left)
			return -EINVAL;
		uint16_t type = mnl_attr_get_type(a);
		if (type <= NFULA_MAX && !tb[type])
			tb[type] = a;
		off += MNL_ALIGN(a->nla_len);
	}
	return 0;
}

static void parse_ipv4(const uint8_t *ip, size_t len, struct netlog_packet *p)
{
	size_t ihl = (size_t)(ip[0] & 0x0f) * 4;
	if (len < 20 || ihl < 20 || ihl > len)
		return;
	p->family = AF_INET;
	p->proto = ip[9];
	memcpy(p->src, ip + 12, 4);
	memcpy(p->dst, ip + 16, 4);
	uint16_t frag = (uint16_t)(ip[6] << 8 | ip[7]);
	if (frag & 0x1fff)
		return; /* not the first fragment: no transport header */
	const uint8_t *l4 = ip + ihl;
	size_t l4len = len - ihl;
	if ((p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) && l4len >= 4) {
		p->has_ports = true;
		p->sport = (uint16_t)(l4[0] << 8 | l4[1]);
		p->dport = (uint16_t)(l4[2] << 8 | l4[3]);
	} else if (p->proto == IPPROTO_ICMP && l4len >= 1) {
		p->has_icmp = true;
		p->icmp_type = l4[0];
	}
}

static void parse_ipv6(const uint8_t *ip, size_t len, struct netlog_packet *p)
{
	if (len < 40)
		return;
	p->family = AF_INET6;
	p->proto = ip[6];
	memcpy(p->src, ip + 8, 16);
	memcpy(p->dst, ip + 24, 16);
	const uint8_t *l4 = ip + 40;
	size_t l4len = len - 40;
	if ((p->proto == IPPROTO_TCP || p->proto == IPPROTO_UDP) && l4len >= 4) {
		p->has_ports = true;
		p->sport = (uint16_t)(l4[0] << 8 | l4[1]);
		p->dport = (uint16_t)(l4[2] << 8 | l4[3]);
	} else if (p->proto == IPPROTO_ICMPV6 && l4len >= 1) {
		p->has_icmp = true;
		p->icmp_type = l4[0];
	}
}

int netlog_parse(const void *msg, size_t len, struct netlog_packet *out)
{
	memset(out, 0, sizeof(*out));
	const struct nlmsghdr *nlh = msg;
	if (!msg || len < sizeof(*nlh) || nlh->nlmsg_len > len ||
	    nlh->nlmsg_len < MNL_NLMSG_HDRLEN + sizeof(struct nfgenmsg) ||
	    nlh->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
		return -EINVAL;
	const struct nlattr *tb[NFULA_MAX + 1] = {0};
	if (attrs(nlh, tb) < 0)
		return -EINVAL;
	/* Sizes first: a message with one bad attribute is refused whole. */
	if (tb[NFULA_PREFIX] && mnl_attr_validate(tb[NFULA_PREFIX], MNL_TYPE_NUL_STRING) < 0)
		return -EINVAL;
	static const int ifattrs[] = {NFULA_IFINDEX_INDEV, NFULA_IFINDEX_PHYSINDEV};
	for (size_t i = 0; i < sizeof(ifattrs) / sizeof(ifattrs[0]); i++)
		if (tb[ifattrs[i]] && mnl_attr_validate(tb[ifattrs[i]], MNL_TYPE_U32) < 0)
			return -EINVAL;
	if (!tb[NFULA_PREFIX])
		return -ENOENT;
	const char *prefix = mnl_attr_get_str(tb[NFULA_PREFIX]);
	size_t k = 0;
	while (k < sizeof(reasons) / sizeof(reasons[0]) && strcmp(prefix, reasons[k].prefix))
		k++;
	if (k == sizeof(reasons) / sizeof(reasons[0]))
		return -ENOENT;
	snprintf(out->reason, sizeof(out->reason), "%s", reasons[k].prefix);
	const struct nlattr *dev =
	    tb[NFULA_IFINDEX_INDEV] ? tb[NFULA_IFINDEX_INDEV] : tb[NFULA_IFINDEX_PHYSINDEV];
	if (dev)
		out->ifindex = ntohl(mnl_attr_get_u32(dev));
	if (tb[NFULA_PAYLOAD]) {
		const uint8_t *ip = mnl_attr_get_payload(tb[NFULA_PAYLOAD]);
		size_t iplen = mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]);
		if (iplen >= 1 && ip[0] >> 4 == 4)
			parse_ipv4(ip, iplen, out);
		else if (iplen >= 1 && ip[0] >> 4 == 6)
			parse_ipv6(ip, iplen, out);
	}
	return 0;
}

static const char *why_of(const char *prefix)
{
	for (size_t i = 0; i < sizeof(reasons) / sizeof(reasons[0]); i++)
		if (!strcmp(prefix, reasons[i].prefix))
			return reasons[i].why;
	return prefix;
}

/* "198.19.0.3:41234", "[2001:db8::1]:80" or the bare address. */
static void endpoint(const struct netlog_packet *p, const uint8_t *addr, uint16_t port, char *buf,
		     size_t size)
{
	char a[INET6_ADDRSTRLEN];
	if (!inet_ntop(p->family, addr, a, sizeof(a)))
		snprintf(a, sizeof(a), "?");
	bool v6 = p->family == AF_INET6;
	if (p->has_ports)
		snprintf(buf, size, "%s%s%s:%u", v6 ? "[" : "", a, v6 ? "]" : "", port);
	else
		snprintf(buf, size, "%s", a);
}

void netlog_describe(const struct netlog_packet *p, char *buf, size_t size)
{
	const char *why = why_of(p->reason);
	if (p->family != AF_INET && p->family != AF_INET6) {
		snprintf(buf, size, "blocked a packet (%s)", why);
		return;
	}
	char proto[16], s[64], d[64], extra[24] = "";
	switch (p->proto) {
	case IPPROTO_TCP:
		snprintf(proto, sizeof(proto), "tcp");
		break;
	case IPPROTO_UDP:
		snprintf(proto, sizeof(proto), "udp");
		break;
	case IPPROTO_ICMP:
		snprintf(proto, sizeof(proto), "icmp");
		break;
	case IPPROTO_ICMPV6:
		snprintf(proto, sizeof(proto), "icmpv6");
		break;
	default:
		snprintf(proto, sizeof(proto), "proto %u", p->proto);
	}
	if (p->has_icmp)
		snprintf(extra, sizeof(extra), " type %u", p->icmp_type);
	endpoint(p, p->src, p->sport, s, sizeof(s));
	endpoint(p, p->dst, p->dport, d, sizeof(d));
	snprintf(buf, size, "blocked %s %s -> %s%s (%s)", proto, s, d, extra, why);
}

/* ---- rate windows ---- */

uint64_t netlog_window_flush(struct netlog_window *w, uint64_t now)
{
	if (w->lines == 0 && w->suppressed == 0)
		return 0;
	if (now - w->start_ns < SEC_NS)
		return 0;
	uint64_t n = w->suppressed;
	*w = (struct netlog_window){0};
	return n;
}

bool netlog_window_take(struct netlog_window *w, uint64_t now, uint64_t *ended)
{
	*ended = netlog_window_flush(w, now);
	if (w->lines == 0 && w->suppressed == 0)
		w->start_ns = now;
	if (w->lines >= NETLOG_LINES_PER_S) {
		w->suppressed++;
		return false;
	}
	w->lines++;
	return true;
}

/* ---- the thread ---- */

/* One interface's window and whose it is (looked up when a line names it). */
struct iface {
	bool used;
	uint32_t ifindex;
	bool known; /* id holds its sandbox */
	char name[IFNAMSIZ];
	char id[CELL_ID_MAX + 1];
	uint64_t last_ns;
	struct netlog_window w;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* start/stop, stats */
static bool running;
static struct netlog_stats stats;
static pthread_t thread;
/* Set before the thread starts, read-only while it runs. */
static struct mnl_socket *nl;
static int wakefd = -1;
static netlog_lookup_fn *lookup_fn;
static netlog_denied_fn *denied_fn;

void netlog_on_denied(netlog_denied_fn *fn)
{
	denied_fn = fn;
}
/* The thread's own. */
static struct iface *ifs; /* IFS_CAP slots, open addressing on ifindex */
static size_t n_ifs;
static struct iface overflow; /* the interfaces that found the table full */

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * SEC_NS + (uint64_t)ts.tv_nsec;
}

static struct iface *iface_of(uint32_t ifindex)
{
	size_t i = (ifindex * 2654435761u) & (IFS_CAP - 1);
	for (size_t n = 0; n < IFS_CAP; n++, i = (i + 1) & (IFS_CAP - 1)) {
		if (ifs[i].used && ifs[i].ifindex == ifindex)
			return &ifs[i];
		if (!ifs[i].used) {
			if (n_ifs >= IFS_LIVE)
				break;
			memset(&ifs[i], 0, sizeof(ifs[i]));
			ifs[i].used = true;
			ifs[i].ifindex = ifindex;
			n_ifs++;
			return &ifs[i];
		}
	}
	return &overflow;
}

/* Who the interface is: its name now, and its sandbox (asked until one is found: the
 * interface's index is never reused for another sandbox's while this entry lives). */
static void identify(struct iface *f)
{
	if (f->known || f == &overflow)
		return;
	char name[IF_NAMESIZE] = "";
	if (f->ifindex && if_indextoname(f->ifindex, name))
		snprintf(f->name, sizeof(f->name), "%s", name);
	if (f->name[0] && lookup_fn && lookup_fn(f->name, f->id, sizeof(f->id)))
		f->known = true;
}

/* "sandbox <id>", "interface cell7 (no sandbox)", … */
static void who(const struct iface *f, char *buf, size_t size)
{
	if (f == &overflow)
		snprintf(buf, size, "network: a sandbox (too many interfaces to tell apart)");
	else if (f->known)
		snprintf(buf, size, "sandbox %s", f->id);
	else if (f->name[0])
		snprintf(buf, size, "network: interface %s (no sandbox)", f->name);
	else
		snprintf(buf, size, "network: interface %u (gone)", f->ifindex);
}

static void say_suppressed(const struct iface *f, uint64_t n)
{
	char w[128];
	who(f, w, sizeof(w));
	log_warn("%s: blocked %llu more packets, not logged (at most %d lines a second)", w,
		 (unsigned long long)n, NETLOG_LINES_PER_S);
}

static void on_packet(const struct netlog_packet *p, uint64_t now)
{
	struct iface *f = iface_of(p->ifindex);
	f->last_ns = now;
	uint64_t ended;
	bool write = netlog_window_take(&f->w, now, &ended);
	if (ended)
		say_suppressed(f, ended);
	pthread_mutex_lock(&lock);
	stats.packets++;
	if (write)
		stats.lines++;
	else
		stats.suppressed++;
	pthread_mutex_unlock(&lock);
	if (!write)
		return;
	identify(f);
	char w[128], what[256];
	who(f, w, sizeof(w));
	netlog_describe(p, what, sizeof(what));
	log_warn("%s: %s", w, what);
	if (f->known && denied_fn)
		denied_fn(f->id, p);
}

static bool idle(const struct iface *f, uint64_t now)
{
	return now - f->last_ns >= IDLE_NS && !f->w.lines && !f->w.suppressed;
}

/* Every window that ended: its "more" line. Every silent interface: forgotten (the table
 * rebuilt without it: open addressing has no deletion). The time the next window ends, or
 * UINT64_MAX. */
static uint64_t sweep(uint64_t now)
{
	uint64_t next = UINT64_MAX;
	size_t stay = 0;
	for (size_t i = 0; i <= IFS_CAP; i++) {
		struct iface *f = i < IFS_CAP ? &ifs[i] : &overflow;
		if (i < IFS_CAP && !f->used)
			continue;
		uint64_t n = netlog_window_flush(&f->w, now);
		if (n)
			say_suppressed(f, n);
		if ((f->w.lines || f->w.suppressed) && f->w.start_ns + SEC_NS < next)
			next = f->w.start_ns + SEC_NS;
		if (i < IFS_CAP && !idle(f, now))
			stay++;
	}
	if (stay == n_ifs)
		return next;
	struct iface *old = ifs, *fresh = calloc(IFS_CAP, sizeof(*fresh));
	if (!fresh)
		return next; /* kept, forgotten at a later sweep */
	ifs = fresh;
	n_ifs = 0;
	for (size_t i = 0; i < IFS_CAP; i++)
		if (old[i].used && !idle(&old[i], now))
			*iface_of(old[i].ifindex) = old[i];
	free(old);
	return next;
}

static void on_readable(char *buf, size_t size)
{
	int fd = mnl_socket_get_fd(nl);
	for (;;) {
		ssize_t got = recv(fd, buf, size, MSG_DONTWAIT);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {
				pthread_mutex_lock(&lock);
				stats.lost++;
				pthread_mutex_unlock(&lock);
				continue;
			}
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				log_debug("network: packet log: %s", strerror(errno));
			return;
		}
		uint64_t now = now_ns();
		size_t left = (size_t)got;
		const struct nlmsghdr *h = (const struct nlmsghdr *)buf;
		while (left >= sizeof(*h) && h->nlmsg_len >= sizeof(*h) && h->nlmsg_len <= left) {
			struct netlog_packet p;
			int r = netlog_parse(h, left, &p);
			if (r == 0) {
				on_packet(&p, now);
			} else if (h->nlmsg_type != NLMSG_ERROR && h->nlmsg_type != NLMSG_DONE) {
				pthread_mutex_lock(&lock);
				if (r == -ENOENT)
					stats.ignored++;
				else
					stats.malformed++;
				pthread_mutex_unlock(&lock);
			}
			size_t step = NLMSG_ALIGN(h->nlmsg_len);
			if (step >= left)
				break;
			left -= step;
			h = (const struct nlmsghdr *)((const char *)h + step);
		}
	}
}

static void *netlog_thread(void *arg)
{
	(void)arg;
	char *buf = malloc(1 << 16);
	if (!buf) {
		log_error("network: packet log: no memory for its buffer; not logging");
		return NULL;
	}
	uint64_t next = UINT64_MAX, lost_said = 0;
	for (;;) {
		uint64_t now = now_ns();
		int timeout = -1;
		if (next != UINT64_MAX)
			timeout = next > now ? (int)((next - now + 999999) / 1000000) : 0;
		else if (n_ifs)
			timeout = 1000; /* to forget silent interfaces */
		struct pollfd pf[2] = {{.fd = mnl_socket_get_fd(nl), .events = POLLIN},
				       {.fd = wakefd, .events = POLLIN}};
		int n = poll(pf, 2, timeout);
		if (n < 0 && errno != EINTR)
			log_error("network: packet log: poll: %s", strerror(errno));
		if (n > 0 && pf[1].revents)
			break;
		if (n > 0 && pf[0].revents)
			on_readable(buf, 1 << 16);
		next = sweep(now_ns());
		pthread_mutex_lock(&lock);
		uint64_t lost = stats.lost;
		pthread_mutex_unlock(&lock);
		if (lost > lost_said) {
			log_warn("network: packet log: the kernel dropped log messages %llu times "
				 "(its socket buffer was full): some blocked packets went unlogged",
				 (unsigned long long)(lost - lost_said));
			lost_said = lost;
		}
	}
	free(buf);
	return NULL;
}

/* Bind the group: copy the headers only, every packet at once. */
static int bind_group(uint16_t group, struct cell_error *err)
{
	char buf[MNL_SOCKET_BUFFER_SIZE];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK;
	nlh->nlmsg_seq = 1;
	struct nfgenmsg *nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(group);
	struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
	mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
	struct nfulnl_msg_config_mode mode = {.copy_range = htonl(CELL_NFT_LOG_SNAPLEN),
					      .copy_mode = NFULNL_COPY_PACKET};
	mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
	mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1));
	if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
		return cell_err(err, errno, "packet log: binding NFLOG group %u", group);
	uint32_t portid = mnl_socket_get_portid(nl);
	struct pollfd pf = {.fd = mnl_socket_get_fd(nl), .events = POLLIN};
	for (;;) {
		int n = poll(&pf, 1, 2000);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return cell_err_msg(err, ETIMEDOUT,
					    "packet log: binding NFLOG group %u: no answer", group);
		ssize_t got = recv(pf.fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (got < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (got < 0)
			return cell_err(err, errno, "packet log: binding NFLOG group %u", group);
		int r = mnl_cb_run(buf, (size_t)got, 1, portid, NULL, NULL);
		if (r == MNL_CB_STOP || r == MNL_CB_OK)
			return 0;
		/* The kernel's answer when another socket holds the group. */
		if (errno == EPERM || errno == EBUSY)
			return cell_err_msg(
			    err, EBUSY,
			    "packet log: NFLOG group %u is bound by another program "
			    "of this network namespace (another celld? give each its "
			    "own --nflog-group)",
			    group);
		return cell_err(err, errno, "packet log: binding NFLOG group %u", group);
	}
}

int netlog_start(uint16_t group, netlog_lookup_fn *lookup, struct cell_error *err)
{
	if (group == 0)
		return cell_err_msg(err, EINVAL, "packet log: NFLOG group 0");
	pthread_mutex_lock(&lock);
	if (running) {
		pthread_mutex_unlock(&lock);
		return 0;
	}
	int rc;
	ifs = calloc(IFS_CAP, sizeof(*ifs));
	n_ifs = 0;
	memset(&overflow, 0, sizeof(overflow));
	wakefd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	if (!ifs || wakefd < 0 || !nl) {
		rc = cell_err(err, errno ? errno : ENOMEM, "packet log: its socket");
		goto fail;
	}
	if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rc = cell_err(err, errno, "packet log: binding its netlink socket");
		goto fail;
	}
	int size = RCVBUF, fd = mnl_socket_get_fd(nl);
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0 &&
	    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size)) < 0)
		log_debug("network: packet log: its receive buffer: %s", strerror(errno));
	rc = bind_group(group, err);
	if (rc < 0)
		goto fail;
	lookup_fn = lookup;
	memset(&stats, 0, sizeof(stats));
	int e = pthread_create(&thread, NULL, netlog_thread, NULL);
	if (e != 0) {
		rc = cell_err(err, e, "packet log: starting its thread");
		goto fail;
	}
	running = true;
	pthread_mutex_unlock(&lock);
	return 0;
fail:
	if (nl)
		mnl_socket_close(nl);
	nl = NULL;
	if (wakefd >= 0)
		close(wakefd);
	wakefd = -1;
	free(ifs);
	ifs = NULL;
	pthread_mutex_unlock(&lock);
	return rc;
}

void netlog_stop(void)
{
	pthread_mutex_lock(&lock);
	if (!running) {
		pthread_mutex_unlock(&lock);
		return;
	}
	uint64_t one = 1;
	if (write(wakefd, &one, sizeof(one)) < 0)
		log_debug("network: packet log: wake: %s", strerror(errno));
	pthread_mutex_unlock(&lock);
	pthread_join(thread, NULL);
	pthread_mutex_lock(&lock);
	mnl_socket_close(nl);
	nl = NULL;
	close(wakefd);
	wakefd = -1;
	free(ifs);
	ifs = NULL;
	n_ifs = 0;
	running = false;
	pthread_mutex_unlock(&lock);
}

void netlog_stats(struct netlog_stats *out)
{
	pthread_mutex_lock(&lock);
	*out = stats;
	pthread_mutex_unlock(&lock);
}
