/* celld's own nftables table through libnftnl batches (include/cell/nft.h says the design). */
#include "cell/nft.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>
#include <libnftnl/udata.h>
#include <linux/netfilter.h>
#include <linux/netfilter_ipv4.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <net/if.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "cell/cgroup.h"
#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/ipv4.h"

/* nftables' own datatype numbers (its src/datatype.h), which the kernel keeps for it and
 * `nft list` reads back to print a set's type. */
#define NFT_TYPE_IPADDR 7
#define NFT_TYPE_IFNAME 41
#define NFT_TYPE_BITS	6
/* and its byte orders */
#define BYTEORDER_HOST 1
#define BYTEORDER_BIG  2

#define SET_BLOCKED    "blocked4"
#define SET_IFS	       "sandbox_ifs"
#define SET_DNS	       "sandbox_dns"
#define MAP_CHAINS     "sandbox_chains"
#define CHAIN_PREFIX   "sb-"
#define ALLOWED_SUFFIX "-allowed"
#define RANGES_SUFFIX  "-ranges"
#define DENIED_SUFFIX  "-denied"
/* The drop chains of the packet log: a sandbox's "sb-IF/<reason>" ('/' is outside the
 * interface names' characters, so cell_nft_sandbox_list never takes one for a sandbox),
 * and the base chains' two. */
#define LOG_SEP		"/"
#define CHAIN_DROP_HOST "drop-host"
#define CHAIN_DROP_IPV6 "drop-ipv6"
#define CHAIN_DROP_DNS	"drop-dns"
/* Base chains at raw priority (before conntrack), for what is never tracked. */
#define CHAIN_RAW_PRE "raw-prerouting"
#define CHAIN_RAW_OUT "raw-output"

/* A batch holds a few dozen messages, a table create the blocked set's elements too. */
#define BATCH_BUF  (256 * 1024)
#define BATCH_MSGS 64
#define WHAT_MAX   112

struct cell_nft {
	pthread_mutex_t lock;
	struct mnl_socket *nl;
	uint32_t portid, seq;
	char table[CELL_NFT_NAME_MAX];
	struct in_addr subnet;
	unsigned prefix;
	uint16_t log_group; /* 0: no packet log */
	char *buf;	    /* BATCH_BUF: batches and dump replies */
};

/* ---- names ---- */

int cell_nft_table_name(const char *state_dir, char *buf, size_t size)
{
	if (!state_dir || state_dir[0] != '/')
		return -EINVAL;
	size_t len = strlen(state_dir);
	while (len > 1 && state_dir[len - 1] == '/')
		len--;
	int n;
	if (len == strlen(CELL_DEFAULT_STATE_DIR) &&
	    !strncmp(state_dir, CELL_DEFAULT_STATE_DIR, len)) {
		n = snprintf(buf, size, "cell");
	} else {
		char hex[CELL_SHA256_HEX_LEN + 1];
		cell_sha256_hex(state_dir, len, hex);
		n = snprintf(buf, size, "cell-%.8s", hex);
	}
	return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static bool name_ok(const char *s, size_t max)
{
	size_t n = s ? strnlen(s, max + 1) : 0;
	if (n == 0 || n > max)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      c == '_' || c == '-' || c == '.'))
			return false;
	}
	return true;
}

static int check_ifname(const char *ifname, struct cell_error *err)
{
	if (!name_ok(ifname, CELL_NFT_IFNAME_MAX))
		return cell_err_msg(err, EINVAL,
				    "sandbox interface name %.32s%s: 1 to %d of [A-Za-z0-9_.-]",
				    ifname ? ifname : "(null)",
				    ifname && strlen(ifname) > 32 ? "…" : "", CELL_NFT_IFNAME_MAX);
	return 0;
}

static void chain_name(char *buf, size_t size, const char *ifname)
{
	snprintf(buf, size, CHAIN_PREFIX "%s", ifname);
}

static void allowed_name(char *buf, size_t size, const char *ifname)
{
	snprintf(buf, size, CHAIN_PREFIX "%s" ALLOWED_SUFFIX, ifname);
}

/* The sets of a sandbox's address rules: ranges it may reach, ranges it may not. */
static void ranges_name(char *buf, size_t size, const char *ifname, bool denied)
{
	snprintf(buf, size, CHAIN_PREFIX "%s%s", ifname, denied ? DENIED_SUFFIX : RANGES_SUFFIX);
}

/* The drop chain of a sandbox's drops for reason ("spoofed", "blocked"). */
static void drop_chain_name(char *buf, size_t size, const char *ifname, const char *reason)
{
	snprintf(buf, size, CHAIN_PREFIX "%s" LOG_SEP "%s", ifname, reason);
}

/* The names of one sandbox's chain and sets. */
struct sb_names {
	char chain[NFT_CHAIN_MAXNAMELEN];
	char allowed[NFT_SET_MAXNAMELEN], ranges[NFT_SET_MAXNAMELEN], denied[NFT_SET_MAXNAMELEN];
};

static void sb_names_of(const char *ifname, struct sb_names *n)
{
	chain_name(n->chain, sizeof(n->chain), ifname);
	allowed_name(n->allowed, sizeof(n->allowed), ifname);
	ranges_name(n->ranges, sizeof(n->ranges), ifname, false);
	ranges_name(n->denied, sizeof(n->denied), ifname, true);
}

static void ifkey(char key[IFNAMSIZ], const char *ifname)
{
	memset(key, 0, IFNAMSIZ);
	memcpy(key, ifname, strnlen(ifname, IFNAMSIZ - 1));
}

/* ---- the policy file ---- */

static int parse_cidr(const char *s, struct cell_nft_range *r)
{
	uint32_t first;
	unsigned len;
	if (cell_ipv4_cidr_parse(s, &first, &len) < 0)
		return -1;
	r->first = first;
	r->last = first | (len == 32 ? 0 : 0xffffffffu >> len);
	return 0;
}

static size_t merge_ranges(struct cell_nft_range *r, size_t n);

/* list[] of {cidr, name, why} (key names the list) into r[0..count-1]. */
static int parse_list(const char *path, const char *key, json_t *list, struct cell_nft_range *r,
		      struct cell_error *err)
{
	for (size_t i = 0; i < json_array_size(list); i++) {
		json_t *e = json_array_get(list, i);
		const char *cidr = json_string_value(json_object_get(e, "cidr"));
		const char *name = json_string_value(json_object_get(e, "name"));
		const char *why = json_string_value(json_object_get(e, "why"));
		if (!json_is_object(e) || !cidr || parse_cidr(cidr, &r[i]))
			return cell_err_msg(
			    err, EINVAL,
			    "%s: %s[%zu].cidr: not an IPv4 a.b.c.d/len with no host "
			    "bits set",
			    path, key, i);
		if (!name || !*name || !why || !*why)
			return cell_err_msg(err, EINVAL,
					    "%s: %s[%zu] (%s): name and why must say what it is "
					    "and why it is listed",
					    path, key, i, cidr);
	}
	return 0;
}

/* Remove the exception e from the sorted, disjoint ranges r[0..n-1] (room for n + 1). */
static size_t subtract_range(struct cell_nft_range *r, size_t n, struct cell_nft_range e)
{
	for (size_t i = 0; i < n; i++) {
		struct cell_nft_range b = r[i];
		if (e.last < b.first || e.first > b.last)
			continue;
		bool left = e.first > b.first, right = e.last < b.last;
		if (left && right) { /* split in two */
			memmove(&r[i + 2], &r[i + 1], (n - i - 1) * sizeof(*r));
			r[i].last = e.first - 1;
			r[i + 1] = (struct cell_nft_range){e.last + 1, b.last};
			return n + 1;
		}
		if (left)
			r[i].last = e.first - 1;
		else if (right)
			r[i].first = e.last + 1;
		else { /* wholly inside the exception */
			memmove(&r[i], &r[i + 1], (n - i - 1) * sizeof(*r));
			n--;
			i--;
		}
	}
	return n;
}

int cell_nft_policy_load(const char *path, struct cell_nft_range **out, size_t *n,
			 struct cell_error *err)
{
	*out = NULL;
	*n = 0;
	json_error_t je;
	json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
	if (!root && je.line < 1) /* not read at all: jansson's text names the file */
		return cell_err_msg(err, errno ? errno : EINVAL, "%s", je.text);
	if (!root)
		return cell_err_msg(err, EINVAL, "%s: line %d: %s", path, je.line, je.text);
	int rc = 0;
	struct cell_nft_range *r = NULL;
	json_t *list = json_object_get(root, "blocked");
	if (!json_is_array(list)) {
		rc = cell_err_msg(err, EINVAL, "%s: blocked: not an array", path);
		goto out;
	}
	size_t count = json_array_size(list);
	if (count > CELL_NFT_RANGES_MAX) {
		rc = cell_err_msg(err, E2BIG, "%s: blocked: %zu entries, at most %d", path, count,
				  CELL_NFT_RANGES_MAX);
		goto out;
	}
	/* Each exception may split one range in two. */
	r = calloc(2 * count + 2 * json_array_size(json_object_get(root, "allowed")) + 1,
		   sizeof(*r));
	if (!r) {
		rc = cell_err(err, ENOMEM, "%s", path);
		goto out;
	}
	json_t *allowed = json_object_get(root, "allowed");
	size_t n_allowed = json_array_size(allowed);
	if (allowed && (!json_is_array(allowed) || n_allowed > CELL_NFT_RANGES_MAX)) {
		rc = cell_err_msg(err, EINVAL, "%s: allowed: not an array of at most %d", path,
				  CELL_NFT_RANGES_MAX);
		goto out;
	}
	struct cell_nft_range *ex = calloc(n_allowed ? n_allowed : 1, sizeof(*ex));
	if (!ex || parse_list(path, "blocked", list, r, err) < 0 ||
	    parse_list(path, "allowed", allowed, ex, err) < 0) {
		rc = ex ? -EINVAL : cell_err(err, ENOMEM, "%s", path);
		free(ex);
		goto out;
	}
	/* The operator's exceptions (an internal mirror, say) cut holes in the blocked
	 * ranges: what remains is what the table blocks. */
	count = merge_ranges(r, count);
	for (size_t i = 0; i < n_allowed; i++)
		count = subtract_range(r, count, ex[i]);
	free(ex);
	*out = r;
	*n = count;
	r = NULL;
out:
	free(r);
	json_decref(root);
	return rc;
}

static int range_cmp(const void *a, const void *b)
{
	const struct cell_nft_range *x = a, *y = b;
	return x->first < y->first ? -1 : x->first > y->first;
}

/* Sorted, overlapping and adjacent ranges merged: what an interval set accepts. */
static size_t merge_ranges(struct cell_nft_range *r, size_t n)
{
	if (!n)
		return 0;
	qsort(r, n, sizeof(*r), range_cmp);
	size_t k = 0;
	for (size_t i = 1; i < n; i++) {
		if (r[k].last == UINT32_MAX || r[i].first <= r[k].last + 1) {
			if (r[i].last > r[k].last)
				r[k].last = r[i].last;
		} else {
			r[++k] = r[i];
		}
	}
	return k + 1;
}

/* ---- batches ---- */

struct batch {
	struct cell_nft *nft;
	struct mnl_nlmsg_batch *b;
	uint32_t seq0;
	int n; /* messages between BEGIN and END */
	bool overflow;
	char what[BATCH_MSGS][WHAT_MAX];
};

static void batch_start(struct batch *bt, struct cell_nft *nft)
{
	memset(bt, 0, sizeof(*bt));
	bt->nft = nft;
	bt->b = mnl_nlmsg_batch_start(nft->buf, BATCH_BUF);
	nftnl_batch_begin(mnl_nlmsg_batch_current(bt->b), nft->seq++);
	mnl_nlmsg_batch_next(bt->b);
	bt->seq0 = nft->seq;
}

/* Free a batch, run or not. */
static void batch_free(struct batch *bt)
{
	if (bt && bt->b)
		mnl_nlmsg_batch_stop(bt->b);
	free(bt);
}

/* The header of the next message; what names its object for an error. */
static __attribute__((format(printf, 4, 5))) struct nlmsghdr *
batch_msg(struct batch *bt, uint16_t type, uint16_t flags, const char *fmt, ...)
{
	if (bt->n >= BATCH_MSGS) {
		bt->overflow = true;
		return NULL;
	}
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(bt->what[bt->n], WHAT_MAX, fmt, ap);
	va_end(ap);
	bt->n++;
	return nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(bt->b), type, NFPROTO_INET,
				     flags | NLM_F_ACK, bt->nft->seq++);
}

static void batch_done_msg(struct batch *bt)
{
	if (!mnl_nlmsg_batch_next(bt->b))
		bt->overflow = true;
}

/* Discard what an earlier exchange left unread (a dump its callback stopped early), so
 * that it is never taken for an answer to the next one. */
static void drain(struct cell_nft *nft)
{
	char junk[256];
	int fd = mnl_socket_get_fd(nft->nl);
	while (recv(fd, junk, sizeof(junk), MSG_DONTWAIT | MSG_TRUNC) >= 0 || errno == EINTR)
		;
}

/* Send the batch and read one ACK per message: they are all queued by the time sendto
 * returns (nfnetlink runs a batch in the sender's context). */
static int batch_run(struct batch *bt, struct cell_error *err)
{
	struct cell_nft *nft = bt->nft;
	if (bt->overflow)
		return cell_err_msg(err, EMSGSIZE, "nftables table inet %s: batch too large",
				    nft->table);
	drain(nft);
	nftnl_batch_end(mnl_nlmsg_batch_current(bt->b), nft->seq++);
	mnl_nlmsg_batch_next(bt->b);
	ssize_t len =
	    mnl_socket_sendto(nft->nl, mnl_nlmsg_batch_head(bt->b), mnl_nlmsg_batch_size(bt->b));
	mnl_nlmsg_batch_stop(bt->b);
	bt->b = NULL;
	if (len < 0)
		return cell_err(err, errno, "nftables table inet %s: sending a batch", nft->table);
	int acks = 0, first_err = 0, first_idx = -1;
	int fd = mnl_socket_get_fd(nft->nl);
	for (;;) {
		ssize_t got = recv(fd, nft->buf, BATCH_BUF, MSG_DONTWAIT);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return cell_err(err, errno, "nftables table inet %s: reading ACKs",
					nft->table);
		}
		size_t left = (size_t)got;
		for (struct nlmsghdr *h = (struct nlmsghdr *)nft->buf; mnl_nlmsg_ok(h, (int)left);
		     h = mnl_nlmsg_next(h, (int *)&left)) {
			if (h->nlmsg_type != NLMSG_ERROR)
				continue;
			const struct nlmsgerr *e = mnl_nlmsg_get_payload(h);
			int idx = (int)(h->nlmsg_seq - bt->seq0);
			if (idx < 0 || idx >= bt->n || h->nlmsg_pid != nft->portid)
				continue; /* not an answer to this batch */
			acks++;
			if (e->error && !first_err) {
				first_err = -e->error;
				first_idx = idx;
			}
		}
	}
	if (first_err) {
		const char *what =
		    first_idx >= 0 && first_idx < bt->n ? bt->what[first_idx] : "a batch";
		return cell_err(err, first_err, "nftables: %s", what);
	}
	if (acks < bt->n)
		return cell_err_msg(err, EIO, "nftables table inet %s: %d of %d messages ACKed",
				    nft->table, acks, bt->n);
	return 0;
}

/* ---- dumps ---- */

typedef int (*dump_cb)(const struct nlmsghdr *nlh, void *data);
/* Forget what the callback gathered of a dump that is read again. */
typedef void (*dump_reset)(void *data);

/* How many times a dump is read again after another writer's commit interrupted it. Each
 * interruption is a commit between two of the dump's messages: a host whose ruleset never
 * stops changing for the few microseconds a dump takes is broken in a way celld cannot fix. */
#define DUMP_TRIES 64

/* One GET request, its replies to cb; -EINTR when a commit elsewhere interrupted the dump
 * (the kernel marks the rest NLM_F_DUMP_INTR: what was read is not one generation). */
static int dump_once(struct cell_nft *nft, uint16_t family, uint16_t type,
		     void (*build)(struct nlmsghdr *, void *), void *obj, dump_cb cb, void *data)
{
	uint32_t seq = nft->seq++;
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(nft->buf, type, family, NLM_F_DUMP, seq);
	if (build)
		build(nlh, obj);
	drain(nft);
	if (mnl_socket_sendto(nft->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	for (;;) {
		ssize_t got = mnl_socket_recvfrom(nft->nl, nft->buf, BATCH_BUF);
		if (got < 0 && errno == EINTR)
			continue; /* a signal: the message is still queued */
		if (got < 0)
			return -errno;
		int rc = mnl_cb_run(nft->buf, (size_t)got, seq, nft->portid, (mnl_cb_t)cb, data);
		if (rc < 0)
			return -errno;
		if (rc == MNL_CB_STOP)
			return 0;
	}
}

/* A GET request of family (NFPROTO_INET: our table's; NFPROTO_UNSPEC: every family) built
 * by build (NLM_F_DUMP), its replies to cb. An interrupted dump is read again from the
 * start (reset first): nftables' own tools do the same, and a caller that gave up would
 * leave a sandbox's objects behind (a remove that read a torn list). The rest of the torn
 * dump is drained before the next request. -errno, err untouched. */
static int dump_family(struct cell_nft *nft, uint16_t family, uint16_t type,
		       void (*build)(struct nlmsghdr *, void *), void *obj, dump_cb cb,
		       dump_reset reset, void *data)
{
	int rc = -EINTR;
	for (int i = 0; i < DUMP_TRIES && rc == -EINTR; i++) {
		if (i) {
			/* A growing pause (64 tries: 0.1 s at most in all), so that a writer
			 * committing at a steady pace does not meet every try at the same
			 * point of it. */
			nanosleep(&(struct timespec){.tv_nsec = 50000L * i}, NULL);
			reset(data);
		}
		rc = dump_once(nft, family, type, build, obj, cb, data);
	}
	return rc;
}

static int found_cb(const struct nlmsghdr *nlh, void *data)
{
	(void)nlh;
	(*(int *)data)++;
	return MNL_CB_OK;
}

/* Is the one object obj (a chain or set by name, an element by key) there? A GET without
 * NLM_F_DUMP: one message answers it, which no commit elsewhere can tear. 1, 0, -errno. */
static int exists(struct cell_nft *nft, uint16_t type, void (*build)(struct nlmsghdr *, void *),
		  void *obj)
{
	uint32_t seq = nft->seq++;
	struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(nft->buf, type, NFPROTO_INET, 0, seq);
	build(nlh, obj);
	drain(nft);
	if (mnl_socket_sendto(nft->nl, nlh, nlh->nlmsg_len) < 0)
		return -errno;
	ssize_t got;
	while ((got = mnl_socket_recvfrom(nft->nl, nft->buf, BATCH_BUF)) < 0 && errno == EINTR)
		;
	if (got < 0)
		return -errno;
	int found = 0;
	if (mnl_cb_run(nft->buf, (size_t)got, seq, nft->portid, found_cb, &found) < 0)
		return errno == ENOENT ? 0 : -errno;
	return found > 0;
}

static int dump(struct cell_nft *nft, uint16_t type, void (*build)(struct nlmsghdr *, void *),
		void *obj, dump_cb cb, dump_reset reset, void *data)
{
	return dump_family(nft, NFPROTO_INET, type, build, obj, cb, reset, data);
}

static void build_chain(struct nlmsghdr *nlh, void *c)
{
	nftnl_chain_nlmsg_build_payload(nlh, c);
}
static void build_rule(struct nlmsghdr *nlh, void *r)
{
	nftnl_rule_nlmsg_build_payload(nlh, r);
}
static void build_set(struct nlmsghdr *nlh, void *s)
{
	nftnl_set_nlmsg_build_payload(nlh, s);
}
static void build_elems(struct nlmsghdr *nlh, void *s)
{
	nftnl_set_elems_nlmsg_build_payload(nlh, s);
}

/* Names of the chains of our table. */
struct names {
	const char *table;
	char (*v)[NFT_CHAIN_MAXNAMELEN];
	size_t n, cap;
	int rc;
};

static int names_add(struct names *nm, const char *name)
{
	if (nm->n == nm->cap) {
		size_t cap = nm->cap ? nm->cap * 2 : 16;
		void *p = realloc(nm->v, cap * sizeof(*nm->v));
		if (!p)
			return nm->rc = -ENOMEM;
		nm->v = p;
		nm->cap = cap;
	}
	snprintf(nm->v[nm->n++], NFT_CHAIN_MAXNAMELEN, "%s", name);
	return 0;
}

static int names_cb(const struct nlmsghdr *nlh, void *data)
{
	struct names *nm = data;
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (c && nftnl_chain_nlmsg_parse(nlh, c) == 0) {
		const char *table = nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE);
		const char *name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
		if (table && name && !strcmp(table, nm->table))
			names_add(nm, name);
	}
	if (c)
		nftnl_chain_free(c);
	return nm->rc ? MNL_CB_ERROR : MNL_CB_OK;
}

static void names_reset(void *data)
{
	((struct names *)data)->n = 0;
}

static int list_chains(struct cell_nft *nft, struct names *nm)
{
	memset(nm, 0, sizeof(*nm));
	nm->table = nft->table;
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c)
		return -ENOMEM;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, nft->table);
	int rc = dump(nft, NFT_MSG_GETCHAIN, build_chain, c, names_cb, names_reset, nm);
	nftnl_chain_free(c);
	return nm->rc ? nm->rc : rc;
}

/* Elements of one set: their keys (up to 20 bytes) and expirations. */
struct elem {
	uint8_t key[20];
	uint32_t len;
	uint64_t expires_ms;
};
struct elems {
	struct elem *v;
	size_t n, cap;
	int rc;
};

static int elems_cb(const struct nlmsghdr *nlh, void *data)
{
	struct elems *es = data;
	struct nftnl_set *s = nftnl_set_alloc();
	if (!s)
		return es->rc = -ENOMEM, MNL_CB_ERROR;
	if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) {
		nftnl_set_free(s);
		return MNL_CB_OK;
	}
	struct nftnl_set_elems_iter *it = nftnl_set_elems_iter_create(s);
	for (struct nftnl_set_elem *e = it ? nftnl_set_elems_iter_next(it) : NULL; e;
	     e = nftnl_set_elems_iter_next(it)) {
		uint32_t len = 0;
		const void *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
		if (!key || len > sizeof(es->v[0].key))
			continue;
		if (es->n == es->cap) {
			size_t cap = es->cap ? es->cap * 2 : 16;
			void *p = realloc(es->v, cap * sizeof(*es->v));
			if (!p) {
				es->rc = -ENOMEM;
				break;
			}
			es->v = p;
			es->cap = cap;
		}
		struct elem *d = &es->v[es->n++];
		memset(d, 0, sizeof(*d));
		memcpy(d->key, key, len);
		d->len = len;
		if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_EXPIRATION))
			d->expires_ms = nftnl_set_elem_get_u64(e, NFTNL_SET_ELEM_EXPIRATION);
	}
	if (it)
		nftnl_set_elems_iter_destroy(it);
	nftnl_set_free(s);
	return es->rc ? MNL_CB_ERROR : MNL_CB_OK;
}

static void elems_reset(void *data)
{
	((struct elems *)data)->n = 0;
}

static int list_elems(struct cell_nft *nft, const char *set, struct elems *es)
{
	memset(es, 0, sizeof(*es));
	struct nftnl_set *s = nftnl_set_alloc();
	if (!s)
		return -ENOMEM;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, nft->table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, set);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	int rc = dump(nft, NFT_MSG_GETSETELEM, build_elems, s, elems_cb, elems_reset, es);
	nftnl_set_free(s);
	return es->rc ? es->rc : rc;
}

/* ---- objects ---- */

static struct nftnl_set *set_new(const char *table, const char *name)
{
	struct nftnl_set *s = nftnl_set_alloc();
	if (!s)
		return NULL;
	nftnl_set_set_str(s, NFTNL_SET_TABLE, table);
	nftnl_set_set_str(s, NFTNL_SET_NAME, name);
	nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_INET);
	return s;
}

/* Add a message for set s (NEWSET, or an element message) and free s. */
static int put_set(struct batch *bt, struct nftnl_set *s, uint16_t type, uint16_t flags,
		   const char *verb)
{
	if (!s) {
		bt->overflow = true;
		return -ENOMEM;
	}
	struct nftnl_udata_buf *u = NULL;
	if (type == NFT_MSG_NEWSET) {
		/* The kernel wants an id unique in the batch; `nft list` wants the key's byte
		 * order to print it (host order for interface names, network for addresses). */
		nftnl_set_set_u32(s, NFTNL_SET_ID, (uint32_t)bt->n + 1);
		uint32_t order = nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE) == NFT_TYPE_IPADDR
				     ? BYTEORDER_BIG
				     : BYTEORDER_HOST;
		u = nftnl_udata_buf_alloc(32);
		if (!u || !nftnl_udata_put_u32(u, NFTNL_UDATA_SET_KEYBYTEORDER, order))
			bt->overflow = true;
		else
			nftnl_set_set_data(s, NFTNL_SET_USERDATA, nftnl_udata_buf_data(u),
					   nftnl_udata_buf_len(u));
	}
	struct nlmsghdr *nlh = batch_msg(bt, type, flags, "%s set %s in table inet %s", verb,
					 nftnl_set_get_str(s, NFTNL_SET_NAME), bt->nft->table);
	if (nlh) {
		if (type == NFT_MSG_NEWSET)
			nftnl_set_nlmsg_build_payload(nlh, s);
		else
			nftnl_set_elems_nlmsg_build_payload(nlh, s);
		batch_done_msg(bt);
	}
	nftnl_set_free(s);
	if (u)
		nftnl_udata_buf_free(u);
	return 0;
}

static int elem_add(struct nftnl_set *s, const void *key, uint32_t len, uint32_t flags,
		    uint64_t timeout_ms)
{
	struct nftnl_set_elem *e = nftnl_set_elem_alloc();
	if (!e)
		return -ENOMEM;
	nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, len);
	if (flags)
		nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_FLAGS, flags);
	if (timeout_ms)
		nftnl_set_elem_set_u64(e, NFTNL_SET_ELEM_TIMEOUT, timeout_ms);
	nftnl_set_elem_add(s, e);
	return 0;
}

static int put_chain(struct batch *bt, const char *name, const char *type, int hook, int prio,
		     uint16_t flags)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c)
		return -ENOMEM;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, bt->nft->table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, NFPROTO_INET);
	if (type) {
		nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, type);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, (uint32_t)hook);
		nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, prio);
		nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
	}
	struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_NEWCHAIN, flags,
					 "adding chain %s to table inet %s", name, bt->nft->table);
	if (nlh) {
		nftnl_chain_nlmsg_build_payload(nlh, c);
		batch_done_msg(bt);
	}
	nftnl_chain_free(c);
	return 0;
}

static void del_chain(struct batch *bt, const char *name)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c) {
		bt->overflow = true;
		return;
	}
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, bt->nft->table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	struct nlmsghdr *nlh = batch_msg(
	    bt, NFT_MSG_DELCHAIN, 0, "deleting chain %s of table inet %s", name, bt->nft->table);
	if (nlh) {
		nftnl_chain_nlmsg_build_payload(nlh, c);
		batch_done_msg(bt);
	}
	nftnl_chain_free(c);
}

/* Rules: a small builder over nftnl expressions. A failed allocation marks the rule bad. */
struct rule {
	struct nftnl_rule *r;
	bool bad;
};

static void rule_expr(struct rule *r, struct nftnl_expr *e)
{
	if (!e)
		r->bad = true;
	else
		nftnl_rule_add_expr(r->r, e);
}

/* An expression name with two u32 attributes. */
static void x_two(struct rule *r, const char *name, uint16_t a, uint32_t va, uint16_t b,
		  uint32_t vb)
{
	struct nftnl_expr *e = nftnl_expr_alloc(name);
	if (e) {
		nftnl_expr_set_u32(e, a, va);
		nftnl_expr_set_u32(e, b, vb);
	}
	rule_expr(r, e);
}

static void x_meta(struct rule *r, uint32_t key, uint32_t dreg)
{
	x_two(r, "meta", NFTNL_EXPR_META_KEY, key, NFTNL_EXPR_META_DREG, dreg);
}

static void x_payload(struct rule *r, uint32_t base, uint32_t off, uint32_t len, uint32_t dreg)
{
	struct nftnl_expr *e = nftnl_expr_alloc("payload");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, base);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, off);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, len);
		nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, dreg);
	}
	rule_expr(r, e);
}

static void x_cmp(struct rule *r, uint32_t op, const void *data, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("cmp");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_SREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_CMP_OP, op);
		nftnl_expr_set(e, NFTNL_EXPR_CMP_DATA, data, len);
	}
	rule_expr(r, e);
}

static void x_bitwise(struct rule *r, const void *mask, const void * xor, uint32_t len)
{
	struct nftnl_expr *e = nftnl_expr_alloc("bitwise");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_SREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_DREG, NFT_REG_1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_BITWISE_LEN, len);
		nftnl_expr_set(e, NFTNL_EXPR_BITWISE_MASK, mask, len);
		nftnl_expr_set(e, NFTNL_EXPR_BITWISE_XOR, xor, len);
	}
	rule_expr(r, e);
}

/* lookup reg sreg in set; dreg NFT_REG_VERDICT for a verdict map, ~0 for a plain set. */
static void x_lookup_flags(struct rule *r, uint32_t sreg, const char *set, uint32_t dreg,
			   uint32_t flags)
{
	struct nftnl_expr *e = nftnl_expr_alloc("lookup");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, sreg);
		nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, set);
		if (dreg != ~0u)
			nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_DREG, dreg);
		if (flags)
			nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_FLAGS, flags);
	}
	rule_expr(r, e);
}

static void x_lookup(struct rule *r, uint32_t sreg, const char *set, uint32_t dreg)
{
	x_lookup_flags(r, sreg, set, dreg, 0);
}

static void x_simple(struct rule *r, const char *name)
{
	rule_expr(r, nftnl_expr_alloc(name));
}

static void x_verdict(struct rule *r, int verdict)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)verdict);
	}
	rule_expr(r, e);
}

static void x_jump(struct rule *r, const char *chain)
{
	struct nftnl_expr *e = nftnl_expr_alloc("immediate");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
		nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, (uint32_t)NFT_JUMP);
		nftnl_expr_set_str(e, NFTNL_EXPR_IMM_CHAIN, chain);
	}
	rule_expr(r, e);
}

/* limit rate CELL_NFT_LOG_RATE/second burst CELL_NFT_LOG_BURST packets, then
 * log prefix "<prefix>" group G snaplen CELL_NFT_LOG_SNAPLEN: past the limit the rule stops
 * at the limit, before the log. */
/* limit rate [over] RATE/second burst BURST, in packets or bytes (type). */
static void x_limit(struct rule *r, uint32_t type, uint64_t rate, uint32_t burst, bool over)
{
	struct nftnl_expr *e = nftnl_expr_alloc("limit");
	if (e) {
		nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_RATE, rate);
		nftnl_expr_set_u64(e, NFTNL_EXPR_LIMIT_UNIT, 1);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_BURST, burst);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_TYPE, type);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LIMIT_FLAGS, over ? NFT_LIMIT_F_INV : 0);
	}
	rule_expr(r, e);
}

static void x_limited_log(struct rule *r, uint16_t group, const char *prefix)
{
	x_limit(r, NFT_LIMIT_PKTS, CELL_NFT_LOG_RATE, CELL_NFT_LOG_BURST, false);
	struct nftnl_expr *e = nftnl_expr_alloc("log");
	if (e) {
		nftnl_expr_set_str(e, NFTNL_EXPR_LOG_PREFIX, prefix);
		nftnl_expr_set_u16(e, NFTNL_EXPR_LOG_GROUP, group);
		nftnl_expr_set_u32(e, NFTNL_EXPR_LOG_SNAPLEN, CELL_NFT_LOG_SNAPLEN);
	}
	rule_expr(r, e);
}

/* limit rate over RATE bytes/second burst max(RATE / 4, 64 KiB) bytes: matches what exceeds
 * the rate. */
static void x_bytes_over(struct rule *r, uint64_t rate)
{
	uint64_t burst = rate / 4 > (64u << 10) ? rate / 4 : (64u << 10);
	x_limit(r, NFT_LIMIT_PKT_BYTES, rate, burst > UINT32_MAX ? UINT32_MAX : (uint32_t)burst,
		true);
}

/* ct count [over] N: the connections this rule has counted (each new one it sees, while
 * conntrack still holds it); over: match past N. */
static void x_connlimit(struct rule *r, uint32_t n)
{
	x_two(r, "connlimit", NFTNL_EXPR_CONNLIMIT_COUNT, n, NFTNL_EXPR_CONNLIMIT_FLAGS,
	      NFT_CONNLIMIT_F_INV);
}

/* reject with tcp reset (the rule has matched TCP). */
static void x_tcp_reset(struct rule *r)
{
	struct nftnl_expr *e = nftnl_expr_alloc("reject");
	if (e) {
		nftnl_expr_set_u32(e, NFTNL_EXPR_REJECT_TYPE, NFT_REJECT_TCP_RST);
		nftnl_expr_set_u8(e, NFTNL_EXPR_REJECT_CODE, 0);
	}
	rule_expr(r, e);
}

/* meta nfproto ipv4 (a rule of an inet chain that reads IPv4 headers starts with it). */
static void x_ipv4(struct rule *r)
{
	uint8_t p = NFPROTO_IPV4;
	x_meta(r, NFT_META_NFPROTO, NFT_REG_1);
	x_cmp(r, NFT_CMP_EQ, &p, 1);
}

static void x_ifname_in(struct rule *r, uint32_t key, const char *set)
{
	x_meta(r, key, NFT_REG_1);
	x_lookup(r, NFT_REG_1, set, ~0u);
}

/* ct state & bits != 0 */
static void x_ct_state(struct rule *r, uint32_t bits)
{
	x_two(r, "ct", NFTNL_EXPR_CT_KEY, NFT_CT_STATE, NFTNL_EXPR_CT_DREG, NFT_REG_1);
	uint32_t zero = 0;
	x_bitwise(r, &bits, &zero, 4);
	x_cmp(r, NFT_CMP_NEQ, &zero, 4);
}

#define CT_NEW		       8u
#define CT_ESTABLISHED_RELATED 6u
#define IP_SADDR	       12
#define IP_DADDR	       16

static void rule_begin(struct rule *r, struct cell_nft *nft, const char *chain)
{
	r->bad = false;
	r->r = nftnl_rule_alloc();
	if (!r->r) {
		r->bad = true;
		return;
	}
	nftnl_rule_set_str(r->r, NFTNL_RULE_TABLE, nft->table);
	nftnl_rule_set_str(r->r, NFTNL_RULE_CHAIN, chain);
	nftnl_rule_set_u32(r->r, NFTNL_RULE_FAMILY, NFPROTO_INET);
}

/* Put the rule (with its comment, when one) into the batch and free it. */
static void rule_end(struct batch *bt, struct rule *r, const char *comment)
{
	if (!r->r) {
		bt->overflow = true;
		return;
	}
	struct nftnl_udata_buf *u = NULL;
	if (comment) {
		u = nftnl_udata_buf_alloc(64);
		if (!u || !nftnl_udata_put_strz(u, NFTNL_UDATA_RULE_COMMENT, comment))
			r->bad = true;
		else
			nftnl_rule_set_data(r->r, NFTNL_RULE_USERDATA, nftnl_udata_buf_data(u),
					    nftnl_udata_buf_len(u));
	}
	if (r->bad) {
		bt->overflow = true;
	} else {
		struct nlmsghdr *nlh =
		    batch_msg(bt, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND,
			      "adding a rule%s%s to chain %s of table inet %s", comment ? " " : "",
			      comment ? comment : "", nftnl_rule_get_str(r->r, NFTNL_RULE_CHAIN),
			      bt->nft->table);
		if (nlh) {
			nftnl_rule_nlmsg_build_payload(nlh, r->r);
			batch_done_msg(bt);
		}
	}
	if (u)
		nftnl_udata_buf_free(u);
	nftnl_rule_free(r->r);
	r->r = NULL;
}

/* The end of a drop rule: `counter drop`, or with the packet log `counter jump CHAIN`, whose
 * chain (drop_chain_rules) logs and drops. */
static void x_drop(struct rule *r, struct cell_nft *nft, const char *chain)
{
	x_simple(r, "counter");
	if (nft->log_group)
		x_jump(r, chain);
	else
		x_verdict(r, NF_DROP);
}

/* A drop chain's rules: the limited log, then the drop whatever the limit said. */
static void drop_chain_rules(struct batch *bt, const char *chain, const char *reason)
{
	struct rule r;
	rule_begin(&r, bt->nft, chain);
	x_limited_log(&r, bt->nft->log_group, reason);
	rule_end(bt, &r, NULL);
	rule_begin(&r, bt->nft, chain);
	x_verdict(&r, NF_DROP);
	rule_end(bt, &r, NULL);
}

static void flush_chain(struct batch *bt, const char *chain)
{
	struct nftnl_rule *r = nftnl_rule_alloc();
	if (!r) {
		bt->overflow = true;
		return;
	}
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, bt->nft->table);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	struct nlmsghdr *nlh = batch_msg(
	    bt, NFT_MSG_DELRULE, 0, "flushing chain %s of table inet %s", chain, bt->nft->table);
	if (nlh) {
		nftnl_rule_nlmsg_build_payload(nlh, r);
		batch_done_msg(bt);
	}
	nftnl_rule_free(r);
}

/* ---- interval sets of IPv4 ranges ---- */

static void put_interval_set(struct batch *bt, const char *name, uint16_t flags)
{
	struct nftnl_set *s = set_new(bt->nft->table, name);
	if (s) {
		nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, NFT_TYPE_IPADDR);
		nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, 4);
		nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_INTERVAL);
	}
	put_set(bt, s, NFT_MSG_NEWSET, flags, "adding");
}

/* Replace what interval set name holds with ranges (any order, may overlap: the kernel
 * wants them disjoint, so they are merged first). An interval set holds the start of each
 * range and, as an end element, the address after it; the gap before the first range
 * starts with an end element at 0. */
static void fill_ranges(struct batch *bt, const char *name, const struct cell_nft_range *ranges,
			size_t n)
{
	put_set(bt, set_new(bt->nft->table, name), NFT_MSG_DELSETELEM, 0, "flushing");
	if (!n)
		return;
	struct cell_nft_range *r = malloc(n * sizeof(*r));
	struct nftnl_set *s = r ? set_new(bt->nft->table, name) : NULL;
	if (!s) {
		free(r);
		bt->overflow = true;
		return;
	}
	memcpy(r, ranges, n * sizeof(*r));
	n = merge_ranges(r, n);
	uint32_t zero = 0;
	if (r[0].first != 0)
		elem_add(s, &zero, 4, NFT_SET_ELEM_INTERVAL_END, 0);
	for (size_t i = 0; i < n; i++) {
		uint32_t a = htonl(r[i].first);
		elem_add(s, &a, 4, 0, 0);
		if (r[i].last != UINT32_MAX) {
			uint32_t e = htonl(r[i].last + 1);
			elem_add(s, &e, 4, NFT_SET_ELEM_INTERVAL_END, 0);
		}
	}
	free(r);
	put_set(bt, s, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "filling");
}

/* ---- the table ---- */

/* A sandbox's DNS with its resolver: to it (iifname . ip daddr @sandbox_dns, dport 53) or
 * from it (oifname . ip saddr @sandbox_dns, sport 53), over proto. */
static void x_sandbox_dns(struct rule *r, bool to, uint8_t proto)
{
	uint16_t port = htons(53);
	x_ipv4(r);
	x_meta(r, to ? NFT_META_IIFNAME : NFT_META_OIFNAME, NFT_REG32_00);
	x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, to ? IP_DADDR : IP_SADDR, 4, NFT_REG32_04);
	x_lookup(r, NFT_REG32_00, SET_DNS, ~0u);
	x_meta(r, NFT_META_L4PROTO, NFT_REG_1);
	x_cmp(r, NFT_CMP_EQ, &proto, 1);
	x_payload(r, NFT_PAYLOAD_TRANSPORT_HEADER, to ? 2 : 0, 2, NFT_REG_1);
	x_cmp(r, NFT_CMP_EQ, &port, 2);
}

static void base_rules(struct batch *bt)
{
	struct cell_nft *nft = bt->nft;
	struct rule r;
	uint8_t proto;

	/* forward */
	rule_begin(&r, nft, "forward");
	x_ifname_in(&r, NFT_META_OIFNAME, SET_IFS);
	x_ct_state(&r, CT_ESTABLISHED_RELATED);
	x_verdict(&r, NF_ACCEPT);
	rule_end(bt, &r, "reply to a sandbox");

	rule_begin(&r, nft, "forward");
	x_ifname_in(&r, NFT_META_OIFNAME, SET_IFS);
	x_simple(&r, "counter");
	x_verdict(&r, NF_DROP);
	rule_end(bt, &r, "into a sandbox");

	rule_begin(&r, nft, "forward");
	x_ifname_in(&r, NFT_META_IIFNAME, SET_IFS);
	proto = NFPROTO_IPV6;
	x_meta(&r, NFT_META_NFPROTO, NFT_REG_1);
	x_cmp(&r, NFT_CMP_EQ, &proto, 1);
	x_drop(&r, nft, CHAIN_DROP_IPV6);
	rule_end(bt, &r, "ipv6 from a sandbox");

	rule_begin(&r, nft, "forward");
	x_meta(&r, NFT_META_IIFNAME, NFT_REG_1);
	x_lookup(&r, NFT_REG_1, MAP_CHAINS, NFT_REG_VERDICT);
	rule_end(bt, &r, NULL);

	/* input: DNS over UDP to the sandbox's own host-side address, nothing else. TCP to
	 * that port is what celld does not serve: were it accepted, any host service on
	 * *:53/tcp would be every sandbox's, whatever its policy. It gets a reset rather than
	 * silence, so a resolver library that retries a truncated answer over TCP fails at
	 * once instead of waiting out its timeout. */
	rule_begin(&r, nft, "input");
	x_sandbox_dns(&r, true, IPPROTO_UDP);
	x_verdict(&r, NF_ACCEPT);
	rule_end(bt, &r, "dns udp");
	rule_begin(&r, nft, "input");
	x_sandbox_dns(&r, true, IPPROTO_TCP);
	x_simple(&r, "counter");
	x_tcp_reset(&r);
	rule_end(bt, &r, "dns tcp: not served");

	/* DNS with the resolver is never tracked (raw priority, before conntrack): a sandbox
	 * that asks from many source ports would fill the host's conntrack table with
	 * entries nothing needs (the input rule above is stateless), beside its own bound. */
	rule_begin(&r, nft, CHAIN_RAW_PRE);
	x_sandbox_dns(&r, true, IPPROTO_UDP);
	x_simple(&r, "notrack");
	rule_end(bt, &r, "dns untracked");
	rule_begin(&r, nft, CHAIN_RAW_OUT);
	x_sandbox_dns(&r, false, IPPROTO_UDP);
	x_simple(&r, "notrack");
	rule_end(bt, &r, "dns untracked");
	rule_begin(&r, nft, "input");
	x_ifname_in(&r, NFT_META_IIFNAME, SET_IFS);
	x_drop(&r, nft, CHAIN_DROP_HOST);
	rule_end(bt, &r, "sandbox to host");

	if (nft->log_group) {
		drop_chain_rules(bt, CHAIN_DROP_HOST, "host");
		drop_chain_rules(bt, CHAIN_DROP_IPV6, "ipv6");
		drop_chain_rules(bt, CHAIN_DROP_DNS, "dns");
	}

	/* postrouting: meta nfproto ipv4 iifname @sandbox_ifs masquerade. By interface, not
	 * by the subnet: a sandbox started under an earlier --subnet keeps its egress when
	 * celld restarts with another (what reaches postrouting from a sandbox interface is
	 * on its way out: the forward chain drops what would enter another sandbox). */
	rule_begin(&r, nft, "postrouting");
	x_ipv4(&r);
	x_ifname_in(&r, NFT_META_IIFNAME, SET_IFS);
	x_simple(&r, "masq");
	rule_end(bt, &r, "sandboxes out");
}

static int table_create(struct cell_nft *nft, const struct cell_nft_range *blocked, size_t nb,
			struct cell_error *err)
{
	if (nb > CELL_NFT_RANGES_MAX)
		return cell_err_msg(err, E2BIG, "blocked list: %zu ranges, at most %d", nb,
				    CELL_NFT_RANGES_MAX);
	struct batch *bt = calloc(1, sizeof(*bt));
	if (!bt)
		return cell_err(err, ENOMEM, "nftables table inet %s", nft->table);
	batch_start(bt, nft);

	struct nftnl_table *t = nftnl_table_alloc();
	if (!t) {
		bt->overflow = true;
	} else {
		nftnl_table_set_str(t, NFTNL_TABLE_NAME, nft->table);
		nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
		struct nlmsghdr *nlh = batch_msg(bt, NFT_MSG_NEWTABLE, NLM_F_CREATE,
						 "adding table inet %s", nft->table);
		if (nlh) {
			nftnl_table_nlmsg_build_payload(nlh, t);
			batch_done_msg(bt);
		}
		nftnl_table_free(t);
	}

	/* Sets (without NLM_F_EXCL: an existing one with the same type is reused). */
	put_interval_set(bt, SET_BLOCKED, NLM_F_CREATE);
	struct nftnl_set *s = set_new(nft->table, SET_IFS);
	if (s) {
		nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, NFT_TYPE_IFNAME);
		nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, IFNAMSIZ);
	}
	put_set(bt, s, NFT_MSG_NEWSET, NLM_F_CREATE, "adding");
	s = set_new(nft->table, SET_DNS);
	if (s) {
		nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE,
				  NFT_TYPE_IFNAME << NFT_TYPE_BITS | NFT_TYPE_IPADDR);
		nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, IFNAMSIZ + 4);
	}
	put_set(bt, s, NFT_MSG_NEWSET, NLM_F_CREATE, "adding");
	s = set_new(nft->table, MAP_CHAINS);
	if (s) {
		nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, NFT_TYPE_IFNAME);
		nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, IFNAMSIZ);
		nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_MAP);
		nftnl_set_set_u32(s, NFTNL_SET_DATA_TYPE, NFT_DATA_VERDICT);
	}
	put_set(bt, s, NFT_MSG_NEWSET, NLM_F_CREATE, "adding");

	/* The blocked ranges, replacing whatever the set held. */
	fill_ranges(bt, SET_BLOCKED, blocked, nb);

	put_chain(bt, "forward", "filter", NF_INET_FORWARD, 0, NLM_F_CREATE);
	put_chain(bt, "input", "filter", NF_INET_LOCAL_IN, 0, NLM_F_CREATE);
	put_chain(bt, "postrouting", "nat", NF_INET_POST_ROUTING, 100, NLM_F_CREATE);
	put_chain(bt, CHAIN_DROP_HOST, NULL, 0, 0, NLM_F_CREATE);
	put_chain(bt, CHAIN_DROP_IPV6, NULL, 0, 0, NLM_F_CREATE);
	put_chain(bt, CHAIN_DROP_DNS, NULL, 0, 0, NLM_F_CREATE);
	put_chain(bt, CHAIN_RAW_PRE, "filter", NF_INET_PRE_ROUTING, NF_IP_PRI_RAW, NLM_F_CREATE);
	put_chain(bt, CHAIN_RAW_OUT, "filter", NF_INET_LOCAL_OUT, NF_IP_PRI_RAW, NLM_F_CREATE);
	flush_chain(bt, CHAIN_RAW_PRE);
	flush_chain(bt, CHAIN_RAW_OUT);
	flush_chain(bt, "forward");
	flush_chain(bt, "input");
	flush_chain(bt, "postrouting");
	flush_chain(bt, CHAIN_DROP_HOST);
	flush_chain(bt, CHAIN_DROP_IPV6);
	flush_chain(bt, CHAIN_DROP_DNS);
	base_rules(bt);

	int rc = batch_run(bt, err);
	batch_free(bt);
	return rc;
}

int cell_nft_table_create(struct cell_nft *nft, const struct cell_nft_range *blocked,
			  size_t n_blocked, struct cell_error *err)
{
	pthread_mutex_lock(&nft->lock);
	int rc = table_create(nft, blocked, n_blocked, err);
	pthread_mutex_unlock(&nft->lock);
	return rc;
}

int cell_nft_open(const struct cell_nft_table_opts *opts, struct cell_nft **out,
		  struct cell_error *err)
{
	*out = NULL;
	if (!name_ok(opts->name, CELL_NFT_NAME_MAX - 1))
		return cell_err_msg(err, EINVAL, "nftables table name: 1 to %d of [A-Za-z0-9_.-]",
				    CELL_NFT_NAME_MAX - 1);
	if (opts->prefix < 1 || opts->prefix > 32)
		return cell_err_msg(err, EINVAL, "sandbox subnet prefix /%u: 1 to 32",
				    opts->prefix);
	struct cell_nft *nft = calloc(1, sizeof(*nft));
	if (!nft || !(nft->buf = malloc(BATCH_BUF))) {
		free(nft);
		return cell_err(err, ENOMEM, "nftables table inet %s", opts->name);
	}
	pthread_mutex_init(&nft->lock, NULL);
	snprintf(nft->table, sizeof(nft->table), "%s", opts->name);
	nft->subnet = opts->subnet;
	nft->prefix = opts->prefix;
	nft->log_group = opts->log_group;
	nft->seq = 1;
	int rc;
	nft->nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC);
	if (!nft->nl) {
		rc = cell_err(err, errno, "nftables: opening a netfilter netlink socket");
		goto fail;
	}
	if (mnl_socket_bind(nft->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
		rc = cell_err(err, errno, "nftables: binding a netfilter netlink socket");
		goto fail;
	}
	nft->portid = mnl_socket_get_portid(nft->nl);
	/* Room for a whole batch and all its ACKs (root may go past the sysctl limit). */
	int size = 4 * BATCH_BUF;
	int fd = mnl_socket_get_fd(nft->nl);
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) < 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	rc = table_create(nft, opts->blocked, opts->n_blocked, err);
	if (rc < 0)
		goto fail;
	*out = nft;
	return 0;
fail:
	cell_nft_close(nft);
	return rc;
}

void cell_nft_close(struct cell_nft *nft)
{
	if (!nft)
		return;
	if (nft->nl)
		mnl_socket_close(nft->nl);
	pthread_mutex_destroy(&nft->lock);
	free(nft->buf);
	free(nft);
}

int cell_nft_table_delete(struct cell_nft *nft, struct cell_error *err)
{
	pthread_mutex_lock(&nft->lock);
	struct batch *bt = calloc(1, sizeof(*bt));
	struct nftnl_table *t = nftnl_table_alloc();
	int rc;
	if (!bt || !t) {
		rc = cell_err(err, ENOMEM, "deleting table inet %s", nft->table);
		goto out;
	}
	batch_start(bt, nft);
	nftnl_table_set_str(t, NFTNL_TABLE_NAME, nft->table);
	nftnl_table_set_u32(t, NFTNL_TABLE_FAMILY, NFPROTO_INET);
	struct nlmsghdr *nlh =
	    batch_msg(bt, NFT_MSG_DELTABLE, 0, "deleting table inet %s", nft->table);
	if (nlh) {
		nftnl_table_nlmsg_build_payload(nlh, t);
		batch_done_msg(bt);
	}
	struct cell_error e2;
	cell_err_clear(&e2);
	rc = batch_run(bt, &e2);
	if (rc == -ENOENT)
		rc = 0;
	else if (rc < 0 && err)
		*err = e2;
out:
	if (t)
		nftnl_table_free(t);
	batch_free(bt);
	pthread_mutex_unlock(&nft->lock);
	return rc;
}

/* ---- sandboxes ---- */

/* The reasons of a sandbox's drop chains (sb-IF/<reason>). */
static const char *const sandbox_drops[] = {"spoofed", "blocked", "denied", "conntrack"};

/* ip daddr @set: the destination is in one of the sandbox's sets. */
static void x_daddr_in(struct rule *r, const char *set)
{
	x_ipv4(r);
	x_payload(r, NFT_PAYLOAD_NETWORK_HEADER, IP_DADDR, 4, NFT_REG_1);
	x_lookup(r, NFT_REG_1, set, ~0u);
}

/* An allowlist's accept of new connections to what set holds. */
static void allow_rule(struct batch *bt, const char *chain, const char *set)
{
	struct rule r;
	rule_begin(&r, bt->nft, chain);
	x_daddr_in(&r, set);
	x_ct_state(&r, CT_NEW);
	x_simple(&r, "counter");
	x_verdict(&r, NF_ACCEPT);
	rule_end(bt, &r, "allowed");
}

static void sandbox_rules(struct batch *bt, const struct cell_nft_sandbox *sb,
			  const struct sb_names *n)
{
	const char *chain = n->chain;
	struct cell_nft *nft = bt->nft;
	struct rule r;
	char spoofed[NFT_CHAIN_MAXNAMELEN], blocked[NFT_CHAIN_MAXNAMELEN],
	    denied[NFT_CHAIN_MAXNAMELEN], conntrack[NFT_CHAIN_MAXNAMELEN];
	drop_chain_name(spoofed, sizeof(spoofed), sb->ifname, "spoofed");
	drop_chain_name(blocked, sizeof(blocked), sb->ifname, "blocked");
	drop_chain_name(denied, sizeof(denied), sb->ifname, "denied");
	drop_chain_name(conntrack, sizeof(conntrack), sb->ifname, "conntrack");
	for (size_t i = 0; nft->log_group && i < CELL_ARRAY_SIZE(sandbox_drops); i++) {
		char drop[NFT_CHAIN_MAXNAMELEN];
		drop_chain_name(drop, sizeof(drop), sb->ifname, sandbox_drops[i]);
		drop_chain_rules(bt, drop, sandbox_drops[i]);
	}

	rule_begin(&r, nft, chain);
	x_ipv4(&r);
	x_payload(&r, NFT_PAYLOAD_NETWORK_HEADER, IP_SADDR, 4, NFT_REG_1);
	x_cmp(&r, NFT_CMP_NEQ, &sb->addr.s_addr, 4);
	x_drop(&r, nft, spoofed);
	rule_end(bt, &r, "spoofed");

	rule_begin(&r, nft, chain);
	x_daddr_in(&r, SET_BLOCKED);
	x_drop(&r, nft, blocked);
	rule_end(bt, &r, "blocked");

	/* DNS goes to the sandbox's own resolver (the host's input chain), in every mode: a
	 * query to any other resolver (udp or tcp port 53) is dropped, so names are answered,
	 * refused and logged in one place, unless the policy names that resolver's address
	 * in an allow rule (the ranges set). Counted as denied. */
	for (int i = 0; i < 2; i++) {
		uint8_t proto = i == 0 ? IPPROTO_UDP : IPPROTO_TCP;
		uint16_t port = htons(53);
		rule_begin(&r, nft, chain);
		x_meta(&r, NFT_META_L4PROTO, NFT_REG_1);
		x_cmp(&r, NFT_CMP_EQ, &proto, 1);
		x_payload(&r, NFT_PAYLOAD_TRANSPORT_HEADER, 2, 2, NFT_REG_1);
		x_cmp(&r, NFT_CMP_EQ, &port, 2);
		x_ipv4(&r);
		x_payload(&r, NFT_PAYLOAD_NETWORK_HEADER, IP_DADDR, 4, NFT_REG_1);
		x_lookup_flags(&r, NFT_REG_1, n->ranges, ~0u, NFT_LOOKUP_F_INV);
		x_drop(&r, nft, CHAIN_DROP_DNS);
		rule_end(bt, &r, "dns");
	}

	/* The policy's denied addresses win over anything that allows them, and end
	 * connections opened before they were denied. */
	rule_begin(&r, nft, chain);
	x_daddr_in(&r, n->denied);
	x_drop(&r, nft, denied);
	rule_end(bt, &r, "denied");

	/* Before anything accepts: the limit holds for established connections too. Not
	 * logged: it is the sandbox's bandwidth, not an attempt. */
	if (sb->egress_bytes_per_s) {
		rule_begin(&r, nft, chain);
		x_bytes_over(&r, sb->egress_bytes_per_s);
		x_simple(&r, "counter");
		x_verdict(&r, NF_DROP);
		rule_end(bt, &r, "egress limit");
	}

	rule_begin(&r, nft, chain);
	x_ct_state(&r, CT_ESTABLISHED_RELATED);
	x_verdict(&r, NF_ACCEPT);
	rule_end(bt, &r, NULL);

	/* The host's conntrack table is one for every sandbox (nf_conntrack_max): past its
	 * bound a sandbox's new connections are dropped, so one sandbox's flood of flows
	 * never fills the table and fails everyone's connections and celld's DNS. */
	if (sb->max_conns) {
		rule_begin(&r, nft, chain);
		x_ct_state(&r, CT_NEW);
		x_connlimit(&r, sb->max_conns);
		x_drop(&r, nft, conntrack);
		rule_end(bt, &r, "conntrack");
	}

	if (sb->policy == CELL_NFT_PUBLIC) {
		rule_begin(&r, nft, chain);
		x_ct_state(&r, CT_NEW);
		x_simple(&r, "counter");
		x_verdict(&r, NF_ACCEPT);
		rule_end(bt, &r, "allowed");
	} else if (sb->policy == CELL_NFT_ALLOWLIST) {
		allow_rule(bt, chain, n->allowed);
		allow_rule(bt, chain, n->ranges);
	}

	/* Only packets the next rule drops get here. */
	if (nft->log_group) {
		rule_begin(&r, nft, chain);
		x_limited_log(&r, nft->log_group, "denied");
		rule_end(bt, &r, NULL);
	}
	rule_begin(&r, nft, chain);
	x_simple(&r, "counter");
	x_verdict(&r, NF_DROP);
	rule_end(bt, &r, "denied");
}

static int check_ranges(const struct cell_nft_sandbox *sb, struct cell_error *err)
{
	if (sb->n_allow_ranges > CELL_NFT_RANGES_MAX || sb->n_deny_ranges > CELL_NFT_RANGES_MAX)
		return cell_err_msg(
		    err, E2BIG, "sandbox %s: %zu allowed and %zu denied ranges, at most %d each",
		    sb->ifname, sb->n_allow_ranges, sb->n_deny_ranges, CELL_NFT_RANGES_MAX);
	return 0;
}

/* The sandbox's objects (and, to rebuild, its chains emptied and written again) in one
 * batch; its allowed set's elements are kept. */
static int sandbox_put(struct cell_nft *nft, const struct cell_nft_sandbox *sb, bool rebuild,
		       struct cell_error *err)
{
	int rc = check_ifname(sb->ifname, err);
	if (rc < 0 || (rc = check_ranges(sb, err)) < 0)
		return rc;
	if (sb->policy != CELL_NFT_NONE && sb->policy != CELL_NFT_PUBLIC &&
	    sb->policy != CELL_NFT_ALLOWLIST)
		return cell_err_msg(err, EINVAL, "sandbox %s: unknown network policy %d",
				    sb->ifname, (int)sb->policy);
	struct sb_names n;
	char key[IFNAMSIZ];
	sb_names_of(sb->ifname, &n);
	ifkey(key, sb->ifname);
	uint16_t create = rebuild ? NLM_F_CREATE : NLM_F_CREATE | NLM_F_EXCL;

	pthread_mutex_lock(&nft->lock);
	struct batch *bt = calloc(1, sizeof(*bt));
	if (!bt) {
		rc = cell_err(err, ENOMEM, "adding sandbox %s", sb->ifname);
		goto out;
	}
	batch_start(bt, nft);
	struct nftnl_set *s = set_new(nft->table, n.allowed);
	if (s) {
		nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, NFT_TYPE_IPADDR);
		nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, 4);
		nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_TIMEOUT);
		nftnl_set_set_u32(s, NFTNL_SET_DESC_SIZE, CELL_NFT_ALLOWED_MAX);
	}
	put_set(bt, s, NFT_MSG_NEWSET, create, "adding");
	put_interval_set(bt, n.ranges, create);
	put_interval_set(bt, n.denied, create);
	fill_ranges(bt, n.ranges, sb->allow_ranges, sb->n_allow_ranges);
	fill_ranges(bt, n.denied, sb->deny_ranges, sb->n_deny_ranges);
	put_chain(bt, n.chain, NULL, 0, 0, create);
	if (rebuild)
		flush_chain(bt, n.chain);
	for (size_t i = 0; nft->log_group && i < CELL_ARRAY_SIZE(sandbox_drops); i++) {
		char drop[NFT_CHAIN_MAXNAMELEN];
		drop_chain_name(drop, sizeof(drop), sb->ifname, sandbox_drops[i]);
		put_chain(bt, drop, NULL, 0, 0, create);
		if (rebuild)
			flush_chain(bt, drop);
	}
	sandbox_rules(bt, sb, &n);

	s = set_new(nft->table, SET_IFS);
	if (s)
		elem_add(s, key, IFNAMSIZ, 0, 0);
	put_set(bt, s, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "adding an element to");
	s = set_new(nft->table, SET_DNS);
	if (s) {
		uint8_t k[IFNAMSIZ + 4];
		memcpy(k, key, IFNAMSIZ);
		memcpy(k + IFNAMSIZ, &sb->host_addr.s_addr, 4);
		elem_add(s, k, sizeof(k), 0, 0);
	}
	put_set(bt, s, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "adding an element to");
	s = set_new(nft->table, MAP_CHAINS);
	if (s) {
		struct nftnl_set_elem *e = nftnl_set_elem_alloc();
		if (e) {
			nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, key, IFNAMSIZ);
			nftnl_set_elem_set_u32(e, NFTNL_SET_ELEM_VERDICT, NFT_JUMP);
			nftnl_set_elem_set_str(e, NFTNL_SET_ELEM_CHAIN, n.chain);
			nftnl_set_elem_add(s, e);
		} else {
			bt->overflow = true;
		}
	}
	put_set(bt, s, NFT_MSG_NEWSETELEM, NLM_F_CREATE, "adding an element to");
	rc = batch_run(bt, err);
	if (rc < 0)
		cell_err_wrap(err, "%s sandbox %s: ", rebuild ? "rebuilding" : "adding",
			      sb->ifname);
out:
	batch_free(bt);
	pthread_mutex_unlock(&nft->lock);
	return rc;
}

int cell_nft_sandbox_add(struct cell_nft *nft, const struct cell_nft_sandbox *sb,
			 struct cell_error *err)
{
	return sandbox_put(nft, sb, false, err);
}

int cell_nft_sandbox_rebuild(struct cell_nft *nft, const struct cell_nft_sandbox *sb,
			     struct cell_error *err)
{
	return sandbox_put(nft, sb, true, err);
}

int cell_nft_ranges_set(struct cell_nft *nft, const struct cell_nft_sandbox *sb,
			struct cell_error *err)
{
	int rc = check_ifname(sb->ifname, err);
	if (rc < 0 || (rc = check_ranges(sb, err)) < 0)
		return rc;
	struct sb_names n;
	sb_names_of(sb->ifname, &n);
	pthread_mutex_lock(&nft->lock);
	struct batch *bt = calloc(1, sizeof(*bt));
	if (bt) {
		batch_start(bt, nft);
		fill_ranges(bt, n.ranges, sb->allow_ranges, sb->n_allow_ranges);
		fill_ranges(bt, n.denied, sb->deny_ranges, sb->n_deny_ranges);
		rc = batch_run(bt, err);
	} else {
		rc = cell_err(err, ENOMEM, "sandbox %s", sb->ifname);
	}
	batch_free(bt);
	pthread_mutex_unlock(&nft->lock);
	return rc;
}

static bool elems_has_if(const struct elems *es, const char *key, size_t *from)
{
	for (size_t i = *from; i < es->n; i++)
		if (es->v[i].len >= IFNAMSIZ && !memcmp(es->v[i].key, key, IFNAMSIZ)) {
			*from = i;
			return true;
		}
	return false;
}

/* What is there of one sandbox, each object asked for by name (never a dump of the whole
 * table, which another writer's commit may tear), and the elements of sandbox_dns by a dump
 * (their key holds the host address, which a leftover's caller may not know): read
 * again when torn. */
struct sb_present {
	bool chain, drops[CELL_ARRAY_SIZE(sandbox_drops)], sets[3], ifs, map;
	struct elems dns;
};

static int chain_exists(struct cell_nft *nft, const char *name)
{
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c)
		return -ENOMEM;
	nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, nft->table);
	nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, name);
	int rc = exists(nft, NFT_MSG_GETCHAIN, build_chain, c);
	nftnl_chain_free(c);
	return rc;
}

/* The set name, or (key) its element key. */
static int set_exists(struct cell_nft *nft, const char *name, const void *key, uint32_t len)
{
	struct nftnl_set *s = set_new(nft->table, name);
	if (!s || (key && elem_add(s, key, len, 0, 0) < 0)) {
		if (s)
			nftnl_set_free(s);
		return -ENOMEM;
	}
	int rc = key ? exists(nft, NFT_MSG_GETSETELEM, build_elems, s)
		     : exists(nft, NFT_MSG_GETSET, build_set, s);
	nftnl_set_free(s);
	return rc;
}

/* rc < 0 stays; else *flag = rc. */
static int present(int rc, bool *flag)
{
	if (rc >= 0)
		*flag = rc > 0;
	return rc < 0 ? rc : 0;
}

static int sb_present_read(struct cell_nft *nft, const char *ifname, const struct sb_names *n,
			   const char key[IFNAMSIZ], struct sb_present *p)
{
	memset(p, 0, sizeof(*p));
	int rc = present(chain_exists(nft, n->chain), &p->chain);
	for (size_t i = 0; rc == 0 && i < CELL_ARRAY_SIZE(sandbox_drops); i++) {
		char drop[NFT_CHAIN_MAXNAMELEN];
		drop_chain_name(drop, sizeof(drop), ifname, sandbox_drops[i]);
		rc = present(chain_exists(nft, drop), &p->drops[i]);
	}
	const char *const own_sets[] = {n->allowed, n->ranges, n->denied};
	for (size_t i = 0; rc == 0 && i < CELL_ARRAY_SIZE(own_sets); i++)
		rc = present(set_exists(nft, own_sets[i], NULL, 0), &p->sets[i]);
	if (rc == 0)
		rc = present(set_exists(nft, SET_IFS, key, IFNAMSIZ), &p->ifs);
	if (rc == 0)
		rc = present(set_exists(nft, MAP_CHAINS, key, IFNAMSIZ), &p->map);
	if (rc == 0)
		rc = list_elems(nft, SET_DNS, &p->dns);
	return rc;
}

static void del_elem(struct batch *bt, const char *set, const void *key, uint32_t len)
{
	struct nftnl_set *s = set_new(bt->nft->table, set);
	if (s)
		elem_add(s, key, len, 0, 0);
	put_set(bt, s, NFT_MSG_DELSETELEM, 0, "deleting an element of");
}

int cell_nft_sandbox_remove(struct cell_nft *nft, const char *ifname, struct cell_error *err)
{
	int rc = check_ifname(ifname, err);
	if (rc < 0)
		return rc;
	struct sb_names n;
	char key[IFNAMSIZ];
	sb_names_of(ifname, &n);
	ifkey(key, ifname);

	pthread_mutex_lock(&nft->lock);
	struct sb_present p;
	struct batch *bt = NULL;
	/* What is there of it: the batch deletes exactly that (a deletion of something
	 * absent would fail the whole batch). */
	if ((rc = sb_present_read(nft, ifname, &n, key, &p)) < 0) {
		rc = cell_err(err, -rc, "removing sandbox %s: reading table inet %s", ifname,
			      nft->table);
		goto out;
	}
	bt = calloc(1, sizeof(*bt));
	if (!bt) {
		rc = cell_err(err, ENOMEM, "removing sandbox %s", ifname);
		goto out;
	}
	batch_start(bt, nft);
	if (p.map)
		del_elem(bt, MAP_CHAINS, key, IFNAMSIZ);
	if (p.ifs)
		del_elem(bt, SET_IFS, key, IFNAMSIZ);
	size_t at = 0;
	struct nftnl_set *ds = NULL;
	while (elems_has_if(&p.dns, key, &at)) {
		if (!ds)
			ds = set_new(nft->table, SET_DNS);
		if (ds)
			elem_add(ds, p.dns.v[at].key, p.dns.v[at].len, 0, 0);
		at++;
	}
	if (ds)
		put_set(bt, ds, NFT_MSG_DELSETELEM, 0, "deleting an element of");
	/* Its chain first: its jumps go with it, then the drop chains they jumped to. */
	if (p.chain)
		del_chain(bt, n.chain);
	for (size_t i = 0; i < CELL_ARRAY_SIZE(sandbox_drops); i++) {
		char drop[NFT_CHAIN_MAXNAMELEN];
		drop_chain_name(drop, sizeof(drop), ifname, sandbox_drops[i]);
		if (p.drops[i])
			del_chain(bt, drop);
	}
	const char *const own_sets[] = {n.allowed, n.ranges, n.denied};
	for (size_t i = 0; i < CELL_ARRAY_SIZE(own_sets); i++)
		if (p.sets[i])
			put_set(bt, set_new(nft->table, own_sets[i]), NFT_MSG_DELSET, 0,
				"deleting");
	rc = bt->n ? batch_run(bt, err) : 0;
	if (rc < 0)
		cell_err_wrap(err, "removing sandbox %s: ", ifname);
out:
	batch_free(bt);
	free(p.dns.v);
	pthread_mutex_unlock(&nft->lock);
	return rc;
}

static int ifname_cmp(const void *a, const void *b)
{
	return strcmp(a, b);
}

int cell_nft_sandbox_list(struct cell_nft *nft, char (**out)[CELL_NFT_IFNAME_MAX + 1], size_t *n,
			  struct cell_error *err)
{
	*out = NULL;
	*n = 0;
	pthread_mutex_lock(&nft->lock);
	struct names chains = {0};
	struct elems ifs = {0}, map = {0};
	char(*v)[CELL_NFT_IFNAME_MAX + 1] = NULL;
	int rc;
	if ((rc = list_chains(nft, &chains)) < 0 || (rc = list_elems(nft, SET_IFS, &ifs)) < 0 ||
	    (rc = list_elems(nft, MAP_CHAINS, &map)) < 0) {
		rc = cell_err(err, -rc, "listing the sandboxes of table inet %s", nft->table);
		goto out;
	}
	size_t cap = chains.n + ifs.n + map.n, k = 0;
	v = calloc(cap ? cap : 1, sizeof(*v));
	if (!v) {
		rc = cell_err(err, ENOMEM, "listing the sandboxes of table inet %s", nft->table);
		goto out;
	}
	size_t pl = strlen(CHAIN_PREFIX);
	for (size_t i = 0; i < chains.n; i++) {
		const char *c = chains.v[i];
		if (!strncmp(c, CHAIN_PREFIX, pl) && name_ok(c + pl, CELL_NFT_IFNAME_MAX))
			snprintf(v[k++], sizeof(v[0]), "%s", c + pl);
	}
	struct elems *both[] = {&ifs, &map};
	for (int j = 0; j < 2; j++)
		for (size_t i = 0; i < both[j]->n; i++) {
			char name[IFNAMSIZ] = {0};
			memcpy(name, both[j]->v[i].key, IFNAMSIZ - 1);
			if (name_ok(name, CELL_NFT_IFNAME_MAX))
				snprintf(v[k++], sizeof(v[0]), "%s", name);
		}
	qsort(v, k, sizeof(v[0]), ifname_cmp);
	size_t u = 0;
	for (size_t i = 0; i < k; i++)
		if (!u || strcmp(v[u - 1], v[i]))
			memmove(v[u++], v[i], sizeof(v[0]));
	*out = v;
	*n = u;
	v = NULL;
	rc = 0;
out:
	free(v);
	free(chains.v);
	free(ifs.v);
	free(map.v);
	pthread_mutex_unlock(&nft->lock);
	return rc;
}

struct counters_ctx {
	struct cell_nft_counters *out;
	const char *table, *chain;
	int found;
};

static int comment_cb(const struct nftnl_udata *attr, void *data)
{
	if (nftnl_udata_type(attr) == NFTNL_UDATA_RULE_COMMENT)
		*(const struct nftnl_udata **)data = attr;
	return 0;
}

static int counters_cb(const struct nlmsghdr *nlh, void *data)
{
	struct counters_ctx *cx = data;
	struct nftnl_rule *r = nftnl_rule_alloc();
	if (!r)
		return MNL_CB_ERROR;
	if (nftnl_rule_nlmsg_parse(nlh, r) < 0)
		goto out;
	const char *t = nftnl_rule_get_str(r, NFTNL_RULE_TABLE);
	const char *c = nftnl_rule_get_str(r, NFTNL_RULE_CHAIN);
	if (!t || !c || strcmp(t, cx->table) || strcmp(c, cx->chain))
		goto out;
	uint32_t ulen = 0;
	const void *ud = nftnl_rule_get_data(r, NFTNL_RULE_USERDATA, &ulen);
	const struct nftnl_udata *cm = NULL;
	if (!ud || nftnl_udata_parse(ud, ulen, comment_cb, &cm) < 0 || !cm)
		goto out;
	char comment[32] = {0};
	memcpy(comment, nftnl_udata_get(cm),
	       nftnl_udata_len(cm) < sizeof(comment) - 1 ? nftnl_udata_len(cm)
							 : sizeof(comment) - 1);
	struct cell_nft_counter *dst = !strcmp(comment, "spoofed")	  ? &cx->out->spoofed
				       : !strcmp(comment, "blocked")	  ? &cx->out->blocked
				       : !strcmp(comment, "allowed")	  ? &cx->out->allowed
				       : !strcmp(comment, "denied")	  ? &cx->out->denied
				       : !strcmp(comment, "dns")	  ? &cx->out->denied
				       : !strcmp(comment, "egress limit") ? &cx->out->egress_limited
				       : !strcmp(comment, "conntrack") ? &cx->out->conntrack_limited
								       : NULL;
	if (!dst)
		goto out;
	struct nftnl_expr_iter *it = nftnl_expr_iter_create(r);
	for (struct nftnl_expr *e = it ? nftnl_expr_iter_next(it) : NULL; e;
	     e = nftnl_expr_iter_next(it)) {
		const char *name = nftnl_expr_get_str(e, NFTNL_EXPR_NAME);
		if (name && !strcmp(name, "counter")) {
			dst->packets += nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_PACKETS);
			dst->bytes += nftnl_expr_get_u64(e, NFTNL_EXPR_CTR_BYTES);
			cx->found++;
		}
	}
	if (it)
		nftnl_expr_iter_destroy(it);
out:
	nftnl_rule_free(r);
	return MNL_CB_OK;
}

static void counters_reset(void *data)
{
	struct counters_ctx *cx = data;
	memset(cx->out, 0, sizeof(*cx->out));
	cx->found = 0;
}

int cell_nft_sandbox_counters(struct cell_nft *nft, const char *ifname,
			      struct cell_nft_counters *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	int rc = check_ifname(ifname, err);
	if (rc < 0)
		return rc;
	char chain[NFT_CHAIN_MAXNAMELEN];
	chain_name(chain, sizeof(chain), ifname);
	struct counters_ctx cx = {.out = out, .table = nft->table, .chain = chain};
	struct nftnl_rule *r = nftnl_rule_alloc();
	if (!r)
		return cell_err(err, ENOMEM, "counters of chain %s", chain);
	nftnl_rule_set_str(r, NFTNL_RULE_TABLE, nft->table);
	nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, chain);
	pthread_mutex_lock(&nft->lock);
	rc = dump(nft, NFT_MSG_GETRULE, build_rule, r, counters_cb, counters_reset, &cx);
	pthread_mutex_unlock(&nft->lock);
	nftnl_rule_free(r);
	if (rc < 0)
		return cell_err(err, -rc, "reading the counters of chain %s in table inet %s",
				chain, nft->table);
	if (!cx.found)
		return cell_err_msg(err, ENOENT, "chain %s in table inet %s: no counters", chain,
				    nft->table);
	return 0;
}

/* ---- a sandbox's allowed set ---- */

static int allow_batch(struct cell_nft *nft, const char *ifname, const struct in_addr *addrs,
		       size_t n, unsigned timeout_s, bool add, struct cell_error *err)
{
	int rc = check_ifname(ifname, err);
	if (rc < 0)
		return rc;
	if (n > CELL_NFT_ALLOWED_MAX)
		return cell_err_msg(err, E2BIG, "sandbox %s: %zu addresses, at most %d", ifname, n,
				    CELL_NFT_ALLOWED_MAX);
	if (add && (timeout_s < 1 || timeout_s > CELL_NFT_TIMEOUT_MAX))
		return cell_err_msg(err, EINVAL, "sandbox %s: timeout %u s: 1 to %u", ifname,
				    timeout_s, CELL_NFT_TIMEOUT_MAX);
	if (!n)
		return 0;
	char set[NFT_SET_MAXNAMELEN];
	allowed_name(set, sizeof(set), ifname);
	uint64_t ms = add ? (uint64_t)timeout_s * 1000 : 1000;

	pthread_mutex_lock(&nft->lock);
	struct batch *bt = calloc(1, sizeof(*bt));
	if (!bt) {
		rc = cell_err(err, ENOMEM, "set %s", set);
		goto out;
	}
	batch_start(bt, nft);
	/* Add (a no-op for one already there), delete, and (to add) add again: a present
	 * element gets the new timeout, an absent one is no error; all or nothing. */
	for (int step = 0; step < (add ? 3 : 2); step++) {
		struct nftnl_set *s = set_new(nft->table, set);
		for (size_t i = 0; s && i < n; i++)
			if (elem_add(s, &addrs[i].s_addr, 4, 0, step == 1 ? 0 : ms) < 0)
				bt->overflow = true;
		put_set(bt, s, step == 1 ? NFT_MSG_DELSETELEM : NFT_MSG_NEWSETELEM,
			step == 1 ? 0 : NLM_F_CREATE,
			step == 1 ? "deleting elements of" : "adding elements to");
	}
	rc = batch_run(bt, err);
out:
	batch_free(bt);
	pthread_mutex_unlock(&nft->lock);
	return rc;
}

int cell_nft_allow_add(struct cell_nft *nft, const char *ifname, const struct in_addr *addrs,
		       size_t n, unsigned timeout_s, struct cell_error *err)
{
	return allow_batch(nft, ifname, addrs, n, timeout_s, true, err);
}

int cell_nft_allow_del(struct cell_nft *nft, const char *ifname, const struct in_addr *addrs,
		       size_t n, struct cell_error *err)
{
	return allow_batch(nft, ifname, addrs, n, 0, false, err);
}

int cell_nft_allow_list(struct cell_nft *nft, const char *ifname, struct cell_nft_allowed **out,
			size_t *n, struct cell_error *err)
{
	*out = NULL;
	*n = 0;
	int rc = check_ifname(ifname, err);
	if (rc < 0)
		return rc;
	char set[NFT_SET_MAXNAMELEN];
	allowed_name(set, sizeof(set), ifname);
	struct elems es;
	pthread_mutex_lock(&nft->lock);
	rc = list_elems(nft, set, &es);
	pthread_mutex_unlock(&nft->lock);
	if (rc < 0) {
		free(es.v);
		return cell_err(err, -rc, "reading set %s of table inet %s", set, nft->table);
	}
	struct cell_nft_allowed *v = calloc(es.n ? es.n : 1, sizeof(*v));
	if (!v) {
		free(es.v);
		return cell_err(err, ENOMEM, "reading set %s", set);
	}
	size_t k = 0;
	for (size_t i = 0; i < es.n; i++) {
		if (es.v[i].len != 4)
			continue;
		uint32_t a;
		memcpy(&a, es.v[i].key, 4);
		v[k].addr = ntohl(a);
		v[k++].expires_ms = es.v[i].expires_ms;
	}
	free(es.v);
	*out = v;
	*n = k;
	return 0;
}

/* ---- what else the host holds ---- */

static const char *family_name(uint32_t f)
{
	switch (f) {
	case NFPROTO_INET:
		return "inet";
	case NFPROTO_IPV4:
		return "ip";
	case NFPROTO_IPV6:
		return "ip6";
	case NFPROTO_BRIDGE:
		return "bridge";
	case NFPROTO_ARP:
		return "arp";
	case NFPROTO_NETDEV:
		return "netdev";
	default:
		return "?";
	}
}

/* Append ", item" (or "item") to buf, with "…" once it is full. */
static void list_add(char *buf, size_t size, const char *item)
{
	size_t len = strlen(buf);
	if (len + 4 >= size)
		return;
	int n = snprintf(buf + len, size - len, "%s%s", len ? ", " : "", item);
	if (n < 0 || (size_t)n >= size - len)
		snprintf(buf + size - 4, 4, "…");
}

struct survey_ctx {
	const char *own;
	struct cell_nft_survey *out;
};

static bool own_table(const struct survey_ctx *cx, uint32_t family, const char *table)
{
	return family == NFPROTO_INET && !strcmp(table, cx->own);
}

static int survey_table_cb(const struct nlmsghdr *nlh, void *data)
{
	struct survey_ctx *cx = data;
	struct nftnl_table *t = nftnl_table_alloc();
	if (!t)
		return MNL_CB_ERROR;
	if (nftnl_table_nlmsg_parse(nlh, t) == 0) {
		uint32_t family = nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY);
		const char *name = nftnl_table_get_str(t, NFTNL_TABLE_NAME);
		if (name && !own_table(cx, family, name)) {
			char item[CELL_NFT_NAME_MAX * 2];
			snprintf(item, sizeof(item), "%s %s", family_name(family), name);
			list_add(cx->out->tables, sizeof(cx->out->tables), item);
			cx->out->n_tables++;
		}
	}
	nftnl_table_free(t);
	return MNL_CB_OK;
}

/* A base chain of another table that drops by default on the way of a sandbox's packets
 * (IPv4: ip, inet). */
static int survey_chain_cb(const struct nlmsghdr *nlh, void *data)
{
	struct survey_ctx *cx = data;
	struct nftnl_chain *c = nftnl_chain_alloc();
	if (!c)
		return MNL_CB_ERROR;
	if (nftnl_chain_nlmsg_parse(nlh, c) < 0)
		goto out;
	uint32_t family = nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY);
	const char *table = nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE);
	const char *name = nftnl_chain_get_str(c, NFTNL_CHAIN_NAME);
	if (!table || !name || own_table(cx, family, table))
		goto out;
	if (!nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM) ||
	    !nftnl_chain_is_set(c, NFTNL_CHAIN_POLICY) ||
	    nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY) != NF_DROP ||
	    (family != NFPROTO_INET && family != NFPROTO_IPV4))
		goto out;
	uint32_t hook = nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM);
	if (hook != NF_INET_FORWARD && hook != NF_INET_LOCAL_IN)
		goto out;
	char item[CELL_NFT_NAME_MAX * 3];
	snprintf(item, sizeof(item), "%s %s chain %s (hook %s)", family_name(family), table, name,
		 hook == NF_INET_FORWARD ? "forward" : "input");
	list_add(cx->out->drops, sizeof(cx->out->drops), item);
	if (hook == NF_INET_FORWARD)
		cx->out->forward_drops++;
	else
		cx->out->input_drops++;
out:
	nftnl_chain_free(c);
	return MNL_CB_OK;
}

static void survey_tables_reset(void *data)
{
	struct cell_nft_survey *out = ((struct survey_ctx *)data)->out;
	out->tables[0] = '\0';
	out->n_tables = 0;
}

static void survey_chains_reset(void *data)
{
	struct cell_nft_survey *out = ((struct survey_ctx *)data)->out;
	out->drops[0] = '\0';
	out->forward_drops = out->input_drops = 0;
}

int cell_nft_survey(struct cell_nft *nft, struct cell_nft_survey *out, struct cell_error *err)
{
	memset(out, 0, sizeof(*out));
	struct survey_ctx cx = {.own = nft->table, .out = out};
	pthread_mutex_lock(&nft->lock);
	int rc = dump_family(nft, NFPROTO_UNSPEC, NFT_MSG_GETTABLE, NULL, NULL, survey_table_cb,
			     survey_tables_reset, &cx);
	if (rc == 0)
		rc = dump_family(nft, NFPROTO_UNSPEC, NFT_MSG_GETCHAIN, NULL, NULL, survey_chain_cb,
				 survey_chains_reset, &cx);
	pthread_mutex_unlock(&nft->lock);
	return rc < 0 ? cell_err(err, -rc, "reading the host's nftables chains") : 0;
}
