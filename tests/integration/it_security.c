/* The escape battery as part of `make check`: `cell selftest` against the suite's own
 * celld, once on the busybox image (seconds; the tools it lacks are skipped) and once on the
 * default image (the ordinary-work checks run there: dpkg, apt, pip, npm, git, gcc, strace,
 * gdb). A failure names every "not ok" line of the report.
 *
 * The two images live in two worlds (the harness gives the default image a world of its
 * own), so main() runs the busybox suite in a child process and the default suite after it.
 * Also here: the helper's own behaviour (it reports a failed attempt as "not ok" and exits
 * non-zero; it refuses to run on the host), --json and --keep. */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define SELFTEST_TIMEOUT_S 1500 /* the default image's tools take a minute or two */

/* `cell --socket T/cell.sock ARGS...` with TMPDIR inside the world, so that even a killed
 * run leaves its host marker dir where the world's teardown removes it. */
static int cell(struct h_proc *p, int timeout_s, ...)
{
	char *argv[16];
	int n = 0;
	argv[n++] = h_fmt("%s/cell", H.bin);
	argv[n++] = "--socket";
	argv[n++] = H.socket;
	va_list ap;
	va_start(ap, timeout_s);
	for (const char *a; n < 15 && (a = va_arg(ap, const char *));)
		argv[n++] = (char *)a;
	va_end(ap);
	argv[n] = NULL;
	char *tmpdir = h_fmt("TMPDIR=%s", H.dir);
	char *env[] = {tmpdir, NULL};
	h_run(argv, env, timeout_s, p);
	free(tmpdir);
	free(argv[0]);
	return p->status;
}

/* Every "not ok" line of a report, newline-separated (malloc'd; "" when none). */
static char *not_ok_lines(const char *out)
{
	size_t cap = strlen(out) + 1;
	char *res = calloc(1, cap);
	ck_assert_ptr_nonnull(res);
	for (const char *l = out; *l;) {
		const char *nl = strchr(l, '\n');
		size_t len = nl ? (size_t)(nl - l) : strlen(l);
		if (!strncmp(l, "not ok ", 7)) {
			strncat(res, l, len);
			strcat(res, "\n");
		}
		l += len + (nl ? 1 : 0);
	}
	return res;
}

static int count_prefix(const char *out, const char *prefix)
{
	int n = 0;
	size_t pl = strlen(prefix);
	for (const char *l = out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
		if (!strncmp(l, prefix, pl))
			n++;
	return n;
}

/* The marker dir the run named on stderr ("... host marker in DIR"). */
static char *marker_dir(const char *err)
{
	const char *p = strstr(err, "host marker in ");
	if (!p)
		return NULL;
	p += strlen("host marker in ");
	return strndup(p, strcspn(p, "\n"));
}

/* ---- the battery's skips ------------------------------------------------------------ */

/* A skip is an attempt that proved nothing, so each is judged by its reason: a lack of the
 * host passes only once a probe of the host itself, without cell, bears it out (and the
 * skip goes to the run's list); a tool the busybox image lacks is that image's design (the
 * default image's run has them all); any other reason (an argument cell selftest did not
 * pass, a pid that collided, "run as root", a wording this table does not know) fails. */

#define PATH_ABSENT  " does not exist on this kernel"
#define TOOL_MISSING " is not in this image (or only as a busybox applet)"

/* "PATH does not exist on this kernel": the host, the same kernel, has no PATH either. A
 * path the host has is no lack of the kernel's: cell hid it from the sandbox. */
static bool host_lacks_path(const char *reason)
{
	if (reason[0] != '/')
		return false;
	char *path = strndup(reason, strlen(reason) - strlen(PATH_ABSENT));
	struct stat st;
	bool absent = lstat(path, &st) < 0 && errno == ENOENT;
	free(path);
	return absent;
}

/* "this kernel has no i386 emulation": int 0x80 faults on the host too. */
static bool host_lacks_int80(const char *reason)
{
	(void)reason;
#if defined(__x86_64__)
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		long ret = 20; /* getpid on the i386 entry */
		__asm__ volatile("int $0x80"
				 : "+a"(ret)
				 :
				 : "memory", "r8", "r9", "r10", "r11", "rcx");
		_exit(0);
	}
	int st;
	while (waitpid(pid, &st, 0) < 0)
		ck_assert_int_eq(errno, EINTR);
	return WIFSIGNALED(st) && (WTERMSIG(st) == SIGSEGV || WTERMSIG(st) == SIGILL);
#else
	return false;
#endif
}

/* "... on x86 only", "... on x86_64 only": the host is not x86_64 (the helper is built for
 * the host's own architecture). */
static bool host_not_x86_64(const char *reason)
{
	(void)reason;
	struct utsname u;
	return uname(&u) == 0 && strcmp(u.machine, "x86_64") != 0;
}

/* The skips a host may cause, as the battery words them (a prefix, or a suffix), with
 * the probe that checks the host and the name it is recorded under. */
static const struct host_skip {
	const char *words;
	bool suffix;
	bool (*lacks)(const char *reason);
	const char *probe;
} host_skips[] = {
    {PATH_ABSENT, true, host_lacks_path, "kernel-path"},
    {"this kernel has no i386 emulation", false, host_lacks_int80, "kernel-ia32-emulation"},
    {"iopl and ioperm exist on x86 only", false, host_not_x86_64, "arch-x86_64"},
    {"int 0x80 exists on x86_64 only", false, host_not_x86_64, "arch-x86_64"},
    {"the x32 ABI exists on x86_64 only", false, host_not_x86_64, "arch-x86_64"},
};

static bool has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);
	return n > k && !strcmp(s + n - k, suffix);
}

/* The probe that bears out a host's lack for reason, or NULL. */
static const char *host_probe(const char *reason)
{
	for (size_t i = 0; i < sizeof(host_skips) / sizeof(host_skips[0]); i++) {
		const struct host_skip *k = &host_skips[i];
		bool says = k->suffix ? has_suffix(reason, k->words)
				      : !strncmp(reason, k->words, strlen(k->words));
		if (says)
			return k->lacks(reason) ? k->probe : NULL;
	}
	return NULL;
}

struct skips {
	int host, image, n;
	char *bad; /* the lines no host explains, newline-separated */
};

/* One "ok N - DESC # SKIP REASON" line (line ends at its newline) into s. */
static void judge_skip(struct skips *s, const char *image, const char *line)
{
	const char *mark = strstr(line, " # SKIP ");
	size_t len = strcspn(line, "\n");
	const char *desc = strstr(line, " - ");
	char *reason = strndup(mark + 8, len - (size_t)(mark + 8 - line));
	char *what = desc && desc < mark ? strndup(desc + 3, (size_t)(mark - desc - 3))
					 : strndup(line, (size_t)(mark - line));
	const char *probe = host_probe(reason);
	s->n++;
	if (probe) {
		s->host++;
		h_skip_host_part(probe, "cell selftest --image %s: %s: %s", image, what, reason);
	} else if (!strcmp(image, "busybox") && !strncmp(what, "ordinary: ", 10) &&
		   has_suffix(reason, TOOL_MISSING)) {
		s->image++;
	} else {
		char *more = h_fmt("%s%.*s\n", s->bad, (int)len, line);
		free(s->bad);
		s->bad = more;
	}
	free(what);
	free(reason);
}

/* Every skip of a report, judged; fails on any that no host's lack explains. */
static struct skips judge_skips(const char *image, const char *out)
{
	struct skips s = {.bad = strdup("")};
	for (const char *l = out; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
		const char *mark = strstr(l, " # SKIP ");
		if (!strncmp(l, "ok ", 3) && mark && mark < l + strcspn(l, "\n"))
			judge_skip(&s, image, l);
	}
	ck_assert_msg(!s.bad[0],
		      "cell selftest --image %s: skips no lack of this host explains:\n%s", image,
		      s.bad);
	free(s.bad);
	s.bad = NULL;
	if (s.image)
		fprintf(stderr,
			"it_security: %d ordinary attempts need tools the busybox image lacks "
			"(selftest_default runs them)\n",
			s.image);
	return s;
}

/* The report's own counts: "# N attempts: P passed, F failed, S skipped". */
struct totals {
	int total, passed, failed, skipped;
};

static struct totals report_totals(const char *out)
{
	struct totals t;
	for (const char *l = strstr(out, "\n# "); l; l = strstr(l + 1, "\n# "))
		if (sscanf(l, "\n# %d attempts: %d passed, %d failed, %d skipped", &t.total,
			   &t.passed, &t.failed, &t.skipped) == 4)
			return t;
	ck_abort_msg("no summary line in:\n%s", out);
	return t;
}

/* Run the whole battery on image; every attempt must pass, nothing may be left behind. */
static void selftest_passes(const char *image)
{
	int before = h_sandbox_count();
	struct h_proc p;
	cell(&p, SELFTEST_TIMEOUT_S, "selftest", "--image", image, NULL);
	char *bad = not_ok_lines(p.out);
	ck_assert_msg(!bad[0] && p.status == 0,
		      "cell selftest --image %s: exit %d; failed attempts:\n%s\nstderr:\n%s", image,
		      p.status, bad, p.err);
	free(bad);
	/* Every skip has a reason this host bears out, and the report counts them all. */
	struct skips sk = judge_skips(image, p.out);
	struct totals tot = report_totals(p.out);
	ck_assert_int_eq(sk.n, tot.skipped);
	if (strcmp(image, "busybox"))
		ck_assert_int_eq(sk.image, 0);
	/* The whole battery ran: its plan, and the classes of the issue, each with attempts
	 * that passed (a skip proved nothing). */
	int oks = count_prefix(p.out, "ok ") - sk.n;
	ck_assert_int_eq(oks, tot.passed);
	ck_assert_msg(oks >= 100, "only %d attempts reported:\n%s", oks, p.out);
	static const char *const classes[] = {
	    " - syscalls: ", " - capabilities: ",  " - mounts: ",    " - proc-sys: ",
	    " - masked: ",   " - devices: ",	   " - ptrace: ",    " - signals: ",
	    " - fds: ",	     " - other-sandbox: ", " - files-api: ", " - ordinary: ",
	    " - pools: "};
	for (size_t i = 0; i < sizeof(classes) / sizeof(classes[0]); i++)
		ck_assert_msg(strstr(p.out, classes[i]), "no attempt of class '%s' in:\n%s",
			      classes[i], p.out);
	ck_assert_msg(strstr(p.out, "\n1..") && strstr(p.out, " 0 failed"), "report:\n%s", p.out);
	char *dir = marker_dir(p.err);
	ck_assert_msg(dir, "no marker dir named on stderr: %s", p.err);
	struct stat st;
	ck_assert_msg(stat(dir, &st) < 0, "the host marker dir %s was left behind", dir);
	free(dir);
	h_proc_free(&p);
	ck_assert_int_eq(h_sandbox_count(), before);
}

START_TEST(selftest_busybox)
{
	selftest_passes("busybox");
}
END_TEST

START_TEST(selftest_default)
{
	selftest_passes("default");
}
END_TEST

START_TEST(selftest_json)
{
	struct h_proc p;
	cell(&p, SELFTEST_TIMEOUT_S, "selftest", "--image", "busybox", "--json", NULL);
	json_error_t jerr;
	json_t *j = json_loads(p.out, 0, &jerr);
	ck_assert_msg(j, "not JSON (%s): %s", jerr.text, p.out);
	long long total = h_jint(j, "total"), passed = h_jint(j, "passed"),
		  failed = h_jint(j, "failed"), skipped = h_jint(j, "skipped");
	ck_assert_msg(total >= 100 && passed + failed + skipped == total, "totals: %s", p.out);
	ck_assert_int_eq((long long)json_array_size(h_jget(j, "results")), total);
	ck_assert_str_eq(h_jstr(j, "image"), "busybox");
	ck_assert_msg(h_jstr(j, "kernel.release")[0] && h_jstr(j, "cgroup")[0], "%s", p.out);
	ck_assert_msg((failed == 0) == (p.status == 0), "failed %lld but exit %d", failed,
		      p.status);
	json_t *first = json_array_get(h_jget(j, "results"), 0);
	ck_assert_msg(h_jstr(first, "attempt")[0] && h_jstr(first, "result")[0], "%s", p.out);
	json_decref(j);
	h_proc_free(&p);
}
END_TEST

START_TEST(selftest_keep)
{
	int before = h_sandbox_count();
	struct h_proc p;
	cell(&p, SELFTEST_TIMEOUT_S, "selftest", "--image", "busybox", "--keep", NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	/* "cell selftest: kept sandbox ID" twice */
	int kept = 0;
	for (const char *s = p.err; (s = strstr(s, "kept sandbox ")); kept++) {
		s += strlen("kept sandbox ");
		char *id = strndup(s, strcspn(s, "\n"));
		h_track_sandbox(id);
		char *url = h_fmt("/v1/sandboxes/%s", id);
		ck_assert_int_eq(h_http("GET", url, NULL, NULL), 200);
		free(url);
		free(id);
	}
	ck_assert_int_eq(kept, 2);
	ck_assert_int_eq(h_sandbox_count(), before + 2);
	h_proc_free(&p);
}
END_TEST

/* The helper itself: a failed attempt is a "not ok" line and a non-zero exit. Naming "/" as
 * a host path makes its mountinfo check fail for real. */
START_TEST(helper_reports_failures)
{
	char *id = h_create("busybox", NULL);
	char *path = h_fmt("%s/cell-escape", H.bin);
	char *bin = h_read_file(path);
	ck_assert_ptr_nonnull(bin);
	struct stat st;
	ck_assert_int_eq(stat(path, &st), 0);
	struct h_resp up;
	ck_assert_int_eq(h_upload(id, "/tmp/cell-escape", bin, (size_t)st.st_size, 0755, &up), 200);
	h_resp_free(&up);
	struct h_exec r;
	const char *const argv[] = {"/tmp/cell-escape", "--host-path", "/", NULL};
	struct h_exec_opts o = {.argv = argv, .max_seconds = 300};
	h_exec(id, NULL, &o, &r);
	ck_assert_msg(r.exit_code == 1, "exit %d\n%s%s", r.exit_code, r.out, r.err);
	ck_assert_msg(strstr(r.out, "not ok ") &&
			  strstr(r.out, "name no host path # /proc/self/mountinfo names the host "
					"path /"),
		      "%s", r.out);
	ck_assert_int_eq(count_prefix(r.out, "not ok "), 1);
	h_exec_free(&r);
	free(bin);
	free(path);
	free(id);
}
END_TEST

START_TEST(helper_refuses_the_host)
{
	struct h_proc p;
	char *argv[] = {h_fmt("%s/cell-escape", H.bin), NULL};
	h_run(argv, NULL, 60, &p);
	ck_assert_msg(p.status == 2 && strstr(p.err, "only inside a sandbox") && !p.out_len,
		      "exit %d, %zu bytes on stdout\n%s", p.status, p.out_len, p.err);
	h_proc_free(&p);
	free(argv[0]);
}
END_TEST

static Suite *busybox_suite(void)
{
	Suite *s = suite_create("security-busybox");
	tcase_add_test(h_tcase(s, "selftest_busybox", 600), selftest_busybox);
	tcase_add_test(h_tcase(s, "selftest_json", 600), selftest_json);
	tcase_add_test(h_tcase(s, "selftest_keep", 600), selftest_keep);
	tcase_add_test(h_tcase(s, "helper_reports_failures", 600), helper_reports_failures);
	tcase_add_test(h_tcase(s, "helper_refuses_the_host", 120), helper_refuses_the_host);
	return s;
}

static Suite *default_suite(void)
{
	Suite *s = suite_create("security-default");
	tcase_add_test(h_tcase(s, "selftest_default", SELFTEST_TIMEOUT_S + 60), selftest_default);
	return s;
}

int main(void)
{
	/* CK_RUN_CASE names a case of one suite: the other world is not started at all. */
	const char *only = getenv("CK_RUN_CASE");
	bool want_default = !only || !*only || !strcmp(only, "selftest_default");
	bool want_busybox = !only || !*only || strcmp(only, "selftest_default");
	if (!want_busybox)
		return h_main_image(default_suite(), "default");
	if (!want_default)
		return h_main(busybox_suite());
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return EXIT_FAILURE;
	}
	if (pid == 0)
		_exit(h_main(busybox_suite()));
	int st = 0;
	while (waitpid(pid, &st, 0) < 0)
		;
	int busybox_rc = WIFEXITED(st) ? WEXITSTATUS(st) : EXIT_FAILURE;
	int default_rc = h_main_image(default_suite(), "default");
	return busybox_rc || default_rc ? EXIT_FAILURE : EXIT_SUCCESS;
}
