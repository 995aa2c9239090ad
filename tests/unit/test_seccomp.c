/* seccomp profiles: strict validation (every error names the file and the field), the
 * shipped profiles compile, and the compiled filter decides exactly as the user-space
 * evaluation celld answers notifications with (checked by installing it in a child: no
 * root needed with no_new_privs). */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "cell/fsutil.h"
#include "cell/seccomp.h"
#include "unit.h"

static char *read_profile(const char *name)
{
	const char *src = getenv("CELL_TEST_SRC");
	char path[4096];
	snprintf(path, sizeof(path), "%s/policies/seccomp/%s.json", src ? src : ".", name);
	char *text = NULL;
	struct cell_error err = {0};
	ck_assert_msg(cell_read_file_at(AT_FDCWD, path, CELL_SECCOMP_FILE_MAX, &text, NULL, &err) ==
			  0,
		      "%s", err.msg);
	return text;
}

static struct cell_seccomp_profile *parse_ok(const char *name, const char *text)
{
	struct cell_seccomp_profile *p = NULL;
	struct cell_error err = {0};
	int r = cell_seccomp_profile_parse("t.json", name, text, strlen(text), &p, &err);
	ck_assert_msg(r == 0, "parse failed: %s", err.msg);
	return p;
}

START_TEST(shipped_profiles_compile)
{
	static const char *const names[] = {"default", "strict"};
	for (size_t i = 0; i < 2; i++) {
		char *text = read_profile(names[i]);
		struct cell_seccomp_profile *p = parse_ok(names[i], text);
		ck_assert_str_eq(cell_seccomp_profile_name(p), names[i]);
		for (int notify = 0; notify < 2; notify++) {
			struct cell_seccomp_prog prog;
			struct cell_error err = {0};
			ck_assert_msg(cell_seccomp_compile(p, notify, &prog, &err) == 0, "%s: %s",
				      names[i], err.msg);
			ck_assert_int_gt(prog.len, 10);
			ck_assert_int_le(prog.len, 4096);
			ck_assert(prog.notify == (bool)notify);
			cell_seccomp_prog_free(&prog);
		}
		cell_seccomp_profile_free(p);
		free(text);
	}
}
END_TEST

#define HEAD                                                                                       \
	"{\"name\":\"t\",\"description\":\"d\",\"defaultAction\":\"allow\","                       \
	"\"foreignAbi\":{\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\"},"
#define RULE(body) HEAD "\"rules\":[" body "]}"

struct bad_case {
	const char *text;
	const char *want; /* substring of the message */
};

static const struct bad_case bad_cases[] = {
    {HEAD "\"rules\":[], \"bogus\":1}", "t.json: (top level): unknown key 'bogus'"},
    {"{\"name\":\"t\"", "t.json: (file): line 1"},
    {"[]", "t.json: (top level): must be a JSON object"},
    {HEAD "\"rules\":[], \"name\":\"t\"}", "t.json: (file): line"},
    {"{\"name\":\"x\",\"description\":\"d\",\"defaultAction\":\"allow\",\"rules\":[]}",
     "t.json: name: 'x' differs from the file name 't'"},
    {"{\"name\":\"t\",\"description\":\"d\",\"defaultAction\":\"allow\",\"rules\":[]}",
     "t.json: foreignAbi: missing"},
    {"{\"name\":\"t\",\"description\":\"d\",\"defaultAction\":\"errno\",\"rules\":[]}",
     "t.json: defaultAction: 'errno': only \"allow\""},
    {HEAD "\"rules\":{}}", "t.json: rules: must be an array"},
    {RULE("{\"syscalls\":[\"mount\",\"nosuchcall\"],\"action\":\"errno\",\"errno\":\"EPERM\","
	  "\"why\":\"w\"}"),
     "t.json: rules[0].syscalls[1]: unknown syscall 'nosuchcall'"},
    {RULE("{\"syscalls\":[],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\"}"),
     "t.json: rules[0].syscalls: must be a non-empty array"},
    {RULE("{\"syscalls\":[\"mount\"],\"action\":\"kill\",\"errno\":\"EPERM\",\"why\":\"w\"}"),
     "t.json: rules[0].action: unknown action 'kill'"},
    {RULE("{\"syscalls\":[\"mount\"],\"action\":\"errno\",\"errno\":\"EBOGUS\",\"why\":\"w\"}"),
     "t.json: rules[0].errno: unknown errno 'EBOGUS'"},
    {RULE("{\"syscalls\":[\"mount\"],\"action\":\"errno\",\"errno\":\"EPERM\"}"),
     "t.json: rules[0].why: missing"},
    {RULE("{\"syscalls\":[\"mount\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"comment\":\"c\"}"),
     "t.json: rules[0]: unknown key 'comment'"},
    {RULE("{\"syscalls\":[\"mount\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\"},"
	  "{\"syscalls\":[\"bpf\",\"mount\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":"
	  "\"w\"}"),
     "t.json: rules[1].syscalls[1]: mount is already in rules[0]"},
    {RULE("{\"syscalls\":[\"clone\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"args\":[{\"index\":0,\"op\":\"gt\",\"value\":1}]}"),
     "t.json: rules[0].args[0].op: unknown op 'gt'"},
    {RULE("{\"syscalls\":[\"clone\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"args\":[{\"index\":6,\"op\":\"eq\",\"value\":1}]}"),
     "t.json: rules[0].args[0].index: must be an argument number 0-5"},
    {RULE("{\"syscalls\":[\"clone\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"args\":[{\"index\":0,\"op\":\"has_any\",\"value\":\"CLONE_NEWFOO\"}]}"),
     "t.json: rules[0].args[0].value: unknown name 'CLONE_NEWFOO'"},
    {RULE("{\"syscalls\":[\"clone\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"args\":[{\"index\":0,\"op\":\"eq\",\"value\":1},"
	  "{\"index\":0,\"op\":\"eq\",\"value\":2}]}"),
     "t.json: rules[0].args[1]: a second condition on argument 0"},
    {RULE("{\"syscalls\":[\"clone\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"args\":[{\"index\":0,\"op\":\"masked_eq\",\"mask\":1,\"value\":2}]}"),
     "t.json: rules[0].args[0].mask: value has bits outside the mask"},
    {RULE("{\"syscalls\":[\"socket\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"args\":[{\"index\":0,\"op\":\"in\",\"value\":1}]}"),
     "t.json: rules[0].args[0]: unknown key 'value'"},
    {RULE("{\"syscalls\":[\"socket\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"args\":[{\"index\":0,\"op\":\"not_in\",\"values\":[\"AF_INET|\"]}]}"),
     "t.json: rules[0].args[0].values[0]: ends with '|'"},
    {RULE("{\"syscalls\":[\"socket\"],\"action\":\"errno\",\"errno\":\"EPERM\",\"why\":\"w\","
	  "\"log\":\"yes\"}"),
     "t.json: rules[0].log: must be true or false"},
};

START_TEST(invalid_profiles_name_the_field)
{
	const struct bad_case *c = &bad_cases[_i];
	struct cell_seccomp_profile *p = NULL;
	struct cell_error err = {0};
	int r = cell_seccomp_profile_parse("t.json", "t", c->text, strlen(c->text), &p, &err);
	ck_assert_int_eq(r, -EINVAL);
	ck_assert_ptr_null(p);
	ck_assert_msg(strstr(err.msg, c->want), "case %d: got '%s', want '%s'", _i, err.msg,
		      c->want);
}
END_TEST

START_TEST(invalid_profile_names)
{
	ck_assert(cell_seccomp_name_valid("default"));
	ck_assert(cell_seccomp_name_valid("no-net_2"));
	ck_assert(!cell_seccomp_name_valid(""));
	ck_assert(!cell_seccomp_name_valid("-x"));
	ck_assert(!cell_seccomp_name_valid("../default"));
	ck_assert(!cell_seccomp_name_valid("Default"));
	ck_assert(!cell_seccomp_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa")); /* 33 */
}
END_TEST

#define HI32 0x100000000ull

static int eval(const struct cell_seccomp_profile *p, const char *sys, uint64_t a0, uint64_t a1)
{
	uint64_t args[6] = {a0, a1, 0, 0, 0, 0};
	int nr = -1;
	if (!strcmp(sys, "clone"))
		nr = SYS_clone;
	else if (!strcmp(sys, "clone3"))
		nr = SYS_clone3;
	else if (!strcmp(sys, "socket"))
		nr = SYS_socket;
	else if (!strcmp(sys, "personality"))
		nr = SYS_personality;
	else if (!strcmp(sys, "ioctl"))
		nr = SYS_ioctl;
	else if (!strcmp(sys, "keyctl"))
		nr = SYS_keyctl;
	else if (!strcmp(sys, "getpid"))
		nr = SYS_getpid;
	else if (!strcmp(sys, "unshare"))
		nr = SYS_unshare;
	ck_assert_int_ge(nr, 0);
	return cell_seccomp_profile_errno(p, AUDIT_ARCH_X86_64, nr, args);
}

START_TEST(default_profile_decisions)
{
	char *text = read_profile("default");
	struct cell_seccomp_profile *p = parse_ok("default", text);
	ck_assert_int_eq(eval(p, "keyctl", 0, 0), EPERM);
	ck_assert_int_eq(eval(p, "getpid", 0, 0), 0);
	ck_assert_int_eq(eval(p, "clone", 0x10000000 | SIGCHLD, 0), EPERM); /* NEWUSER */
	ck_assert_int_eq(eval(p, "clone", 0x003d0f00 | SIGCHLD, 0), 0);	    /* threads */
	ck_assert_int_eq(eval(p, "clone3", 0, 0), ENOSYS);
	ck_assert_int_eq(eval(p, "unshare", 0x00000080, 0), EPERM); /* NEWTIME */
	ck_assert_int_eq(eval(p, "unshare", 0x00000400, 0), 0);	    /* CLONE_FILES */
	ck_assert_int_eq(eval(p, "socket", 38, 0), EPERM);
	ck_assert_int_eq(eval(p, "socket", HI32 | 38, 0), EPERM); /* kernel reads an int */
	ck_assert_int_eq(eval(p, "socket", 40, 0), EPERM);
	ck_assert_int_eq(eval(p, "socket", 2, 0), 0);
	ck_assert_int_eq(eval(p, "ioctl", 0, 0x5412), EPERM);
	ck_assert_int_eq(eval(p, "ioctl", 0, HI32 | 0x5412), EPERM); /* CVE-2019-10063 */
	ck_assert_int_eq(eval(p, "ioctl", 0, 0x5401), 0);	     /* TCGETS */
	ck_assert_int_eq(eval(p, "personality", 0xffffffff, 0), 0);
	ck_assert_int_eq(eval(p, "personality", 0x0040000, 0), 0);
	ck_assert_int_eq(eval(p, "personality", 0x0400000, 0), EPERM);
	ck_assert_int_eq(eval(p, "personality", 6, 0), EPERM);
	uint64_t none[6] = {0};
	ck_assert_int_eq(cell_seccomp_profile_errno(p, AUDIT_ARCH_I386, 20, none), EPERM);
	ck_assert_int_eq(
	    cell_seccomp_profile_errno(p, AUDIT_ARCH_X86_64, 0x40000000 | SYS_getpid, none), EPERM);
	/* open_tree_attr (467) is newer than libseccomp 2.5: should the libseccomp this is
	 * built with name it, the default profile must list it with the mount family. */
	ck_assert_msg(cell_seccomp_profile_errno(p, AUDIT_ARCH_X86_64, 467, none) != 0,
		      "open_tree_attr is allowed: add it to the mount rule of default.json");
	cell_seccomp_profile_free(p);
	free(text);
}
END_TEST

/* ---- the compiled filter against the evaluation ---- */

/* Every errno of the profile becomes EACCES, which none of the probed calls can get from
 * the kernel itself: an EACCES then means "the filter denied it". */
static char *distinct_errnos(const char *text)
{
	size_t len = strlen(text);
	char *out = malloc(len * 2 + 1), *o = out;
	for (const char *s = text; *s;) {
		if (!strncmp(s, "\"EPERM\"", 7) || !strncmp(s, "\"ENOSYS\"", 8)) {
			o += sprintf(o, "\"EACCES\"");
			s += s[2] == 'P' ? 7 : 8;
		} else {
			*o++ = *s++;
		}
	}
	*o = '\0';
	return out;
}

struct probe {
	int nr;
	uint64_t a0, a1;
};

static long raw(const struct probe *pr)
{
	long r = syscall(pr->nr, pr->a0, pr->a1, 0, 0, 0, 0);
	if (r == 0 && (pr->nr == SYS_clone))
		_exit(0); /* a child the filter let through */
	if (r >= 0 && pr->nr == SYS_socket)
		close((int)r);
	if (r >= 0 && pr->nr == SYS_personality)
		syscall(SYS_personality, 0);
	return r;
}

static size_t make_probes(struct probe *v)
{
	size_t n = 0;
	for (uint64_t f = 0; f < 64; f++) {
		v[n++] = (struct probe){SYS_socket, f, 99 /* bad type: EINVAL if allowed */};
		v[n++] = (struct probe){SYS_socket, HI32 | f, 99};
	}
	static const uint64_t pers[] = {0,	    8,	      0x20000,	  0x20008,
					0x40000,    0x60008,  0x40008,	  6,
					0x400000,   0x100000, 0x80000000, 0xfffffffe,
					0x7fffffff, 0x200000, 0x40001,	  HI32 | 0x400000};
	for (size_t i = 0; i < sizeof(pers) / sizeof(pers[0]); i++)
		v[n++] = (struct probe){SYS_personality, pers[i], 0};
	static const uint64_t reqs[] = {0x5412, 0x541C, HI32 | 0x5412, 0x5401, 0x5423};
	for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++)
		v[n++] = (struct probe){SYS_ioctl, (uint64_t)-1, reqs[i]};
	static const uint64_t ns[] = {0x00020000, 0x02000000, 0x04000000, 0x08000000,
				      0x10000000, 0x20000000, 0x40000000, 0x00000080};
	for (size_t i = 0; i < sizeof(ns) / sizeof(ns[0]); i++) {
		v[n++] = (struct probe){SYS_unshare, ns[i] | 0x80000000 /* invalid */, 0};
		/* CLONE_SIGHAND without CLONE_VM: EINVAL should the filter let it pass. */
		v[n++] = (struct probe){SYS_clone, ns[i] | SIGCHLD | 0x800, 0};
	}
	v[n++] = (struct probe){SYS_clone3, 0, 0};
	v[n++] = (struct probe){SYS_keyctl, 9999, 0};
	v[n++] = (struct probe){467, (uint64_t)-1, 0};
	return n;
}

/* In a grandchild: install the filter, run every probe, report mismatches on a pipe. */
static void filter_agrees(const char *name)
{
	char *text = read_profile(name);
	char *t2 = distinct_errnos(text);
	struct cell_seccomp_profile *p = parse_ok(name, t2);
	struct cell_seccomp_prog prog;
	struct cell_error err = {0};
	ck_assert_msg(cell_seccomp_compile(p, false, &prog, &err) == 0, "%s", err.msg);
	struct probe probes[256];
	size_t n = make_probes(probes);
	int fds[2];
	ck_assert_int_eq(pipe(fds), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		struct sock_fprog fp = {.len = prog.len,
					.filter = (struct sock_filter *)prog.filter};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fp) < 0)
			_exit(2);
		for (size_t i = 0; i < n; i++) {
			uint64_t args[6] = {probes[i].a0, probes[i].a1};
			int want =
			    cell_seccomp_profile_errno(p, AUDIT_ARCH_X86_64, probes[i].nr, args);
			errno = 0;
			long r = raw(&probes[i]);
			bool denied = r < 0 && errno == EACCES;
			if (denied != (want == EACCES)) {
				char line[128];
				int len = snprintf(line, sizeof(line),
						   "nr %d a0 %#llx a1 %#llx: filter %s, eval %d\n",
						   probes[i].nr, (unsigned long long)probes[i].a0,
						   (unsigned long long)probes[i].a1,
						   denied ? "denied" : "allowed", want);
				if (write(fds[1], line, len) < 0)
					_exit(3);
			}
		}
		_exit(0);
	}
	close(fds[1]);
	char buf[8192];
	size_t got = 0;
	ssize_t k;
	while (got < sizeof(buf) - 1 && (k = read(fds[0], buf + got, sizeof(buf) - 1 - got)) > 0)
		got += (size_t)k;
	buf[got] = '\0';
	close(fds[0]);
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "probe child status %#x", st);
	ck_assert_msg(got == 0, "%s: filter and evaluation disagree:\n%s", name, buf);
	cell_seccomp_prog_free(&prog);
	cell_seccomp_profile_free(p);
	free(t2);
	free(text);
}

START_TEST(default_filter_matches_evaluation)
{
	filter_agrees("default");
}
END_TEST

START_TEST(strict_filter_matches_evaluation)
{
	filter_agrees("strict");
}
END_TEST

static Suite *seccomp_suite(void)
{
	Suite *s = suite_create("seccomp");
	TCase *tc = tcase_create("profiles");
	tcase_add_test(tc, shipped_profiles_compile);
	tcase_add_loop_test(tc, invalid_profiles_name_the_field, 0,
			    sizeof(bad_cases) / sizeof(bad_cases[0]));
	tcase_add_test(tc, invalid_profile_names);
	tcase_add_test(tc, default_profile_decisions);
	tcase_add_test(tc, default_filter_matches_evaluation);
	tcase_add_test(tc, strict_filter_matches_evaluation);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	return unit_run(seccomp_suite());
}
