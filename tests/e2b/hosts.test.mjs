// E2B's host names through the unchanged SDK: celld --e2b-domain routes
// "<port>-<id>.<domain>" (the SDK's sandbox.getHost(port)) on the E2B listener to that port
// with E2B's traffic rules: a private sandbox's port takes its traffic token
// (e2b-traffic-access-token) and nothing else, 403 without it; a public one takes none; 502
// when nothing listens or there is no such sandbox (as E2B's own SDK tests expect); any
// other host is E2B's API. And Template.exists (GET /templates/aliases/{alias}). Every
// request goes to 127.0.0.1 with the Host header set: no name is resolved.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";

import { Sandbox, Template } from "e2b";

import { STEP_MS, h, skip, sleep, stopsCleanly, useCelld, createSandbox, opts } from "./harness.mjs";

const DOMAIN = "e2b.test";

describe("E2B's host names", { skip }, () => {
	useCelld({ celldArgs: ["--e2b-domain", DOMAIN] });

	// A request to the E2B listener as a client resolving host would send it: status,
	// body, and whether it went on a connection an earlier request had (agent's).
	const hostGet = (host, path = "/", headers = {}, agent = false) =>
		new Promise((resolve, reject) => {
			const req = http.request(
				{ host: "127.0.0.1", port: h.e2bPort, path, agent, headers: { Host: host, ...headers } },
				(res) => {
					let body = "";
					res.setEncoding("utf8");
					res.on("data", (d) => (body += d));
					res.on("end", () => resolve({ status: res.statusCode, body, reused: req.reusedSocket }));
				},
			);
			req.on("error", reject);
			req.end();
		});
	const json = (res) => JSON.parse(res.body);

	// python's http.server on port in sbx, up once a request with headers gets 200.
	const serve = async (sbx, port, headers) => {
		await sbx.commands.run(`cd /tmp && python3 -m http.server ${port} >/dev/null 2>&1`, { background: true });
		for (let i = 0; i < 100; i++) {
			if ((await hostGet(sbx.getHost(port), "/", headers)).status === 200) return;
			await sleep(100);
		}
		assert.fail("http.server did not start");
	};

	it("getHost(port) reaches a private sandbox's port with its traffic token only", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({ domain: DOMAIN });
		assert.ok(sbx.trafficAccessToken);
		const host = sbx.getHost(8080);
		assert.equal(host, `8080-${sbx.sandboxId}.${DOMAIN}`);
		const token = { "e2b-traffic-access-token": sbx.trafficAccessToken };
		await serve(sbx, 8080, token);
		const ok = await hostGet(host, "/", token);
		assert.equal(ok.status, 200);
		assert.match(ok.body, /Directory listing/);

		// E2B's 403 and messages: the token missing, or wrong.
		let res = await hostGet(host);
		assert.equal(res.status, 403);
		assert.equal(json(res).code, 403);
		assert.match(json(res).message, /traffic access token.*is missing/);
		assert.equal(json(res).sandboxId, sbx.sandboxId);
		res = await hostGet(host, "/", { "e2b-traffic-access-token": "nope" });
		assert.equal(res.status, 403);
		assert.match(json(res).message, /traffic access token.*is invalid/);
		// Neither the API key nor the envd token is a traffic credential, as in E2B.
		assert.equal((await hostGet(host, "/", { "X-API-Key": h.apiKey })).status, 403);
		assert.equal((await hostGet(host, "/", { "X-Access-Token": sbx.envdAccessToken })).status, 403);
		assert.equal(
			(await hostGet(host, "/", { "e2b-traffic-access-token": sbx.envdAccessToken })).status,
			403,
		);
		// Another sandbox's token is not this one's.
		const other = await createSandbox({ domain: DOMAIN });
		assert.equal(
			(await hostGet(host, "/", { "e2b-traffic-access-token": other.trafficAccessToken })).status,
			403,
		);

		// The same rule on a connection that showed the token before (the HTTP server's
		// check, not only the first request's).
		const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
		try {
			assert.equal((await hostGet(host, "/", token, agent)).status, 200);
			res = await hostGet(host, "/", {}, agent);
			assert.equal(res.reused, true, "the second request reused the connection");
			assert.equal(res.status, 403);
			assert.match(json(res).message, /is missing/);
		} finally {
			agent.destroy();
		}

		// Nothing listening on the port: E2B's 502.
		res = await hostGet(sbx.getHost(8081), "/", token);
		assert.equal(res.status, 502);

		// The path and query reach the app as sent, under its "/".
		res = await hostGet(host, "/nosuchfile?x=1", token);
		assert.equal(res.status, 404);
		assert.match(res.body, /File not found/);
		assert.equal(await other.kill(), true);
		assert.equal(await sbx.kill(), true);
		// A killed sandbox's URL: E2B's 502 "The sandbox was not found", token or not.
		for (const headers of [{}, token]) {
			res = await hostGet(host, "/", headers);
			assert.equal(res.status, 502);
			assert.deepEqual(json(res), {
				code: 502,
				message: "The sandbox was not found",
				sandboxId: sbx.sandboxId,
			});
		}
	});

	it("a public sandbox's ports take no credential; a paused one is resumed by its traffic", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({ domain: DOMAIN, network: { allowPublicTraffic: true } });
		assert.equal(sbx.trafficAccessToken, undefined);
		await serve(sbx, 8080, {});
		assert.equal((await hostGet(sbx.getHost(8080))).status, 200);
		// Never envd on that ground: 49983's host name is E2B's API, which wants a credential.
		const envd = await hostGet(sbx.getHost(49983), "/envs", { "E2b-Sandbox-Id": sbx.sandboxId });
		assert.equal(envd.status, 401);
		assert.equal(await sbx.pause(), true);
		assert.equal((await sbx.getInfo()).state, "paused");
		const res = await hostGet(sbx.getHost(8080));
		assert.equal(res.status, 200, res.body);
		assert.equal((await sbx.getInfo()).state, "running");
		assert.equal(await sbx.kill(), true);
		// autoResume false: its traffic leaves it paused (502), a connect resumes it.
		const manual = await createSandbox({
			domain: DOMAIN,
			network: { allowPublicTraffic: true },
			lifecycle: { onTimeout: "pause", autoResume: false },
		});
		await serve(manual, 8080, {});
		assert.equal(await manual.pause(), true);
		const asleep = await hostGet(manual.getHost(8080));
		assert.equal(asleep.status, 502);
		assert.match(json(asleep).message, /autoResume false/);
		assert.equal((await manual.getInfo()).state, "paused");
		await Sandbox.connect(manual.sandboxId, opts());
		assert.equal((await hostGet(manual.getHost(8080))).status, 200);
		assert.equal(await manual.kill(), true);
	});

	it("answers E2B's 502 for no such sandbox, and leaves other hosts to the API", { timeout: STEP_MS }, async () => {
		const res = await hostGet(`8080-nosuchsandbox.${DOMAIN}`);
		assert.equal(res.status, 502);
		assert.equal(json(res).code, 502);
		assert.match(json(res).message, /sandbox was not found/);
		// Hosts naming no port and sandbox under the domain are the API's, which wants a key.
		for (const bad of [`99999-nosuchsandbox.${DOMAIN}`, `x-y.${DOMAIN}`, `8080-a_b.${DOMAIN}`, `8080-${"a".repeat(300)}.${DOMAIN}`])
			assert.equal((await hostGet(bad)).status, 401, bad);
		// api.<domain>, envd's 49983-<id>.<domain>, a name under another domain: the API.
		const list = await hostGet(`api.${DOMAIN}`, "/v2/sandboxes", { "X-API-Key": h.apiKey });
		assert.equal(list.status, 200);
		assert.ok(Array.isArray(json(list)));
		assert.equal((await hostGet(`api.${DOMAIN}`, "/v2/sandboxes")).status, 401);
		assert.equal((await hostGet(`8080-nosuchsandbox.example.com`, "/v2/sandboxes")).status, 401);
		const sbx = await createSandbox({ domain: DOMAIN });
		const envd = await hostGet(sbx.getHost(49983), "/envs", {
			"E2b-Sandbox-Id": sbx.sandboxId,
			"X-Access-Token": sbx.envdAccessToken,
		});
		assert.equal(envd.status, 200);
		assert.equal(await sbx.kill(), true);
	});

	it("Template.exists: the template map, the images, the caller's snapshots", { timeout: STEP_MS }, async () => {
		assert.equal(await Template.exists("base", opts()), true);
		assert.equal(await Template.exists("default", opts()), true);
		assert.equal(await Template.exists("nosuchtemplate", opts()), false);
		const res = await fetch(`http://127.0.0.1:${h.e2bPort}/templates/aliases/base`, {
			headers: { "X-API-Key": h.apiKey },
		});
		assert.equal(res.status, 200);
		assert.deepEqual(await res.json(), { templateID: "base", public: true });
		const anon = await fetch(`http://127.0.0.1:${h.e2bPort}/templates/aliases/base`);
		assert.equal(anon.status, 401);
		// A snapshot is a template of its taker's, by name or id, as a create takes it.
		const src = await createSandbox();
		const name = `hosts-${h.tag}`;
		const snap = await src.createSnapshot({ name, ...opts() });
		assert.equal(await Template.exists(name, opts()), true);
		assert.equal(await Template.exists(snap.snapshotId, opts()), true);
		const byName = await fetch(`http://127.0.0.1:${h.e2bPort}/templates/aliases/${name}`, {
			headers: { "X-API-Key": h.apiKey },
		});
		assert.deepEqual(await byName.json(), { templateID: snap.snapshotId, public: false });
		const bad = await fetch(`http://127.0.0.1:${h.e2bPort}/templates/aliases/a%01b`, {
			headers: { "X-API-Key": h.apiKey },
		});
		assert.equal(bad.status, 400);
		assert.match((await bad.json()).message, /alias/);
		assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, opts()), true);
		assert.equal(await Template.exists(name, opts()), false);
		assert.equal(await src.kill(), true);
	});

	stopsCleanly();
});
