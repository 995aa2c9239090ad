// envd's filesystem through the unchanged SDK: sbx.files.* (the Connect filesystem service
// and GET/POST /files), on one sandbox of the default image.
import { describe, it, before } from "node:test";
import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import path from "node:path";

import { FileNotFoundError, NotEnoughSpaceError, Sandbox } from "e2b";

import { STEP_MS, auditRecords, createSandbox, h, opts, skip, stopsCleanly, useCelld } from "./harness.mjs";

const BIG = 100 << 20; // the 100 MB file

// A sandbox made through the OpenSandbox API (extra: more of its create body), reached by
// the SDK with its envd token: for what E2B's create cannot ask for (a disk quota). The
// file's own sandbox comes from E2B's create, which must succeed.
async function openSandbox(extra) {
	const api = (p, init = {}) =>
		fetch(`http://127.0.0.1:${h.port}/v1${p}`, {
			...init,
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey, "Content-Type": "application/json" },
		});
	let res = await api("/sandboxes", {
		method: "POST",
		body: JSON.stringify({ image: { uri: "default" }, metadata: { suite: h.tag }, ...extra }),
	});
	assert.equal(res.status, 202, await res.clone().text());
	const { id } = await res.json();
	h.created.add(id);
	const prev = h.cleanup;
	h.cleanup = async () => {
		await prev().catch(() => {});
		if ((await api(`/sandboxes/${id}`, { method: "DELETE" })).status < 300) h.created.delete(id);
	};
	for (let i = 0; i < 600; i++) {
		res = await api(`/sandboxes/${id}`);
		if ((await res.json()).status?.state === "Running") break;
		await new Promise((r) => setTimeout(r, 100));
	}
	// Its envd token is E2B's to give (no port's preview token is it).
	res = await fetch(`http://127.0.0.1:${h.e2bPort}/sandboxes/${id}`, { headers: { "X-API-Key": h.apiKey } });
	assert.equal(res.status, 200);
	const token = (await res.json()).envdAccessToken;
	return new Sandbox({ ...opts(), sandboxId: id, envdVersion: "0.6.4", envdAccessToken: token });
}

const sha = (b) => crypto.createHash("sha256").update(b).digest("hex");

describe("sbx.files through the E2B listener", { skip }, () => {
	useCelld();
	let sbx;

	before(async () => {
		sbx = await createSandbox();
	});

	it("writes and reads text and bytes in every form the SDK takes", { timeout: STEP_MS }, async () => {
		const info = await sbx.files.write("/tmp/hello.txt", "hello, world\n");
		assert.deepEqual(
			{ name: info.name, path: info.path, type: info.type },
			{ name: "hello.txt", path: "/tmp/hello.txt", type: "file" },
		);
		assert.equal(await sbx.files.read("/tmp/hello.txt"), "hello, world\n");

		const bytes = new Uint8Array([0, 1, 2, 255, 10, 13, 0]);
		await sbx.files.write("/tmp/bytes.bin", bytes.buffer);
		assert.deepEqual(await sbx.files.read("/tmp/bytes.bin", { format: "bytes" }), bytes);

		await sbx.files.write("/tmp/blob.bin", new Blob([bytes, "tail"]));
		const blob = await sbx.files.read("/tmp/blob.bin", { format: "blob" });
		assert.equal(Buffer.from(await blob.arrayBuffer()).toString("latin1").slice(7), "tail");

		// A ReadableStream goes as an octet-stream body, streamed.
		const stream = new ReadableStream({
			start(c) {
				c.enqueue(new TextEncoder().encode("streamed "));
				c.enqueue(new TextEncoder().encode("body"));
				c.close();
			},
		});
		await sbx.files.write("/tmp/stream.txt", stream);
		assert.equal(await sbx.files.read("/tmp/stream.txt"), "streamed body");

		// gzip: an octet-stream body with Content-Encoding: gzip.
		await sbx.files.write("/tmp/gz.txt", "compressed ".repeat(1000), { gzip: true });
		assert.equal(await sbx.files.read("/tmp/gz.txt"), "compressed ".repeat(1000));

		// An empty file reads back empty in each format.
		await sbx.files.write("/tmp/empty", "");
		assert.equal(await sbx.files.read("/tmp/empty"), "");
		assert.equal((await sbx.files.read("/tmp/empty", { format: "bytes" })).length, 0);

		// format "stream".
		const rs = await sbx.files.read("/tmp/hello.txt", { format: "stream" });
		const chunks = [];
		for await (const c of rs) chunks.push(c);
		assert.equal(Buffer.concat(chunks).toString(), "hello, world\n");
	});

	it("writes many files in one call", { timeout: STEP_MS }, async () => {
		const files = Array.from({ length: 5 }, (_, i) => ({ path: `/tmp/many/f${i}.txt`, data: `file ${i}` }));
		const infos = await sbx.files.write(files);
		assert.deepEqual(
			infos.map((f) => f.path),
			files.map((f) => f.path),
		);
		for (const f of files) assert.equal(await sbx.files.read(f.path), f.data);
		// A path travels as the part's filename: spaces, ';' and non-ASCII kept.
		const odd = "/tmp/many/semi;colon and space ünï.txt";
		assert.equal((await sbx.files.write([{ path: odd, data: "odd" }]))[0].path, odd);
		assert.equal(await sbx.files.read(odd), "odd");
	});

	it("writes and reads back a 100 MB file, streamed", { timeout: 5 * STEP_MS }, async () => {
		const data = crypto.randomBytes(BIG);
		const want = sha(data);
		let t = Date.now();
		const info = await sbx.files.write("/tmp/big.bin", new Blob([data]));
		const up = Date.now() - t;
		assert.equal(info.path, "/tmp/big.bin");
		assert.equal((await sbx.files.getInfo("/tmp/big.bin")).size, BIG);
		t = Date.now();
		const back = await sbx.files.read("/tmp/big.bin", { format: "bytes" });
		const down = Date.now() - t;
		assert.equal(back.length, BIG);
		assert.equal(sha(back), want, "the bytes read back are the bytes written");
		// And through a stream, as an octet-stream upload.
		const rs = new Blob([data]).stream();
		await sbx.files.write("/tmp/big2.bin", rs);
		const h2 = crypto.createHash("sha256");
		for await (const c of await sbx.files.read("/tmp/big2.bin", { format: "stream" })) h2.update(c);
		assert.equal(h2.digest("hex"), want);
		console.error(`# 100 MB: upload ${up} ms, download ${down} ms`);
	});

	it("puts relative paths in the user's home, owned by the user", { timeout: STEP_MS }, async () => {
		const info = await sbx.files.write("rel.txt", "mine");
		assert.equal(info.path, "/home/user/rel.txt");
		const st = await sbx.files.getInfo("rel.txt");
		assert.equal(st.path, "/home/user/rel.txt");
		assert.equal(st.owner, "user");
		assert.equal(st.group, "user");
		assert.equal(await sbx.files.read("/home/user/rel.txt"), "mine");
		// As root, named.
		await sbx.files.write("/tmp/root-owned", "x", { user: "root" });
		assert.equal((await sbx.files.getInfo("/tmp/root-owned")).owner, "root");
		// root's relative paths are below /root.
		assert.equal((await sbx.files.write("asroot.txt", "r", { user: "root" })).path, "/root/asroot.txt");
		await sbx.files.makeDir("userdir");
		assert.equal((await sbx.files.getInfo("/home/user/userdir")).owner, "user");
		// Every directory made on the way is the user's too (root's stay root's).
		await sbx.files.write("nested/deep/f.txt", "f");
		for (const d of ["/home/user/nested", "/home/user/nested/deep", "/home/user/nested/deep/f.txt"])
			assert.equal((await sbx.files.getInfo(d)).owner, "user", d);
		await sbx.files.makeDir("/tmp/own/a/b");
		for (const d of ["/tmp/own", "/tmp/own/a", "/tmp/own/a/b"]) assert.equal((await sbx.files.getInfo(d)).owner, "user", d);
		assert.equal((await sbx.files.getInfo("/tmp")).owner, "root");
	});

	it("answers exists, getInfo and list", { timeout: STEP_MS }, async () => {
		assert.equal(await sbx.files.exists("/tmp/hello.txt"), true);
		assert.equal(await sbx.files.exists("/tmp/nothing-here"), false);
		const st = await sbx.files.getInfo("/tmp/hello.txt");
		assert.equal(st.type, "file");
		assert.equal(st.name, "hello.txt");
		assert.equal(st.size, 13);
		assert.equal(st.permissions, "-rw-r--r--");
		assert.equal(st.mode, 0o644);
		assert.ok(st.modifiedTime instanceof Date && Math.abs(st.modifiedTime - Date.now()) < 600_000, `${st.modifiedTime}`);
		const dir = await sbx.files.getInfo("/tmp/many");
		assert.equal(dir.type, "dir");
		assert.match(dir.permissions, /^drwx/);

		await sbx.files.write("/tmp/tree/a/b/deep.txt", "d");
		await sbx.files.write("/tmp/tree/top.txt", "t");
		const one = await sbx.files.list("/tmp/tree");
		assert.deepEqual(one.map((e) => `${e.type}:${e.path}`).sort(), ["dir:/tmp/tree/a", "file:/tmp/tree/top.txt"]);
		const two = await sbx.files.list("/tmp/tree", { depth: 2 });
		assert.deepEqual(two.map((e) => e.path).sort(), ["/tmp/tree/a", "/tmp/tree/a/b", "/tmp/tree/top.txt"]);
		await assert.rejects(sbx.files.list("/tmp/hello.txt"), /not a directory/);
		// A symlink to a directory is listed as the directory (Debian's /bin -> usr/bin).
		const bin = await sbx.files.getInfo("/bin");
		assert.equal(bin.type, "symlink");
		// The target as envd gives it: absolute, a relative link's text taken from its
		// directory.
		assert.equal(bin.symlinkTarget, "/usr/bin");
		assert.equal((await sbx.files.list("/")).find((e) => e.name === "bin")?.symlinkTarget, "/usr/bin");
		await sbx.commands.run("mkdir -p /tmp/ln/d && ln -s ../d/x /tmp/ln/d/rel && ln -s /etc/hosts /tmp/ln/abs");
		assert.equal((await sbx.files.getInfo("/tmp/ln/d/rel")).symlinkTarget, "/tmp/ln/d/x");
		assert.equal((await sbx.files.getInfo("/tmp/ln/abs")).symlinkTarget, "/etc/hosts");
		assert.equal(st.symlinkTarget, undefined, "only a symlink has a target");
		assert.ok((await sbx.files.list("/bin")).some((e) => e.name === "bash"));
	});

	it("makes directories, renames and removes", { timeout: STEP_MS }, async () => {
		assert.equal(await sbx.files.makeDir("/tmp/newdir/sub"), true);
		assert.equal(await sbx.files.makeDir("/tmp/newdir/sub"), false, "already there");
		assert.equal((await sbx.files.getInfo("/tmp/newdir/sub")).type, "dir");

		const moved = await sbx.files.rename("/tmp/hello.txt", "/tmp/newdir/hello.txt");
		assert.equal(moved.path, "/tmp/newdir/hello.txt");
		assert.equal(moved.type, "file");
		assert.equal(await sbx.files.exists("/tmp/hello.txt"), false);
		assert.equal(await sbx.files.read("/tmp/newdir/hello.txt"), "hello, world\n");

		// Into directories that are not there yet: made (the user's), as envd does.
		const deeper = await sbx.files.rename("/tmp/newdir/hello.txt", "/tmp/moved/deeper/hello.txt");
		assert.equal(deeper.path, "/tmp/moved/deeper/hello.txt");
		assert.equal((await sbx.files.getInfo("/tmp/moved/deeper")).owner, "user");
		await sbx.files.rename("/tmp/moved/deeper/hello.txt", "/tmp/newdir/hello.txt");
		await assert.rejects(sbx.files.rename("/tmp/not-there", "/tmp/never/made"), FileNotFoundError);
		assert.equal(await sbx.files.exists("/tmp/never"), false, "nothing made for a missing source");
		await sbx.files.remove("/tmp/newdir/hello.txt");
		assert.equal(await sbx.files.exists("/tmp/newdir/hello.txt"), false);
		await sbx.files.remove("/tmp/newdir");
		assert.equal(await sbx.files.exists("/tmp/newdir"), false, "a directory goes with what it holds");
		await sbx.files.remove("/tmp/newdir"); // not there: removed already, as envd answers
	});

	it("opens signed URLs without any header, until they expire", { timeout: STEP_MS }, async () => {
		await sbx.files.write("signed.txt", "signed bytes");
		// A download URL: the listener's own with the file's path and a signature, which is
		// what names the sandbox.
		const url = await sbx.downloadUrl("signed.txt", { useSignatureExpiration: 60 });
		assert.ok(url.startsWith(`http://127.0.0.1:${h.e2bPort}/files?`), url);
		let res = await fetch(url);
		assert.equal(res.status, 200);
		assert.equal(await res.text(), "signed bytes");
		// One changed character of the signature, or another path under it: refused.
		const u = new URL(url);
		u.searchParams.set("signature", u.searchParams.get("signature").replace(/.$/, (c) => (c === "A" ? "B" : "A")));
		// (On a connection's first request the gate refuses it, with the listener's own
		// 401; on a connection already let in, reroute does, saying "invalid signature".)
		res = await fetch(u);
		assert.equal(res.status, 401);
		assert.equal((await res.json()).code, 401);
		const other = new URL(url);
		other.searchParams.set("path", "/etc/shadow");
		assert.equal((await fetch(other)).status, 401);
		// Expired: E2B's own answer.
		res = await fetch(await sbx.downloadUrl("signed.txt", { useSignatureExpiration: -10 }));
		assert.equal(res.status, 401);
		assert.deepEqual(await res.json(), { code: 401, message: "signature is already expired" });
		// An upload URL, as root: the form's file lands at the signed path.
		const up = await sbx.uploadUrl("/root/up.txt", { user: "root", useSignatureExpiration: 60 });
		const form = new FormData();
		form.append("file", "uploaded");
		res = await fetch(up, { method: "POST", body: form });
		assert.equal(res.status, 200, await res.clone().text());
		assert.deepEqual(await res.json(), [{ name: "up.txt", path: "/root/up.txt", type: "file" }]);
		assert.equal(await sbx.files.read("/root/up.txt", { user: "root" }), "uploaded");
		// A read URL does not write.
		res = await fetch(url, { method: "POST", body: form });
		assert.equal(res.status, 401);
	});

	it("checks a signed URL against the sandbox it names, else those its client used, else a bounded scan", { timeout: STEP_MS }, async () => {
		// A GET on a connection of its own (the gate's check is each connection's first)
		// from a loopback address of this host's choosing: a client, as celld counts them.
		const get = (url, from, headers = {}) =>
			new Promise((resolve, reject) => {
				const req = http.get(url, { localAddress: from, agent: false, headers }, (res) => {
					let body = "";
					res.setEncoding("utf8");
					res.on("data", (c) => (body += c));
					res.on("end", () => resolve({ status: res.statusCode, body }));
				});
				req.on("error", reject);
			});
		await sbx.files.write("looked-up.txt", "found");
		const url = await sbx.downloadUrl("looked-up.txt", { useSignatureExpiration: 120 });
		// This process made the sandbox and used it from 127.0.0.1: one of its client's.
		let res = await get(url, "127.0.0.1");
		assert.equal(res.status, 200, res.body);
		assert.equal(res.body, "found");
		// A client that never used it (a browser the URL was handed to): the scan finds it.
		res = await get(url, "127.0.0.2");
		assert.equal(res.status, 200, res.body);
		assert.equal(res.body, "found");
		// A made-up signature from a client that used nothing: let through by the gate to
		// the scan, which finds no signer.
		const forged = new URL(url);
		forged.searchParams.set("signature", "v1_" + "A".repeat(43));
		res = await get(forged, "127.0.0.3");
		assert.equal(res.status, 401);
		assert.deepEqual(JSON.parse(res.body), { code: 401, message: "invalid signature" });
		// Named, as the SDK's URL without E2B_SANDBOX_URL names it (the host
		// 49983-<id>.<domain>) or by E2b-Sandbox-Id: that one sandbox, from anywhere.
		const named = { Host: `49983-${sbx.sandboxId}.cell.test:${h.e2bPort}` };
		res = await get(url, "127.0.0.4", named);
		assert.equal(res.status, 200, res.body);
		assert.equal(res.body, "found");
		res = await get(url, "127.0.0.5", { "E2b-Sandbox-Id": sbx.sandboxId });
		assert.equal(res.status, 200, res.body);
		assert.equal(res.body, "found");
		// Named as another sandbox: refused, even from the client that used this one.
		const other = sbx.sandboxId.replace(/.$/, (c) => (c === "a" ? "b" : "a"));
		for (const headers of [{ Host: `49983-${other}.cell.test:${h.e2bPort}` }, { "E2b-Sandbox-Id": other }]) {
			res = await get(url, "127.0.0.1", headers);
			assert.equal(res.status, 401, JSON.stringify(headers));
			assert.equal(JSON.parse(res.body).code, 401);
		}
	});

	it("says what is missing, in the SDK's errors", { timeout: STEP_MS }, async () => {
		await assert.rejects(sbx.files.read("/tmp/missing.txt"), (e) => e instanceof FileNotFoundError && /missing\.txt/.test(e.message));
		await assert.rejects(sbx.files.getInfo("/tmp/missing.txt"), FileNotFoundError);
		await assert.rejects(sbx.files.rename("/tmp/missing.txt", "/tmp/x"), FileNotFoundError);
		await assert.rejects(sbx.files.read("/tmp"), /directory/);
		await assert.rejects(sbx.files.read("/tmp/x", { user: "nobody-here" }), /no such user/);
		// Raw: a body that is not gzip, a path below a file, an unknown encoding.
		const post = (q, headers, body) =>
			fetch(`http://127.0.0.1:${h.e2bPort}/files?${q}`, {
				method: "POST",
				headers: { "X-API-Key": h.apiKey, "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "49983", ...headers },
				body,
			});
		let res = await post("path=/tmp/bad", { "Content-Type": "application/octet-stream", "Content-Encoding": "gzip" }, "not gzip");
		assert.equal(res.status, 400);
		assert.match((await res.json()).message, /gzip/);
		res = await post("path=/tmp/empty/below", { "Content-Type": "application/octet-stream" }, "x");
		assert.equal(res.status, 400, "a path below a file");
		assert.equal((await res.json()).code, 400);
		res = await post("path=/tmp/br", { "Content-Type": "application/octet-stream", "Content-Encoding": "br" }, "x");
		assert.equal(res.status, 415);
		res = await post("", { "Content-Type": "application/octet-stream" }, "x");
		assert.equal(res.status, 400);
		assert.match((await res.json()).message, /path is required/);
	});

	it("audits what it changes: where, as whom, never the bytes", { timeout: STEP_MS }, async () => {
		await sbx.files.write("audited.txt", "secret-bytes");
		await sbx.files.makeDir("/tmp/audited-dir");
		await sbx.files.remove("/tmp/audited-dir");
		const all = auditRecords(h.state);
		const log = JSON.stringify(all);
		const recs = all.filter((r) => r.sandbox === sbx.sandboxId);
		const write = recs.find((r) => r.action === "file.write" && r.path === "/home/user/audited.txt");
		assert.ok(write, log.slice(-2000));
		assert.equal(write.user, "user");
		assert.equal(write.size, 12);
		assert.equal(write.ok, true);
		assert.ok(recs.some((r) => r.action === "file.mkdir" && r.path === "/tmp/audited-dir" && r.ok));
		assert.ok(recs.some((r) => r.action === "file.delete" && r.path === "/tmp/audited-dir" && r.ok));
		assert.ok(!log.includes("secret-bytes"), "never the bytes");
	});

	it("answers 507 when a write meets the sandbox's disk quota", { timeout: 3 * STEP_MS }, async () => {
		const small = await openSandbox({ resourceLimits: { disk: "64Mi" } });
		const err = await small.files.write("/var/fill.bin", new Blob([crypto.randomBytes(96 << 20)])).catch((e) => e);
		assert.ok(err instanceof NotEnoughSpaceError, `507, the SDK's NotEnoughSpaceError: ${err}`);
		assert.match(err.message, /\/var\/fill\.bin/, "the message names the path");
		// Nothing is left half written, and the sandbox takes writes again. (On its writable
		// layer: /tmp is a tmpfs of its own.)
		assert.equal(await small.files.exists("/var/fill.bin"), false);
		await small.files.write("/var/after.txt", "ok");
		assert.equal(await small.files.read("/var/after.txt"), "ok");
	});

	// Events as they arrive, until pred holds of them (or the bound passes).
	async function until(events, pred, what) {
		for (let i = 0; i < 100 && !pred(events); i++) await new Promise((r) => setTimeout(r, 50));
		assert.ok(pred(events), `${what}: ${JSON.stringify(events)}`);
	}
	const has = (events, type, name) => events.some((e) => e.type === type && e.name === name);

	it("watches a directory: create, write, rename, remove; stop() ends it", { timeout: STEP_MS }, async () => {
		await sbx.files.makeDir("/tmp/w/sub");
		const events = [];
		let exited = false;
		const handle = await sbx.files.watchDir("/tmp/w", (e) => events.push(e), {
			onExit: () => {
				exited = true;
			},
		});
		await sbx.files.write("/tmp/w/a.txt", "x");
		await until(events, (ev) => has(ev, "create", "a.txt") && has(ev, "write", "a.txt"), "write");
		await sbx.files.makeDir("/tmp/w/d");
		await sbx.files.rename("/tmp/w/a.txt", "/tmp/w/b.txt");
		await sbx.files.remove("/tmp/w/b.txt");
		await until(
			events,
			(ev) => has(ev, "create", "d") && has(ev, "rename", "a.txt") && has(ev, "create", "b.txt") && has(ev, "remove", "b.txt"),
			"mkdir, rename, remove",
		);
		// Not recursive: nothing from below a subdirectory; no temporary names of a write.
		await sbx.files.write("/tmp/w/sub/deep.txt", "y");
		await sbx.files.write("/tmp/w/last.txt", "z");
		await until(events, (ev) => has(ev, "create", "last.txt"), "last");
		assert.ok(!events.some((e) => e.name.includes("deep") || e.name.endsWith(".tmp")), JSON.stringify(events));
		await handle.stop();
		for (let i = 0; i < 100 && !exited; i++) await new Promise((r) => setTimeout(r, 50));
		assert.ok(exited, "onExit after stop()");
		const n = events.length;
		await sbx.files.write("/tmp/w/after.txt", "-");
		await new Promise((r) => setTimeout(r, 300));
		assert.equal(events.length, n, "no events after stop()");
	});

	it("watches recursively, new directories included", { timeout: STEP_MS }, async () => {
		await sbx.files.makeDir("/tmp/r/old");
		const events = [];
		const handle = await sbx.files.watchDir("/tmp/r", (e) => events.push(e), { recursive: true });
		await sbx.files.write("/tmp/r/old/x.txt", "x");
		await until(events, (ev) => has(ev, "create", "old/x.txt"), "below an old directory");
		await sbx.files.makeDir("/tmp/r/new");
		await until(events, (ev) => has(ev, "create", "new"), "mkdir");
		await sbx.files.write("/tmp/r/new/y.txt", "y");
		await until(events, (ev) => has(ev, "write", "new/y.txt"), "below a new directory");
		await handle.stop();
	});

	it("keeps a quiet watch alive and ends it at its deadline", { timeout: STEP_MS }, async () => {
		const msg = Buffer.from(JSON.stringify({ path: "/tmp/w" }));
		const head = Buffer.alloc(5);
		head.writeUInt32BE(msg.length, 1);
		const t0 = Date.now();
		const res = await fetch(`http://127.0.0.1:${h.e2bPort}/filesystem.Filesystem/WatchDir`, {
			method: "POST",
			headers: {
				"Content-Type": "application/connect+json",
				"Connect-Protocol-Version": "1",
				"Connect-Timeout-Ms": "2500",
				"Keepalive-Ping-Interval": "1",
				"X-API-Key": h.apiKey,
				"E2b-Sandbox-Id": sbx.sandboxId,
				"E2b-Sandbox-Port": "49983",
			},
			body: Buffer.concat([head, msg]),
		});
		assert.equal(res.status, 200);
		const body = Buffer.from(await res.arrayBuffer());
		const frames = [];
		for (let off = 0; off + 5 <= body.length; ) {
			const len = body.readUInt32BE(off + 1);
			frames.push({ end: (body[off] & 2) !== 0, msg: JSON.parse(body.subarray(off + 5, off + 5 + len)) });
			off += 5 + len;
		}
		const elapsed = Date.now() - t0;
		assert.deepEqual(frames[0], { end: false, msg: { start: {} } });
		const keepalives = frames.filter((f) => f.msg.keepalive);
		assert.ok(keepalives.length >= 2, JSON.stringify(frames));
		const last = frames.at(-1);
		assert.equal(last.end, true);
		assert.equal(last.msg.error.code, "deadline_exceeded");
		assert.ok(elapsed >= 2400 && elapsed < 10_000, `ended after ${elapsed} ms`);
	});

	it("refuses to watch what is not a directory", { timeout: STEP_MS }, async () => {
		await assert.rejects(sbx.files.watchDir("/tmp/no-such-dir", () => {}), FileNotFoundError);
		await assert.rejects(sbx.files.watchDir("/tmp/stream.txt", () => {}), /not a directory/);
		// A process's state in /proc is never reached, however spelled.
		for (const p of ["/proc/self", "/proc/1", "/proc/self/fd"])
			await assert.rejects(sbx.files.watchDir(p, () => {}), /permission|process/i, p);
	});

	it("keeps polling watchers: CreateWatcher, GetWatcherEvents, RemoveWatcher", { timeout: STEP_MS }, async () => {
		const call = async (method, body) => {
			const res = await fetch(`http://127.0.0.1:${h.e2bPort}/filesystem.Filesystem/${method}`, {
				method: "POST",
				headers: {
					"Content-Type": "application/json",
					"X-API-Key": h.apiKey,
					"E2b-Sandbox-Id": sbx.sandboxId,
					"E2b-Sandbox-Port": "49983",
				},
				body: JSON.stringify(body),
			});
			return { status: res.status, body: await res.json() };
		};
		await sbx.files.makeDir("/tmp/p");
		let r = await call("CreateWatcher", { path: "/tmp/p", recursive: false });
		assert.equal(r.status, 200, JSON.stringify(r.body));
		const watcherId = r.body.watcherId;
		assert.match(watcherId, /^[0-9a-f]{32}$/);
		await sbx.files.write("/tmp/p/one.txt", "1");
		const got = [];
		for (let i = 0; i < 50 && !got.some((e) => e.name === "one.txt" && e.type === "EVENT_TYPE_WRITE"); i++) {
			r = await call("GetWatcherEvents", { watcherId });
			assert.equal(r.status, 200, JSON.stringify(r.body));
			got.push(...r.body.events);
			await new Promise((res) => setTimeout(res, 50));
		}
		assert.ok(got.some((e) => e.name === "one.txt" && e.type === "EVENT_TYPE_CREATE"), JSON.stringify(got));
		r = await call("GetWatcherEvents", { watcherId });
		assert.deepEqual(r.body.events, [], "drained");
		r = await call("RemoveWatcher", { watcherId });
		assert.equal(r.status, 200);
		r = await call("GetWatcherEvents", { watcherId });
		assert.equal(r.status, 404);
		assert.equal(r.body.code, "not_found");
		// includeEntry: each event with the entry of its path.
		r = await call("CreateWatcher", { path: "/tmp/p", includeEntry: true, allowNetworkMounts: true });
		assert.equal(r.status, 200, JSON.stringify(r.body));
		const withEntry = r.body.watcherId;
		await sbx.files.write("/tmp/p/two.txt", "22");
		const seen = [];
		for (let i = 0; i < 100 && !seen.some((e) => e.name === "two.txt" && e.type === "EVENT_TYPE_WRITE"); i++) {
			r = await call("GetWatcherEvents", { watcherId: withEntry });
			assert.equal(r.status, 200, JSON.stringify(r.body));
			seen.push(...r.body.events);
			await new Promise((res) => setTimeout(res, 50));
		}
		const two = seen.find((e) => e.name === "two.txt" && e.type === "EVENT_TYPE_WRITE");
		assert.equal(two?.entry?.path, "/tmp/p/two.txt", JSON.stringify(seen));
		assert.equal(two.entry.type, "FILE_TYPE_FILE");
		assert.equal(two.entry.size, "2");
		assert.equal((await call("RemoveWatcher", { watcherId: withEntry })).status, 200);
		r = await call("CreateWatcher", { path: "/tmp/p", bogus: 1 });
		assert.equal(r.status, 400);
		assert.match(r.body.message, /unknown field bogus/);
		// Bounded: 16 per sandbox.
		const ids = [];
		for (let i = 0; i < 16; i++) {
			r = await call("CreateWatcher", { path: "/tmp/p" });
			assert.equal(r.status, 200, JSON.stringify(r.body));
			ids.push(r.body.watcherId);
		}
		r = await call("CreateWatcher", { path: "/tmp/p" });
		assert.equal(r.body.code, "resource_exhausted");
		assert.match(r.body.message, /16 watchers per sandbox/);
		for (const watcherId of ids) assert.equal((await call("RemoveWatcher", { watcherId })).status, 200);
	});

	it("keeps file metadata (user.e2b.* extended attributes) across write, stat, list, rename", { timeout: STEP_MS }, async () => {
		const meta = { author: "mish", purpose: "up load!" };
		let info = await sbx.files.write("/tmp/meta/a.txt", "a", { metadata: meta });
		assert.deepEqual(info.metadata, meta, "multipart write's answer");
		assert.deepEqual((await sbx.files.getInfo("/tmp/meta/a.txt")).metadata, meta);
		info = await sbx.files.write("/tmp/meta/b.txt", "b", { metadata: { k: "v" }, useOctetStream: true });
		assert.deepEqual(info.metadata, { k: "v" }, "octet-stream write's answer");
		assert.deepEqual((await sbx.files.getInfo("/tmp/meta/b.txt")).metadata, { k: "v" });
		// Every file of a multi-file upload, and the listing.
		const infos = await sbx.files.write(
			[
				{ path: "/tmp/meta/c1.txt", data: "1" },
				{ path: "/tmp/meta/c2.txt", data: "2" },
			],
			{ metadata: { batch: "yes" } },
		);
		assert.deepEqual(infos.map((i) => i.metadata), [{ batch: "yes" }, { batch: "yes" }]);
		const listed = Object.fromEntries((await sbx.files.list("/tmp/meta")).map((e) => [e.name, e.metadata]));
		assert.deepEqual(listed, { "a.txt": meta, "b.txt": { k: "v" }, "c1.txt": { batch: "yes" }, "c2.txt": { batch: "yes" } });
		// Rename keeps it (the same inode); an overwrite replaces it (a new one).
		info = await sbx.files.rename("/tmp/meta/a.txt", "/tmp/meta/moved.txt");
		assert.deepEqual(info.metadata, meta);
		info = await sbx.files.write("/tmp/meta/moved.txt", "again");
		assert.equal(info.metadata, undefined);
		assert.equal((await sbx.files.getInfo("/tmp/meta/moved.txt")).metadata, undefined);
		info = await sbx.files.write("/tmp/meta/b.txt", "b2", { metadata: { other: "1" } });
		assert.deepEqual((await sbx.files.getInfo("/tmp/meta/b.txt")).metadata, { other: "1" });
		// Set from inside (on a file and a directory): surfaces, prefix stripped; other
		// namespaces, and values that are not printable ASCII, do not.
		const r = await sbx.commands.run(
			`python3 -c "import os; os.setxattr('/tmp/meta/moved.txt', 'user.e2b.author', b'mish'); ` +
				`os.setxattr('/tmp/meta/moved.txt', 'user.other', b'x'); os.setxattr('/tmp/meta/moved.txt', 'user.e2b.bin', b'\\x01'); ` +
				`os.setxattr('/tmp/meta', 'user.e2b.dir', b'yes')"`,
			{ user: "root" },
		);
		assert.equal(r.exitCode, 0, r.stderr);
		assert.deepEqual((await sbx.files.getInfo("/tmp/meta/moved.txt")).metadata, { author: "mish" });
		assert.deepEqual((await sbx.files.getInfo("/tmp/meta")).metadata, { dir: "yes" });
		const sub = (await sbx.files.list("/tmp")).find((e) => e.name === "meta");
		assert.deepEqual(sub.metadata, { dir: "yes" });
	});

	it("refuses invalid metadata with a clear error, writing nothing", { timeout: STEP_MS }, async () => {
		// The SDK checks first.
		await assert.rejects(sbx.files.write("/tmp/badmeta.txt", "x", { metadata: { "bad key": "v" } }), /Invalid metadata key/);
		// Raw: what the SDK would never send.
		const post = (headers) =>
			fetch(`http://127.0.0.1:${h.e2bPort}/files?path=/tmp/badmeta.txt`, {
				method: "POST",
				headers: {
					"X-API-Key": h.apiKey,
					"E2b-Sandbox-Id": sbx.sandboxId,
					"E2b-Sandbox-Port": "49983",
					"Content-Type": "application/octet-stream",
					...headers,
				},
				body: "x",
			});
		for (const [headers, why] of [
			[{ "X-Metadata-": "v" }, /key is empty/],
			[{ ["X-Metadata-" + "k".repeat(247)]: "v" }, /1 to 246/],
			[{ "X-Metadata-k": "caf\u00e9" }, /printable ASCII/],
			[{ "X-Metadata-k": "v".repeat(4096) }, /4096 bytes/],
		]) {
			const res = await post(headers);
			assert.equal(res.status, 400, JSON.stringify(Object.keys(headers)));
			assert.match((await res.json()).message, why);
		}
		assert.equal(await sbx.files.exists("/tmp/badmeta.txt"), false);
		// Keys are lowercased, the first of a repeated one wins.
		const res = await post({ "X-Metadata-MiXed": "1" });
		assert.equal(res.status, 200);
		assert.deepEqual((await res.json())[0].metadata, { mixed: "1" });
		assert.deepEqual((await sbx.files.getInfo("/tmp/badmeta.txt")).metadata, { mixed: "1" });
	});

	it("watches with includeEntry (each event's entry) and allowNetworkMounts", { timeout: STEP_MS }, async () => {
		await sbx.files.makeDir("/tmp/we");
		const events = [];
		const handle = await sbx.files.watchDir("/tmp/we", (e) => events.push(e), { includeEntry: true });
		await sbx.files.write("/tmp/we/a.txt", "x", { metadata: { m: "1" } });
		await sbx.files.makeDir("/tmp/we/d");
		await until(events, (ev) => has(ev, "write", "a.txt") && has(ev, "create", "d"), "write, mkdir");
		const w = events.find((e) => e.type === "write" && e.name === "a.txt");
		assert.equal(w.entry?.path, "/tmp/we/a.txt", JSON.stringify(w));
		assert.equal(w.entry.type, "file");
		assert.equal(w.entry.size, 1);
		assert.deepEqual(w.entry.metadata, { m: "1" });
		const d = events.find((e) => e.type === "create" && e.name === "d");
		assert.equal(d.entry?.path, "/tmp/we/d", JSON.stringify(d));
		assert.equal(d.entry.type, "dir");
		await sbx.files.remove("/tmp/we/a.txt");
		await until(events, (ev) => has(ev, "remove", "a.txt"), "remove");
		const removed = events.find((e) => e.type === "remove" && e.name === "a.txt");
		assert.equal(removed.entry, undefined, "no entry for what is gone");
		await handle.stop();
		// Without includeEntry, no entries.
		const plain = [];
		const h2 = await sbx.files.watchDir("/tmp/we", (e) => plain.push(e), { allowNetworkMounts: true });
		await sbx.files.write("/tmp/we/b.txt", "y");
		await until(plain, (ev) => has(ev, "write", "b.txt"), "allowNetworkMounts watch");
		assert.ok(plain.every((e) => e.entry === undefined), JSON.stringify(plain));
		await h2.stop();
	});

	stopsCleanly();
});
