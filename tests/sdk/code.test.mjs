// OpenSandbox's code interpreter (execd's /code routes, specs/execd-api.yaml) on the
// code-interpreter image. OpenSandbox's code-interpreter SDK is not on npm, so the routes are
// driven here by a client written to the spec (and to what that SDK sends: a context
// {id, language} with every run, DELETE /code?id= with the init event's id); the sandbox
// itself is made with the OpenSandbox SDK, with the entrypoint OpenSandbox's clients pass.
// Contexts, a run's events in order, errors as the last event, interrupts, concurrent and
// queued runs, languages this image has no kernel for, bad input.
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";

import { interpreterImages } from "../lib/interpreter-image.mjs";
import { STEP_MS, createSandbox, deleteLeftovers, h, operatorRequest, skip, sleep, stopsCleanly, useCelld } from "./harness.mjs";

const ENTRYPOINT = ["/opt/code-interpreter/code-interpreter.sh"];

// A client of one sandbox's /code routes (base: its execd proxy URL).
function codeClient(base) {
	const headers = () => ({ "OPEN-SANDBOX-API-KEY": h.apiKey, "Content-Type": "application/json" });
	const call = async (method, path, body) => {
		const res = await fetch(`${base}${path}`, {
			method,
			headers: headers(),
			body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
		});
		const text = await res.text();
		return { status: res.status, body: text ? JSON.parse(text) : null };
	};
	// POST /code: its events, parsed from the SSE stream ("<json>\n\n" each), pings left out.
	const run = async (code, context, onEvent) => {
		const res = await fetch(`${base}/code`, {
			method: "POST",
			headers: { ...headers(), accept: "text/event-stream" },
			body: JSON.stringify({ code, context }),
		});
		if (res.status !== 200) return { status: res.status, body: await res.json() };
		const events = [];
		let buf = "";
		const dec = new TextDecoder();
		for await (const chunk of res.body) {
			buf += dec.decode(chunk, { stream: true });
			let i;
			while ((i = buf.indexOf("\n\n")) >= 0) {
				const ev = JSON.parse(buf.slice(0, i).replace(/^data: ?/, ""));
				buf = buf.slice(i + 2);
				if (ev.type === "ping") continue;
				events.push(ev);
				await onEvent?.(ev);
			}
		}
		return { status: 200, events };
	};
	return { call, run };
}
const types = (evs) => evs.map((e) => e.type);
const stdout = (evs) => evs.filter((e) => e.type === "stdout").map((e) => e.text).join("");
const proxyBase = (id) => `http://127.0.0.1:${h.port}/v1/sandboxes/${id}/proxy/44772`;

describe("the code interpreter through OpenSandbox's /code routes", { skip }, () => {
	useCelld({ images: interpreterImages });
	let sbx, call, run;

	before(async () => {
		sbx = await createSandbox({ image: "code-interpreter", entrypoint: ENTRYPOINT, readyTimeoutSeconds: 60 });
		({ call, run } = codeClient(proxyBase(sbx.id)));
		// The service starts with the sandbox: the first call right after the create finds
		// it (celld waits out its start for a sandbox that just started).
		const r = await call("GET", "/code/contexts");
		assert.equal(r.status, 200, JSON.stringify(r.body));
	});

	it("creates, gets, lists and deletes contexts", { timeout: STEP_MS }, async () => {
		const c = await call("POST", "/code/context", { language: "python" });
		assert.equal(c.status, 200, JSON.stringify(c.body));
		assert.equal(c.body.language, "python");
		assert.match(c.body.id, /^[a-z0-9-]+$/);
		const got = await call("GET", `/code/contexts/${c.body.id}`);
		assert.deepEqual(got.body, c.body);
		const all = await call("GET", "/code/contexts");
		assert.ok(all.body.some((x) => x.id === c.body.id));
		const py = await call("GET", "/code/contexts?language=python");
		assert.ok(py.body.every((x) => x.language === "python") && py.body.some((x) => x.id === c.body.id));
		assert.equal((await call("DELETE", `/code/contexts/${c.body.id}`)).status, 200);
		const gone = await call("GET", `/code/contexts/${c.body.id}`);
		assert.equal(gone.status, 404);
		assert.equal(gone.body.code, "CONTEXT_NOT_FOUND");
		assert.equal((await call("DELETE", "/code/contexts?language=python")).status, 200);
		assert.deepEqual((await call("GET", "/code/contexts?language=python")).body, []);
	});

	it("streams a run's events in order: init, output, result, count, complete", { timeout: STEP_MS }, async () => {
		const ctx = (await call("POST", "/code/context", { language: "python" })).body;
		const r = await run("import sys\nprint('hello')\nprint('oops', file=sys.stderr)\nresult = 2 + 2\nresult", ctx);
		assert.equal(r.status, 200);
		const t = types(r.events);
		assert.equal(t[0], "init");
		assert.equal(r.events[0].text, ctx.id, "init names the context");
		assert.equal(t.at(-1), "execution_complete");
		assert.ok(t.includes("execution_count"));
		assert.equal(stdout(r.events), "hello\n");
		assert.equal(r.events.find((e) => e.type === "stderr").text, "oops\n");
		const res = r.events.find((e) => e.type === "result");
		assert.equal(res.results["text/plain"], "4");
		assert.ok(t.indexOf("stdout") < t.indexOf("result") && t.indexOf("result") < t.length - 1);
		assert.equal(typeof r.events.at(-1).execution_time, "number");
		assert.ok(r.events.every((e) => typeof e.timestamp === "number" || e.type === "init"));
		// State kept in the context; a language-only run uses the language's own context.
		const again = await run("result * 10", ctx);
		assert.equal(again.events.find((e) => e.type === "result").results["text/plain"], "40");
		const direct = await run("'direct'", { language: "python" });
		assert.equal(direct.events.find((e) => e.type === "result").results["text/plain"], "'direct'");
		assert.match(direct.events[0].text, /^[a-z0-9-]+$/, "init names the context it ran in");
	});

	it("returns a chart as a PNG in the result's MIME bundle", { timeout: STEP_MS }, async () => {
		const r = await run("import matplotlib.pyplot as plt\nplt.bar(['a', 'b'], [1, 3])\nplt.show()", { language: "python" });
		const res = r.events.find((e) => e.type === "result" && e.results["image/png"]);
		assert.ok(res, JSON.stringify(types(r.events)));
		assert.equal(Buffer.from(res.results["image/png"], "base64").subarray(1, 4).toString(), "PNG");
		assert.equal(res.results["application/vnd.cell.chart+json"].type, "bar");
	});

	it("ends a failed run with its error, not execution_complete", { timeout: STEP_MS }, async () => {
		const ctx = (await call("POST", "/code/context", { language: "python" })).body;
		const r = await run("print(undefined_variable)", ctx);
		const t = types(r.events);
		assert.equal(t.at(-1), "error");
		assert.ok(!t.includes("execution_complete"));
		const e = r.events.at(-1).error;
		assert.equal(e.ename, "NameError");
		assert.match(e.evalue, /undefined_variable/);
		assert.ok(Array.isArray(e.traceback) && e.traceback.length > 0);
	});

	it("keeps contexts apart, runs them at once, and queues runs on one context", { timeout: STEP_MS }, async () => {
		const a = (await call("POST", "/code/context", { language: "python" })).body;
		const b = (await call("POST", "/code/context", { language: "python" })).body;
		await run("secret = 'a'", a);
		const other = await run("secret", b);
		assert.equal(other.events.at(-1).error?.ename, "NameError");
		// Two contexts at once: each one's 1 s sleep overlaps the other's (both started before
		// either ended).
		const marks = [];
		const mark = (name) => async (ev) => {
			if (ev.type === "stdout") marks.push(`${name}:${ev.text.trim()}`);
		};
		const code = "import time\nprint('start', flush=True)\ntime.sleep(1)\nprint('end', flush=True)";
		await Promise.all([run(code, a, mark("a")), run(code, b, mark("b"))]);
		assert.ok(marks.indexOf("a:start") < marks.indexOf("b:end") && marks.indexOf("b:start") < marks.indexOf("a:end"), marks.join());
		// On one context, the second waits for the first: its start comes after the first's end.
		marks.length = 0;
		await Promise.all([run(code, a, mark("1")), sleep(200).then(() => run(code, a, mark("2")))]);
		assert.deepEqual(marks, ["1:start", "1:end", "2:start", "2:end"]);
	});

	it("interrupts a run by the init event's id; an unknown id is 404", { timeout: STEP_MS }, async () => {
		const ctx = (await call("POST", "/code/context", { language: "python" })).body;
		let initId;
		let interrupted;
		const r = await run("import time\nfor i in range(100):\n    print(i, flush=True)\n    time.sleep(0.2)", ctx, async (ev) => {
			if (ev.type === "init") initId = ev.text;
			if (ev.type === "stdout" && ev.text.trim() === "1" && !interrupted)
				interrupted = await call("DELETE", `/code?id=${encodeURIComponent(initId)}`);
		});
		assert.equal(interrupted.status, 200);
		assert.equal(r.events.at(-1).type, "error");
		assert.equal(r.events.at(-1).error.ename, "KeyboardInterrupt");
		assert.ok(Number(stdout(r.events).trim().split("\n").at(-1)) < 50, "stopped early");
		// The context is usable at once.
		assert.equal((await run("'after'", ctx)).events.find((e) => e.type === "result").results["text/plain"], "'after'");
		const fake = await call("DELETE", `/code?id=fake-${Date.now()}`);
		assert.equal(fake.status, 404);
	});

	it("refuses a language without a kernel, naming the kernels there are", { timeout: STEP_MS }, async () => {
		for (const language of ["java", "go", "typescript"]) {
			const c = await call("POST", "/code/context", { language });
			assert.equal(c.status, 400, `${language}: ${JSON.stringify(c.body)}`);
			assert.match(c.body.message, new RegExp(`${language}.*kernels here: python`));
		}
		const r = await run("1", { language: "java" });
		assert.equal(r.status, 400);
	});

	it("answers bad input with a clear 4xx and changes nothing", { timeout: STEP_MS }, async () => {
		let r = await call("POST", "/code", "{nope");
		assert.equal(r.status, 400);
		r = await call("POST", "/code", { code: "" });
		assert.equal(r.status, 400);
		assert.match(r.body.message, /code/);
		r = await call("POST", "/code", { code: "1", context: { id: "no-such-context", language: "python" } });
		assert.equal(r.status, 404);
		r = await call("POST", "/code", { code: "x = '" + "y".repeat(10 << 20) + "'" });
		assert.equal(r.status, 413);
		r = await call("POST", "/code/context", { language: 7 });
		assert.equal(r.status, 400);
		r = await call("GET", "/code/contexts?language=no%2Fslash");
		assert.equal(r.status, 400);
		r = await call("DELETE", "/code/contexts");
		assert.equal(r.status, 400, "a bulk delete names its language");
		r = await call("DELETE", "/code");
		assert.equal(r.status, 400);
		const ok = await run("'still here'", { language: "python" });
		assert.equal(ok.events.find((e) => e.type === "result").results["text/plain"], "'still here'");
	});

	// The idle rule counts only a client's use: a sandbox whose service and kernel run, and
	// that nobody calls, pauses at its idle timeout (the service sends nothing on its own).
	it("never keeps its sandbox awake by itself", { timeout: STEP_MS * 2 }, async () => {
		const idle = await createSandbox({
			image: "code-interpreter",
			entrypoint: ENTRYPOINT,
			readyTimeoutSeconds: 60,
			extensions: { "cell.idleTimeout": "3" },
		});
		const at = `http://127.0.0.1:${h.port}/v1/sandboxes/${idle.id}`;
		const get = async (path, init = {}) =>
			fetch(`${at}${path}`, { ...init, headers: { "OPEN-SANDBOX-API-KEY": h.apiKey, "Content-Type": "application/json" } });
		const res = await get("/proxy/44772/code", { method: "POST", body: JSON.stringify({ code: "1 + 1" }) });
		assert.equal(res.status, 200);
		assert.ok((await res.text()).includes("execution_complete"), "a run in the idle sandbox");
		let state;
		for (let i = 0; i < 600 && state !== "Paused"; i++, await sleep(100))
			state = (await (await get("")).json()).status.state;
		assert.equal(state, "Paused", "paused at its idle timeout with its kernel running");
	});

	stopsCleanly();
});

// cell's own service in an image that lacks it, as an image pulled from a registry with
// Python and ipykernel would: images derived here from code-interpreter by committing a
// sandbox's changes: the service, the `user` account and setpriv removed (so the launcher
// falls back to uid 1000 and to python to drop root); then ipykernel; then python3.
describe("the code interpreter in an image without cell's service", { skip }, () => {
	const names = { noService: `ci-any-${process.pid}`, noKernel: `ci-nokernel-${process.pid}`, noPython: `ci-nopython-${process.pid}` };
	// The images committed here go again, with their layers (the images dir may be shared).
	useCelld({
		images: interpreterImages,
		cleanup: async () => {
			await deleteLeftovers();
			for (const name of [names.noPython, names.noKernel, names.noService])
				assert.equal((await operatorRequest("DELETE", `/v1/images/${name}`)).status, 200);
			assert.equal((await operatorRequest("POST", "/v1/images/prune")).status, 200);
		},
	});
	const api = async (method, path, body) => {
		const res = await fetch(`http://127.0.0.1:${h.port}/v1${path}`, {
			method,
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey, "Content-Type": "application/json" },
			body: body === undefined ? undefined : JSON.stringify(body),
		});
		const text = await res.text();
		return { status: res.status, body: text ? JSON.parse(text) : null };
	};
	// A stopped sandbox shows as Paused with reason Stopped (OpenSandbox has no Stopped).
	const waitState = async (id, want) => {
		const shown = (st) => (st.reason === "Stopped" ? "Stopped" : st.state);
		let state;
		for (let i = 0; i < 300 && state !== want; i++, await sleep(100)) state = shown((await api("GET", `/sandboxes/${id}`)).body.status);
		assert.equal(state, want);
	};
	const sh = async (sbx, cmd) => {
		const r = await sbx.commands.run(cmd);
		assert.equal(r.exitCode ?? 0, 0, `${cmd}: ${JSON.stringify(r.logs)}`);
	};
	const commit = async (sbx, name) => {
		assert.equal((await api("POST", `/sandboxes/${sbx.id}/pause`)).status < 300, true);
		await waitState(sbx.id, "Paused");
		const c = await api("POST", `/sandboxes/${sbx.id}/commit`, { name });
		assert.equal(c.status, 201, JSON.stringify(c.body));
		assert.equal((await api("POST", `/sandboxes/${sbx.id}/resume`)).status < 300, true);
		await waitState(sbx.id, "Running");
	};

	// The first commit writes the built image whole as the new image's base layer (a minute
	// for its 1.3 GiB); the others sit on that image and write only their changes.
	before(async () => {
		const src = await createSandbox({ image: "code-interpreter", entrypoint: ["tail", "-f", "/dev/null"], readyTimeoutSeconds: 60 });
		await sh(src, "rm -rf /opt/code-interpreter /var/lib/code-interpreter /usr/bin/setpriv && userdel user && rm -rf /home/user");
		await commit(src, names.noService);
		await src.kill();
		const next = await createSandbox({ image: names.noService, entrypoint: ["tail", "-f", "/dev/null"], readyTimeoutSeconds: 60 });
		await sh(next, "rm -rf /usr/lib/python3/dist-packages/ipykernel && ! python3 -c 'import ipykernel' 2>/dev/null");
		await commit(next, names.noKernel);
		await sh(next, "rm -f /usr/bin/python3 /usr/bin/python3.*");
		await commit(next, names.noPython);
		await next.kill();
	});

	it("binds it read-only for the entrypoint OpenSandbox's clients pass, and runs code as an unprivileged user", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({ image: names.noService, entrypoint: ENTRYPOINT, readyTimeoutSeconds: 60 });
		const { run } = codeClient(proxyBase(sbx.id));
		const r = await run(
			[
				"import os",
				"print(os.getuid(), os.getgid(), os.getcwd())",
				"print([l.split()[1] for l in open('/proc/self/status') if l.startswith('CapEff')][0])",
				"try:\n    open('/opt/code-interpreter/planted.py', 'w')\nexcept OSError as e:\n    print('refused', e.errno)",
				"6 * 7",
			].join("\n"),
			{ language: "python" },
		);
		assert.equal(r.status, 200, JSON.stringify(r.body));
		assert.equal(types(r.events).at(-1), "execution_complete", JSON.stringify(r.events));
		assert.deepEqual(stdout(r.events).trim().split("\n"), ["1000 1000 /var/lib/code-interpreter/home", "0000000000000000", "refused 30"]);
		assert.equal(r.events.find((e) => e.type === "result").results["text/plain"], "42");
		// A stop and a cold start bind it again; the kernel's loss is said first.
		assert.equal((await api("POST", `/sandboxes/${sbx.id}/stop`)).status < 300, true);
		await waitState(sbx.id, "Stopped");
		assert.equal((await api("POST", `/sandboxes/${sbx.id}/resume`)).status < 300, true);
		await waitState(sbx.id, "Running");
		const first = await run("'back'", { language: "python" });
		assert.equal(first.events?.at(-1).error?.ename, "KernelRestarted", JSON.stringify(first));
		const again = await run("'back'", { language: "python" });
		assert.equal(again.events?.find((e) => e.type === "result")?.results["text/plain"], "'back'", JSON.stringify(again));
	});

	// OpenSandbox's SDK always sends an entrypoint, `tail -f /dev/null` when given none: that
	// one, as no entrypoint at all, gives way to the launcher.
	it("starts it as the entrypoint when cell.codeInterpreter asks and none runs anything", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({ image: names.noService, extensions: { "cell.codeInterpreter": "true" }, readyTimeoutSeconds: 60 });
		assert.deepEqual((await api("GET", `/sandboxes/${sbx.id}`)).body.entrypoint, ENTRYPOINT);
		const viaSdk = await codeClient(proxyBase(sbx.id)).run("3 + 4", { language: "python" });
		assert.equal(viaSdk.events?.find((e) => e.type === "result")?.results["text/plain"], "7", JSON.stringify(viaSdk));
		const c = await api("POST", "/sandboxes", {
			image: { uri: names.noService },
			timeout: 600,
			resourceLimits: {},
			metadata: { suite: h.tag },
			extensions: { "cell.codeInterpreter": "true" },
		});
		assert.equal(c.status, 202, JSON.stringify(c.body));
		h.created.add(c.body.id);
		assert.deepEqual(c.body.entrypoint, ENTRYPOINT);
		await waitState(c.body.id, "Running");
		const r = await codeClient(proxyBase(c.body.id)).run("2 + 3", { language: "python" });
		assert.equal(r.events?.find((e) => e.type === "result")?.results["text/plain"], "5", JSON.stringify(r));
	});

	it("names what an image lacks: ipykernel at the first run, python3 at the create", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({ image: names.noKernel, entrypoint: ENTRYPOINT, readyTimeoutSeconds: 60 });
		const r = await codeClient(proxyBase(sbx.id)).run("1", { language: "python" });
		assert.equal(r.status, 400, JSON.stringify(r));
		assert.match(r.body.message, /lacks .*ipykernel.*needs ipykernel/);
		for (const extra of [{ extensions: { "cell.codeInterpreter": "true" } }, { entrypoint: ENTRYPOINT }]) {
			const c = await api("POST", "/sandboxes", { image: { uri: names.noPython }, timeout: 600, resourceLimits: {}, ...extra });
			assert.equal(c.status, 400, JSON.stringify(c.body));
			assert.match(c.body.message, new RegExp(`image ${names.noPython} has no python3`));
		}
		const bad = await api("POST", "/sandboxes", { image: { uri: names.noService }, timeout: 600, resourceLimits: {}, extensions: { "cell.codeInterpreter": "yes" } });
		assert.equal(bad.status, 400);
		assert.match(bad.body.message, /extensions.cell.codeInterpreter must be "true" or "false"/);
	});

	stopsCleanly();
});
