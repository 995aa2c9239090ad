/* seccomp profiles in real sandboxes: the static helper seccomp_probe (built next to this
 * suite, copied in through the files API) makes one call of each denied class and some
 * allowed ones; the answers must be what the profile says. With cell.seccompLog the same
 * denials must also be recorded by celld, which proves the filter gave them (not a
 * missing capability). */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

struct expect {
	const char *check;
	const char *dflt;    /* answer under default ("*": whatever the kernel says) */
	const char *strict;  /* answer under strict */
	const char *syscall; /* name celld records when the filter denied it (NULL: not logged) */
};

static const struct expect table[] = {
    {"keyctl", "EPERM", "EPERM", "keyctl"},
    {"add_key", "EPERM", "EPERM", "add_key"},
    {"request_key", "EPERM", "EPERM", "request_key"},
    {"bpf", "EPERM", "EPERM", "bpf"},
    {"perf_event_open", "EPERM", "EPERM", "perf_event_open"},
    {"userfaultfd", "EPERM", "EPERM", "userfaultfd"},
    {"io_uring_setup", "EPERM", "EPERM", "io_uring_setup"},
    {"kexec_load", "EPERM", "EPERM", "kexec_load"},
    {"open_by_handle_at", "EPERM", "EPERM", "open_by_handle_at"},
    {"name_to_handle_at", "EPERM", "EPERM", "name_to_handle_at"},
    {"finit_module", "EPERM", "EPERM", "finit_module"},
    {"delete_module", "EPERM", "EPERM", "delete_module"},
    {"mount", "EPERM", "EPERM", "mount"},
    {"umount2", "EPERM", "EPERM", "umount2"},
    {"pivot_root", "EPERM", "EPERM", "pivot_root"},
    {"fsopen", "EPERM", "EPERM", "fsopen"},
    {"fsmount", "EPERM", "EPERM", "fsmount"},
    {"open_tree", "EPERM", "EPERM", "open_tree"},
    {"move_mount", "EPERM", "EPERM", "move_mount"},
    {"mount_setattr", "EPERM", "EPERM", "mount_setattr"},
    {"setns", "EPERM", "EPERM", "setns"},
    {"unshare_user", "EPERM", "EPERM", "unshare"},
    {"unshare_net_high", "EPERM", "EPERM", "unshare"},
    {"unshare_files", "ok", "EPERM", NULL},
    {"clone_newuser", "EPERM", "EPERM", "clone"},
    {"clone_newns", "EPERM", "EPERM", "clone"},
    {"clone_plain", "ok", "ok", NULL},
    {"clone3", "ENOSYS", "ENOSYS", NULL}, /* "log": false */
    {"fork", "ok", "ok", NULL},
    {"swapon", "EPERM", "EPERM", "swapon"},
    {"swapoff", "EPERM", "EPERM", "swapoff"},
    {"reboot", "EPERM", "EPERM", "reboot"},
    {"settimeofday", "EPERM", "EPERM", "settimeofday"},
    {"clock_settime", "EPERM", "EPERM", "clock_settime"},
    {"iopl", "EPERM", "EPERM", "iopl"},
    {"ioperm", "EPERM", "EPERM", "ioperm"},
    {"syslog", "EPERM", "EPERM", "syslog"},
    {"acct", "EPERM", "EPERM", "acct"},
    {"quotactl", "EPERM", "EPERM", "quotactl"},
    {"personality_rie", "EPERM", "EPERM", "personality"},
    {"personality_bsd", "EPERM", "EPERM", "personality"},
    {"personality_query", "ok", "EPERM", NULL},
    {"personality_norandom", "ok", "EPERM", NULL},
    {"tiocsti", "EPERM", "EPERM", "ioctl"},
    {"tiocsti_high", "EPERM", "EPERM", "ioctl"},
    {"tioclinux", "EPERM", "EPERM", "ioctl"},
    {"af_alg", "EPERM", "EPERM", "socket"},
    {"af_alg_high", "EPERM", "EPERM", "socket"},
    {"af_vsock", "EPERM", "EPERM", "socket"},
    {"af_inet", "ok", "ok", NULL},
    {"af_unix", "ok", "ok", NULL},
    {"af_packet", "*", "EPERM", NULL},
    {"i386_getpid", "EPERM", "EPERM", "getpid"},
    {"x32_getpid", "EPERM", "EPERM", "getpid"},
    {"open_tree_attr", "ENOSYS", "ENOSYS", "#467"},
    {"process_vm_readv", "ok", "EPERM", NULL},
    {"ptrace_peek", "*", "EPERM", NULL},
};

/* Copy the probe in and run it: {"<check>": "<answer>"}. */
static json_t *run_probe(const char *id)
{
	h_upload_helper(id, "seccomp_probe");
	return h_sh_pairs(id, "/root/seccomp_probe");
}

/* Whether this kernel runs i386 code at all (int 0x80 from a 64-bit process): without ia32
 * emulation the probe's call dies with SIGSEGV before any filter sees it. */
static bool host_has_ia32(void)
{
#if defined(__x86_64__)
	pid_t pid = fork();
	if (pid == 0) {
		long ret;
		__asm__ volatile("int $0x80"
				 : "=a"(ret)
				 : "a"(20L)
				 : "memory", "r8", "r9", "r10", "r11");
		_exit(ret == getpid() ? 0 : 1);
	}
	int st;
	return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
#else
	return false;
#endif
}

static void check_answers(json_t *res, bool strict)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		const char *want = strict ? table[i].strict : table[i].dflt;
		if (!strcmp(table[i].check, "i386_getpid") && !host_has_ia32())
			want = "no-ia32";
		const char *got = json_string_value(json_object_get(res, table[i].check));
		ck_assert_msg(got, "probe gave no answer for %s", table[i].check);
		if (strcmp(want, "*"))
			ck_assert_msg(!strcmp(got, want), "%s under %s: %s, want %s",
				      table[i].check, strict ? "strict" : "default", got, want);
	}
}

static json_t *seccomp_ext(const char *profile, const char *log)
{
	json_t *ext = json_object();
	if (profile)
		json_object_set_new(ext, "cell.seccomp", json_string(profile));
	if (log)
		json_object_set_new(ext, "cell.seccompLog", json_string(log));
	return json_pack("{s:o}", "extensions", ext);
}

START_TEST(default_denies_each_class)
{
	char *id = h_create("busybox", NULL);
	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(ins, "seccomp.profile"), "default");
	ck_assert(json_is_false(h_jget(ins, "seccomp.log")));
	json_decref(ins);
	json_t *res = run_probe(id);
	check_answers(res, false);
	json_decref(res);
	free(id);
}
END_TEST

START_TEST(strict_denies_more)
{
	json_t *extra = seccomp_ext("strict", NULL);
	char *id = h_create("busybox", extra);
	json_decref(extra);
	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(ins, "seccomp.profile"), "strict");
	json_decref(ins);
	json_t *res = run_probe(id);
	check_answers(res, true);
	json_decref(res);
	/* Ordinary work still runs under strict. */
	char *out = h_sh(id, "echo hi | sort && ls / >/dev/null && echo done");
	ck_assert_str_eq(h_trim(out), "hi\ndone");
	free(out);
	free(id);
}
END_TEST

START_TEST(unknown_profile_is_400)
{
	static const char *const bad[][2] = {
	    {"nosuch", NULL}, {"../default", NULL}, {"", NULL}, {NULL, "yes"}};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		json_t *extra = seccomp_ext(bad[i][0], bad[i][1]);
		struct h_resp r;
		long st = h_create_ex("busybox", extra, H_UNIX, &r);
		json_decref(extra);
		ck_assert_msg(st == 400, "case %zu: HTTP %ld", i, st);
		ck_assert_str_eq(h_err_code(&r), "INVALID_ARGUMENT");
		const char *msg = h_jstr(r.json, "message");
		ck_assert_msg(strstr(msg, bad[i][0] ? "extensions.cell.seccomp"
						    : "extensions.cell.seccompLog"),
			      "case %zu: message '%s'", i, msg);
		h_resp_free(&r);
	}
	ck_assert_int_eq(h_sandbox_count(), 0);
}
END_TEST

static bool recorded(json_t *recent, const char *syscall, const char *arch)
{
	size_t i;
	json_t *d;
	json_array_foreach(recent, i,
			   d) if (!strcmp(h_jstr(d, "syscall"), syscall) &&
				  (!arch || !strcmp(h_jstr(d, "arch"), arch))) return true;
	return false;
}

START_TEST(log_records_denied_calls)
{
	json_t *extra = seccomp_ext(NULL, "true");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	/* Logged or not, the answers are the same: celld answers with the rule's errno. */
	json_t *res = run_probe(id);
	check_answers(res, false);
	json_decref(res);
	json_t *ins = h_inspect(id);
	json_t *sc = h_jget(ins, "seccomp");
	ck_assert_str_eq(h_jstr(sc, "profile"), "default");
	ck_assert(json_is_true(h_jget(sc, "log")));
	ck_assert(json_is_true(h_jget(sc, "listening")));
	json_t *recent = h_jget(sc, "recent");
	size_t logged = 0;
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (!table[i].syscall ||
		    (!strcmp(table[i].check, "i386_getpid") && !host_has_ia32()))
			continue;
		logged++;
		ck_assert_msg(recorded(recent, table[i].syscall, NULL),
			      "%s: no denial of %s recorded: %s", table[i].check, table[i].syscall,
			      h_celld_log_tail());
	}
	ck_assert_msg(h_jint(sc, "denied") >= (long long)logged, "denied %lld < %zu",
		      h_jint(sc, "denied"), logged);
	/* Foreign ABIs are recorded with theirs; clone3 ("log": false) is not recorded. */
	if (host_has_ia32())
		ck_assert(recorded(recent, "getpid", "x86"));
	ck_assert(recorded(recent, "getpid", "x32"));
	ck_assert(!recorded(recent, "clone3", NULL));
	json_decref(ins);
	free(id);
}
END_TEST

/* The listener lives only in celld: once it is gone, the kernel fails the calls the filter
 * would have notified with ENOSYS. They stay denied; only the record and the errno change. */
START_TEST(log_after_celld_restart_is_enosys)
{
	json_t *extra = seccomp_ext(NULL, "true");
	char *id = h_create("busybox", extra);
	json_decref(extra);
	json_t *res = run_probe(id);
	ck_assert_str_eq(json_string_value(json_object_get(res, "keyctl")), "EPERM");
	json_decref(res);
	h_celld_kill();
	h_celld_start();
	ck_assert_str_eq(h_wait_state(id, "Running", 30), "Running");
	char *out = h_sh(id, "/root/seccomp_probe keyctl mount clone3 af_inet");
	ck_assert_str_eq(h_trim(out), "keyctl ENOSYS\nmount ENOSYS\nclone3 ENOSYS\naf_inet ok");
	free(out);
	json_t *ins = h_inspect(id);
	ck_assert(json_is_true(h_jget(ins, "seccomp.log")));
	ck_assert(json_is_false(h_jget(ins, "seccomp.listening")));
	ck_assert_int_eq(h_jint(ins, "seccomp.denied"), 0);
	json_decref(ins);
	free(id);
}
END_TEST

START_TEST(cli_seccomp_options)
{
	struct h_proc p;
	char *argv[] = {h_fmt("%s/cell", H.bin),
			"--socket",
			H.socket,
			"create",
			"--image",
			"busybox",
			"--seccomp",
			"strict",
			"--seccomp-log",
			NULL};
	ck_assert_int_eq(h_run(argv, NULL, 60, &p), 0);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);
	json_t *ins = h_inspect(id);
	ck_assert_str_eq(h_jstr(ins, "seccomp.profile"), "strict");
	ck_assert(json_is_true(h_jget(ins, "seccomp.log")));
	json_decref(ins);
	char *bad[] = {argv[0],	  "--socket",  H.socket, "create", "--image",
		       "busybox", "--seccomp", "nosuch", NULL};
	ck_assert_int_ne(h_run(bad, NULL, 60, &p), 0);
	/* The CLI names its flag, not the API's field. */
	ck_assert_msg(strstr(p.err, "--seccomp: no profile 'nosuch'"), "stderr: %s", p.err);
	h_proc_free(&p);
	free(argv[0]);
	free(id);
}
END_TEST

static Suite *seccomp_suite(void)
{
	Suite *s = suite_create("seccomp");
	tcase_add_test(h_tcase(s, "default_denies_each_class", 120), default_denies_each_class);
	tcase_add_test(h_tcase(s, "strict_denies_more", 120), strict_denies_more);
	tcase_add_test(h_tcase(s, "unknown_profile_is_400", 60), unknown_profile_is_400);
	tcase_add_test(h_tcase(s, "log_records_denied_calls", 120), log_records_denied_calls);
	tcase_add_test(h_tcase(s, "log_after_celld_restart_is_enosys", 120),
		       log_after_celld_restart_is_enosys);
	tcase_add_test(h_tcase(s, "cli_seccomp_options", 120), cli_seccomp_options);
	return s;
}

int main(void)
{
	return h_main(seccomp_suite());
}
