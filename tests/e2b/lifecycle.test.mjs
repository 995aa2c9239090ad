// E2B's control plane through the unchanged SDK: create (metadata, envVars, template),
// list (metadata and state filters, pages), getInfo, setTimeout, pause and connect, metrics,
// kill, and one registry shared with the OpenSandbox API.
import { describe, it } from "node:test";
import assert from "node:assert/strict";

import { AuthenticationError, Sandbox } from "e2b";

import { STEP_MS, h, skip, stopsCleanly, useCelld, createSandbox, opts, auditRecords } from "./harness.mjs";

describe("E2B's control plane", { skip }, () => {
	useCelld();

	const e2b = (p, init = {}) =>
		fetch(`http://127.0.0.1:${h.e2bPort}${p}`, {
			...init,
			headers: { "X-API-Key": h.apiKey, ...(init.headers || {}) },
		});
	const openSandbox = (p, init = {}) =>
		fetch(`http://127.0.0.1:${h.port}/v1${p}`, {
			...init,
			headers: {
				"OPEN-SANDBOX-API-KEY": h.apiKey,
				"Content-Type": "application/json",
				...(init.headers || {}),
			},
		});
	const listAll = async (query, extra = {}) => {
		const pages = Sandbox.list({ ...opts(), query, ...extra });
		const out = [];
		while (pages.hasNext) out.push(...(await pages.nextItems()));
		return out;
	};

	it("creates a sandbox whose metadata, env and template show", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({
			metadata: { suite: h.tag, case: "create" },
			envs: { GREETING: "hello world", EMPTY: "" },
		});
		assert.match(sbx.sandboxId, /^[0-9a-z]+$/);
		const info = await sbx.getInfo();
		assert.equal(info.sandboxId, sbx.sandboxId);
		assert.equal(info.templateId, "default", "base is the image default");
		assert.deepEqual(info.metadata, { suite: h.tag, case: "create" });
		assert.equal(info.state, "running");
		assert.ok(info.cpuCount >= 1 && info.memoryMB > 0, JSON.stringify(info));
		const end = info.endAt.getTime() - Date.now();
		assert.ok(end > 500_000 && end <= 601_000, `endAt ${info.endAt.toISOString()}: the 600 s timeout`);
		// envd's /envs: the create's envVars.
		const res = await e2b("/envs", {
			headers: { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "49983" },
		});
		assert.equal(res.status, 200);
		assert.deepEqual(await res.json(), { GREETING: "hello world", EMPTY: "" });
		// The detail's own members.
		const detail = await (await e2b(`/sandboxes/${sbx.sandboxId}`)).json();
		assert.equal(detail.envdVersion, "0.6.4");
		assert.ok(detail.envdAccessToken, "the envd token");
		assert.equal(detail.lifecycle.autoResume, true);
		assert.equal(detail.lifecycle.onTimeout, "kill", "the shipped policy deletes at the timeout");
		const inspect = await (await openSandbox(`/sandboxes/${sbx.sandboxId}/inspect`)).json();
		assert.equal(inspect.timers.idleTimeout, 0, "no idle pause: E2B's timeout is the clock");
		assert.equal(inspect.timers.stopAfter, 3600, "the policy's other timers");
		assert.equal(await sbx.kill(), true);
	});

	it("maps autoPause, allow_internet_access and network onto cell's create", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({
			lifecycle: { onTimeout: "pause" },
			network: { allowOut: ["example.com", "10.1.0.0/16"], denyOut: ["0.0.0.0/0"] },
		});
		const detail = await (await e2b(`/sandboxes/${sbx.sandboxId}`)).json();
		assert.equal(detail.lifecycle.onTimeout, "pause");
		assert.equal(detail.allowInternetAccess, false);
		assert.deepEqual(detail.network, { allowOut: ["example.com", "10.1.0.0/16"], denyOut: ["0.0.0.0/0"] });
		// The same policy through the OpenSandbox API.
		const os = await (await openSandbox(`/sandboxes/${sbx.sandboxId}/inspect`)).json();
		assert.equal(os.timers.onTimeout, "stop");
		assert.equal(await sbx.kill(), true);

		const off = await createSandbox({ allowInternetAccess: false });
		const d2 = await (await e2b(`/sandboxes/${off.sandboxId}`)).json();
		assert.equal(d2.allowInternetAccess, false);
		assert.equal(d2.network, undefined, "no policy: no network at all");
		assert.equal(await off.kill(), true);

		// What cannot be honoured is refused, naming the field.
		const bad = async (body, field) => {
			const res = await e2b("/v2/sandboxes", {
				method: "POST",
				headers: { "Content-Type": "application/json" },
				body: JSON.stringify({ templateID: "base", metadata: { suite: h.tag }, ...body }),
			});
			const text = await res.text();
			assert.equal(res.status, 400, text);
			assert.equal(JSON.parse(text).code, 400);
			assert.match(JSON.parse(text).message, field);
		};
		await bad({ network: { allowOut: ["not a name!"] } }, /network\.allowOut\[0\]/);
		await bad({ network: { maskRequestHost: "x" } }, /network\.maskRequestHost/);
		await bad({ mcp: { x: {} } }, /^mcp/);
		await bad({ autoPauseMemory: true }, /autoPauseMemory/);
		await bad({ autoResume: { enabled: "no" } }, /autoResume/);
		await bad({ timeout: 0 }, /timeout/);
		await bad({ envVars: { "A=B": "x" } }, /envVars/);
		await bad({ metadata: { suite: 1 } }, /metadata/);
	});

	it("takes an image's name as a template, refuses a template it does not have", { timeout: STEP_MS }, async () => {
		const sbx = await Sandbox.create("default", { ...opts(), metadata: { suite: h.tag } });
		h.created.add(sbx.sandboxId);
		assert.equal((await sbx.getInfo()).templateId, "default");
		assert.equal(await sbx.kill(), true);
		await assert.rejects(Sandbox.create("no-such-template", opts()), /404.*no-such-template/);
		const res = await e2b("/sandboxes", {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ templateID: "no-such-template", secure: true }),
		});
		assert.equal(res.status, 404);
		assert.equal((await res.json()).code, 404);
	});

	it("lists by metadata and state, a page at a time", { timeout: STEP_MS }, async () => {
		const group = `g${Date.now()}`;
		const a = await createSandbox({ metadata: { suite: h.tag, group, n: "1" } });
		const odd = "a=b&c d+e%/é";
		const b = await createSandbox({ metadata: { suite: h.tag, group, n: "2", "odd key&=": odd } });
		// One page of one, then the next through the token.
		const pages = Sandbox.list({ ...opts(), query: { metadata: { group } }, limit: 1 });
		const first = await pages.nextItems();
		assert.equal(first.length, 1);
		assert.ok(pages.hasNext, "a next token after the first page");
		const second = await pages.nextItems();
		assert.equal(second.length, 1);
		assert.equal(pages.hasNext, false, "no token after the last page");
		// Newest first, as E2B lists (to the millisecond: the two were made in one second,
		// most likely); order "asc" turns it round.
		assert.deepEqual([first[0].sandboxId, second[0].sandboxId], [b.sandboxId, a.sandboxId], "newest first");
		const asc = await listAll({ metadata: { group } }, { order: "asc" });
		assert.deepEqual(asc.map((s) => s.sandboxId), [a.sandboxId, b.sandboxId], "order asc: oldest first");
		// startedAfter: its second included, the next one not.
		const info = await a.getInfo();
		let got = await listAll({ metadata: { group }, startedAfter: info.startedAt });
		assert.ok(got.some((s) => s.sandboxId === a.sandboxId), "startedAfter includes its own second");
		got = await listAll({ metadata: { group }, startedAfter: new Date(info.startedAt.getTime() + 60_000) });
		assert.deepEqual(got, [], "nothing started a minute later");
		assert.equal(first[0].state, "running");
		assert.equal(first[0].metadata.group, group);
		// A metadata filter of two pairs, and one that matches nothing.
		got = await listAll({ metadata: { group, n: "2" } });
		assert.deepEqual(got.map((s) => s.sandboxId), [b.sandboxId]);
		got = await listAll({ metadata: { group, "odd key&=": odd } });
		assert.deepEqual(got.map((s) => s.sandboxId), [b.sandboxId], "keys and values escaped by the SDK");
		got = await listAll({ metadata: { group, n: "3" } });
		assert.equal(got.length, 0);
		// States: one paused.
		assert.equal(await b.pause(), true);
		got = await listAll({ metadata: { group }, state: ["paused"] });
		assert.deepEqual(got.map((s) => [s.sandboxId, s.state]), [[b.sandboxId, "paused"]]);
		got = await listAll({ metadata: { group }, state: ["running"] });
		assert.deepEqual(got.map((s) => s.sandboxId), [a.sandboxId]);
		got = await listAll({ metadata: { group }, state: ["running", "paused"] });
		assert.equal(got.length, 2);
		// The v1 list: running ones.
		const v1 = await (await e2b(`/sandboxes?metadata=${encodeURIComponent(`group=${group}`)}`)).json();
		assert.deepEqual(v1.map((s) => s.sandboxID), [a.sandboxId]);
		// A bad state or token is refused.
		let res = await e2b("/v2/sandboxes?state=sleeping");
		assert.equal(res.status, 400);
		res = await e2b("/v2/sandboxes?nextToken=garbage");
		assert.equal(res.status, 400);
		assert.equal(await Sandbox.kill(a.sandboxId, opts()), true);
		assert.equal(await Sandbox.kill(b.sandboxId, opts()), true);
	});

	it("sets the timeout, pauses, and connect resumes", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox();
		await sbx.setTimeout(120_000);
		let info = await sbx.getInfo();
		let left = info.endAt.getTime() - Date.now();
		assert.ok(left > 100_000 && left <= 121_000, `endAt ${info.endAt.toISOString()} after setTimeout(120 s)`);
		assert.equal(await sbx.isRunning(), true);
		assert.equal(await sbx.pause(), true);
		assert.equal(await sbx.pause(), false, "already paused");
		assert.equal(await sbx.isRunning(), false, "a paused sandbox is not running");
		info = await sbx.getInfo();
		assert.equal(info.state, "paused");
		// The OpenSandbox API sees the same state.
		const os = await (await openSandbox(`/sandboxes/${sbx.sandboxId}`)).json();
		assert.equal(os.status.state, "Paused");
		const again = await Sandbox.connect(sbx.sandboxId, { ...opts(), timeoutMs: 200_000 });
		assert.equal(again.sandboxId, sbx.sandboxId);
		assert.equal(await again.isRunning(), true);
		info = await again.getInfo();
		assert.equal(info.state, "running");
		left = info.endAt.getTime() - Date.now();
		assert.ok(left > 180_000 && left <= 201_000, `endAt ${info.endAt.toISOString()} after connect`);
		// Connect to a running one: 200, the timeout kept when it is later.
		let res = await e2b(`/sandboxes/${sbx.sandboxId}/connect`, {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ timeout: 10 }),
		});
		assert.equal(res.status, 200);
		assert.equal((await res.json()).sandboxID, sbx.sandboxId);
		info = await again.getInfo();
		assert.ok(info.endAt.getTime() - Date.now() > 150_000, "a shorter connect timeout does not cut it");
		// A filesystem-only pause stops it; connect starts it again: 201.
		assert.equal(await sbx.pause({ keepMemory: false }), true);
		const stopped = await (await openSandbox(`/sandboxes/${sbx.sandboxId}`)).json();
		assert.equal(stopped.status.reason, "Stopped");
		res = await e2b(`/v2/sandboxes/${sbx.sandboxId}/connect`, {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ timeout: 60 }),
		});
		assert.equal(res.status, 201);
		assert.equal((await sbx.getInfo()).state, "running");
		// Refresh and the deprecated resume.
		res = await e2b(`/sandboxes/${sbx.sandboxId}/refreshes`, {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ duration: 300 }),
		});
		assert.equal(res.status, 204);
		left = (await sbx.getInfo()).endAt.getTime() - Date.now();
		assert.ok(left > 280_000, `refresh: ${left} ms left`);
		res = await e2b(`/sandboxes/${sbx.sandboxId}/resume`, { method: "POST" });
		assert.equal(res.status, 409, "resume of a running sandbox");
		assert.equal(await sbx.kill(), true);
		// Audited as the OpenSandbox API's changes are: the same records, in order.
		const lines = auditRecords(h.state).filter((l) => l.sandbox === sbx.sandboxId);
		const actions = lines.map((l) => l.action).filter((a) => a !== "exec");
		for (const a of ["create", "renew", "pause", "resume", "stop", "delete"])
			assert.ok(actions.includes(a), `${a} in ${JSON.stringify(lines)}`);
		const pausedRenew = lines.find((l) => l.action === "renew" && l.expiresAt === null);
		assert.ok(pausedRenew, "the pause's cleared expiry is recorded");
	});

	it("reports metrics", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox();
		const metrics = await sbx.getMetrics();
		assert.ok(Array.isArray(metrics) && metrics.length === 1, JSON.stringify(metrics));
		const m = metrics[0];
		assert.ok(m.cpuCount >= 1 && m.memTotal > 0 && m.memUsed > 0, JSON.stringify(m));
		assert.ok(m.cpuUsedPct >= 0 && m.cpuUsedPct <= 100);
		assert.ok(Math.abs(m.timestamp.getTime() - Date.now()) < 30_000);
		// A range that ends before now holds no sample (cell samples when asked).
		const hourAgo = new Date(Date.now() - 3_600_000);
		assert.deepEqual(await sbx.getMetrics({ start: hourAgo, end: new Date(hourAgo.getTime() + 1_800_000) }), []);
		const res = await e2b("/metrics", {
			headers: { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "49983" },
		});
		assert.equal(res.status, 200);
		const envd = await res.json();
		assert.ok(envd.ts > 0 && envd.cpu_count >= 1 && envd.mem_total > 0, JSON.stringify(envd));
		assert.equal(await sbx.kill(), true);
	});

	it("kills: true, then false for a sandbox that is not there", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox();
		assert.equal(await sbx.kill(), true);
		assert.equal(await sbx.kill(), false);
		assert.equal(await Sandbox.kill("0123456789abcdef", opts()), false);
		await assert.rejects(Sandbox.getInfo(sbx.sandboxId, opts()), /not found/);
		await assert.rejects(Sandbox.connect(sbx.sandboxId, opts()), /not found/);
		assert.equal((await openSandbox(`/sandboxes/${sbx.sandboxId}`)).status, 404);
	});

	it("shares one registry with the OpenSandbox API", { timeout: STEP_MS }, async () => {
		// Made through E2B, seen and deleted through OpenSandbox.
		const sbx = await createSandbox({ metadata: { suite: h.tag, via: "e2b" } });
		let res = await openSandbox(`/sandboxes/${sbx.sandboxId}`);
		assert.equal(res.status, 200);
		const os = await res.json();
		assert.equal(os.image.uri, "default");
		assert.deepEqual(os.metadata, { suite: h.tag, via: "e2b" });
		assert.equal(os.status.state, "Running");
		res = await openSandbox(`/sandboxes/${sbx.sandboxId}`, { method: "DELETE" });
		assert.equal(res.status, 204);
		assert.equal(await sbx.kill(), false, "gone for E2B too");
		// Made through OpenSandbox, seen and killed through E2B.
		res = await openSandbox("/sandboxes", {
			method: "POST",
			body: JSON.stringify({ image: { uri: "default" }, metadata: { suite: h.tag, via: "os" }, timeout: 600 }),
		});
		assert.equal(res.status, 202, await res.clone().text());
		const id = (await res.json()).id;
		h.created.add(id);
		const info = await Sandbox.getInfo(id, opts());
		assert.equal(info.templateId, "default");
		assert.deepEqual(info.metadata, { suite: h.tag, via: "os" });
		assert.equal(info.state, "running");
		const listed = await listAll({ metadata: { via: "os" } });
		assert.deepEqual(listed.map((s) => s.sandboxId), [id]);
		assert.equal(await Sandbox.kill(id, opts()), true);
		assert.equal((await openSandbox(`/sandboxes/${id}`)).status, 404);
	});

	it("refuses a wrong API key", { timeout: STEP_MS }, async () => {
		const pages = Sandbox.list({ ...opts(), apiKey: "e2b_0000" });
		await assert.rejects(pages.nextItems(), AuthenticationError);
		await assert.rejects(Sandbox.create({ ...opts(), apiKey: "e2b_0000" }), AuthenticationError);
	});

	stopsCleanly();
});
