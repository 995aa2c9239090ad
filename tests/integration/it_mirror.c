/* The default image keeps working with a network: apt-get, pip and npm install from the
 * real registries' names, which the network test lab (netlab.h) resolves to a package
 * mirror the test serves in the lab's internet (mirror.h). No real registry is contacted:
 * celld runs in the lab's host namespace, whose only route leads to the lab.
 *
 * Under the public mode the three installs work; under `limited` (policies/network/
 * limited.json, real names) they work too while a name outside its list is refused and an
 * address outside it is unreachable; under an allowlist of PyPI's two names pip works and
 * apt-get does not. Each test: its own lab, mirror and celld (a world "net"), with
 * `--network-default public --dns-upstream <the lab's DNS>`. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "mirror.h"
#include "netlab.h"

/* The image's ordinary account (rootfs/build-image). */
#define USER_UID 1000

static struct netlab *lab;
static struct mirror *mir;
static struct h_world *W;

static void lab_world(void)
{
	lab = netlab_new();
	mir = mirror_new(lab);
	static const char *const flags[] = {
	    "--network-default", "public",   "--subnet", "198.19.0.0/16",
	    "--dns-upstream",	 NETLAB_DNS, NULL};
	W = h_world_add(
	    &(struct h_world_opts){.name = "net", .flags = flags, .netns_fd = netlab_host_fd(lab)});
}

static void lab_end(void)
{
	mirror_free(mir);
	mir = NULL;
	netlab_free(lab);
	lab = NULL;
}

/* Run cmd in the sandbox (a hang guard of 240 s) as uid (and gid uid; < 0: root); its exit
 * code, its output (stdout then stderr) in *out. */
static int run_as(const char *id, const char *cmd, int uid, char **out)
{
	struct h_exec_opts o = {
	    .max_seconds = 240, .as_user = uid >= 0, .uid = uid, .gid = uid >= 0 ? uid : -1};
	struct h_exec r;
	h_world_exec(W, id, cmd, &o, &r);
	ck_assert_msg(r.status == 200 && (r.complete || r.errored), "`%s`: HTTP %ld, no end", cmd,
		      r.status);
	int code = r.exit_code;
	*out = h_fmt("%s%s", r.out, r.err);
	h_exec_free(&r);
	return code;
}

static int run(const char *id, const char *cmd, char **out)
{
	return run_as(id, cmd, -1, out);
}

/* The last n bytes of s (Check's messages are bounded). */
static const char *tail(const char *s, size_t n)
{
	size_t l = strlen(s);
	return l > n ? s + l - n : s;
}

/* cmd, run as uid (< 0: root), must exit 0 and print want (somewhere in its output). */
static void expect_ok_as(const char *id, int uid, const char *what, const char *cmd,
			 const char *want)
{
	char *out = NULL;
	int code = run_as(id, cmd, uid, &out);
	if (code != 0 || !strstr(out, want)) {
		char *log = mirror_log(mir);
		ck_abort_msg(
		    "%s: exit %d, want '%s' in:\n%s\nthe mirror's requests:\n%s\ncelld:\n%s", what,
		    code, want, tail(out, 1500), tail(log, 600), tail(h_world_log_tail(W), 800));
	}
	free(out);
}

static void expect_ok(const char *id, const char *what, const char *cmd, const char *want)
{
	expect_ok_as(id, -1, what, cmd, want);
}

/* The sandbox's apt sources: the mirror's suite only (the image's own entries name
 * suites the mirror does not serve). */
#define APT_SOURCES                                                                                \
	"rm -f /etc/apt/sources.list.d/*; "                                                        \
	"echo 'deb [trusted=yes] http://deb.debian.org/debian bookworm main' "                     \
	">/etc/apt/sources.list; "

#define APT_UPDATE  APT_SOURCES "timeout 120 apt-get update 2>&1"
#define APT_INSTALL "DEBIAN_FRONTEND=noninteractive timeout 120 apt-get install -y cell-hello 2>&1"
/* pip ignores an index over plain HTTP unless its host is trusted. */
#define PIP_INSTALL                                                                                \
	"timeout 120 pip install --no-cache-dir --index-url http://pypi.org/simple "               \
	"--trusted-host pypi.org --trusted-host files.pythonhosted.org cell-hello 2>&1"
#define PIP_INSTALL_USER                                                                           \
	"timeout 120 pip install --user --no-cache-dir --index-url http://pypi.org/simple "        \
	"--trusted-host pypi.org --trusted-host files.pythonhosted.org cell-hello 2>&1"
#define NPM_INSTALL_USER                                                                           \
	"cd /workspace && timeout 120 npm install --no-audit --no-fund "                           \
	"--registry http://registry.npmjs.org/ cell-hello 2>&1"
#define NPM_INSTALL                                                                                \
	"mkdir -p /tmp/np && cd /tmp/np && timeout 120 npm install --no-audit --no-fund "          \
	"--registry http://registry.npmjs.org/ cell-hello 2>&1"

static void apt_works(const char *id)
{
	expect_ok(id, "apt-get update", APT_UPDATE, "Reading package lists");
	expect_ok(id, "apt-get install", APT_INSTALL, "Setting up cell-hello (1.0)");
	expect_ok(id, "cell-hello", "cell-hello", MIRROR_GREETING " (deb)");
	ck_assert_uint_eq(mirror_count(mir, "deb.debian.org", "/cell-hello_1.0_all.deb", 200), 1);
	char *pk = h_fmt("/binary-%s/Packages", mirror_deb_arch(mir));
	ck_assert_uint_ge(mirror_count(mir, "deb.debian.org", pk, 200), 1);
	free(pk);
}

static void pip_works(const char *id)
{
	expect_ok(id, "pip install", PIP_INSTALL, "Successfully installed cell-hello-1.0");
	expect_ok(id, "import cell_hello", "cd / && python3 -c 'import cell_hello'",
		  MIRROR_GREETING " (pypi)");
	ck_assert_uint_ge(mirror_count(mir, "pypi.org", "/simple/cell-hello/", 200), 1);
	ck_assert_uint_eq(
	    mirror_count(mir, "files.pythonhosted.org", "/cell_hello-1.0-py3-none-any.whl", 200),
	    1);
}

static void npm_works(const char *id)
{
	expect_ok(id, "npm install", NPM_INSTALL, "added 1 package");
	expect_ok(id, "require('cell-hello')",
		  "cd /tmp/np && node -e 'console.log(require(\"cell-hello\"))'",
		  MIRROR_GREETING " (npm)");
	ck_assert_uint_ge(mirror_count(mir, "registry.npmjs.org", "/cell-hello", 200), 1);
	ck_assert_uint_eq(
	    mirror_count(mir, "registry.npmjs.org", "/cell-hello/-/cell-hello-1.0.0.tgz", 200), 1);
}

/* name does not resolve in the sandbox: getent fails (the lab's DNS knows it). */
static void unresolved(const char *id, const char *name)
{
	char *cmd = h_fmt("getent hosts %s; echo \"getent $?\"", name);
	char *out = NULL;
	run(id, cmd, &out);
	ck_assert_msg(!strstr(out, "getent 0") && strstr(out, "getent "),
		      "%s resolved in the sandbox: %s", name, tail(out, 1000));
	free(out);
	free(cmd);
}

/* addr, a web server of the lab, fetched by IP, answers nothing: it saw no connection. */
static void unreachable(const char *id, const char *addr)
{
	char *cmd = h_fmt("curl -sS -m 3 http://%s/; echo \"curl $?\"", addr);
	char *out = NULL;
	run(id, cmd, &out);
	ck_assert_msg(!strstr(out, "hello from") && !strstr(out, "curl 0") && strstr(out, "curl "),
		      "http://%s/ answered the sandbox: %s", addr, tail(out, 1000));
	free(out);
	free(cmd);
	ck_assert_uint_eq(netlab_hits(lab, NETLAB_TCP, addr, NETLAB_HTTP_PORT, NULL), 0);
}

/* The mirror's address, asked by IP for PyPI's page, answers nothing: no request reached it
 * at all. */
static void mirror_closed(const char *id)
{
	char *out = NULL;
	run(id,
	    "curl -sS -m 3 -H 'Host: pypi.org' http://" MIRROR_ADDR "/simple/cell-hello/; "
	    "echo \"curl $?\"",
	    &out);
	ck_assert_msg(!strstr(out, "cell_hello") && !strstr(out, "curl 0") && strstr(out, "curl "),
		      "the mirror answered the sandbox by IP: %s", tail(out, 1000));
	free(out);
	ck_assert_uint_eq(mirror_count(mir, NULL, NULL, -1), 0);
}

/* ------------------------------------------------------------------------------------ */

START_TEST(mirror_selftest)
{
	/* The mirror answers the lab's host by name, and only what it has. */
	lab = netlab_new();
	mir = mirror_new(lab);
	char addr[16], body[4096];
	for (size_t i = 0; mirror_names[i]; i++) {
		ck_assert_int_eq(
		    netlab_dns_query(netlab_host_fd(lab), NETLAB_DNS, mirror_names[i], 5000, addr),
		    0);
		ck_assert_str_eq(addr, MIRROR_ADDR);
	}
	/* netlab_http_get asks for / with the address as Host: no such site. */
	ck_assert_int_eq(
	    netlab_http_get(netlab_host_fd(lab), MIRROR_ADDR, 80, 5000, body, sizeof(body)), 0);
	ck_assert_str_eq(body, "");
	ck_assert_uint_eq(mirror_count(mir, MIRROR_ADDR, "/", 404), 1);
	lab_end();
}
END_TEST

START_TEST(public_mirrors)
{
	lab_world();
	char *id = h_world_create(W, "default", NULL);
	apt_works(id);
	pip_works(id);
	npm_works(id);
	/* Only the mirror was asked: the lab's web servers saw nothing. */
	ck_assert_uint_eq(netlab_hits(lab, NETLAB_TCP, NETLAB_WEB1, 80, NULL), 0);
	ck_assert_uint_eq(netlab_hits(lab, NETLAB_TCP, NETLAB_WEB2, 80, NULL), 0);
	free(id);
	lab_end();
}
END_TEST

/* The image's ordinary account installs for itself: pip into its home (--user), npm into
 * /workspace. */
START_TEST(user_installs)
{
	lab_world();
	char *id = h_world_create(W, "default", NULL);
	expect_ok_as(id, USER_UID, "pip install --user", PIP_INSTALL_USER,
		     "Successfully installed cell-hello-1.0");
	expect_ok_as(id, USER_UID, "import cell_hello as user",
		     "cd / && python3 -c 'import cell_hello, os; print(cell_hello.__file__)'",
		     MIRROR_GREETING " (pypi)\n/home/user/.local/lib/python3");
	expect_ok_as(id, USER_UID, "npm install as user", NPM_INSTALL_USER, "added 1 package");
	expect_ok_as(id, USER_UID, "require('cell-hello') as user",
		     "cd /workspace && node -e 'console.log(require(\"cell-hello\"))' && "
		     "stat -c %U node_modules/cell-hello/index.js",
		     MIRROR_GREETING " (npm)\nuser\n");
	ck_assert_uint_eq(
	    mirror_count(mir, "files.pythonhosted.org", "/cell_hello-1.0-py3-none-any.whl", 200),
	    1);
	ck_assert_uint_eq(
	    mirror_count(mir, "registry.npmjs.org", "/cell-hello/-/cell-hello-1.0.0.tgz", 200), 1);
	/* Root's system is untouched: the package is the user's alone. */
	char *out = NULL;
	run(id, "cd / && python3 -c 'import cell_hello' 2>&1; echo \"python $?\"", &out);
	ck_assert_msg(strstr(out, "No module named 'cell_hello'") && strstr(out, "python 1"),
		      "root imports the user's package: %s", tail(out, 1000));
	free(out);
	free(id);
	lab_end();
}
END_TEST

START_TEST(limited_reaches_registries_only)
{
	lab_world();
	json_t *ext = json_pack("{s:{s:s}}", "extensions", "cell.network", "limited");
	char *id = h_world_create(W, "default", ext);
	json_decref(ext);
	/* Outside the list first: a name the lab's DNS knows, and its address by IP. */
	unresolved(id, "web1.test");
	unresolved(id, "web2.test");
	unreachable(id, NETLAB_WEB1);
	unreachable(id, NETLAB_WEB2);
	/* The registries' address too, before any of their names was resolved. */
	mirror_closed(id);
	apt_works(id);
	pip_works(id);
	npm_works(id);
	/* Still closed after the registries were opened. */
	unresolved(id, "web1.test");
	unreachable(id, NETLAB_WEB1);
	free(id);
	lab_end();
}
END_TEST

START_TEST(allowlist_one_registry)
{
	lab_world();
	json_t *body = json_pack("{s:{s:s,s:[{s:s,s:s},{s:s,s:s}]}}", "networkPolicy",
				 "defaultAction", "deny", "egress", "action", "allow", "target",
				 "pypi.org", "action", "allow", "target", "files.pythonhosted.org");
	char *id = h_world_create(W, "default", body);
	json_decref(body);
	pip_works(id);
	/* apt's name is not in the list: nothing is fetched, nothing can be installed. */
	char *out = NULL;
	run(id, APT_UPDATE, &out);
	ck_assert_msg(strstr(out, "deb.debian.org") &&
			  (strstr(out, "Failed to fetch") || strstr(out, "Temporary failure") ||
			   strstr(out, "Could not resolve")),
		      "apt-get update under a PyPI-only allowlist:\n%s", tail(out, 2000));
	free(out);
	int code = run(id, APT_INSTALL, &out);
	ck_assert_msg(code != 0 && strstr(out, "Unable to locate package cell-hello"),
		      "apt-get install under a PyPI-only allowlist: exit %d\n%s", code,
		      tail(out, 2000));
	free(out);
	ck_assert_uint_eq(mirror_count(mir, "deb.debian.org", NULL, 200), 0);
	ck_assert_uint_eq(mirror_count(mir, "deb.debian.org", NULL, 404), 0);
	unresolved(id, "deb.debian.org");
	free(id);
	lab_end();
}
END_TEST

#define ONE(s, test, timeout) tcase_add_test(h_tcase(s, #test, timeout), test)

static Suite *mirror_suite(void)
{
	Suite *s = suite_create("mirror");
	ONE(s, mirror_selftest, 60);
	ONE(s, public_mirrors, 600);
	ONE(s, user_installs, 600);
	ONE(s, limited_reaches_registries_only, 600);
	ONE(s, allowlist_one_registry, 600);
	return s;
}

int main(void)
{
	return h_main_image(mirror_suite(), "default");
}
