// The official OpenSandbox TypeScript SDK driving a real celld.
//
// The harness builds nothing: it uses $CELL_BUILD/celld and $CELL_BUILD/cell-init
// (default <repo>/build), an images dir holding the "busybox" image ($CELL_TEST_IMAGES, or
// one made in a temp dir), and starts a private celld on a temp state dir, a free
// loopback port and a random API key. Everything it creates is deleted in the end, even
// when a case fails. Needs root (celld creates namespaces, mounts and cgroups).
//
// Environment:
//   CELL_BUILD        dir with celld and cell-init (default <repo>/build)
//   CELL_TEST_IMAGES  images dir with busybox/{rootfs,manifest.json} (default: make one)
//   CELLD_EXTRA_ARGS  extra celld arguments, space separated
//   CELL_SDK_KEEP=1   keep the temp dir (state, images, celld.log) for debugging

import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { Sandbox, SandboxManager } from "@alibaba-group/opensandbox";

const HERE = path.dirname(fileURLToPath(import.meta.url));
const REPO = path.resolve(HERE, "..", "..");
const BUILD = path.resolve(process.env.CELL_BUILD || path.join(REPO, "build"));
const CELLD = path.join(BUILD, "celld");
const CELL_INIT = path.join(BUILD, "cell-init");
const IS_ROOT = typeof process.getuid === "function" && process.getuid() === 0;

const STEP_MS = 60_000; // per-case bound; every case also bounds its own polling

// ---------------------------------------------------------------------------
// harness

const h = {
	tmp: null, // temp root (0711)
	state: null,
	images: null,
	port: 0,
	apiKey: null,
	celld: null, // ChildProcess
	celldExit: null, // Promise<{code, signal}>
	logPath: null,
	logTail: [],
	tag: `sdk-${crypto.randomBytes(4).toString("hex")}`,
	created: new Set(), // sandbox ids to delete in the end
	closers: [], // SDK objects whose transport must be closed
};

function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

function freePort() {
	return new Promise((resolve, reject) => {
		const s = net.createServer();
		s.unref();
		s.on("error", reject);
		s.listen(0, "127.0.0.1", () => {
			const { port } = s.address();
			s.close(() => resolve(port));
		});
	});
}

function run(cmd, args, opts = {}) {
	const r = spawnSync(cmd, args, { encoding: "utf8", ...opts });
	if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
	if (r.status !== 0)
		throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
	return r.stdout;
}

function writeManifest(dir, packages) {
	const m = {
		name: "busybox",
		suite: "busybox",
		mirror: "",
		packages,
		builtAt: new Date().toISOString().replace(/\.\d+Z$/, "Z"),
		sizeBytes: Number(run("du", ["-sb", path.join(dir, "rootfs")]).split(/\s/)[0]),
	};
	fs.writeFileSync(path.join(dir, "manifest.json"), JSON.stringify(m, null, 2) + "\n");
}

// A minimal busybox image from the host's static busybox: the last fallback, so the
// suite still runs on a machine where no image recipe has produced one.
function imageFromHostBusybox(dir) {
	const bb = ["/bin/busybox", "/usr/bin/busybox"].find((p) => fs.existsSync(p));
	if (!bb) return false;
	const root = path.join(dir, "rootfs");
	for (const d of ["bin", "dev", "etc", "proc", "sys", "tmp", "root", "workspace"])
		fs.mkdirSync(path.join(root, d), { recursive: true, mode: 0o755 });
	fs.chmodSync(path.join(root, "tmp"), 0o1777);
	fs.copyFileSync(bb, path.join(root, "bin", "busybox"));
	fs.chmodSync(path.join(root, "bin", "busybox"), 0o755);
	for (const applet of run(bb, ["--list"]).split("\n").filter(Boolean)) {
		if (applet === "busybox" || applet.includes("/")) continue;
		fs.symlinkSync("busybox", path.join(root, "bin", applet));
	}
	fs.writeFileSync(path.join(root, "etc", "passwd"), "root:x:0:0:root:/root:/bin/sh\n");
	fs.writeFileSync(path.join(root, "etc", "group"), "root:x:0:\n");
	writeManifest(dir, ["busybox-static"]);
	return true;
}

// Returns the images dir to hand to celld.
function prepareImages() {
	if (process.env.CELL_TEST_IMAGES) {
		const d = path.resolve(process.env.CELL_TEST_IMAGES);
		assert.ok(
			fs.existsSync(path.join(d, "busybox", "rootfs")),
			`CELL_TEST_IMAGES=${d} has no busybox/rootfs`,
		);
		return d;
	}
	const images = path.join(h.tmp, "images");
	const dir = path.join(images, "busybox");
	fs.mkdirSync(images, { mode: 0o755 });
	const recipe = path.join(REPO, "rootfs", "build-image");
	if (fs.existsSync(recipe)) {
		run(recipe, ["busybox", images], { stdio: ["ignore", "pipe", "pipe"] });
		assert.ok(fs.existsSync(path.join(dir, "rootfs")), `${recipe} made no ${dir}/rootfs`);
		return images;
	}
	fs.mkdirSync(dir, { mode: 0o755 });
	const proto = "/tmp/proto/img/rootfs";
	if (fs.existsSync(proto)) {
		run("cp", ["-a", proto, path.join(dir, "rootfs")]);
		writeManifest(dir, ["busybox-static"]);
		return images;
	}
	assert.ok(imageFromHostBusybox(dir), "no busybox image: set CELL_TEST_IMAGES");
	return images;
}

async function startCelld() {
	h.port = await freePort();
	const keyFile = path.join(h.tmp, "api-key");
	fs.writeFileSync(keyFile, h.apiKey, { mode: 0o600 });
	const args = [
		"--state-dir", h.state,
		"--images", h.images,
		"--listen", `127.0.0.1:${h.port}`,
		"--api-key-file", keyFile,
		"--socket", path.join(h.tmp, "cell.sock"),
		"--init", CELL_INIT,
		"--policies", path.join(REPO, "policies"),
		...(process.env.CELLD_EXTRA_ARGS || "").split(/\s+/).filter(Boolean),
	];
	h.logPath = path.join(h.tmp, "celld.log");
	const log = fs.createWriteStream(h.logPath);
	// CELL_API_KEY would override the key file.
	const env = { ...process.env };
	delete env.CELL_API_KEY;
	const child = spawn(CELLD, args, { env, stdio: ["ignore", "pipe", "pipe"] });
	const keep = (chunk) => {
		log.write(chunk);
		h.logTail.push(...chunk.toString().split("\n").filter(Boolean));
		if (h.logTail.length > 80) h.logTail.splice(0, h.logTail.length - 80);
	};
	child.stdout.on("data", keep);
	child.stderr.on("data", keep);
	h.celld = child;
	h.celldExit = new Promise((resolve) =>
		child.on("exit", (code, signal) => {
			log.end();
			resolve({ code, signal });
		}),
	);

	// Ready when the TCP API answers an authenticated request.
	const deadline = Date.now() + 20_000;
	let last = "no answer";
	while (Date.now() < deadline) {
		if (child.exitCode !== null || child.signalCode !== null)
			throw new Error(`celld exited early (${child.exitCode ?? child.signalCode}):\n${tail()}`);
		try {
			const res = await fetch(`http://127.0.0.1:${h.port}/v1/sandboxes`, {
				headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
				signal: AbortSignal.timeout(2000),
			});
			await res.arrayBuffer();
			if (res.ok) return;
			last = `HTTP ${res.status}`;
		} catch (e) {
			last = e.cause?.code || e.message;
		}
		await sleep(100);
	}
	throw new Error(`celld not ready on 127.0.0.1:${h.port} after 20 s (${last}):\n${tail()}`);
}

function tail() {
	return h.logTail.map((l) => `  celld| ${l}`).join("\n");
}

async function stopCelld() {
	const child = h.celld;
	if (!child) return null;
	h.celld = null;
	if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
	const timer = sleep(15_000).then(() => "timeout");
	let r = await Promise.race([h.celldExit, timer]);
	if (r === "timeout") {
		child.kill("SIGKILL");
		r = await h.celldExit;
		r.killed = true;
	}
	return r;
}

// Mount points below the temp dir in this mount namespace (host side).
function mountsUnder(dir) {
	return fs
		.readFileSync("/proc/self/mountinfo", "utf8")
		.split("\n")
		.map((l) => l.split(" ")[4])
		.filter((mp) => mp && (mp === dir || mp.startsWith(dir + "/")));
}

// cgroup dirs celld made for this state dir (CONTRACT: cell-<8 hex of sha256(state)>).
function leftoverCgroups() {
	const name = `cell-${crypto.createHash("sha256").update(h.state).digest("hex").slice(0, 8)}`;
	const found = [];
	const roots = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"];
	try {
		for (const e of fs.readdirSync("/sys/fs/cgroup", { withFileTypes: true }))
			if (e.isDirectory()) roots.push(path.join("/sys/fs/cgroup", e.name));
	} catch {
		/* no cgroupfs */
	}
	for (const r of new Set(roots)) {
		const p = path.join(r, name);
		if (fs.existsSync(p)) found.push(p);
	}
	return found;
}

// Last-resort cleanup of a cgroup subtree celld left behind: kill, then rmdir bottom-up.
function reapCgroup(dir) {
	const walk = (d) => {
		for (const e of fs.readdirSync(d, { withFileTypes: true }))
			if (e.isDirectory()) walk(path.join(d, e.name));
		try {
			const kill = path.join(d, "cgroup.kill");
			if (fs.existsSync(kill)) fs.writeFileSync(kill, "1");
			for (const pid of fs.readFileSync(path.join(d, "cgroup.procs"), "utf8").split("\n"))
				if (pid) try { process.kill(Number(pid), "SIGKILL"); } catch { /* gone */ }
		} catch {
			/* best effort */
		}
	};
	try {
		walk(dir);
		spawnSync("sh", ["-c", `sleep 0.5; find "${dir}" -depth -type d -exec rmdir {} \\;`]);
	} catch {
		/* best effort */
	}
}

function conn(apiKey = h.apiKey) {
	return {
		domain: `127.0.0.1:${h.port}`,
		protocol: "http",
		apiKey,
		requestTimeoutSeconds: 45,
	};
}

function manager(apiKey) {
	const m = SandboxManager.create({ connectionConfig: conn(apiKey) });
	h.closers.push(m);
	return m;
}

async function createSandbox(opts = {}) {
	const sbx = await Sandbox.create({
		image: "busybox",
		connectionConfig: conn(),
		metadata: { suite: h.tag },
		timeoutSeconds: 600,
		readyTimeoutSeconds: 20,
		...opts,
	});
	h.created.add(sbx.id);
	h.closers.push(sbx);
	return sbx;
}

// Deletes every sandbox this run made (a failed case may have stopped half way).
async function deleteLeftovers() {
	if (!h.celld || !h.port) return;
	const m = SandboxManager.create({ connectionConfig: conn() });
	try {
		const listed = await m.listSandboxInfos({ metadata: { suite: h.tag } });
		for (const s of listed.items) h.created.add(s.id);
	} catch {
		/* celld may be gone */
	}
	for (const id of h.created) {
		try {
			await m.killSandbox(id);
			h.created.delete(id);
		} catch (e) {
			if (e.statusCode === 404) h.created.delete(id);
		}
	}
	await m.close();
}

// Awaits a promise expected to fail with an SDK SandboxApiException of `status`.
async function rejectsWith(promise, status, code) {
	let err;
	try {
		await promise;
	} catch (e) {
		err = e;
	}
	assert.ok(err, `expected HTTP ${status}${code ? " " + code : ""}, but the call succeeded`);
	assert.equal(
		err.statusCode,
		status,
		`expected HTTP ${status}, got ${err.name}: ${err.message} (statusCode=${err.statusCode})`,
	);
	if (code) assert.equal(err.error?.code, code, `error code for: ${err.message}`);
	return err;
}

// Output events come one per line without the line ending (an empty line is "\n"), as
// execd sends them: these put the endings back for comparing whole outputs.
const asLines = (msgs) => msgs.map((m) => (m.text === "\n" ? "\n" : `${m.text}\n`)).join("");
const out = (r) => asLines(r.logs.stdout);
const errOut = (r) => asLines(r.logs.stderr);
const rawOut = (r) => r.logs.stdout.map((m) => m.text).join("");

// ---------------------------------------------------------------------------
// cases

const skip = !IS_ROOT ? "needs root (celld creates namespaces and cgroups)" : false;

describe("celld driven by @alibaba-group/opensandbox", { skip }, () => {
	let sbx; // the shared sandbox most cases use

	before(async () => {
		for (const bin of [CELLD, CELL_INIT])
			assert.ok(fs.existsSync(bin), `${bin} missing: run make all (or set CELL_BUILD)`);
		h.tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cell-sdk-"));
		fs.chmodSync(h.tmp, 0o711);
		h.state = path.join(h.tmp, "state");
		h.apiKey = crypto.randomBytes(24).toString("hex");
		h.images = prepareImages();
		await startCelld();
	});

	after(async () => {
		await deleteLeftovers();
		await Promise.all(h.closers.map((c) => c.close().catch(() => {})));
		const stopped = await stopCelld();
		if (stopped?.killed) console.error(`celld ignored SIGTERM for 15 s; killed:\n${tail()}`);
		if (!h.tmp) return;
		for (const cg of leftoverCgroups()) reapCgroup(cg);
		const mounts = mountsUnder(h.tmp);
		for (const mp of mounts.reverse()) spawnSync("umount", ["-l", mp]);
		if (process.env.CELL_SDK_KEEP === "1") {
			console.error(`kept ${h.tmp}`);
		} else if (mountsUnder(h.tmp).length === 0) {
			fs.rmSync(h.tmp, { recursive: true, force: true });
		} else {
			console.error(`not removing ${h.tmp}: still mounted`);
		}
	});

	it("rejects a wrong API key with 401 UNAUTHORIZED", { timeout: STEP_MS }, async () => {
		await rejectsWith(
			Sandbox.create({ image: "busybox", connectionConfig: conn("wrong-key"), metadata: { suite: h.tag } }),
			401,
			"UNAUTHORIZED",
		);
		await rejectsWith(manager("wrong-key").listSandboxInfos({}), 401, "UNAUTHORIZED");
	});

	it("refuses create fields cell cannot honour with a 400 naming them", { timeout: STEP_MS }, async () => {
		const volumes = [{ name: "ws", mountPath: "/workspace", ossfs: { bucket: "b", endpoint: "e", accessKeyId: "i", accessKeySecret: "s" } }];
		let err = await rejectsWith(createSandbox({ image: "busybox", volumes }), 400, "INVALID_ARGUMENT");
		assert.match(err.message, /volumes\[0\]\.ossfs/);
		err = await rejectsWith(
			createSandbox({ image: "busybox", networkPolicy: { defaultAction: "allow" } }),
			400,
			"INVALID_ARGUMENT",
		);
		assert.match(err.message, /networkPolicy/);
		// A policy that allows nothing is what a sandbox has: honoured.
		const denied = await createSandbox({
			image: "busybox",
			networkPolicy: { egress: [{ action: "deny", target: "example.com" }] },
		});
		assert.equal(out(await denied.commands.run("echo ok")), "ok\n");
		await denied.kill();
	});

	it("rejects an unknown image with 400 IMAGE_NOT_FOUND", { timeout: STEP_MS }, async () => {
		await rejectsWith(createSandbox({ image: "no-such-image" }), 400, "IMAGE_NOT_FOUND");
	});

	// FastGPT keeps a session's /workspace across stop() (a delete) with a named volume.
	it("keeps a named volume's files across two sandboxes, for root and user", { timeout: 2 * STEP_MS }, async () => {
		const claimName = `ws-${h.tag}`;
		const volumes = [{ name: "ws", mountPath: "/tmp", pvc: { claimName, createIfNotExists: true, storage: "64Mi" } }];
		const first = await createSandbox({ image: "busybox", volumes });
		await first.files.writeFiles([{ path: "/tmp/notes.txt", data: "kept\n" }]);
		const asUser = await first.commands.run("echo mine > /tmp/user.txt; id -u", { uid: 1000, gid: 1000 });
		assert.equal(out(asUser), "1000\n");
		// A second writer is refused while the first one has it.
		await rejectsWith(createSandbox({ image: "busybox", volumes }), 409);
		await first.kill();
		h.created.delete(first.id);

		const second = await createSandbox({ image: "busybox", volumes });
		assert.equal(await second.files.readFile("/tmp/notes.txt"), "kept\n");
		const r = await second.commands.run("cat /tmp/user.txt; stat -c %u /tmp/user.txt /tmp/notes.txt");
		assert.equal(out(r), "mine\n1000\n0\n");
		await second.kill();
		h.created.delete(second.id);

		const res = await fetch(`http://127.0.0.1:${h.port}/v1/volumes/${claimName}`, {
			method: "DELETE",
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
		});
		assert.equal(res.status, 204, await res.text());
	});

	it("creates a busybox sandbox that is Running", { timeout: STEP_MS }, async () => {
		sbx = await createSandbox();
		assert.match(sbx.id, /^[A-Za-z0-9-]+$/);
		const info = await sbx.getInfo();
		assert.equal(info.id, sbx.id);
		assert.equal(info.status?.state, "Running");
	});

	it("runs a foreground command: stdout and exit code 0", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("echo hi");
		assert.equal(out(r), "hi\n");
		assert.equal(errOut(r), "");
		assert.equal(r.exitCode, 0);
		assert.equal(r.error, undefined);
		assert.ok(r.complete, "execution_complete event");
		assert.ok(r.id, "init event carries the command id");
	});

	it("reports a non-zero exit code", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("echo before; exit 3");
		assert.equal(out(r), "before\n");
		assert.equal(r.exitCode, 3);
		assert.equal(r.error?.name, "CommandExecError");
		assert.equal(r.error?.value, "3");
	});

	it("captures stderr separately", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("echo oops >&2; echo fine");
		assert.equal(errOut(r), "oops\n");
		assert.equal(out(r), "fine\n");
		assert.equal(r.exitCode, 0);
	});

	it("honours workingDirectory and envs", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run('pwd; echo "$GREETING"', {
			workingDirectory: "/tmp",
			envs: { GREETING: "hello there" },
		});
		assert.equal(out(r), "/tmp\nhello there\n");
		assert.equal(r.exitCode, 0);
	});

	// The default image's ordinary account is uid/gid 1000 (`user`); busybox has no name
	// for it, the ids and their limits are the same (cell-policy(5)).
	it("runs a command as uid/gid 1000: no capabilities, root's files closed", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run(
			"id -u; id -g; id -G; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; " +
				"touch /root/by-user 2>/dev/null && echo wrote-root; " +
				"echo mine > /tmp/by-user && stat -c %u:%g /tmp/by-user",
			{ uid: 1000, gid: 1000 },
		);
		assert.equal(errOut(r), "");
		assert.equal(r.exitCode, 0);
		assert.equal(out(r).split("\n").filter(Boolean).join("|"),
			"1000|1000|1000|CapEff:\t0000000000000000|NoNewPrivs:\t1|1000:1000");
		// The next command without uid is root again.
		const root = await sbx.commands.run("id -u; ls /root >/dev/null && echo root-reads");
		assert.equal(out(root).split("\n").filter(Boolean).join("|"), "0|root-reads");
		// gid without uid: the SDK refuses it itself, as execd's contract says.
		await assert.rejects(sbx.commands.run("id", { gid: 1000 }), /uid is required/);
	});

	it("kills a command at its timeout (exit 124)", { timeout: STEP_MS }, async () => {
		const t0 = Date.now();
		const r = await sbx.commands.run("echo start; sleep 30; echo never", { timeoutSeconds: 1 });
		assert.ok(Date.now() - t0 < 15_000, `took ${Date.now() - t0} ms`);
		assert.equal(out(r), "start\n");
		assert.equal(r.exitCode, 124);
	});

	it("keeps UTF-8 intact across output chunks, and large output whole", { timeout: STEP_MS }, async () => {
		// 65535 ASCII bytes then a 2-byte character: the character straddles a 64 KiB
		// relay chunk, and must still arrive as text, not base64 or U+FFFD.
		const r = await sbx.commands.run(
			"i=0; while [ $i -lt 3 ]; do head -c 65535 /dev/zero | tr '\\0' a; printf '\\303\\251'; i=$((i+1)); done",
		);
		const s = rawOut(r); // no line ending: 64 KiB pieces of one line
		assert.equal(r.exitCode, 0);
		assert.equal(s.length, 3 * 65536);
		assert.equal((s.match(/\u00e9/g) || []).length, 3);
		assert.ok(!s.includes("\ufffd"), "no replacement characters");
		const big = await sbx.commands.run("head -c 3000000 /dev/zero | tr '\\0' x");
		assert.equal(rawOut(big).length, 3_000_000);
		assert.ok(big.logs.stdout.every((m) => m.text.length <= 65536), "pieces of <= 64 KiB");
	});

	it("sends one output event per line, without the line ending", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("printf 'one\\ntwo\\r\\n\\nthr'; sleep 0.3; printf 'ee\\nlast'");
		assert.deepEqual(r.logs.stdout.map((m) => m.text), ["one", "two", "\n", "three", "last"]);
		assert.equal(r.exitCode, 0);
	});

	it("ignores keep-alive pings on a longer command", { timeout: STEP_MS }, async () => {
		const types = [];
		const r = await sbx.commands.run("echo a; sleep 5; echo b", {}, {
			onEvent: (e) => types.push(e.type),
		});
		assert.equal(out(r), "a\nb\n");
		assert.equal(r.exitCode, 0);
		assert.ok(types.includes("ping"), `events: ${types.join(",")}`);
		assert.equal(types[0], "init");
		assert.equal(types.at(-1), "execution_complete");
	});

	it("runs a background command: status and logs", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("echo bg-start; sleep 3; echo bg-done; exit 5", {
			background: true,
		});
		assert.ok(r.id, "background run returns the command id");
		assert.ok(r.complete, "execution_complete right after init, as execd sends it");
		assert.equal(r.exitCode, undefined);
		assert.equal((await sbx.commands.getCommandStatus(r.id)).running, true, "runs on");

		let st;
		const deadline = Date.now() + 20_000;
		do {
			st = await sbx.commands.getCommandStatus(r.id);
			if (!st.running) break;
			await sleep(200);
		} while (Date.now() < deadline);
		assert.equal(st.running, false, "command finished within 20 s");
		assert.equal(st.exitCode, 5);
		assert.ok(st.startedAt instanceof Date, "started_at is an RFC 3339 time");
		assert.ok(st.finishedAt instanceof Date, "finished_at is an RFC 3339 time");
		assert.ok(st.finishedAt >= st.startedAt);

		const logs = await sbx.commands.getBackgroundCommandLogs(r.id);
		assert.match(logs.content, /bg-start\n/);
		assert.match(logs.content, /bg-done\n/);
		assert.equal(typeof logs.cursor, "number", "EXECD-COMMANDS-TAIL-CURSOR header");
		const more = await sbx.commands.getBackgroundCommandLogs(r.id, logs.cursor);
		assert.equal(more.content, "", "nothing new after the tail cursor");
	});

	it("interrupts a background command", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("sleep 30", { background: true });
		await sbx.commands.interrupt(r.id);
		let st;
		const deadline = Date.now() + 10_000;
		do {
			st = await sbx.commands.getCommandStatus(r.id);
			if (!st.running) break;
			await sleep(200);
		} while (Date.now() < deadline);
		assert.equal(st.running, false, "stopped within 10 s");
		assert.equal(st.exitCode, 143, "128 + SIGTERM");
	});

	it("reports an unknown command id as an error", { timeout: STEP_MS }, async () => {
		let err;
		try {
			await sbx.commands.getCommandStatus("no-such-command");
		} catch (e) {
			err = e;
		}
		assert.ok(err?.statusCode >= 400 && err?.statusCode < 500, `got ${err?.statusCode}`);
	});

	it("writes and reads back text and binary files", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([
			{ path: "/workspace/hello.txt", data: "hello world\n", mode: 640 },
			{ path: "/workspace/sub/dir/bytes.bin", data: Uint8Array.from({ length: 256 }, (_, i) => i) },
		]);
		assert.equal(await sbx.files.readFile("/workspace/hello.txt"), "hello world\n");
		const bytes = await sbx.files.readBytes("/workspace/sub/dir/bytes.bin");
		assert.equal(bytes.length, 256);
		assert.ok(bytes.every((b, i) => b === i), "binary content survives the round trip");
		const r = await sbx.commands.run("cat /workspace/hello.txt");
		assert.equal(out(r), "hello world\n", "the file is visible to commands");
	});

	it("streams an upload of unknown length (chunked)", { timeout: STEP_MS }, async () => {
		async function* chunks() {
			for (let i = 0; i < 64; i++) yield new Uint8Array(16384).fill(65 + (i % 26));
		}
		await sbx.files.writeFiles([{ path: "/workspace/stream.bin", data: chunks() }]);
		const b = await sbx.files.readBytes("/workspace/stream.bin");
		assert.equal(b.length, 64 * 16384);
		assert.equal(b[0], 65);
		assert.equal(b[b.length - 1], 65 + (63 % 26));
	});

	it("reads byte ranges with the Range header (206)", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([{ path: "/workspace/lines.txt", data: "l1\nl2\nl3\nl4\n" }]);
		const part = await sbx.files.readBytes("/workspace/lines.txt", { range: "bytes=3-5" });
		assert.equal(Buffer.from(part).toString(), "l2\n");
		assert.equal(await sbx.files.readFile("/workspace/lines.txt", { range: "bytes=-3" }), "l4\n");
		await rejectsWith(sbx.files.readBytes("/workspace/lines.txt", { range: "bytes=100-200" }), 416);
	});

	it("reads line ranges with offset/limit (1-based lines)", { timeout: STEP_MS }, async () => {
		// The execd spec shipped in the SDK: offset = first line (1-based), limit = line count.
		const f = "/workspace/lines.txt";
		assert.equal(await sbx.files.readFile(f, { offset: 2, limit: 2 }), "l2\nl3\n");
		assert.equal(await sbx.files.readFile(f, { offset: 1, limit: 1 }), "l1\n");
		assert.equal(await sbx.files.readFile(f, { offset: 4, limit: 10 }), "l4\n");
		assert.equal(await sbx.files.readFile(f, { offset: 9, limit: 1 }), "");
	});

	it("reports file info: mode digits, size, type, times", { timeout: STEP_MS }, async () => {
		const infos = await sbx.files.getFileInfo(["/workspace/hello.txt", "/workspace/sub"]);
		const f = infos["/workspace/hello.txt"];
		assert.ok(f, `keyed by path: ${JSON.stringify(Object.keys(infos))}`);
		assert.equal(f.path, "/workspace/hello.txt");
		assert.equal(f.type, "file");
		assert.equal(f.size, 12);
		assert.equal(f.mode, 640, "mode is the octal permission written as decimal digits");
		assert.equal(typeof f.owner, "string");
		assert.equal(typeof f.group, "string");
		assert.ok(f.modifiedAt instanceof Date && !Number.isNaN(f.modifiedAt.getTime()));
		const d = infos["/workspace/sub"];
		assert.equal(d?.type, "directory");
		assert.equal(d?.mode, 755, "parent directories are created 0755");
	});

	it("reports a missing file as 404 FILE_NOT_FOUND", { timeout: STEP_MS }, async () => {
		await rejectsWith(sbx.files.getFileInfo(["/workspace/missing.txt"]), 404, "FILE_NOT_FOUND");
		// Download errors keep only the status; the body still names the code.
		const err = await rejectsWith(sbx.files.readFile("/workspace/missing.txt"), 404);
		assert.match(String(err.rawBody), /FILE_NOT_FOUND/);
	});

	it("creates directories (mkdir -p, mode, owner by name) and deletes files and trees", { timeout: STEP_MS }, async () => {
		await sbx.files.createDirectories([
			{ path: "/workspace/tree/a/b", mode: 750, owner: "root", group: "root" },
			{ path: "/workspace/tree/c" },
		]);
		const infos = await sbx.files.getFileInfo(["/workspace/tree/a/b", "/workspace/tree/c", "/workspace/tree/a"]);
		assert.equal(infos["/workspace/tree/a/b"]?.type, "directory");
		assert.equal(infos["/workspace/tree/a/b"]?.mode, 750);
		assert.equal(infos["/workspace/tree/a/b"]?.owner, "root");
		assert.equal(infos["/workspace/tree/c"]?.mode, 755, "the SDK's default mode");
		assert.equal(infos["/workspace/tree/a"]?.mode, 755, "parents are created 0755");
		await rejectsWith(sbx.files.createDirectories([{ path: "/workspace/tree/x", owner: "no-such-user" }]), 400, "INVALID_ARGUMENT");
		await sbx.files.writeFiles([{ path: "/workspace/tree/a/b/f.txt", data: "f" }]);
		await sbx.files.deleteFiles(["/workspace/tree/a/b/f.txt"]);
		await rejectsWith(sbx.files.getFileInfo(["/workspace/tree/a/b/f.txt"]), 404, "FILE_NOT_FOUND");
		await rejectsWith(sbx.files.deleteFiles(["/workspace/tree/a"]), 400, "INVALID_ARGUMENT");
		await rejectsWith(sbx.files.deleteFiles(["/workspace/tree/nope"]), 404, "FILE_NOT_FOUND");
		await sbx.files.deleteDirectories(["/workspace/tree"]);
		await rejectsWith(sbx.files.getFileInfo(["/workspace/tree"]), 404, "FILE_NOT_FOUND");
		await rejectsWith(sbx.files.deleteDirectories(["/workspace/tree"]), 404, "FILE_NOT_FOUND");
	});

	it("lists directories with depth and searches with globs", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([
			{ path: "/workspace/ls/b.txt", data: "bb" },
			{ path: "/workspace/ls/a.md", data: "a", mode: 640 },
			{ path: "/workspace/ls/sub/c.txt", data: "c" },
		]);
		await sbx.commands.run("ln -s / /workspace/ls/link");
		const one = await sbx.files.listDirectory({ path: "/workspace/ls" });
		assert.deepEqual(
			one.map((e) => [e.path, e.type]),
			[
				["/workspace/ls/a.md", "file"],
				["/workspace/ls/b.txt", "file"],
				["/workspace/ls/link", "symlink"],
				["/workspace/ls/sub", "directory"],
			],
		);
		assert.equal(one[0].mode, 640);
		assert.equal(one[1].size, 2);
		assert.ok(one[0].modifiedAt instanceof Date);
		const two = await sbx.files.listDirectory({ path: "/workspace/ls", depth: 2 });
		assert.deepEqual(
			two.map((e) => e.path),
			["/workspace/ls/a.md", "/workspace/ls/b.txt", "/workspace/ls/link", "/workspace/ls/sub", "/workspace/ls/sub/c.txt"],
			"descendants follow their parent; the symlink is not entered",
		);
		await rejectsWith(sbx.files.listDirectory({ path: "/workspace/ls/link" }), 400, "INVALID_ARGUMENT");
		await rejectsWith(sbx.files.listDirectory({ path: "/workspace/nope" }), 404, "FILE_NOT_FOUND");
		const txt = await sbx.files.search({ path: "/workspace/ls", pattern: "*.txt" });
		assert.deepEqual(
			txt.map((e) => e.path),
			["/workspace/ls/b.txt", "/workspace/ls/sub/c.txt"],
		);
		assert.equal(txt[0].type, "file");
		const all = await sbx.files.search({ path: "/workspace/ls" });
		assert.equal(all.length, 4, "default pattern: every file and link, no directory");
	});

	it("moves files, sets permissions and replaces contents", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([
			{ path: "/workspace/ops/a.txt", data: "host=localhost\nport=1\nhost=localhost\n" },
			{ path: "/workspace/ops/b.txt", data: "nothing here\n" },
		]);
		await sbx.files.createDirectories([{ path: "/workspace/ops/moved" }]);
		await sbx.files.moveFiles([{ src: "/workspace/ops/a.txt", dest: "/workspace/ops/moved/c.txt" }]);
		await rejectsWith(sbx.files.getFileInfo(["/workspace/ops/a.txt"]), 404, "FILE_NOT_FOUND");
		await rejectsWith(
			sbx.files.moveFiles([{ src: "/workspace/ops/none", dest: "/workspace/ops/x" }]),
			404,
			"FILE_NOT_FOUND",
		);
		await sbx.files.setPermissions([{ path: "/workspace/ops/moved/c.txt", mode: 600, owner: "root", group: "root" }]);
		let info = await sbx.files.getFileInfo(["/workspace/ops/moved/c.txt"]);
		assert.equal(info["/workspace/ops/moved/c.txt"].mode, 600);
		assert.equal(info["/workspace/ops/moved/c.txt"].owner, "root");
		await rejectsWith(
			sbx.files.setPermissions([{ path: "/workspace/ops/b.txt", mode: 644, owner: "nobody-at-all" }]),
			400,
			"INVALID_ARGUMENT",
		);
		await sbx.files.replaceContents([
			{ path: "/workspace/ops/moved/c.txt", oldContent: "localhost", newContent: "0.0.0.0" },
		]);
		assert.equal(await sbx.files.readFile("/workspace/ops/moved/c.txt"), "host=0.0.0.0\nport=1\nhost=0.0.0.0\n");
		info = await sbx.files.getFileInfo(["/workspace/ops/moved/c.txt"]);
		assert.equal(info["/workspace/ops/moved/c.txt"].mode, 600, "the mode survives a replace");
		const counts = await sbx.files.replaceContentsDetailed([
			{ path: "/workspace/ops/moved/c.txt", oldContent: "0.0.0.0", newContent: "::" },
			{ path: "/workspace/ops/b.txt", oldContent: "absent", newContent: "x" },
		]);
		assert.deepEqual(
			counts.sort((x, y) => x.path.localeCompare(y.path)),
			[
				{ path: "/workspace/ops/b.txt", replacedCount: 0 },
				{ path: "/workspace/ops/moved/c.txt", replacedCount: 2 },
			],
		);
		await rejectsWith(
			sbx.files.replaceContents([{ path: "/workspace/ops/b.txt", oldContent: "", newContent: "x" }]),
			400,
			"INVALID_ARGUMENT",
		);
	});

	it("resolves owner and group names inside the sandbox on upload", { timeout: STEP_MS }, async () => {
		await sbx.commands.run("echo 'crew:x:4242:4343::/:/bin/false' >>/etc/passwd; echo 'crewg:x:4343:' >>/etc/group");
		await sbx.files.writeFiles([
			{ path: "/workspace/owned/f.txt", data: "mine", mode: 640, owner: "crew", group: "crewg" },
		]);
		const info = (await sbx.files.getFileInfo(["/workspace/owned/f.txt"]))["/workspace/owned/f.txt"];
		assert.equal(info.owner, "crew");
		assert.equal(info.group, "crewg");
		assert.equal(info.mode, 640);
		// Upload errors keep only the status in the SDK; the body still names the field.
		const err = await rejectsWith(
			sbx.files.writeFiles([{ path: "/workspace/owned/g.txt", data: "x", owner: "ghost" }]),
			400,
		);
		assert.match(String(err.rawBody), /owner/);
		await rejectsWith(sbx.files.getFileInfo(["/workspace/owned/g.txt"]), 404, "FILE_NOT_FOUND");
	});

	it("runs the filesystem round of OpenSandbox's own e2e suite", { timeout: STEP_MS }, async () => {
		// The steps of its "03 filesystem operations" test: a directory of mode 644 as a move
		// target, owner/group names the image has (nobody/nogroup), search "*".
		const d1 = "/tmp/fs_e2e_1";
		const d2 = "/tmp/fs_e2e_2";
		await sbx.files.createDirectories([
			{ path: d1, mode: 755 },
			{ path: d2, mode: 644 },
		]);
		const dirs = await sbx.files.getFileInfo([d1, d2]);
		assert.equal(dirs[d1].mode, 755);
		assert.equal(dirs[d2].mode, 644);
		await sbx.files.writeFiles([
			{ path: `${d1}/f1`, data: "one", mode: 644 },
			{ path: `${d1}/f3`, data: "three", mode: 755, owner: "nobody", group: "nogroup" },
		]);
		const found = new Set((await sbx.files.search({ path: d1, pattern: "*" })).map((f) => f.path));
		assert.ok(found.has(`${d1}/f1`) && found.has(`${d1}/f3`), [...found].join(","));
		await sbx.files.setPermissions([{ path: `${d1}/f1`, mode: 755, owner: "nobody", group: "nogroup" }]);
		const f1 = (await sbx.files.getFileInfo([`${d1}/f1`]))[`${d1}/f1`];
		assert.deepEqual([f1.mode, f1.owner, f1.group], [755, "nobody", "nogroup"]);
		await sbx.files.moveFiles([{ src: `${d1}/f3`, dest: `${d2}/moved` }]);
		assert.equal(await sbx.files.readFile(`${d2}/moved`), "three");
		await sbx.files.deleteDirectories([d1, d2]);
		const r = await sbx.commands.run(`test ! -d ${d1} && test ! -d ${d2} && echo OK`);
		assert.equal(out(r).trim(), "OK");
	});

	it("lists the sandbox by a metadata filter", { timeout: STEP_MS }, async () => {
		const m = manager();
		const mine = await m.listSandboxInfos({ metadata: { suite: h.tag } });
		assert.deepEqual(
			mine.items.map((s) => s.id),
			[sbx.id],
		);
		assert.ok(mine.items[0].createdAt instanceof Date);
		const running = await m.listSandboxInfos({ metadata: { suite: h.tag }, states: ["Running"] });
		assert.ok(running.items.some((s) => s.id === sbx.id), "state=Running filter");
		const other = await m.listSandboxInfos({ metadata: { suite: `${h.tag}-other` } });
		assert.equal(other.items.length, 0, "a non-matching metadata filter finds nothing");
	});

	it("returns sandbox info with metadata, createdAt and expiresAt", { timeout: STEP_MS }, async () => {
		const info = await sbx.getInfo();
		assert.equal(info.id, sbx.id);
		assert.equal(info.status?.state, "Running");
		assert.equal(info.metadata?.suite, h.tag);
		assert.ok(info.createdAt instanceof Date && !Number.isNaN(info.createdAt.getTime()));
		assert.ok(info.expiresAt instanceof Date, "expiresAt set for timeoutSeconds 600");
		assert.ok(info.expiresAt > info.createdAt);
		assert.equal(info.image?.uri, "busybox");
	});

	it("returns the same sandbox for the same cell.sessionKey", { timeout: STEP_MS }, async () => {
		const key = `${h.tag}-session`;
		const a = await createSandbox({ extensions: { "cell.sessionKey": key } });
		const b = await createSandbox({ extensions: { "cell.sessionKey": key } });
		assert.equal(a.id, b.id);
		await a.files.writeFiles([{ path: "/workspace/mark", data: "kept" }]);
		assert.equal(await b.files.readFile("/workspace/mark"), "kept");
		await a.kill();
		h.created.delete(a.id);
	});

	it("getMetrics reports the sandbox's cgroup limits and usage", { timeout: STEP_MS }, async () => {
		const m = await createSandbox({ resource: { cpu: "500m", memory: "256Mi" } });
		const metrics = await m.getMetrics();
		assert.equal(metrics.cpuCount, 1, "500m rounds up to one core");
		assert.equal(metrics.memoryTotalMiB, 256);
		assert.ok(metrics.memoryUsedMiB > 0 && metrics.memoryUsedMiB < 256, `used ${metrics.memoryUsedMiB}`);
		assert.ok(metrics.cpuUsedPercentage >= 0 && metrics.cpuUsedPercentage <= 100);
		assert.ok(Math.abs(metrics.timestamp - Date.now()) < 60000, "timestamp in ms");
		await m.kill();
		h.created.delete(m.id);
	});

	it("pause freezes, resume thaws; resuming a running sandbox is 409", { timeout: STEP_MS }, async () => {
		const p = await createSandbox();
		await p.commands.run("echo kept > /tmp/mem");
		await p.pause();
		assert.equal((await p.getInfo()).status?.state, "Paused");
		const resumed = await p.resume({ readyTimeoutSeconds: 10 });
		h.closers.push(resumed);
		assert.equal((await resumed.getInfo()).status?.state, "Running");
		assert.equal(out(await resumed.commands.run("cat /tmp/mem")), "kept\n", "memory kept");
		await rejectsWith(manager().resumeSandbox(p.id), 409, "DOCKER::SANDBOX_NOT_PAUSED");
		await p.kill();
		h.created.delete(p.id);
	});

	it("connects to an existing sandbox by id", { timeout: STEP_MS }, async () => {
		const again = await Sandbox.connect({
			sandboxId: sbx.id,
			connectionConfig: conn(),
			readyTimeoutSeconds: 10,
		});
		h.closers.push(again);
		const r = await again.commands.run("cat /workspace/hello.txt");
		assert.equal(out(r), "hello world\n");
	});

	it("kills the sandbox: later getInfo and connect are 404", { timeout: STEP_MS }, async () => {
		const id = sbx.id;
		await sbx.kill();
		await rejectsWith(sbx.getInfo(), 404, "SANDBOX_NOT_FOUND");
		await rejectsWith(
			Sandbox.connect({ sandboxId: id, connectionConfig: conn(), readyTimeoutSeconds: 5 }),
			404,
		);
		await rejectsWith(manager().getSandboxInfo(id), 404, "SANDBOX_NOT_FOUND");
		h.created.delete(id);
		assert.ok(!fs.existsSync(path.join(h.state, "sandboxes", id)), "state dir removed");
	});

	it("stops cleanly and leaves no cgroup or mount behind", { timeout: STEP_MS }, async () => {
		await deleteLeftovers();
		assert.deepEqual([...h.created], [], "every sandbox deleted");
		const r = await stopCelld();
		assert.ok(r && !r.killed, `celld exits on SIGTERM within 15 s:\n${tail()}`);
		assert.deepEqual(leftoverCgroups(), [], "no cgroup left for this state dir");
		assert.deepEqual(mountsUnder(h.tmp), [], "no mount left under the temp dir");
	});
});
