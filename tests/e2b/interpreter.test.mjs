// The code interpreter through E2B's own SDK, @e2b/code-interpreter (pinned, unchanged),
// against a real celld and the code-interpreter image: Sandbox.create() names its template,
// code-interpreter-v1, which celld maps to that image, whose entrypoint starts the
// project's service on 127.0.0.1:49999 inside the sandbox; the SDK's runCode reaches it on
// the same URL through the port proxy (E2b-Sandbox-Port: 49999). State across runs, output
// streamed in order, a chart, a DataFrame, errors, timeouts, contexts, env vars, pause and
// a cold start, bad input.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { Sandbox as Interpreter, TimeoutError } from "@e2b/code-interpreter";

import { interpreterImages } from "../lib/interpreter-image.mjs";
import {
	CELL_INIT,
	CELLD,
	REPO,
	STEP_MS,
	deleteLeftovers,
	freePort,
	h,
	operatorRequest,
	opts,
	skip,
	sleep,
	startCelld,
	stopCelld,
	stopsCleanly,
	useCelld,
} from "./harness.mjs";

// Sandbox.create() returns once the sandbox runs; its service may take a moment more to
// listen, which celld waits out for a sandbox that just started (interpreter.h): the
// first runCode right after the create, or after a cold start, must simply work.
const firstRun = (sbx, code) => sbx.runCode(code);

describe("the code interpreter through E2B's SDK", { skip }, () => {
	useCelld({ images: interpreterImages });
	let sbx;

	before(async () => {
		sbx = await Interpreter.create({ ...opts(), metadata: { suite: h.tag } });
		h.created.add(sbx.sandboxId);
		await firstRun(sbx, "1");
	});
	after(async () => {
		if (sbx) await sbx.kill().catch(() => {});
	});

	it("keeps state across runs and answers the last expression", { timeout: STEP_MS }, async () => {
		await sbx.runCode("x = 40");
		const ex = await sbx.runCode("x + 2");
		assert.equal(ex.error, undefined);
		assert.equal(ex.results[0].text, "42");
		assert.equal(ex.results[0].isMainResult, true);
		assert.ok(ex.executionCount >= 2, `executionCount ${ex.executionCount}`);
		const who = await sbx.runCode("import getpass, os\ngetpass.getuser(), os.getcwd()");
		assert.equal(who.results[0].text, "('user', '/home/user')");
	});

	it("streams stdout and stderr while the code runs, in order", { timeout: STEP_MS }, async () => {
		const seen = [];
		const t0 = Date.now();
		let firstAt = 0;
		const ex = await sbx.runCode(
			"import sys, time\nprint('a', flush=True)\ntime.sleep(1.5)\nprint('b', file=sys.stderr, flush=True)\nprint('c')",
			{
				onStdout: (m) => {
					firstAt ||= Date.now();
					seen.push(["out", m.line]);
				},
				onStderr: (m) => seen.push(["err", m.line]),
			},
		);
		assert.deepEqual(seen, [["out", "a\n"], ["err", "b\n"], ["out", "c\n"]]);
		assert.deepEqual(ex.logs.stdout, ["a\n", "c\n"]);
		assert.deepEqual(ex.logs.stderr, ["b\n"]);
		// The first line came before the run ended (order of events, not a timing bound).
		assert.ok(firstAt && firstAt - t0 < Date.now() - t0, "the first line came before the end");
	});

	it("shows a matplotlib chart as PNG with its data, and a DataFrame as HTML and text", { timeout: STEP_MS }, async () => {
		const chart = await sbx.runCode(
			"import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [4, 5, 6], label='up')\nplt.title('rise')\nplt.show()",
		);
		assert.equal(chart.error, undefined, chart.error?.traceback);
		const fig = chart.results.find((r) => r.png);
		assert.ok(fig, "a PNG result");
		assert.equal(Buffer.from(fig.png, "base64").subarray(1, 4).toString(), "PNG");
		assert.equal(fig.chart?.type, "line");
		assert.equal(fig.chart?.title, "rise");
		assert.deepEqual(fig.chart.elements[0].points.map((p) => p.map(Number)), [[1, 4], [2, 5], [3, 6]]);

		// A bar chart's values are numbers, an unlabelled group named as E2B names it.
		const bars = await sbx.runCode("import matplotlib.pyplot as plt\nplt.bar(['p', 'q'], [1, 3])\nplt.show()");
		const bar = bars.results.find((r) => r.chart)?.chart;
		assert.equal(bar?.type, "bar");
		assert.deepEqual(bar.elements.map((e) => [e.label, e.value]), [["p", 1], ["q", 3]]);
		assert.match(bar.elements[0].group, /^Group \d+$/);
		// A picture PIL saves to a path comes back too, as in E2B's template.
		const pic = await sbx.runCode("from PIL import Image\nImage.new('RGB', (4, 4), 'red').save('/tmp/red.png')");
		assert.ok(pic.results.some((r) => r.png), "the saved picture is a result");

		const df = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})");
		const r = df.results[0];
		assert.match(r.html, /<table/);
		assert.match(r.text, /a\s+b/);
		const many = await sbx.runCode("from IPython.display import display\ndisplay(1)\ndisplay('two')\n3");
		assert.deepEqual(many.results.map((x) => x.text), ["1", "two", "3"]);
	});

	it("reports an exception with its name, value and traceback", { timeout: STEP_MS }, async () => {
		const errors = [];
		const ex = await sbx.runCode("def f():\n    return 1 / 0\nf()", { onError: (e) => errors.push(e.name) });
		assert.equal(ex.error.name, "ZeroDivisionError");
		assert.match(ex.error.value, /division by zero/);
		// Jupyter's traceback, colours and all (as E2B's own server hands it on).
		assert.match(ex.error.traceback.replace(/\x1b\[[0-9;]*m/g, ""), /----> 3 f\(\)/);
		assert.deepEqual(errors, ["ZeroDivisionError"]);
		// The context is still usable.
		assert.equal((await sbx.runCode("x")).results[0].text, "40");
	});

	it("ends a run at its timeout and keeps the context usable", { timeout: STEP_MS }, async () => {
		await assert.rejects(sbx.runCode("while True:\n    pass", { timeoutMs: 1500 }), TimeoutError);
		const after = await sbx.runCode("x + 1");
		assert.equal(after.results[0].text, "41", "state kept after the interrupt");
	});

	it("runs each context in its own kernel; restart and remove", { timeout: STEP_MS }, async () => {
		const a = await sbx.createCodeContext({ cwd: "/tmp" });
		const b = await sbx.createCodeContext();
		assert.equal(a.language, "python");
		assert.equal(a.cwd, "/tmp");
		await sbx.runCode("secret = 'a'", { context: a });
		assert.equal((await sbx.runCode("secret", { context: a })).results[0].text, "a", "a string without its quotes, as E2B gives it");
		const other = await sbx.runCode("secret", { context: b });
		assert.equal(other.error?.name, "NameError");
		assert.equal((await sbx.runCode("import os\nos.getcwd()", { context: a })).results[0].text, "/tmp");
		const ids = (await sbx.listCodeContexts()).map((c) => c.id);
		assert.ok(ids.includes(a.id) && ids.includes(b.id), JSON.stringify(ids));

		await sbx.restartCodeContext(a);
		assert.equal((await sbx.runCode("secret", { context: a })).error?.name, "NameError");
		// A cwd the kernel's user cannot enter is the caller's error (the SDK shows the
		// status), not a kernel that failed to start.
		await assert.rejects(sbx.createCodeContext({ cwd: "/root" }), /400/);
		await sbx.removeCodeContext(b);
		assert.ok(!(await sbx.listCodeContexts()).some((c) => c.id === b.id));
		await assert.rejects(sbx.runCode("1", { context: b }), /not found/i);
	});

	it("sets env vars for one run only", { timeout: STEP_MS }, async () => {
		const ex = await sbx.runCode("import os\nos.environ.get('CELL_TEST_VAR')", { envs: { CELL_TEST_VAR: "yes" } });
		assert.equal(ex.results[0].text, "yes");
		const later = await sbx.runCode("import os\nrepr(os.environ.get('CELL_TEST_VAR'))");
		assert.equal(later.results[0].text, "None");
	});

	it("bounds a run that prints 100 MB without killing its kernel", { timeout: STEP_MS * 3 }, async () => {
		let bytes = 0;
		const ex = await sbx.runCode("import sys\nfor _ in range(100):\n    sys.stdout.write('x' * (1 << 20))\n'done'", {
			onStdout: (m) => (bytes += m.line.length),
			timeoutMs: 120_000,
			requestTimeoutMs: 120_000,
		});
		assert.ok(bytes <= 17 << 20, `${bytes} bytes reached the client`);
		assert.equal(ex.results[0]?.text, "done");
		assert.equal((await sbx.runCode("x")).results[0].text, "40", "the kernel lives");
	});

	it("refuses bad input clearly and changes nothing", { timeout: STEP_MS }, async () => {
		// The SDK says only the status; the service's answer names the language and the
		// kernels there are.
		await assert.rejects(sbx.runCode("1", { language: "java" }), /400/);
		const post = (body, type = "application/json") =>
			fetch(`http://127.0.0.1:${h.e2bPort}/execute`, {
				method: "POST",
				headers: {
					"E2b-Sandbox-Id": sbx.sandboxId,
					"E2b-Sandbox-Port": "49999",
					"X-Access-Token": sbx.envdAccessToken,
					"Content-Type": type,
				},
				body,
			});
		let res = await post(JSON.stringify({ code: "1", language: "java" }));
		assert.equal(res.status, 400);
		assert.match(await res.text(), /java.*kernels here: python/);
		res = await post("{nope");
		assert.equal(res.status, 400);
		res = await post(JSON.stringify({ code: "1", context_id: "no-such-context" }));
		assert.equal(res.status, 404);
		res = await post(JSON.stringify({ code: "x = '" + "y".repeat(10 << 20) + "'" }));
		assert.equal(res.status, 413);
		assert.equal((await sbx.runCode("x")).results[0].text, "40", "nothing changed");
	});

	it("keeps its kernels through a restart of celld", { timeout: STEP_MS * 2 }, async () => {
		await sbx.runCode("survivor = 'kept'");
		const stopped = await stopCelld();
		assert.ok(stopped && !stopped.killed, "celld stops on SIGTERM");
		await startCelld();
		assert.equal((await sbx.runCode("survivor")).results[0].text, "kept");
	});

	it("keeps the kernel's state through a pause and resume", { timeout: STEP_MS * 2 }, async () => {
		await sbx.runCode("kept = 7");
		assert.equal(await sbx.pause(), true);
		assert.equal((await sbx.getInfo()).state, "paused");
		const back = await Interpreter.connect(sbx.sandboxId, opts());
		assert.equal((await back.runCode("kept * 6")).results[0].text, "42");
	});

	// E2B's filesystem-only pause is cell's stop: the disk kept, the processes gone; connect
	// starts it cold and the image's entrypoint starts the service again.
	it("after a stop and a cold start, says its kernel restarted, then runs", { timeout: STEP_MS * 3 }, async () => {
		assert.equal(await sbx.pause({ keepMemory: false }), true);
		const back = await Interpreter.connect(sbx.sandboxId, opts());
		const first = await firstRun(back, "kept");
		assert.equal(first.error?.name, "KernelRestarted");
		assert.match(first.error.value, /restarted/);
		const next = await back.runCode("'fresh'");
		assert.equal(next.results[0].text, "fresh");
	});

	stopsCleanly();
});

// A template the operator marks "codeInterpreter" in policies/e2b/templates.json: its image
// (here one derived from code-interpreter without the service, committed from a sandbox)
// runs cell's own service, bound in by celld, and the SDK's runCode works unchanged.
describe("the code interpreter in a template whose image lacks the service", { skip }, () => {
	const image = `ci-e2b-any-${process.pid}`;
	const policies = fs.mkdtempSync(path.join(os.tmpdir(), "cell-e2b-policies-"));
	const templates = (entry) => ({ templates: { base: "default", "code-interpreter-v1": "code-interpreter", "py-any": entry } });
	const writePolicies = (dir, entry) => {
		fs.cpSync(path.join(REPO, "policies"), dir, { recursive: true });
		fs.writeFileSync(path.join(dir, "e2b", "templates.json"), JSON.stringify(templates(entry)));
	};
	writePolicies(policies, { image, codeInterpreter: true });
	// The image committed here goes again, with its layers (the images dir may be shared).
	useCelld({
		images: interpreterImages,
		celldArgs: ["--policies", policies],
		cleanup: async () => {
			await deleteLeftovers();
			assert.equal((await operatorRequest("DELETE", `/v1/images/${image}`)).status, 200);
			assert.equal((await operatorRequest("POST", "/v1/images/prune")).status, 200);
		},
	});
	after(() => fs.rmSync(policies, { recursive: true, force: true }));
	const api = (method, p, body) =>
		fetch(`http://127.0.0.1:${h.port}/v1${p}`, {
			method,
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey, "Content-Type": "application/json" },
			body: body && JSON.stringify(body),
		});

	before(async () => {
		const src = await Interpreter.create({ ...opts(), metadata: { suite: h.tag } });
		h.created.add(src.sandboxId);
		const rm = await src.commands.run("rm -rf /opt/code-interpreter /var/lib/code-interpreter", { user: "root" });
		assert.equal(rm.exitCode, 0);
		assert.equal(await src.pause(), true);
		const c = await api("POST", `/sandboxes/${src.sandboxId}/commit`, { name: image });
		assert.equal(c.status, 201, await c.text());
		await src.kill();
	});

	it("runs code in it through runCode, as the image's user", { timeout: STEP_MS }, async () => {
		const sbx = await Interpreter.create("py-any", { ...opts(), metadata: { suite: h.tag } });
		h.created.add(sbx.sandboxId);
		const ex = await firstRun(sbx, "import getpass, os\ngetpass.getuser(), os.path.exists('/opt/code-interpreter/code_interpreter.py')");
		assert.equal(ex.error, undefined, JSON.stringify(ex.error));
		assert.equal(ex.results[0].text, "('user', True)");
		const ls = await sbx.commands.run("touch /opt/code-interpreter/x", { user: "root" }).catch((e) => e);
		assert.match(String(ls.stderr ?? ls.result?.stderr), /Read-only file system/);
		await sbx.kill();
	});

	it("refuses a templates.json entry it cannot read, naming it", { timeout: STEP_MS }, async () => {
		for (const [entry, want] of [
			[{ image, codeInterpreter: "yes" }, /templates\.py-any\.codeInterpreter must be a boolean/],
			[{ image, python: true }, /templates\.py-any: unknown member 'python'/],
			[{ codeInterpreter: true }, /templates\.py-any must be an image name or/],
		]) {
			const dir = fs.mkdtempSync(path.join(os.tmpdir(), "cell-e2b-bad-"));
			try {
				writePolicies(path.join(dir, "policies"), entry);
				const r = spawnSync(
					CELLD,
					[
						"--state-dir", path.join(dir, "state"),
						"--images", h.images,
						"--no-tcp",
						"--socket", path.join(dir, "s.sock"),
						"--e2b-listen", `127.0.0.1:${await freePort()}`,
						"--api-key-file", path.join(dir, "key"),
						"--init", CELL_INIT,
						"--policies", path.join(dir, "policies"),
					],
					{ encoding: "utf8", timeout: 20_000 },
				);
				assert.notEqual(r.status, 0, `celld started with ${JSON.stringify(entry)}`);
				assert.match(r.stderr + r.stdout, want);
			} finally {
				fs.rmSync(dir, { recursive: true, force: true });
			}
		}
	});

	stopsCleanly();
});
