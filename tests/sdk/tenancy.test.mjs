// Two tenants through the OpenSandbox SDK: celld with a keys file (--api-keys-file) of
// alice and bob. Each key's sandboxes are its own: the other key's SDK finds nothing (404)
// and lists nothing of them; the owner's SDK works as ever.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { Sandbox } from "@alibaba-group/opensandbox";

import { STEP_MS, conn, h, manager, out, rejectsWith, skip, stopsCleanly, useCelld } from "./harness.mjs";

const keysDir = fs.mkdtempSync(path.join(os.tmpdir(), "cell-keys-"));
const alice = `e2b_${crypto.randomBytes(20).toString("hex")}`;
const bob = `e2b_${crypto.randomBytes(20).toString("hex")}`;
const keysFile = path.join(keysDir, "api-keys");
fs.writeFileSync(keysFile, `alice ${alice}\nbob ${bob}\n`, { mode: 0o600 });

describe("two tenants through @alibaba-group/opensandbox", { skip }, () => {
	const mine = []; // [sandbox, key] to kill in the end, each with its owner's key
	useCelld({
		celldArgs: ["--api-keys-file", keysFile],
		cleanup: async () => {
			for (const [id, key] of mine.splice(0))
				await manager(key).killSandbox(id).catch(() => {});
		},
	});

	const create = async (key) => {
		const sbx = await Sandbox.create({
			image: "busybox",
			connectionConfig: conn(key),
			metadata: { suite: h.tag },
			timeoutSeconds: 600,
			readyTimeoutSeconds: 20,
		});
		mine.push([sbx.id, key]);
		h.closers.push(sbx);
		return sbx;
	};

	it("keeps each key's sandboxes its own", { timeout: 2 * STEP_MS }, async () => {
		const a = await create(alice);
		assert.equal(out(await a.commands.run("echo alice")), "alice\n");
		// bob: not found by id, not listed, cannot kill, cannot connect
		await rejectsWith(manager(bob).getSandboxInfo(a.id), 404);
		await rejectsWith(manager(bob).killSandbox(a.id), 404);
		await rejectsWith(Sandbox.connect({ sandboxId: a.id, connectionConfig: conn(bob) }), 404);
		const bobs = await manager(bob).listSandboxInfos({ metadata: { suite: h.tag } });
		assert.ok(!bobs.items.some((s) => s.id === a.id), "bob lists alice's sandbox");
		// nor the default key: it is a tenant like the others now
		await rejectsWith(manager(h.apiKey).getSandboxInfo(a.id), 404);
		// alice: all of it
		const alices = await manager(alice).listSandboxInfos({ metadata: { suite: h.tag } });
		assert.ok(alices.items.some((s) => s.id === a.id), "alice lists her sandbox");
		const again = await Sandbox.connect({ sandboxId: a.id, connectionConfig: conn(alice) });
		h.closers.push(again);
		assert.equal(out(await again.commands.run("echo still")), "still\n");
		// bob's own sandbox, beside hers
		const b = await create(bob);
		assert.equal(out(await b.commands.run("echo bob")), "bob\n");
		await rejectsWith(manager(alice).getSandboxInfo(b.id), 404);
	});

	stopsCleanly();
});
