/* The `default` image (Debian + the tools of rootfs/default.packages), as agents and CI use
 * it: a server started with nohup keeps serving across execs, every listed tool runs, root
 * inside changes image files without touching the image, apt and dpkg work offline,
 * `cell run --rm --image default -v DIR:/src -w /src -- make test` is a CI job, and its
 * ordinary account `user` runs commands without root's powers (cell-policy(5)).
 *
 * The image takes minutes to build; the harness reuses it across runs (see
 * CELL_TEST_DEFAULT_IMAGES in harness.h). It is the only image of this suite's world. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cell/id.h"
#include "harness.h"

/* Run `cell --socket T/cell.sock ARGS...` (NULL-terminated), with a hang guard. */
static int cell(struct h_proc *p, ...)
{
	va_list ap;
	va_start(ap, p);
	int status = h_cell_v(p, 300, ap);
	va_end(ap);
	return status;
}

/* Poll until the server answers (python takes a moment to bind). */
#define WAIT_HTTP(port, file)                                                                      \
	"for i in $(seq 150); do curl -sf -o /dev/null http://127.0.0.1:" port "/" file            \
	" && exit 0; sleep 0.1; done; exit 1"

/* Wall-clock guard only: a timeout must not wait for the command to finish by itself. */
static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A session is one shell: functions, unexported variables, cd, options and traps stay from
 * run to run; a timeout kills the run's process, not the shell; nothing a command prints
 * (on stdout, or into the shell's own status pipe) ends its run; a background job does not
 * hold a run open; a shell that exits makes the session answer 409 until it is deleted. */
START_TEST(bash_session_is_one_shell)
{
	char *id = h_create("default", NULL);
	char *sid = h_session_open(id, "{\"cwd\":\"/tmp/s1\"}", "bash");
	char *pid = h_session_ok(id, sid,
				 "pwd >&2; f() { echo \"fn-$1\"; }; V=unexported; cd /tmp; "
				 "set -o pipefail; shopt -s extglob; trap 'echo trapped' USR1; "
				 "echo $$");
	char *out = h_session_ok(id, sid,
				 "f x; echo \"$V\"; pwd; false | true; echo pipe=$?; "
				 "shopt -q extglob && echo extglob; kill -USR1 $$; echo $$");
	char *want = h_fmt("fn-x\nunexported\n/tmp\npipe=1\nextglob\ntrapped\n%s", pid);
	ck_assert_str_eq(out, want);
	free(out);
	free(want);

	/* the timeout kills sleep and drops the rest of the run, also inside functions and
	 * loops; the shell stays, with what the run set before it, and no trace of the abort */
	struct h_exec r;
	double t0 = now_s();
	h_session_run(id, sid, "echo a; W=kept; sleep 100; echo not-after-sleep", 1000, &r);
	ck_assert_msg(now_s() - t0 < 50, "the timeout did not end the run");
	ck_assert_int_eq(r.status, 200);
	ck_assert_msg(!r.complete && r.exit_code == 124, "exit %d", r.exit_code);
	out = h_out_lines(&r);
	ck_assert_str_eq(out, "a\n");
	free(out);
	h_exec_free(&r);
	h_session_run(id, sid,
		      "g() { for i in 1 2; do sleep 100; echo in-g-$i; done; echo end-g; }; "
		      "echo b; g; echo not-after-g",
		      1000, &r);
	ck_assert_msg(!r.complete && r.exit_code == 124, "exit %d", r.exit_code);
	out = h_out_lines(&r);
	ck_assert_str_eq(out, "b\n");
	free(out);
	h_exec_free(&r);
	out = h_session_ok(id, sid,
			   "echo $$; f y; echo \"$W\"; shopt -q extdebug || echo no-extdebug; "
			   "trap -p DEBUG; kill -USR1 $$");
	want = h_fmt("%sfn-y\nkept\nno-extdebug\ntrapped\n", pid);
	ck_assert_str_eq(out, want);
	free(out);
	free(want);

	/* fake statuses: on stdout, and into the shell's own status pipe (a wrong token) */
	out =
	    h_session_ok(id, sid,
			 "printf '00000000000000000000000000000000 0\\n'; "
			 "o=$(readlink /proc/$$/fd/1); e=$(readlink /proc/$$/fd/2); "
			 "for f in /proc/$$/fd/*; do l=$(readlink $f); case \"$l\" in pipe:*) "
			 "[ \"$l\" = \"$o\" ] || [ \"$l\" = \"$e\" ] || "
			 "echo '00000000000000000000000000000000 5' > $f;; esac; done 2>/dev/null; "
			 "{ echo x >&3; } 2>/dev/null || echo no-fd3; sleep 1; echo after");
	ck_assert_str_eq(out, "00000000000000000000000000000000 0\nno-fd3\nafter\n");
	free(out);

	/* a background job holding the output pipes does not hold the run */
	t0 = now_s();
	out = h_session_ok(id, sid, "sleep 100 & echo started");
	ck_assert_str_eq(out, "started\n");
	ck_assert_msg(now_s() - t0 < 50, "a background job held the run");
	free(out);
	out = h_session_ok(id, sid, "echo next; kill %1");
	ck_assert_str_eq(out, "next\n");
	free(out);

	/* a failing run reports its code; exit ends the shell; the session then says so */
	h_session_run(id, sid, "sh -c 'exit 7'", 0, &r);
	ck_assert_int_eq(r.exit_code, 7);
	h_exec_free(&r);
	h_session_run(id, sid, "exit 3", 0, &r);
	ck_assert_int_eq(r.exit_code, 3);
	h_exec_free(&r);
	h_session_run(id, sid, "true", 0, &r);
	ck_assert_int_eq(r.status, 409);
	ck_assert_str_eq(h_jstr(r.body, "code"), "SESSION_EXITED");
	h_exec_free(&r);
	ck_assert_int_eq(h_session_delete(id, sid), 200);
	ck_assert_int_eq(h_session_delete(id, sid), 404);
	free(pid);
	free(sid);
	free(id);
}
END_TEST

/* The example, literally: one exec starts a server in the background and returns;
 * a later exec fetches from it. */
START_TEST(nohup_http_server_serves_later_execs)
{
	char *id = h_create("default", NULL);
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *content = h_fmt("served-by-python-%s\n", rnd);
	char *write = h_fmt("printf '%%s' '%s' > /workspace/hello.txt", content);
	free(h_sh(id, write));

	struct h_exec_opts o = {.max_seconds = 60};
	struct h_exec r;
	h_exec(id, "nohup python3 -m http.server 8000 --directory /workspace >/dev/null 2>&1 &", &o,
	       &r);
	ck_assert_msg(r.status == 200 && r.complete && r.exit_code == 0,
		      "starting the server: HTTP %ld, exit %d, stderr %s", r.status, r.exit_code,
		      r.err);
	h_exec_free(&r);

	free(h_sh(id, WAIT_HTTP("8000", "hello.txt")));
	char *out = h_sh(id, "curl -s http://127.0.0.1:8000/hello.txt");
	ck_assert_str_eq(out, content);
	free(out);
	/* Still the same server, still serving, one more exec later. */
	out = h_sh(id, "pgrep -x -f 'python3 -m http.server 8000 --directory /workspace' | wc -l");
	ck_assert_str_eq(out, "1\n");
	free(out);
	out = h_sh(id, "curl -s http://127.0.0.1:8000/hello.txt");
	ck_assert_str_eq(out, content);
	free(out);
	free(write);
	free(content);
	free(id);
}
END_TEST

/* The README tour through the CLI: create, exec a background server, exec curl, rm. */
START_TEST(cli_tour_background_server)
{
	struct h_proc p;
	cell(&p, "create", "--image", "default", NULL);
	ck_assert_msg(p.status == 0, "cell create: exit %d: %s", p.status, p.err);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);

	cell(&p, "exec", id, "--", "sh", "-c",
	     "echo kept > /workspace/note; "
	     "nohup python3 -m http.server 8000 >/dev/null 2>&1 &",
	     NULL);
	ck_assert_msg(p.status == 0, "cell exec (server): exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	cell(&p, "exec", id, "--", "cat", "/workspace/note", NULL);
	ck_assert_str_eq(p.out, "kept\n");
	h_proc_free(&p);
	cell(&p, "exec", id, "--", "sh", "-c", WAIT_HTTP("8000", "note"), NULL);
	ck_assert_msg(p.status == 0, "the server never answered: %s", p.err);
	h_proc_free(&p);
	cell(&p, "exec", id, "--", "curl", "-s", "localhost:8000/note", NULL);
	ck_assert_msg(p.status == 0, "cell exec curl: exit %d: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "kept\n");
	h_proc_free(&p);
	cell(&p, "rm", id, NULL);
	ck_assert_msg(p.status == 0, "cell rm: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	free(id);
}
END_TEST

/* Every tool of default.packages runs. Each command prints something exact. */
static const struct {
	const char *name;
	const char *cmd;
	const char *want; /* the start of stdout */
} tools[] = {
    {"bash", "bash --version | head -n 1", "GNU bash, version 5."},
    {"coreutils", "printf abc | sha256sum | cut -c1-16", "ba7816bf8f01cfea"},
    {"python3", "python3 -c 'print(6*7)'", "42\n"},
    {"venv", "python3 -m venv /tmp/v && /tmp/v/bin/python -V", "Python 3."},
    {"pip", "python3 -m pip --version", "pip "},
    {"venv-pip", "python3 -m venv /tmp/v && /tmp/v/bin/pip --version", "pip "},
    {"node", "node -e 'console.log(6*7)'", "42\n"},
    {"npm",
     "v=$(npm --version) && echo \"$v\" | grep -qE '^[0-9]+[.][0-9]+[.][0-9]+$' && echo npm-ok",
     "npm-ok\n"},
    {"git",
     "cd /tmp && git init -q repo && cd repo && git config user.email ci@example.invalid && "
     "git config user.name ci && echo hi > f && git add f && git commit -q -m first && "
     "git log --format=%s",
     "first\n"},
    {"jq", "echo '{\"a\":[1,2,3]}' | jq -c '{sum: (.a | add)}'", "{\"sum\":6}\n"},
    {"make", "make --version | head -n 1", "GNU Make 4."},
    {"curl", "curl --version | head -n 1", "curl "},
    {"wget", "wget --version | head -n 1", "GNU Wget "},
    {"vim-tiny",
     "printf 'a\\n' > /tmp/x && vim.tiny -Nu NONE -es -c '%s/a/b/' -c wq /tmp/x; cat /tmp/x",
     "b\n"},
    {"unzip",
     "cd /tmp && python3 -c \"import zipfile; z = zipfile.ZipFile('t.zip', 'w'); "
     "z.writestr('in/z.txt', 'zipped\\n'); z.close()\" && unzip -q t.zip && cat in/z.txt",
     "zipped\n"},
    {"tar", "cd /tmp && mkdir t && echo tarred > t/f && tar czf t.tgz t && tar xzOf t.tgz t/f",
     "tarred\n"},
    {"ssh", "ssh -V 2>&1", "OpenSSH_"},
    {"ca-certificates",
     "grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt | "
     "awk '$1 > 50 { print \"ca-ok\" }'",
     "ca-ok\n"},
    /* procps: PID 1 is cell-init, and the command is one of few processes */
    {"ps", "ps aux | awk '$2 == 1 { print $11 }'", "cell-init\n"},
    /* iproute2: the sandbox's network namespace has loopback only */
    {"ip", "ip addr | grep -E '^[0-9]+:' | cut -d: -f2 | tr -d ' '", "lo\n"},
};

START_TEST(tool_runs)
{
	char *id = h_create("default", NULL);
	struct h_exec_opts o = {.max_seconds = 120};
	struct h_exec r;
	h_exec(id, tools[_i].cmd, &o, &r);
	ck_assert_msg(r.status == 200 && r.complete && r.exit_code == 0,
		      "%s: `%s`: HTTP %ld, exit %d\nstdout: %s\nstderr: %s", tools[_i].name,
		      tools[_i].cmd, r.status, r.exit_code, r.out, r.err);
	ck_assert_msg(!strncmp(r.out, tools[_i].want, strlen(tools[_i].want)),
		      "%s: `%s` printed '%s', want it to start with '%s' (stderr %s)",
		      tools[_i].name, tools[_i].cmd, r.out, tools[_i].want, r.err);
	h_exec_free(&r);
	free(id);
}
END_TEST

/* Root inside modifies files of the image: the change is the sandbox's own (overlay
 * copy-up); the image on the host and every other sandbox still see the original. */
START_TEST(root_modifies_image_files)
{
	static const char *const files[] = {"/etc/motd", "/usr/share/base-files/motd"};
	char *before[2];
	for (int i = 0; i < 2; i++) {
		char *host = h_fmt("%s/default/rootfs%s", H.images, files[i]);
		before[i] = h_read_file(host);
		ck_assert_msg(before[i], "%s missing in the image", host);
		free(host);
	}
	char *id = h_create("default", NULL);
	char *out = h_sh(id, "echo cell-copy-up >> /etc/motd && tail -n 1 /etc/motd && "
			     "echo cell-copy-up-usr >> /usr/share/base-files/motd && "
			     "tail -n 1 /usr/share/base-files/motd && "
			     "rm /usr/share/base-files/info.dir && "
			     "test ! -e /usr/share/base-files/info.dir && "
			     "chmod 0600 /etc/motd && stat -c '%u %a' /etc/motd");
	ck_assert_str_eq(out, "cell-copy-up\ncell-copy-up-usr\n0 600\n");
	free(out);
	/* persists in this sandbox */
	out = h_sh(id, "tail -n 1 /etc/motd");
	ck_assert_str_eq(out, "cell-copy-up\n");
	free(out);

	for (int i = 0; i < 2; i++) {
		char *host = h_fmt("%s/default/rootfs%s", H.images, files[i]);
		char *now = h_read_file(host);
		ck_assert_msg(now && !strcmp(now, before[i]), "the image's %s changed", host);
		struct stat st;
		ck_assert_int_eq(stat(host, &st), 0);
		ck_assert_msg((st.st_mode & 07777) == 0644 && st.st_uid == 0,
			      "the image's %s: mode %o uid %u", host, st.st_mode & 07777,
			      (unsigned)st.st_uid);
		free(now);
		free(host);
	}
	char *info = h_fmt("%s/default/rootfs/usr/share/base-files/info.dir", H.images);
	ck_assert_msg(access(info, F_OK) == 0, "a sandbox deleted %s from the image", info);
	free(info);

	char *other = h_create("default", NULL);
	out = h_sh(other, "cat /etc/motd; test -e /usr/share/base-files/info.dir && echo present");
	char *want = h_fmt("%spresent\n", before[0]);
	ck_assert_str_eq(out, want);
	free(want);
	free(out);
	free(other);
	free(id);
	free(before[0]);
	free(before[1]);
}
END_TEST

/* The package tools work without network: the image carries dpkg's database (apt's lists
 * are removed at build time, so only `apt-get update` wants the network, and it gives up
 * rather than hang). */
START_TEST(dpkg_and_apt_offline)
{
	char *id = h_create("default", NULL);
	char *out = h_sh(id, "dpkg -l | grep -c '^ii'");
	ck_assert_msg(atoi(out) > 100, "dpkg -l lists %s packages", out);
	free(out);
	out = h_sh(id, "dpkg -l bash git nodejs python3 | grep '^ii' | awk '{print $2}'");
	ck_assert_str_eq(out, "bash\ngit\nnodejs\npython3\n");
	free(out);
	out = h_sh(id, "dpkg -s bash");
	ck_assert_msg(strstr(out, "Package: bash\n") &&
			  strstr(out, "Status: install ok installed\n"),
		      "dpkg -s bash: %s", out);
	free(out);
	free(h_sh(id, "apt-get check -q"));
	out = h_sh(id, "apt-cache policy bash | sed -n 2p");
	ck_assert_msg(strstr(out, "Installed: "), "apt-cache policy bash: %s", out);
	free(out);
	out = h_sh(id, "apt-get install -y jq 2>&1");
	ck_assert_msg(strstr(out, "jq is already the newest version"), "apt-get install jq: %s",
		      out);
	free(out);

	/* Root changes the package database: remove a package for real. */
	struct h_exec_opts o = {.max_seconds = 120};
	struct h_exec r;
	h_exec(id, "DEBIAN_FRONTEND=noninteractive apt-get remove -y -q vim-tiny", &o, &r);
	ck_assert_msg(r.complete && r.exit_code == 0, "apt-get remove vim-tiny: exit %d\n%s%s",
		      r.exit_code, r.out, r.err);
	h_exec_free(&r);
	out = h_sh(id, "dpkg-query -W -f '${Status}\\n' vim-tiny; command -v vim.tiny || "
		       "echo gone");
	ck_assert_str_eq(out, "deinstall ok config-files\ngone\n");
	free(out);
	char *img = h_fmt("%s/default/rootfs/usr/bin/vim.tiny", H.images);
	ck_assert_msg(access(img, X_OK) == 0, "removing a package in a sandbox removed %s", img);
	free(img);

	/* No network: `apt-get update` fails to fetch, but ends. */
	o.max_seconds = 150;
	h_exec(id, "timeout 120 apt-get update -q 2>&1", &o, &r);
	ck_assert_msg(r.complete || r.errored, "apt-get update: no end (HTTP %ld)", r.status);
	ck_assert_msg(r.exit_code != 124, "apt-get update hung offline:\n%s", r.out);
	h_exec_free(&r);
	free(id);
}
END_TEST

/* pip installs the way agents run it (no PEP 668 refusal: rootfs/build-image's pip-system
 * tweak), from a local source tree (no network here), as root into the system and as user
 * into its home. */
START_TEST(pip_install_works)
{
	char *id = h_create("default", NULL);
	const char *pkg =
	    "mkdir -p /tmp/p/celltoy && echo 'VALUE = 42' > /tmp/p/celltoy/__init__.py"
	    " && echo 'from setuptools import setup; setup(name=\"celltoy\", "
	    "version=\"1.0\", packages=[\"celltoy\"])' > /tmp/p/setup.py && ";
	struct h_exec_opts o = {.max_seconds = 120};
	struct h_exec r;
	char *cmd = h_fmt("%s pip install --no-index --no-build-isolation /tmp/p 2>&1 && "
			  "python3 -c 'import celltoy; print(celltoy.VALUE)'",
			  pkg);
	h_exec(id, cmd, &o, &r);
	ck_assert_msg(r.complete && r.exit_code == 0 && strstr(r.out, "42\n"),
		      "pip install as root: exit %d\n%s%s", r.exit_code, r.out, r.err);
	ck_assert_msg(!strstr(r.out, "externally-managed"), "PEP 668 refusal:\n%s", r.out);
	h_exec_free(&r);
	free(cmd);
	free(id);
}
END_TEST

/* ---- the ordinary account `user` (rootfs/build-image default_accounts) ---- */

#define USER_UID 1000

/* Run cmd through /bin/sh as user (uid and gid 1000, the API's uid/gid); its exit code, its
 * output in *out (malloc'd, stdout then stderr). */
static int sh_as_user(const char *id, const char *cmd, char **out)
{
	struct h_exec_opts o = {
	    .as_user = true, .uid = USER_UID, .gid = USER_UID, .max_seconds = 60};
	struct h_exec r;
	h_exec(id, cmd, &o, &r);
	ck_assert_msg(r.status == 200 && (r.complete || r.errored),
		      "`%s` as user: HTTP %ld, no end event", cmd, r.status);
	int code = r.exit_code;
	*out = h_fmt("%s%s", r.out, r.err);
	h_exec_free(&r);
	return code;
}

/* The account, its group and its home exist as the image's README says; /workspace is its. */
START_TEST(user_account_exists)
{
	char *id = h_create("default", NULL);
	char *out = h_sh(id, "getent passwd user; getent group user; id user");
	ck_assert_str_eq(out, "user:x:1000:1000:user:/home/user:/bin/bash\n"
			      "user:x:1000:\n"
			      "uid=1000(user) gid=1000(user) groups=1000(user)\n");
	free(out);
	out = h_sh(id, "stat -c '%n %U:%G %a %F' /home/user /workspace /root; "
		       "ls -A /home/user | sort | tr '\n' ' '; "
		       "stat -c '%U:%G' /home/user/.bashrc; passwd -S user | cut -d' ' -f1,2");
	ck_assert_str_eq(out, "/home/user user:user 750 directory\n"
			      "/workspace user:user 755 directory\n"
			      "/root root:root 700 directory\n"
			      ".bash_logout .bashrc .profile user:user\n"
			      "user L\n");
	free(out);
	/* The image on the host: the same ids, under the host's root (an idmapped mount). */
	char *home = h_fmt("%s/default/rootfs/home/user", H.images);
	struct stat st;
	ck_assert_int_eq(stat(home, &st), 0);
	ck_assert_msg(
	    st.st_uid == USER_UID && st.st_gid == USER_UID && (st.st_mode & 07777) == 0750,
	    "%s: %u:%u %o", home, (unsigned)st.st_uid, (unsigned)st.st_gid, st.st_mode & 07777);
	free(home);
	free(id);
}
END_TEST

/* A command run with uid 1000 is `user`: no capabilities, no_new_privs, its own home and
 * /workspace writable, root's files and root's powers out of reach. */
START_TEST(command_runs_as_user)
{
	char *id = h_create("default", NULL);
	char *out = NULL;
	int code = sh_as_user(id,
			      "id -un; id -gn; id -G; pwd; echo $HOME; "
			      "grep -E '^(CapPrm|CapEff|CapAmb|NoNewPrivs):' /proc/self/status",
			      &out);
	ck_assert_msg(code == 0, "exit %d: %s", code, out);
	ck_assert_str_eq(out, "user\nuser\n1000\n/workspace\n/home/user\n"
			      "CapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n"
			      "CapAmb:\t0000000000000000\nNoNewPrivs:\t1\n");
	free(out);

	/* Writes where it owns; both files are the user's, seen from root too. */
	code =
	    sh_as_user(id,
		       "echo ws > /workspace/by-user && echo home > /home/user/by-user && "
		       "mkdir /workspace/dir && echo tmp > /tmp/by-user && cat /workspace/by-user "
		       "/home/user/by-user",
		       &out);
	ck_assert_msg(code == 0, "writing as user: exit %d: %s", code, out);
	ck_assert_str_eq(out, "ws\nhome\n");
	free(out);
	out = h_sh(id, "stat -c '%U:%G %n' /workspace/by-user /workspace/dir /home/user/by-user "
		       "/tmp/by-user");
	ck_assert_str_eq(out, "user:user /workspace/by-user\nuser:user /workspace/dir\n"
			      "user:user /home/user/by-user\nuser:user /tmp/by-user\n");
	free(out);

	/* Root's files and directories: each refused, nothing created. */
	static const char *const denied[] = {
	    "touch /root/by-user",
	    "ls /root",
	    "echo x > /etc/by-user",
	    "touch /usr/local/bin/by-user",
	    "chown root /workspace/by-user",
	    "kill -0 1",
	    "python3 -c 'import socket; socket.socket().bind((\"127.0.0.1\", 80))'",
	    "apt-get install -y jq",
	};
	for (size_t i = 0; i < sizeof(denied) / sizeof(denied[0]); i++) {
		code = sh_as_user(id, denied[i], &out);
		ck_assert_msg(code != 0, "`%s` as user succeeded: %s", denied[i], out);
		free(out);
	}
	out = h_sh(id, "ls -A /root | grep -c by-user; test ! -e /etc/by-user && "
		       "test ! -e /usr/local/bin/by-user && stat -c %U /workspace/by-user");
	ck_assert_str_eq(out, "0\nuser\n");
	free(out);

	/* no_new_privs: a set-user-ID root program runs with the caller's ids... */
	free(h_sh(id, "install -m 4755 /usr/bin/id /usr/local/bin/suid-id && "
		      "stat -c '%U %A' /usr/local/bin/suid-id"));
	code = sh_as_user(id, "/usr/local/bin/suid-id -u; /usr/local/bin/suid-id -un", &out);
	ck_assert_msg(code == 0, "suid-id: exit %d: %s", code, out);
	ck_assert_str_eq(out, "1000\nuser\n");
	free(out);
	/* ...so su cannot switch to root (its PAM check fails: no password to give), and the
	 * image's sudo, whose rule lets user run anything, finds it did not become root
	 * (cell-policy(5)). */
	code = sh_as_user(id, "su -c 'id -u' root </dev/null", &out);
	ck_assert_msg(code == 1 && strstr(out, "su: Authentication failure") &&
			  !strstr(out, "\n0\n"),
		      "su as user: exit %d: %s", code, out);
	free(out);
	code = sh_as_user(id, "sudo id -u", &out);
	ck_assert_msg(code == 1 && strstr(out, "\"no new privileges\" flag is set") &&
			  !strstr(out, "\n0\n"),
		      "sudo as user: exit %d: %s", code, out);
	free(out);

	/* Root (no uid) is still root; it switches to user, never the other way round. */
	out = h_sh(id, "id -u; su user -c 'id -un; echo $HOME'");
	ck_assert_str_eq(out, "0\nuser\n/home/user\n");
	free(out);
	free(id);
}
END_TEST

/* extensions["cell.sudo"] (every E2B create): user's sudo becomes root, under the same
 * seccomp filter and within the same bounding set as any sandbox's root; the setting
 * survives a stop and a cold start. A bad value is refused. */
START_TEST(sudo_sandbox_user_becomes_root)
{
	json_t *ext = json_pack("{s:{s:s}}", "extensions", "cell.sudo", "true");
	char *id = h_create("default", ext);
	json_decref(ext);
	char *plain = h_create("default", NULL);
	char *out = NULL;
	for (int round = 0; round < 2; round++) {
		int code =
		    sh_as_user(id,
			       "grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; "
			       "sudo -n id -u; sudo -n sh -c 'grep CapBnd /proc/self/status'",
			       &out);
		ck_assert_msg(code == 0, "sudo as user, round %d: exit %d: %s", round, code, out);
		char *root_bnd = h_sh(plain, "grep CapBnd /proc/self/status");
		char *want = h_fmt("NoNewPrivs:\t0\nSeccomp:\t2\n0\n%s", root_bnd);
		ck_assert_str_eq(out, want);
		free(want);
		free(root_bnd);
		free(out);
		/* Kept in the record: inspect says so, and a cold start applies it again. */
		json_t *ins = h_inspect(id);
		ck_assert_msg(json_is_true(json_object_get(ins, "sudo")),
			      "inspect has no sudo: true");
		json_decref(ins);
		if (round == 0) {
			char *p = h_fmt("/v1/sandboxes/%s/stop", id);
			ck_assert_int_eq(h_http("POST", p, NULL, NULL), 202);
			free(p);
			p = h_fmt("/v1/sandboxes/%s/resume", id);
			ck_assert_int_eq(h_http("POST", p, NULL, NULL), 202);
			free(p);
		}
	}
	ext = json_pack("{s:{s:s}}", "extensions", "cell.sudo", "yes");
	struct h_resp resp = {0};
	long st = h_create_ex("default", ext, H_UNIX, &resp);
	json_decref(ext);
	ck_assert_msg(st == 400 && strstr(resp.body, "extensions.cell.sudo"), "%ld %s", st,
		      resp.body);
	h_resp_free(&resp);
	free(plain);
	free(id);
}
END_TEST

/* The CLI's --user: `id -un` is user; names are refused before any request. */
START_TEST(cli_exec_user)
{
	char *id = h_create("default", NULL);
	struct h_proc p;
	cell(&p, "exec", "--user", "1000", id, "--", "sh", "-c",
	     "id -un; id -gn; touch /workspace/f", NULL);
	ck_assert_msg(p.status == 0, "cell exec --user 1000: exit %d: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "user\nuser\n");
	h_proc_free(&p);
	cell(&p, "exec", "-u", "1000:1000", id, "--", "touch", "/root/f", NULL);
	ck_assert_msg(p.status == 1 && strstr(p.err, "Permission denied"),
		      "cell exec -u 1000:1000 touch /root/f: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	cell(&p, "exec", "--user", "user", id, "--", "id", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "--user 'user'") &&
			  strstr(p.err, "names are not resolved") && !p.out[0],
		      "cell exec --user user: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	/* run: a throwaway sandbox, its command as user */
	cell(&p, "run", "--rm", "--image", "default", "--user", "1000", "--", "id", "-un", NULL);
	ck_assert_msg(p.status == 0, "cell run --user 1000: exit %d: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "user\n");
	h_proc_free(&p);
	free(id);
}
END_TEST

/* `make test` in a throwaway sandbox with the checkout bind-mounted: output and exit code
 * are the job's, and what it writes lands in the checkout. */
/* A CI checkout: it belongs to the (ordinary) user the job runs as, so the sandbox's root
 * works on it as that user. */
#define CI_USER 4242

static char *ci_dir(const char *makefile)
{
	char rnd[CELL_ID_RANDOM_LEN + 1];
	ck_assert_int_eq(cell_id_random(rnd), 0);
	char *dir = h_fmt("%s/ci-%s", H.dir, rnd);
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	char *mk = h_fmt("%s/Makefile", dir);
	h_write_file(mk, makefile, 0644);
	ck_assert_int_eq(chown(dir, CI_USER, CI_USER), 0);
	ck_assert_int_eq(chown(mk, CI_USER, CI_USER), 0);
	free(mk);
	return dir;
}

START_TEST(cli_run_make_test)
{
	int before = h_sandbox_count();
	char *dir = ci_dir("test:\n"
			   "\t@echo \"testing in $$(pwd) as uid $$(id -u)\"\n"
			   "\t@python3 -c 'print(\"tests passed:\", 6 * 7)'\n"
			   "\t@echo built > result.txt\n");
	char *vol = h_fmt("%s:/src", dir);
	struct h_proc p;
	cell(&p, "run", "--rm", "--image", "default", "-v", vol, "-w", "/src", "--", "make", "test",
	     NULL);
	ck_assert_msg(p.status == 0, "make test: exit %d\nstdout: %s\nstderr: %s", p.status, p.out,
		      p.err);
	ck_assert_str_eq(p.out, "testing in /src as uid 0\ntests passed: 42\n");
	h_proc_free(&p);
	char *result = h_fmt("%s/result.txt", dir);
	char *got = h_read_file(result);
	ck_assert_msg(got && !strcmp(got, "built\n"), "%s: %s", result, got);
	struct stat st;
	ck_assert_int_eq(stat(result, &st), 0);
	ck_assert_uint_eq(st.st_uid, CI_USER); /* the job's output is the CI user's */
	free(got);
	free(result);
	free(vol);
	free(dir);

	/* A failing job: make's own exit code (2) comes back, with the recipe's output. */
	dir = ci_dir("test:\n"
		     "\t@echo running the failing test\n"
		     "\t@exit 3\n");
	vol = h_fmt("%s:/src", dir);
	cell(&p, "run", "--rm", "--image", "default", "-v", vol, "-w", "/src", "--", "make", "test",
	     NULL);
	ck_assert_msg(p.status == 2, "failing make test: exit %d\nstdout: %s\nstderr: %s", p.status,
		      p.out, p.err);
	ck_assert_str_eq(p.out, "running the failing test\n");
	ck_assert_msg(strstr(p.err, "Error 3"), "stderr: %s", p.err);
	h_proc_free(&p);
	free(vol);
	free(dir);
	ck_assert_int_eq(h_sandbox_count(), before);
}
END_TEST

/* --code-interpreter reaches celld as extensions["cell.codeInterpreter"]: the launcher
 * becomes the entrypoint and, the image having no service of its own (only python3), the
 * sandbox's record says it runs cell's (interpreterService). Without python3 the refusal
 * names the image. */
START_TEST(cli_code_interpreter_flag)
{
	struct h_proc p;
	cell(&p, "create", "--image", "default", "--code-interpreter", NULL);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	char *id = strdup(h_trim(p.out));
	h_track_sandbox(id);
	h_proc_free(&p);
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s", id);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_str_eq(json_string_value(json_array_get(h_jget(r.json, "entrypoint"), 0)),
			 "/opt/code-interpreter/code-interpreter.sh");
	h_resp_free(&r);
	char *state = h_fmt("%s/sandboxes/%s/state.json", h_state_dir(), id);
	char *text = h_read_file(state);
	json_t *rec = text ? json_loads(text, 0, NULL) : NULL;
	ck_assert_msg(rec && json_is_true(json_object_get(rec, "interpreterService")), "%s: %s",
		      state, text);
	json_decref(rec);
	free(text);
	free(state);
	free(path);
	free(id);
}
END_TEST

static Suite *default_suite(void)
{
	Suite *s = suite_create("default-image");
	tcase_add_test(h_tcase(s, "nohup_http_server_serves_later_execs", 180),
		       nohup_http_server_serves_later_execs);
	tcase_add_test(h_tcase(s, "cli_tour_background_server", 180), cli_tour_background_server);
	tcase_add_loop_test(h_tcase(s, "tool_runs", 180), tool_runs, 0,
			    (int)(sizeof(tools) / sizeof(tools[0])));
	tcase_add_test(h_tcase(s, "root_modifies_image_files", 180), root_modifies_image_files);
	tcase_add_test(h_tcase(s, "dpkg_and_apt_offline", 300), dpkg_and_apt_offline);
	tcase_add_test(h_tcase(s, "cli_run_make_test", 300), cli_run_make_test);
	tcase_add_test(h_tcase(s, "pip_install_works", 180), pip_install_works);
	tcase_add_test(h_tcase(s, "user_account_exists", 120), user_account_exists);
	tcase_add_test(h_tcase(s, "command_runs_as_user", 180), command_runs_as_user);
	tcase_add_test(h_tcase(s, "sudo_sandbox_user_becomes_root", 180),
		       sudo_sandbox_user_becomes_root);
	tcase_add_test(h_tcase(s, "cli_exec_user", 180), cli_exec_user);
	tcase_add_test(h_tcase(s, "bash_session_is_one_shell", 240), bash_session_is_one_shell);
	tcase_add_test(h_tcase(s, "cli_code_interpreter_flag", 180), cli_code_interpreter_flag);
	return s;
}

int main(void)
{
	return h_main_image(default_suite(), "default");
}
