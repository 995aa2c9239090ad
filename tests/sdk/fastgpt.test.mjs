// FastGPT's agent sandbox (its sdk/sandbox-adapter, OpenSandbox adapter) drives cell
// through the official SDK. Each case makes the SDK calls that adapter makes, with the
// options it passes, in the order its lifecycle makes them: ensureRunning (find by
// metadata sessionId, else create), the filesystem and command calls, health, metrics,
// endpoint, renew, a paused sandbox resumed, stop (delete, then poll until 404).

import { describe, it } from "node:test";
import assert from "node:assert/strict";

import {
	ConnectionConfig,
	ExecutionEventDispatcher,
	Sandbox,
	SandboxApiException,
	SandboxManager,
} from "@alibaba-group/opensandbox";

import { STEP_MS, h, rejectsWith, skip, sleep, stopsCleanly, useCelld } from "./harness.mjs";

const ROOT = "/workspace"; // the adapter's rootPath without a volume

// The adapter's ConnectionConfig: a base URL as the domain, its 120 s request timeout, and
// FastGPT's default of the server proxy.
function fgConnection() {
	return new ConnectionConfig({
		domain: `http://127.0.0.1:${h.port}`,
		apiKey: h.apiKey,
		requestTimeoutSeconds: 120,
		debug: false,
		useServerProxy: true,
	});
}

// The adapter's create/connect/resume options beside the connection (all unset in its
// default configuration).
function sdkOptions() {
	return {
		connectionConfig: fgConnection(),
		skipHealthCheck: undefined,
		readyTimeoutSeconds: undefined,
		healthCheckPollingInterval: undefined,
	};
}

// The adapter's runCommand: runStream with its own dispatcher, stopping at the first
// terminal event and aborting the rest of the body; the exit code from error.value.
async function runCommand(sbx, command, options, handlers) {
	const execution = { logs: { stdout: [], stderr: [] }, result: [] };
	const dispatcher = new ExecutionEventDispatcher(execution, handlers);
	const controller = new AbortController();
	let terminal;
	try {
		for await (const event of sbx.commands.runStream(command, options, controller.signal)) {
			await dispatcher.dispatch(event);
			if (event.type === "execution_complete" || event.type === "error") {
				terminal = event;
				controller.abort();
				break;
			}
		}
	} finally {
		if (!controller.signal.aborted) controller.abort();
	}
	assert.ok(terminal, "the stream ends with a terminal event");
	const value = execution.error?.value.trim();
	execution.exitCode = !execution.error
		? execution.complete
			? 0
			: null
		: value && /^-?\d+$/.test(value)
			? Number(value)
			: null;
	return execution;
}

// What execute() collects: stdout and stderr through the handlers, nothing accumulated.
async function execute(sbx, command, { workingDirectory = ROOT, timeoutMs, env } = {}) {
	const stdout = [];
	const stderr = [];
	const execution = await runCommand(
		sbx,
		command,
		{
			workingDirectory,
			timeoutSeconds: timeoutMs === undefined || timeoutMs <= 0 ? undefined : Math.ceil(timeoutMs / 1000),
			envs: env,
		},
		{ skipAccumulation: true, onStdout: (m) => stdout.push(m.text), onStderr: (m) => stderr.push(m.text) },
	);
	assert.equal(execution.logs.stdout.length, 0, "skipAccumulation honoured");
	return { stdout: stdout.join("\n"), stderr: stderr.join("\n"), exitCode: execution.exitCode, execution };
}

async function listBySession(sessionId) {
	const manager = SandboxManager.create({ connectionConfig: fgConnection() });
	try {
		return (await manager.listSandboxInfos({ metadata: { sessionId }, pageSize: 100 })).items;
	} finally {
		await manager.close().catch(() => {});
	}
}

const bytes = (s) => new TextEncoder().encode(s);
const text = (b) => new TextDecoder().decode(b);

describe("FastGPT's OpenSandbox adapter: its SDK calls with its options", { skip }, () => {
	let sbx;
	let sessionId;

	useCelld();

	it("ensureRunning: nothing for the session yet, so it creates one with the adapter's options", { timeout: STEP_MS }, async () => {
		sessionId = `fastgpt-${h.tag}`;
		assert.deepEqual(await listBySession(sessionId), []);
		sbx = await Sandbox.create({
			...sdkOptions(),
			image: "busybox",
			entrypoint: undefined,
			timeoutSeconds: null, // the adapter's default: no expiry
			resource: { cpu: "1", memory: "512Mi", disk: "1Gi" }, // convertResourceLimits
			env: { FASTGPT_ENV: "on" },
			metadata: { suite: h.tag, sessionId },
			networkPolicy: undefined,
			volumes: undefined,
			extensions: undefined,
		});
		h.created.add(sbx.id);
		h.closers.push(sbx);
		const info = await sbx.getInfo();
		assert.equal(info.status.state, "Running");
		assert.equal(info.metadata.sessionId, sessionId);
		assert.equal(info.expiresAt, null);
	});

	it("ensureRunning again: finds it by sessionId (Running) and connects", { timeout: STEP_MS }, async () => {
		const items = await listBySession(sessionId);
		assert.deepEqual(items.map((i) => [i.id, i.status.state]), [[sbx.id, "Running"]]);
		const again = await Sandbox.connect({ sandboxId: sbx.id, ...sdkOptions() });
		h.closers.push(again);
		assert.equal((await execute(again, "echo $FASTGPT_ENV")).stdout, "on");
		assert.equal(await again.isHealthy(), true); // ping()
	});

	it("writeFiles (text, bytes, a stream), readBytes, readBytesStream, getFileInfo", { timeout: STEP_MS }, async () => {
		const a = `${ROOT}/fg/a.txt`;
		const b = `${ROOT}/fg/b.bin`;
		const c = `${ROOT}/fg/c.txt`;
		await sbx.files.writeFiles([{ path: a, data: "line1\nline2\nline3\n", mode: 644 }]);
		await sbx.files.writeFiles([{ path: b, data: new Uint8Array([0, 1, 2, 255]), mode: undefined }]);
		// writeFiles with a ReadableStream, as the adapter wraps it (an async generator).
		const stream = new ReadableStream({
			start(ctl) {
				ctl.enqueue(bytes("part1-"));
				ctl.enqueue(bytes("part2"));
				ctl.close();
			},
		});
		const gen = (async function* () {
			const reader = stream.getReader();
			for (;;) {
				const { done, value } = await reader.read();
				if (done) return;
				yield value;
			}
		})();
		await sbx.files.writeFiles([{ path: c, data: gen }]);

		assert.equal(text(await sbx.files.readBytes(a)), "line1\nline2\nline3\n");
		assert.deepEqual([...(await sbx.files.readBytes(b))], [0, 1, 2, 255]);
		// The SDK's offset/limit are lines (1-based), as its execd spec says.
		assert.equal(text(await sbx.files.readBytes(a, { offset: 2, limit: 1 })), "line2\n");
		const chunks = [];
		for await (const chunk of sbx.files.readBytesStream(c)) chunks.push(...chunk);
		assert.equal(text(new Uint8Array(chunks)), "part1-part2");
		// writeFileStream: a ReadableStream handed to writeFiles as it is.
		await sbx.files.writeFiles([
			{ path: c, data: new ReadableStream({ start: (ctl) => (ctl.enqueue(bytes("direct")), ctl.close()) }) },
		]);
		assert.equal(text(await sbx.files.readBytes(c)), "direct");

		const info = await sbx.files.getFileInfo([a, b]);
		assert.deepEqual([info[a].type, info[a].mode, info[a].size], ["file", 644, 18]);
		assert.equal(info[b].size, 4);
		// A batch with a missing path is a 404 FILE_NOT_FOUND; the adapter then asks per path.
		const err = await rejectsWith(sbx.files.getFileInfo([a, `${ROOT}/fg/missing`]), 404, "FILE_NOT_FOUND");
		assert.ok(err instanceof SandboxApiException);
	});

	it("createDirectories, listDirectory, search, moveFiles, replaceContents, setPermissions, deletes", { timeout: STEP_MS }, async () => {
		const d = `${ROOT}/fg/dir`;
		// The adapter spreads its options into each entry: unset keys are present as undefined.
		await sbx.files.createDirectories([
			{ path: d, mode: 755, owner: undefined, group: undefined },
			{ path: `${d}/sub`, mode: 700, owner: "root", group: "root" },
		]);
		await sbx.files.writeFiles([{ path: `${d}/x.md`, data: "alpha beta alpha" }]);

		const listed = await sbx.files.listDirectory({ path: d });
		const byPath = Object.fromEntries(listed.map((e) => [e.path, e]));
		assert.equal(byPath[`${d}/sub`]?.type, "directory");
		assert.equal(byPath[`${d}/x.md`]?.type, "file");
		assert.equal(byPath[`${d}/x.md`].size, 16);
		assert.ok(byPath[`${d}/x.md`].modifiedAt instanceof Date);

		const found = await sbx.files.search({ path: `${ROOT}/fg`, pattern: "*.md" });
		assert.deepEqual(found.map((f) => f.path), [`${d}/x.md`]);

		await sbx.files.moveFiles([{ src: `${d}/x.md`, dest: `${d}/y.md` }]);
		await sbx.files.replaceContents([{ path: `${d}/y.md`, oldContent: "alpha", newContent: "gamma" }]);
		assert.equal(await sbx.files.readFile(`${d}/y.md`), "gamma beta gamma");

		// setPermissions with a mode, and (the adapter's "keep the mode") with the mode read back.
		await sbx.files.setPermissions([{ path: `${d}/y.md`, mode: 600 }]);
		const cur = (await sbx.files.getFileInfo([`${d}/y.md`]))[`${d}/y.md`];
		assert.equal(cur.mode, 600);
		await sbx.files.setPermissions([{ path: `${d}/y.md`, owner: "nobody", mode: cur.mode }]);
		const now = (await sbx.files.getFileInfo([`${d}/y.md`]))[`${d}/y.md`];
		assert.deepEqual([now.mode, now.owner], [600, "nobody"]);

		await sbx.files.deleteFiles([`${d}/y.md`]);
		await rejectsWith(sbx.files.getFileInfo([`${d}/y.md`]), 404, "FILE_NOT_FOUND");
		await sbx.files.deleteDirectories([d]);
		assert.deepEqual((await sbx.files.listDirectory({ path: `${ROOT}/fg` })).map((e) => e.path).sort(), [
			`${ROOT}/fg/a.txt`,
			`${ROOT}/fg/b.bin`,
			`${ROOT}/fg/c.txt`,
		]);
	});

	it("execute: runStream with its handlers, ended at the terminal event", { timeout: STEP_MS }, async () => {
		let r = await execute(sbx, "pwd; echo $K; echo oops >&2", { env: { K: "v" } });
		assert.deepEqual([r.stdout, r.stderr, r.exitCode], [`${ROOT}\nv`, "oops", 0]);
		assert.ok(r.execution.complete.executionTimeMs >= 0, "durationMs");
		r = await execute(sbx, "echo x; exit 3", { workingDirectory: "/tmp" });
		assert.deepEqual([r.stdout, r.exitCode, r.execution.error.name], ["x", 3, "CommandExecError"]);
		// timeoutMs 1500 is timeoutSeconds 2: killed, exit 124.
		const t0 = Date.now();
		r = await execute(sbx, "echo before; sleep 30", { timeoutMs: 1500 });
		assert.deepEqual([r.stdout, r.exitCode], ["before", 124]);
		assert.ok(Date.now() - t0 < 15_000);
	});

	it("executeBackground: the id from init, then interrupt", { timeout: STEP_MS }, async () => {
		const execution = await runCommand(
			sbx,
			"echo started; sleep 30",
			{ workingDirectory: ROOT, background: true, timeoutSeconds: undefined, envs: undefined },
			{ skipAccumulation: true },
		);
		assert.ok(execution.id, "a session id for the adapter");
		assert.ok(execution.complete, "execution_complete right after init");
		assert.equal((await sbx.commands.getCommandStatus(execution.id)).running, true);
		await sbx.commands.interrupt(execution.id); // kill()
		let st;
		for (let i = 0; i < 50; i++) {
			st = await sbx.commands.getCommandStatus(execution.id);
			if (!st.running) break;
			await sleep(200);
		}
		assert.equal(st.running, false);
	});

	it("metrics, endpoint URL and renewExpiration", { timeout: STEP_MS }, async () => {
		const m = await sbx.metrics.getMetrics();
		assert.ok(m.cpuCount > 0 && m.memoryTotalMiB > 0, JSON.stringify(m));
		const raw = await sbx.getEndpointUrl(8080);
		const url = new URL(raw); // the adapter parses it
		assert.equal(url.protocol, "http:");
		assert.equal(url.hostname, "127.0.0.1");
		const renewed = await sbx.renew(3600);
		assert.ok(renewed.expiresAt > new Date(), "renew gives an expiry in the future");
	});

	it("a paused sandbox (the adapter's Stopped) comes back through Sandbox.resume", { timeout: STEP_MS }, async () => {
		const manager = SandboxManager.create({ connectionConfig: fgConnection() });
		try {
			await manager.pauseSandbox(sbx.id);
		} finally {
			await manager.close().catch(() => {});
		}
		const [item] = await listBySession(sessionId);
		assert.equal(item.status.state, "Paused");
		const resumed = await Sandbox.resume({ sandboxId: sbx.id, ...sdkOptions() });
		h.closers.push(resumed);
		assert.equal((await resumed.getInfo()).status.state, "Running");
		assert.equal((await execute(resumed, `cat ${ROOT}/fg/c.txt`)).stdout, "direct");
	});

	it("a stopped sandbox (celld's idle stop) is reported Paused and comes back through Sandbox.resume, its files kept", { timeout: STEP_MS }, async () => {
		const bg = await execute(sbx, "sleep 1000 > /dev/null 2>&1 & echo started");
		assert.equal(bg.stdout, "started");
		const res = await fetch(`http://127.0.0.1:${h.port}/v1/sandboxes/${sbx.id}/stop`, {
			method: "POST",
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
		});
		assert.equal(res.status, 202);
		// What the adapter reads: a state its map knows (Paused → its Stopped), and why.
		const [item] = await listBySession(sessionId);
		assert.equal(item.status.state, "Paused");
		assert.equal(item.status.reason, "Stopped");
		const resumed = await Sandbox.resume({ sandboxId: sbx.id, ...sdkOptions() });
		h.closers.push(resumed);
		assert.equal((await resumed.getInfo()).status.state, "Running");
		assert.equal((await execute(resumed, `cat ${ROOT}/fg/c.txt`)).stdout, "direct", "files kept");
		const ps = await execute(resumed, "pgrep -x sleep || echo none");
		assert.equal(ps.stdout, "none", "a cold start: no process of before");
	});

	it("stop: kill, then getInfo until 404; the session finds nothing after", { timeout: STEP_MS }, async () => {
		await sbx.kill();
		let gone = false;
		for (let i = 0; i < 50 && !gone; i++) {
			try {
				await sbx.getInfo();
				await sleep(200);
			} catch (e) {
				gone = e instanceof SandboxApiException && e.statusCode === 404;
				if (!gone) throw e;
			}
		}
		assert.ok(gone, "getInfo answers 404 after the delete");
		h.created.delete(sbx.id);
		assert.deepEqual(await listBySession(sessionId), []);
	});

	stopsCleanly();
});
