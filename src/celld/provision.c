/* A sandbox's provisioning at each start: packages, then the startup script, then each
 * skill (extracted through cell-init's file frames into a temp directory renamed into
 * place, then its entrypoint). Each step runs as root through the relay's EXEC, bounded
 * by cell.startupTimeout (cell-init kills its process group when it runs over), its output
 * (stdout and stderr together) kept to the last PROVISION_OUTPUT_MAX bytes.
 *
 * What already ran is recorded inside the sandbox, in PROVISION_STATE_FILE: {"packages":
 * <sha256 of the canonical list>, "startup": <sha256 of the script>, "skills": {name:
 * version}}, written after the steps; a step is recorded only when it succeeded, so a
 * failed one is tried again at the next start. An unreadable state file counts as empty.
 * Nothing here fails a start: the outcome is sb->provision_result. */
#include "events.h"
#include "provision.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cell/cleanup.h"
#include "cell/codec.h"
#include "cell/id.h"
#include "cell/log.h"
#include "cell/proto.h"
#include "commands.h"
#include "registry.h"
#include "relay.h"
#include "sandbox.h"
#include "skillpkg.h"
#include "skills.h"
#include "timefmt.h"

/* ---- the extensions ---- */

static int bad(struct cell_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bad(struct cell_error *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int r = cell_err_vmsg(err, EINVAL, fmt, ap);
	va_end(ap);
	return r;
}

/* A package name or spec a manager takes ("curl", "requests==2.31", "@scope/pkg@1.2",
 * "libfoo=1.2-3"): no shell meta-characters, no option. */
static bool package_valid(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n > PROVISION_PACKAGE_LEN || s[0] == '-' || s[0] == '~')
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		      strchr("._+:=@/~-", c)))
			return false;
	}
	return true;
}

static int parse_packages(const char *text, json_t **out, struct cell_error *err)
{
	json_error_t jerr;
	json_t *o = json_loads(text, JSON_REJECT_DUPLICATES, &jerr);
	if (!json_is_object(o)) {
		json_decref(o);
		return bad(err, "extensions.cell.packages must be a JSON object "
				"{\"apt\":[...],\"pip\":[...],\"npm\":[...]}");
	}
	const char *k;
	json_t *v;
	json_object_foreach(o, k, v)
	{
		if (strcmp(k, "apt") && strcmp(k, "pip") && strcmp(k, "npm")) {
			json_decref(o);
			return bad(err, "extensions.cell.packages.%.32s: only apt, pip and npm", k);
		}
		if (!json_is_array(v) || json_array_size(v) > PROVISION_PACKAGES_MAX) {
			json_decref(o);
			return bad(err,
				   "extensions.cell.packages.%s must be an array of at most %d "
				   "names",
				   k, PROVISION_PACKAGES_MAX);
		}
		size_t i;
		json_t *p;
		json_array_foreach(v, i, p)
		{
			if (!json_is_string(p) || !package_valid(json_string_value(p))) {
				json_decref(o);
				return bad(
				    err,
				    "extensions.cell.packages.%s[%zu] must be a package name "
				    "of 1-%d characters of [A-Za-z0-9._+:=@/~-], not starting "
				    "with '-'",
				    k, i, PROVISION_PACKAGE_LEN);
			}
		}
	}
	*out = o;
	return 0;
}

static int parse_skills(const char *text, const struct adm_principal *who, json_t **out,
			struct cell_error *err)
{
	json_t *arr = json_array();
	_cleanup_free_ char *buf = strdup(text);
	if (!arr || !buf) {
		json_decref(arr);
		return cell_err(err, ENOMEM, "extensions.cell.skills");
	}
	char *save = NULL;
	for (char *it = strtok_r(buf, ",", &save); it; it = strtok_r(NULL, ",", &save)) {
		while (*it == ' ')
			it++;
		char *end = it + strlen(it);
		while (end > it && end[-1] == ' ')
			*--end = '\0';
		char *at = strchr(it, '@');
		if (at)
			*at = '\0';
		const char *name = it, *version = at ? at + 1 : "";
		if (!at || !skill_name_valid(name, SKILL_NAME_MAX) ||
		    !skill_name_valid(version, SKILL_VERSION_MAX)) {
			json_decref(arr);
			return bad(err,
				   "extensions.cell.skills: '%.140s' is not name@version (each "
				   "1-64 characters of [A-Za-z0-9._-])",
				   it);
		}
		size_t i;
		json_t *s;
		json_array_foreach(arr, i, s)
		{
			if (!strcmp(json_string_value(json_object_get(s, "name")), name)) {
				json_decref(arr);
				return bad(err, "extensions.cell.skills names %s twice", name);
			}
		}
		if (json_array_size(arr) >= PROVISION_SKILLS_MAX) {
			json_decref(arr);
			return bad(err, "extensions.cell.skills: at most %d skills",
				   PROVISION_SKILLS_MAX);
		}
		char sha[CELL_SHA256_HEX_LEN + 1];
		int fd = skills_open(who, name, version, sha, err);
		if (fd < 0) {
			json_decref(arr);
			return fd == -ENOENT ? cell_err_msg(err, ENOENT,
							    "extensions.cell.skills: skill %s@%s "
							    "is not registered",
							    name, version)
					     : fd;
		}
		close(fd);
		json_array_append_new(arr, json_pack("{s:s, s:s, s:s}", "name", name, "version",
						     version, "sha256", sha));
	}
	if (json_array_size(arr) == 0) {
		json_decref(arr);
		return bad(err, "extensions.cell.skills names no skill");
	}
	*out = arr;
	return 0;
}

int provision_parse(json_t *ext, const struct adm_principal *who, json_t **out,
		    struct cell_error *err)
{
	*out = NULL;
	const char *script = json_string_value(json_object_get(ext, "cell.startupScript"));
	const char *timeout = json_string_value(json_object_get(ext, "cell.startupTimeout"));
	const char *packages = json_string_value(json_object_get(ext, "cell.packages"));
	const char *skills = json_string_value(json_object_get(ext, "cell.skills"));
	if (!script && !timeout && !packages && !skills)
		return 0;
	if (script && strlen(script) > PROVISION_SCRIPT_MAX)
		return bad(err, "extensions.cell.startupScript is larger than %u KiB",
			   PROVISION_SCRIPT_MAX >> 10);
	long long secs = PROVISION_TIMEOUT_DEFAULT;
	if (timeout) {
		char *end;
		errno = 0;
		secs = strtoll(timeout, &end, 10);
		if (!timeout[0] || *end || errno || timeout[0] == ' ')
			return bad(err,
				   "extensions.cell.startupTimeout must be a number of seconds "
				   "(1-%d)",
				   PROVISION_TIMEOUT_MAX);
		secs = secs < 1 ? 1 : secs > PROVISION_TIMEOUT_MAX ? PROVISION_TIMEOUT_MAX : secs;
	}
	json_t *o = json_pack("{s:I}", "startupTimeout", (json_int_t)secs);
	if (!o)
		return cell_err(err, ENOMEM, "extensions");
	if (script && script[0])
		json_object_set_new(o, "startupScript", json_string(script));
	json_t *v = NULL;
	int r = 0;
	if (packages && (r = parse_packages(packages, &v, err)) == 0)
		json_object_set_new(o, "packages", v);
	if (r == 0 && skills && (r = parse_skills(skills, who, &v, err)) == 0)
		json_object_set_new(o, "skills", v);
	if (r < 0) {
		json_decref(o);
		return r;
	}
	*out = o;
	return 0;
}

/* ---- running a step ---- */

struct run {
	int exit_code;	 /* -1 when it never started */
	bool timed_out;	 /* by cell-init's timer, or celld's guard */
	char error[256]; /* why it did not start or was cut off */
	int64_t duration_ms;
	char out[PROVISION_OUTPUT_MAX];
	size_t len;
	bool truncated;
};

static void keep_output(struct run *run, const uint8_t *data, size_t n)
{
	if (n >= sizeof(run->out)) {
		memcpy(run->out, data + n - sizeof(run->out), sizeof(run->out));
		run->len = sizeof(run->out);
		run->truncated = true;
		return;
	}
	if (run->len + n > sizeof(run->out)) {
		size_t drop = run->len + n - sizeof(run->out);
		memmove(run->out, run->out + drop, run->len - drop);
		run->len -= drop;
		run->truncated = true;
	}
	memcpy(run->out + run->len, data, n);
	run->len += n;
}

/* argv (strings; the reference is taken) as root in cwd with envs, bounded by timeout_s; the
 * outcome in *run. */
static void run_step(struct sandbox *sb, json_t *argv, const char *cwd, json_t *envs,
		     int64_t timeout_s, struct run *run)
{
	memset(run, 0, sizeof(*run));
	run->exit_code = -1;
	int64_t t0 = celld_now_ms();
	_cleanup_free_ char *content = NULL;
	json_t *req =
	    argv ? command_exec_request(sb, NULL, argv, envs, cwd, timeout_s * 1000, 0, 0, &content)
		 : NULL;
	json_decref(argv);
	struct cell_error err = {0};
	struct relay_budget b = RELAY_BUDGET_INIT;
	if (!req) {
		snprintf(run->error, sizeof(run->error), "out of memory");
		return;
	}
	int fd = relay_connect(sb, &b, &err);
	if (fd < 0) {
		json_decref(req);
		snprintf(run->error, sizeof(run->error), "%.250s", err.msg);
		return;
	}
	pid_t pid;
	struct relay_error rerr;
	int r = relay_exec_start(fd, CELL_FRAME_EXEC, req, &pid, &rerr, &b, &err);
	json_decref(req);
	if (r != 0) {
		snprintf(run->error, sizeof(run->error), "%.250s", r == 1 ? rerr.message : err.msg);
		close(fd);
		return;
	}
	/* cell-init ends it at its timeout; this guard covers an init that does not. */
	int64_t deadline = t0 + timeout_s * 1000 + 15000;
	struct relay_reader rd = {0};
	for (;;) {
		int64_t left = deadline - celld_now_ms();
		int w = left > 0 ? relay_wait(fd, left > INT_MAX ? INT_MAX : (int)left) : 0;
		if (w == 0) {
			relay_signal(fd, SIGKILL, &err);
			run->timed_out = true;
			snprintf(run->error, sizeof(run->error), "no exit within %lld s",
				 (long long)timeout_s);
			break;
		}
		struct relay_event ev;
		if (w < 0 || relay_exec_read(fd, &rd, &ev, &err) < 0) {
			snprintf(run->error, sizeof(run->error), "lost cell-init: %.200s",
				 w < 0 ? strerror(-w) : err.msg);
			break;
		}
		if (ev.kind == RELAY_EV_STDOUT || ev.kind == RELAY_EV_STDERR) {
			keep_output(run, ev.frame.payload, ev.frame.len);
		} else if (ev.kind == RELAY_EV_EXIT) {
			run->exit_code = relay_exit_code(&ev.exit);
			run->timed_out = ev.exit.timed_out;
			break;
		}
	}
	relay_reader_free(&rd);
	close(fd);
	run->duration_ms = celld_now_ms() - t0;
}

/* The last n bytes of run's output as a JSON string: control characters (but newline and
 * tab) become '?', so that the record stays small (no \u escapes); bytes that are not
 * UTF-8 (or a character cut at the start) make it printable ASCII. */
static json_t *output_json(const struct run *run, size_t n)
{
	const char *from = run->out + run->len - n;
	_cleanup_free_ char *copy = calloc(1, n + 1);
	if (!copy)
		return json_string("");
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)from[i];
		copy[i] = (c < 0x20 && c != '\n' && c != '\t') || c == 0x7f ? '?' : (char)c;
	}
	json_t *s = json_stringn(copy, n);
	if (s)
		return s;
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)copy[i] >= 0x80)
			copy[i] = '?';
	return json_stringn(copy, n);
}

static const char *run_status(const struct run *run)
{
	return run->timed_out ? "timeout" : run->exit_code == 0 ? "ok" : "failed";
}

/* budget: what is left of PROVISION_OUTPUT_TOTAL for the outputs of this run's steps. */
static json_t *step_json(const char *step, const char *name, const struct run *run, size_t *budget)
{
	size_t n = run->len < *budget ? run->len : *budget;
	*budget -= n;
	json_t *o =
	    json_pack("{s:s, s:s, s:I, s:o, s:b}", "step", step, "status", run_status(run),
		      "durationMs", (json_int_t)run->duration_ms, "output", output_json(run, n),
		      "outputTruncated", run->truncated || n < run->len);
	if (!o)
		return NULL;
	if (name)
		json_object_set_new(o, "name", json_string(name));
	json_object_set_new(o, "exitCode",
			    run->timed_out	  ? json_string("timeout")
			    : run->exit_code >= 0 ? json_integer(run->exit_code)
						  : json_null());
	if (run->error[0])
		json_object_set_new(o, "error", json_string(run->error));
	return o;
}

static json_t *skipped_json(const char *step, const char *name, const char *why)
{
	json_t *o = json_pack("{s:s, s:s, s:s}", "step", step, "status", "skipped", "why", why);
	if (o && name)
		json_object_set_new(o, "name", json_string(name));
	return o;
}

/* The short text of a failed step ("startup script exited with 3"). */
static void run_text(const char *what, const struct run *run, char *buf, size_t size)
{
	if (run->timed_out)
		snprintf(buf, size, "%s timed out", what);
	else if (run->exit_code >= 0)
		snprintf(buf, size, "%s exited with %d", what, run->exit_code);
	else
		snprintf(buf, size, "%s did not run: %.200s", what, run->error);
}

/* ---- the state file inside the sandbox ---- */

static json_t *state_read(struct sandbox *sb, char *note, size_t note_size)
{
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct cell_error err = {0};
	struct relay_error rerr;
	struct relay_stat st;
	int fd;
	note[0] = '\0';
	int r = relay_file_read(sb, PROVISION_STATE_FILE, 0, 64 << 10, &fd, &st, &rerr, &b, &err);
	if (r == 1 && rerr.errnum == ENOENT)
		return json_object();
	if (r != 0) {
		snprintf(note, note_size, "state file unreadable (%.200s): everything runs again",
			 r == 1 ? rerr.message : err.msg);
		return json_object();
	}
	char buf[64 << 10];
	size_t len = 0;
	struct cell_frame f;
	while ((r = relay_file_read_next(fd, &f, &err)) == 1) {
		if (len + f.len <= sizeof(buf)) {
			memcpy(buf + len, f.payload, f.len);
			len += f.len;
		}
		cell_frame_free(&f);
	}
	close(fd);
	json_t *o = r == 0 ? json_loadb(buf, len, 0, NULL) : NULL;
	if (!json_is_object(o)) {
		json_decref(o);
		snprintf(note, note_size, "state file %s is corrupt: everything runs again",
			 PROVISION_STATE_FILE);
		return json_object();
	}
	return o;
}

static int relay_op(struct sandbox *sb, uint16_t type, json_t *req, char *why, size_t size)
{
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct cell_error err = {0};
	struct relay_error rerr;
	json_t *ok = NULL;
	int r = relay_file_op(sb, type, req, &ok, &rerr, &b, &err);
	json_decref(req);
	json_decref(ok);
	if (r == 1)
		snprintf(why, size, "%.200s", rerr.message);
	else if (r < 0)
		snprintf(why, size, "%.200s", err.msg);
	return r == 0 ? 0 : -EIO;
}

static int write_file(struct sandbox *sb, const char *path, const char *text, char *why,
		      size_t size)
{
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct cell_error err = {0};
	struct relay_error rerr;
	json_t *req = json_pack("{s:s, s:i}", "path", path, "mode", 0600);
	int fd;
	int r = relay_file_write(sb, req, &fd, &b, &err);
	json_decref(req);
	if (r == 0 && text[0] &&
	    cell_frame_send(fd, CELL_FRAME_DATA, text, (uint32_t)strlen(text), &err) < 0)
		r = -EIO;
	int64_t n;
	if (r == 0)
		r = relay_file_write_end(fd, &n, &rerr, &b, &err);
	if (fd >= 0)
		close(fd);
	if (r == 1)
		snprintf(why, size, "%.200s", rerr.message);
	else if (r < 0)
		snprintf(why, size, "%.200s", err.msg);
	return r == 0 ? 0 : -EIO;
}

static void state_write(struct sandbox *sb, json_t *state)
{
	char why[256] = "";
	_cleanup_free_ char *text = json_dumps(state, JSON_COMPACT | JSON_SORT_KEYS);
	if (!text ||
	    relay_op(sb, CELL_FRAME_FILE_MKDIR,
		     json_pack("{s:s, s:i}", "path", "/root/.cell", "mode", 0700), why,
		     sizeof(why)) < 0 ||
	    write_file(sb, PROVISION_STATE_FILE, text, why, sizeof(why)) < 0)
		log_warn("sandbox %s: writing %s: %s", sb->id, PROVISION_STATE_FILE,
			 text ? why : "out of memory");
}

/* ---- steps ---- */

/* bash where the image has it, else sh. */
static const char *shell_of(struct sandbox *sb)
{
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct relay_stat st;
	struct relay_error rerr;
	struct cell_error err = {0};
	if (relay_file_stat(sb, "/bin/bash", &st, &rerr, &b, &err) == 0)
		return "/bin/bash";
	return "/bin/sh";
}

static json_t *argv3(const char *a, const char *b, const char *c)
{
	return c ? json_pack("[s, s, s]", a, b, c) : json_pack("[s, s]", a, b);
}

static void sha_of(const char *text, char hex[CELL_SHA256_HEX_LEN + 1])
{
	cell_sha256_hex(text, strlen(text), hex);
}

struct outcome {
	json_t *steps;
	size_t output_left; /* of PROVISION_OUTPUT_TOTAL */
	char reason[32];
	char message[512];
};

/* A step's outcome, kept for the record and told at once as the sandbox's "provision"
 * event (the progress a UI shows while the sandbox starts). */
static void add_step(struct sandbox *sb, struct outcome *oc, json_t *step)
{
	if (!step)
		return;
	events_emit(sb->id, "provision", json_deep_copy(step));
	json_array_append_new(oc->steps, step);
}

static void failed(struct sandbox *sb, struct outcome *oc, const char *reason, const char *text)
{
	log_warn("sandbox %s: %s", sb->id, text);
	if (!oc->reason[0]) {
		snprintf(oc->reason, sizeof(oc->reason), "%s", reason);
		snprintf(oc->message, sizeof(oc->message), "%s", text);
	}
}

/* One shell command per manager, names single-quoted (they hold no quote: package_valid). */
static char *packages_script(json_t *pk)
{
	static const struct {
		const char *key, *fmt;
	} mgr[] = {
	    {"apt", "export DEBIAN_FRONTEND=noninteractive; apt-get install -y -q %s || { "
		    "apt-get update -q && apt-get install -y -q %s; }\n"},
	    {"pip", "if command -v pip3 >/dev/null; then pip3 install %s; else pip install %s; "
		    "fi\n"},
	    {"npm", "npm install -g %s%s\n"},
	};
	size_t cap = 256 + 3 * 2 * PROVISION_PACKAGES_MAX * (PROVISION_PACKAGE_LEN + 3);
	char *script = calloc(1, cap),
	     list[PROVISION_PACKAGES_MAX * (PROVISION_PACKAGE_LEN + 3) + 1];
	if (!script)
		return NULL;
	size_t pos = snprintf(script, cap, "set -e\n");
	for (size_t m = 0; m < CELL_ARRAY_SIZE(mgr); m++) {
		json_t *arr = json_object_get(pk, mgr[m].key);
		if (!json_array_size(arr))
			continue;
		size_t l = 0, i;
		json_t *p;
		list[0] = '\0';
		json_array_foreach(arr, i, p) l += snprintf(list + l, sizeof(list) - l, "%s'%s'",
							    i ? " " : "", json_string_value(p));
		pos += snprintf(script + pos, cap - pos, mgr[m].fmt, list,
				strcmp(mgr[m].key, "npm") ? list : "");
	}
	return script;
}

static void step_packages(struct sandbox *sb, json_t *spec, json_t *state, int64_t timeout,
			  struct outcome *oc)
{
	json_t *pk = json_object_get(spec, "packages");
	if (!pk)
		return;
	_cleanup_free_ char *canon = json_dumps(pk, JSON_COMPACT | JSON_SORT_KEYS);
	_cleanup_free_ char *script = packages_script(pk);
	if (!canon || !script)
		return;
	char sha[CELL_SHA256_HEX_LEN + 1];
	sha_of(canon, sha);
	if (!strcmp(json_string_value(json_object_get(state, "packages")) ?: "", sha)) {
		log_info("sandbox %s: packages already installed (%.12s)", sb->id, sha);
		add_step(sb, oc, skipped_json("packages", NULL, "installed before"));
		return;
	}
	log_info("sandbox %s: installing packages %s", sb->id, canon);
	struct run *run = malloc(sizeof(*run));
	if (!run)
		return;
	run_step(sb, argv3("/bin/sh", "-c", script), "/", NULL, timeout, run);
	add_step(sb, oc, step_json("packages", NULL, run, &oc->output_left));
	log_info("sandbox %s: packages %s in %lld ms", sb->id, run_status(run),
		 (long long)run->duration_ms);
	if (run->exit_code == 0 && !run->timed_out) {
		json_object_set_new(state, "packages", json_string(sha));
	} else {
		char text[400];
		run_text("package installation", run, text, sizeof(text));
		failed(sb, oc, "PackagesFailed", text);
	}
	free(run);
}

static void step_startup(struct sandbox *sb, json_t *spec, json_t *state, int64_t timeout,
			 const char *shell, struct outcome *oc)
{
	const char *script = json_string_value(json_object_get(spec, "startupScript"));
	if (!script)
		return;
	char sha[CELL_SHA256_HEX_LEN + 1];
	sha_of(script, sha);
	if (!strcmp(json_string_value(json_object_get(state, "startup")) ?: "", sha)) {
		log_info("sandbox %s: startup script unchanged (%.12s): skipped", sb->id, sha);
		add_step(sb, oc, skipped_json("startup", NULL, "unchanged"));
		return;
	}
	char why[256] = "";
	if (relay_op(sb, CELL_FRAME_FILE_MKDIR, json_pack("{s:s}", "path", "/workspace"), why,
		     sizeof(why)) < 0)
		log_warn("sandbox %s: making /workspace: %s", sb->id, why);
	log_info("sandbox %s: running its startup script (%.12s, %s, %lld s)", sb->id, sha, shell,
		 (long long)timeout);
	struct run *run = malloc(sizeof(*run));
	if (!run)
		return;
	run_step(sb, argv3(shell, "-c", script), "/workspace", NULL, timeout, run);
	add_step(sb, oc, step_json("startup", NULL, run, &oc->output_left));
	log_info("sandbox %s: startup script %s (exit %d) in %lld ms", sb->id, run_status(run),
		 run->exit_code, (long long)run->duration_ms);
	if (run->exit_code == 0 && !run->timed_out) {
		json_object_set_new(state, "startup", json_string(sha));
	} else {
		char text[400];
		run_text("startup script", run, text, sizeof(text));
		failed(sb, oc, "StartupScriptFailed", text);
	}
	free(run);
}

/* ---- a skill's files, written through the relay ---- */

struct install {
	struct sandbox *sb;
	const char *base; /* the temp directory */
	int fd;		  /* the open FILE_WRITE, -1 when none */
	struct relay_budget b;
	uint8_t *chunk;
	size_t clen;
	char path[PATH_MAX];
	char why[300];
};

static int inst_fail(struct install *in, const char *detail)
{
	snprintf(in->why, sizeof(in->why), "%.150s: %.140s", in->path, detail);
	return -EIO;
}

static int inst_begin(void *cls, const struct skillpkg_entry *e)
{
	struct install *in = cls;
	snprintf(in->path, sizeof(in->path), "%s/%s", in->base, e->path);
	in->b = (struct relay_budget)RELAY_BUDGET_INIT;
	char why[256];
	if (e->kind == SKILLPKG_DIR) {
		if (relay_op(in->sb, CELL_FRAME_FILE_MKDIR,
			     json_pack("{s:s, s:i}", "path", in->path, "mode", e->mode), why,
			     sizeof(why)) < 0)
			return inst_fail(in, why);
		return 0;
	}
	struct cell_error err = {0};
	json_t *req = json_pack("{s:s, s:i}", "path", in->path, "mode", e->mode);
	int r = relay_file_write(in->sb, req, &in->fd, &in->b, &err);
	json_decref(req);
	in->clen = 0;
	return r < 0 ? inst_fail(in, err.msg) : 0;
}

static int inst_flush(struct install *in)
{
	if (!in->clen)
		return 0;
	struct relay_error rerr;
	struct cell_error err = {0};
	int t = relay_take_error(in->fd, &rerr, 0);
	if (t == 1)
		return inst_fail(in, rerr.message);
	if (t < 0 ||
	    cell_frame_send(in->fd, CELL_FRAME_DATA, in->chunk, (uint32_t)in->clen, &err) < 0) {
		if (relay_take_error(in->fd, &rerr, 1000) == 1)
			return inst_fail(in, rerr.message);
		return inst_fail(in, t < 0 ? "protocol violation" : err.msg);
	}
	in->clen = 0;
	return 0;
}

static int inst_data(void *cls, const void *buf, size_t len)
{
	struct install *in = cls;
	while (len) {
		size_t n = CELL_FRAME_CHUNK - in->clen < len ? CELL_FRAME_CHUNK - in->clen : len;
		memcpy(in->chunk + in->clen, buf, n);
		in->clen += n;
		buf = (const char *)buf + n;
		len -= n;
		if (in->clen == CELL_FRAME_CHUNK && inst_flush(in) < 0)
			return -EIO;
	}
	return 0;
}

static int inst_end(void *cls)
{
	struct install *in = cls;
	int r = inst_flush(in);
	struct relay_error rerr;
	struct cell_error err = {0};
	int64_t size;
	if (r == 0) {
		r = relay_file_write_end(in->fd, &size, &rerr, &in->b, &err);
		if (r == 1)
			r = inst_fail(in, rerr.message);
		else if (r < 0)
			r = inst_fail(in, err.msg);
	}
	close(in->fd);
	in->fd = -1;
	return r;
}

static const struct skillpkg_ops inst_ops = {inst_begin, inst_data, inst_end};

struct leftovers {
	json_t *names;
};

static int each_leftover(void *cls, const char *path, const struct relay_stat *st)
{
	(void)st;
	struct leftovers *l = cls;
	const char *base = strrchr(path, '/');
	base = base ? base + 1 : path;
	if (!strncmp(base, ".tmp-", 5))
		json_array_append_new(l->names, json_string(path));
	return 0;
}

/* name@version's files into vdir through <name dir>/.tmp-<version>-<random> and a rename:
 * 0, or -EIO with why. The archive is looked up as the sandbox's owner may, and hashed
 * before a byte of it is extracted: anything but the sha256 the sandbox recorded at its
 * create (want; a record from before: the registry's) is refused, so an archive changed
 * on disk never runs as root in it. */
static int extract_skill(struct sandbox *sb, const char *name, const char *version,
			 const char *want, const char *ndir, const char *vdir, char *why,
			 size_t why_size)
{
	struct cell_error err = {0};
	char registered[CELL_SHA256_HEX_LEN + 1], got[CELL_SHA256_HEX_LEN + 1] = "";
	int afd = skills_open(sb->owner, name, version, registered, &err);
	if (afd < 0) {
		snprintf(why, why_size, "%.250s", err.msg);
		return -EIO;
	}
	if (!want)
		want = registered;
	if (skills_sha256_fd(afd, got, &err) < 0 || strcmp(got, want)) {
		if (got[0] && strcmp(got, want))
			snprintf(why, why_size,
				 "the archive's sha256 is %s, not the %s this sandbox installs: "
				 "nothing installed",
				 got, want);
		else
			snprintf(why, why_size, "%.250s", err.msg);
		log_warn("sandbox %s: skill %s@%s: %s", sb->id, name, version, why);
		close(afd);
		return -EIO;
	}
	char w[256] = "";
	if (relay_op(sb, CELL_FRAME_FILE_MKDIR, json_pack("{s:s, s:i}", "path", ndir, "mode", 0755),
		     w, sizeof(w)) < 0) {
		close(afd);
		snprintf(why, why_size, "making %s: %s", ndir, w);
		return -EIO;
	}
	/* A leftover of an extraction cut short (celld or the sandbox died) goes first. */
	struct leftovers l = {json_array()};
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct relay_error rerr;
	json_t *lreq = json_pack("{s:s, s:i}", "path", ndir, "depth", 1);
	if (l.names && lreq)
		relay_file_list(sb, lreq, 1024, each_leftover, &l, &rerr, &b, &err);
	json_decref(lreq);
	size_t i;
	json_t *p;
	json_array_foreach(l.names, i, p)
	{
		log_info("sandbox %s: removing the leftover %s", sb->id, json_string_value(p));
		relay_op(sb, CELL_FRAME_FILE_REMOVE,
			 json_pack("{s:s, s:b}", "path", json_string_value(p), "recursive", true),
			 w, sizeof(w));
	}
	json_decref(l.names);
	char rnd[CELL_ID_RANDOM_LEN + 1] = "0";
	cell_id_random(rnd);
	char tmp[512];
	snprintf(tmp, sizeof(tmp), "%.256s/.tmp-%.64s-%s", ndir, version, rnd);
	struct install in = {.sb = sb, .base = tmp, .fd = -1, .chunk = malloc(CELL_FRAME_CHUNK)};
	int r = in.chunk ? 0 : -ENOMEM;
	if (r == 0 &&
	    relay_op(sb, CELL_FRAME_FILE_MKDIR, json_pack("{s:s, s:i}", "path", tmp, "mode", 0755),
		     w, sizeof(w)) < 0) {
		snprintf(in.why, sizeof(in.why), "making %.150s: %.120s", tmp, w);
		r = -EIO;
	}
	struct skillpkg_info info;
	if (r == 0 && (r = skillpkg_scan(afd, &inst_ops, &in, &info, &err)) < 0 && !in.why[0])
		snprintf(in.why, sizeof(in.why), "%.290s", err.msg);
	if (in.fd >= 0)
		close(in.fd);
	close(afd);
	free(in.chunk);
	if (r == 0 &&
	    relay_op(sb, CELL_FRAME_FILE_MOVE, json_pack("{s:s, s:s}", "src", tmp, "dest", vdir), w,
		     sizeof(w)) < 0) {
		snprintf(in.why, sizeof(in.why), "renaming the temp directory to %.120s: %.120s",
			 vdir, w);
		r = -EIO;
	}
	if (r < 0) {
		relay_op(sb, CELL_FRAME_FILE_REMOVE,
			 json_pack("{s:s, s:b}", "path", tmp, "recursive", true), w, sizeof(w));
		snprintf(why, why_size, "%s", in.why[0] ? in.why : "out of memory");
		return -EIO;
	}
	log_info("sandbox %s: skill %s@%s extracted into %s (%u entries, %llu bytes)", sb->id, name,
		 version, vdir, info.entries, (unsigned long long)info.total);
	return 0;
}

static void step_skill(struct sandbox *sb, json_t *skill, json_t *state, int64_t timeout,
		       const char *shell, struct outcome *oc)
{
	const char *name = json_string_value(json_object_get(skill, "name"));
	const char *version = json_string_value(json_object_get(skill, "version"));
	const char *sha = json_string_value(json_object_get(skill, "sha256"));
	if (!name || !version)
		return;
	char label[160], ndir[256], vdir[400];
	snprintf(label, sizeof(label), "%s@%s", name, version);
	snprintf(ndir, sizeof(ndir), PROVISION_SKILLS_DIR "/%s", name);
	snprintf(vdir, sizeof(vdir), "%s/%s", ndir, version);
	json_t *done = json_object_get(json_object_get(state, "skills"), name);
	if (!strcmp(json_string_value(done) ?: "", version)) {
		log_info("sandbox %s: skill %s installed before: skipped", sb->id, label);
		add_step(sb, oc, skipped_json("skill", label, "installed before"));
		return;
	}
	struct relay_budget b = RELAY_BUDGET_INIT;
	struct relay_stat st;
	struct relay_error rerr;
	struct cell_error err = {0};
	bool present =
	    relay_file_stat(sb, vdir, &st, &rerr, &b, &err) == 0 && !strcmp(st.type, "directory");
	char why[400];
	if (!present && extract_skill(sb, name, version, sha, ndir, vdir, why, sizeof(why)) < 0) {
		char text[480];
		snprintf(text, sizeof(text), "skill %.140s: extraction failed: %.300s", label, why);
		json_t *o = json_pack("{s:s, s:s, s:s, s:s}", "step", "skill", "name", label,
				      "status", "failed", "error", why);
		add_step(sb, oc, o);
		failed(sb, oc, "SkillFailed", text);
		return;
	}
	json_t *envs = json_pack("{s:s, s:s, s:s}", "CELL_SKILL_DIR", vdir, "CELL_SKILL_NAME", name,
				 "CELL_SKILL_VERSION", version);
	struct run *run = malloc(sizeof(*run));
	if (!run) {
		json_decref(envs);
		return;
	}
	log_info("sandbox %s: running skill %s's entrypoint", sb->id, label);
	run_step(sb, argv3(shell, "entrypoint.sh", NULL), vdir, envs, timeout, run);
	json_decref(envs);
	add_step(sb, oc, step_json("skill", label, run, &oc->output_left));
	log_info("sandbox %s: skill %s %s (exit %d) in %lld ms", sb->id, label, run_status(run),
		 run->exit_code, (long long)run->duration_ms);
	if (run->exit_code == 0 && !run->timed_out) {
		json_t *sk = json_object_get(state, "skills");
		if (!json_is_object(sk)) {
			sk = json_object();
			json_object_set_new(state, "skills", sk);
		}
		json_object_set_new(sk, name, json_string(version));
	} else {
		char what[200], text[400];
		snprintf(what, sizeof(what), "skill %s's entrypoint", label);
		run_text(what, run, text, sizeof(text));
		failed(sb, oc, "SkillFailed", text);
	}
	free(run);
}

static void provision_run_spec(struct sandbox *sb, json_t *spec);

void provision_run(struct sandbox *sb)
{
	/* Replaced whole (never changed in place) by a create-or-resume naming another. */
	registry_lock();
	json_t *spec = json_incref(sb->provision);
	registry_unlock();
	if (!spec)
		return;
	provision_run_spec(sb, spec);
	json_decref(spec);
}

static void provision_run_spec(struct sandbox *sb, json_t *spec)
{
	int64_t t0 = celld_now_ms();
	time_t started = time(NULL);
	int64_t timeout = json_integer_value(json_object_get(spec, "startupTimeout"));
	if (timeout < 1)
		timeout = PROVISION_TIMEOUT_DEFAULT;
	struct outcome oc = {.steps = json_array(), .output_left = PROVISION_OUTPUT_TOTAL};
	char note[300];
	json_t *state = state_read(sb, note, sizeof(note));
	if (!oc.steps || !state) {
		json_decref(oc.steps);
		json_decref(state);
		return;
	}
	if (note[0])
		log_warn("sandbox %s: %s", sb->id, note);
	json_t *before = json_deep_copy(state);
	const char *shell = shell_of(sb);
	step_packages(sb, spec, state, timeout, &oc);
	step_startup(sb, spec, state, timeout, shell, &oc);
	size_t i;
	json_t *skill;
	json_array_foreach(json_object_get(spec, "skills"), i, skill)
	    step_skill(sb, skill, state, timeout, shell, &oc);
	if (!json_equal(before, state) || note[0])
		state_write(sb, state);
	json_decref(before);
	json_decref(state);
	json_t *res = json_pack("{s:o, s:I, s:o}", "startedAt", celld_time_json(started),
				"durationMs", (json_int_t)(celld_now_ms() - t0), "steps", oc.steps);
	if (res && oc.reason[0]) {
		json_object_set_new(res, "reason", json_string(oc.reason));
		json_object_set_new(res, "message", json_string(oc.message));
	}
	if (res && note[0])
		json_object_set_new(res, "note", json_string(note));
	log_info("sandbox %s: provisioned in %lld ms%s%s", sb->id, (long long)(celld_now_ms() - t0),
		 oc.reason[0] ? ": " : "", oc.message);
	registry_lock();
	json_t *old = sb->provision_result;
	sb->provision_result = res;
	registry_unlock();
	json_decref(old);
}

json_t *provision_inspect_json(struct sandbox *sb)
{
	registry_lock();
	json_t *spec = json_incref(sb->provision);
	json_t *res = spec ? json_incref(sb->provision_result) : NULL;
	registry_unlock();
	if (!spec)
		return json_null();
	json_t *o = json_pack("{s:O, s:O?, s:O?, s:o}", "startupTimeout",
			      json_object_get(spec, "startupTimeout"), "packages",
			      json_object_get(spec, "packages"), "skills",
			      json_object_get(spec, "skills"), "last", res ? res : json_null());
	const char *script = json_string_value(json_object_get(spec, "startupScript"));
	if (o && script) {
		char sha[CELL_SHA256_HEX_LEN + 1];
		sha_of(script, sha);
		json_object_set_new(
		    o, "startupScript",
		    json_pack("{s:I, s:s}", "size", (json_int_t)strlen(script), "sha256", sha));
	}
	json_decref(spec);
	return o ? o : json_null();
}

const char *provision_reason(json_t *result)
{
	return json_string_value(json_object_get(result, "reason"));
}

const char *provision_message(json_t *result)
{
	return json_string_value(json_object_get(result, "message"));
}
