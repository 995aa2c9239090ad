/* The sandbox object's state machine (src/celld/sandbox.c): the transition table, and the
 * one choke point (sandbox_begin / sandbox_end) with its answers: gone, already there, not
 * from this state, refused while a delete runs, waiting for the operation before it.
 * Linked with the registry, celld's configuration, the audit log and the events (every
 * transition is recorded there); the command table and the cgroup name are stubbed (the
 * object only holds them). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "audit.h"
#include "commands.h"
#include "config.h"
#include "events.h"
#include "registry.h"
#include "sandbox.h"
#include "sandbox_select.h"
#include "unit.h"

/* ---- seams: what sandbox_new needs besides the object ---- */

struct cmd_table *cmd_table_new(void)
{
	return malloc(1);
}

void cmd_table_free(struct cmd_table *t)
{
	free(t);
}

int cell_cgroup_name(const char *state_dir, const char *id, char *buf, size_t size)
{
	(void)state_dir;
	snprintf(buf, size, "cell/%s", id);
	return 0;
}

/* ---- helpers ---- */

static struct sandbox *published(enum sbx_state state)
{
	celld.state_dir = "/nonexistent";
	struct sandbox *sb = sandbox_new("0123456789abcdef");
	ck_assert_ptr_nonnull(sb);
	struct cell_error err = {0};
	ck_assert_int_eq(sandbox_begin(sb, SBX_CREATING, &err), 0);
	registry_lock();
	ck_assert_int_eq(registry_publish_locked(sb), 0);
	registry_unlock();
	sandbox_end(sb, SBX_CREATING, state == SBX_PENDING ? SBX_PENDING : SBX_RUNNING, NULL);
	if (state == SBX_PAUSED || state == SBX_FAILED) {
		enum sbx_op op = state == SBX_PAUSED ? SBX_PAUSING : SBX_RECOVERING;
		ck_assert_int_eq(sandbox_begin(sb, op, &err), 0);
		sandbox_end(sb, op, state, state == SBX_FAILED ? "init died" : NULL);
	}
	ck_assert_int_eq(sb->state, state);
	return sb;
}

static void unpublish(struct sandbox *sb)
{
	registry_lock();
	bool removed = registry_remove_locked(sb);
	registry_unlock();
	if (removed)
		sandbox_unref(sb);
	sandbox_unref(sb);
}

static int begin(struct sandbox *sb, enum sbx_op op, char *msg, size_t size)
{
	struct cell_error err = {0};
	int r = sandbox_begin(sb, op, &err);
	if (msg)
		snprintf(msg, size, "%s", err.msg);
	if (r < 0)
		ck_assert_int_eq(err.code, -r);
	return r;
}

/* ---- the table ---- */

/* ---- the sandboxes a list shows (sandbox_select.c) ---- */

/* A sandbox of that id, made at ms, published Running. */
static struct sandbox *published_at(const char *id, int64_t ms)
{
	celld.state_dir = "/nonexistent";
	struct sandbox *sb = sandbox_new(id);
	ck_assert_ptr_nonnull(sb);
	sb->created_ms = ms;
	struct cell_error err = {0};
	ck_assert_int_eq(sandbox_begin(sb, SBX_CREATING, &err), 0);
	registry_lock();
	ck_assert_int_eq(registry_publish_locked(sb), 0);
	registry_unlock();
	sandbox_end(sb, SBX_CREATING, SBX_RUNNING, NULL);
	return sb;
}

/* Every one but those whose id ends in the digit cls names. */
static bool not_ending_in(const struct sandbox *sb, void *cls)
{
	return sb->id[strlen(sb->id) - 1] != *(const char *)cls;
}

static void expect_page(struct sandbox_page *p, size_t total, const char *const *ids)
{
	ck_assert_uint_eq(p->total, total);
	size_t n = 0;
	while (ids[n])
		n++;
	ck_assert_uint_eq(p->n, n);
	for (size_t i = 0; i < n; i++)
		ck_assert_str_eq(p->v[i]->id, ids[i]);
	sandbox_page_free(p);
}

START_TEST(select_pages_matches_in_creation_order)
{
	/* Made out of order: s1 first, s5 last; s3 filtered out. */
	static const char *const ids[] = {"s4", "s1", "s3", "s5", "s2"};
	static const int64_t ms[] = {4000, 1000, 3000, 5000, 2000};
	struct sandbox *sb[5];
	for (int i = 0; i < 5; i++)
		sb[i] = published_at(ids[i], ms[i]);
	struct sandbox_page p;
	ck_assert_int_eq(sandbox_select(not_ending_in, "3", false, 0, 2, &p), 0);
	expect_page(&p, 4, (const char *const[]){"s1", "s2", NULL});
	ck_assert_int_eq(sandbox_select(not_ending_in, "3", false, 2, 2, &p), 0);
	expect_page(&p, 4, (const char *const[]){"s4", "s5", NULL});
	ck_assert_int_eq(sandbox_select(not_ending_in, "3", false, 4, 2, &p), 0);
	expect_page(&p, 4, (const char *const[]){NULL});
	ck_assert_int_eq(sandbox_select(not_ending_in, "3", true, 1, 10, &p), 0);
	expect_page(&p, 4, (const char *const[]){"s4", "s2", "s1", NULL});
	/* Every reference the pages took was given back: only the registry's and ours. */
	for (int i = 0; i < 5; i++) {
		registry_lock();
		unsigned refs = sb[i]->refs;
		registry_unlock();
		ck_assert_uint_eq(refs, 2);
		unpublish(sb[i]);
	}
}
END_TEST

START_TEST(transition_table)
{
	ck_assert(sandbox_may_follow(SBX_PENDING, SBX_RUNNING));
	ck_assert(sandbox_may_follow(SBX_PENDING, SBX_FAILED));
	ck_assert(sandbox_may_follow(SBX_RUNNING, SBX_PAUSED));
	ck_assert(sandbox_may_follow(SBX_RUNNING, SBX_FAILED));
	ck_assert(sandbox_may_follow(SBX_PAUSED, SBX_RUNNING));
	ck_assert(sandbox_may_follow(SBX_PAUSED, SBX_FAILED));
	ck_assert(sandbox_may_follow(SBX_FAILED, SBX_RUNNING));
	ck_assert(!sandbox_may_follow(SBX_PENDING, SBX_PAUSED));
	ck_assert(!sandbox_may_follow(SBX_FAILED, SBX_PAUSED));
	ck_assert(!sandbox_may_follow(SBX_RUNNING, SBX_PENDING));
	/* Stopped: from Running or Paused (stop); to Running (a cold start) or Failed. */
	ck_assert(sandbox_may_follow(SBX_RUNNING, SBX_STOPPED));
	ck_assert(sandbox_may_follow(SBX_PAUSED, SBX_STOPPED));
	ck_assert(sandbox_may_follow(SBX_STOPPED, SBX_RUNNING));
	ck_assert(sandbox_may_follow(SBX_STOPPED, SBX_FAILED));
	ck_assert(!sandbox_may_follow(SBX_PENDING, SBX_STOPPED));
	ck_assert(!sandbox_may_follow(SBX_FAILED, SBX_STOPPED));
	ck_assert(!sandbox_may_follow(SBX_STOPPED, SBX_PAUSED));
	ck_assert(!sandbox_may_follow(SBX_STOPPED, SBX_PENDING));
	for (int s = SBX_PENDING; s <= SBX_FAILED; s++)
		ck_assert(sandbox_may_follow((enum sbx_state)s, (enum sbx_state)s));
}
END_TEST

START_TEST(state_names)
{
	enum sbx_state s;
	ck_assert_str_eq(sandbox_state_name(SBX_FAILED), "Failed");
	ck_assert_int_eq(sandbox_state_parse("paused", &s), 0);
	ck_assert_int_eq(s, SBX_PAUSED);
	ck_assert_int_eq(sandbox_state_parse("Sleeping", &s), -EINVAL);
	ck_assert_int_eq(sandbox_state_parse(NULL, &s), -EINVAL);
}
END_TEST

/* ---- begin and end ---- */

START_TEST(operations_begin_only_from_their_states)
{
	char msg[CELL_ERROR_MSG_MAX];
	struct sandbox *sb = published(SBX_RUNNING);
	ck_assert_int_eq(begin(sb, SBX_RESUMING, msg, sizeof(msg)), -EALREADY);
	ck_assert_str_eq(msg, "sandbox 0123456789abcdef is already Running");
	ck_assert_int_eq(begin(sb, SBX_STARTING, msg, sizeof(msg)), -EALREADY);
	ck_assert_int_eq(begin(sb, SBX_CREATING, msg, sizeof(msg)), -EBUSY);
	ck_assert_int_eq(begin(sb, SBX_PAUSING, NULL, 0), 0);
	ck_assert_int_eq(sb->busy, SBX_PAUSING);
	sandbox_end(sb, SBX_PAUSING, SBX_PAUSED, NULL);
	ck_assert_int_eq(sb->busy, SBX_IDLE);
	ck_assert_int_eq(begin(sb, SBX_PAUSING, msg, sizeof(msg)), -EALREADY);
	ck_assert_str_eq(msg, "sandbox 0123456789abcdef is already Paused");
	ck_assert_int_eq(begin(sb, SBX_RECOVERING, msg, sizeof(msg)), -EBUSY);
	ck_assert_str_eq(msg, "sandbox 0123456789abcdef is Paused, not Running");
	ck_assert_int_eq(begin(sb, SBX_STARTING, msg, sizeof(msg)), -EBUSY);
	ck_assert_str_eq(msg, "sandbox 0123456789abcdef is Paused, not Failed or Stopped");
	/* A paused one stops; a stopped one stops no more, and starts. */
	ck_assert_int_eq(begin(sb, SBX_STOPPING, NULL, 0), 0);
	sandbox_end(sb, SBX_STOPPING, SBX_STOPPED, "on request");
	ck_assert_int_eq(begin(sb, SBX_STOPPING, msg, sizeof(msg)), -EALREADY);
	ck_assert_str_eq(msg, "sandbox 0123456789abcdef is already Stopped");
	ck_assert_int_eq(begin(sb, SBX_PAUSING, NULL, 0), -EBUSY);
	ck_assert_int_eq(begin(sb, SBX_RESUMING, NULL, 0), -EBUSY);
	ck_assert_int_eq(begin(sb, SBX_STARTING, NULL, 0), 0);
	sandbox_end(sb, SBX_STARTING, SBX_RUNNING, NULL);
	ck_assert_int_eq(sb->state, SBX_RUNNING);
	ck_assert_ptr_null(sb->reason);
	unpublish(sb);
}
END_TEST

/* activeSeconds: the Running spells only, each ended by a transition. */
START_TEST(active_seconds_add_up_running_spells)
{
	struct sandbox *sb = published(SBX_RUNNING);
	time_t now = time(NULL);
	sb->transition_at = now - 10; /* Running for 10 s */
	registry_lock();
	ck_assert_int_eq(sandbox_active_seconds_locked(sb, now), 10);
	registry_unlock();
	ck_assert_int_eq(begin(sb, SBX_PAUSING, NULL, 0), 0);
	sandbox_end(sb, SBX_PAUSING, SBX_PAUSED, NULL);
	registry_lock();
	int64_t kept = sandbox_active_seconds_locked(sb, now + 100); /* paused: no more */
	registry_unlock();
	ck_assert_int_ge(kept, 10);
	ck_assert_int_le(kept, 12);
	ck_assert_int_eq(sb->running_seconds, kept);
	unpublish(sb);
}
END_TEST

START_TEST(failed_starts_again_and_keeps_its_reason_until_then)
{
	struct sandbox *sb = published(SBX_FAILED);
	ck_assert_str_eq(sb->reason, "init died");
	ck_assert_int_eq(begin(sb, SBX_PAUSING, NULL, 0), -EBUSY);
	ck_assert_int_eq(begin(sb, SBX_RESUMING, NULL, 0), -EBUSY);
	/* A start that fails ends without a transition: Failed, the reason kept. */
	sb->transition_at = 1;
	ck_assert_int_eq(begin(sb, SBX_STARTING, NULL, 0), 0);
	sandbox_end(sb, SBX_STARTING, SBX_FAILED, NULL);
	ck_assert_str_eq(sb->reason, "init died");
	ck_assert_int_eq(sb->transition_at, 1);
	ck_assert_int_eq(begin(sb, SBX_STARTING, NULL, 0), 0);
	sandbox_end(sb, SBX_STARTING, SBX_RUNNING, NULL);
	ck_assert_int_eq(sb->state, SBX_RUNNING);
	ck_assert_ptr_null(sb->reason);
	ck_assert_int_gt(sb->transition_at, 1);
	unpublish(sb);
}
END_TEST

START_TEST(gone_and_unpublished)
{
	celld.state_dir = "/nonexistent";
	struct sandbox *sb = sandbox_new("fedcba9876543210");
	char msg[CELL_ERROR_MSG_MAX];
	/* Only a create or an adoption begins on an entry no one can see. */
	ck_assert_int_eq(begin(sb, SBX_DELETING, msg, sizeof(msg)), -ENOENT);
	ck_assert_str_eq(msg, "sandbox fedcba9876543210 not found");
	ck_assert_int_eq(begin(sb, SBX_ADOPTING, NULL, 0), 0);
	sandbox_end(sb, SBX_ADOPTING, SBX_FAILED, "uid range not reserved");
	ck_assert_int_eq(sb->state, SBX_FAILED);
	sandbox_unref(sb);
	sb = published(SBX_RUNNING);
	registry_lock();
	ck_assert(registry_remove_locked(sb));
	registry_unlock();
	sandbox_unref(sb); /* the table's */
	ck_assert_int_eq(begin(sb, SBX_PAUSING, NULL, 0), -ENOENT);
	sandbox_unref(sb);
}
END_TEST

struct waiter {
	struct sandbox *sb;
	enum sbx_op op;
	int result;
	int done; /* atomic */
};

static void *wait_begin(void *arg)
{
	struct waiter *w = arg;
	w->result = begin(w->sb, w->op, NULL, 0);
	__atomic_store_n(&w->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

static bool finished(struct waiter *w)
{
	return __atomic_load_n(&w->done, __ATOMIC_ACQUIRE);
}

START_TEST(an_operation_waits_for_the_one_before)
{
	struct sandbox *sb = published(SBX_RUNNING);
	ck_assert_int_eq(begin(sb, SBX_PAUSING, NULL, 0), 0);
	struct waiter w = {.sb = sb, .op = SBX_RESUMING};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, wait_begin, &w), 0);
	usleep(50 * 1000);
	ck_assert(!finished(&w)); /* still pausing: the resume waits */
	sandbox_end(sb, SBX_PAUSING, SBX_PAUSED, NULL);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.result, 0); /* then resumes the Paused sandbox */
	ck_assert_int_eq(sb->busy, SBX_RESUMING);
	sandbox_end(sb, SBX_RESUMING, SBX_RUNNING, NULL);
	unpublish(sb);
}
END_TEST

/* Every transition passes sandbox_end, which records it: an event of the sandbox and a
 * record of the audit log, the delete (the sandbox gone) in the audit log only. */
START_TEST(every_transition_recorded)
{
	char tmp[] = "/tmp/cell-test-sandbox-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(tmp));
	char path[256];
	snprintf(path, sizeof(path), "%s/sandboxes", tmp);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sandboxes/0123456789abcdef", tmp);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sandboxes", tmp);
	celld.sandboxes_fd = open(path, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(celld.sandboxes_fd, 0);
	snprintf(path, sizeof(path), "%s/audit", tmp);
	struct cell_error err = {0};
	ck_assert_int_eq(audit_open(path, 0, 0, &err), 0);

	struct sandbox *sb = published(SBX_PAUSED);
	ck_assert_int_eq(begin(sb, SBX_RESUMING, NULL, 0), 0);
	sandbox_end(sb, SBX_RESUMING, SBX_RUNNING, NULL);
	ck_assert_int_eq(begin(sb, SBX_DELETING, NULL, 0), 0);
	registry_lock();
	ck_assert(registry_remove_locked(sb));
	registry_unlock();
	sandbox_end(sb, SBX_DELETING, sb->state, NULL);
	sandbox_unref(sb); /* the table's */
	sandbox_unref(sb);

	struct events_cursor c;
	char *out = NULL;
	size_t len = 0;
	events_cursor_init(&c, celld.sandboxes_fd, "0123456789abcdef", 0);
	ck_assert_int_eq(events_cursor_read(&c, &out, &len), 3);
	events_cursor_close(&c);
	const char *a = strstr(out, "\"op\":\"create\",\"from\":\"Pending\",\"to\":\"Running\"");
	const char *b = strstr(out, "\"op\":\"pause\",\"from\":\"Running\",\"to\":\"Paused\"");
	const char *d = strstr(out, "\"op\":\"resume\",\"from\":\"Paused\",\"to\":\"Running\"");
	ck_assert_msg(a && b && d && a < b && b < d, "%s", out);
	free(out);
	json_t *recs = NULL;
	ck_assert_int_eq(audit_read(path, "0123456789abcdef", 0, 0, &recs, &err), 0);
	ck_assert_int_eq(json_array_size(recs), 4);
	static const char *const actions[] = {"create", "pause", "resume", "delete"};
	for (size_t i = 0; i < 4; i++) {
		json_t *r = json_array_get(recs, i);
		ck_assert_str_eq(json_string_value(json_object_get(r, "action")), actions[i]);
		ck_assert_str_eq(json_string_value(json_object_get(r, "who")), "celld");
	}
	ck_assert_str_eq(json_string_value(json_object_get(json_array_get(recs, 3), "to")),
			 "Deleted");
	json_decref(recs);

	audit_close();
	close(celld.sandboxes_fd);
	celld.sandboxes_fd = -1;
	char cmd[320];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmp);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(a_delete_in_flight_refuses_the_rest)
{
	struct sandbox *sb = published(SBX_FAILED);
	ck_assert_int_eq(begin(sb, SBX_DELETING, NULL, 0), 0);
	char msg[CELL_ERROR_MSG_MAX];
	ck_assert_int_eq(begin(sb, SBX_STARTING, msg, sizeof(msg)), -EBUSY);
	ck_assert_str_eq(msg, "sandbox 0123456789abcdef is being deleted");
	/* A second delete waits for the first, then finds the sandbox gone. */
	struct waiter w = {.sb = sb, .op = SBX_DELETING};
	pthread_t th;
	ck_assert_int_eq(pthread_create(&th, NULL, wait_begin, &w), 0);
	usleep(50 * 1000);
	ck_assert(!finished(&w));
	registry_lock();
	ck_assert(registry_remove_locked(sb));
	registry_unlock();
	sandbox_unref(sb); /* the table's */
	sandbox_end(sb, SBX_DELETING, SBX_FAILED, NULL);
	pthread_join(th, NULL);
	ck_assert_int_eq(w.result, -ENOENT);
	sandbox_unref(sb);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sandbox");
	TCase *tc = tcase_create("states");
	tcase_add_test(tc, transition_table);
	tcase_add_test(tc, select_pages_matches_in_creation_order);
	tcase_add_test(tc, active_seconds_add_up_running_spells);
	tcase_add_test(tc, state_names);
	tcase_add_test(tc, operations_begin_only_from_their_states);
	tcase_add_test(tc, failed_starts_again_and_keeps_its_reason_until_then);
	tcase_add_test(tc, gone_and_unpublished);
	tcase_add_test(tc, an_operation_waits_for_the_one_before);
	tcase_add_test(tc, a_delete_in_flight_refuses_the_rest);
	tcase_add_test(tc, every_transition_recorded);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
