// Two tenants through E2B's SDK: celld with a keys file (--api-keys-file) of alice and
// bob. A sandbox is its creator's: the other key finds nothing of it (getInfo, connect,
// kill, list, envd with its key) and its own SDK works as ever.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { Sandbox } from "e2b";

import { STEP_MS, h, opts, skip, stopsCleanly, useCelld } from "./harness.mjs";

const keysDir = fs.mkdtempSync(path.join(os.tmpdir(), "cell-keys-"));
const alice = `e2b_${crypto.randomBytes(20).toString("hex")}`;
const bob = `e2b_${crypto.randomBytes(20).toString("hex")}`;
const keysFile = path.join(keysDir, "api-keys");
fs.writeFileSync(keysFile, `alice ${alice}\nbob ${bob}\n`, { mode: 0o600 });

describe("two tenants through E2B's SDK", { skip }, () => {
	const mine = []; // [sandbox id, key]: killed in the end with its owner's key
	useCelld({
		celldArgs: ["--api-keys-file", keysFile],
		cleanup: async () => {
			for (const [id, key] of mine.splice(0)) await Sandbox.kill(id, opts({ apiKey: key })).catch(() => {});
		},
	});

	const create = async (key) => {
		const sbx = await Sandbox.create({ metadata: { suite: h.tag }, timeoutMs: 600_000, ...opts({ apiKey: key }) });
		mine.push([sbx.sandboxId, key]);
		return sbx;
	};
	const ids = async (key) => {
		const pages = Sandbox.list({ ...opts({ apiKey: key }), query: { metadata: { suite: h.tag } } });
		const out = [];
		while (pages.hasNext) for (const s of await pages.nextItems()) out.push(s.sandboxId);
		return out;
	};

	it("keeps each key's sandboxes its own", { timeout: 2 * STEP_MS }, async () => {
		const a = await create(alice);
		assert.equal((await a.commands.run("echo alice")).stdout, "alice\n");
		for (const key of [bob, h.apiKey]) {
			await assert.rejects(Sandbox.getInfo(a.sandboxId, opts({ apiKey: key })), /not found/i);
			await assert.rejects(Sandbox.connect(a.sandboxId, opts({ apiKey: key })), /not found/i);
			assert.equal(await Sandbox.kill(a.sandboxId, opts({ apiKey: key })), false);
			assert.ok(!(await ids(key)).includes(a.sandboxId), "listed for another key");
		}
		// envd with bob's key and alice's sandbox named: as if it did not exist
		const res = await fetch(`http://127.0.0.1:${h.e2bPort}/health`, {
			headers: { "X-API-Key": bob, "E2b-Sandbox-Id": a.sandboxId, "E2b-Sandbox-Port": "49983" },
		});
		assert.equal(res.status, 502);
		assert.match((await res.json()).message, /not found/);
		// alice: all of it, and bob's own beside it
		assert.ok((await ids(alice)).includes(a.sandboxId));
		const again = await Sandbox.connect(a.sandboxId, opts({ apiKey: alice }));
		assert.equal((await again.commands.run("echo still")).stdout, "still\n");
		const b = await create(bob);
		assert.equal((await b.commands.run("echo bob")).stdout, "bob\n");
		await assert.rejects(Sandbox.getInfo(b.sandboxId, opts({ apiKey: alice })), /not found/i);
	});

	stopsCleanly();
});
