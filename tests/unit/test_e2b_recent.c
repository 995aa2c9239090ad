/* Where a signed /files URL's signer is looked for on the gate's thread
 * (src/celld/api/e2b/e2b_recent.c): the sandbox the request names, else the last few its client
 * (an IPv4 address, an IPv6 /64) used. Counted in signature checks with 10,000 sandboxes:
 * one when named, none from a client that used none, at most E2B_RECENT_PER_CLIENT from one
 * that did, whatever the number of sandboxes or clients. And the bound on the scan of
 * every sandbox that is the last resort: one at a time, E2B_SCANS_PER_SECOND a second. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "../../src/celld/api/e2b/e2b_recent.h"
#include "unit.h"

#define SANDBOXES 10000

static char ids[SANDBOXES][CELL_ID_MAX + 1];
static unsigned checks;

static void make_ids(void)
{
	for (int i = 0; i < SANDBOXES; i++)
		snprintf(ids[i], sizeof(ids[i]), "sbx-%05d", i);
}

/* A signature check: cls is the signer's id. */
static bool signed_by(const char *id, const void *cls)
{
	checks++;
	return !strcmp(id, cls);
}

static struct peer_key client(const char *addr)
{
	struct sockaddr_storage ss = {0};
	struct peer_key k;
	if (strchr(addr, ':')) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
		a->sin6_family = AF_INET6;
		ck_assert_int_eq(inet_pton(AF_INET6, addr, &a->sin6_addr), 1);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)&ss;
		a->sin_family = AF_INET;
		ck_assert_int_eq(inet_pton(AF_INET, addr, &a->sin_addr), 1);
	}
	ck_assert(peer_key_of((const struct sockaddr *)&ss, &k));
	return k;
}

/* The lookup of signer's URL from c (NULL: no client) naming named: its result, the checks
 * it cost in *cost. */
static int find(const char *named, const struct peer_key *c, const char *signer, unsigned *cost,
		char out[CELL_ID_MAX + 1])
{
	checks = 0;
	int r = e2b_recent_find(named, c, signed_by, signer, out);
	*cost = checks;
	return r;
}

START_TEST(named_costs_one_check)
{
	make_ids();
	const char *signer = ids[7777];
	char id[CELL_ID_MAX + 1];
	unsigned cost;
	struct peer_key c = client("192.0.2.10");
	e2b_recent_note(&c, signer);
	ck_assert_int_eq(find(signer, &c, signer, &cost, id), 0);
	ck_assert_str_eq(id, signer);
	ck_assert_uint_eq(cost, 1);
	/* Named as another sandbox: refused, even from the client that used the signer. */
	ck_assert_int_eq(find(ids[1], &c, signer, &cost, id), -EACCES);
	ck_assert_uint_eq(cost, 1);
	ck_assert_int_eq(find(ids[1], NULL, signer, &cost, id), -EACCES);
	ck_assert_uint_eq(cost, 1);
	/* Named as no id at all: refused unchecked. */
	ck_assert_int_eq(find("Not_An_Id", &c, signer, &cost, id), -EACCES);
	ck_assert_uint_eq(cost, 0);
}
END_TEST

START_TEST(a_client_that_used_none_costs_nothing)
{
	make_ids();
	char id[CELL_ID_MAX + 1];
	unsigned cost;
	struct peer_key other = client("198.51.100.1"), c = client("198.51.100.2");
	for (int i = 0; i < SANDBOXES; i++)
		e2b_recent_note(&other, ids[i]);
	ck_assert_int_eq(find(NULL, &c, ids[5], &cost, id), -ENOENT);
	ck_assert_uint_eq(cost, 0);
	ck_assert_int_eq(find(NULL, NULL, ids[5], &cost, id), -ENOENT);
	ck_assert_uint_eq(cost, 0);
}
END_TEST

START_TEST(a_client_that_used_some_costs_at_most_four)
{
	make_ids();
	char id[CELL_ID_MAX + 1];
	unsigned cost;
	struct peer_key c = client("203.0.113.7");
	/* It used 20 sandboxes, the signer third from last. */
	for (int i = 0; i < 20; i++)
		e2b_recent_note(&c, ids[i == 17 ? 4242 : i * 500]);
	ck_assert_int_eq(find(NULL, &c, ids[4242], &cost, id), 0);
	ck_assert_str_eq(id, ids[4242]);
	ck_assert_uint_eq(cost, 3);
	/* A made-up signature: every one of its last E2B_RECENT_PER_CLIENT, no more. */
	ck_assert_int_eq(find(NULL, &c, "sbx-none", &cost, id), -ENOENT);
	ck_assert_uint_eq(cost, E2B_RECENT_PER_CLIENT);
	/* Four more used: the signer is no longer among them (the scan's to find). */
	for (int i = 0; i < E2B_RECENT_PER_CLIENT; i++)
		e2b_recent_note(&c, ids[9000 + i]);
	ck_assert_int_eq(find(NULL, &c, ids[4242], &cost, id), -ENOENT);
	ck_assert_uint_eq(cost, E2B_RECENT_PER_CLIENT);
	/* Used again: first once more, kept once. */
	e2b_recent_note(&c, ids[9001]);
	e2b_recent_note(&c, ids[9001]);
	char got[E2B_RECENT_PER_CLIENT][CELL_ID_MAX + 1];
	ck_assert_uint_eq(e2b_recent_of(&c, got), E2B_RECENT_PER_CLIENT);
	ck_assert_str_eq(got[0], ids[9001]);
	ck_assert_str_eq(got[1], ids[9003]);
	ck_assert_str_eq(got[2], ids[9002]);
	ck_assert_str_eq(got[3], ids[9000]);
	/* What is no id is never kept. */
	e2b_recent_note(&c, "../etc");
	ck_assert_uint_eq(e2b_recent_of(&c, got), E2B_RECENT_PER_CLIENT);
	ck_assert_str_eq(got[0], ids[9001]);
}
END_TEST

START_TEST(ipv6_is_counted_by_its_64_and_v4_mapped_as_v4)
{
	make_ids();
	char id[CELL_ID_MAX + 1];
	unsigned cost;
	struct peer_key a = client("2001:db8:1:2::5"), same = client("2001:db8:1:2:ffff::9"),
			next = client("2001:db8:1:3::5");
	e2b_recent_note(&a, ids[123]);
	ck_assert_int_eq(find(NULL, &same, ids[123], &cost, id), 0);
	ck_assert_uint_eq(cost, 1);
	ck_assert_int_eq(find(NULL, &next, ids[123], &cost, id), -ENOENT);
	ck_assert_uint_eq(cost, 0);
	struct peer_key v4 = client("192.0.2.44"), mapped = client("::ffff:192.0.2.44");
	ck_assert(peer_key_equal(&v4, &mapped));
	e2b_recent_note(&v4, ids[321]);
	ck_assert_int_eq(find(NULL, &mapped, ids[321], &cost, id), 0);
	ck_assert_str_eq(id, ids[321]);
	ck_assert_uint_eq(cost, 1);
	char text[64];
	peer_key_text(&a, text, sizeof(text));
	ck_assert_str_eq(text, "2001:db8:1:2::/64");
	peer_key_text(&mapped, text, sizeof(text));
	ck_assert_str_eq(text, "192.0.2.44");
}
END_TEST

/* Many more clients than the table holds: each lookup still costs at most four checks, and
 * the latest clients' sandboxes are found. */
START_TEST(the_table_is_fixed_whatever_the_clients)
{
	make_ids();
	char id[CELL_ID_MAX + 1];
	unsigned cost, found = 0;
	for (int i = 0; i < SANDBOXES; i++) {
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(0x0a000000u + (uint32_t)i)};
		struct peer_key k;
		ck_assert(peer_key_of((const struct sockaddr *)&sa, &k));
		for (int j = 0; j < 6; j++)
			e2b_recent_note(&k, ids[(i + j * 1000) % SANDBOXES]);
	}
	for (int i = 0; i < SANDBOXES; i++) {
		struct sockaddr_in sa = {.sin_family = AF_INET,
					 .sin_addr.s_addr = htonl(0x0a000000u + (uint32_t)i)};
		struct peer_key k;
		ck_assert(peer_key_of((const struct sockaddr *)&sa, &k));
		int r = find(NULL, &k, ids[(i + 5000) % SANDBOXES], &cost, id);
		ck_assert_uint_le(cost, E2B_RECENT_PER_CLIENT);
		found += r == 0;
	}
	/* At most one client a slot, the latest kept. */
	ck_assert_uint_gt(found, 0);
	ck_assert_uint_le(found, E2B_RECENT_CLIENTS);
}
END_TEST

START_TEST(the_scan_is_bounded_host_wide)
{
	int64_t t = 5000000;
	for (int i = 0; i < E2B_SCANS_PER_SECOND; i++) {
		ck_assert_int_eq(e2b_recent_scan_begin(t), 0);
		/* One at a time. */
		ck_assert_int_eq(e2b_recent_scan_begin(t), -EBUSY);
		e2b_recent_scan_end();
	}
	ck_assert_int_eq(e2b_recent_scan_begin(t), -EAGAIN);
	ck_assert_int_eq(e2b_recent_scan_begin(t + 1000 / E2B_SCANS_PER_SECOND - 1), -EAGAIN);
	/* One more each 1/E2B_SCANS_PER_SECOND s. */
	ck_assert_int_eq(e2b_recent_scan_begin(t + 1000 / E2B_SCANS_PER_SECOND), 0);
	e2b_recent_scan_end();
	ck_assert_int_eq(e2b_recent_scan_begin(t + 1000 / E2B_SCANS_PER_SECOND), -EAGAIN);
	/* A second later the whole burst again, never more. */
	t += 10000;
	unsigned ok = 0;
	for (int i = 0; i < 3 * E2B_SCANS_PER_SECOND; i++)
		if (e2b_recent_scan_begin(t) == 0) {
			ok++;
			e2b_recent_scan_end();
		}
	ck_assert_uint_eq(ok, E2B_SCANS_PER_SECOND);
}
END_TEST

static Suite *e2b_recent_suite(void)
{
	Suite *s = suite_create("e2b_recent");
	TCase *tc = tcase_create("e2b_recent");
	tcase_add_test(tc, named_costs_one_check);
	tcase_add_test(tc, a_client_that_used_none_costs_nothing);
	tcase_add_test(tc, a_client_that_used_some_costs_at_most_four);
	tcase_add_test(tc, ipv6_is_counted_by_its_64_and_v4_mapped_as_v4);
	tcase_add_test(tc, the_table_is_fixed_whatever_the_clients);
	tcase_add_test(tc, the_scan_is_bounded_host_wide);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(e2b_recent_suite());
}
