/* Unit tests of src/oci/spec.c: an OCI bundle's config.json, parsed and validated. */
#include <check.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "spec.h"
#include "unit.h"

/* The spec containerd 1.6 writes for `ctr run` (trimmed), with a few fields added. */
static const char *const ctr_spec =
    "{\"ociVersion\":\"1.0.2-dev\","
    "\"process\":{\"user\":{\"uid\":1000,\"gid\":1000,\"additionalGids\":[10,20],"
    "\"umask\":18},"
    "\"args\":[\"/bin/sh\",\"-c\",\"true\"],"
    "\"env\":[\"PATH=/usr/bin:/bin\",\"TERM=xterm\"],\"cwd\":\"/\","
    "\"capabilities\":{\"bounding\":[\"CAP_CHOWN\",\"CAP_KILL\",\"CAP_NOT_A_CAP\"],"
    "\"effective\":[\"CAP_CHOWN\"],\"permitted\":[\"CAP_CHOWN\",\"CAP_KILL\"]},"
    "\"rlimits\":[{\"type\":\"RLIMIT_NOFILE\",\"hard\":1024,\"soft\":512}],"
    "\"noNewPrivileges\":true,\"oomScoreAdj\":-500,\"apparmorProfile\":\"cri-default\","
    "\"consoleSize\":{\"height\":24,\"width\":80},\"terminal\":true},"
    "\"root\":{\"path\":\"rootfs\",\"readonly\":true},\"hostname\":\"box\","
    "\"mounts\":[{\"destination\":\"/proc\",\"type\":\"proc\",\"source\":\"proc\","
    "\"options\":[\"nosuid\",\"noexec\",\"nodev\"]},"
    "{\"destination\":\"/data\",\"type\":\"bind\",\"source\":\"/srv/data\","
    "\"options\":[\"rbind\",\"ro\"]}],"
    "\"hooks\":{\"createRuntime\":[{\"path\":\"/usr/bin/hook\",\"args\":[\"hook\",\"x\"],"
    "\"timeout\":5}],\"poststop\":[{\"path\":\"/bin/true\"}]},"
    "\"annotations\":{\"io.kubernetes.cri.container-type\":\"container\"},"
    "\"linux\":{\"namespaces\":[{\"type\":\"pid\"},{\"type\":\"ipc\"},{\"type\":\"uts\"},"
    "{\"type\":\"mount\"},{\"type\":\"network\",\"path\":\"/var/run/netns/pod\"}],"
    "\"devices\":[{\"type\":\"c\",\"path\":\"/dev/fuse\",\"major\":10,\"minor\":229,"
    "\"fileMode\":438}],"
    "\"cgroupsPath\":\"/default/box\","
    "\"resources\":{\"devices\":[{\"allow\":false,\"access\":\"rwm\"}],"
    "\"memory\":{\"limit\":536870912,\"swap\":-1},\"cpu\":{\"quota\":50000,\"period\":100000,"
    "\"shares\":512,\"cpus\":\"0-1\"},\"pids\":{\"limit\":100},"
    "\"unified\":{\"memory.high\":\"400M\"}},"
    "\"sysctl\":{\"net.ipv4.ip_forward\":\"1\"},"
    "\"seccomp\":{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"syscalls\":[]},"
    "\"maskedPaths\":[\"/proc/kcore\"],\"readonlyPaths\":[\"/proc/sys\"]},"
    "\"somethingNew\":{\"ignored\":true}}";

static struct oci_spec *parse_ok(const char *text)
{
	struct oci_spec *s = NULL;
	struct cell_error err = {0};
	int r = oci_spec_parse(text, strlen(text), &s, &err);
	ck_assert_msg(r == 0, "parse failed: %s", err.msg);
	return s;
}

/* The message a bad spec gets (the caller frees nothing). */
static const char *parse_bad(const char *text)
{
	static struct cell_error err;
	struct oci_spec *s = NULL;
	memset(&err, 0, sizeof(err));
	int r = oci_spec_parse(text, strlen(text), &s, &err);
	ck_assert_msg(r < 0, "accepted: %s", text);
	ck_assert_ptr_null(s);
	return err.msg;
}

START_TEST(ctr_spec_parsed)
{
	struct oci_spec *s = parse_ok(ctr_spec);
	ck_assert_str_eq(s->root_path, "rootfs");
	ck_assert(s->root_readonly);
	ck_assert(s->has_process);
	struct oci_process *p = &s->process;
	ck_assert_uint_eq(p->uid, 1000);
	ck_assert_uint_eq(p->n_additional_gids, 2);
	ck_assert_uint_eq(p->additional_gids[1], 20);
	ck_assert(p->has_umask);
	ck_assert_uint_eq(p->umask, 022);
	ck_assert_uint_eq(p->args.n, 3);
	ck_assert_str_eq(p->args.v[2], "true");
	ck_assert_ptr_null(p->args.v[3]);
	ck_assert_str_eq(p->env.v[1], "TERM=xterm");
	ck_assert(p->caps.given);
	ck_assert_uint_eq(p->caps.bounding, (1ull << 0) | (1ull << 5)); /* CHOWN, KILL */
	ck_assert_uint_eq(p->caps.effective, 1ull << 0);
	ck_assert_uint_eq(p->caps.ambient, 0);
	ck_assert_uint_eq(s->n_warnings, 1);
	ck_assert_ptr_nonnull(strstr(s->warnings[0], "CAP_NOT_A_CAP"));
	ck_assert_uint_eq(p->n_rlimits, 1);
	ck_assert_int_eq(p->rlimits[0].resource, RLIMIT_NOFILE);
	ck_assert_uint_eq(p->rlimits[0].soft, 512);
	ck_assert(p->no_new_privileges);
	ck_assert_int_eq(p->oom_score_adj, -500);
	ck_assert(p->terminal);
	ck_assert_uint_eq(p->rows, 24);
	ck_assert_str_eq(s->hostname, "box");
	ck_assert_uint_eq(s->n_mounts, 2);
	ck_assert_str_eq(s->mounts[1].source, "/srv/data");
	ck_assert_str_eq(s->mounts[1].options.v[1], "ro");
	ck_assert_uint_eq(s->n_hooks[OCI_HOOK_CREATE_RUNTIME], 1);
	ck_assert_int_eq(s->hooks[OCI_HOOK_CREATE_RUNTIME][0].timeout, 5);
	ck_assert_uint_eq(s->n_hooks[OCI_HOOK_POSTSTOP], 1);
	ck_assert_uint_eq(s->n_hooks[OCI_HOOK_PRESTART], 0);
	ck_assert_uint_eq(s->n_namespaces, 5);
	ck_assert_str_eq(oci_spec_namespace(s, CLONE_NEWNET)->path, "/var/run/netns/pod");
	ck_assert_ptr_null(oci_spec_namespace(s, CLONE_NEWPID)->path);
	ck_assert_ptr_null(oci_spec_namespace(s, CLONE_NEWUSER));
	ck_assert_uint_eq(s->n_devices, 1);
	ck_assert_int_eq(s->devices[0].minor, 229);
	ck_assert_str_eq(s->cgroups_path, "/default/box");
	struct oci_resources *res = &s->resources;
	ck_assert(res->has_memory_limit);
	ck_assert_int_eq(res->memory_limit, 536870912);
	ck_assert_int_eq(res->memory_swap, -1);
	ck_assert(!res->has_memory_reservation);
	ck_assert_int_eq(res->cpu_quota, 50000);
	ck_assert_uint_eq(res->cpu_period, 100000);
	ck_assert_str_eq(res->cpus, "0-1");
	ck_assert_int_eq(res->pids_limit, 100);
	ck_assert_uint_eq(res->n_devices, 1);
	ck_assert(!res->devices[0].allow);
	ck_assert_int_eq(res->devices[0].type, 'a');
	ck_assert_int_eq(res->devices[0].major, -1);
	ck_assert_str_eq(json_string_value(json_object_get(res->unified, "memory.high")), "400M");
	ck_assert_ptr_nonnull(s->sysctl);
	ck_assert_ptr_nonnull(s->seccomp);
	ck_assert_str_eq(s->masked_paths.v[0], "/proc/kcore");
	ck_assert_str_eq(s->readonly_paths.v[0], "/proc/sys");
	oci_spec_free(s);
}
END_TEST

START_TEST(minimal_spec)
{
	struct oci_spec *s = parse_ok("{\"ociVersion\":\"1.2.0\",\"root\":{\"path\":\"/r\"}}");
	ck_assert(!s->has_process);
	ck_assert_uint_eq(s->n_mounts, 0);
	ck_assert_ptr_null(s->seccomp);
	oci_spec_free(s);
}
END_TEST

/* Each bad spec is refused with a message naming the field. */
START_TEST(bad_specs_name_the_field)
{
	static const struct {
		const char *json, *needle;
	} cases[] = {
	    {"[]", "not a JSON object"},
	    {"{\"root\":{\"path\":\"r\"}}", "ociVersion: missing"},
	    {"{\"ociVersion\":\"2.0.0\",\"root\":{\"path\":\"r\"}}", "not a 1.x version"},
	    {"{\"ociVersion\":\"1.0.0\"}", "root: missing"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"\"}}", "root.path: empty"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\",\"readonly\":1}}",
	     "root.readonly: must be true or false"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"user\":{},"
	     "\"args\":[],\"cwd\":\"/\"}}",
	     "process.args: must name a program"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"user\":{},"
	     "\"args\":[\"a\",7],\"cwd\":\"/\"}}",
	     "process.args[1]: must be a string"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"user\":{},"
	     "\"args\":[\"a\"],\"cwd\":\"rel\"}}",
	     "process.cwd: 'rel' is not an absolute path"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"user\":{\"uid\":-"
	     "1},"
	     "\"args\":[\"a\"],\"cwd\":\"/\"}}",
	     "process.user.uid: -1 is out of range"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"user\":{},"
	     "\"args\":[\"a\"],\"cwd\":\"/\",\"env\":[\"NOEQUALS\"]}}",
	     "process.env[0]: 'NOEQUALS' is not NAME=VALUE"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"user\":{},"
	     "\"args\":[\"a\"],\"cwd\":\"/\",\"rlimits\":[{\"type\":\"RLIMIT_FOO\",\"soft\":1,"
	     "\"hard\":1}]}}",
	     "process.rlimits[0].type: unknown rlimit 'RLIMIT_FOO'"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"user\":{},"
	     "\"args\":[\"a\"],\"cwd\":\"/\",\"rlimits\":[{\"type\":\"RLIMIT_CORE\",\"soft\":2,"
	     "\"hard\":1}]}}",
	     "soft 2 is above hard 1"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"user\":{},"
	     "\"args\":[\"a\"],\"cwd\":\"/\",\"oomScoreAdj\":1001}}",
	     "process.oomScoreAdj: 1001 is out of range"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"process\":{\"args\":[\"a\"],"
	     "\"cwd\":\"/\"}}",
	     "process.user: missing"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"mounts\":[{\"destination\":"
	     "\"tmp\"}]}",
	     "mounts[0].destination: 'tmp' is not an absolute path"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"hooks\":{\"prestart\":[{"
	     "\"path\":\"/h\",\"timeout\":0}]}}",
	     "hooks.prestart[0].timeout: 0 is out of range"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"namespaces\":["
	     "{\"type\":\"pid\"},{\"type\":\"pid\"}]}}",
	     "linux.namespaces[1].type: pid given twice"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"namespaces\":["
	     "{\"type\":\"bogus\"}]}}",
	     "unknown namespace type 'bogus'"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"uidMappings\":["
	     "{\"containerID\":0,\"hostID\":1000,\"size\":1}]}}",
	     "without a user namespace"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"namespaces\":["
	     "{\"type\":\"user\"}],\"uidMappings\":[{\"containerID\":0,\"hostID\":1,\"size\":0}]}}",
	     "linux.uidMappings[0]: an empty range"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"devices\":[{"
	     "\"type\":\"c\",\"path\":\"/dev/x\"}]}}",
	     "linux.devices[0]: a c device needs major and minor"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"resources\":{"
	     "\"devices\":[{\"allow\":true,\"access\":\"rwx\"}]}}}",
	     "linux.resources.devices[0].access: 'rwx' is not made of r, w, m"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"resources\":{"
	     "\"memory\":{\"limit\":\"1G\"}}}}",
	     "linux.resources.memory.limit: must be an integer"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"sysctl\":{"
	     "\"a\":1}}}",
	     "linux.sysctl.a: must be a string"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"seccomp\":{}}}",
	     "linux.seccomp.defaultAction: must be a string"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"linux\":{\"maskedPaths\":["
	     "\"proc/kcore\"]}}",
	     "linux.maskedPaths[0]: 'proc/kcore' is not an absolute path"},
	    {"{\"ociVersion\":\"1.0.0\",\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"}}",
	     "duplicate"},
	    {"{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\"},\"hostname\":"
	     "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}",
	     "hostname: longer than 64 bytes"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *msg = parse_bad(cases[i].json);
		ck_assert_msg(strstr(msg, cases[i].needle), "case %zu: '%s' lacks '%s'", i, msg,
			      cases[i].needle);
	}
}
END_TEST

START_TEST(nul_in_string_refused)
{
	static const char text[] = "{\"ociVersion\":\"1.0.0\",\"root\":{\"path\":\"r\\u0000x\"}}";
	const char *msg = parse_bad(text);
	ck_assert_msg(strstr(msg, "config.json: line 1") && strstr(msg, "\\u0000"), "%s", msg);
}
END_TEST

START_TEST(too_large_refused)
{
	size_t len = OCI_SPEC_FILE_MAX + 1;
	char *big = malloc(len + 1);
	memset(big, ' ', len);
	big[len] = '\0';
	struct oci_spec *s = NULL;
	struct cell_error err = {0};
	ck_assert_int_lt(oci_spec_parse(big, len, &s, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "larger than"));
	free(big);
}
END_TEST

/* exec --process FILE: the same rules as config.json's process. */
START_TEST(process_json)
{
	static const char text[] =
	    "{\"terminal\":false,\"user\":{\"uid\":0,\"gid\":0},"
	    "\"args\":[\"/bin/echo\",\"hi\"],\"env\":[\"A=b\"],"
	    "\"cwd\":\"/tmp\",\"capabilities\":{\"bounding\":[\"CAP_KILL\"]}}";
	struct oci_process p;
	struct cell_error err = {0};
	ck_assert_int_eq(oci_process_parse(text, strlen(text), &p, NULL, &err), 0);
	ck_assert_str_eq(p.args.v[1], "hi");
	ck_assert_str_eq(p.cwd, "/tmp");
	ck_assert_uint_eq(p.caps.bounding, 1ull << 5);
	oci_process_clear(&p);
	static const char bad[] = "{\"user\":{},\"args\":[\"x\"]}";
	ck_assert_int_lt(oci_process_parse(bad, strlen(bad), &p, NULL, &err), 0);
	ck_assert_ptr_nonnull(strstr(err.msg, "process.cwd: missing"));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("oci_spec");
	TCase *tc = tcase_create("spec");
	tcase_add_test(tc, ctr_spec_parsed);
	tcase_add_test(tc, minimal_spec);
	tcase_add_test(tc, bad_specs_name_the_field);
	tcase_add_test(tc, nul_in_string_refused);
	tcase_add_test(tc, too_large_refused);
	tcase_add_test(tc, process_json);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
