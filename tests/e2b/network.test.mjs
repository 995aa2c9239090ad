// E2B's network controls through the unchanged SDK: updateNetwork (PUT
// /sandboxes/{id}/network) replacing a running sandbox's egress policy, its default
// included, as the OpenSandbox API's inspect and celld's nftables chain show it. No packet
// of this file leaves the machine: the policy is read, never tried against the internet.
import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

import { Sandbox, SandboxNotFoundError } from "e2b";

import { STEP_MS, h, skip, stopsCleanly, useCelld, createSandbox, opts } from "./harness.mjs";

describe("E2B's network controls", { skip }, () => {
	useCelld();

	const e2b = (p, init = {}) =>
		fetch(`http://127.0.0.1:${h.e2bPort}${p}`, {
			...init,
			headers: { "X-API-Key": h.apiKey, ...(init.headers || {}) },
		});
	const inspect = async (id) => {
		const res = await fetch(`http://127.0.0.1:${h.port}/v1/sandboxes/${id}/inspect`, {
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
		});
		assert.equal(res.status, 200);
		return (await res.json()).network;
	};
	// The sandbox's chain in celld's nftables table: "allow" when new connections are
	// accepted whatever their address, "deny" when only the allowed sets' are.
	const chainDefault = (ifname) => {
		// celld's table: "cell-" and the start of its state dir's SHA-256.
		const table = `cell-${crypto.createHash("sha256").update(h.state).digest("hex").slice(0, 8)}`;
		const block = execFileSync("nft", ["list", "chain", "inet", table, `sb-${ifname}`], {
			encoding: "utf8",
		});
		const accepts = block.split("\n").filter((l) => /ct state new .*accept/.test(l));
		assert.ok(accepts.length > 0, block);
		return accepts.some((l) => !/daddr/.test(l)) ? "allow" : "deny";
	};

	it("replaces the egress policy live, its default included", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({
			network: { allowOut: ["example.com"], denyOut: ["0.0.0.0/0"] },
		});
		let net = await inspect(sbx.sandboxId);
		assert.equal(net.mode, "custom");
		assert.deepEqual(net.policy, {
			defaultAction: "deny",
			egress: [{ action: "allow", target: "example.com" }],
		});
		assert.equal(chainDefault(net.interface), "deny");

		// Omitted fields are cleared: a default of allow, no rule.
		await sbx.updateNetwork({ denyOut: ["10.1.0.0/16"] });
		net = await inspect(sbx.sandboxId);
		assert.deepEqual(net.policy, {
			defaultAction: "allow",
			egress: [{ action: "deny", target: "10.1.0.0/16" }],
		});
		assert.equal(chainDefault(net.interface), "allow");
		let info = await (await e2b(`/sandboxes/${sbx.sandboxId}`)).json();
		assert.equal(info.allowInternetAccess, true);
		assert.deepEqual(info.network, { allowOut: [], denyOut: ["10.1.0.0/16"] });

		// allowOut wins over denyOut; allowInternetAccess false is a default of deny.
		await Sandbox.updateNetwork(
			sbx.sandboxId,
			{ allowOut: ["*.example.org", "192.0.2.7"], denyOut: ["192.0.2.0/24"], allowInternetAccess: false },
			opts(),
		);
		net = await inspect(sbx.sandboxId);
		assert.deepEqual(net.policy, {
			defaultAction: "deny",
			egress: [
				{ action: "allow", target: "*.example.org" },
				{ action: "allow", target: "192.0.2.7" },
				{ action: "deny", target: "192.0.2.0/24" },
			],
		});
		assert.equal(chainDefault(net.interface), "deny");
		info = await (await e2b(`/sandboxes/${sbx.sandboxId}`)).json();
		assert.equal(info.allowInternetAccess, false);

		await sbx.updateNetwork({});
		net = await inspect(sbx.sandboxId);
		assert.deepEqual(net.policy, { defaultAction: "allow", egress: [] });
		assert.equal(chainDefault(net.interface), "allow");

		// Each change is an event of the sandbox.
		const ev = await (
			await fetch(`http://127.0.0.1:${h.port}/v1/sandboxes/${sbx.sandboxId}/events?follow=false`, {
				headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
			})
		).text();
		assert.equal(ev.match(/event: network\.policy/g)?.length, 3, ev);
		assert.equal(await sbx.kill(), true);
	});

	it("refuses what it cannot do, naming the field", { timeout: STEP_MS }, async () => {
		await assert.rejects(
			Sandbox.updateNetwork("nosuchsandbox", { allowOut: ["example.com"] }, opts()),
			SandboxNotFoundError,
		);
		const sbx = await createSandbox({ network: { allowOut: ["example.com"], denyOut: ["0.0.0.0/0"] } });
		const put = async (body) => {
			const res = await e2b(`/sandboxes/${sbx.sandboxId}/network`, {
				method: "PUT",
				headers: { "Content-Type": "application/json" },
				body: JSON.stringify(body),
			});
			const text = await res.text();
			return { status: res.status, body: text ? JSON.parse(text) : null };
		};
		for (const [body, field] of [
			[{ rules: { "example.com": [{ transform: { headers: { A: "b" } } }] } }, /^rules/],
			[{ egressProxy: { address: "socks5://127.0.0.1:1080" } }, /^egressProxy/],
			[{ allowOut: ["not a name!"] }, /^allowOut\[0\]/],
			[{ denyOut: "10.0.0.0/8" }, /denyOut/],
			[{ allow_internet_access: "yes" }, /allow_internet_access/],
			[{ allowPublicTraffic: true }, /allowPublicTraffic/],
		]) {
			const r = await put(body);
			assert.equal(r.status, 400, JSON.stringify(r));
			assert.equal(r.body.code, 400);
			assert.match(r.body.message, field);
		}
		// Nothing changed by a refused update.
		assert.equal((await inspect(sbx.sandboxId)).policy.defaultAction, "deny");
		// Empty rules and no proxy ask for nothing: accepted.
		assert.equal((await put({ rules: {}, allowOut: ["example.com"], denyOut: ["0.0.0.0/0"] })).status, 204);

		// A paused sandbox is not changed (E2B: 409); after connect it is.
		await sbx.pause();
		let r = await put({});
		assert.equal(r.status, 409, JSON.stringify(r));
		assert.match(r.body.message, /paused/);
		await Sandbox.connect(sbx.sandboxId, opts());
		assert.equal((await put({})).status, 204);
		assert.equal((await inspect(sbx.sandboxId)).policy.defaultAction, "allow");
		assert.equal(await sbx.kill(), true);

		// A sandbox created with nothing allowed out has no network to open.
		const off = await createSandbox({ allowInternetAccess: false });
		assert.equal((await inspect(off.sandboxId)).mode, "none");
		await assert.rejects(off.updateNetwork({ allowOut: ["example.com"] }), /409.*no network/);
		assert.equal(await off.kill(), true);
	});

	it("autoResume false: E2B's traffic does not wake a paused sandbox, connect does", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox({ lifecycle: { onTimeout: "pause", autoResume: false } });
		const detail = await (await e2b(`/sandboxes/${sbx.sandboxId}`)).json();
		assert.deepEqual(detail.lifecycle, { onTimeout: "pause", autoResume: false });
		// Recorded in its state.json (a restarted celld keeps it).
		const rec = JSON.parse(fs.readFileSync(path.join(h.state, "sandboxes", sbx.sandboxId, "state.json"), "utf8"));
		assert.deepEqual(rec.access, { manualResume: true });
		assert.equal((await sbx.commands.run("echo up")).stdout, "up\n");
		assert.equal(await sbx.pause(), true);
		// envd's calls and the ports find it paused (502, the SDK: not running), and it stays so.
		assert.equal(await sbx.isRunning(), false);
		await assert.rejects(sbx.commands.run("echo woken"), /paused|not running|502/i);
		await assert.rejects(sbx.files.read("/etc/hostname"), /paused|not running|502/i);
		const port = await fetch(`http://127.0.0.1:${h.e2bPort}/`, {
			headers: { "X-API-Key": h.apiKey, "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "8080" },
		});
		assert.equal(port.status, 502);
		assert.match((await port.json()).message, /autoResume false/);
		assert.equal((await sbx.getInfo()).state, "paused");
		// Connect resumes it.
		await Sandbox.connect(sbx.sandboxId, opts());
		assert.equal((await sbx.getInfo()).state, "running");
		assert.equal(await sbx.isRunning(), true);
		assert.equal((await sbx.commands.run("echo again")).stdout, "again\n");
		assert.equal(await sbx.kill(), true);
	});

	// A port (8080, python's http.server) through the E2B listener, with these headers.
	const portGet = (sbx, headers = {}) =>
		fetch(`http://127.0.0.1:${h.e2bPort}/`, {
			headers: { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "8080", ...headers },
		});
	const serve = async (sbx) => {
		await sbx.commands.run("python3 -m http.server 8080 >/dev/null 2>&1", { background: true });
		for (let i = 0; i < 100; i++) {
			if ((await portGet(sbx, { "X-API-Key": h.apiKey })).status === 200) return;
			await new Promise((r) => setTimeout(r, 100));
		}
		assert.fail("http.server did not start");
	};

	it("ports take the traffic token unless allowPublicTraffic", { timeout: STEP_MS }, async () => {
		const priv = await createSandbox();
		assert.ok(priv.trafficAccessToken, "a traffic token when the ports are not public");
		await serve(priv);
		// E2B's 403 and body, as its proxy answers a private sandbox's port without the token.
		const refused = await portGet(priv);
		assert.equal(refused.status, 403);
		assert.deepEqual(await refused.json(), {
			code: 403,
			message: "Sandbox is secured with traffic access token. Token header 'E2B-Traffic-Access-Token' is missing",
			sandboxId: priv.sandboxId,
		});
		assert.equal((await portGet(priv, { "E2B-Traffic-Access-Token": "nope" })).status, 403);
		assert.equal((await portGet({ sandboxId: "nosuchsandbox" })).status, 502);
		assert.equal((await portGet(priv, { "E2B-Traffic-Access-Token": priv.trafficAccessToken })).status, 200);
		// The traffic token is not the envd token, and whoever holds it runs no command:
		// envd refuses it in either header, the SDK's calls with it fail. A connect gives
		// the SDK the same tokens again.
		assert.notEqual(priv.trafficAccessToken, priv.envdAccessToken);
		const envdGet = (headers) =>
			fetch(`http://127.0.0.1:${h.e2bPort}/envs`, {
				headers: { "E2b-Sandbox-Id": priv.sandboxId, "E2b-Sandbox-Port": "49983", ...headers },
			});
		assert.equal((await envdGet({ "X-Access-Token": priv.envdAccessToken })).status, 200);
		assert.equal((await envdGet({ "X-Access-Token": priv.trafficAccessToken })).status, 401);
		assert.equal((await envdGet({ "E2B-Traffic-Access-Token": priv.trafficAccessToken })).status, 401);
		const start = await fetch(`http://127.0.0.1:${h.e2bPort}/process.Process/List`, {
			method: "POST",
			headers: {
				"Content-Type": "application/json",
				"E2b-Sandbox-Id": priv.sandboxId,
				"E2b-Sandbox-Port": "49983",
				"X-Access-Token": priv.trafficAccessToken,
			},
			body: "{}",
		});
		assert.equal(start.status, 401);
		const asTraffic = new Sandbox({
			...opts(),
			sandboxId: priv.sandboxId,
			envdVersion: "0.6.4",
			envdAccessToken: priv.trafficAccessToken,
		});
		await assert.rejects(asTraffic.commands.run("id"), /401|unauthenticated|authentication/i);
		await assert.rejects(asTraffic.files.read("/etc/hostname"), /401|unauthenticated|authentication/i);
		const again = await Sandbox.connect(priv.sandboxId, opts());
		assert.equal(again.trafficAccessToken, priv.trafficAccessToken);
		assert.equal(again.envdAccessToken, priv.envdAccessToken);
		// Each token in its own header: the envd token is not a traffic token.
		assert.equal((await portGet(priv, { "E2B-Traffic-Access-Token": priv.envdAccessToken })).status, 403);
		assert.equal((await portGet(priv, { "X-Access-Token": priv.envdAccessToken })).status, 200);
		// Another sandbox's token is not this one's.
		const pub = await createSandbox({ network: { allowPublicTraffic: true } });
		assert.equal(pub.trafficAccessToken, undefined, "no traffic token for public ports");
		const pubToken = (await (await e2b(`/sandboxes/${pub.sandboxId}`)).json()).envdAccessToken;
		assert.ok(pubToken);
		assert.equal((await portGet(priv, { "E2B-Traffic-Access-Token": pubToken })).status, 403);
		await serve(pub);
		assert.equal((await portGet(pub)).status, 200, "a public port takes no credential");
		// Never envd, never the control plane.
		const envd = await fetch(`http://127.0.0.1:${h.e2bPort}/envs`, {
			headers: { "E2b-Sandbox-Id": pub.sandboxId, "E2b-Sandbox-Port": "49983" },
		});
		assert.equal(envd.status, 401);
		const list = await fetch(`http://127.0.0.1:${h.e2bPort}/sandboxes`, {
			headers: { "E2b-Sandbox-Id": pub.sandboxId, "E2b-Sandbox-Port": "8080" },
		});
		assert.equal(list.status, 401);
		const rec = JSON.parse(fs.readFileSync(path.join(h.state, "sandboxes", pub.sandboxId, "state.json"), "utf8"));
		assert.deepEqual(rec.access, { publicPorts: true });
		assert.equal(await priv.kill(), true);
		assert.equal(await pub.kill(), true);
	});

	stopsCleanly();
});
