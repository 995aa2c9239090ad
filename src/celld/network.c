/* A sandbox's network: see network.h. The order of a sandbox's set-up is the safety
 * argument: its nftables chain exists before either end of its veth comes up, so no packet
 * of it passes unpoliced; its resolver socket exists before the first command runs. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/fsutil.h"
#include "cell/log.h"
#include "cell/netlink.h"
#include "cell/nft.h"
#include "audit.h"
#include "config.h"
#include "events.h"
#include "netlog.h"
#include "network.h"
#include "registry.h"
#include "resolver.h"
#include "sandbox.h"
#include "store.h"

#define PUBLIC_FILE  "network/public.json"
#define LIMITED_FILE "network/limited.json"
#define LIMITED_MAX  (256 * 1024)
#define LIMITS_FILE  "network/limits.json"
/* trackedConnectionsPerSandbox: its default (a policies dir without the file), its range. */
#define CONNS_DEFAULT 16384
#define CONNS_MIN     64
#define CONNS_MAX     (1 << 20)
/* In the state dir: the table of this state dir was made once, so a restart reconciles it
 * even when no sandbox it adopts has a network. */
#define MARKER_FILE "network"
/* Beside it: net.ipv4.ip_forward's value before celld turned it on, kept across restarts
 * (sandboxes outlive celld) until a stop with no networked sandbox puts it back. */
#define FORWARD_FILE "network.ip_forward"

static const char *const mode_names[] = {
    [NETWORK_NONE] = "none",
    [NETWORK_PUBLIC] = "public",
    [NETWORK_LIMITED] = "limited",
    [NETWORK_CUSTOM] = "custom",
};

/* The host side: made once, at the first sandbox with a network (net.ready). */
static struct {
	pthread_mutex_t lock; /* the host's rtnetlink handle, set-up and tear-down of sandboxes */
	bool ready;
	struct cell_nft *nft; /* has its own lock; fixed once ready */
	struct cell_nl host;
	char table[CELL_NFT_NAME_MAX];
	struct cell_nft_range *blocked;
	size_t n_blocked;
	struct netpolicy limited;
	uint32_t max_conns; /* limits.json: trackedConnectionsPerSandbox */
} net = {.lock = PTHREAD_MUTEX_INITIALIZER, .max_conns = CONNS_DEFAULT};

/* Where a sandbox is: its host-side interface and the two addresses of its pair. */
struct sb_link {
	char ifname[IFNAMSIZ];
	struct in_addr host, addr;
};

const char *network_mode_name(enum network_mode mode)
{
	return mode_names[mode];
}

int network_mode_parse(const char *name, enum network_mode *out)
{
	for (size_t i = 0; i < CELL_ARRAY_SIZE(mode_names); i++) {
		if (name && !strcmp(name, mode_names[i])) {
			*out = (enum network_mode)i;
			return 0;
		}
	}
	return -EINVAL;
}

static int sb_link_of(int slot, struct sb_link *l, struct cell_error *err)
{
	uint64_t size = 1ull << (32 - celld.subnet_prefix);
	uint64_t host = 2ull * ((uint64_t)slot + 1);
	if (slot < 0 || host + 2 >= size)
		return cell_err_msg(err, ENOSPC,
				    "uid slot %d has no address in --subnet: it has room for %llu "
				    "sandboxes",
				    slot, (unsigned long long)(size / 2 - 2));
	l->host.s_addr = htonl(celld.subnet + (uint32_t)host);
	l->addr.s_addr = htonl(celld.subnet + (uint32_t)host + 1);
	snprintf(l->ifname, sizeof(l->ifname), "cell%d", slot);
	return 0;
}

/* The link sb was given at its start, as its record says (its addresses stay what they
 * were should --subnet change while it runs); from its slot for a record without them. */
static int recorded_link(struct sandbox *sb, struct sb_link *l, struct cell_error *err)
{
	int r = sb_link_of(sb->slot, l, err);
	snprintf(l->ifname, sizeof(l->ifname), "cell%d", sb->slot);
	registry_lock();
	const char *a = json_string_value(json_object_get(sb->network, "address"));
	const char *g = json_string_value(json_object_get(sb->network, "gateway"));
	struct in_addr ra, rg;
	if (a && g && inet_pton(AF_INET, a, &ra) == 1 && inet_pton(AF_INET, g, &rg) == 1) {
		l->addr = ra;
		l->host = rg;
		r = 0;
	}
	registry_unlock();
	return r;
}

/* Record the link sb was given (saved with the Running record that follows its start). */
static void record_link(struct sandbox *sb, const struct sb_link *l)
{
	char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &l->addr, a, sizeof(a));
	inet_ntop(AF_INET, &l->host, g, sizeof(g));
	registry_lock();
	json_t *o = json_copy(sb->network);
	if (o && !json_object_set_new(o, "address", json_string(a)) &&
	    !json_object_set_new(o, "gateway", json_string(g))) {
		json_t *prev = sb->network;
		sb->network = o;
		o = prev;
	}
	registry_unlock();
	json_decref(o);
}

/* ---- policies ---- */

/* A JSON file of the policies dir into *root (json_decref); with optional, 0 and *root NULL
 * when the file is not there. */
static int read_policy(const char *file, bool optional, json_t **root, struct cell_error *err)
{
	*root = NULL;
	_cleanup_free_ char *text = NULL;
	struct cell_error rerr = {0};
	int r = cell_read_file_at(celld.policies_fd, file, LIMITED_MAX, &text, NULL, &rerr);
	if (r == -ENOENT && optional)
		return 0;
	if (r < 0)
		return cell_err_msg(err, -r, "%s/%s: %s", celld.policies_dir, file, rerr.msg);
	json_error_t jerr;
	*root = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!*root)
		return cell_err_msg(err, EINVAL, "%s/%s: line %d: %s", celld.policies_dir, file,
				    jerr.line, jerr.text);
	return 0;
}

static int load_limited(struct cell_error *err)
{
	json_t *root;
	int r = read_policy(LIMITED_FILE, false, &root, err);
	if (r < 0)
		return r;
	r = netpolicy_from_json(json_object_get(root, "networkPolicy"), "networkPolicy",
				&net.limited, err);
	json_decref(root);
	if (r < 0)
		cell_err_wrap(err, "%s/%s: ", celld.policies_dir, LIMITED_FILE);
	return r;
}

/* network/limits.json, when the policies dir has it (else the default stays). */
static int load_limits(struct cell_error *err)
{
	json_t *root;
	int r = read_policy(LIMITS_FILE, true, &root, err);
	if (r < 0 || !root)
		return r;
	json_t *v = json_object_get(root, "trackedConnectionsPerSandbox");
	json_int_t n = json_integer_value(v);
	if (v && (!json_is_integer(v) || n < CONNS_MIN || n > CONNS_MAX))
		r = cell_err_msg(err, EINVAL,
				 "%s/%s: trackedConnectionsPerSandbox: an integer from %d to %d",
				 celld.policies_dir, LIMITS_FILE, CONNS_MIN, CONNS_MAX);
	else if (v)
		net.max_conns = (uint32_t)n;
	json_decref(root);
	return r;
}

int network_load_policies(struct cell_error *err)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", celld.policies_dir, PUBLIC_FILE);
	int r = cell_nft_policy_load(path, &net.blocked, &net.n_blocked, err);
	if (r == 0)
		r = load_limited(err);
	if (r == 0)
		r = load_limits(err);
	if (r == 0)
		r = cell_nft_table_name(celld.state_dir, net.table, sizeof(net.table));
	return r;
}

/* resourceLimits["cell.egress"]: "<n>[.<frac>]{bit,Kbit,Mbit,Gbit}" (decimal units, as
 * tc spells them) into bytes a second, 64Kbit to 100Gbit. */
#define EGRESS_FIELD "resourceLimits.cell.egress"
static int parse_egress(const char *text, uint64_t *out, struct cell_error *err)
{
	char *end = NULL;
	double v = text && *text >= '0' && *text <= '9' ? strtod(text, &end) : -1;
	double scale = 0;
	if (end && !strcasecmp(end, "bit"))
		scale = 1;
	else if (end && !strcasecmp(end, "kbit"))
		scale = 1e3;
	else if (end && !strcasecmp(end, "mbit"))
		scale = 1e6;
	else if (end && !strcasecmp(end, "gbit"))
		scale = 1e9;
	double bits = v * scale;
	if (!scale || bits < 64e3 || bits > 100e9)
		return cell_err_msg(err, EINVAL,
				    EGRESS_FIELD
				    " '%.32s': expected a rate from 64Kbit to 100Gbit, "
				    "such as \"20Mbit\"",
				    text ? text : "");
	*out = (uint64_t)(bits / 8);
	return 0;
}

static uint64_t egress_of(struct sandbox *sb)
{
	registry_lock();
	uint64_t v =
	    (uint64_t)json_integer_value(json_object_get(sb->network, "egressBytesPerSecond"));
	registry_unlock();
	return v;
}

static bool netpolicy_allows_any(const struct netpolicy *p)
{
	bool any = p->default_allow;
	for (size_t i = 0; i < p->n; i++)
		any = any || p->rules[i].allow;
	return any;
}

static int network_spec_mode(const char *mode_name, json_t *policy_json, json_t **out,
			     struct cell_error *err);

int network_spec(const char *mode_name, json_t *policy_json, json_t *resource_limits, json_t **out,
		 struct cell_error *err)
{
	json_t *egress = json_object_get(resource_limits, "cell.egress");
	uint64_t rate = 0;
	int r = egress ? parse_egress(json_string_value(egress), &rate, err) : 0;
	if (r == 0)
		r = network_spec_mode(mode_name, policy_json, out, err);
	if (r == 0 && rate && !strcmp(json_string_value(json_object_get(*out, "mode")), "none"))
		r = cell_err_msg(err, EINVAL, EGRESS_FIELD ": the sandbox has no network to limit");
	if (r == 0 && rate &&
	    json_object_set_new(*out, "egressBytesPerSecond", json_integer((json_int_t)rate)))
		r = -ENOMEM;
	if (r < 0) {
		json_decref(*out);
		*out = NULL;
	}
	return r;
}

static int network_spec_mode(const char *mode_name, json_t *policy_json, json_t **out,
			     struct cell_error *err)
{
	enum network_mode mode = NETWORK_NONE;
	*out = NULL;
	if (mode_name && (network_mode_parse(mode_name, &mode) < 0 || mode == NETWORK_CUSTOM))
		return cell_err_msg(err, EINVAL,
				    "extensions.cell.network must be none, public or limited");
	if (mode_name && policy_json && mode != NETWORK_NONE)
		return cell_err_msg(err, EINVAL,
				    "extensions.cell.network and networkPolicy exclude each other: "
				    "networkPolicy alone sets the sandbox's egress");
	if (!policy_json) {
		if (!mode_name)
			network_mode_parse(celld.network_default, &mode);
		*out = json_pack("{s:s}", "mode", network_mode_name(mode));
		return *out ? 0 : -ENOMEM;
	}
	struct netpolicy p;
	int r = netpolicy_from_json(policy_json, "networkPolicy", &p, err);
	/* "none" with a policy that allows nothing: no interface at all (a policy that
	 * allows nothing alone gets one, for the egress API to open later). */
	if (r == 0 && mode_name && netpolicy_allows_any(&p))
		r = cell_err_msg(err, EINVAL,
				 "networkPolicy allows egress but extensions.cell.network is "
				 "\"none\"");
	if (r == 0 && mode_name) {
		*out = json_pack("{s:s}", "mode", "none");
		r = *out ? 0 : -ENOMEM;
	} else if (r == 0) {
		*out = json_pack("{s:s, s:o}", "mode", "custom", "policy", netpolicy_to_json(&p));
		r = *out ? 0 : -ENOMEM;
	}
	netpolicy_free(&p);
	return r;
}

/* sb's mode and, unless none, its policy in force (from the record; limited: the
 * operator's file as loaded now; public: allow all). */
static int policy_of(struct sandbox *sb, enum network_mode *mode, struct netpolicy *p,
		     struct cell_error *err)
{
	registry_lock();
	json_t *o = json_incref(sb->network);
	registry_unlock();
	memset(p, 0, sizeof(*p));
	const char *name = json_string_value(json_object_get(o, "mode"));
	int r = 0;
	*mode = NETWORK_NONE;
	if (o && network_mode_parse(name, mode) < 0)
		r = cell_err_msg(err, EINVAL, "state.json: network.mode '%s' is unknown",
				 name ? name : "");
	else if (*mode == NETWORK_PUBLIC)
		p->default_allow = true;
	else if (*mode == NETWORK_LIMITED)
		r = netpolicy_copy(&net.limited, p);
	else if (*mode == NETWORK_CUSTOM)
		r = netpolicy_from_json(json_object_get(o, "policy"), "state.json: network.policy",
					p, err);
	json_decref(o);
	return r;
}

static bool has_network(struct sandbox *sb)
{
	registry_lock();
	const char *name = json_string_value(json_object_get(sb->network, "mode"));
	bool on = name && strcmp(name, "none");
	registry_unlock();
	return on;
}

/* ---- the host side, once ---- */

static void on_answer(void *ctx, const char *key, const struct in_addr *addrs, size_t n,
		      unsigned ttl_s)
{
	(void)ctx;
	struct cell_error err = {0};
	if (cell_nft_allow_add(net.nft, key, addrs, n, ttl_s, &err) < 0)
		log_warn("network: pinning a DNS answer for %s: %s", key, err.msg);
}

static int upstream(struct sockaddr_in *up, struct cell_error *err)
{
	if (celld.dns_upstream)
		return resolver_parse_upstream(celld.dns_upstream, up, err);
	return resolver_default_upstream(up, err);
}

static int forwarding_on(struct cell_error *err)
{
	char v[4] = "";
	int fd = open("/proc/sys/net/ipv4/ip_forward", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t n = read(fd, v, sizeof(v) - 1);
		v[n > 0 ? n : 0] = '\0';
		close(fd);
	}
	if (v[0] == '1')
		return 0;
	int r = cell_net_sysctl(-1, "net/ipv4/ip_forward", "1", err);
	if (r < 0)
		return r;
	/* Only the first turn is recorded: a later start of celld finds forwarding on, ours. */
	fd = openat(celld.sandboxes_fd, "../" FORWARD_FILE,
		    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0) {
		if (write(fd, "0\n", 2) != 2)
			log_warn("network: recording that net.ipv4.ip_forward was off: %s",
				 strerror(errno));
		close(fd);
	}
	log_info("network: turned on IPv4 forwarding (net.ipv4.ip_forward was off; turned off "
		 "again when celld stops with no networked sandbox)");
	return 0;
}

/* At a stop: net.ipv4.ip_forward back off if celld turned it on and no sandbox of its
 * network is left (left is how many are), else left on and why said. */
static void forwarding_restore(size_t left)
{
	struct stat st;
	if (fstatat(celld.sandboxes_fd, "../" FORWARD_FILE, &st, AT_SYMLINK_NOFOLLOW) < 0)
		return;
	if (left) {
		log_info("network: net.ipv4.ip_forward left on: %zu sandbox%s with a network "
			 "outlive%s this stop and need it (off again at a stop with none left)",
			 left, left == 1 ? "" : "es", left == 1 ? "s" : "");
		return;
	}
	struct cell_error err = {0};
	if (cell_net_sysctl(-1, "net/ipv4/ip_forward", "0", &err) < 0) {
		log_warn("network: restoring net.ipv4.ip_forward: %s", err.msg);
		return;
	}
	unlinkat(celld.sandboxes_fd, "../" FORWARD_FILE, 0);
	log_info("network: net.ipv4.ip_forward turned off again, as celld found it");
}

static void mark_made(void)
{
	int fd = openat(celld.sandboxes_fd, "../" MARKER_FILE,
			O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd >= 0)
		close(fd);
}

static bool was_made(void)
{
	struct stat st;
	return fstatat(celld.sandboxes_fd, "../" MARKER_FILE, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* ---- the log of dropped packets (netlog.h) ---- */

/* netlog's lookup: the sandbox whose host-side interface is ifname. */
static bool sandbox_of_ifname(const char *ifname, char *id, size_t size)
{
	struct sandbox **v;
	size_t n = registry_snapshot(&v);
	bool found = false;
	for (size_t i = 0; i < n && !found; i++) {
		struct sb_link l;
		if (has_network(v[i]) && sb_link_of(v[i]->slot, &l, NULL) == 0 &&
		    !strcmp(l.ifname, ifname)) {
			snprintf(id, size, "%s", v[i]->id);
			found = true;
		}
	}
	sandbox_unref_all(v, n);
	return found;
}

#define AUDIT_DENIALS_PER_S 10 /* network.denied records of the audit log, all sandboxes */

/* A dropped packet the log wrote a line for: the sandbox's "network.denied" event and a
 * record in the audit log (so both are sampled as the log is). */
static void on_denied(const char *id, const struct netlog_packet *p)
{
	char dst[INET6_ADDRSTRLEN] = "";
	if ((p->family == AF_INET || p->family == AF_INET6) &&
	    !inet_ntop(p->family, p->dst, dst, sizeof(dst)))
		dst[0] = '\0';
	const char *proto = p->proto == IPPROTO_TCP	 ? "tcp"
			    : p->proto == IPPROTO_UDP	 ? "udp"
			    : p->proto == IPPROTO_ICMP	 ? "icmp"
			    : p->proto == IPPROTO_ICMPV6 ? "icmpv6"
							 : "other";
	json_t *d = json_pack("{s:s, s:s, s:s}", "reason", p->reason, "proto", proto, "dst", dst);
	if (d && p->has_ports)
		json_object_set_new(d, "port", json_integer(p->dport));
	if (!d)
		return;
	/* The audit log takes fewer, across all sandboxes together: denials a sandbox can
	 * cause at will must not rotate everyone's records out of it. (One thread calls this.) */
	static time_t second;
	static unsigned in_second;
	time_t now = time(NULL);
	if (now != second) {
		second = now;
		in_second = 0;
	}
	if (in_second < AUDIT_DENIALS_PER_S) {
		in_second++;
		audit_log_as("", "celld", id, "network.denied", json_incref(d));
	}
	events_emit(id, "network.denied", d);
}

/* Without the log, sandboxes still have their network: the drops do not depend on it. */
static void netlog_on(uint16_t group)
{
	struct cell_error err = {0};
	netlog_on_denied(on_denied);
	if (group == 0)
		log_info("network: no log of dropped packets");
	else if (netlog_start(group, sandbox_of_ifname, &err) < 0)
		log_warn("network: %s; dropped packets are not logged", err.msg);
	else
		log_info("network: logging dropped packets from NFLOG group %u", group);
}

/* The table, with the log's rules when it can: a kernel without nftables' log expression
 * (or nfnetlink_log) gets the table without them rather than no network. */
static int nft_open_logged(struct cell_nft_table_opts *opts, struct cell_error *err)
{
	struct cell_error lerr = {0};
	if (opts->log_group && cell_nft_open(opts, &net.nft, &lerr) == 0)
		return 0;
	if (opts->log_group)
		log_warn("network: %s; making the table without the log of dropped packets",
			 lerr.msg);
	opts->log_group = 0;
	return cell_nft_open(opts, &net.nft, err);
}

/* What else the host's nftables holds, in the log: celld leaves it as it is, but a base
 * chain that drops by default where sandboxes' packets pass overrides celld's accept. */
static void survey_host(void)
{
	struct cell_nft_survey sv;
	struct cell_error err = {0};
	if (cell_nft_survey(net.nft, &sv, &err) < 0) {
		log_warn("network: %s", err.msg);
		return;
	}
	if (sv.n_tables)
		log_info("network: other nftables tables on this host, left as they are: %s",
			 sv.tables);
	else
		log_info("network: no other nftables table on this host");
	bool many = sv.forward_drops + sv.input_drops > 1;
	if (sv.forward_drops || sv.input_drops)
		log_warn(
		    "network: %s drop%s by default where sandboxes' packets pass, and a packet "
		    "must pass every table: sandboxes %s unless %s accept%s their interfaces "
		    "(iifname \"cell*\" and oifname \"cell*\"; with Docker, in its "
		    "DOCKER-USER chain)",
		    sv.drops, many ? "" : "s",
		    sv.forward_drops ? "reach nothing" : "cannot resolve names",
		    many ? "they" : "it", many ? "" : "s");
}

static int ready_locked(struct cell_error *err)
{
	if (net.ready)
		return 0;
	struct sockaddr_in up;
	int r = upstream(&up, err);
	if (r < 0)
		return r;
	struct cell_nft_table_opts opts = {
	    .name = net.table,
	    .subnet = {htonl(celld.subnet)},
	    .prefix = celld.subnet_prefix,
	    .blocked = net.blocked,
	    .n_blocked = net.n_blocked,
	    .log_group = (uint16_t)celld.nflog_group,
	};
	r = nft_open_logged(&opts, err);
	if (r == 0)
		r = cell_nl_open(&net.host, -1, err);
	if (r == 0)
		r = forwarding_on(err);
	if (r == 0)
		r = resolver_start(&up, on_answer, NULL, err);
	if (r < 0) {
		cell_nl_close(&net.host);
		cell_nft_close(net.nft);
		net.nft = NULL;
		return cell_err_wrap(err, "setting up sandbox networking: "), r;
	}
	mark_made();
	netlog_on(opts.log_group);
	survey_host();
	char sub[INET_ADDRSTRLEN], dns[INET_ADDRSTRLEN];
	struct in_addr s = {htonl(celld.subnet)};
	inet_ntop(AF_INET, &s, sub, sizeof(sub));
	inet_ntop(AF_INET, &up.sin_addr, dns, sizeof(dns));
	log_info("network: table inet %s (%zu blocked ranges from %s/%s), subnet %s/%u, DNS "
		 "upstream %s:%u, at most %u tracked connections per sandbox",
		 net.table, net.n_blocked, celld.policies_dir, PUBLIC_FILE, sub,
		 celld.subnet_prefix, dns, ntohs(up.sin_port), net.max_conns);
	net.ready = true;
	return 0;
}

/* ---- one sandbox ---- */

/* p's name rules as the resolver takes them, in *out; returns the array *out points into
 * (the caller frees it), NULL when out of memory. */
static struct resolver_rule *resolver_rules_of(const struct netpolicy *p,
					       struct resolver_rules *out)
{
	struct resolver_rule *rules = calloc(p->n ? p->n : 1, sizeof(*rules));
	if (!rules)
		return NULL;
	size_t n = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct netpolicy_rule *rule = &p->rules[i];
		if (rule->kind != NETPOLICY_DOMAIN && rule->kind != NETPOLICY_WILDCARD)
			continue;
		rules[n].allow = rule->allow;
		snprintf(rules[n].pattern, sizeof(rules[n].pattern), "%s", rule->target);
		n++;
	}
	*out = (struct resolver_rules){.default_allow = p->default_allow, .rules = rules, .n = n};
	return rules;
}

/* The address rules of p as ns's ranges: what p allows (under defaultAction allow that
 * matters only for DNS to a resolver other than celld's), and what p denies;
 * policy_ranges_free frees them. */
static int policy_ranges(const struct netpolicy *p, struct cell_nft_sandbox *ns)
{
	struct cell_nft_range *allow = calloc(p->n + 1, sizeof(*allow));
	struct cell_nft_range *deny = calloc(p->n + 1, sizeof(*deny));
	if (!allow || !deny) {
		free(allow);
		free(deny);
		return -ENOMEM;
	}
	size_t na = 0, nd = 0;
	for (size_t i = 0; i < p->n; i++) {
		const struct netpolicy_rule *rule = &p->rules[i];
		if (rule->kind != NETPOLICY_IPV4 && rule->kind != NETPOLICY_CIDR4)
			continue;
		/* The host bits of a /prefix (a shift by 32 is undefined in C). */
		uint32_t host = rule->prefix >= 32 ? 0 : UINT32_MAX >> rule->prefix;
		struct cell_nft_range r = {rule->addr, rule->addr | host};
		if (rule->allow)
			allow[na++] = r;
		else
			deny[nd++] = r;
	}
	ns->allow_ranges = allow;
	ns->n_allow_ranges = na;
	ns->deny_ranges = deny;
	ns->n_deny_ranges = nd;
	return 0;
}

static void policy_ranges_free(struct cell_nft_sandbox *ns)
{
	free((void *)ns->allow_ranges);
	free((void *)ns->deny_ranges);
	ns->allow_ranges = ns->deny_ranges = NULL;
}

static int resolver_join(struct sandbox *sb, const struct sb_link *l, const struct netpolicy *p,
			 struct cell_error *err)
{
	struct resolver_rules rr;
	struct resolver_rule *rules = resolver_rules_of(p, &rr);
	if (!rules)
		return -ENOMEM;
	int r = resolver_add(l->ifname, sb->id, l->host, &rr, !p->default_allow, err);
	free(rules);
	return r;
}

/* sb's objects in celld's table as p says: NFT_ADD for a new sandbox; NFT_REBUILD: its
 * chains written again (its default changed); NFT_RULES for one
 * already there: its address rules replaced, and its chains written again when an older
 * celld made them (without the range sets). */
enum nft_how { NFT_ADD, NFT_RULES, NFT_REBUILD };
static int nft_put(const struct sb_link *l, const struct netpolicy *p, uint64_t egress,
		   enum nft_how how, struct cell_error *err)
{
	struct cell_nft_sandbox ns = {
	    .addr = l->addr,
	    .host_addr = l->host,
	    .policy = p->default_allow ? CELL_NFT_PUBLIC : CELL_NFT_ALLOWLIST,
	    .egress_bytes_per_s = egress,
	    .max_conns = net.max_conns,
	};
	snprintf(ns.ifname, sizeof(ns.ifname), "%s", l->ifname);
	if (policy_ranges(p, &ns) < 0)
		return cell_err(err, ENOMEM, "the address rules of %s", l->ifname);
	int r;
	if (how == NFT_ADD) {
		r = cell_nft_sandbox_add(net.nft, &ns, err);
	} else if (how == NFT_REBUILD) {
		r = cell_nft_sandbox_rebuild(net.nft, &ns, err);
	} else {
		r = cell_nft_ranges_set(net.nft, &ns, err);
		if (r == -ENOENT) {
			log_info("network: writing the chain of %s again (its range sets are "
				 "missing: made by an older celld, or changed by hand)",
				 l->ifname);
			r = cell_nft_sandbox_rebuild(net.nft, &ns, err);
		}
	}
	policy_ranges_free(&ns);
	return r;
}

/* The host's end: no IPv6, strict reverse-path filtering (a packet whose source is not the
 * sandbox's own address is dropped before nftables sees it, as the chain's anti-spoof rule
 * would), no proxy ARP, no local sources; its address, the sandbox's /32 route; up. */
static int host_side(const struct sb_link *l, struct cell_error *err)
{
	static const char *const sysctls[][2] = {
	    {"net/ipv6/conf/%s/disable_ipv6", "1"},   {"net/ipv4/conf/%s/rp_filter", "1"},
	    {"net/ipv4/conf/%s/proxy_arp", "0"},      {"net/ipv4/conf/%s/accept_local", "0"},
	    {"net/ipv4/conf/%s/send_redirects", "0"},
	};
	char path[128];
	int r = 0;
	for (size_t i = 0; r == 0 && i < CELL_ARRAY_SIZE(sysctls); i++) {
		snprintf(path, sizeof(path), sysctls[i][0], l->ifname);
		r = cell_net_sysctl(-1, path, sysctls[i][1], err);
	}
	if (r == 0)
		r = cell_nl_addr_add4(&net.host, l->ifname, l->host, 32, &l->addr, err);
	if (r == 0)
		r = cell_nl_link_set_up(&net.host, l->ifname, true, err);
	return r;
}

/* The sandbox's end, eth0: its address, up, the default route via the host side. */
static int sandbox_side(int netns_fd, const struct sb_link *l, struct cell_error *err)
{
	struct cell_nl in = {0};
	int r = cell_nl_open(&in, netns_fd, err);
	if (r == 0)
		r = cell_nl_addr_add4(&in, "eth0", l->addr, 32, &l->host, err);
	if (r == 0)
		r = cell_nl_link_set_up(&in, "eth0", true, err);
	if (r == 0)
		r = cell_nl_route_add4_default_onlink(&in, "eth0", l->host, err);
	cell_nl_close(&in);
	return r;
}

/* Whatever exists of the sandbox on link l, in the reverse order of its making. The veth
 * goes with the sandbox's namespace when its last process has gone, in the kernel's own
 * time: deleting it here (about 20 ms of RCU grace periods) is done only for a link whose
 * sandbox may still be alive (a failed set-up) or a leftover in the way of a new one.
 * Best effort, every step tried: the first failure is in err (logged when err is NULL). */
static int teardown_locked(const struct sb_link *l, bool delete_link, struct cell_error *err)
{
	struct cell_error e = {0};
	resolver_remove(l->ifname);
	int r = cell_nft_sandbox_remove(net.nft, l->ifname, &e);
	if (r < 0 && !err)
		log_warn("network: %s", e.msg);
	else if (r < 0)
		*err = e;
	struct cell_error le = {0};
	int lr = delete_link ? cell_nl_link_delete(&net.host, l->ifname, &le) : 0;
	if (lr < 0 && lr != -ENODEV) {
		if (!err)
			log_warn("network: %s", le.msg);
		else if (r == 0)
			*err = le;
		r = r < 0 ? r : lr;
	}
	return r < 0 ? r : 0;
}

/* The network namespace of sb's init, checked to still be that process's after opening
 * it (its pidfd still live: the pid was not recycled in between). */
int network_open_netns(struct sandbox *sb, struct cell_error *err)
{
	registry_lock();
	pid_t pid = sb->pid;
	int pidfd = sb->pidfd;
	registry_unlock();
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
	int fd = pid > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd < 0 || (pidfd >= 0 && syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)) {
		int e = fd < 0 && pid > 0 ? errno : ESRCH;
		if (fd >= 0)
			close(fd);
		return cell_err_msg(err, e, "opening the network namespace of pid %d: %s", (int)pid,
				    strerror(e));
	}
	return fd;
}

static int attach_locked(struct sandbox *sb, const struct sb_link *l, const struct netpolicy *p,
			 struct cell_error *err)
{
	_cleanup_close_ int ns = network_open_netns(sb, err);
	if (ns < 0)
		return ns;
	/* Before eth0 exists there, so it is born without IPv6 (not even a link-local
	 * address); loopback keeps ::1. Root inside may turn it on again: the table drops a
	 * sandbox's IPv6 whatever its sysctls say. */
	int r = cell_net_sysctl(ns, "net/ipv6/conf/default/disable_ipv6", "1", err);
	if (r == 0)
		r = nft_put(l, p, egress_of(sb), NFT_ADD, err);
	if (r == 0)
		r = cell_nl_veth_create(&net.host, l->ifname, "eth0", ns, err);
	if (r == 0)
		r = host_side(l, err);
	if (r == 0)
		r = sandbox_side(ns, l, err);
	if (r == 0)
		r = resolver_join(sb, l, p, err);
	return r;
}

/* policy_of for a sandbox that has a network: 1 with *p (netpolicy_free), 0 for mode none
 * (nothing to free), or -errno. */
static int networked_policy(struct sandbox *sb, enum network_mode *mode, struct netpolicy *p,
			    struct cell_error *err)
{
	int r = policy_of(sb, mode, p, err);
	if (r < 0 || *mode == NETWORK_NONE) {
		netpolicy_free(p);
		return r < 0 ? r : 0;
	}
	return 1;
}

int network_attach(struct sandbox *sb, struct cell_error *err)
{
	enum network_mode mode;
	struct netpolicy p;
	struct sb_link l;
	int r = networked_policy(sb, &mode, &p, err);
	if (r <= 0)
		return r;
	r = sb_link_of(sb->slot, &l, err);
	pthread_mutex_lock(&net.lock);
	if (r == 0)
		r = ready_locked(err);
	bool tried = r == 0;
	if (r == 0)
		r = attach_locked(sb, &l, &p, err);
	if (r == -EEXIST) {
		/* A chain or link of this slot's is a leftover of an earlier run (its sandbox
		 * is gone: the slot is ours): removed, not trusted, and the set-up made anew. */
		log_info("sandbox %s: removing a leftover network of %s", sb->id, l.ifname);
		cell_err_clear(err);
		r = teardown_locked(&l, true, err);
		if (r < 0)
			cell_err_wrap(err, "removing a leftover network of %s: ", l.ifname);
		else
			r = attach_locked(sb, &l, &p, err);
	}
	if (r < 0 && tried)
		teardown_locked(&l, true, NULL);
	pthread_mutex_unlock(&net.lock);
	netpolicy_free(&p);
	if (r == 0) {
		record_link(sb, &l);
		char a[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &l.addr, a, sizeof(a));
		log_info("sandbox %s: network %s, address %s on %s", sb->id,
			 network_mode_name(mode), a, l.ifname);
	}
	return r;
}

void network_detach(struct sandbox *sb)
{
	struct sb_link l;
	if (!has_network(sb) || recorded_link(sb, &l, NULL) < 0)
		return;
	pthread_mutex_lock(&net.lock);
	if (net.ready)
		teardown_locked(&l, false, NULL);
	pthread_mutex_unlock(&net.lock);
}

int network_adopt(struct sandbox *sb, struct cell_error *err)
{
	enum network_mode mode;
	struct netpolicy p;
	struct sb_link l;
	int r = networked_policy(sb, &mode, &p, err);
	if (r <= 0)
		return r;
	r = recorded_link(sb, &l, err);
	pthread_mutex_lock(&net.lock);
	if (r == 0)
		r = ready_locked(err);
	if (r == 0 && cell_nl_link_index(&net.host, l.ifname, NULL) < 0)
		r = cell_err_msg(err, ENODEV, "its interface %s is gone", l.ifname);
	if (r == 0) {
		/* The answers pinned in its set survive a restart of celld; its chains and
		 * address rules are written again from the record, in one transaction: a crash
		 * may have come between a change and its record, and a chain an older celld
		 * wrote lacks what this one's have (the bound on tracked connections). */
		r = nft_put(&l, &p, egress_of(sb), NFT_ADD, err);
		if (r == -EEXIST)
			r = nft_put(&l, &p, egress_of(sb), NFT_REBUILD, err);
	}
	if (r == 0)
		r = resolver_join(sb, &l, &p, err);
	pthread_mutex_unlock(&net.lock);
	netpolicy_free(&p);
	return r;
}

/* Is ifname the interface of a sandbox in the table that keeps a network? */
static bool in_use(const char *ifname, struct sandbox **v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct sb_link l;
		registry_lock();
		bool live = v[i]->state == SBX_RUNNING || v[i]->state == SBX_PAUSED;
		registry_unlock();
		if (live && has_network(v[i]) && recorded_link(v[i], &l, NULL) == 0 &&
		    !strcmp(l.ifname, ifname))
			return true;
	}
	return false;
}

void network_reconcile(void)
{
	struct cell_error err = {0};
	if (!was_made())
		return;
	pthread_mutex_lock(&net.lock);
	int r = ready_locked(&err);
	char(*names)[CELL_NFT_IFNAME_MAX + 1] = NULL;
	size_t n = 0;
	if (r == 0)
		r = cell_nft_sandbox_list(net.nft, &names, &n, &err);
	if (r < 0) {
		pthread_mutex_unlock(&net.lock);
		log_warn("network: reconciling: %s", err.msg);
		return;
	}
	struct sandbox **v;
	size_t nv = registry_snapshot(&v);
	for (size_t i = 0; i < n; i++) {
		if (in_use(names[i], v, nv))
			continue;
		struct sb_link l = {0};
		snprintf(l.ifname, sizeof(l.ifname), "%s", names[i]);
		log_info("network: removing %s of no sandbox", l.ifname);
		teardown_locked(&l, true, NULL);
	}
	sandbox_unref_all(v, nv);
	pthread_mutex_unlock(&net.lock);
	free(names);
}

void network_shutdown(void)
{
	struct cell_error err = {0};
	char(*names)[CELL_NFT_IFNAME_MAX + 1] = NULL;
	size_t n = 0;
	pthread_mutex_lock(&net.lock);
	bool listed = net.ready && cell_nft_sandbox_list(net.nft, &names, &n, &err) == 0;
	bool removed = listed && !n && cell_nft_table_delete(net.nft, &err) == 0;
	if (removed)
		unlinkat(celld.sandboxes_fd, "../" MARKER_FILE, 0);
	if (listed)
		forwarding_restore(n);
	pthread_mutex_unlock(&net.lock);
	free(names);
	if (removed)
		log_info("network: table inet %s removed: no sandbox uses it", net.table);
	else if (err.msg[0])
		log_warn("network: at stop: %s", err.msg);
}

int network_resolv_conf(struct sandbox *sb, char *buf, size_t size, struct cell_error *err)
{
	struct sb_link l;
	buf[0] = '\0';
	if (!has_network(sb))
		return 0;
	int r = sb_link_of(sb->slot, &l, err);
	if (r < 0)
		return r;
	char a[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &l.host, a, sizeof(a));
	snprintf(buf, size,
		 "# The sandbox's resolver, on the host side of its network (written by cell at "
		 "each start).\nnameserver %s\n",
		 a);
	return 0;
}

/* ---- the policy of a running sandbox ---- */

int network_policy_get(struct sandbox *sb, enum network_mode *mode, struct netpolicy *out,
		       struct cell_error *err)
{
	enum network_mode m;
	int r = policy_of(sb, &m, out, err);
	if (r == 0 && m == NETWORK_NONE)
		r = cell_err_msg(err, ENOTSUP, "sandbox %s has no network (mode none)", sb->id);
	if (r < 0)
		netpolicy_free(out);
	if (mode)
		*mode = m;
	return r;
}

/* Empty sb's allowed set: a policy change closes what it no longer allows at once (the
 * names still allowed are pinned again at their next lookup). */
static int unpin_all(const char *ifname, struct cell_error *err)
{
	struct cell_nft_allowed *pins = NULL;
	size_t n = 0;
	int r = cell_nft_allow_list(net.nft, ifname, &pins, &n, err);
	struct in_addr *addrs = r == 0 && n ? calloc(n, sizeof(*addrs)) : NULL;
	if (r == 0 && n && !addrs)
		r = -ENOMEM;
	for (size_t i = 0; r == 0 && i < n; i++)
		addrs[i].s_addr = htonl(pins[i].addr);
	if (r == 0 && n)
		r = cell_nft_allow_del(net.nft, ifname, addrs, n, err);
	free(addrs);
	free(pins);
	return r;
}

/* p in force on l: the resolver's rules, the pins, the address rules. rebuild: the default
 * changes (allow-by-default and deny-by-default chains differ), so the chains are written
 * again from p in one batch (what the sandbox's packets meet is the old chain or the new,
 * never a mix; the chains' counters start again from 0). */
static int apply_locked(const struct sb_link *l, const struct netpolicy *p, uint64_t egress,
			bool rebuild, struct cell_error *err)
{
	struct resolver_rules rr;
	struct resolver_rule *rules = resolver_rules_of(p, &rr);
	if (!rules)
		return -ENOMEM;
	int r = resolver_set_rules(l->ifname, &rr, !p->default_allow, err);
	free(rules);
	if (r == 0 && !p->default_allow)
		r = unpin_all(l->ifname, err);
	if (r == 0)
		r = nft_put(l, p, egress, rebuild ? NFT_REBUILD : NFT_RULES, err);
	return r;
}

/* Every edit of a sandbox's policy: a read, a change and a replace, which two at once would
 * interleave (one's replace undoing the other's). Taken before net.lock and the
 * registry's; nothing under it waits on a sandbox's operation. */
static pthread_mutex_t edit_lock = PTHREAD_MUTEX_INITIALIZER;

static int policy_replace(struct sandbox *sb, const struct netpolicy *p, struct cell_error *err)
{
	enum network_mode mode;
	struct netpolicy old;
	struct sb_link l;
	int r = policy_of(sb, &mode, &old, err);
	if (r == 0 && mode == NETWORK_NONE)
		r = cell_err_msg(err, ENOTSUP, "sandbox %s has no network (mode none)", sb->id);
	bool rebuild = r == 0 && old.default_allow != p->default_allow;
	netpolicy_free(&old);
	if (r == 0)
		r = recorded_link(sb, &l, err);
	json_t *rec = NULL;
	if (r == 0) {
		registry_lock();
		rec = json_copy(sb->network); /* its link stays as recorded */
		registry_unlock();
		if (!rec || json_object_set_new(rec, "mode", json_string("custom")) ||
		    json_object_set_new(rec, "policy", netpolicy_to_json(p)))
			r = -ENOMEM;
	}
	if (r < 0) {
		json_decref(rec);
		return r;
	}
	/* Under net.lock from the rules to the record, so two changes apply and are recorded
	 * in one order. */
	pthread_mutex_lock(&net.lock);
	r = net.ready ? apply_locked(&l, p, egress_of(sb), rebuild, err)
		      : cell_err_msg(err, ENOTSUP, "sandbox %s has no network yet", sb->id);
	if (r == 0) {
		registry_lock();
		json_t *prev = sb->network;
		sb->network = rec;
		rec = prev;
		registry_unlock();
		r = store_save(sb, err);
	}
	pthread_mutex_unlock(&net.lock);
	json_decref(rec);
	return r;
}

int network_policy_edit(struct sandbox *sb, network_policy_change *fn, void *cls,
			struct netpolicy *p, struct cell_error *err)
{
	*p = (struct netpolicy){0};
	pthread_mutex_lock(&edit_lock);
	int r = network_policy_get(sb, NULL, p, err);
	bool has_network = r != -ENOTSUP;
	if (!has_network) {
		cell_err_clear(err);
		*p = (struct netpolicy){0};
		r = 0;
	} else if (r < 0) {
		/* The record's policy is not understood: celld's fault, not the request's. */
		cell_err_wrap(err, "the policy in force: ");
		err->code = EIO;
		r = -EIO;
	}
	if (r == 0)
		r = fn(p, has_network, cls, err);
	if (r > 0)
		r = policy_replace(sb, p, err);
	else if (r == 0)
		r = 1;
	pthread_mutex_unlock(&edit_lock);
	return r;
}

/* ---- what cell inspect shows ---- */

static json_t *counter_json(const struct cell_nft_counter *c)
{
	return json_pack("{s:I, s:I}", "packets", (json_int_t)c->packets, "bytes",
			 (json_int_t)c->bytes);
}

static void add_counters(json_t *o, const char *ifname)
{
	struct cell_nft_counters c;
	struct resolver_stats rs;
	if (cell_nft_sandbox_counters(net.nft, ifname, &c, NULL) == 0)
		json_object_set_new(
		    o, "counters",
		    json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "allowed", counter_json(&c.allowed),
			      "blocked", counter_json(&c.blocked), "denied",
			      counter_json(&c.denied), "spoofed", counter_json(&c.spoofed),
			      "egressLimited", counter_json(&c.egress_limited), "conntrackLimited",
			      counter_json(&c.conntrack_limited)));
	if (resolver_stats(ifname, &rs) == 0)
		json_object_set_new(
		    o, "dns",
		    json_pack("{s:I, s:I, s:I, s:I, s:I, s:I}", "queries", (json_int_t)rs.queries,
			      "forwarded", (json_int_t)rs.forwarded, "answered",
			      (json_int_t)rs.answered, "refused", (json_int_t)rs.refused,
			      "rateLimited", (json_int_t)rs.rate_limited, "failed",
			      (json_int_t)rs.failed));
	struct cell_nft_allowed *pins = NULL;
	size_t n = 0;
	if (cell_nft_allow_list(net.nft, ifname, &pins, &n, NULL) == 0)
		json_object_set_new(o, "pinnedAddresses", json_integer((json_int_t)n));
	free(pins);
}

int network_bytes(struct sandbox *sb, uint64_t *rx, uint64_t *tx)
{
	struct sb_link l;
	if (!has_network(sb) || recorded_link(sb, &l, NULL) < 0)
		return -ENOENT;
	/* Asked of celld's own namespace, whichever /sys shows: the host's end sends what the
	 * sandbox receives, and the reverse. */
	pthread_mutex_lock(&net.lock);
	int r = net.ready ? cell_nl_link_bytes(&net.host, l.ifname, tx, rx, NULL) : -ENOENT;
	pthread_mutex_unlock(&net.lock);
	return r;
}

json_t *network_inspect_json(struct sandbox *sb)
{
	enum network_mode mode;
	struct netpolicy p;
	struct sb_link l;
	if (policy_of(sb, &mode, &p, NULL) < 0)
		return json_pack("{s:s}", "mode", "unknown");
	json_t *o = json_pack("{s:s}", "mode", network_mode_name(mode));
	if (mode != NETWORK_NONE && o && recorded_link(sb, &l, NULL) == 0) {
		char a[INET_ADDRSTRLEN], g[INET_ADDRSTRLEN];
		inet_ntop(AF_INET, &l.addr, a, sizeof(a));
		inet_ntop(AF_INET, &l.host, g, sizeof(g));
		json_object_set_new(o, "policy", netpolicy_to_json(&p));
		json_object_set_new(o, "interface", json_string(l.ifname));
		json_object_set_new(o, "address", json_string(a));
		json_object_set_new(o, "gateway", json_string(g));
		json_object_set_new(o, "resolver", json_string(g));
		uint64_t egress = egress_of(sb);
		if (egress)
			json_object_set_new(o, "egressBytesPerSecond",
					    json_integer((json_int_t)egress));
		pthread_mutex_lock(&net.lock);
		if (net.ready)
			add_counters(o, l.ifname);
		pthread_mutex_unlock(&net.lock);
	}
	netpolicy_free(&p);
	return o;
}
