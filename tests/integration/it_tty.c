/* The CLI's terminals on a real terminal: tmux runs `cell shell`, `cell exec -it` and
 * `cell attach` in a pane of a known size; keys go in with send-keys and the screen comes
 * back with capture-pane. Each test runs its own tmux server (its own socket name) and
 * kills it at the end.
 *
 * - shell_on_a_real_terminal: the sandbox's terminal has the pane's size and follows a
 *   resize; a `read -p` prompt is answered; ^C, sent once the foreground program says it
 *   runs, reaches that program (its INT trap) and the shell goes on; `exit 3` is cell's
 *   exit code.
 * - exec_it_detach_and_attach: ^P^Q detaches `cell exec -it` and says how to come back;
 *   `cell attach` shows what was written meanwhile and goes on live; the command's exit code
 *   comes through attach; the session is gone afterwards.
 * - attach_takeover_ends_the_other_client: a second `cell attach` is refused; with
 *   --takeover it takes the session and the first one ends saying so.
 * - attach_no_replay_shows_only_what_follows: --no-replay shows nothing written before.
 * - exec_i_feeds_a_pipe: -i alone pipes 3.6 MB whole into a command, also a slow one.
 * - exec_t_refusals: -it without a terminal, -t with --timeout, an -e name the command line
 *   cannot carry. */
#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* h_run execs a path, not a name */
#define TMUX	  "/usr/bin/tmux"
#define PANE_COLS "100"
#define PANE_ROWS "30"

struct tmux {
	char name[64]; /* -L: the server's socket name */
};

static int tmux_v(const struct tmux *t, struct h_proc *p, const char *first, va_list ap)
{
	char *argv[24] = {TMUX, "-L", (char *)t->name, "-f", "/dev/null", (char *)first};
	int n = 6;
	const char *a;
	while (n < 23 && (a = va_arg(ap, const char *)))
		argv[n++] = (char *)a;
	argv[n] = NULL;
	return h_run(argv, NULL, 30, p);
}

/* Run a tmux command on t's server; it must succeed. */
static void tmux(const struct tmux *t, const char *first, ...)
{
	struct h_proc p;
	va_list ap;
	va_start(ap, first);
	tmux_v(t, &p, first, ap);
	va_end(ap);
	ck_assert_msg(p.status == 0, "tmux %s: exit %d: %s", first, p.status, p.err);
	h_proc_free(&p);
}

static char *screen(const struct tmux *t, const char *target)
{
	struct h_proc p;
	char *argv[] = {TMUX, "-L", (char *)t->name, "capture-pane", "-p",
			"-J", "-S", "-200",	     "-t",	     (char *)target,
			NULL};
	h_run(argv, NULL, 30, &p);
	char *out = strdup(p.status == 0 && p.out ? p.out : "");
	h_proc_free(&p);
	return out;
}

/* Wait (up to secs) until the pane shows want; its screen then (malloc'd). */
static char *wait_screen(const struct tmux *t, const char *target, const char *want, int secs)
{
	time_t end = time(NULL) + secs;
	for (;;) {
		char *s = screen(t, target);
		if (strstr(s, want))
			return s;
		if (time(NULL) > end) {
			fprintf(stderr, "pane %s never showed '%s'; it shows:\n%s\n", target, want,
				s);
			free(s);
			ck_abort_msg("the pane never showed '%s' (screen on stderr)", want);
		}
		free(s);
		usleep(100 * 1000);
	}
}

static void keys(const struct tmux *t, const char *target, const char *text, bool enter)
{
	if (enter) {
		tmux(t, "send-keys", "-t", target, "-l", text, NULL);
		tmux(t, "send-keys", "-t", target, "Enter", NULL);
	} else {
		tmux(t, "send-keys", "-t", target, text, NULL);
	}
}

static void tmux_start(struct tmux *t)
{
	struct h_proc p;
	char *argv[] = {TMUX, "-V", NULL};
	h_run(argv, NULL, 30, &p);
	bool have = p.status == 0;
	h_proc_free(&p);
	if (!have)
		h_skip_host("tmux", "no tmux on this host (tools/install-deps --ci installs it)");
	snprintf(t->name, sizeof(t->name), "cell-it-%d", (int)getpid());
}

static void tmux_stop(const struct tmux *t)
{
	struct h_proc p;
	char *argv[] = {TMUX, "-L", (char *)t->name, "kill-server", NULL};
	h_run(argv, NULL, 30, &p);
	h_proc_free(&p);
}

/* A pane running `cell ARGS` whose exit code lands in file. */
static void pane(const struct tmux *t, const char *target, const char *cell_args, const char *file,
		 bool first)
{
	char *cmd = h_fmt("%s/cell --socket %s %s; echo EXIT=$? > %s; sleep 600", H.bin, H.socket,
			  cell_args, file);
	if (first)
		tmux(t, "new-session", "-d", "-s", "t", "-n", target, "-x", PANE_COLS, "-y",
		     PANE_ROWS, cmd, NULL);
	else
		tmux(t, "new-window", "-t", "t", "-n", target, cmd, NULL);
	tmux(t, "set-option", "-g", "status", "off", NULL);
	free(cmd);
}

/* The exit code file of the pane target, once written. */
static char *wait_file(const struct tmux *t, const char *target, const char *path, int secs)
{
	for (int i = 0; i < secs * 10; i++) {
		char *s = h_read_file(path);
		if (s && strchr(s, '\n'))
			return s;
		free(s);
		usleep(100 * 1000);
	}
	char *s = screen(t, target);
	fprintf(stderr, "pane %s:\n%s\n", target, s);
	free(s);
	ck_abort_msg("%s never came (the pane on stderr)", path);
	return NULL;
}

/* ^C reaches the foreground program, not the shell. The program (a shell of its own) says
 * it runs, its INT trap set, before ^C is sent: a ^C typed earlier could end the line
 * before anything of it ran, and the shell going on would prove nothing. Only SIGINT
 * delivered to that program prints int-21; its trap then ends it by SIGINT, which makes the
 * interactive shell drop the rest of the list (Z42). Every marker is computed, so the
 * typed line never shows it. */
static void ctrl_c_reaches_the_foreground(const struct tmux *t, const char *target)
{
	keys(t, target,
	     "sh -c 'trap \"echo int-\\$((20+1)); trap - INT; kill -INT \\$\\$\" INT; "
	     "echo run-$((3+4)); sleep 100; echo after-$((1+1))'; echo Z$((6*7))",
	     true);
	free(wait_screen(t, target, "run-7", 20));
	keys(t, target, "C-c", false);
	free(wait_screen(t, target, "int-21", 20));
	keys(t, target, "echo R$((2+3))", true);
	char *s = wait_screen(t, target, "R5", 20);
	ck_assert_msg(!strstr(s, "after-2"), "the program went on after ^C:\n%s", s);
	ck_assert_msg(!strstr(s, "Z42"), "^C did not stop the foreground program's list:\n%s", s);
	free(s);
}

START_TEST(shell_on_a_real_terminal)
{
	struct tmux t;
	tmux_start(&t);
	char *id = h_create("busybox", NULL);
	char *args = h_fmt("shell %s", id);
	char *exitf = h_fmt("%s/shell.exit", H.dir);
	pane(&t, "sh", args, exitf, true);

	/* a prompt: an echo whose output differs from its typed line */
	keys(&t, "t:sh", "echo R$((1+1))", true);
	free(wait_screen(&t, "t:sh", "R2", 60));
	/* the pane's size (status line off: all of its rows), then a resize followed */
	keys(&t, "t:sh", "stty size", true);
	free(wait_screen(&t, "t:sh", PANE_ROWS " " PANE_COLS, 20));
	tmux(&t, "resize-window", "-t", "t:sh", "-x", "120", "-y", "40", NULL);
	usleep(300 * 1000);
	keys(&t, "t:sh", "stty size; echo S$((2+2))", true);
	char *s = wait_screen(&t, "t:sh", "S4", 20);
	ck_assert_msg(strstr(s, "40 120"), "after a resize to 120x40:\n%s", s);
	free(s);
	/* a prompt answered */
	keys(&t, "t:sh", "read -p 'proceed? ' x; echo got-$x", true);
	free(wait_screen(&t, "t:sh", "proceed? ", 20));
	keys(&t, "t:sh", "yes", true);
	free(wait_screen(&t, "t:sh", "got-yes", 20));
	ctrl_c_reaches_the_foreground(&t, "t:sh");
	keys(&t, "t:sh", "exit 3", true);
	char *code = wait_file(&t, "t:sh", exitf, 20);
	ck_assert_str_eq(code, "EXIT=3\n");
	free(code);
	tmux_stop(&t);
	free(exitf);
	free(args);
	free(id);
}
END_TEST

START_TEST(exec_it_detach_and_attach)
{
	struct tmux t;
	tmux_start(&t);
	char *id = h_create("busybox", NULL);
	char *args = h_fmt("exec -it %s -- sh -c 'echo start; read x; echo later-$x; read y; "
			   "echo got-$y; exit 5'",
			   id);
	char *exit1 = h_fmt("%s/exec.exit", H.dir), *exit2 = h_fmt("%s/attach.exit", H.dir);
	pane(&t, "ex", args, exit1, true);
	free(wait_screen(&t, "t:ex", "start", 60));
	/* ^P^Q: detached, exit 0, the way back printed */
	keys(&t, "t:ex", "C-p", false);
	keys(&t, "t:ex", "C-q", false);
	char *code = wait_file(&t, "t:ex", exit1, 20);
	ck_assert_str_eq(code, "EXIT=0\n");
	free(code);
	char *s = wait_screen(&t, "t:ex", "[detached: cell attach ", 10);
	char *p = strstr(s, "[detached: cell attach ");
	char sid[80] = "";
	ck_assert_int_eq(sscanf(p, "[detached: cell attach %*s %79[^]]", sid), 1);
	free(s);

	/* attach: what was written before shows again, then it goes on live */
	char *aargs = h_fmt("attach %s %s", id, sid);
	pane(&t, "at", aargs, exit2, false);
	free(wait_screen(&t, "t:at", "start", 30));
	keys(&t, "t:at", "one", true);
	free(wait_screen(&t, "t:at", "later-one", 20));
	keys(&t, "t:at", "two", true);
	free(wait_screen(&t, "t:at", "got-two", 20));
	code = wait_file(&t, "t:at", exit2, 20);
	ck_assert_str_eq(code, "EXIT=5\n");
	free(code);
	tmux_stop(&t);

	/* attach removes no session (it may be an API client's): this one is there, ended */
	struct h_resp r;
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/pty/%s", id, sid);
	ck_assert_int_eq(h_http("GET", path, NULL, &r), 200);
	ck_assert_msg(strstr(r.body, "\"running\":false"), "%s", r.body);
	h_resp_free(&r);
	free(path);
	free(aargs);
	free(exit1);
	free(exit2);
	free(args);
	free(id);
}
END_TEST

/* A PTY session of sandbox id made through the API, running sh -c script once a client
 * attaches; its id (malloc'd). */
static char *api_session(const char *id, const char *script)
{
	char *path = h_fmt("/v1/sandboxes/%s/proxy/44772/pty", id);
	json_t *body = json_pack("{s:s}", "command", script);
	char *text = json_dumps(body, JSON_COMPACT);
	struct h_resp r;
	ck_assert_int_eq(h_http("POST", path, text, &r), 201);
	char *sid = strdup(h_jstr(r.json, "session_id"));
	ck_assert_msg(sid[0], "no session_id: %s", r.body);
	h_resp_free(&r);
	free(text);
	json_decref(body);
	free(path);
	return sid;
}

/* --takeover: the session another `cell attach` holds is taken; that one ends, exit 125,
 * saying so, and the process runs on for the new client. Without it, a second attach is
 * refused, naming the flag that would take it. */
START_TEST(attach_takeover_ends_the_other_client)
{
	struct tmux t;
	tmux_start(&t);
	char *id = h_create("busybox", NULL);
	char *sid = api_session(id, "sh -c 'echo start-$((6*7)); read x; echo got-$x; exit 5'");
	char *exit1 = h_fmt("%s/first.exit", H.dir), *exit2 = h_fmt("%s/second.exit", H.dir);
	char *args = h_fmt("attach %s %s", id, sid);
	pane(&t, "a", args, exit1, true);
	free(wait_screen(&t, "t:a", "start-42", 60));
	struct h_proc p;
	h_cell(&p, "attach", id, sid, NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "--takeover takes it over"),
		      "a second attach without --takeover: exit %d: %s", p.status, p.err);
	h_proc_free(&p);
	char *targs = h_fmt("attach --takeover %s %s", id, sid);
	pane(&t, "b", targs, exit2, false);
	free(wait_screen(&t, "t:b", "start-42", 30));
	char *code = wait_file(&t, "t:a", exit1, 20);
	ck_assert_str_eq(code, "EXIT=125\n");
	free(code);
	free(wait_screen(&t, "t:a", "another client took it over", 10));
	keys(&t, "t:b", "one", true);
	free(wait_screen(&t, "t:b", "got-one", 20));
	code = wait_file(&t, "t:b", exit2, 20);
	ck_assert_str_eq(code, "EXIT=5\n");
	free(code);
	tmux_stop(&t);
	free(targs);
	free(args);
	free(exit1);
	free(exit2);
	free(sid);
	free(id);
}
END_TEST

/* --no-replay: what the session wrote before the attach is not shown (a plain attach,
 * detached with ^P^Q, first proves it is kept), what it writes after is. */
START_TEST(attach_no_replay_shows_only_what_follows)
{
	struct tmux t;
	tmux_start(&t);
	char *id = h_create("busybox", NULL);
	char *sid = api_session(id, "sh -c 'echo early-$((6*7)); read x; echo late-$x; read y; "
				    "echo end-$y'");
	char *exit1 = h_fmt("%s/replay.exit", H.dir), *exit2 = h_fmt("%s/noreplay.exit", H.dir);
	char *args = h_fmt("attach %s %s", id, sid);
	pane(&t, "r", args, exit1, true);
	free(wait_screen(&t, "t:r", "early-42", 60));
	keys(&t, "t:r", "C-p", false);
	keys(&t, "t:r", "C-q", false);
	char *code = wait_file(&t, "t:r", exit1, 20);
	ck_assert_str_eq(code, "EXIT=0\n");
	free(code);
	char *nargs = h_fmt("attach --no-replay %s %s", id, sid);
	pane(&t, "n", nargs, exit2, false);
	/* Typed before the attach is up, it waits in the pane for cell to read it. */
	keys(&t, "t:n", "one", true);
	/* A replay would come before anything live: by now it would show. */
	char *s = wait_screen(&t, "t:n", "late-one", 30);
	ck_assert_msg(!strstr(s, "early-42"), "--no-replay showed the earlier output:\n%s", s);
	free(s);
	keys(&t, "t:n", "two", true);
	code = wait_file(&t, "t:n", exit2, 20);
	ck_assert_str_eq(code, "EXIT=0\n");
	free(code);
	tmux_stop(&t);
	free(nargs);
	free(args);
	free(exit1);
	free(exit2);
	free(sid);
	free(id);
}
END_TEST

START_TEST(exec_t_refusals)
{
	char *id = h_create("busybox", NULL);
	struct h_proc p;
	h_cell(&p, "exec", "-it", id, "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "not a terminal"), "exit %d: %s", p.status,
		      p.err);
	h_proc_free(&p);
	h_cell(&p, "exec", "-t", "--timeout", "5", id, "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "--timeout"), "exit %d: %s", p.status,
		      p.err);
	h_proc_free(&p);
	h_cell(&p, "exec", "-t", "-e", "A B=1", id, "--", "true", NULL);
	ck_assert_msg(p.status == 125 && strstr(p.err, "shell variable name"), "exit %d: %s",
		      p.status, p.err);
	h_proc_free(&p);
	free(id);
}
END_TEST

/* -i without -t: our stdin, piped, is the command's; 3 MB arrive whole (celld holds the
 * client back while the command has not read what came before); the exit code passes. */
START_TEST(exec_i_feeds_a_pipe)
{
	char *id = h_create("busybox", NULL);
	char *in = h_fmt("%s/input", H.dir);
	FILE *f = fopen(in, "w");
	ck_assert_ptr_nonnull(f);
	for (int i = 0; i < 300000; i++)
		fprintf(f, "line %06d\n", i); /* 12 bytes each */
	fclose(f);
	char *cmd = h_fmt("%s/cell --socket %s exec -i %s -- sh -c 'wc -c; exit 4' < %s", H.bin,
			  H.socket, id, in);
	char *argv[] = {"/bin/sh", "-c", cmd, NULL};
	struct h_proc p;
	h_run(argv, NULL, 120, &p);
	ck_assert_msg(p.status == 4, "exit %d: %s", p.status, p.err);
	ck_assert_msg(atol(p.out) == 3600000, "wc -c: %s", p.out);
	h_proc_free(&p);
	/* a slow reader: every line comes, in order */
	free(cmd);
	cmd = h_fmt("%s/cell --socket %s exec -i %s -- sh -c 'sleep 2; tail -n 1; exit 0' < %s",
		    H.bin, H.socket, id, in);
	argv[2] = cmd;
	h_run(argv, NULL, 120, &p);
	ck_assert_msg(p.status == 0, "exit %d: %s", p.status, p.err);
	ck_assert_str_eq(p.out, "line 299999\n");
	h_proc_free(&p);
	free(cmd);
	free(in);
	free(id);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("tty");
	tcase_add_test(h_tcase(s, "shell_on_a_real_terminal", 180), shell_on_a_real_terminal);
	tcase_add_test(h_tcase(s, "exec_it_detach_and_attach", 180), exec_it_detach_and_attach);
	tcase_add_test(h_tcase(s, "attach_takeover_ends_the_other_client", 180),
		       attach_takeover_ends_the_other_client);
	tcase_add_test(h_tcase(s, "attach_no_replay_shows_only_what_follows", 180),
		       attach_no_replay_shows_only_what_follows);
	tcase_add_test(h_tcase(s, "exec_t_refusals", 120), exec_t_refusals);
	tcase_add_test(h_tcase(s, "exec_i_feeds_a_pipe", 240), exec_i_feeds_a_pipe);
	return s;
}

int main(void)
{
	return h_main(suite());
}
