/* celld's nftables table (include/cell/nft.h), driven through the runtime's API without a
 * celld. Root. Every test first moves itself into a fresh network namespace
 * (unshare(CLONE_NEWNET) in Check's forked child), and nftables state is per namespace: the
 * host's ruleset, interfaces and routes are never touched, and everything a test made goes
 * with its namespace when the test's process exits. The test observes with `nft -j list`
 * and `nft list` inside its own namespace, and builds links with `ip` there (celld itself
 * never runs either). The packet test adds two more namespaces, a "sandbox" and a test
 * "internet" on TEST-NET addresses with "blocked" hosts (10.0.0.1, 169.254.169.254) beside
 * them: a packet that escaped the rules still could not leave the machine. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <jansson.h>
#include <libmnl/libmnl.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_log.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cell/nft.h"
#include "harness.h"

#define TABLE "celltest"

static void fresh_netns(void)
{
	ck_assert_msg(unshare(CLONE_NEWNET) == 0, "unshare(CLONE_NEWNET): %s", strerror(errno));
}

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

/* Exit status of a command (quiet). */
static int sh_status(const char *cmd)
{
	char full[1100];
	snprintf(full, sizeof(full), "%s >/dev/null 2>&1", cmd);
	int rc = system(full);
	return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static char *sh_out(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	ck_assert_ptr_nonnull(buf);
	size_t got;
	while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
		n += got;
		if (n + 1 == cap) {
			cap *= 2;
			buf = realloc(buf, cap);
			ck_assert_ptr_nonnull(buf);
		}
	}
	buf[n] = '\0';
	ck_assert_int_eq(pclose(f), 0);
	return buf;
}

static const char *policy_path(void)
{
	static char path[1024];
	const char *src = getenv("CELL_TEST_SRC");
	snprintf(path, sizeof(path), "%s/policies/network/public.json", src ? src : ".");
	return path;
}

static struct cell_nft *open_table(const char *name, const struct cell_nft_range *r, size_t n)
{
	struct cell_nft_table_opts o = {.name = name, .prefix = 24, .blocked = r, .n_blocked = n};
	inet_pton(AF_INET, "192.0.2.0", &o.subnet);
	struct cell_error err = {0};
	struct cell_nft *nft = NULL;
	int rc = cell_nft_open(&o, &nft, &err);
	ck_assert_msg(rc == 0, "cell_nft_open: %d %s", rc, err.msg);
	return nft;
}

static struct cell_nft *open_public(const char *name)
{
	struct cell_nft_range *r = NULL;
	size_t n = 0;
	struct cell_error err = {0};
	int rc = cell_nft_policy_load(policy_path(), &r, &n, &err);
	ck_assert_msg(rc == 0, "loading %s: %s", policy_path(), err.msg);
	ck_assert_uint_ge(n, 8); /* merged: 169.254.169.254 lies inside 169.254/16, ... */
	struct cell_nft *nft = open_table(name, r, n);
	free(r);
	return nft;
}

static struct cell_nft_sandbox sandbox(const char *ifname, const char *addr, const char *host,
				       enum cell_nft_policy p)
{
	struct cell_nft_sandbox sb = {.policy = p};
	snprintf(sb.ifname, sizeof(sb.ifname), "%s", ifname);
	inet_pton(AF_INET, addr, &sb.addr);
	inet_pton(AF_INET, host, &sb.host_addr);
	return sb;
}

static void add(struct cell_nft *nft, struct cell_nft_sandbox sb)
{
	struct cell_error err = {0};
	int rc = cell_nft_sandbox_add(nft, &sb, &err);
	ck_assert_msg(rc == 0, "adding %s: %d %s", sb.ifname, rc, err.msg);
}

static void del(struct cell_nft *nft, const char *ifname)
{
	struct cell_error err = {0};
	int rc = cell_nft_sandbox_remove(nft, ifname, &err);
	ck_assert_msg(rc == 0, "removing %s: %d %s", ifname, rc, err.msg);
}

/* The table as `nft -j list table`: its chains and sets by name. */
struct seen {
	char names[64][64];
	int n;
};

static json_t *list_json(const char *table)
{
	char cmd[256];
	snprintf(cmd, sizeof(cmd), "nft -j list table inet %s", table);
	char *out = sh_out(cmd);
	json_error_t je;
	json_t *j = json_loads(out, 0, &je);
	ck_assert_msg(j != NULL, "nft -j: %s", je.text);
	free(out);
	return j;
}

/* Objects of kind ("chain", "set", "map") in the listing, as "kind:name" lines. */
static void objects(const char *table, struct seen *s)
{
	json_t *j = list_json(table);
	memset(s, 0, sizeof(*s));
	json_t *items = json_object_get(j, "nftables");
	size_t i;
	json_t *it;
	json_array_foreach(items, i, it)
	{
		const char *kind;
		json_t *v;
		json_object_foreach(it, kind, v)
		{
			const char *name = json_string_value(json_object_get(v, "name"));
			if (name && s->n < 64 && strcmp(kind, "rule") && strcmp(kind, "table"))
				snprintf(s->names[s->n++], 64, "%s:%s", kind, name);
		}
	}
	json_decref(j);
}

static bool seen(const struct seen *s, const char *what)
{
	for (int i = 0; i < s->n; i++)
		if (!strcmp(s->names[i], what))
			return true;
	return false;
}

/* Elements of a set or map as nft -j prints them, as a compact JSON string. */
static char *elements(const char *table, const char *set)
{
	json_t *j = list_json(table);
	json_t *items = json_object_get(j, "nftables");
	size_t i;
	json_t *it;
	char *res = NULL;
	json_array_foreach(items, i, it)
	{
		json_t *v = json_object_get(it, "set");
		if (!v)
			v = json_object_get(it, "map");
		const char *name = v ? json_string_value(json_object_get(v, "name")) : NULL;
		if (name && !strcmp(name, set)) {
			json_t *e = json_object_get(v, "elem");
			res = e ? json_dumps(e, JSON_COMPACT) : strdup("[]");
		}
	}
	json_decref(j);
	ck_assert_msg(res != NULL, "set %s not in table %s", set, table);
	return res;
}

static int count(const char *hay, const char *needle)
{
	int n = 0;
	for (const char *p = hay; (p = strstr(p, needle)); p += strlen(needle))
		n++;
	return n;
}

START_TEST(test_table_and_sandboxes)
{
	fresh_netns();
	sh("ip link add cellt0001 type veth peer name cellt0001p && "
	   "ip link add cellt0002 type veth peer name cellt0002p");
	struct cell_nft *nft = open_public(TABLE);
	add(nft, sandbox("cellt0001", "192.0.2.2", "192.0.2.1", CELL_NFT_PUBLIC));
	add(nft, sandbox("cellt0002", "192.0.2.3", "192.0.2.1", CELL_NFT_ALLOWLIST));

	struct seen s;
	objects(TABLE, &s);
	const char *want[] = {"chain:forward",
			      "chain:input",
			      "chain:postrouting",
			      "chain:sb-cellt0001",
			      "chain:sb-cellt0002",
			      "set:blocked4",
			      "set:sandbox_ifs",
			      "set:sandbox_dns",
			      "map:sandbox_chains",
			      "set:sb-cellt0001-allowed",
			      "set:sb-cellt0002-allowed",
			      "set:sb-cellt0001-ranges",
			      "set:sb-cellt0002-ranges",
			      "set:sb-cellt0001-denied",
			      "set:sb-cellt0002-denied",
			      "chain:drop-host",
			      "chain:drop-ipv6",
			      "chain:drop-dns",
			      "chain:raw-prerouting",
			      "chain:raw-output"};
	for (size_t i = 0; i < sizeof(want) / sizeof(*want); i++)
		ck_assert_msg(seen(&s, want[i]), "%s missing from the table", want[i]);
	ck_assert_int_eq(s.n, (int)(sizeof(want) / sizeof(*want)));

	char *map = elements(TABLE, "sandbox_chains");
	ck_assert_msg(strstr(map, "\"cellt0001\"") && strstr(map, "\"target\":\"sb-cellt0001\"") &&
			  strstr(map, "\"target\":\"sb-cellt0002\""),
		      "sandbox_chains: %s", map);
	free(map);
	char *dns = elements(TABLE, "sandbox_dns");
	ck_assert_msg(strstr(dns, "\"cellt0002\"") && strstr(dns, "192.0.2.1"), "sandbox_dns: %s",
		      dns);
	free(dns);

	/* The blocked set holds the policy's ranges, merged, and never TEST-NET. */
	const char *in[] = {"10.1.2.3",	       "172.16.0.1",	  "192.168.1.1", "100.64.0.1",
			    "169.254.169.254", "127.0.0.1",	  "0.0.0.0",	 "224.0.0.1",
			    "240.0.0.1",       "255.255.255.255", "198.18.0.1"};
	const char *out[] = {"198.51.100.7", "203.0.113.5", "192.0.2.1", "8.8.8.8",
			     "100.128.0.1",  "172.32.0.1",  "11.0.0.1"};
	char cmd[256];
	for (size_t i = 0; i < sizeof(in) / sizeof(*in); i++) {
		snprintf(cmd, sizeof(cmd), "nft get element inet " TABLE " blocked4 '{ %s }'",
			 in[i]);
		ck_assert_msg(sh_status(cmd) == 0, "%s is not in blocked4", in[i]);
	}
	for (size_t i = 0; i < sizeof(out) / sizeof(*out); i++) {
		snprintf(cmd, sizeof(cmd), "nft get element inet " TABLE " blocked4 '{ %s }'",
			 out[i]);
		ck_assert_msg(sh_status(cmd) != 0, "%s is in blocked4", out[i]);
	}

	/* The rules, in the designed order. */
	char *t = sh_out("nft list table inet " TABLE);
	const char *rules[] = {
	    "type filter hook forward priority filter; policy accept;",
	    "oifname @sandbox_ifs ct state established,related accept",
	    "oifname @sandbox_ifs counter packets 0 bytes 0 drop",
	    "iifname @sandbox_ifs meta nfproto ipv6 counter packets 0 bytes 0 drop",
	    "iifname vmap @sandbox_chains",
	    "type filter hook input priority filter; policy accept;",
	    "iifname . ip daddr @sandbox_dns udp dport 53 accept",
	    "iifname . ip daddr @sandbox_dns tcp dport 53 counter packets 0 bytes 0 reject with "
	    "tcp reset",
	    "iifname @sandbox_ifs counter packets 0 bytes 0 drop",
	    "type nat hook postrouting priority srcnat; policy accept;",
	    "meta nfproto ipv4 iifname @sandbox_ifs masquerade",
	    "type filter hook prerouting priority raw; policy accept;",
	    "iifname . ip daddr @sandbox_dns udp dport 53 notrack",
	    "type filter hook output priority raw; policy accept;",
	    "oifname . ip saddr @sandbox_dns udp sport 53 notrack",
	    "chain sb-cellt0001 {",
	    "ip saddr != 192.0.2.2 counter packets 0 bytes 0 drop comment \"spoofed\"",
	    "ip daddr @blocked4 counter packets 0 bytes 0 drop comment \"blocked\"",
	    "ct state established,related accept",
	    "ct state new counter packets 0 bytes 0 accept comment \"allowed\"",
	    "counter packets 0 bytes 0 drop comment \"denied\"",
	    "chain sb-cellt0002 {",
	    "ip saddr != 192.0.2.3 counter packets 0 bytes 0 drop comment \"spoofed\"",
	    "ip daddr @sb-cellt0002-allowed ct state new counter packets 0 bytes 0 accept comment "
	    "\"allowed\"",
	};
	const char *at = t;
	for (size_t i = 0; i < sizeof(rules) / sizeof(*rules); i++) {
		const char *p = strstr(at, rules[i]);
		ck_assert_msg(p != NULL, "after %.60s…: no %s in\n%s", at, rules[i], t);
		at = p + strlen(rules[i]);
	}
	free(t);

	/* The API's view: both sandboxes, their counters. */
	char(*v)[CELL_NFT_IFNAME_MAX + 1] = NULL;
	size_t n = 0;
	struct cell_error err = {0};
	ck_assert_int_eq(cell_nft_sandbox_list(nft, &v, &n, &err), 0);
	ck_assert_uint_eq(n, 2);
	ck_assert_str_eq(v[0], "cellt0001");
	ck_assert_str_eq(v[1], "cellt0002");
	free(v);
	struct cell_nft_counters c;
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellt0002", &c, &err), 0);
	ck_assert_uint_eq(c.blocked.packets + c.allowed.packets + c.denied.packets, 0);

	/* A second add of the same interface fails and changes nothing. */
	struct cell_nft_sandbox dup = sandbox("cellt0001", "192.0.2.9", "192.0.2.1", CELL_NFT_NONE);
	ck_assert_int_eq(cell_nft_sandbox_add(nft, &dup, &err), -EEXIST);
	ck_assert_msg(strstr(err.msg, "cellt0001"), "error names the sandbox: %s", err.msg);
	t = sh_out("nft list chain inet " TABLE " sb-cellt0001");
	ck_assert_msg(strstr(t, "192.0.2.2") && !strstr(t, "192.0.2.9"), "%s", t);
	free(t);
	/* Bad names are refused before anything is sent. */
	ck_assert_int_eq(cell_nft_sandbox_remove(nft, "cell\"; x", &err), -EINVAL);
	ck_assert_int_eq(cell_nft_sandbox_remove(nft, "cellt0001234567890", &err), -EINVAL);

	ck_assert_int_eq(cell_nft_table_delete(nft, &err), 0);
	ck_assert_int_eq(sh_status("nft list table inet " TABLE), 1);
	cell_nft_close(nft);
}
END_TEST

START_TEST(test_allowed_set_timeouts)
{
	fresh_netns();
	struct cell_nft *nft = open_public(TABLE);
	add(nft, sandbox("cellt0001", "192.0.2.2", "192.0.2.1", CELL_NFT_ALLOWLIST));
	struct cell_error err = {0};
	struct in_addr a[2];
	inet_pton(AF_INET, "203.0.113.5", &a[0]);
	inet_pton(AF_INET, "198.51.100.7", &a[1]);
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellt0001", &a[0], 1, 1, &err), 0);
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellt0001", &a[1], 1, 60, &err), 0);
	char *e = elements(TABLE, "sb-cellt0001-allowed");
	ck_assert_msg(strstr(e, "203.0.113.5") && strstr(e, "198.51.100.7"), "%s", e);
	free(e);

	struct cell_nft_allowed *l = NULL;
	size_t n = 0;
	ck_assert_int_eq(cell_nft_allow_list(nft, "cellt0001", &l, &n, &err), 0);
	ck_assert_uint_eq(n, 2);
	free(l);

	/* The 1 s one expires by itself (polled: the kernel's set GC decides when). */
	bool gone = false;
	for (int i = 0; i < 100 && !gone; i++) {
		usleep(100 * 1000);
		e = elements(TABLE, "sb-cellt0001-allowed");
		gone = !strstr(e, "203.0.113.5");
		ck_assert_msg(strstr(e, "198.51.100.7"), "the 60 s element went: %s", e);
		free(e);
	}
	ck_assert_msg(gone, "203.0.113.5 did not expire within 10 s");

	/* A fresh answer restarts the TTL of an element already there. */
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellt0001", &a[1], 1, 3600, &err), 0);
	ck_assert_int_eq(cell_nft_allow_list(nft, "cellt0001", &l, &n, &err), 0);
	ck_assert_uint_eq(n, 1);
	ck_assert_msg(l[0].expires_ms > 3000 * 1000, "expires in %llu ms",
		      (unsigned long long)l[0].expires_ms);
	free(l);

	/* Deleting: present or not, no error. */
	ck_assert_int_eq(cell_nft_allow_del(nft, "cellt0001", a, 2, &err), 0);
	ck_assert_int_eq(cell_nft_allow_list(nft, "cellt0001", &l, &n, &err), 0);
	ck_assert_uint_eq(n, 0);
	free(l);

	/* Bounds: timeout 0, an unknown sandbox (names the set). */
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellt0001", a, 1, 0, &err), -EINVAL);
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellt0404", a, 1, 5, &err), -ENOENT);
	ck_assert_msg(strstr(err.msg, "sb-cellt0404-allowed"), "%s", err.msg);
	cell_nft_close(nft);
}
END_TEST

START_TEST(test_remove_one_sandbox)
{
	fresh_netns();
	/* A table that is not ours must come through untouched. */
	sh("nft add table inet other && nft add chain inet other c && "
	   "nft add rule inet other c counter");
	struct cell_nft *nft = open_public(TABLE);
	add(nft, sandbox("cellt0001", "192.0.2.2", "192.0.2.1", CELL_NFT_PUBLIC));
	add(nft, sandbox("cellt0002", "192.0.2.3", "192.0.2.1", CELL_NFT_NONE));
	struct in_addr a;
	inet_pton(AF_INET, "203.0.113.5", &a);
	struct cell_error err = {0};
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellt0002", &a, 1, 60, &err), 0);

	del(nft, "cellt0001");
	struct seen s;
	objects(TABLE, &s);
	ck_assert(!seen(&s, "chain:sb-cellt0001"));
	ck_assert(!seen(&s, "set:sb-cellt0001-allowed"));
	ck_assert(seen(&s, "chain:sb-cellt0002"));
	ck_assert(seen(&s, "set:sb-cellt0002-allowed"));
	const char *sets[] = {"sandbox_ifs", "sandbox_dns", "sandbox_chains"};
	for (int i = 0; i < 3; i++) {
		char *e = elements(TABLE, sets[i]);
		ck_assert_msg(!strstr(e, "cellt0001") && strstr(e, "cellt0002"), "%s: %s", sets[i],
			      e);
		free(e);
	}
	char *e = elements(TABLE, "sb-cellt0002-allowed");
	ck_assert_msg(strstr(e, "203.0.113.5"), "%s", e);
	free(e);
	/* Removing again, or a sandbox never added: nothing to do. */
	del(nft, "cellt0001");
	del(nft, "cellt0404");

	/* What a crash may leave: a chain alone, an interface element alone. Listed, then
	 * removed by the same call. */
	sh("nft add chain inet " TABLE " sb-cellt0009 && "
	   "nft add element inet " TABLE " sandbox_ifs '{ \"cellt0010\" }'");
	char(*v)[CELL_NFT_IFNAME_MAX + 1] = NULL;
	size_t n = 0;
	ck_assert_int_eq(cell_nft_sandbox_list(nft, &v, &n, &err), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_str_eq(v[0], "cellt0002");
	ck_assert_str_eq(v[1], "cellt0009");
	ck_assert_str_eq(v[2], "cellt0010");
	free(v);
	del(nft, "cellt0009");
	del(nft, "cellt0010");
	ck_assert_int_eq(cell_nft_sandbox_list(nft, &v, &n, &err), 0);
	ck_assert_uint_eq(n, 1);
	free(v);

	char *other = sh_out("nft list table inet other");
	ck_assert_msg(strstr(other, "chain c") && strstr(other, "counter"), "%s", other);
	free(other);
	ck_assert_int_eq(cell_nft_table_delete(nft, &err), 0);
	ck_assert_int_eq(sh_status("nft list table inet other"), 0);
	cell_nft_close(nft);
}
END_TEST

START_TEST(test_create_is_idempotent)
{
	fresh_netns();
	struct cell_nft *nft = open_public(TABLE);
	add(nft, sandbox("cellt0001", "192.0.2.2", "192.0.2.1", CELL_NFT_ALLOWLIST));
	struct in_addr a;
	inet_pton(AF_INET, "203.0.113.5", &a);
	struct cell_error err = {0};
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellt0001", &a, 1, 600, &err), 0);
	cell_nft_close(nft);

	/* A restarted celld with a changed blocked list: the sandbox and its set survive, the
	 * base chains are not doubled, the blocked set is the new list. */
	struct cell_nft_range r = {.first = 0x0a000000, .last = 0x0affffff};
	nft = open_table(TABLE, &r, 1);
	char *t = sh_out("nft list table inet " TABLE);
	ck_assert_int_eq(count(t, "iifname vmap @sandbox_chains"), 1);
	ck_assert_int_eq(count(t, "masquerade"), 1);
	ck_assert_int_eq(count(t, "hook forward"), 1);
	ck_assert_msg(strstr(t, "chain sb-cellt0001 {"), "%s", t);
	free(t);
	char *e = elements(TABLE, "sb-cellt0001-allowed");
	ck_assert_msg(strstr(e, "203.0.113.5"), "%s", e);
	free(e);
	e = elements(TABLE, "blocked4");
	ck_assert_msg(strstr(e, "10.0.0.0") && !strstr(e, "192.168.0.0"), "%s", e);
	free(e);
	ck_assert_int_eq(cell_nft_table_create(nft, NULL, 0, &err), 0);
	e = elements(TABLE, "blocked4");
	ck_assert_str_eq(e, "[]");
	free(e);

	/* Another instance's table beside it: its own name, its own objects. */
	char name2[CELL_NFT_NAME_MAX];
	ck_assert_int_eq(cell_nft_table_name("/var/lib/cell/", name2, sizeof(name2)), 0);
	ck_assert_str_eq(name2, "cell");
	ck_assert_int_eq(cell_nft_table_name("/tmp/x", name2, sizeof(name2)), 0);
	ck_assert_msg(!strncmp(name2, "cell-", 5) && strlen(name2) == 13, "%s", name2);
	struct cell_nft *nft2 = open_table(name2, &r, 1);
	add(nft2, sandbox("cellt0001", "10.78.0.2", "10.78.0.1", CELL_NFT_PUBLIC));
	ck_assert_int_eq(cell_nft_table_delete(nft2, &err), 0);
	cell_nft_close(nft2);
	ck_assert_int_eq(sh_status("nft list chain inet " TABLE " sb-cellt0001"), 0);

	ck_assert_int_eq(cell_nft_table_delete(nft, &err), 0);
	ck_assert_int_eq(cell_nft_table_delete(nft, &err), 0); /* already gone */
	t = sh_out("nft list tables");
	ck_assert_str_eq(t, "");
	free(t);
	cell_nft_close(nft);
}
END_TEST

START_TEST(test_policy_file)
{
	struct cell_nft_range *r = NULL;
	size_t n = 0;
	struct cell_error err = {0};
	ck_assert_int_eq(cell_nft_policy_load(policy_path(), &r, &n, &err), 0);
	/* merged: the metadata address lies inside the link-local range */
	bool metadata = false;
	for (size_t i = 0; i < n; i++)
		metadata |= r[i].first <= 0xa9fea9fe && 0xa9fea9fe <= r[i].last;
	ck_assert(metadata);
	free(r);
	char path[] = "/tmp/cell-it-nft-XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	const char *bad[] = {
	    "{\"blocked\": [{\"cidr\": \"10.0.0.1/8\", \"name\": \"x\", \"why\": \"y\"}]}",
	    "{\"blocked\": [{\"cidr\": \"10.0.0.0/33\", \"name\": \"x\", \"why\": \"y\"}]}",
	    "{\"blocked\": [{\"cidr\": \"10.0.0.0/08\", \"name\": \"x\", \"why\": \"y\"}]}",
	    "{\"blocked\": [{\"cidr\": \"10.0.0.0\", \"name\": \"x\", \"why\": \"y\"}]}",
	    "{\"blocked\": [{\"cidr\": \"::/0\", \"name\": \"x\", \"why\": \"y\"}]}",
	    "{\"blocked\": [{\"cidr\": \"10.0.0.0/8\", \"name\": \"x\"}]}",
	    "{\"blocked\": {}}",
	    "[]",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		ck_assert_int_eq(ftruncate(fd, 0), 0);
		ck_assert_int_eq(pwrite(fd, bad[i], strlen(bad[i]), 0), (ssize_t)strlen(bad[i]));
		ck_assert_msg(cell_nft_policy_load(path, &r, &n, &err) == -EINVAL, "accepted %s",
			      bad[i]);
		ck_assert_msg(strstr(err.msg, "blocked"), "%s", err.msg);
	}
	close(fd);
	unlink(path);
}
END_TEST

/* ---- packets: sandbox namespaces S and S2, a test internet I, the test's own namespace T
 * in between as the host. The sandboxes' subnet is TEST-NET-1 (192.0.2.0/24), outside the
 * blocked ranges on purpose: only the table's own rules keep one sandbox from another. ---- */

static int self_ns;

static void enter(int ns)
{
	ck_assert_int_eq(setns(ns, CLONE_NEWNET), 0);
}

static int listen_on(int family, int port)
{
	int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(fd, 0);
	int one = 1;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_storage a = {0};
	socklen_t len;
	if (family == AF_INET6) {
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons(port);
		len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
		a4->sin_family = AF_INET;
		a4->sin_port = htons(port);
		len = sizeof(*a4);
	}
	ck_assert_int_eq(bind(fd, (struct sockaddr *)&a, len), 0);
	ck_assert_int_eq(listen(fd, 64), 0);
	return fd;
}

static int listener(int port)
{
	return listen_on(AF_INET, port);
}

/* An IPv4 or IPv6 socket address of text a. */
static socklen_t sockaddr_of(const char *a, int port, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (strchr(a, ':')) {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons(port);
		ck_assert_int_eq(inet_pton(AF_INET6, a, &s6->sin6_addr), 1);
		return sizeof(*s6);
	}
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	s4->sin_family = AF_INET;
	s4->sin_port = htons(port);
	ck_assert_int_eq(inet_pton(AF_INET, a, &s4->sin_addr), 1);
	return sizeof(*s4);
}

/* Connect from namespace ns (from src when given) to dst:port; the connected socket (the
 * caller closes it) when the handshake completes, else -1. A dropped SYN waits out the timeout:
 * never the verdict of a timing race, as a handshake across two veths takes microseconds. */
static int connect_held(int ns, const char *src, const char *dst, int port)
{
	enter(ns);
	struct sockaddr_storage d, sa;
	socklen_t dl = sockaddr_of(dst, port, &d);
	int fd = socket(d.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	ck_assert_int_ge(fd, 0);
	if (src) {
		socklen_t sl = sockaddr_of(src, 0, &sa);
		ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sl), 0);
	}
	int rc = connect(fd, (struct sockaddr *)&d, dl);
	bool ok = rc == 0;
	if (rc < 0 && errno == EINPROGRESS) {
		struct pollfd p = {.fd = fd, .events = POLLOUT};
		if (poll(&p, 1, 800) == 1) {
			int e = 0;
			socklen_t l = sizeof(e);
			getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &l);
			ok = e == 0;
		}
	}
	enter(self_ns);
	if (!ok) {
		close(fd);
		return -1;
	}
	return fd;
}

static bool reach(int ns, const char *src, const char *dst, int port)
{
	int fd = connect_held(ns, src, dst, port);
	if (fd >= 0)
		close(fd);
	return fd >= 0;
}

/* The source address of the connection a listener took last. */
static void accepted_from(int lfd, char *buf, size_t size)
{
	struct sockaddr_in a;
	socklen_t l = sizeof(a);
	int last = -1, fd;
	while ((fd = accept4(lfd, (struct sockaddr *)&a, &l, SOCK_CLOEXEC)) >= 0) {
		inet_ntop(AF_INET, &a.sin_addr, buf, (socklen_t)size);
		close(fd);
		last = 0;
		l = sizeof(a);
	}
	ck_assert_msg(last == 0, "no connection to accept");
}

static struct cell_nft_range range(const char *first, const char *last)
{
	struct in_addr a, b;
	ck_assert_int_eq(inet_pton(AF_INET, first, &a), 1);
	ck_assert_int_eq(inet_pton(AF_INET, last, &b), 1);
	return (struct cell_nft_range){ntohl(a.s_addr), ntohl(b.s_addr)};
}

static void ranges_set(struct cell_nft *nft, struct cell_nft_sandbox sb)
{
	struct cell_error err = {0};
	int rc = cell_nft_ranges_set(nft, &sb, &err);
	ck_assert_msg(rc == 0, "address rules of %s: %d %s", sb.ifname, rc, err.msg);
}

/* Did a byte sent now on the connected socket fd (in ns) reach the server end srv? */
static bool carries(int fd, int srv)
{
	ck_assert_int_eq(send(fd, "x", 1, MSG_NOSIGNAL), 1);
	struct pollfd p = {.fd = srv, .events = POLLIN};
	char c;
	return poll(&p, 1, 800) == 1 && recv(srv, &c, 1, MSG_DONTWAIT) == 1;
}

/* A policy's address rules (the ranges sets): an allowlist reaches an allowed range but
 * not a denied address inside it nor a blocked range it names; replacing them is live; a
 * deny ends a connection opened before it; a rebuild keeps the pinned answers. Leaves
 * sandbox S (cellp0001) in place, public, without rules. */
static void address_rules(struct cell_nft *nft, int S, int web)
{
	struct cell_error err = {0};
	del(nft, "cellp0001");
	struct cell_nft_range allow[] = {range("203.0.113.0", "203.0.113.255"),
					 range("10.0.0.0", "10.255.255.255")};
	struct cell_nft_range deny[] = {range("203.0.113.10", "203.0.113.10")};
	struct cell_nft_sandbox sb =
	    sandbox("cellp0001", "192.0.2.2", "192.0.2.1", CELL_NFT_ALLOWLIST);
	sb.allow_ranges = allow;
	sb.n_allow_ranges = 2;
	sb.deny_ranges = deny;
	sb.n_deny_ranges = 1;
	add(nft, sb);
	ck_assert(reach(S, NULL, "203.0.113.11", 80));
	ck_assert(!reach(S, NULL, "203.0.113.10", 80));	 /* denied inside the allowed range */
	ck_assert(!reach(S, NULL, "10.0.0.1", 80));	 /* blocked wins over an allowed range */
	ck_assert(!reach(S, NULL, "198.51.100.10", 80)); /* not allowed */
	struct cell_nft_counters c;
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c, &err), 0);
	ck_assert_uint_eq(c.allowed.packets, 1);
	ck_assert_uint_ge(c.denied.packets, 2);
	char *t = sh_out("nft list set inet " TABLE " sb-cellp0001-ranges");
	ck_assert_msg(strstr(t, "203.0.113.0/24") && strstr(t, "10.0.0.0/8"), "%s", t);
	free(t);

	/* replaced live: another range, no denial */
	sb.n_allow_ranges = 1;
	struct cell_nft_range other = range("198.51.100.0", "198.51.100.255");
	sb.allow_ranges = &other;
	sb.n_deny_ranges = 0;
	ranges_set(nft, sb);
	ck_assert(reach(S, NULL, "198.51.100.10", 80));
	ck_assert(!reach(S, NULL, "203.0.113.11", 80));

	/* a rebuild writes the chain again and keeps what was pinned */
	struct in_addr pin;
	inet_pton(AF_INET, "203.0.113.11", &pin);
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellp0001", &pin, 1, 60, &err), 0);
	ck_assert_int_eq(cell_nft_sandbox_rebuild(nft, &sb, &err), 0);
	ck_assert(reach(S, NULL, "203.0.113.11", 80));
	ck_assert(reach(S, NULL, "198.51.100.10", 80));
	ck_assert(!reach(S, NULL, "203.0.113.10", 80));
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c, &err), 0);
	ck_assert_uint_eq(c.allowed.packets, 2); /* counted from the rebuild on */

	/* public with a deny: a connection opened before the deny carries nothing after it */
	sb.policy = CELL_NFT_PUBLIC;
	sb.n_allow_ranges = 0;
	ck_assert_int_eq(cell_nft_sandbox_rebuild(nft, &sb, &err), 0);
	for (int x; (x = accept4(web, NULL, NULL, SOCK_CLOEXEC)) >= 0;)
		close(x); /* the earlier probes' connections */
	enter(S);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	enter(self_ns);
	struct sockaddr_storage d;
	socklen_t dl = sockaddr_of("203.0.113.10", 80, &d);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&d, dl), 0);
	struct pollfd pw = {.fd = web, .events = POLLIN};
	ck_assert_int_eq(poll(&pw, 1, 2000), 1);
	int srv = accept4(web, NULL, NULL, SOCK_CLOEXEC);
	ck_assert_int_ge(srv, 0);
	ck_assert(carries(fd, srv));
	sb.deny_ranges = deny;
	sb.n_deny_ranges = 1;
	ranges_set(nft, sb);
	ck_assert(!carries(fd, srv));
	ck_assert(!reach(S, NULL, "203.0.113.10", 80));
	ck_assert(reach(S, NULL, "203.0.113.11", 80));
	close(fd);
	close(srv);
	char from[64];
	accepted_from(web, from, sizeof(from));

	/* the rules of a sandbox the table does not hold */
	struct cell_nft_sandbox none =
	    sandbox("cellp0009", "192.0.2.4", "192.0.2.1", CELL_NFT_PUBLIC);
	ck_assert_int_eq(cell_nft_ranges_set(nft, &none, &err), -ENOENT);
	sb.n_deny_ranges = 0;
	ck_assert_int_eq(cell_nft_sandbox_rebuild(nft, &sb, &err), 0);
}

START_TEST(test_packets)
{
	fresh_netns();
	self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(self_ns, 0);
	struct h_netns S, I, S2;
	h_netns_hold(&S);
	h_netns_hold(&I);
	h_netns_hold(&S2);
	char sp[64], ip[64], s2p[64];
	snprintf(sp, sizeof(sp), "nsenter --net=/proc/%d/ns/net", S.pid);
	snprintf(ip, sizeof(ip), "nsenter --net=/proc/%d/ns/net", I.pid);
	snprintf(s2p, sizeof(s2p), "nsenter --net=/proc/%d/ns/net", S2.pid);

	/* No duplicate address detection anywhere (a tentative link-local address would hold
	 * up IPv6 neighbour discovery for a second): set before any link exists or moves. */
	const char *nodad = "echo 0 >/proc/sys/net/ipv6/conf/default/accept_dad";
	sh("%s", nodad);
	sh("%s sh -c '%s' && %s sh -c '%s' && %s sh -c '%s'", sp, nodad, ip, nodad, s2p, nodad);
	/* T, the host: the sandbox's veth (routed point to point) and the uplink. */
	sh("ip link set lo up && echo 1 >/proc/sys/net/ipv4/ip_forward");
	sh("ip link add cellp0001 type veth peer name eth0 netns %d", S.pid);
	sh("ip link add uplink type veth peer name eth0 netns %d", I.pid);
	sh("ip addr add 192.0.2.1/32 dev cellp0001 && ip link set cellp0001 up && "
	   "ip route add 192.0.2.2/32 dev cellp0001 && ip route add 192.0.2.9/32 dev cellp0001");
	sh("ip addr add 198.51.100.1/24 dev uplink && ip link set uplink up && "
	   "ip route add 203.0.113.0/24 via 198.51.100.10 && "
	   "ip route add 10.0.0.1/32 via 198.51.100.10 && "
	   "ip route add 169.254.169.254/32 via 198.51.100.10");
	/* S2: a second sandbox, which S must never reach. */
	sh("ip link add cellp0002 type veth peer name eth0 netns %d", S2.pid);
	sh("ip addr add 192.0.2.1/32 dev cellp0002 && ip link set cellp0002 up && "
	   "ip route add 192.0.2.3/32 dev cellp0002");
	sh("%s sh -c 'ip link set lo up && ip addr add 192.0.2.3/32 dev eth0 && "
	   "ip link set eth0 up && ip route add 192.0.2.1/32 dev eth0 && "
	   "ip route add default via 192.0.2.1 dev eth0 src 192.0.2.3'",
	   s2p);
	/* S: the sandbox, with a second address to spoof from. */
	sh("%s sh -c 'ip link set lo up && ip addr add 192.0.2.2/32 dev eth0 && "
	   "ip addr add 192.0.2.9/32 dev eth0 && ip link set eth0 up && "
	   "ip route add 192.0.2.1/32 dev eth0 && ip route add default via 192.0.2.1 dev eth0 "
	   "src 192.0.2.2'",
	   sp);
	/* I: the test internet, its web server on TEST-NET and the hosts that must stay
	 * unreachable; a route back to the sandboxes for when nothing masquerades. */
	sh("%s sh -c 'ip link set lo up && ip addr add 198.51.100.10/24 dev eth0 && "
	   "ip addr add 203.0.113.10/32 dev eth0 && ip addr add 203.0.113.11/32 dev eth0 && "
	   "ip addr add 10.0.0.1/32 dev eth0 && "
	   "ip addr add 169.254.169.254/32 dev eth0 && ip link set eth0 up && "
	   "ip route add 192.0.2.0/24 via 198.51.100.1'",
	   ip);
	enter(I.fd);
	int web = listener(80);
	enter(self_ns);
	/* IPv6 on, as it would be if the network setup forgot to turn it off: documentation
	 * addresses, no duplicate address detection. */
	sh("echo 1 >/proc/sys/net/ipv6/conf/all/forwarding && "
	   "ip -6 addr add 2001:db8:1::1/64 dev cellp0001 nodad && "
	   "ip -6 addr add 2001:db8:2::1/64 dev uplink nodad");
	sh("%s sh -c 'ip -6 addr add 2001:db8:1::2/64 dev eth0 nodad && "
	   "ip -6 route add default via 2001:db8:1::1'",
	   sp);
	sh("%s sh -c 'ip -6 addr add 2001:db8:2::10/64 dev eth0 nodad && "
	   "ip -6 route add 2001:db8:1::/64 via 2001:db8:2::1'",
	   ip);
	enter(I.fd);
	int web6 = listen_on(AF_INET6, 80);
	enter(self_ns);
	int host6 = listen_on(AF_INET6, 53);
	enter(S2.fd);
	int peer = listener(80);
	enter(S.fd);
	int peer1 = listener(81);
	enter(self_ns);
	int dns = listener(53), api = listener(8080);
	char from[64];

	/* Control: with the table but no sandbox in it, every path works (the test can fail). */
	struct cell_nft *nft = open_public(TABLE);
	ck_assert(reach(S.fd, NULL, "10.0.0.1", 80));
	ck_assert(reach(S.fd, NULL, "169.254.169.254", 80));
	ck_assert(reach(S.fd, NULL, "192.0.2.1", 8080));
	ck_assert(reach(S.fd, NULL, "192.0.2.3", 80));
	ck_assert(reach(S2.fd, NULL, "192.0.2.2", 81));
	ck_assert(reach(S.fd, NULL, "2001:db8:2::10", 80));
	ck_assert(reach(S.fd, NULL, "2001:db8:1::1", 53));
	ck_assert(reach(S.fd, "192.0.2.9", "203.0.113.10", 80));
	accepted_from(web, from, sizeof(from));

	/* public; the other sandbox too, and neither reaches the other */
	add(nft, sandbox("cellp0001", "192.0.2.2", "192.0.2.1", CELL_NFT_PUBLIC));
	add(nft, sandbox("cellp0002", "192.0.2.3", "192.0.2.1", CELL_NFT_PUBLIC));
	ck_assert(!reach(S.fd, NULL, "192.0.2.3", 80));
	ck_assert(!reach(S2.fd, NULL, "192.0.2.2", 81));
	ck_assert(reach(S2.fd, NULL, "203.0.113.10", 80));
	ck_assert(reach(S.fd, NULL, "203.0.113.10", 80));
	accepted_from(web, from, sizeof(from));
	ck_assert_msg(!strcmp(from, "198.51.100.1"), "not masqueraded: from %s", from);
	ck_assert(reach(S.fd, NULL, "198.51.100.10", 80));
	ck_assert(!reach(S.fd, NULL, "10.0.0.1", 80));
	ck_assert(!reach(S.fd, NULL, "169.254.169.254", 80));
	ck_assert(!reach(S.fd, NULL, "192.0.2.1", 53));	   /* its resolver's port: UDP only */
	ck_assert(!reach(S.fd, NULL, "192.0.2.1", 8080));  /* any other port of the host */
	ck_assert(!reach(S.fd, NULL, "198.51.100.1", 53)); /* any other host address */
	ck_assert(!reach(S.fd, "192.0.2.9", "203.0.113.10", 80)); /* spoofed */
	ck_assert(!reach(S.fd, NULL, "2001:db8:2::10", 80));	  /* IPv6 forward */
	ck_assert(!reach(S.fd, NULL, "2001:db8:1::1", 53));	  /* IPv6 to the host */
	struct cell_nft_counters c;
	struct cell_error err = {0};
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c, &err), 0);
	ck_assert_uint_eq(c.allowed.packets, 2); /* its two connections */
	ck_assert_uint_ge(c.blocked.packets, 2);
	ck_assert_uint_ge(c.spoofed.packets, 1);
	ck_assert_uint_eq(c.denied.packets, 0);

	/* allowlist: only what the set holds, never a blocked range even if it holds it */
	del(nft, "cellp0001");
	add(nft, sandbox("cellp0001", "192.0.2.2", "192.0.2.1", CELL_NFT_ALLOWLIST));
	ck_assert(!reach(S.fd, NULL, "203.0.113.10", 80));
	struct in_addr a[2];
	inet_pton(AF_INET, "203.0.113.10", &a[0]);
	inet_pton(AF_INET, "10.0.0.1", &a[1]);
	ck_assert_int_eq(cell_nft_allow_add(nft, "cellp0001", a, 2, 60, &err), 0);
	ck_assert(reach(S.fd, NULL, "203.0.113.10", 80));
	ck_assert(!reach(S.fd, NULL, "198.51.100.10", 80));
	ck_assert(!reach(S.fd, NULL, "10.0.0.1", 80));
	ck_assert(!reach(S.fd, NULL, "192.0.2.1", 53)); /* UDP only, in every policy */
	ck_assert_int_eq(cell_nft_allow_del(nft, "cellp0001", a, 1, &err), 0);
	ck_assert(!reach(S.fd, NULL, "203.0.113.10", 80));
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c, &err), 0);
	ck_assert_uint_eq(c.allowed.packets, 1);
	ck_assert_uint_ge(c.denied.packets, 3);
	ck_assert_uint_ge(c.blocked.packets, 1);

	/* An egress limit of 100 KB/s (burst 64 KiB): 300 KB sent at once from the sandbox are
	 * cut, counted apart from the policy's verdicts, and a connection still works. */
	del(nft, "cellp0001");
	struct cell_nft_sandbox lim =
	    sandbox("cellp0001", "192.0.2.2", "192.0.2.1", CELL_NFT_PUBLIC);
	lim.egress_bytes_per_s = 100000;
	add(nft, lim);
	char *t = sh_out("nft list chain inet " TABLE " sb-cellp0001");
	ck_assert_msg(strstr(t, "limit rate over 100000 bytes/second burst 64 kbytes"), "%s", t);
	free(t);
	ck_assert(reach(S.fd, NULL, "203.0.113.10", 80));
	accepted_from(web, from, sizeof(from));
	enter(S.fd);
	int u = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	enter(self_ns);
	ck_assert_int_ge(u, 0);
	struct sockaddr_in discard = {.sin_family = AF_INET, .sin_port = htons(9)};
	inet_pton(AF_INET, "203.0.113.10", &discard.sin_addr);
	static char datagram[1000];
	for (int i = 0; i < 300; i++)
		sendto(u, datagram, sizeof(datagram), 0, (struct sockaddr *)&discard,
		       sizeof(discard));
	close(u);
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c, &err), 0);
	ck_assert_msg(c.egress_limited.packets >= 100 && c.egress_limited.packets < 300,
		      "%" PRIu64 " of 300 datagrams over the limit", c.egress_limited.packets);
	ck_assert_uint_eq(c.denied.packets, 0);

	address_rules(nft, S.fd, web);

	/* A bound of 8 tracked connections: 8 held open, the 9th dropped and counted, and
	 * another one once one of the 8 is gone from conntrack's table. */
	del(nft, "cellp0001");
	struct cell_nft_sandbox bounded =
	    sandbox("cellp0001", "192.0.2.2", "192.0.2.1", CELL_NFT_PUBLIC);
	bounded.max_conns = 8;
	add(nft, bounded);
	int held[8];
	for (int i = 0; i < 8; i++) {
		held[i] = connect_held(S.fd, NULL, "203.0.113.11", 80);
		ck_assert_msg(held[i] >= 0, "connection %d of 8 refused", i + 1);
	}
	ck_assert(!reach(S.fd, NULL, "203.0.113.11", 80));
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c, &err), 0);
	ck_assert_uint_ge(c.conntrack_limited.packets, 1);
	ck_assert_uint_eq(c.allowed.packets, 8);
	for (int i = 0; i < 8; i++)
		close(held[i]);
	while (accept4(web, NULL, NULL, SOCK_CLOEXEC) >= 0)
		;

	/* none */
	del(nft, "cellp0001");
	add(nft, sandbox("cellp0001", "192.0.2.2", "192.0.2.1", CELL_NFT_NONE));
	ck_assert(!reach(S.fd, NULL, "203.0.113.10", 80));
	ck_assert(!reach(S.fd, NULL, "192.0.2.1", 53)); /* UDP only, in every policy */

	/* Removed: the path is open again (nothing of the sandbox is left behind). */
	del(nft, "cellp0001");
	ck_assert(reach(S.fd, NULL, "10.0.0.1", 80));

	ck_assert_int_eq(cell_nft_table_delete(nft, &err), 0);
	cell_nft_close(nft);
	close(web);
	close(dns);
	close(api);
	close(peer);
	close(web6);
	close(host6);
	close(peer1);
	h_netns_release(&S);
	h_netns_release(&I);
	h_netns_release(&S2);
	close(self_ns);
}
END_TEST

static double now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static int dcmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* ---- the packet log (opts.log_group) ---- */

#define LOG_GROUP 4243

static void sleep_ms(int ms)
{
	struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&t, &t) < 0 && errno == EINTR)
		;
}

/* An NFLOG listener on group g in the current namespace, as celld's netlog binds one. */
static struct mnl_socket *nflog_listen(uint16_t g)
{
	struct mnl_socket *nl = mnl_socket_open2(NETLINK_NETFILTER, SOCK_CLOEXEC | SOCK_NONBLOCK);
	ck_assert_ptr_nonnull(nl);
	ck_assert_int_eq(mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID), 0);
	char buf[256];
	struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
	nlh->nlmsg_type = (NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_CONFIG;
	nlh->nlmsg_flags = NLM_F_REQUEST;
	struct nfgenmsg *nfg = mnl_nlmsg_put_extra_header(nlh, sizeof(*nfg));
	nfg->nfgen_family = AF_UNSPEC;
	nfg->version = NFNETLINK_V0;
	nfg->res_id = htons(g);
	struct nfulnl_msg_config_cmd cmd = {.command = NFULNL_CFG_CMD_BIND};
	mnl_attr_put(nlh, NFULA_CFG_CMD, sizeof(cmd), &cmd);
	struct nfulnl_msg_config_mode mode = {.copy_range = htonl(128),
					      .copy_mode = NFULNL_COPY_PACKET};
	mnl_attr_put(nlh, NFULA_CFG_MODE, sizeof(mode), &mode);
	mnl_attr_put_u32(nlh, NFULA_CFG_QTHRESH, htonl(1)); /* each packet at once */
	nlh->nlmsg_flags |= NLM_F_ACK;
	ck_assert_int_ge(mnl_socket_sendto(nl, nlh, nlh->nlmsg_len), 0);
	struct pollfd p = {.fd = mnl_socket_get_fd(nl), .events = POLLIN};
	ck_assert_int_eq(poll(&p, 1, 1000), 1);
	ssize_t got = recv(p.fd, buf, sizeof(buf), 0);
	ck_assert_int_ge(got, (ssize_t)sizeof(struct nlmsghdr));
	nlh = (struct nlmsghdr *)buf;
	ck_assert_int_eq(nlh->nlmsg_type, NLMSG_ERROR);
	const struct nlmsgerr *e = mnl_nlmsg_get_payload(nlh);
	ck_assert_msg(e->error == 0, "binding NFLOG group %u: %s", g, strerror(-e->error));
	return nl;
}

struct logged {
	int n;
	char prefix[8][32];
	uint32_t indev[8];
	uint8_t proto[8];
	uint32_t daddr[8];
};

static int nflog_attr(const struct nlattr *a, void *data)
{
	const struct nlattr **tb = data;
	if (mnl_attr_type_valid(a, NFULA_MAX) > 0)
		tb[mnl_attr_get_type(a)] = a;
	return MNL_CB_OK;
}

/* Read what the listener has after waiting ms: count packets, keep the first 8. */
static void nflog_read(struct mnl_socket *nl, int ms, struct logged *out)
{
	sleep_ms(ms);
	char buf[65536];
	ssize_t got;
	while ((got = recv(mnl_socket_get_fd(nl), buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
		size_t left = (size_t)got;
		for (struct nlmsghdr *h = (struct nlmsghdr *)buf; mnl_nlmsg_ok(h, (int)left);
		     h = mnl_nlmsg_next(h, (int *)&left)) {
			if (h->nlmsg_type != ((NFNL_SUBSYS_ULOG << 8) | NFULNL_MSG_PACKET))
				continue;
			const struct nlattr *tb[NFULA_MAX + 1] = {0};
			mnl_attr_parse(h, sizeof(struct nfgenmsg), nflog_attr, tb);
			int i = out->n++;
			if (i >= 8)
				continue;
			if (tb[NFULA_PREFIX])
				snprintf(out->prefix[i], sizeof(out->prefix[i]), "%.*s",
					 (int)mnl_attr_get_payload_len(tb[NFULA_PREFIX]),
					 (const char *)mnl_attr_get_payload(tb[NFULA_PREFIX]));
			if (tb[NFULA_IFINDEX_INDEV])
				out->indev[i] = ntohl(mnl_attr_get_u32(tb[NFULA_IFINDEX_INDEV]));
			if (tb[NFULA_PAYLOAD] &&
			    mnl_attr_get_payload_len(tb[NFULA_PAYLOAD]) >= 20) {
				const uint8_t *ip = mnl_attr_get_payload(tb[NFULA_PAYLOAD]);
				out->proto[i] = ip[9];
				memcpy(&out->daddr[i], ip + 16, 4);
			}
		}
	}
}

/* Did one of the first packets read come with prefix from interface ifindex? */
static bool logged(const struct logged *lg, const char *prefix, uint32_t ifindex)
{
	for (int i = 0; i < lg->n && i < 8; i++)
		if (!strcmp(lg->prefix[i], prefix) && lg->indev[i] == ifindex)
			return true;
	return false;
}

/* n UDP datagrams from namespace ns to dst:port, as fast as they go. */
static void udp_flood(int ns, const char *dst, int port, int n)
{
	enter(ns);
	struct sockaddr_storage d;
	socklen_t dl = sockaddr_of(dst, port, &d);
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ck_assert_int_ge(fd, 0);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(sendto(fd, "x", 1, 0, (struct sockaddr *)&d, dl), 1);
	close(fd);
	enter(self_ns);
}

static int udp_count(int fd)
{
	char b[16];
	int n = 0;
	while (recv(fd, b, sizeof(b), MSG_DONTWAIT) >= 0)
		n++;
	return n;
}

/* A blocked connection reaches the log with its reason and interface; a flood of blocked
 * packets is logged up to the limit and dropped whole; accepted traffic logs nothing. */
START_TEST(test_packet_log)
{
	fresh_netns();
	self_ns = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(self_ns, 0);
	struct h_netns S, I;
	h_netns_hold(&S);
	h_netns_hold(&I);
	char sp[64], ip[64];
	snprintf(sp, sizeof(sp), "nsenter --net=/proc/%d/ns/net", S.pid);
	snprintf(ip, sizeof(ip), "nsenter --net=/proc/%d/ns/net", I.pid);
	sh("ip link set lo up && echo 1 >/proc/sys/net/ipv4/ip_forward");
	/* no IPv6 in S until the IPv6 step: its solicitations would be logged as "host" */
	sh("%s sh -c 'echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6 && "
	   "echo 1 >/proc/sys/net/ipv6/conf/default/disable_ipv6'",
	   sp);
	sh("ip link add cellp0001 type veth peer name eth0 netns %d", S.pid);
	sh("ip link add uplink type veth peer name eth0 netns %d", I.pid);
	sh("ip addr add 192.0.2.1/32 dev cellp0001 && ip link set cellp0001 up && "
	   "ip route add 192.0.2.2/32 dev cellp0001");
	sh("ip addr add 198.51.100.1/24 dev uplink && ip link set uplink up && "
	   "ip route add 203.0.113.0/24 via 198.51.100.10 && "
	   "ip route add 10.0.0.1/32 via 198.51.100.10");
	sh("%s sh -c 'ip link set lo up && ip addr add 192.0.2.2/32 dev eth0 && "
	   "ip addr add 192.0.2.9/32 dev eth0 && "
	   "ip link set eth0 up && ip route add 192.0.2.1/32 dev eth0 && "
	   "ip route add default via 192.0.2.1 dev eth0 src 192.0.2.2'",
	   sp);
	sh("%s sh -c 'ip link set lo up && ip addr add 198.51.100.10/24 dev eth0 && "
	   "ip addr add 203.0.113.10/32 dev eth0 && ip addr add 10.0.0.1/32 dev eth0 && "
	   "ip link set eth0 up && ip route add 192.0.2.0/24 via 198.51.100.1'",
	   ip);
	/* IPv6 on the host side (S turns it on for the IPv6 step), as if the setup forgot it */
	sh("echo 1 >/proc/sys/net/ipv6/conf/all/forwarding && "
	   "ip -6 addr add 2001:db8:1::1/64 dev cellp0001 nodad && "
	   "ip -6 addr add 2001:db8:2::1/64 dev uplink nodad");
	char *mac = sh_out("ip -o link show cellp0001 | "
			   "sed -n 's/.*link\\/ether \\([0-9a-f:]*\\).*/\\1/p' | tr -d '\\n'");
	ck_assert_uint_eq(strlen(mac), 17);
	enter(I.fd);
	int web = listener(80);
	int sink = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_storage sa;
	socklen_t sl = sockaddr_of("10.0.0.1", 9, &sa);
	ck_assert_int_eq(bind(sink, (struct sockaddr *)&sa, sl), 0);
	enter(self_ns);
	int api = listener(8080);
	unsigned ifindex = if_nametoindex("cellp0001");
	ck_assert_uint_gt(ifindex, 0);

	struct cell_nft_range *r = NULL;
	size_t n = 0;
	struct cell_error err = {0};
	ck_assert_int_eq(cell_nft_policy_load(policy_path(), &r, &n, &err), 0);
	struct cell_nft_table_opts o = {
	    .name = TABLE, .prefix = 24, .blocked = r, .n_blocked = n, .log_group = LOG_GROUP};
	inet_pton(AF_INET, "192.0.2.0", &o.subnet);
	struct cell_nft *nft = NULL;
	ck_assert_msg(cell_nft_open(&o, &nft, &err) == 0, "%s", err.msg);
	free(r);
	struct mnl_socket *nl = nflog_listen(LOG_GROUP);
	struct logged lg = {0};

	/* Control: with no sandbox in the table, the flood arrives (the count can fail). */
	udp_flood(S.fd, "10.0.0.1", 9, 50);
	sleep_ms(100);
	ck_assert_int_eq(udp_count(sink), 50);

	add(nft, sandbox("cellp0001", "192.0.2.2", "192.0.2.1", CELL_NFT_PUBLIC));
	/* accepted traffic: no log */
	ck_assert(reach(S.fd, NULL, "203.0.113.10", 80));
	nflog_read(nl, 200, &lg);
	ck_assert_int_eq(lg.n, 0);

	/* a blocked connection: logged as "blocked", from the sandbox's interface */
	ck_assert(!reach(S.fd, NULL, "10.0.0.1", 80));
	nflog_read(nl, 100, &lg);
	ck_assert_int_ge(lg.n, 1);
	ck_assert_str_eq(lg.prefix[0], "blocked");
	ck_assert_uint_eq(lg.indev[0], ifindex);
	ck_assert_uint_eq(lg.proto[0], IPPROTO_TCP);
	char d[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &lg.daddr[0], d, sizeof(d));
	ck_assert_str_eq(d, "10.0.0.1");

	/* the host: "host" */
	memset(&lg, 0, sizeof(lg));
	ck_assert(!reach(S.fd, NULL, "192.0.2.1", 8080));
	nflog_read(nl, 100, &lg);
	ck_assert_int_ge(lg.n, 1);
	ck_assert_str_eq(lg.prefix[0], "host");

	/* A flood: all of it dropped (the counter counts it, none arrives), the log stops at
	 * the limit's burst (plus what the rate refills meanwhile). */
	struct cell_nft_counters c0, c1;
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c0, &err), 0);
	memset(&lg, 0, sizeof(lg));
	double t0 = now_us();
	udp_flood(S.fd, "10.0.0.1", 9, 2000);
	double secs = (now_us() - t0) / 1e6;
	nflog_read(nl, 200, &lg);
	ck_assert_int_eq(cell_nft_sandbox_counters(nft, "cellp0001", &c1, &err), 0);
	ck_assert_uint_eq(c1.blocked.packets - c0.blocked.packets, 2000);
	ck_assert_int_eq(udp_count(sink), 0);
	int most = CELL_NFT_LOG_BURST + (int)(CELL_NFT_LOG_RATE * (secs + 0.3)) + 1;
	ck_assert_msg(lg.n >= 1 && lg.n <= most, "%d logged of 2000 in %.2f s (at most %d)", lg.n,
		      secs, most);
	ck_assert_str_eq(lg.prefix[0], "blocked");

	/* a spoofed source: "spoofed"; IPv6 out: "ipv6" */
	sleep_ms(2100); /* the limit's bucket refills */
	memset(&lg, 0, sizeof(lg));
	ck_assert(!reach(S.fd, "192.0.2.9", "203.0.113.10", 80));
	nflog_read(nl, 100, &lg);
	ck_assert_msg(logged(&lg, "spoofed", ifindex), "%d logged, first %s", lg.n, lg.prefix[0]);
	/* S with IPv6, the router's neighbour entry fixed (the input chain drops the sandbox's
	 * neighbour solicitations to the host: logged as "host", beside) */
	sh("%s sh -c 'echo 0 >/proc/sys/net/ipv6/conf/eth0/accept_dad && "
	   "echo 0 >/proc/sys/net/ipv6/conf/eth0/router_solicitations && "
	   "echo 0 >/proc/sys/net/ipv6/conf/all/disable_ipv6 && "
	   "echo 0 >/proc/sys/net/ipv6/conf/eth0/disable_ipv6 && "
	   "ip -6 addr add 2001:db8:1::2/64 dev eth0 nodad && "
	   "ip -6 neigh add 2001:db8:1::1 lladdr %s dev eth0 && "
	   "ip -6 route add default via 2001:db8:1::1'",
	   sp, mac);
	free(mac);
	memset(&lg, 0, sizeof(lg));
	ck_assert(!reach(S.fd, NULL, "2001:db8:2::10", 80));
	nflog_read(nl, 100, &lg);
	ck_assert_msg(logged(&lg, "ipv6", ifindex), "%d logged, first %s", lg.n, lg.prefix[0]);
	sh("%s sh -c 'echo 1 >/proc/sys/net/ipv6/conf/all/disable_ipv6'", sp);

	/* denied (an allowlist with nothing in it) */
	del(nft, "cellp0001");
	add(nft, sandbox("cellp0001", "192.0.2.2", "192.0.2.1", CELL_NFT_ALLOWLIST));
	sleep_ms(2100); /* the limit's bucket refills */
	memset(&lg, 0, sizeof(lg));
	ck_assert(!reach(S.fd, NULL, "203.0.113.10", 80));
	nflog_read(nl, 100, &lg);
	ck_assert_msg(logged(&lg, "denied", ifindex), "%d logged, first %s", lg.n, lg.prefix[0]);

	/* Removed: its drop chains go with it; the path is open again. */
	del(nft, "cellp0001");
	char *t = sh_out("nft list table inet " TABLE);
	ck_assert_msg(!strstr(t, "cellp0001"), "%s", t);
	free(t);
	ck_assert(reach(S.fd, NULL, "10.0.0.1", 80));

	mnl_socket_close(nl);
	ck_assert_int_eq(cell_nft_table_delete(nft, &err), 0);
	cell_nft_close(nft);
	close(web);
	close(sink);
	close(api);
	h_netns_release(&S);
	h_netns_release(&I);
	close(self_ns);
}
END_TEST

/* A restart that turns the log on (or off) keeps the sandboxes the other made: their
 * chains work as made and are removed whole. */
START_TEST(test_log_restart)
{
	fresh_netns();
	struct cell_nft *nft = open_public(TABLE); /* no log */
	add(nft, sandbox("cellr0001", "192.0.2.2", "192.0.2.1", CELL_NFT_PUBLIC));
	cell_nft_close(nft);
	struct cell_nft_table_opts o = {.name = TABLE, .prefix = 24, .log_group = LOG_GROUP};
	inet_pton(AF_INET, "192.0.2.0", &o.subnet);
	struct cell_error err = {0};
	ck_assert_msg(cell_nft_open(&o, &nft, &err) == 0, "%s", err.msg);
	add(nft, sandbox("cellr0002", "192.0.2.4", "192.0.2.3", CELL_NFT_PUBLIC));
	char *t = sh_out("nft list table inet " TABLE);
	ck_assert_msg(strstr(t, "chain sb-cellr0002/blocked {") &&
			  strstr(t, "chain sb-cellr0002/spoofed {") &&
			  strstr(t, "chain sb-cellr0002/denied {") &&
			  strstr(t, "chain sb-cellr0002/conntrack {") &&
			  !strstr(t, "sb-cellr0001/") && count(t, "log prefix") == 8 &&
			  count(t, "group 4243") == 8 && count(t, "limit rate 10/second") == 8,
		      "%s", t);
	free(t);
	/* the list names sandboxes, never a drop chain */
	char(*names)[CELL_NFT_IFNAME_MAX + 1] = NULL;
	size_t nn = 0;
	ck_assert_int_eq(cell_nft_sandbox_list(nft, &names, &nn, &err), 0);
	ck_assert_uint_eq(nn, 2);
	ck_assert_str_eq(names[0], "cellr0001");
	ck_assert_str_eq(names[1], "cellr0002");
	free(names);
	cell_nft_close(nft);

	nft = open_table(TABLE, NULL, 0); /* the log off again */
	t = sh_out("nft list table inet " TABLE);
	ck_assert_msg(count(t, "log prefix") == 5 && strstr(t, "chain drop-host {"), "%s", t);
	free(t);
	del(nft, "cellr0001");
	del(nft, "cellr0002");
	t = sh_out("nft list table inet " TABLE);
	ck_assert_msg(!strstr(t, "cellr"), "%s", t);
	free(t);
	ck_assert_int_eq(cell_nft_table_delete(nft, &err), 0);
	cell_nft_close(nft);
}
END_TEST

/* The survey names the other tables and the base chains that would drop sandboxes'
 * packets by default, and never counts celld's own table nor changes anything. */
START_TEST(test_survey)
{
	fresh_netns();
	struct cell_nft *nft = open_public(TABLE);
	struct cell_nft_survey sv;
	struct cell_error err = {0};
	ck_assert_int_eq(cell_nft_survey(nft, &sv, &err), 0);
	ck_assert_uint_eq(sv.n_tables, 0);
	ck_assert_uint_eq(sv.forward_drops + sv.input_drops, 0);
	/* What Docker (through iptables-nft) and a host firewall leave. */
	sh("nft add table ip filter && nft add chain ip filter FORWARD "
	   "'{ type filter hook forward priority 0; policy drop; }' && "
	   "nft add chain ip filter OUTPUT '{ type filter hook output priority 0; policy drop; }' "
	   "&& nft add table inet fw && nft add chain inet fw in "
	   "'{ type filter hook input priority 0; policy drop; }' && "
	   "nft add chain inet fw passing '{ type filter hook forward priority 0; policy accept; "
	   "}' "
	   "&& nft add table ip6 six && nft add chain ip6 six f "
	   "'{ type filter hook forward priority 0; policy drop; }'");
	ck_assert_int_eq(cell_nft_survey(nft, &sv, &err), 0);
	ck_assert_uint_eq(sv.n_tables, 3);
	ck_assert_msg(strstr(sv.tables, "ip filter") && strstr(sv.tables, "inet fw") &&
			  strstr(sv.tables, "ip6 six") && !strstr(sv.tables, TABLE),
		      "%s", sv.tables);
	ck_assert_uint_eq(sv.forward_drops, 1);
	ck_assert_uint_eq(sv.input_drops, 1);
	ck_assert_msg(strstr(sv.drops, "ip filter chain FORWARD (hook forward)") &&
			  strstr(sv.drops, "inet fw chain in (hook input)") &&
			  !strstr(sv.drops, "OUTPUT") && !strstr(sv.drops, "six"),
		      "%s", sv.drops);
	char *t = sh_out("nft list chain ip filter FORWARD");
	ck_assert_msg(strstr(t, "policy drop") && !strstr(t, "cell"), "changed: %s", t);
	free(t);
	cell_nft_close(nft);
}
END_TEST

/* Another writer of nftables in the same namespace (a host firewall, Docker, another celld)
 * commits again and again, a few thousand times a second: every commit bumps the ruleset's
 * generation, and a dump that spans several netlink messages meanwhile comes back marked
 * NLM_F_DUMP_INTR. Until stop. (The pause only keeps the writer from taking every moment
 * between two messages of a dump, which no real host does; no verdict depends on it.) */
struct churn {
	atomic_bool stop;
	unsigned long commits;
};

static void *churn_fn(void *arg)
{
	struct churn *c = arg;
	struct cell_nft *other = open_table("churn", NULL, 0);
	add(other, sandbox("cellc0001", "192.0.2.200", "192.0.2.1", CELL_NFT_ALLOWLIST));
	struct in_addr a = {.s_addr = htonl(0xcb007101u)};
	struct cell_error err = {0};
	while (!atomic_load(&c->stop)) {
		ck_assert_int_eq(cell_nft_allow_add(other, "cellc0001", &a, 1, 60, &err), 0);
		ck_assert_int_eq(cell_nft_allow_del(other, "cellc0001", &a, 1, &err), 0);
		c->commits += 2;
		nanosleep(&(struct timespec){.tv_nsec = 200 * 1000}, NULL);
	}
	cell_nft_close(other);
	return NULL;
}

/* Dumps interrupted by another writer's commits are read again: with enough sandboxes that
 * a dump of the table's sets spans several messages, every remove, list and re-add succeeds
 * while another table changes without pause, and a removed sandbox leaves nothing behind
 * for the next add on its interface to trip on (-EEXIST). */
START_TEST(test_dumps_under_churn)
{
	fresh_netns();
	struct cell_nft *nft = open_public(TABLE);
	enum { N = 120 };
	char ifs[N][16];
	for (int i = 0; i < N; i++) {
		snprintf(ifs[i], sizeof(ifs[i]), "celld%04d", i);
		char a[16];
		snprintf(a, sizeof(a), "192.0.2.%d", i + 2);
		add(nft, sandbox(ifs[i], a, "192.0.2.1", CELL_NFT_ALLOWLIST));
	}
	/* One allowed set of many elements: its dump spans several messages too. */
	static struct in_addr many[CELL_NFT_ALLOWED_MAX];
	for (int i = 0; i < CELL_NFT_ALLOWED_MAX; i++)
		many[i].s_addr = htonl(0xc6336400u + (uint32_t)i);
	struct cell_error err = {0};
	for (int i = 0; i < CELL_NFT_ALLOWED_MAX; i += 512)
		ck_assert_int_eq(cell_nft_allow_add(nft, ifs[0], many + i, 512, 600, &err), 0);

	struct churn c = {0};
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, churn_fn, &c), 0);
	for (int round = 0; round < 3; round++) {
		struct cell_nft_allowed *l = NULL;
		size_t n = 0;
		int rc = cell_nft_allow_list(nft, ifs[0], &l, &n, &err);
		ck_assert_msg(rc == 0, "listing a large set: %d %s", rc, err.msg);
		ck_assert_uint_eq(n, CELL_NFT_ALLOWED_MAX);
		free(l);
		char(*v)[CELL_NFT_IFNAME_MAX + 1] = NULL;
		rc = cell_nft_sandbox_list(nft, &v, &n, &err);
		ck_assert_msg(rc == 0, "listing sandboxes: %d %s", rc, err.msg);
		ck_assert_uint_eq(n, N);
		free(v);
		for (int i = 1; i < N; i++) {
			rc = cell_nft_sandbox_remove(nft, ifs[i], &err);
			ck_assert_msg(rc == 0, "round %d: removing %s: %d %s", round, ifs[i], rc,
				      err.msg);
		}
		rc = cell_nft_sandbox_list(nft, &v, &n, &err);
		ck_assert_msg(rc == 0, "listing sandboxes: %d %s", rc, err.msg);
		ck_assert_msg(n == 1, "round %d: %zu sandboxes left, not 1", round, n);
		free(v);
		for (int i = 1; i < N; i++) {
			char a[16];
			snprintf(a, sizeof(a), "192.0.2.%d", i + 2);
			struct cell_nft_sandbox sb =
			    sandbox(ifs[i], a, "192.0.2.1", CELL_NFT_ALLOWLIST);
			rc = cell_nft_sandbox_add(nft, &sb, &err);
			ck_assert_msg(rc == 0, "round %d: adding %s again: %d %s", round, ifs[i],
				      rc, err.msg);
		}
	}
	atomic_store(&c.stop, true);
	ck_assert_int_eq(pthread_join(t, NULL), 0);
	ck_assert_msg(c.commits > 0, "the other writer never committed");
	cell_nft_close(nft);
}
END_TEST

/* Prints what a sandbox's objects cost (for the bench numbers; asserts only that it works). */
START_TEST(test_costs)
{
	fresh_netns();
	struct cell_nft *nft = open_public(TABLE);
	enum { N = 200 };
	static double addrm[N], adds[N], rms[N], allow[N], create[N];
	struct cell_error err = {0};
	for (int i = 0; i < N; i++) {
		double t0 = now_us();
		add(nft, sandbox("cellb0001", "192.0.2.2", "192.0.2.1", CELL_NFT_ALLOWLIST));
		double t1 = now_us();
		del(nft, "cellb0001");
		double t2 = now_us();
		addrm[i] = t2 - t0;
		adds[i] = t1 - t0;
		rms[i] = t2 - t1;
	}
	add(nft, sandbox("cellb0001", "192.0.2.2", "192.0.2.1", CELL_NFT_ALLOWLIST));
	for (int i = 0; i < N; i++) {
		struct in_addr a = {.s_addr = htonl(0xcb007100u + (uint32_t)(i % 250) + 1)};
		double t0 = now_us();
		ck_assert_int_eq(cell_nft_allow_add(nft, "cellb0001", &a, 1, 60, &err), 0);
		allow[i] = now_us() - t0;
	}
	struct cell_nft_range *r = NULL;
	size_t n = 0;
	ck_assert_int_eq(cell_nft_policy_load(policy_path(), &r, &n, &err), 0);
	for (int i = 0; i < N; i++) {
		double t0 = now_us();
		ck_assert_int_eq(cell_nft_table_create(nft, r, n, &err), 0);
		create[i] = now_us() - t0;
	}
	free(r);
	double *all[] = {addrm, adds, rms, allow, create};
	for (int i = 0; i < 5; i++)
		qsort(all[i], N, sizeof(double), dcmp);
	printf(
	    "it_nft: medians of %d: sandbox add+remove %.0f us (p90 %.0f; add %.0f, remove %.0f); "
	    "allowed address add %.0f us (p90 %.0f); table create/reuse %.0f us\n",
	    N, addrm[N / 2], addrm[N * 9 / 10], adds[N / 2], rms[N / 2], allow[N / 2],
	    allow[N * 9 / 10], create[N / 2]);
	fflush(stdout);
	cell_nft_close(nft);
}
END_TEST

int main(void)
{
	if (geteuid() != 0) {
		fprintf(stderr, "it_nft: needs root (network namespaces, nftables)\n");
		return 1;
	}
	Suite *s = suite_create("nft");
	TCase *tc = tcase_create("nft");
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, test_policy_file);
	tcase_add_test(tc, test_table_and_sandboxes);
	tcase_add_test(tc, test_allowed_set_timeouts);
	tcase_add_test(tc, test_remove_one_sandbox);
	tcase_add_test(tc, test_create_is_idempotent);
	tcase_add_test(tc, test_packets);
	tcase_add_test(tc, test_packet_log);
	tcase_add_test(tc, test_log_restart);
	tcase_add_test(tc, test_dumps_under_churn);
	tcase_add_test(tc, test_survey);
	tcase_add_test(tc, test_costs);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
