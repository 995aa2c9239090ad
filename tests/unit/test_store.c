/* A sandbox's state record (src/celld/record.c, the format of state.json): every field
 * survives a round trip through its text, older records load with what they lack marked,
 * and a malformed record is refused with an error naming the field. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "record.h"
#include "uidrange.h"
#include "unit.h"

#define ID "0123456789abcdef"

/* Every member set to something other than its zero value. */
static void full_record(struct record *rec)
{
	memset(rec, 0, sizeof(*rec));
	snprintf(rec->id, sizeof(rec->id), "%s", ID);
	rec->state = SBX_PAUSED;
	rec->image = "busybox";
	rec->rootfs = "/var/lib/cell/images/busybox/rootfs";
	rec->session_key = "app-user-chat";
	rec->snapshot_id = "snap0123456789ab";
	rec->name = "web.1_a-b";
	rec->reason = "cell-init exited with status 1";
	rec->owner = "key:0011223344556677";
	rec->dir = "/var/lib/cell/sandboxes/" ID;
	rec->cgroup_rel = "cell/" ID;
	rec->metadata = json_pack("{s:s, s:s}", "team", "a", "ü", "ñ");
	rec->env = json_pack("{s:s}", "FOO", "bar baz");
	rec->entrypoint = json_pack("[s, s]", "sleep", "infinity");
	rec->resource_limits = json_pack("{s:s, s:s}", "cpu", "500m", "memory", "512Mi");
	rec->volumes =
	    json_pack("[{s:s, s:s, s:b}]", "name", "data", "mountPath", "/data", "readOnly", 1);
	rec->created_at = 1795000000;
	rec->created_ms = 1795000000123;
	rec->expires_at = 1795003600;
	rec->transition_at = 1795000100;
	rec->slot = 7;
	rec->uid_base = uidrange_base(7);
	rec->pid = 4242;
	rec->starttime = 123456789;
	rec->has_limits = true;
	rec->limits = (struct cell_limits){.cpu_millis = 500,
					   .memory_bytes = 512u << 20,
					   .pids = 1024,
					   .disk_bytes = 10ull << 30,
					   .socket_bytes = 64u << 20};
	rec->has_seccomp = true;
	snprintf(rec->seccomp_profile, sizeof(rec->seccomp_profile), "strict");
	rec->seccomp_log = true;
	rec->sudo = true;
	rec->manual_resume = true;
	rec->public_ports = true;
	rec->has_lifecycle = true;
	rec->timers = (struct sbx_timers){.idle_timeout = 300,
					  .stop_after = 3600,
					  .reclaim_after = 0,
					  .on_timeout = SBX_TIMEOUT_STOP};
	rec->active_at = 1700000100;
	rec->running_seconds = 4242;
	rec->provision = json_pack("{s:s, s:i}", "startupScript", "echo hi", "startupTimeout", 30);
	rec->provision_result = json_pack("{s:s, s:[]}", "reason", "StartupScriptFailed", "steps");
}

static void free_full(struct record *rec)
{
	json_decref(rec->metadata);
	json_decref(rec->env);
	json_decref(rec->entrypoint);
	json_decref(rec->resource_limits);
	json_decref(rec->volumes);
	json_decref(rec->provision);
	json_decref(rec->provision_result);
}

/* Encoded to text (as state.json is written) and parsed back (as it is read). */
static json_t *through_text(json_t *o)
{
	char *text = json_dumps(o, JSON_INDENT(2) | JSON_SORT_KEYS);
	ck_assert_ptr_nonnull(text);
	json_error_t jerr;
	json_t *back = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	ck_assert_msg(back, "%s", jerr.text);
	free(text);
	return back;
}

static void expect_str(const char *got, const char *want, const char *field)
{
	ck_assert_msg(got && !strcmp(got, want), "%s: '%s', want '%s'", field, got ? got : "NULL",
		      want);
}

static void expect_json(json_t *got, json_t *want, const char *field)
{
	ck_assert_msg(json_equal(got, want), "%s differs", field);
}

START_TEST(every_field_round_trips)
{
	struct record in, out;
	full_record(&in);
	json_t *o = record_encode(&in);
	ck_assert_ptr_nonnull(o);
	json_t *back = through_text(o);
	struct cell_error err = {0};
	ck_assert_int_eq(record_decode(back, ID, &out, &err), 0);
	expect_str(out.id, ID, "id");
	ck_assert_int_eq(out.state, SBX_PAUSED);
	expect_str(out.image, in.image, "image");
	expect_str(out.rootfs, in.rootfs, "rootfs");
	expect_str(out.session_key, in.session_key, "sessionKey");
	expect_str(out.snapshot_id, in.snapshot_id, "snapshotId");
	expect_str(out.name, in.name, "name");
	expect_str(out.reason, in.reason, "reason");
	expect_str(out.owner, in.owner, "owner");
	expect_json(out.metadata, in.metadata, "metadata");
	expect_json(out.env, in.env, "env");
	expect_json(out.entrypoint, in.entrypoint, "entrypoint");
	expect_json(out.resource_limits, in.resource_limits, "resourceLimits");
	expect_json(out.volumes, in.volumes, "volumes");
	expect_json(out.provision, in.provision, "provision");
	expect_json(out.provision_result, in.provision_result, "provisionResult");
	ck_assert_int_eq(out.created_at, in.created_at);
	ck_assert_int_eq(out.created_ms, in.created_ms);
	ck_assert_int_eq(out.expires_at, in.expires_at);
	ck_assert_int_eq(out.transition_at, in.transition_at);
	ck_assert_int_eq(out.slot, in.slot);
	ck_assert_uint_eq(out.uid_base, in.uid_base);
	ck_assert_int_eq(out.pid, in.pid);
	ck_assert_uint_eq(out.starttime, in.starttime);
	ck_assert(out.has_limits);
	ck_assert_mem_eq(&out.limits, &in.limits, sizeof(in.limits));
	ck_assert(out.has_seccomp);
	expect_str(out.seccomp_profile, "strict", "seccomp.profile");
	ck_assert(out.seccomp_log);
	ck_assert(out.sudo);
	ck_assert(out.manual_resume);
	ck_assert(out.public_ports);
	ck_assert(out.has_lifecycle);
	ck_assert_mem_eq(&out.timers, &in.timers, sizeof(in.timers));
	ck_assert_int_eq(out.active_at, in.active_at);
	ck_assert_int_eq(out.running_seconds, in.running_seconds);
	/* What is written for operators is there, but not read back. */
	expect_str(json_string_value(json_object_get(back, "dir")), in.dir, "dir");
	expect_str(json_string_value(json_object_get(back, "cgroupRel")), in.cgroup_rel,
		   "cgroupRel");
	ck_assert_ptr_null(out.dir);
	record_free(&out);
	json_decref(back);
	json_decref(o);
	free_full(&in);
}
END_TEST

START_TEST(every_state_round_trips)
{
	static const enum sbx_state states[] = {SBX_PENDING, SBX_RUNNING, SBX_PAUSED, SBX_STOPPED,
						SBX_FAILED};
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++) {
		struct record in, out;
		full_record(&in);
		in.state = states[i];
		json_t *o = record_encode(&in);
		struct cell_error err = {0};
		ck_assert_int_eq(record_decode(o, ID, &out, &err), 0);
		ck_assert_int_eq(out.state, states[i]);
		record_free(&out);
		json_decref(o);
		free_full(&in);
	}
}
END_TEST

START_TEST(empty_members_round_trip)
{
	struct record in = {0}, out;
	snprintf(in.id, sizeof(in.id), "%s", ID);
	in.state = SBX_RUNNING;
	in.image = "default";
	in.created_at = in.transition_at = 1795000000;
	in.uid_base = uidrange_base(0);
	json_t *o = record_encode(&in);
	json_t *back = through_text(o);
	struct cell_error err = {0};
	ck_assert_int_eq(record_decode(back, ID, &out, &err), 0);
	ck_assert_int_eq(out.expires_at, 0);		 /* never expires: null */
	ck_assert_int_eq(out.created_ms, 1795000000000); /* no createdAtMs: its second */
	ck_assert_ptr_null(out.session_key);
	ck_assert_ptr_null(out.snapshot_id);
	ck_assert_ptr_null(out.name);
	ck_assert_ptr_null(out.reason);
	ck_assert_ptr_null(out.metadata);
	ck_assert_ptr_null(out.entrypoint);
	ck_assert_ptr_null(out.volumes);
	ck_assert_ptr_null(out.provision); /* older than provisioning, or none asked */
	ck_assert_ptr_null(out.provision_result);
	/* A record older than limits, profiles and rootfs: marked as lacking them. */
	ck_assert(!out.has_limits);
	ck_assert(!out.has_seccomp);
	ck_assert(!out.has_lifecycle); /* nor timers: none run for it */
	ck_assert(!out.sudo);	       /* "sudo" is written only when true */
	ck_assert_ptr_null(json_object_get(o, "sudo"));
	ck_assert(!out.manual_resume && !out.public_ports); /* "access" likewise */
	ck_assert_ptr_null(json_object_get(o, "access"));
	ck_assert_str_eq(out.seccomp_profile, "");
	ck_assert_ptr_null(out.rootfs);
	record_free(&out);
	json_decref(back);
	json_decref(o);
}
END_TEST

/* A full record with key set to value (NULL: removed); value is stolen. */
static json_t *mutated(const char *key, json_t *value)
{
	struct record in;
	full_record(&in);
	json_t *o = record_encode(&in);
	free_full(&in);
	json_t *target = o;
	char path[64];
	snprintf(path, sizeof(path), "%s", key);
	char *dot = strchr(path, '.');
	if (dot) {
		*dot = '\0';
		target = json_object_get(o, path);
		key = dot + 1;
	}
	if (value)
		json_object_set_new(target, key, value);
	else
		json_object_del(target, key);
	return o;
}

/* A state.json as the celld before "access" wrote it (this record, full_record's, encoded
 * by it): it loads, every member as it was, and is written back under the new name; a bad
 * "e2b" of such a record is refused naming it. */
static const char older_record[] =
    "{\"cgroupRel\":\"cell/0123456789abcdef\",\"createdAt\":\"2026-11-18T11:06:40Z\",\"cre"
    "atedAtMs\":1795000000123,\"dir\":\"/var/lib/cell/sandboxes/0123456789abcdef\",\"e2"
    "b\":{\"manualResume\":true,\"publicPorts\":true},\"entrypoint\":[\"sleep\",\"infinity\""
    "],\"env\":{\"FOO\":\"bar baz\"},\"expiresAt\":\"2026-11-18T12:06:40Z\",\"id\":\"012345678"
    "9abcdef\",\"image\":\"busybox\",\"lastTransitionAt\":\"2026-11-18T11:08:20Z\",\"lifecy"
    "cle\":{\"idleTimeout\":300,\"lastActivityAt\":\"2023-11-14T22:15:00Z\",\"onTimeout\":"
    "\"stop\",\"reclaimAfter\":0,\"runningSeconds\":4242,\"stopAfter\":3600},\"limits\":{\"c"
    "puMillis\":500,\"diskBytes\":10737418240,\"memoryBytes\":536870912,\"pids\":1024,\"s"
    "ocketMemoryBytes\":67108864},\"metadata\":{\"team\":\"a\",\"ü\":\"ñ\"},\"owner\":\"key:001"
    "1223344556677\",\"pid\":4242,\"provision\":{\"startupScript\":\"echo hi\",\"startupTim"
    "eout\":30},\"provisionResult\":{\"reason\":\"StartupScriptFailed\",\"steps\":[]},\"rea"
    "son\":\"cell-init exited with status 1\",\"resourceLimits\":{\"cpu\":\"500m\",\"memory"
    "\":\"512Mi\"},\"rootfs\":\"/var/lib/cell/images/busybox/rootfs\",\"seccomp\":{\"log\":t"
    "rue,\"profile\":\"strict\"},\"sessionKey\":\"app-user-chat\",\"slot\":7,\"snapshotId\":\""
    "snap0123456789ab\",\"starttime\":123456789,\"state\":\"Paused\",\"sudo\":true,\"uidBas"
    "e\":1074200576,\"volumes\":[{\"mountPath\":\"/data\",\"name\":\"data\",\"readOnly\":true}"
    "]}";

START_TEST(a_record_of_an_older_celld_loads)
{
	json_error_t jerr;
	json_t *o = json_loads(older_record, JSON_REJECT_DUPLICATES, &jerr);
	ck_assert_msg(o, "%s", jerr.text);
	struct record out;
	struct cell_error err = {0};
	ck_assert_msg(record_decode(o, ID, &out, &err) == 0, "%s", err.msg);
	ck_assert(out.manual_resume && out.public_ports);
	struct record want;
	full_record(&want);
	want.name = NULL; /* names came later: an older record has none */
	json_t *a = record_encode(&out), *b = record_encode(&want);
	/* Where it lives is the loader's to say, not the record's (record_decode leaves them). */
	static const char *const derived[] = {"dir", "cgroupRel"};
	for (size_t i = 0; i < 2; i++) {
		json_object_del(a, derived[i]);
		json_object_del(b, derived[i]);
	}
	ck_assert_msg(json_equal(a, b), "the older record does not load as it was written");
	ck_assert_ptr_null(json_object_get(a, "e2b"));
	ck_assert(json_is_true(json_object_get(json_object_get(a, "access"), "publicPorts")));
	json_decref(a);
	json_decref(b);
	free_full(&want);
	record_free(&out);
	json_object_set_new(o, "e2b", json_pack("{s:s}", "manualResume", "yes"));
	ck_assert_int_eq(record_decode(o, ID, &out, &err), -EINVAL);
	ck_assert_msg(!strncmp(err.msg, "e2b", 3), "%s", err.msg);
	record_free(&out);
	json_decref(o);
}
END_TEST

START_TEST(malformed_records_name_the_field)
{
	const struct {
		const char *key;
		json_t *value;
		const char *named;
	} cases[] = {
	    {"id", json_string("fedcba9876543210"), "id"},
	    {"state", json_string("Sleeping"), "state"},
	    {"state", NULL, "state"},
	    {"slot", json_integer(16384), "slot"},
	    {"slot", json_string("7"), "slot"},
	    {"uidBase", json_integer(0), "uidBase"},
	    {"pid", json_integer(-1), "pid"},
	    {"starttime", json_null(), "starttime"},
	    {"createdAt", json_string("yesterday"), "createdAt"},
	    {"expiresAt", json_integer(5), "expiresAt"},
	    {"metadata", json_pack("{s:i}", "a", 1), "metadata"},
	    {"env", json_string("FOO=bar"), "env"},
	    {"entrypoint", json_pack("[i]", 1), "entrypoint"},
	    {"resourceLimits", json_pack("[s]", "cpu"), "resourceLimits"},
	    {"volumes", json_object(), "volumes"},
	    {"image", NULL, "image"},
	    {"rootfs", json_integer(1), "rootfs"},
	    {"sessionKey", json_true(), "sessionKey"},
	    {"snapshotId", json_integer(3), "snapshotId"},
	    {"name", json_integer(4), "name"},
	    {"limits", json_string("small"), "limits"},
	    {"limits.pids", json_string("many"), "limits.pids"},
	    {"limits.socketMemoryBytes", json_integer(-5), "limits.socketMemoryBytes"},
	    {"seccomp.profile", json_string("../etc"), "seccomp.profile"},
	    {"seccomp.log", json_string("yes"), "seccomp.log"},
	    {"sudo", json_string("true"), "sudo"},
	    {"access", json_string("public"), "access"},
	    {"access", json_pack("{s:s}", "manualResume", "yes"), "access"},
	    {"createdAtMs", json_integer(1795000001000), "createdAtMs"},
	    {"createdAtMs", json_string("123"), "createdAtMs"},
	    {"lifecycle", json_string("soon"), "lifecycle"},
	    {"lifecycle.idleTimeout", json_integer(-3), "lifecycle.idleTimeout"},
	    {"lifecycle.onTimeout", json_string("explode"), "lifecycle.onTimeout"},
	    {"lifecycle.lastActivityAt", json_string("now"), "lifecycle.lastActivityAt"},
	    {"provision", json_string("echo hi"), "provision"},
	    {"provisionResult", json_array(), "provisionResult"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		json_t *o = mutated(cases[i].key, cases[i].value);
		struct record out;
		struct cell_error err = {0};
		ck_assert_int_eq(record_decode(o, ID, &out, &err), -EINVAL);
		ck_assert_int_eq(err.code, EINVAL);
		ck_assert_msg(!strncmp(err.msg, cases[i].named, strlen(cases[i].named)),
			      "%s: the error '%s' does not name %s", cases[i].key, err.msg,
			      cases[i].named);
		record_free(&out);
		json_decref(o);
	}
}
END_TEST

START_TEST(not_an_object_refused)
{
	struct record out;
	struct cell_error err = {0};
	json_t *arr = json_array();
	ck_assert_int_eq(record_decode(arr, ID, &out, &err), -EINVAL);
	ck_assert_str_eq(err.msg, "not a JSON object");
	ck_assert_int_eq(record_decode(NULL, ID, &out, &err), -EINVAL);
	record_free(&out);
	json_decref(arr);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("store");
	TCase *tc = tcase_create("record");
	tcase_add_test(tc, every_field_round_trips);
	tcase_add_test(tc, every_state_round_trips);
	tcase_add_test(tc, empty_members_round_trip);
	tcase_add_test(tc, a_record_of_an_older_celld_loads);
	tcase_add_test(tc, malformed_records_name_the_field);
	tcase_add_test(tc, not_an_object_refused);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
