// tools/bench-interp.mjs — leg 11 of tools/bench: the code interpreter (the code-interpreter
// image, its service on 127.0.0.1:49999 in the sandbox) as its clients see it, through E2B's
// SDK (npm @e2b/code-interpreter, from tests/e2b; template code-interpreter-v1) and through
// OpenSandbox's /code routes (POST /v1/sandboxes/{id}/proxy/44772/code, server-sent events,
// read here as tests/sdk/code.test.mjs reads them), against the same celld.
//
//   node tools/bench-interp.mjs N CREATE_N WARMUP E2B_URL OPENSANDBOX_URL API_KEY
//
// 1. create to first result: CREATE_N times (after one untimed), Sandbox.create() then
//    runCode("1+1") until it answers a result (retried while the service is not up yet);
//    each sandbox killed after, untimed.
// 2. one sandbox kept: after its first run, idle IDLE_MS, its memory as celld reads it from
//    the sandbox's cgroup (GET /v1/sandboxes/{id}: usage.memoryBytes, memory.current or v1's
//    memory.usage_in_bytes): the sandbox, its service and one idle Python kernel.
// 3. warm runCode("1+1") on that sandbox: E2B's default context and an OpenSandbox context
//    made for the run, WARMUP untimed each, then N samples each, alternating, each timed
//    until the run's result is in hand (E2B: runCode resolved; OpenSandbox: the stream ended
//    with execution_complete after a result).
//
// Prints one JSON object: {"create": [ms...], "e2b": [ms...], "opensandbox": [ms...],
// "memoryBytes": B, "memoryPeakBytes": B, "idleMs": ms}. A failure prints its message on stderr
// and exits 1; every sandbox it made is killed first.
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const [n, createN, warmup, e2bUrl, osUrl, apiKey] = process.argv.slice(2);
if (!(Number(n) > 0) || !(Number(createN) > 0) || !(Number(warmup) >= 0) || !e2bUrl || !osUrl || !apiKey) {
	console.error("usage: bench-interp.mjs N CREATE_N WARMUP E2B_URL OPENSANDBOX_URL API_KEY");
	process.exit(2);
}
const IDLE_MS = 3000;

const ci = await import(
	pathToFileURL(path.join(REPO, "tests", "e2b", "node_modules", "@e2b", "code-interpreter", "dist", "index.mjs"))
);
const opts = { apiKey, apiUrl: e2bUrl, sandboxUrl: e2bUrl, requestTimeoutMs: 60_000 };
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const live = new Set();

function checkResult(ex) {
	if (ex.error) throw new Error(`E2B: runCode failed: ${ex.error.name}: ${ex.error.value}`);
	if (ex.results[0]?.text !== "2") throw new Error(`E2B: unexpected result ${JSON.stringify(ex.results)}`);
}

// A fresh sandbox's service starts its kernel in about a second: runCode is retried while the
// proxy answers that nothing listens on 49999 yet, as tests/e2b/interpreter.test.mjs does.
async function firstRun(sbx) {
	for (let i = 0; ; i++) {
		try {
			return await sbx.runCode("1+1");
		} catch (e) {
			if (i >= 600 || !/49999/.test(e.message)) throw e;
			await sleep(20);
		}
	}
}

async function createToFirstResult() {
	const t0 = performance.now();
	const sbx = await ci.Sandbox.create(opts);
	live.add(sbx);
	const ex = await firstRun(sbx);
	const ms = performance.now() - t0;
	checkResult(ex);
	return { sbx, ms };
}

async function kill(sbx) {
	await sbx.kill();
	live.delete(sbx);
}

const osHeaders = { "OPEN-SANDBOX-API-KEY": apiKey, "Content-Type": "application/json" };

async function osCall(method, url, body) {
	const res = await fetch(url, { method, headers: osHeaders, body: body && JSON.stringify(body) });
	const text = await res.text();
	if (!res.ok) throw new Error(`OpenSandbox: ${method} ${url}: ${res.status} ${text.slice(0, 300)}`);
	return text ? JSON.parse(text) : null;
}

// One POST /code, read to the end of its stream; the result must be "2".
async function osRun(base, context) {
	const res = await fetch(`${base}/code`, {
		method: "POST",
		headers: { ...osHeaders, accept: "text/event-stream" },
		body: JSON.stringify({ code: "1+1", context }),
	});
	if (res.status !== 200) throw new Error(`OpenSandbox: POST /code: ${res.status} ${await res.text()}`);
	let buf = "";
	let result;
	let last;
	const dec = new TextDecoder();
	for await (const chunk of res.body) {
		buf += dec.decode(chunk, { stream: true });
		let i;
		while ((i = buf.indexOf("\n\n")) >= 0) {
			const ev = JSON.parse(buf.slice(0, i).replace(/^data: ?/, ""));
			buf = buf.slice(i + 2);
			if (ev.type === "ping") continue;
			if (ev.type === "result") result = ev.results?.["text/plain"];
			last = ev.type;
		}
	}
	if (result !== "2" || last !== "execution_complete")
		throw new Error(`OpenSandbox: POST /code ended with ${last}, result ${JSON.stringify(result)}`);
}

async function timed(f) {
	const t0 = performance.now();
	await f();
	return performance.now() - t0;
}

const out = { create: [], e2b: [], opensandbox: [], idleMs: IDLE_MS };
try {
	// 1. create to first result, one untimed first (module loading, the page cache)
	await kill((await createToFirstResult()).sbx);
	for (let i = 0; i < Number(createN); i++) {
		const { sbx, ms } = await createToFirstResult();
		out.create.push(ms);
		await kill(sbx);
	}

	// 2. one sandbox, idle after its first run: its cgroup's memory
	const { sbx } = await createToFirstResult();
	await sleep(IDLE_MS);
	const info = await osCall("GET", `${osUrl}/v1/sandboxes/${sbx.sandboxId}`);
	if (typeof info?.usage?.memoryBytes !== "number")
		throw new Error(`OpenSandbox: GET /v1/sandboxes/{id} has no usage.memoryBytes: ${JSON.stringify(info?.usage)}`);
	out.memoryBytes = info.usage.memoryBytes;
	out.memoryPeakBytes = info.usage.memoryPeakBytes ?? null;

	// 3. warm runs, both ways, on that sandbox
	const base = `${osUrl}/v1/sandboxes/${sbx.sandboxId}/proxy/44772`;
	const ctx = await osCall("POST", `${base}/code/context`, { language: "python" });
	const e2bRun = async () => checkResult(await sbx.runCode("1+1"));
	const osRunCtx = () => osRun(base, ctx);
	for (let i = 0; i < Number(warmup); i++) {
		await e2bRun();
		await osRunCtx();
	}
	for (let i = 0; i < Number(n); i++) {
		out.e2b.push(await timed(e2bRun));
		out.opensandbox.push(await timed(osRunCtx));
	}
	await kill(sbx);
} catch (e) {
	console.error(e?.stack || String(e));
	for (const s of live) await s.kill().catch(() => {});
	process.exit(1);
}
console.log(JSON.stringify(out));
