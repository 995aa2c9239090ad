/* The texts of /proc/<pid> as top reads them (src/celld/proc_view.c): a name that fakes the
 * fields after it, a cut or empty stat, a cgroup path that only starts like the sandbox's,
 * the innermost NSpid, a uid inside and outside the map, and every byte a terminal could
 * take as a command escaped. */
#include <stdio.h>

#include "proc_view.h"
#include "unit.h"

/* A stat line whose name is comm, with state S, utime 7, stime 3, starttime 500, rss 12. */
static char *stat_of(const char *comm)
{
	static char buf[512];
	snprintf(buf, sizeof(buf),
		 "42 (%s) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 0 0 20 0 1 0 500 1000000 12 "
		 "18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n",
		 comm);
	return buf;
}

START_TEST(stat_fields)
{
	struct proc_stat st;
	ck_assert_int_eq(proc_view_stat(stat_of("sleep"), &st), 0);
	ck_assert_str_eq(st.comm, "sleep");
	ck_assert_int_eq(st.state, 'S');
	ck_assert_uint_eq(st.utime, 7);
	ck_assert_uint_eq(st.stime, 3);
	ck_assert_uint_eq(st.starttime, 500);
	ck_assert_int_eq(st.rss_pages, 12);
}
END_TEST

START_TEST(stat_name_fakes_fields)
{
	/* A name with ") R 1 2 3 (" in it: the fields are read after the last ')'. */
	struct proc_stat st;
	ck_assert_int_eq(proc_view_stat(stat_of("x) R 9 9 9 (y"), &st), 0);
	ck_assert_str_eq(st.comm, "x) R 9 9 9 (y");
	ck_assert_int_eq(st.state, 'S');
	ck_assert_uint_eq(st.utime, 7);
	/* A longer name is cut to the field's size, never past it. */
	ck_assert_int_eq(proc_view_stat(stat_of("0123456789012345678901234567890123456789"), &st),
			 0);
	ck_assert_uint_eq(strlen(st.comm), sizeof(st.comm) - 1);
}
END_TEST

START_TEST(stat_malformed)
{
	struct proc_stat st;
	ck_assert_int_eq(proc_view_stat("", &st), -EPROTO);
	ck_assert_int_eq(proc_view_stat("42 (sleep", &st), -EPROTO);
	ck_assert_int_eq(proc_view_stat("42 )sleep( S 1", &st), -EPROTO);
	ck_assert_int_eq(proc_view_stat("42 (sleep) S 1 42", &st), -EPROTO); /* cut short */
}
END_TEST

START_TEST(cgroup_membership)
{
	const char *rel = "cell/abc";
	ck_assert(proc_view_in_cgroup("0::/cell/abc\n", rel));
	ck_assert(proc_view_in_cgroup("12:pids:/cell/abc\n1:name=systemd:/x\n", rel));
	ck_assert(proc_view_in_cgroup("0::/system.slice/celld.service/cell/abc", rel));
	ck_assert(!proc_view_in_cgroup("0::/cell/abcd\n", rel));
	ck_assert(!proc_view_in_cgroup("0::/cell/abc/sub\n", rel));
	ck_assert(!proc_view_in_cgroup("0::/xcell/abc\n", rel));
	ck_assert(!proc_view_in_cgroup("", rel));
}
END_TEST

static const char status[] = "Name:\tUid: 5\n"
			     "State:\tS (sleeping)\n"
			     "NSpid:\t12345\t7\n"
			     "Uid:\t101000\t101001\t101000\t101000\n";

START_TEST(status_pid_and_uid)
{
	ck_assert_int_eq(proc_view_status_last(status, "NSpid"), 7);
	ck_assert_int_eq(proc_view_status_last(status, "Nope"), -1);
	ck_assert_int_eq(proc_view_status_last("NSpid:\n", "NSpid"), -1);
	/* The effective uid (the second), mapped: 101001 is 1001 inside. */
	ck_assert_int_eq(proc_view_inner_uid(status, "         0     100000      65536\n"), 1001);
	ck_assert_int_eq(proc_view_inner_uid(status, "0 0 1\n1000 101000 1\n1001 101001 1\n"),
			 1001);
	/* Outside every range, or no map, or no Uid line: unmapped. */
	ck_assert_int_eq(proc_view_inner_uid(status, "0 200000 65536\n"), -1);
	ck_assert_int_eq(proc_view_inner_uid(status, ""), -1);
	ck_assert_int_eq(proc_view_inner_uid("Name:\tx\n", "0 0 4294967295\n"), -1);
}
END_TEST

START_TEST(escape_bytes)
{
	static const char cmd[] = "sh\0-c\0echo \x1b[2J\\\x01\xc3\xa9\0";
	char *e = proc_view_escape(cmd, sizeof(cmd) - 1);
	ck_assert_str_eq(e, "sh -c echo \\x1b[2J\\x5c\\x01\\xc3\\xa9");
	free(e);
	e = proc_view_escape("", 0);
	ck_assert_str_eq(e, "");
	free(e);
	e = proc_view_escape("\0\0", 2);
	ck_assert_str_eq(e, "");
	free(e);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("proc_view");
	TCase *tc = tcase_create("proc_view");
	tcase_add_test(tc, stat_fields);
	tcase_add_test(tc, stat_name_fakes_fields);
	tcase_add_test(tc, stat_malformed);
	tcase_add_test(tc, cgroup_membership);
	tcase_add_test(tc, status_pid_and_uid);
	tcase_add_test(tc, escape_bytes);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
