/* A sandbox's table of started processes and bash sessions (src/celld/proc_table.c): what a
 * start was given comes back by session and by tag, the table keeps its newest
 * PROC_TABLE_MAX, a list's answer prunes only what was added before it was asked for, and
 * the bash sessions count against the sandbox's and celld's bounds until the table goes
 * with its sandbox. */
#include <errno.h>
#include <stdio.h>

#include "proc_table.h"
#include "unit.h"

static json_t *config_of(int i)
{
	return json_pack("{s:s, s:i}", "cmd", "sleep", "n", i);
}

static void add(struct proc_table *t, const char *sid, int pid, const char *tag)
{
	ck_assert_int_eq(proc_table_add(t, sid, pid, PROC_API_E2B, tag, config_of(pid)), 0);
}

/* PTY_LIST's "sessions" naming the ids given (NULL-terminated). */
static json_t *running(const char *const *ids)
{
	json_t *a = json_array();
	for (; *ids; ids++)
		json_array_append_new(a, json_pack("{s:s, s:i}", "id", *ids, "pid", 1));
	return a;
}

static bool known(struct proc_table *t, const char *sid)
{
	struct proc_info info;
	bool found = proc_table_get(t, sid, &info);
	json_decref(info.config);
	return found;
}

START_TEST(add_get_and_tag)
{
	struct proc_table *t = proc_table_new();
	add(t, "e2b-a", 10, "web");
	add(t, "e2b-b", 11, NULL);
	struct proc_info info;
	ck_assert(proc_table_get(t, "e2b-a", &info));
	ck_assert_int_eq(info.pid, 10);
	ck_assert_int_eq(info.api, PROC_API_E2B);
	ck_assert(info.has_tag);
	ck_assert_str_eq(info.tag, "web");
	ck_assert_int_eq(json_integer_value(json_object_get(info.config, "n")), 10);
	json_decref(info.config);
	ck_assert(proc_table_get(t, "e2b-b", &info));
	ck_assert(!info.has_tag);
	json_decref(info.config);
	ck_assert(!proc_table_get(t, "e2b-c", &info));
	ck_assert_ptr_null(info.config);
	ck_assert_int_eq(proc_table_tag_pid(t, "web"), 10);
	ck_assert_int_eq(proc_table_tag_pid(t, "db"), -1);
	proc_table_remove(t, "e2b-a");
	ck_assert(!known(t, "e2b-a"));
	ck_assert_int_eq(proc_table_tag_pid(t, "web"), -1);
	proc_table_free(t);
}
END_TEST

START_TEST(bound_drops_oldest)
{
	struct proc_table *t = proc_table_new();
	char sid[32];
	for (int i = 0; i < PROC_TABLE_MAX + 3; i++) {
		snprintf(sid, sizeof(sid), "s%d", i);
		add(t, sid, i + 1, NULL);
	}
	for (int i = 0; i < PROC_TABLE_MAX + 3; i++) {
		snprintf(sid, sizeof(sid), "s%d", i);
		ck_assert_msg(known(t, sid) == (i >= 3), "entry %d", i);
	}
	proc_table_free(t);
}
END_TEST

/* A list answer asked for before a start cannot know it: the start's entry stays. */
START_TEST(prune_respects_mark)
{
	struct proc_table *t = proc_table_new();
	add(t, "old-live", 1, NULL);
	add(t, "old-dead", 2, NULL);
	uint64_t mark = proc_table_mark(t);
	add(t, "new", 3, "later"); /* started while the list was on its way */
	json_t *run = running((const char *[]){"old-live", NULL});
	proc_table_prune(t, run, mark);
	ck_assert(known(t, "old-live"));
	ck_assert(!known(t, "old-dead"));
	ck_assert(known(t, "new"));
	ck_assert_int_eq(proc_table_tag_pid(t, "later"), 3);
	/* A later list that does not name it, asked for after it came, drops it. */
	proc_table_prune(t, run, proc_table_mark(t));
	ck_assert(!known(t, "new"));
	ck_assert(known(t, "old-live"));
	json_decref(run);
	proc_table_free(t);
}
END_TEST

START_TEST(shells_bounded_per_sandbox_and_freed)
{
	struct proc_table *a = proc_table_new(), *b = proc_table_new();
	char id[32];
	for (int i = 0; i < PROC_SHELLS_PER_SANDBOX; i++) {
		snprintf(id, sizeof(id), "sh%d", i);
		ck_assert_int_eq(proc_table_shell_add(a, id), 0);
	}
	ck_assert_int_eq(proc_table_shell_add(a, "one-more"), -EUSERS);
	proc_table_shell_forget(a, "sh0");
	ck_assert_int_eq(proc_table_shell_add(a, "one-more"), 0);
	proc_table_shell_forget(a, "never-opened"); /* nothing */
	ck_assert_int_eq(proc_table_shell_add(a, "too-many"), -EUSERS);
	/* celld's bound: every table's shells together; a freed table gives its own back. */
	struct proc_table *t[PROC_SHELLS_MAX / PROC_SHELLS_PER_SANDBOX];
	size_t n = 0, full = 0;
	for (; n < sizeof(t) / sizeof(t[0]); n++) {
		t[n] = proc_table_new();
		for (int i = 0; i < PROC_SHELLS_PER_SANDBOX; i++) {
			snprintf(id, sizeof(id), "x%d", i);
			int rc = proc_table_shell_add(t[n], id);
			ck_assert(rc == 0 || rc == -ENOSPC);
			full += rc == -ENOSPC;
		}
	}
	ck_assert_uint_eq(full, PROC_SHELLS_PER_SANDBOX); /* a's share of the bound */
	ck_assert_int_eq(proc_table_shell_add(b, "b0"), -ENOSPC);
	proc_table_free(a);
	ck_assert_int_eq(proc_table_shell_add(b, "b0"), 0);
	for (size_t i = 0; i < n; i++)
		proc_table_free(t[i]);
	proc_table_free(b);
}
END_TEST

static Suite *proc_table_suite(void)
{
	Suite *s = suite_create("proc_table");
	TCase *tc = tcase_create("proc_table");
	tcase_add_test(tc, add_get_and_tag);
	tcase_add_test(tc, bound_drops_oldest);
	tcase_add_test(tc, prune_respects_mark);
	tcase_add_test(tc, shells_bounded_per_sandbox_and_freed);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(proc_table_suite());
}
