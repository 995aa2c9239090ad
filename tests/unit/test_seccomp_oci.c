/* Unit tests of src/runtime/seccomp_oci.c: an OCI spec's seccomp profile, compiled and
 * installed in a forked child that then tries calls. */
#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <linux/filter.h>
#include <linux/seccomp.h>

#include "cell/seccomp.h"
#include "unit.h"

/* An allowlist in the shape of the default profiles engines write: everything the child
 * below needs, a rule with its own errno, argument conditions (two on one argument) and
 * a name no libseccomp knows. */
static const char *const allowlist =
    "{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":1,"
    "\"architectures\":[\"SCMP_ARCH_X86_64\",\"SCMP_ARCH_X86\",\"SCMP_ARCH_X32\"],"
    "\"flags\":[\"SECCOMP_FILTER_FLAG_SPEC_ALLOW\"],"
    "\"syscalls\":["
    "{\"names\":[\"exit\",\"exit_group\",\"getpid\",\"write\",\"rt_sigreturn\","
    "\"brk\",\"mmap\",\"munmap\",\"no_such_call_ever\"],\"action\":\"SCMP_ACT_ALLOW\"},"
    "{\"names\":[\"getppid\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":38},"
    "{\"names\":[\"personality\"],\"action\":\"SCMP_ACT_ALLOW\",\"args\":["
    "{\"index\":0,\"value\":0,\"op\":\"SCMP_CMP_EQ\"},"
    "{\"index\":0,\"value\":8,\"op\":\"SCMP_CMP_EQ\"}]},"
    "{\"names\":[\"getuid\"],\"action\":\"SCMP_ACT_ERRNO\"}"
    "]}";

static struct cell_seccomp_prog compile_ok(const char *text, struct cell_seccomp_oci_report *rep)
{
	json_error_t je;
	json_t *p = json_loads(text, 0, &je);
	ck_assert_msg(p, "test profile: %s", je.text);
	struct cell_seccomp_prog prog;
	struct cell_error err = {0};
	int r = cell_seccomp_compile_oci(p, &prog, rep, &err);
	ck_assert_msg(r == 0, "compile: %s", err.msg);
	json_decref(p);
	return prog;
}

static const char *compile_bad(const char *text)
{
	static struct cell_error err;
	memset(&err, 0, sizeof(err));
	json_t *p = json_loads(text, 0, NULL);
	ck_assert(p);
	struct cell_seccomp_prog prog;
	ck_assert_int_lt(cell_seccomp_compile_oci(p, &prog, NULL, &err), 0);
	ck_assert_ptr_null(prog.filter);
	json_decref(p);
	return err.msg;
}

/* In a child: install prog, make the call, exit with 0 when it succeeded, else its errno. */
static int errno_under(const struct cell_seccomp_prog *prog, long nr, long a0)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		struct sock_fprog f = {.len = prog->len,
				       .filter = (struct sock_filter *)prog->filter};
		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &f) < 0)
			_exit(200);
		long r = syscall(nr, a0, 0, 0);
		_exit(r < 0 ? (errno & 0xff) : 0);
	}
	int st;
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st), "child ended by signal %d", WTERMSIG(st));
	ck_assert_int_ne(WEXITSTATUS(st), 200);
	return WEXITSTATUS(st);
}

START_TEST(allowlist_enforced)
{
	struct cell_seccomp_oci_report rep;
	struct cell_seccomp_prog prog = compile_ok(allowlist, &rep);
	ck_assert_uint_eq(rep.unknown_syscalls, 1);
	ck_assert_str_eq(rep.first_unknown, "no_such_call_ever");
	ck_assert_uint_eq(rep.ignored_flags, 1);
	ck_assert_int_eq(errno_under(&prog, SYS_getpid, 0), 0);
	/* Not listed: the default errno. */
	ck_assert_int_eq(errno_under(&prog, SYS_getcwd, 0), EPERM);
	/* Its own errnoRet; and a rule without one takes defaultErrnoRet. */
	ck_assert_int_eq(errno_under(&prog, SYS_getppid, 0), ENOSYS);
	ck_assert_int_eq(errno_under(&prog, SYS_getuid, 0), EPERM);
	/* Two conditions on one argument: either value passes, a third does not. */
	ck_assert_int_eq(errno_under(&prog, SYS_personality, 0xffffffff), EPERM);
	ck_assert_int_eq(errno_under(&prog, SYS_personality, 8), 0);
	ck_assert_int_eq(errno_under(&prog, SYS_personality, 0), 0);
	ck_assert_int_eq(errno_under(&prog, SYS_personality, PER_BSD), EPERM);
	cell_seccomp_prog_free(&prog);
}
END_TEST

/* A denylist over allow, with a masked comparison. */
START_TEST(denylist_with_masked_eq)
{
	struct cell_seccomp_prog prog = compile_ok(
	    "{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":["
	    "{\"names\":[\"getppid\"],\"action\":\"SCMP_ACT_ERRNO\",\"errnoRet\":13},"
	    "{\"names\":[\"getpid\"],\"action\":\"SCMP_ACT_ALLOW\"},"
	    "{\"names\":[\"umask\"],\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":0,"
	    "\"value\":2,\"valueTwo\":2,\"op\":\"SCMP_CMP_MASKED_EQ\"}]}]}",
	    NULL);
	ck_assert_int_eq(errno_under(&prog, SYS_getppid, 0), EACCES);
	ck_assert_int_eq(errno_under(&prog, SYS_getpid, 0), 0);
	ck_assert_int_eq(errno_under(&prog, SYS_umask, 022), EPERM);
	ck_assert_int_eq(errno_under(&prog, SYS_umask, 01), 0);
	cell_seccomp_prog_free(&prog);
}
END_TEST

START_TEST(bad_profiles_name_the_field)
{
	static const struct {
		const char *json, *needle;
	} cases[] = {
	    {"{}", "linux.seccomp.defaultAction: must be a string"},
	    {"{\"defaultAction\":\"SCMP_ACT_NOPE\"}", "unknown action 'SCMP_ACT_NOPE'"},
	    {"{\"defaultAction\":\"SCMP_ACT_NOTIFY\"}", "needs a seccomp agent"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"listenerPath\":\"/run/agent.sock\"}",
	     "listenerPath: a seccomp agent is not supported"},
	    {"{\"defaultAction\":\"SCMP_ACT_ERRNO\",\"defaultErrnoRet\":5000}",
	     "defaultErrnoRet must be an errno"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"architectures\":[\"SCMP_ARCH_VAX\"]}",
	     "architectures[0]: unknown architecture 'SCMP_ARCH_VAX'"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"flags\":[\"SECCOMP_FILTER_FLAG_NOPE\"]}",
	     "flags[0]: unknown flag"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":\"getpid\","
	     "\"action\":\"SCMP_ACT_ERRNO\"}]}",
	     "syscalls[0]: names must be an array"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"getpid\"]}]}",
	     "syscalls[0]: action must be a string"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"getpid\"],"
	     "\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":6,\"value\":1,"
	     "\"op\":\"SCMP_CMP_EQ\"}]}]}",
	     "syscalls[0].args[0]: needs an index from 0 to 5"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"getpid\"],"
	     "\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":0,\"value\":1,"
	     "\"op\":\"SCMP_CMP_ABOUT\"}]}]}",
	     "syscalls[0].args[0]: unknown op 'SCMP_CMP_ABOUT'"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[\"getpid\"],"
	     "\"action\":\"SCMP_ACT_ERRNO\",\"args\":[{\"index\":0,\"value\":-1,"
	     "\"op\":\"SCMP_CMP_EQ\"}]}]}",
	     "value and valueTwo must be unsigned integers"},
	    {"{\"defaultAction\":\"SCMP_ACT_ALLOW\",\"syscalls\":[{\"names\":[7],"
	     "\"action\":\"SCMP_ACT_ERRNO\"}]}",
	     "syscalls[0].names[0]: must be a syscall name"},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *msg = compile_bad(cases[i].json);
		ck_assert_msg(strstr(msg, cases[i].needle), "case %zu: '%s' lacks '%s'", i, msg,
			      cases[i].needle);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("seccomp_oci");
	TCase *tc = tcase_create("compile");
	tcase_add_test(tc, allowlist_enforced);
	tcase_add_test(tc, denylist_with_masked_eq);
	tcase_add_test(tc, bad_profiles_name_the_field);
	suite_add_tcase(s, tc);
	return unit_run(s);
}
