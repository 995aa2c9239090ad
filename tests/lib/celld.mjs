// A private celld for the client suites (tests/sdk: the OpenSandbox SDK; tests/e2b: E2B's
// SDK). Each test file calls its suite's useCelld() inside its describe.
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
//   CELL_TEST_SKIPS   the run's list of skips, which a file that cannot run appends to
//                     (make check's parts pass it; see "skips" below)
//   CELL_TEST_STRICT=1  a file may skip only for a host's lack (CI)

import { it, before, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const HERE = path.dirname(fileURLToPath(import.meta.url));
export const REPO = path.resolve(HERE, "..", "..");
const BUILD = path.resolve(process.env.CELL_BUILD || path.join(REPO, "build"));
export const CELLD = path.join(BUILD, "celld");
export const CELL_INIT = path.join(BUILD, "cell-init");
export const IS_ROOT = typeof process.getuid === "function" && process.getuid() === 0;

export const STEP_MS = 60_000; // per-case bound; every case also bounds its own polling

// ---------------------------------------------------------------------------
// harness

export const h = {
	tmp: null, // temp root (0711)
	state: null,
	images: null,
	port: 0,
	e2bPort: 0, // the E2B listener's (useCelld({e2b: true})), else 0
	apiKey: null, // e2b_<hex>: the shape E2B's Python SDK checks, accepted by both APIs
	celld: null, // ChildProcess
	celldExit: null, // Promise<{code, signal}>
	logPath: null,
	logTail: [],
	tag: `sdk-${crypto.randomBytes(4).toString("hex")}`,
	cleanup: null, // the file's (useCelld's opts.cleanup)
	created: new Set(), // sandbox ids to delete in the end
	closers: [], // SDK objects whose transport must be closed
	netns: false, // celld in a private network namespace (useCelld({netns: true}))
	celldArgs: [], // extra celld arguments of this file (useCelld({celldArgs}))
	bridge: null, // net.Server: 127.0.0.1:port -> celld's Unix socket (netns only)
};

export function sleep(ms) {
	return new Promise((r) => setTimeout(r, ms));
}

export function freePort() {
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

export function run(cmd, args, opts = {}) {
	const r = spawnSync(cmd, args, { encoding: "utf8", ...opts });
	if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
	if (r.status !== 0)
		throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${r.stderr}`);
	return r.stdout;
}

export function writeManifest(dir, packages) {
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
export function imageFromHostBusybox(dir) {
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
export function prepareImages() {
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

// celld in a private network namespace (unshare --net: only a loopback, down) cannot send
// a packet off this machine, whatever its sandboxes' networks do, and never touches the
// host's interfaces, routes or nftables. It listens on its Unix socket only; the SDK reaches
// it through a bridge here, 127.0.0.1:port to that socket (the Unix socket is trusted:
// celld checks no API key there).
function startBridge(socketPath) {
	return new Promise((resolve, reject) => {
		const server = net.createServer((client) => {
			const up = net.connect(socketPath);
			const drop = () => {
				client.destroy();
				up.destroy();
			};
			client.on("error", drop);
			up.on("error", drop);
			client.pipe(up);
			up.pipe(client);
		});
		server.on("error", reject);
		server.listen(0, "127.0.0.1", () => resolve(server));
	});
}

// A port picked free here may be taken by another program before celld binds it: celld then
// exits at once saying the address is in use, and the start is tried again on fresh ports
// (the E2B listener's too until its first start: its clients keep their URL after that).
export async function startCelld() {
	for (let attempt = 1; ; attempt++) {
		try {
			return await startCelldOnce();
		} catch (e) {
			if (attempt >= 5 || !e.addressInUse) throw e;
			if (!h.e2bStarted && h.e2bPort) h.e2bPort = await freePort();
		}
	}
}

async function startCelldOnce() {
	const socketPath = path.join(h.tmp, "cell.sock");
	if (h.netns) {
		if (!h.bridge) h.bridge = await startBridge(socketPath);
		h.port = h.bridge.address().port;
	} else {
		h.port = await freePort();
	}
	const keyFile = path.join(h.tmp, "api-key");
	fs.writeFileSync(keyFile, h.apiKey, { mode: 0o600 });
	// docker.io blocked: a name that is no image cell built is never pulled from outside
	// this machine (a file with a registry of its own passes --registries-conf later).
	const regconf = path.join(h.tmp, "registries.conf");
	fs.writeFileSync(
		regconf,
		'unqualified-search-registries = ["docker.io"]\n[[registry]]\nprefix = "docker.io"\nlocation = "docker.io"\nblocked = true\n',
	);
	const args = [
		"--state-dir", h.state,
		"--images", h.images,
		...(h.netns ? ["--no-tcp"] : ["--listen", `127.0.0.1:${h.port}`]),
		"--api-key-file", keyFile,
		"--socket", socketPath,
		"--init", CELL_INIT,
		"--policies", path.join(REPO, "policies"),
		"--interpreter", path.join(REPO, "src", "interpreter"),
		// No sandbox of these tests needs a network unless it asks (useCelld({netns})).
		"--network-default", "none",
		"--registries-conf", regconf,
		...h.celldArgs,
		...(h.e2bPort ? ["--e2b-listen", `127.0.0.1:${h.e2bPort}`] : []),
		...(process.env.CELLD_EXTRA_ARGS || "").split(/\s+/).filter(Boolean),
	];
	h.logPath = path.join(h.tmp, "celld.log");
	const log = fs.createWriteStream(h.logPath);
	// CELL_API_KEY would override the key file.
	const env = { ...process.env };
	delete env.CELL_API_KEY;
	// unshare execs celld in place: the child's pid is celld's.
	const child = h.netns
		? spawn("unshare", ["--net", "--", CELLD, ...args], { env, stdio: ["ignore", "pipe", "pipe"] })
		: spawn(CELLD, args, { env, stdio: ["ignore", "pipe", "pipe"] });
	let addressInUse = false;
	const keep = (chunk) => {
		log.write(chunk);
		if (/address already in use/i.test(chunk)) addressInUse = true;
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
		if (child.exitCode !== null || child.signalCode !== null) {
			const e = new Error(`celld exited early (${child.exitCode ?? child.signalCode}):\n${tail()}`);
			e.addressInUse = addressInUse;
			throw e;
		}
		try {
			const res = await fetch(`http://127.0.0.1:${h.port}/v1/sandboxes`, {
				headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
				signal: AbortSignal.timeout(2000),
			});
			await res.arrayBuffer();
			if (res.ok) {
				if (h.e2bPort) h.e2bStarted = true;
				return;
			}
			last = `HTTP ${res.status}`;
		} catch (e) {
			last = e.cause?.code || e.message;
		}
		await sleep(100);
	}
	throw new Error(`celld not ready on 127.0.0.1:${h.port} after 20 s (${last}):\n${tail()}`);
}

// A request on celld's Unix socket, the operator's listener (no key): for what only the
// operator may do, such as removing images and pruning the store. Resolves {status, body}.
export function operatorRequest(method, urlPath, body) {
	return new Promise((resolve, reject) => {
		const req = http.request(
			{ socketPath: path.join(h.tmp, "cell.sock"), method, path: urlPath, headers: { "Content-Type": "application/json" } },
			(res) => {
				let text = "";
				res.setEncoding("utf8");
				res.on("data", (c) => (text += c));
				res.on("end", () => resolve({ status: res.statusCode, body: text }));
			},
		);
		req.on("error", reject);
		req.end(body === undefined ? undefined : JSON.stringify(body));
	});
}

export function tail() {
	return h.logTail.map((l) => `  celld| ${l}`).join("\n");
}

export async function stopCelld() {
	if (h.bridge) {
		h.bridge.close();
		h.bridge = null;
	}
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
export function mountsUnder(dir) {
	return fs
		.readFileSync("/proc/self/mountinfo", "utf8")
		.split("\n")
		.map((l) => l.split(" ")[4])
		.filter((mp) => mp && (mp === dir || mp.startsWith(dir + "/")));
}

// cgroup dirs celld made for this state dir (CONTRACT: cell-<8 hex of sha256(state)>).
export function leftoverCgroups() {
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
export function reapCgroup(dir) {
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

// ---------------------------------------------------------------------------
// skips
//
// A file whose cases cannot run here records why, as the C suites do (tests/Makefile.inc's
// TEST_SKIPS): one "suite<TAB>test<TAB>kind<TAB>probe<TAB>reason" line appended to
// $CELL_TEST_SKIPS (suite: the directory, test: the file), so that make check's list shows
// it. Its kind is "host" when a probe found the host lacking, else "other". Under
// CELL_TEST_STRICT=1 only "host" skips: any other reason fails the file's cases instead
// (useCelld's before() fails, naming it).

export const STRICT = process.env.CELL_TEST_STRICT === "1";

// Why this process's test file cannot run here ({kind, probe, reason}), or null.
function whyNotRun() {
	if (!IS_ROOT) return { kind: "other", probe: "", reason: "needs root (celld creates namespaces and cgroups)" };
	return null;
}

const notRun = whyNotRun();
const failsNotRun = notRun && STRICT && notRun.kind !== "host";

// The skip's line, on stderr and in the run's list (when make names one).
function recordSkip({ kind, probe, reason }) {
	const file = process.argv[1] || "?";
	const fields = [path.basename(path.dirname(file)), path.basename(file), failsNotRun ? "other-strict" : kind, probe, reason];
	const line = fields.map((f) => String(f).replace(/[\t\n]/g, " ")).join("\t");
	console.error(`${fields[0]}/${fields[1]}: SKIP: ${reason} (${fields[2]}${probe ? `, probe ${probe}` : ""})`);
	if (process.env.CELL_TEST_SKIPS) fs.appendFileSync(process.env.CELL_TEST_SKIPS, `${line}\n`);
}

if (notRun) recordSkip(notRun);

// A test file's describe option: the reason its cases are skipped, or false.
export const skip = notRun && !failsNotRun ? notRun.reason : false;

// ---------------------------------------------------------------------------
// a test file's celld

// Called inside a test file's describe (through its suite's useCelld): a private celld for
// its cases, everything it made deleted in the end, even when a case fails.
//   opts.netns: celld in a private network namespace (see startBridge);
//   opts.celldArgs: more celld arguments (or a function returning them, called when the
//   file's cases start: after an earlier before hook, such as a registry lab's, has run);
//   opts.e2b: a second listener speaking E2B's API (--e2b-listen), on h.e2bPort;
//   opts.images(): the images dir to hand to celld (default: prepareImages, busybox);
//   opts.started(): called once celld answers;
//   opts.cleanup(): deletes what the file's cases made, through its client (before the
//   stop, and in stopsCleanly).
export function useCelld(opts = {}) {
	before(async () => {
		// Set when this describe starts, not when it is declared: a file's later describe
		// would otherwise hand its cleanup to an earlier one.
		h.cleanup = opts.cleanup || (async () => {});
		if (notRun)
			assert.fail(`not run: ${notRun.reason}; CELL_TEST_STRICT=1 allows only skips a host capability probe decided`);
		h.netns = !!opts.netns;
		h.celldArgs = (typeof opts.celldArgs === "function" ? opts.celldArgs() : opts.celldArgs) || [];
		for (const bin of [CELLD, CELL_INIT])
			assert.ok(fs.existsSync(bin), `${bin} missing: run make all (or set CELL_BUILD)`);
		h.tmp = fs.mkdtempSync(path.join(os.tmpdir(), "cell-sdk-"));
		fs.chmodSync(h.tmp, 0o711);
		h.state = path.join(h.tmp, "state");
		h.apiKey = `e2b_${crypto.randomBytes(20).toString("hex")}`;
		h.images = opts.images ? opts.images() : prepareImages();
		h.e2bStarted = false;
		h.e2bPort = opts.e2b ? await freePort() : 0;
		await startCelld();
		opts.started?.();
	});

	after(async () => {
		await h.cleanup().catch(() => {});
		await Promise.all(h.closers.map((c) => c.close?.().catch(() => {})));
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
}

// The last case of a file: every sandbox deleted, celld stopped, nothing left behind.
export function stopsCleanly() {
	it("stops cleanly and leaves no cgroup or mount behind", { timeout: STEP_MS }, async () => {
		await h.cleanup();
		assert.deepEqual([...h.created], [], "every sandbox deleted");
		const r = await stopCelld();
		assert.ok(r && !r.killed, `celld exits on SIGTERM within 15 s:\n${tail()}`);
		assert.deepEqual(leftoverCgroups(), [], "no cgroup left for this state dir");
		assert.deepEqual(mountsUnder(h.tmp), [], "no mount left under the temp dir");
	});
}
