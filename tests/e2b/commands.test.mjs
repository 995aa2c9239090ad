// envd's process service through the SDK's sbx.commands: a command's output, exit code,
// environment, cwd and user; callbacks; large output; background commands, their list,
// connect, stdin and kill; the command timeout; a process that outlives its stream.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";

import { CommandExitError, TimeoutError } from "e2b";

import { STEP_MS, createSandbox, h, skip, stopsCleanly, useCelld } from "./harness.mjs";

const sleep = (ms) => new Promise((res) => setTimeout(res, ms));

describe("E2B commands", { skip }, () => {
	useCelld();
	let sbx;

	before(async () => {
		sbx = await createSandbox();
	});
	after(async () => {
		if (sbx) await sbx.kill().catch(() => {});
	});

	it("runs a command: its stdout and exit code", { timeout: STEP_MS }, async () => {
		const res = await sbx.commands.run("echo hi");
		assert.equal(res.exitCode, 0);
		assert.equal(res.stdout, "hi\n");
		assert.equal(res.stderr, "");
	});

	it("throws CommandExitError with the exit code and stderr of a failing command", { timeout: STEP_MS }, async () => {
		await assert.rejects(sbx.commands.run("echo oops >&2; exit 3"), (e) => {
			assert.ok(e instanceof CommandExitError, `not a CommandExitError: ${e}`);
			assert.equal(e.exitCode, 3);
			assert.equal(e.stderr, "oops\n");
			assert.match(e.error, /exit status 3/);
			return true;
		});
	});

	it("passes envs and cwd", { timeout: STEP_MS }, async () => {
		const res = await sbx.commands.run('echo "$FOO/$BAR"; pwd', {
			envs: { FOO: "one", BAR: "two words" },
			cwd: "/tmp",
		});
		assert.equal(res.stdout, "one/two words\n/tmp\n");
		// A relative cwd is below the user's home, "~" that home; one not there is refused.
		await sbx.commands.run("mkdir -p /home/user/sub");
		assert.equal((await sbx.commands.run("pwd", { cwd: "sub" })).stdout, "/home/user/sub\n");
		assert.equal((await sbx.commands.run("pwd", { cwd: "~/sub" })).stdout, "/home/user/sub\n");
		assert.equal((await sbx.commands.run("pwd", { cwd: "~", user: "root" })).stdout, "/root\n");
		await assert.rejects(sbx.commands.run("pwd", { cwd: "/nonexistent" }), /does not exist/);
	});

	it("gives a command the sandbox's envs, the call's over them", { timeout: STEP_MS }, async () => {
		const other = await createSandbox({ envs: { SBX_A: "sandbox", SBX_B: "sandbox" } });
		try {
			const res = await other.commands.run('echo "$SBX_A $SBX_B"', { envs: { SBX_B: "call" } });
			assert.equal(res.stdout, "sandbox call\n");
		} finally {
			await other.kill();
		}
	});

	it("runs as the template's user by default, as root when asked", { timeout: STEP_MS }, async () => {
		let res = await sbx.commands.run('whoami; echo "$HOME $USER"; pwd');
		assert.equal(res.stdout, "user\n/home/user user\n/home/user\n");
		res = await sbx.commands.run('whoami; echo "$HOME"; pwd', { user: "root" });
		assert.equal(res.stdout, "root\n/root\n/root\n");
		res = await sbx.commands.run("id -u", { user: "user" });
		assert.equal(res.stdout, "1000\n");
		await assert.rejects(sbx.commands.run("true", { user: "nosuchuser" }), /nosuchuser/);
	});

	it("says a command's sandbox was killed when it goes while the command runs", { timeout: STEP_MS }, async () => {
		const doomed = await createSandbox();
		const cmd = await doomed.commands.run("sleep 60", { background: true });
		await doomed.kill();
		const err = await cmd.wait().catch((e) => e);
		assert.ok(err instanceof TimeoutError, `${err?.name}: ${err?.message}`);
		assert.match(err.message, /sandbox was killed or reached its end of life/);
	});

	it("lets the template's user sudo, as E2B's base does, and runs a login bash", { timeout: STEP_MS }, async () => {
		const fresh = await createSandbox();
		const res = await fresh.commands.run("sudo -n id -u; sudo -n apt-get --version | head -1; hostname -f");
		assert.equal(res.stdout.split("\n")[0], "0", res.stdout + res.stderr);
		assert.match(res.stdout, /^apt /m);
		assert.equal(res.stderr, "", "sudo says nothing (the sandbox's name resolves)");
		// The login profile starts no background job: nothing but the command runs.
		const ps = await fresh.commands.run("ps -eo pid,ppid,comm --no-headers | grep -v -e ' ps$' -e ' grep$'");
		const others = ps.stdout.trim().split("\n").filter((l) => !/cell-init|bash$/.test(l));
		assert.deepEqual(others, [], ps.stdout);
	});

	it("calls onStdout and onStderr as output comes", { timeout: STEP_MS }, async () => {
		const out = [], err = [];
		const res = await sbx.commands.run("echo a; echo b >&2; sleep 0.2; echo c", {
			onStdout: (d) => out.push(d),
			onStderr: (d) => err.push(d),
		});
		assert.equal(out.join(""), "a\nc\n");
		assert.equal(err.join(""), "b\n");
		assert.equal(res.stdout, "a\nc\n");
	});

	it("carries large output whole (10 MiB through stdout)", { timeout: 4 * STEP_MS }, async (t) => {
		const t0 = Date.now();
		const res = await sbx.commands.run("head -c 10485760 /dev/zero | tr '\\0' x");
		assert.equal(res.stdout.length, 10485760);
		assert.ok(/^x+$/.test(res.stdout), "only x");
		t.diagnostic(`10 MiB of stdout in ${Date.now() - t0} ms`);
	});

	it("runs a background command: list shows it, wait and kill", { timeout: STEP_MS }, async () => {
		const handle = await sbx.commands.run("echo started; sleep 600", { background: true });
		assert.ok(handle.pid > 1);
		const list = await sbx.commands.list();
		const mine = list.find((p) => p.pid === handle.pid);
		assert.ok(mine, `pid ${handle.pid} in ${JSON.stringify(list)}`);
		assert.equal(mine.cmd, "/bin/bash");
		assert.ok(mine.args.includes("echo started; sleep 600"), JSON.stringify(mine.args));
		for (let i = 0; i < 100 && !handle.stdout; i++) await sleep(50);
		assert.equal(await handle.kill(), true);
		await assert.rejects(handle.wait(), (e) => {
			assert.ok(e instanceof CommandExitError);
			assert.equal(e.exitCode, -1);
			assert.match(e.error, /signal: killed/);
			return true;
		});
		assert.equal(handle.stdout, "started\n");
		// Gone now: killing it again, or a pid nobody has, is false.
		assert.equal(await sbx.commands.kill(handle.pid), false);
		assert.equal(await sbx.commands.kill(999999), false);
		const after = await sbx.commands.list();
		assert.ok(!after.some((p) => p.pid === handle.pid), "killed, not listed");
	});

	it("waits for a background command's end", { timeout: STEP_MS }, async () => {
		const handle = await sbx.commands.run("sleep 0.3; echo done", { background: true });
		const res = await handle.wait();
		assert.equal(res.exitCode, 0);
		assert.equal(res.stdout, "done\n");
	});

	it("feeds stdin (stdin: true) while the stream is open, then closes it", { timeout: STEP_MS }, async () => {
		const handle = await sbx.commands.run("cat; echo end", { background: true, stdin: true });
		await sbx.commands.sendStdin(handle.pid, "hello\n");
		await handle.sendStdin("world\n");
		await handle.closeStdin();
		const res = await handle.wait();
		assert.equal(res.stdout, "hello\nworld\nend\n");
	});

	it("gives stdin no pipe by default: a reader sees its end", { timeout: STEP_MS }, async () => {
		const res = await sbx.commands.run("cat; echo eof");
		assert.equal(res.stdout, "eof\n");
		const handle = await sbx.commands.run("sleep 30", { background: true });
		await assert.rejects(sbx.commands.sendStdin(handle.pid, "x"), /closed/);
		assert.equal(await handle.kill(), true);
	});

	it("kills a command at its timeoutMs", { timeout: STEP_MS }, async () => {
		const t0 = Date.now();
		await assert.rejects(sbx.commands.run("sleep 30", { timeoutMs: 1500 }));
		assert.ok(Date.now() - t0 < 10_000, "did not wait for sleep 30");
		// The process is gone in the sandbox, not only the stream.
		await sleep(300);
		const res = await sbx.commands.run("pgrep -x sleep || echo none");
		assert.equal(res.stdout, "none\n");
	});

	it("kills a command at its timeoutMs after its stream is gone too", { timeout: STEP_MS }, async () => {
		const handle = await sbx.commands.run("sleep 30", { background: true, timeoutMs: 1500 });
		await handle.disconnect();
		assert.ok((await sbx.commands.list()).some((p) => p.pid === handle.pid), "running at first");
		for (let i = 0; i < 100 && (await sbx.commands.list()).some((p) => p.pid === handle.pid); i++)
			await sleep(100);
		assert.ok(!(await sbx.commands.list()).some((p) => p.pid === handle.pid), "killed at its time");
	});

	it("keeps a process through a dropped stream; connect gets only new output", { timeout: STEP_MS }, async () => {
		const handle = await sbx.commands.run(
			"echo first; while [ ! -e /tmp/go ]; do sleep 0.05; done; echo second; sleep 600",
			{ background: true },
		);
		for (let i = 0; i < 100 && !handle.stdout.includes("first"); i++) await sleep(50);
		assert.equal(handle.stdout, "first\n");
		await handle.disconnect();
		await sleep(200);
		assert.ok((await sbx.commands.list()).some((p) => p.pid === handle.pid), "still running");
		const again = await sbx.commands.connect(handle.pid);
		await sbx.commands.run("touch /tmp/go");
		for (let i = 0; i < 100 && !again.stdout.includes("second"); i++) await sleep(50);
		assert.equal(again.stdout, "second\n", "only the output after the connect");
		assert.equal(await again.kill(), true);
		await assert.rejects(again.wait(), CommandExitError);
	});

	it("follows a process from two streams at once (its start's and a connect's)", { timeout: STEP_MS }, async () => {
		const handle = await sbx.commands.run("while [ ! -e /tmp/go2 ]; do sleep 0.05; done; echo both; exit 4", {
			background: true,
		});
		const other = await sbx.commands.connect(handle.pid);
		await sbx.commands.run("touch /tmp/go2");
		const [a, b] = await Promise.all([handle.wait().catch((e) => e), other.wait().catch((e) => e)]);
		assert.equal(a.exitCode, 4);
		assert.equal(b.exitCode, 4);
		assert.equal(a.stdout, "both\n");
		assert.equal(b.stdout, "both\n");
	});

	// The wire itself: envelopes, the start event first, keepalives at the interval the
	// client asks for, the end event, the end-of-stream frame; what is refused, and how.
	it("streams Connect envelopes with keepalives; refuses StreamInput and bad fields", { timeout: STEP_MS }, async () => {
		const url = (m) => `http://127.0.0.1:${h.e2bPort}/process.Process/${m}`;
		const hd = {
			"E2b-Sandbox-Id": sbx.sandboxId,
			"E2b-Sandbox-Port": "49983",
			"X-Access-Token": sbx.envdAccessToken,
		};
		const msg = Buffer.from(JSON.stringify({ process: { cmd: "/bin/sh", args: ["-c", "sleep 2.5; echo z"] } }));
		const env = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), msg]);
		env.writeUInt32BE(msg.length, 1);
		const res = await fetch(url("Start"), {
			method: "POST",
			headers: { ...hd, "Content-Type": "application/connect+json", "Keepalive-Ping-Interval": "1" },
			body: env,
		});
		assert.equal(res.status, 200);
		assert.equal(res.headers.get("content-type"), "application/connect+json");
		const body = Buffer.from(await res.arrayBuffer());
		const frames = [];
		for (let o = 0; o < body.length; ) {
			const n = body.readUInt32BE(o + 1);
			frames.push({ flags: body[o], msg: JSON.parse(body.subarray(o + 5, o + 5 + n)) });
			o += 5 + n;
		}
		assert.ok(frames[0].msg.event.start.pid > 1, JSON.stringify(frames[0]));
		const keepalives = frames.filter((f) => f.msg.event?.keepalive).length;
		assert.ok(keepalives >= 1, `keepalives: ${keepalives}`);
		const data = frames.filter((f) => f.msg.event?.data);
		assert.equal(Buffer.from(data[0].msg.event.data.stdout, "base64").toString(), "z\n");
		const end = frames.at(-2).msg.event.end;
		assert.deepEqual(end, { exitCode: 0, exited: true, status: "exit status 0" });
		assert.deepEqual(frames.at(-1), { flags: 2, msg: {} });

		const unary = async (m, body) => {
			const r = await fetch(url(m), {
				method: "POST",
				headers: { ...hd, "Content-Type": "application/json" },
				body: JSON.stringify(body),
			});
			return { status: r.status, body: await r.json() };
		};
		let r = await unary("StreamInput", {});
		assert.equal(r.body.code, "unimplemented");
		assert.match(r.body.message, /SendInput/);
		r = await unary("SendSignal", { process: { pid: 1 }, signal: "SIGNAL_NOPE" });
		assert.equal(r.body.code, "invalid_argument");
		r = await unary("SendInput", { process: { pid: 999999 }, input: { stdin: "eA==" } });
		assert.equal(r.body.code, "not_found");
		r = await unary("Update", { process: { tag: "nosuchtag" }, pty: { size: { cols: 10, rows: 10 } } });
		assert.equal(r.body.code, "not_found");
		r = await unary("SendInput", { input: { stdin: "eA==" } });
		assert.equal(r.body.code, "invalid_argument");
		assert.match(r.body.message, /process/);

		// A tag (the SDK's templates set one on their start command): listed, and a
		// selector as good as the pid.
		const tmsg = Buffer.from(JSON.stringify({ process: { cmd: "sleep", args: ["30"] }, tag: "my-tag" }));
		const tenv = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), tmsg]);
		tenv.writeUInt32BE(tmsg.length, 1);
		const tagged = fetch(url("Start"), {
			method: "POST",
			headers: { ...hd, "Content-Type": "application/connect+json" },
			body: tenv,
		}).then(async (res) => Buffer.from(await res.arrayBuffer()).toString());
		let entry;
		// Up to 30 s: a loaded two-core machine may take seconds to start it.
		for (let i = 0; i < 600 && !entry; i++, await sleep(50))
			entry = (await unary("List", {})).body.processes.find((p) => p.tag === "my-tag");
		assert.ok(entry, "the tagged process is listed");
		assert.deepEqual(entry.config, { cmd: "sleep", args: ["30"], envs: {}, cwd: "" });
		r = await unary("SendSignal", { process: { tag: "my-tag" }, signal: "SIGNAL_SIGKILL" });
		assert.equal(r.status, 200);
		assert.match(await tagged, /"signal: killed"/);
	});

	// A List that asked cell-init what runs just before a Start made its process must not
	// forget that process when it prunes what it remembers: starts raced by lists are all
	// listed with their tags.
	it("lists every process started while other lists run", { timeout: STEP_MS }, async () => {
		const url = (m) => `http://127.0.0.1:${h.e2bPort}/process.Process/${m}`;
		const hd = {
			"E2b-Sandbox-Id": sbx.sandboxId,
			"E2b-Sandbox-Port": "49983",
			"X-Access-Token": sbx.envdAccessToken,
		};
		const list = async () => {
			const r = await fetch(url("List"), {
				method: "POST",
				headers: { ...hd, "Content-Type": "application/json" },
				body: "{}",
			});
			assert.equal(r.status, 200);
			return (await r.json()).processes;
		};
		const start = (tag) => {
			const m = Buffer.from(JSON.stringify({ process: { cmd: "sleep", args: ["30"] }, tag }));
			const env = Buffer.concat([Buffer.from([0, 0, 0, 0, 0]), m]);
			env.writeUInt32BE(m.length, 1);
			return fetch(url("Start"), {
				method: "POST",
				headers: { ...hd, "Content-Type": "application/connect+json" },
				body: env,
			}).then((res) => res.arrayBuffer());
		};
		const tags = Array.from({ length: 12 }, (_, i) => `race-${i}`);
		let listing = true;
		const lister = (async () => {
			while (listing) await list();
		})();
		const streams = [];
		for (const t of tags) {
			streams.push(start(t));
			await sleep(15);
		}
		let missing = tags;
		for (let i = 0; i < 200 && missing.length; i++, await sleep(50)) {
			const seen = new Set((await list()).map((p) => p.tag));
			missing = tags.filter((t) => !seen.has(t));
		}
		listing = false;
		await lister;
		const procs = await list();
		for (const t of tags) {
			const p = procs.find((x) => x.tag === t);
			if (p) await sbx.commands.kill(p.pid);
		}
		await Promise.all(streams);
		assert.deepEqual(missing, [], "every tagged process is listed");
	});

	stopsCleanly();
});
