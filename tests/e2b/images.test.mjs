// Registry images through E2B's SDK: a template id that is an image reference (of a
// registry lab on 127.0.0.1, tests/lib/registry.mjs) is pulled on first use and the
// sandbox runs with the image's env, files and entrypoint, and without bash; a snapshot's id is found among
// the caller's snapshots and never asked of a registry, although celld searches the lab
// for short names; a reference the registry lacks is a clear "not found".

import { describe, it } from "node:test";
import assert from "node:assert/strict";

import { Sandbox } from "e2b";

import { APP, LAB, labMissing, useRegistry } from "../lib/registry.mjs";
import { STEP_MS, h, opts, skip, sleep, stopsCleanly, useCelld } from "./harness.mjs";

describe("registry images as E2B template ids", { skip: skip || labMissing() }, () => {
	const lab = useRegistry({ images: [APP] });
	useCelld({ celldArgs: () => ["--registries-conf", lab.registriesConf] });

	const ref = () => `${lab.host}/${APP.name}:${APP.tag}`;
	const fromTemplate = async (template) => {
		const sbx = await Sandbox.create(template, { metadata: { suite: h.tag }, timeoutMs: 600_000, ...opts() });
		h.created.add(sbx.sandboxId);
		return sbx;
	};
	let sbx;

	it("Sandbox.create(reference) pulls the image; commands see its env and files", { timeout: STEP_MS }, async () => {
		sbx = await fromTemplate(ref());
		const r = await sbx.commands.run(`echo $LAB_GREETING; cat ${LAB.APP_FILE} ${LAB.ADDED}; ls -d ${LAB.WORKSPACE}`);
		assert.equal(r.exitCode, 0, r.stderr);
		assert.equal(r.stdout, `hello-from-the-lab\n${LAB.APP_TEXT}${LAB.ADDED_TEXT}${LAB.WORKSPACE}\n`);
		// The image's entrypoint ran (E2B's create names none) as the image's user.
		let marker = "";
		for (let i = 0; i < 100 && !marker; i++) {
			marker = await sbx.files.read(LAB.MARKER).catch(() => "");
			if (!marker) await sleep(100);
		}
		assert.equal(marker, `sandbox ${LAB.SANDBOX_UID} ${LAB.WORKSPACE} hello-from-the-lab\n`);
		// A user the image has, by name.
		const who = await sbx.commands.run("id -un; echo $HOME", { user: "sandbox" });
		assert.equal(who.stdout, `sandbox\n${LAB.HOME}\n`);
		assert.equal((await sbx.getInfo()).templateId, ref());
		assert.equal(lab.requests(`/v2/${APP.name}/manifests/${APP.tag}`, "GET").length, 1, "pulled once");
	});

	it("an image without bash: commands and a terminal run with its sh", { timeout: STEP_MS }, async () => {
		// The SDK asks for /bin/bash -l -c (commands) and /bin/bash -i -l (terminals).
		const r = await sbx.commands.run("test -e /bin/bash || echo no bash; echo sum=$((2+3))");
		assert.equal(r.exitCode, 0, r.stderr);
		assert.equal(r.stdout, "no bash\nsum=5\n");
		let seen = "";
		const term = await sbx.pty.create({ cols: 80, rows: 24, user: "sandbox", onData: (d) => (seen += Buffer.from(d).toString()) });
		await sbx.pty.sendInput(term.pid, new TextEncoder().encode("echo hi$((1+1)) $(id -un)\n"));
		for (let i = 0; i < 200 && !/hi2 sandbox/.test(seen); i++) await sleep(50);
		assert.match(seen, /hi2 sandbox/);
		assert.equal(await sbx.pty.kill(term.pid), true);
	});

	it("a snapshot's id is the caller's snapshot, never asked of the registry", { timeout: STEP_MS }, async () => {
		await sbx.files.write(`${LAB.WORKSPACE}/state.txt`, "captured");
		const snap = await sbx.createSnapshot(opts());
		assert.match(snap.snapshotId, /^[0-9a-z]+$/);
		const copy = await fromTemplate(snap.snapshotId);
		assert.equal(await copy.files.read(`${LAB.WORKSPACE}/state.txt`), "captured");
		assert.equal((await copy.commands.run(`cat ${LAB.APP_FILE}`)).stdout, LAB.APP_TEXT);
		// A short name that is neither a template, an image here nor a snapshot is searched
		// for in the lab (registries.conf's search list): so the log would show the
		// snapshot's id, had celld asked.
		const other = `nosuch-${h.tag}`;
		await assert.rejects(fromTemplate(other), /not found/);
		assert.ok(lab.requests(`/v2/${other}/manifests/`, "GET").length >= 1, `the lab was asked for ${other}:\n${lab.logTail()}`);
		assert.deepEqual(lab.requests(snap.snapshotId), [], "the snapshot's id never reached the registry");
		assert.equal(await copy.kill(), true);
		assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, opts()), true);
	});

	it("a reference the registry lacks is a clear not-found error", { timeout: STEP_MS }, async () => {
		const missing = `${lab.host}/lab/missing:1`;
		let err;
		try {
			await fromTemplate(missing);
		} catch (e) {
			err = e;
		}
		assert.ok(err, "the create failed");
		// "404: template '…' not found (… manifest lab/missing:1: HTTP 404: MANIFEST_UNKNOWN …)"
		assert.match(err.message, /not found/i);
		assert.match(err.message, /MANIFEST_UNKNOWN|manifest unknown/, err.message);
		assert.ok(err.message.includes(missing), `the message names the reference: ${err.message}`);
		assert.ok(lab.requests("/v2/lab/missing/manifests/1", "GET").length >= 1, "the registry was asked");
		assert.equal(await sbx.kill(), true);
	});

	stopsCleanly();
});
