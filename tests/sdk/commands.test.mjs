// Commands beyond the main round: bash sessions (createSession, runInSession,
// deleteSession, as OpenSandbox's own e2e suite calls them; one shell per session) and a
// command run as the ordinary account `user` by its uid alone.

import { describe, it } from "node:test";
import assert from "node:assert/strict";

import {
	STEP_MS,
	createSandbox,
	errOut,
	out,
	rejectsWith,
	skip,
	stopsCleanly,
	useCelld,
} from "./harness.mjs";

const text = (r) => r.logs.stdout.map((m) => m.text).join("\n");

describe("commands: bash sessions and users", { skip }, () => {
	let sbx;

	useCelld();

	it("creates a sandbox with the default image's account `user` (uid/gid 1000)", { timeout: STEP_MS }, async () => {
		sbx = await createSandbox();
		const r = await sbx.commands.run(
			"mkdir -p /home/user && chown 1000:1000 /home/user && " +
				"echo 'user:x:1000:1000:user:/home/user:/bin/sh' >> /etc/passwd && " +
				"echo 'user:x:1000:' >> /etc/group",
		);
		assert.equal(r.exitCode, 0, errOut(r));
	});

	// uid alone: the primary group from the sandbox's passwd, as execd takes it.
	it("runs a command as `user` by its uid alone: its group, its home, no root", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("id -un; id -g; echo $HOME; touch /root/x 2>/dev/null || echo denied", {
			uid: 1000,
		});
		assert.equal(errOut(r), "");
		assert.equal(out(r), "user\n1000\n/home/user\ndenied\n");
	});

	it("keeps a session's exported variables and working directory between runs", { timeout: STEP_MS }, async () => {
		const sid = await sbx.commands.createSession({ workingDirectory: "/tmp/s1/new" });
		assert.match(sid, /^[a-z0-9-]+$/);
		let r = await sbx.commands.runInSession(sid, "pwd");
		assert.equal(r.exitCode, 0, errOut(r));
		assert.equal(text(r), "/tmp/s1/new", "the session's directory, made when missing");
		r = await sbx.commands.runInSession(sid, "export S1=\"it's kept\"; cd /tmp; V=local");
		assert.equal(r.exitCode, 0, errOut(r));
		r = await sbx.commands.runInSession(sid, "pwd; echo \"$S1|$V\"");
		assert.equal(text(r), "/tmp\nit's kept|local", "exported and unexported kept: one shell");
		r = await sbx.commands.runInSession(sid, "pwd", { workingDirectory: "/" });
		assert.equal(text(r), "/", "a run's directory wins");
		r = await sbx.commands.runInSession(sid, "pwd");
		assert.equal(text(r), "/", "and stays, as a cd would");

		// A failing run: error CommandExecError with the exit status, no execution_complete.
		r = await sbx.commands.runInSession(sid, "echo out; echo err >&2; sh -c 'exit 7'");
		assert.equal(r.exitCode, 7);
		assert.equal(r.error?.name, "CommandExecError");
		assert.equal(r.error?.value, "7");
		assert.equal(r.complete, undefined);
		assert.equal(out(r), "out\n");
		assert.equal(errOut(r), "err\n");

		// A second session is apart from the first.
		const sid2 = await sbx.commands.createSession();
		assert.notEqual(sid2, sid);
		r = await sbx.commands.runInSession(sid2, "echo \"[$S1]\"");
		assert.equal(text(r), "[]");

		r = await sbx.commands.runInSession(sid, "echo $$");
		const shell = text(r);
		assert.match(shell, /^[0-9]+$/);
		await sbx.commands.deleteSession(sid);
		await sbx.commands.deleteSession(sid2);
		await rejectsWith(sbx.commands.runInSession(sid, "true"), 404, "SESSION_NOT_FOUND");
		await rejectsWith(sbx.commands.deleteSession(sid), 404, "SESSION_NOT_FOUND");
		r = await sbx.commands.run(
			`i=0; while [ -d /proc/${shell} ] && ! grep -q '^State:.*Z' /proc/${shell}/status && [ $i -lt 100 ]; ` +
				`do usleep 50000 2>/dev/null || sleep 1; i=$((i+1)); done; [ -d /proc/${shell} ] && ! grep -q '^State:.*Z' /proc/${shell}/status && echo alive || echo gone`,
		);
		assert.equal(out(r), "gone\n", "a deleted session's shell is killed");
	});

	it("quotes a session's directory: spaces and quotes kept", { timeout: STEP_MS }, async () => {
		const dir = "/tmp/it's a \"dir\" $(x)";
		const sid = await sbx.commands.createSession({ workingDirectory: dir });
		let r = await sbx.commands.runInSession(sid, "pwd");
		assert.equal(text(r), dir);
		r = await sbx.commands.runInSession(sid, "cd ..; pwd", { workingDirectory: `${dir}/` });
		assert.equal(text(r), "/tmp");
		await sbx.commands.deleteSession(sid);
	});

	it("honours a run's timeout in a session", { timeout: STEP_MS }, async () => {
		const sid = await sbx.commands.createSession();
		const r = await sbx.commands.runInSession(sid, "echo a; sleep 30", { timeoutSeconds: 1 });
		assert.equal(out(r), "a\n");
		assert.equal(r.exitCode, 124);
		await sbx.commands.deleteSession(sid);
	});

	it("refuses bad session requests with 400 or 404", { timeout: STEP_MS }, async () => {
		await rejectsWith(sbx.commands.runInSession("no-such-session", "true"), 404, "SESSION_NOT_FOUND");
		await rejectsWith(sbx.commands.createSession({ workingDirectory: "relative" }), 400, "INVALID_ARGUMENT");
		const sid = await sbx.commands.createSession();
		await rejectsWith(sbx.commands.runInSession(sid, "pwd", { workingDirectory: "x/y" }), 400, "INVALID_ARGUMENT");
		await sbx.commands.deleteSession(sid);
	});

	// One shell per session: functions and options stay, a timeout kills the run's command
	// and not the shell, a second session is another shell.
	it("keeps a session's shell: functions, options, the same $$ after a timeout", { timeout: STEP_MS }, async () => {
		const sid = await sbx.commands.createSession();
		let r = await sbx.commands.runInSession(sid, "f() { echo \"f:$1\"; }; set -o pipefail; echo $$");
		assert.equal(r.exitCode, 0, errOut(r));
		const pid = text(r);
		r = await sbx.commands.runInSession(sid, "sleep 30", { timeoutSeconds: 1 });
		assert.equal(r.exitCode, 124);
		r = await sbx.commands.runInSession(sid, "f x; false | true; echo $?; echo $$");
		assert.equal(text(r), `f:x\n1\n${pid}`);
		const other = await sbx.commands.createSession();
		r = await sbx.commands.runInSession(other, "type f >/dev/null 2>&1 || echo no-f; echo $$");
		assert.match(text(r), /^no-f\n[0-9]+$/);
		assert.notEqual(text(r).split("\n")[1], pid);
		await sbx.commands.deleteSession(other);
		await sbx.commands.deleteSession(sid);
	});

	stopsCleanly();
});
