// E2B's snapshots and forks through the unchanged SDK, on cell's snapshots: createSnapshot
// (named or not), listSnapshots (by sandbox, by name, pages), Sandbox.create from a
// snapshot's id or name, deleteSnapshot, fork (count, independence, the source running
// on, the capture removed after); and the boot id a filesystem-only pause changes while a
// pause keeps it.
import { describe, it } from "node:test";
import assert from "node:assert/strict";

import { Sandbox, SandboxNotFoundError } from "e2b";

import { STEP_MS, h, skip, stopsCleanly, useCelld, createSandbox, opts } from "./harness.mjs";

const BOOT_ID = "cat /proc/sys/kernel/random/boot_id";

describe("E2B's snapshots and forks", { skip }, () => {
	useCelld();

	const e2b = (p, init = {}) =>
		fetch(`http://127.0.0.1:${h.e2bPort}${p}`, {
			...init,
			headers: { "X-API-Key": h.apiKey, ...(init.headers || {}) },
		});
	const listSnapshots = async (extra = {}) => {
		const pages = Sandbox.listSnapshots({ ...opts(), ...extra });
		const out = [];
		while (pages.hasNext) out.push(...(await pages.nextItems()));
		return out;
	};
	const fromTemplate = async (template) => {
		const sbx = await Sandbox.create(template, {
			metadata: { suite: h.tag },
			timeoutMs: 600_000,
			...opts(),
		});
		h.created.add(sbx.sandboxId);
		return sbx;
	};

	it("a snapshot makes sandboxes with its files, by id or name, apart from each other", { timeout: STEP_MS }, async () => {
		const src = await createSandbox();
		await src.files.write("/home/user/app/state.txt", "captured");
		const name = `snap-${h.tag}`;
		const snap = await src.createSnapshot({ name, ...opts() });
		assert.match(snap.snapshotId, /^[0-9a-z]+$/);
		assert.deepEqual(snap.names, [name]);
		// The source goes on; what it writes after is not in the snapshot.
		assert.equal(await src.isRunning(), true);
		await src.files.write("/home/user/app/state.txt", "after");

		const a = await fromTemplate(snap.snapshotId);
		const b = await fromTemplate(name);
		for (const s of [a, b]) {
			assert.equal(await s.files.read("/home/user/app/state.txt"), "captured");
			const who = await s.commands.run("id -un; stat -c %U /home/user/app/state.txt");
			assert.equal(who.stdout, "user\nuser\n", "the template's user owns its files still");
		}
		await a.files.write("/home/user/app/state.txt", "changed in a");
		assert.equal(await b.files.read("/home/user/app/state.txt"), "captured");
		assert.equal(await src.files.read("/home/user/app/state.txt"), "after");

		// Listed: all, by its sandbox, by name; an unknown name lists nothing.
		assert.ok((await listSnapshots()).some((s) => s.snapshotId === snap.snapshotId));
		const bySandbox = await listSnapshots({ sandboxId: src.sandboxId });
		assert.deepEqual(bySandbox.map((s) => s.snapshotId), [snap.snapshotId]);
		assert.deepEqual((await listSnapshots({ name })).map((s) => s.snapshotId), [snap.snapshotId]);
		assert.deepEqual(await listSnapshots({ name: `${name}-none` }), []);
		// The same snapshot through the OpenSandbox API.
		const os = await fetch(`http://127.0.0.1:${h.port}/v1/snapshots/${snap.snapshotId}`, {
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
		});
		assert.equal(os.status, 200);
		assert.equal((await os.json()).sandboxId, src.sandboxId);

		// Deleted once; the sandboxes made from it keep their files.
		assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, opts()), true);
		assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, opts()), false);
		assert.equal(await a.files.read("/home/user/app/state.txt"), "changed in a");
		await assert.rejects(fromTemplate(snap.snapshotId), /not found/);
		for (const s of [src, a, b]) assert.equal(await s.kill(), true);
	});

	it("snapshot pages, the requests refused, and templates that are images", { timeout: STEP_MS }, async () => {
		const src = await createSandbox();
		const ids = [];
		for (let i = 0; i < 3; i++) ids.push((await src.createSnapshot(opts())).snapshotId);
		const pages = Sandbox.listSnapshots({ ...opts(), sandboxId: src.sandboxId, limit: 2 });
		const first = await pages.nextItems();
		assert.equal(first.length, 2);
		assert.equal(pages.hasNext, true, "X-Next-Token on a full page");
		const second = await pages.nextItems();
		assert.deepEqual([...first, ...second].map((s) => s.snapshotId).sort(), [...ids].sort());
		assert.equal(pages.hasNext, false);

		let res = await e2b(`/sandboxes/${src.sandboxId}/snapshots`, {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: JSON.stringify({ name: "x", memory: true }),
		});
		assert.equal(res.status, 400);
		assert.match((await res.json()).message, /memory is not a field/);
		res = await e2b("/sandboxes/nosuchsandbox/snapshots", {
			method: "POST",
			headers: { "Content-Type": "application/json" },
			body: "{}",
		});
		assert.equal(res.status, 404);
		res = await e2b("/snapshots?nextToken=bogus");
		assert.equal(res.status, 400);
		// DELETE /templates/{id} removes snapshots only: an image is the operator's.
		res = await e2b("/templates/base", { method: "DELETE" });
		assert.equal(res.status, 400);
		assert.match((await res.json()).message, /managed by its operator/);
		res = await e2b("/templates/nosuchtemplate", { method: "DELETE" });
		assert.equal(res.status, 404);
		for (const id of ids) assert.equal(await Sandbox.deleteSnapshot(id, opts()), true);
		assert.equal(await src.kill(), true);
	});

	it("fork makes running copies of a sandbox's disk and removes its capture", { timeout: STEP_MS }, async () => {
		const src = await createSandbox({ metadata: { suite: h.tag, role: "source" } });
		await src.files.write("/home/user/state.txt", "before fork");
		const forks = await src.fork({ count: 2, timeoutMs: 120_000, ...opts() });
		assert.equal(forks.length, 2);
		for (const f of forks) {
			assert.ok(f instanceof Sandbox, String(f));
			h.created.add(f.sandboxId);
		}
		const [f1, f2] = forks;
		assert.notEqual(f1.sandboxId, f2.sandboxId);
		assert.equal(await src.isRunning(), true, "the source runs on");
		for (const f of forks) {
			assert.equal(await f.isRunning(), true);
			assert.equal(await f.files.read("/home/user/state.txt"), "before fork");
			const info = await f.getInfo();
			assert.deepEqual(info.metadata, { suite: h.tag, role: "source" }, "the source's metadata");
			const left = info.endAt.getTime() - Date.now();
			assert.ok(left > 60_000 && left <= 121_000, `the fork's own timeout: ${left} ms`);
		}
		await f1.files.write("/home/user/state.txt", "changed in f1");
		assert.equal(await src.files.read("/home/user/state.txt"), "before fork");
		assert.equal(await f2.files.read("/home/user/state.txt"), "before fork");
		assert.deepEqual(await listSnapshots({ sandboxId: src.sandboxId }), [], "the capture is gone");

		// Refused: counts out of range, unknown fields, a killed source.
		for (const body of [{ count: 0 }, { count: 9 }, { count: 1, memory: true }]) {
			const res = await e2b(`/sandboxes/${src.sandboxId}/fork`, {
				method: "POST",
				headers: { "Content-Type": "application/json" },
				body: JSON.stringify(body),
			});
			assert.equal(res.status, 400, JSON.stringify(body));
		}
		for (const s of [f1, f2, src]) assert.equal(await s.kill(), true);
		await assert.rejects(src.fork(opts()), SandboxNotFoundError);
	});

	it("a pause keeps the boot id; a filesystem-only pause boots the sandbox anew", { timeout: STEP_MS }, async () => {
		const sbx = await createSandbox();
		const boot = async () => (await sbx.commands.run(BOOT_ID)).stdout.trim();
		const first = await boot();
		assert.match(first, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
		assert.equal(await sbx.pause(), true);
		await sbx.connect();
		assert.equal(await boot(), first, "memory kept: the same boot");
		assert.equal(await sbx.pause({ keepMemory: false }), true);
		await sbx.connect();
		assert.notEqual(await boot(), first, "a cold start is a new boot");
		assert.equal(await sbx.kill(), true);
	});

	stopsCleanly();
});
