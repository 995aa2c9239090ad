// The official OpenSandbox TypeScript SDK driving a real celld: the main round (one shared
// busybox sandbox for most cases). The harness, its environment variables and its cleanup
// are in harness.mjs.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

import { Sandbox } from "@alibaba-group/opensandbox";

import {
	STEP_MS,
	conn,
	createSandbox,
	errOut,
	h,
	manager,
	out,
	rawOut,
	rejectsWith,
	skip,
	sleep,
	stopsCleanly,
	useCelld,
} from "./harness.mjs";

// ---------------------------------------------------------------------------
// cases

describe("celld driven by @alibaba-group/opensandbox", { skip }, () => {
	let sbx; // the shared sandbox most cases use

	useCelld();

	it("rejects a wrong API key with 401 UNAUTHORIZED", { timeout: STEP_MS }, async () => {
		await rejectsWith(
			Sandbox.create({ image: "busybox", connectionConfig: conn("wrong-key"), metadata: { suite: h.tag } }),
			401,
			"UNAUTHORIZED",
		);
		await rejectsWith(manager("wrong-key").listSandboxInfos({}), 401, "UNAUTHORIZED");
	});

	it("refuses create fields cell cannot honour with a 400 naming them", { timeout: STEP_MS }, async () => {
		const volumes = [{ name: "ws", mountPath: "/workspace", ossfs: { bucket: "b", endpoint: "e", accessKeyId: "i", accessKeySecret: "s" } }];
		let err = await rejectsWith(createSandbox({ image: "busybox", volumes }), 400, "INVALID_ARGUMENT");
		assert.match(err.message, /volumes\[0\]\.ossfs/);
		err = await rejectsWith(
			createSandbox({ image: "busybox", networkPolicy: { defaultAction: "maybe" } }),
			400,
			"INVALID_ARGUMENT",
		);
		assert.match(err.message, /networkPolicy\.defaultAction/);
		// A policy that allows nothing, on a sandbox without a network: honoured.
		const denied = await createSandbox({
			image: "busybox",
			extensions: { "cell.network": "none" },
			networkPolicy: { defaultAction: "deny", egress: [{ action: "deny", target: "example.com" }] },
		});
		assert.equal(out(await denied.commands.run("echo ok")), "ok\n");
		await denied.kill();
	});

	it("rejects an unknown image with 400 IMAGE_NOT_FOUND", { timeout: STEP_MS }, async () => {
		await rejectsWith(createSandbox({ image: "no-such-image" }), 400, "IMAGE_NOT_FOUND");
	});

	// FastGPT keeps a session's /workspace across stop() (a delete) with a named volume.
	it("keeps a named volume's files across two sandboxes, for root and user", { timeout: 2 * STEP_MS }, async () => {
		const claimName = `ws-${h.tag}`;
		const volumes = [{ name: "ws", mountPath: "/tmp", pvc: { claimName, createIfNotExists: true, storage: "64Mi" } }];
		const first = await createSandbox({ image: "busybox", volumes });
		await first.files.writeFiles([{ path: "/tmp/notes.txt", data: "kept\n" }]);
		const asUser = await first.commands.run("echo mine > /tmp/user.txt; id -u", { uid: 1000, gid: 1000 });
		assert.equal(out(asUser), "1000\n");
		// A second writer is refused while the first one has it.
		await rejectsWith(createSandbox({ image: "busybox", volumes }), 409);
		await first.kill();
		h.created.delete(first.id);

		const second = await createSandbox({ image: "busybox", volumes });
		assert.equal(await second.files.readFile("/tmp/notes.txt"), "kept\n");
		const r = await second.commands.run("cat /tmp/user.txt; stat -c %u /tmp/user.txt /tmp/notes.txt");
		assert.equal(out(r), "mine\n1000\n0\n");
		await second.kill();
		h.created.delete(second.id);

		const res = await fetch(`http://127.0.0.1:${h.port}/v1/volumes/${claimName}`, {
			method: "DELETE",
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
		});
		assert.equal(res.status, 204, await res.text());
	});

	it("creates a busybox sandbox that is Running", { timeout: STEP_MS }, async () => {
		sbx = await createSandbox();
		assert.match(sbx.id, /^[A-Za-z0-9-]+$/);
		const info = await sbx.getInfo();
		assert.equal(info.id, sbx.id);
		assert.equal(info.status?.state, "Running");
	});

	// A sandbox stays Running when its entrypoint ends; cell says how it ended in a member of
	// its own (entrypointStatus), which the SDK's reads and lists take as they are.
	it("reads and lists a sandbox whose entrypoint exited, with cell's entrypointStatus", { timeout: STEP_MS }, async () => {
		const tag = `${h.tag}-ep`;
		const ep = await createSandbox({ entrypoint: ["sh", "-c", "echo bye; exit 3"], metadata: { suite: tag } });
		let raw;
		for (let i = 0; i < 200; i++) {
			const res = await fetch(`http://127.0.0.1:${h.port}/v1/sandboxes/${ep.id}`, {
				headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
			});
			raw = await res.json();
			if (raw.entrypointStatus?.running === false) break;
			await sleep(100);
		}
		assert.equal(raw.entrypointStatus?.exitCode, 3, JSON.stringify(raw));
		const info = await ep.getInfo();
		assert.equal(info.id, ep.id);
		assert.equal(info.status?.state, "Running");
		const listed = await manager().listSandboxInfos({ metadata: { suite: tag } });
		assert.deepEqual(
			listed.items.map((s) => s.id),
			[ep.id],
		);
		await ep.kill();
		h.created.delete(ep.id);
	});

	it("runs a foreground command: stdout and exit code 0", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("echo hi");
		assert.equal(out(r), "hi\n");
		assert.equal(errOut(r), "");
		assert.equal(r.exitCode, 0);
		assert.equal(r.error, undefined);
		assert.ok(r.complete, "execution_complete event");
		assert.ok(r.id, "init event carries the command id");
	});

	it("reports a non-zero exit code", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("echo before; exit 3");
		assert.equal(out(r), "before\n");
		assert.equal(r.exitCode, 3);
		assert.equal(r.error?.name, "CommandExecError");
		assert.equal(r.error?.value, "3");
	});

	it("captures stderr separately", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("echo oops >&2; echo fine");
		assert.equal(errOut(r), "oops\n");
		assert.equal(out(r), "fine\n");
		assert.equal(r.exitCode, 0);
	});

	it("honours workingDirectory and envs", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run('pwd; echo "$GREETING"', {
			workingDirectory: "/tmp",
			envs: { GREETING: "hello there" },
		});
		assert.equal(out(r), "/tmp\nhello there\n");
		assert.equal(r.exitCode, 0);
	});

	// The default image's ordinary account is uid/gid 1000 (`user`); busybox has no name
	// for it, the ids and their limits are the same (cell-policy(5)).
	it("runs a command as uid/gid 1000: no capabilities, root's files closed", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run(
			"id -u; id -g; id -G; grep -E '^(CapEff|NoNewPrivs):' /proc/self/status; " +
				"touch /root/by-user 2>/dev/null && echo wrote-root; " +
				"echo mine > /tmp/by-user && stat -c %u:%g /tmp/by-user",
			{ uid: 1000, gid: 1000 },
		);
		assert.equal(errOut(r), "");
		assert.equal(r.exitCode, 0);
		assert.equal(out(r).split("\n").filter(Boolean).join("|"),
			"1000|1000|1000|CapEff:\t0000000000000000|NoNewPrivs:\t1|1000:1000");
		// The next command without uid is root again.
		const root = await sbx.commands.run("id -u; ls /root >/dev/null && echo root-reads");
		assert.equal(out(root).split("\n").filter(Boolean).join("|"), "0|root-reads");
		// gid without uid: the SDK refuses it itself, as execd's contract says.
		await assert.rejects(sbx.commands.run("id", { gid: 1000 }), /uid is required/);
	});

	it("kills a command at its timeout (exit 124)", { timeout: STEP_MS }, async () => {
		const t0 = Date.now();
		const r = await sbx.commands.run("echo start; sleep 30; echo never", { timeoutSeconds: 1 });
		assert.ok(Date.now() - t0 < 15_000, `took ${Date.now() - t0} ms`);
		assert.equal(out(r), "start\n");
		assert.equal(r.exitCode, 124);
	});

	it("keeps UTF-8 intact across output chunks, and large output whole", { timeout: STEP_MS }, async () => {
		// 65535 ASCII bytes then a 2-byte character: the character straddles a 64 KiB
		// relay chunk, and must still arrive as text, not base64 or U+FFFD.
		const r = await sbx.commands.run(
			"i=0; while [ $i -lt 3 ]; do head -c 65535 /dev/zero | tr '\\0' a; printf '\\303\\251'; i=$((i+1)); done",
		);
		const s = rawOut(r); // no line ending: 64 KiB pieces of one line
		assert.equal(r.exitCode, 0);
		assert.equal(s.length, 3 * 65536);
		assert.equal((s.match(/\u00e9/g) || []).length, 3);
		assert.ok(!s.includes("\ufffd"), "no replacement characters");
		const big = await sbx.commands.run("head -c 3000000 /dev/zero | tr '\\0' x");
		assert.equal(rawOut(big).length, 3_000_000);
		assert.ok(big.logs.stdout.every((m) => m.text.length <= 65536), "pieces of <= 64 KiB");
	});

	it("sends one output event per line, without the line ending", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("printf 'one\\ntwo\\r\\n\\nthr'; sleep 0.3; printf 'ee\\nlast'");
		assert.deepEqual(r.logs.stdout.map((m) => m.text), ["one", "two", "\n", "three", "last"]);
		assert.equal(r.exitCode, 0);
	});

	it("ignores keep-alive pings on a longer command", { timeout: STEP_MS }, async () => {
		const types = [];
		const r = await sbx.commands.run("echo a; sleep 5; echo b", {}, {
			onEvent: (e) => types.push(e.type),
		});
		assert.equal(out(r), "a\nb\n");
		assert.equal(r.exitCode, 0);
		assert.ok(types.includes("ping"), `events: ${types.join(",")}`);
		assert.equal(types[0], "init");
		assert.equal(types.at(-1), "execution_complete");
	});

	it("runs a background command: status and logs", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("echo bg-start; sleep 3; echo bg-done; exit 5", {
			background: true,
		});
		assert.ok(r.id, "background run returns the command id");
		assert.ok(r.complete, "execution_complete right after init, as execd sends it");
		assert.equal(r.exitCode, undefined);
		assert.equal((await sbx.commands.getCommandStatus(r.id)).running, true, "runs on");

		let st;
		const deadline = Date.now() + 20_000;
		do {
			st = await sbx.commands.getCommandStatus(r.id);
			if (!st.running) break;
			await sleep(200);
		} while (Date.now() < deadline);
		assert.equal(st.running, false, "command finished within 20 s");
		assert.equal(st.exitCode, 5);
		assert.ok(st.startedAt instanceof Date, "started_at is an RFC 3339 time");
		assert.ok(st.finishedAt instanceof Date, "finished_at is an RFC 3339 time");
		assert.ok(st.finishedAt >= st.startedAt);

		const logs = await sbx.commands.getBackgroundCommandLogs(r.id);
		assert.match(logs.content, /bg-start\n/);
		assert.match(logs.content, /bg-done\n/);
		assert.equal(typeof logs.cursor, "number", "EXECD-COMMANDS-TAIL-CURSOR header");
		const more = await sbx.commands.getBackgroundCommandLogs(r.id, logs.cursor);
		assert.equal(more.content, "", "nothing new after the tail cursor");
	});

	it("interrupts a background command", { timeout: STEP_MS }, async () => {
		const r = await sbx.commands.run("sleep 30", { background: true });
		await sbx.commands.interrupt(r.id);
		let st;
		const deadline = Date.now() + 10_000;
		do {
			st = await sbx.commands.getCommandStatus(r.id);
			if (!st.running) break;
			await sleep(200);
		} while (Date.now() < deadline);
		assert.equal(st.running, false, "stopped within 10 s");
		assert.equal(st.exitCode, 143, "128 + SIGTERM");
	});

	it("reports an unknown command id as an error", { timeout: STEP_MS }, async () => {
		let err;
		try {
			await sbx.commands.getCommandStatus("no-such-command");
		} catch (e) {
			err = e;
		}
		assert.ok(err?.statusCode >= 400 && err?.statusCode < 500, `got ${err?.statusCode}`);
	});

	it("writes and reads back text and binary files", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([
			{ path: "/workspace/hello.txt", data: "hello world\n", mode: 640 },
			{ path: "/workspace/sub/dir/bytes.bin", data: Uint8Array.from({ length: 256 }, (_, i) => i) },
		]);
		assert.equal(await sbx.files.readFile("/workspace/hello.txt"), "hello world\n");
		const bytes = await sbx.files.readBytes("/workspace/sub/dir/bytes.bin");
		assert.equal(bytes.length, 256);
		assert.ok(bytes.every((b, i) => b === i), "binary content survives the round trip");
		const r = await sbx.commands.run("cat /workspace/hello.txt");
		assert.equal(out(r), "hello world\n", "the file is visible to commands");
	});

	it("streams an upload of unknown length (chunked)", { timeout: STEP_MS }, async () => {
		async function* chunks() {
			for (let i = 0; i < 64; i++) yield new Uint8Array(16384).fill(65 + (i % 26));
		}
		await sbx.files.writeFiles([{ path: "/workspace/stream.bin", data: chunks() }]);
		const b = await sbx.files.readBytes("/workspace/stream.bin");
		assert.equal(b.length, 64 * 16384);
		assert.equal(b[0], 65);
		assert.equal(b[b.length - 1], 65 + (63 % 26));
	});

	it("reads byte ranges with the Range header (206)", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([{ path: "/workspace/lines.txt", data: "l1\nl2\nl3\nl4\n" }]);
		const part = await sbx.files.readBytes("/workspace/lines.txt", { range: "bytes=3-5" });
		assert.equal(Buffer.from(part).toString(), "l2\n");
		assert.equal(await sbx.files.readFile("/workspace/lines.txt", { range: "bytes=-3" }), "l4\n");
		await rejectsWith(sbx.files.readBytes("/workspace/lines.txt", { range: "bytes=100-200" }), 416);
	});

	it("reads line ranges with offset/limit (1-based lines)", { timeout: STEP_MS }, async () => {
		// The execd spec shipped in the SDK: offset = first line (1-based), limit = line count.
		const f = "/workspace/lines.txt";
		assert.equal(await sbx.files.readFile(f, { offset: 2, limit: 2 }), "l2\nl3\n");
		assert.equal(await sbx.files.readFile(f, { offset: 1, limit: 1 }), "l1\n");
		assert.equal(await sbx.files.readFile(f, { offset: 4, limit: 10 }), "l4\n");
		assert.equal(await sbx.files.readFile(f, { offset: 9, limit: 1 }), "");
	});

	it("reports file info: mode digits, size, type, times", { timeout: STEP_MS }, async () => {
		const infos = await sbx.files.getFileInfo(["/workspace/hello.txt", "/workspace/sub"]);
		const f = infos["/workspace/hello.txt"];
		assert.ok(f, `keyed by path: ${JSON.stringify(Object.keys(infos))}`);
		assert.equal(f.path, "/workspace/hello.txt");
		assert.equal(f.type, "file");
		assert.equal(f.size, 12);
		assert.equal(f.mode, 640, "mode is the octal permission written as decimal digits");
		assert.equal(typeof f.owner, "string");
		assert.equal(typeof f.group, "string");
		assert.ok(f.modifiedAt instanceof Date && !Number.isNaN(f.modifiedAt.getTime()));
		const d = infos["/workspace/sub"];
		assert.equal(d?.type, "directory");
		assert.equal(d?.mode, 755, "parent directories are created 0755");
	});

	it("reports a missing file as 404 FILE_NOT_FOUND", { timeout: STEP_MS }, async () => {
		await rejectsWith(sbx.files.getFileInfo(["/workspace/missing.txt"]), 404, "FILE_NOT_FOUND");
		// Download errors keep only the status; the body still names the code.
		const err = await rejectsWith(sbx.files.readFile("/workspace/missing.txt"), 404);
		assert.match(String(err.rawBody), /FILE_NOT_FOUND/);
	});

	it("creates directories (mkdir -p, mode, owner by name) and deletes files and trees", { timeout: STEP_MS }, async () => {
		await sbx.files.createDirectories([
			{ path: "/workspace/tree/a/b", mode: 750, owner: "root", group: "root" },
			{ path: "/workspace/tree/c" },
		]);
		const infos = await sbx.files.getFileInfo(["/workspace/tree/a/b", "/workspace/tree/c", "/workspace/tree/a"]);
		assert.equal(infos["/workspace/tree/a/b"]?.type, "directory");
		assert.equal(infos["/workspace/tree/a/b"]?.mode, 750);
		assert.equal(infos["/workspace/tree/a/b"]?.owner, "root");
		assert.equal(infos["/workspace/tree/c"]?.mode, 755, "the SDK's default mode");
		assert.equal(infos["/workspace/tree/a"]?.mode, 755, "parents are created 0755");
		await rejectsWith(sbx.files.createDirectories([{ path: "/workspace/tree/x", owner: "no-such-user" }]), 400, "INVALID_ARGUMENT");
		await sbx.files.writeFiles([{ path: "/workspace/tree/a/b/f.txt", data: "f" }]);
		await sbx.files.deleteFiles(["/workspace/tree/a/b/f.txt"]);
		await rejectsWith(sbx.files.getFileInfo(["/workspace/tree/a/b/f.txt"]), 404, "FILE_NOT_FOUND");
		await rejectsWith(sbx.files.deleteFiles(["/workspace/tree/a"]), 400, "INVALID_ARGUMENT");
		await rejectsWith(sbx.files.deleteFiles(["/workspace/tree/nope"]), 404, "FILE_NOT_FOUND");
		await sbx.files.deleteDirectories(["/workspace/tree"]);
		await rejectsWith(sbx.files.getFileInfo(["/workspace/tree"]), 404, "FILE_NOT_FOUND");
		await rejectsWith(sbx.files.deleteDirectories(["/workspace/tree"]), 404, "FILE_NOT_FOUND");
	});

	it("lists directories with depth and searches with globs", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([
			{ path: "/workspace/ls/b.txt", data: "bb" },
			{ path: "/workspace/ls/a.md", data: "a", mode: 640 },
			{ path: "/workspace/ls/sub/c.txt", data: "c" },
		]);
		await sbx.commands.run("ln -s / /workspace/ls/link");
		const one = await sbx.files.listDirectory({ path: "/workspace/ls" });
		assert.deepEqual(
			one.map((e) => [e.path, e.type]),
			[
				["/workspace/ls/a.md", "file"],
				["/workspace/ls/b.txt", "file"],
				["/workspace/ls/link", "symlink"],
				["/workspace/ls/sub", "directory"],
			],
		);
		assert.equal(one[0].mode, 640);
		assert.equal(one[1].size, 2);
		assert.ok(one[0].modifiedAt instanceof Date);
		const two = await sbx.files.listDirectory({ path: "/workspace/ls", depth: 2 });
		assert.deepEqual(
			two.map((e) => e.path),
			["/workspace/ls/a.md", "/workspace/ls/b.txt", "/workspace/ls/link", "/workspace/ls/sub", "/workspace/ls/sub/c.txt"],
			"descendants follow their parent; the symlink is not entered",
		);
		await rejectsWith(sbx.files.listDirectory({ path: "/workspace/ls/link" }), 400, "INVALID_ARGUMENT");
		await rejectsWith(sbx.files.listDirectory({ path: "/workspace/nope" }), 404, "FILE_NOT_FOUND");
		const txt = await sbx.files.search({ path: "/workspace/ls", pattern: "*.txt" });
		assert.deepEqual(
			txt.map((e) => e.path),
			["/workspace/ls/b.txt", "/workspace/ls/sub/c.txt"],
		);
		assert.equal(txt[0].type, "file");
		const all = await sbx.files.search({ path: "/workspace/ls" });
		assert.equal(all.length, 4, "default pattern: every file and link, no directory");
	});

	it("moves files, sets permissions and replaces contents", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([
			{ path: "/workspace/ops/a.txt", data: "host=localhost\nport=1\nhost=localhost\n" },
			{ path: "/workspace/ops/b.txt", data: "nothing here\n" },
		]);
		await sbx.files.createDirectories([{ path: "/workspace/ops/moved" }]);
		await sbx.files.moveFiles([{ src: "/workspace/ops/a.txt", dest: "/workspace/ops/moved/c.txt" }]);
		await rejectsWith(sbx.files.getFileInfo(["/workspace/ops/a.txt"]), 404, "FILE_NOT_FOUND");
		await rejectsWith(
			sbx.files.moveFiles([{ src: "/workspace/ops/none", dest: "/workspace/ops/x" }]),
			404,
			"FILE_NOT_FOUND",
		);
		await sbx.files.setPermissions([{ path: "/workspace/ops/moved/c.txt", mode: 600, owner: "root", group: "root" }]);
		let info = await sbx.files.getFileInfo(["/workspace/ops/moved/c.txt"]);
		assert.equal(info["/workspace/ops/moved/c.txt"].mode, 600);
		assert.equal(info["/workspace/ops/moved/c.txt"].owner, "root");
		await rejectsWith(
			sbx.files.setPermissions([{ path: "/workspace/ops/b.txt", mode: 644, owner: "nobody-at-all" }]),
			400,
			"INVALID_ARGUMENT",
		);
		await sbx.files.replaceContents([
			{ path: "/workspace/ops/moved/c.txt", oldContent: "localhost", newContent: "0.0.0.0" },
		]);
		assert.equal(await sbx.files.readFile("/workspace/ops/moved/c.txt"), "host=0.0.0.0\nport=1\nhost=0.0.0.0\n");
		info = await sbx.files.getFileInfo(["/workspace/ops/moved/c.txt"]);
		assert.equal(info["/workspace/ops/moved/c.txt"].mode, 600, "the mode survives a replace");
		const counts = await sbx.files.replaceContentsDetailed([
			{ path: "/workspace/ops/moved/c.txt", oldContent: "0.0.0.0", newContent: "::" },
			{ path: "/workspace/ops/b.txt", oldContent: "absent", newContent: "x" },
		]);
		assert.deepEqual(
			counts.sort((x, y) => x.path.localeCompare(y.path)),
			[
				{ path: "/workspace/ops/b.txt", replacedCount: 0 },
				{ path: "/workspace/ops/moved/c.txt", replacedCount: 2 },
			],
		);
		await rejectsWith(
			sbx.files.replaceContents([{ path: "/workspace/ops/b.txt", oldContent: "", newContent: "x" }]),
			400,
			"INVALID_ARGUMENT",
		);
	});

	it("resolves owner and group names inside the sandbox on upload", { timeout: STEP_MS }, async () => {
		await sbx.commands.run("echo 'crew:x:4242:4343::/:/bin/false' >>/etc/passwd; echo 'crewg:x:4343:' >>/etc/group");
		await sbx.files.writeFiles([
			{ path: "/workspace/owned/f.txt", data: "mine", mode: 640, owner: "crew", group: "crewg" },
		]);
		const info = (await sbx.files.getFileInfo(["/workspace/owned/f.txt"]))["/workspace/owned/f.txt"];
		assert.equal(info.owner, "crew");
		assert.equal(info.group, "crewg");
		assert.equal(info.mode, 640);
		// Upload errors keep only the status in the SDK; the body still names the field.
		const err = await rejectsWith(
			sbx.files.writeFiles([{ path: "/workspace/owned/g.txt", data: "x", owner: "ghost" }]),
			400,
		);
		assert.match(String(err.rawBody), /owner/);
		await rejectsWith(sbx.files.getFileInfo(["/workspace/owned/g.txt"]), 404, "FILE_NOT_FOUND");
	});

	it("runs the filesystem round of OpenSandbox's own e2e suite", { timeout: STEP_MS }, async () => {
		// The steps of its "03 filesystem operations" test: a directory of mode 644 as a move
		// target, owner/group names the image has (nobody/nogroup), search "*".
		const d1 = "/tmp/fs_e2e_1";
		const d2 = "/tmp/fs_e2e_2";
		await sbx.files.createDirectories([
			{ path: d1, mode: 755 },
			{ path: d2, mode: 644 },
		]);
		const dirs = await sbx.files.getFileInfo([d1, d2]);
		assert.equal(dirs[d1].mode, 755);
		assert.equal(dirs[d2].mode, 644);
		await sbx.files.writeFiles([
			{ path: `${d1}/f1`, data: "one", mode: 644 },
			{ path: `${d1}/f3`, data: "three", mode: 755, owner: "nobody", group: "nogroup" },
		]);
		const found = new Set((await sbx.files.search({ path: d1, pattern: "*" })).map((f) => f.path));
		assert.ok(found.has(`${d1}/f1`) && found.has(`${d1}/f3`), [...found].join(","));
		await sbx.files.setPermissions([{ path: `${d1}/f1`, mode: 755, owner: "nobody", group: "nogroup" }]);
		const f1 = (await sbx.files.getFileInfo([`${d1}/f1`]))[`${d1}/f1`];
		assert.deepEqual([f1.mode, f1.owner, f1.group], [755, "nobody", "nogroup"]);
		await sbx.files.moveFiles([{ src: `${d1}/f3`, dest: `${d2}/moved` }]);
		assert.equal(await sbx.files.readFile(`${d2}/moved`), "three");
		await sbx.files.deleteDirectories([d1, d2]);
		const r = await sbx.commands.run(`test ! -d ${d1} && test ! -d ${d2} && echo OK`);
		assert.equal(out(r).trim(), "OK");
	});

	it("lists the sandbox by a metadata filter", { timeout: STEP_MS }, async () => {
		const m = manager();
		const mine = await m.listSandboxInfos({ metadata: { suite: h.tag } });
		assert.deepEqual(
			mine.items.map((s) => s.id),
			[sbx.id],
		);
		assert.ok(mine.items[0].createdAt instanceof Date);
		const running = await m.listSandboxInfos({ metadata: { suite: h.tag }, states: ["Running"] });
		assert.ok(running.items.some((s) => s.id === sbx.id), "state=Running filter");
		const other = await m.listSandboxInfos({ metadata: { suite: `${h.tag}-other` } });
		assert.equal(other.items.length, 0, "a non-matching metadata filter finds nothing");
	});

	it("returns sandbox info with metadata, createdAt and expiresAt", { timeout: STEP_MS }, async () => {
		const info = await sbx.getInfo();
		assert.equal(info.id, sbx.id);
		assert.equal(info.status?.state, "Running");
		assert.equal(info.metadata?.suite, h.tag);
		assert.ok(info.createdAt instanceof Date && !Number.isNaN(info.createdAt.getTime()));
		assert.ok(info.expiresAt instanceof Date, "expiresAt set for timeoutSeconds 600");
		assert.ok(info.expiresAt > info.createdAt);
		assert.equal(info.image?.uri, "busybox");
	});

	it("returns the same sandbox for the same cell.sessionKey", { timeout: STEP_MS }, async () => {
		const key = `${h.tag}-session`;
		const a = await createSandbox({ extensions: { "cell.sessionKey": key } });
		const b = await createSandbox({ extensions: { "cell.sessionKey": key } });
		assert.equal(a.id, b.id);
		await a.files.writeFiles([{ path: "/workspace/mark", data: "kept" }]);
		assert.equal(await b.files.readFile("/workspace/mark"), "kept");
		await a.kill();
		h.created.delete(a.id);
	});

	it("getMetrics reports the sandbox's cgroup limits and usage", { timeout: STEP_MS }, async () => {
		const m = await createSandbox({ resource: { cpu: "500m", memory: "256Mi" } });
		const metrics = await m.getMetrics();
		assert.equal(metrics.cpuCount, 1, "500m rounds up to one core");
		assert.equal(metrics.memoryTotalMiB, 256);
		assert.ok(metrics.memoryUsedMiB > 0 && metrics.memoryUsedMiB < 256, `used ${metrics.memoryUsedMiB}`);
		assert.ok(metrics.cpuUsedPercentage >= 0 && metrics.cpuUsedPercentage <= 100);
		assert.ok(Math.abs(metrics.timestamp - Date.now()) < 60000, "timestamp in ms");
		await m.kill();
		h.created.delete(m.id);
	});

	it("pause freezes, resume thaws; resuming a running sandbox is 409", { timeout: STEP_MS }, async () => {
		const p = await createSandbox();
		await p.commands.run("echo kept > /tmp/mem");
		await p.pause();
		assert.equal((await p.getInfo()).status?.state, "Paused");
		const resumed = await p.resume({ readyTimeoutSeconds: 10 });
		h.closers.push(resumed);
		assert.equal((await resumed.getInfo()).status?.state, "Running");
		assert.equal(out(await resumed.commands.run("cat /tmp/mem")), "kept\n", "memory kept");
		await rejectsWith(manager().resumeSandbox(p.id), 409, "DOCKER::SANDBOX_NOT_PAUSED");
		await p.kill();
		h.created.delete(p.id);
	});

	it("snapshots a sandbox and creates another from it: its files, apart from then on", { timeout: 2 * STEP_MS }, async () => {
		const src = await createSandbox();
		await src.commands.run("mkdir -p /data && echo before > /data/f && chown 1000:1000 /data/f && chmod 4755 /data/f");
		const m = manager();
		const snap = await m.createSnapshot(src.id, { name: `snap-${h.tag}` });
		assert.equal(snap.sandboxId, src.id);
		assert.equal(snap.status?.state, "Ready");
		assert.ok(snap.createdAt instanceof Date);
		const got = await m.getSnapshot(snap.id);
		assert.equal(got.name, `snap-${h.tag}`);
		const listed = await m.listSnapshots({ sandboxId: src.id });
		assert.deepEqual(listed.items.map((x) => x.id), [snap.id]);
		// The SDK's create with snapshotId (and its default entrypoint and limits).
		const fork = await createSandbox({ image: undefined, snapshotId: snap.id });
		assert.notEqual(fork.id, src.id);
		assert.equal(out(await fork.commands.run("cat /data/f; stat -c %u:%g:%a /data/f")), "before\n1000:1000:4755\n");
		await fork.commands.run("echo fork > /data/f");
		await src.commands.run("echo source > /data/g");
		assert.equal(out(await src.commands.run("cat /data/f")), "before\n");
		assert.equal((await fork.commands.run("test -e /data/g")).exitCode, 1);
		await src.kill();
		h.created.delete(src.id);
		// It outlives its source; deleted, it is gone.
		assert.equal((await m.getSnapshot(snap.id)).id, snap.id);
		await m.deleteSnapshot(snap.id);
		await rejectsWith(m.getSnapshot(snap.id), 404, "SNAPSHOT_NOT_FOUND");
		await rejectsWith(createSandbox({ image: undefined, snapshotId: snap.id }), 400, "SNAPSHOT_NOT_FOUND");
		await fork.kill();
		h.created.delete(fork.id);
	});

	it("connects to an existing sandbox by id", { timeout: STEP_MS }, async () => {
		const again = await Sandbox.connect({
			sandboxId: sbx.id,
			connectionConfig: conn(),
			readyTimeoutSeconds: 10,
		});
		h.closers.push(again);
		const r = await again.commands.run("cat /workspace/hello.txt");
		assert.equal(out(r), "hello world\n");
	});

	it("reaches a server in the sandbox through getEndpointUrl (the port proxy)", { timeout: STEP_MS }, async () => {
		await sbx.files.writeFiles([{ path: "/www/index.html", data: "through the proxy\n" }]);
		await sbx.commands.run("httpd -f -p 127.0.0.1:8080 -h /www", { background: true });
		const url = await sbx.getEndpointUrl(8080);
		assert.match(url, new RegExp(`/v1/sandboxes/${sbx.id}/proxy/8080$`));
		let res;
		for (let i = 0; i < 50; i++) {
			res = await fetch(`${url}/index.html`, { headers: { "OPEN-SANDBOX-API-KEY": h.apiKey } });
			if (res.status !== 502) break;
			await res.arrayBuffer();
			await sleep(100);
		}
		assert.equal(res.status, 200);
		assert.equal(await res.text(), "through the proxy\n");
		const nokey = await fetch(`${url}/index.html`);
		assert.equal(nokey.status, 401);
		await nokey.arrayBuffer();
	});

	it("opens the endpoint without the API key: its headers, and its url in a browser's way", { timeout: STEP_MS }, async () => {
		const ep = await sbx.getEndpoint(8080);
		const url = await sbx.getEndpointUrl(8080);
		// The headers the spec says requests must carry (the port's preview token) suffice.
		const token = ep.headers?.["X-Cell-Preview-Token"];
		assert.equal(typeof token, "string");
		assert.equal(token.length, 43);
		const withHeaders = await fetch(`${url}/index.html`, { headers: ep.headers });
		assert.equal(withHeaders.status, 200);
		assert.equal(await withHeaders.text(), "through the proxy\n");
		// cell's url: a redirect to the same page that sets the cookie, which then suffices.
		assert.equal(ep.url, `${url}/?cell_token=${token}`);
		const first = await fetch(ep.url, { redirect: "manual" });
		assert.equal(first.status, 302);
		assert.equal(first.headers.get("location"), new URL(url).pathname + "/");
		const cookie = first.headers.get("set-cookie");
		assert.match(cookie, /^cell_preview=[A-Za-z0-9_-]{43}; Path=\/v1\/sandboxes\/[a-z0-9-]+\/proxy\/8080; HttpOnly; SameSite=Lax$/);
		await first.arrayBuffer();
		const page = await fetch(`${url}/index.html`, { headers: { cookie: cookie.split(";")[0] } });
		assert.equal(page.status, 200);
		assert.equal(await page.text(), "through the proxy\n");
		// Another port's token does not open this one.
		const other = await sbx.getEndpoint(8081);
		const wrong = await fetch(`${url}/index.html`, { headers: other.headers });
		assert.equal(wrong.status, 401);
		await wrong.arrayBuffer();
	});

	it("getSignedEndpoint: a token that opens the port until its expiry, and not after", { timeout: STEP_MS }, async () => {
		const url = await sbx.getEndpointUrl(8080);
		const now = Math.floor(Date.now() / 1000);
		const ep = await sbx.getSignedEndpoint(8080, now + 120);
		const token = ep.headers?.["X-Cell-Preview-Token"];
		assert.match(token, /^[0-9a-z]{1,13}\.[A-Za-z0-9_-]{43}$/);
		const ok = await fetch(`${url}/index.html`, { headers: ep.headers });
		assert.equal(ok.status, 200);
		assert.equal(await ok.text(), "through the proxy\n");
		const past = await sbx.getSignedEndpoint(8080, now - 5);
		const late = await fetch(`${url}/index.html`, { headers: past.headers });
		assert.equal(late.status, 401);
		await late.arrayBuffer();
	});

	it("kills the sandbox: later getInfo and connect are 404", { timeout: STEP_MS }, async () => {
		const id = sbx.id;
		await sbx.kill();
		await rejectsWith(sbx.getInfo(), 404, "SANDBOX_NOT_FOUND");
		await rejectsWith(
			Sandbox.connect({ sandboxId: id, connectionConfig: conn(), readyTimeoutSeconds: 5 }),
			404,
		);
		await rejectsWith(manager().getSandboxInfo(id), 404, "SANDBOX_NOT_FOUND");
		h.created.delete(id);
		assert.ok(!fs.existsSync(path.join(h.state, "sandboxes", id)), "state dir removed");
	});

	stopsCleanly();
});
