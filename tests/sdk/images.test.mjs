// Registry images through the OpenSandbox SDK: a create naming an image of a registry (a
// lab on 127.0.0.1, tests/lib/registry.mjs) pulls it on first use and honours its config
// (User, WorkingDir, Env) with its layers; a second create takes it from the store without
// asking the registry again; and FastGPT's shape of a create: its adapter's options with an
// image whose entrypoint (/home/sandbox/entrypoint.sh) runs as the image's user `sandbox`.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

import { ConnectionConfig, Sandbox } from "@alibaba-group/opensandbox";

import { APP, LAB, labMissing, useRegistry } from "../lib/registry.mjs";
import { STEP_MS, createSandbox, errOut, h, out, skip, sleep, stopsCleanly, useCelld } from "./harness.mjs";

describe("registry images through the OpenSandbox SDK", { skip: skip || labMissing() }, () => {
	const lab = useRegistry({ images: [APP] });
	useCelld({ celldArgs: () => ["--registries-conf", lab.registriesConf] });

	const ref = () => `${lab.host}/${APP.name}:${APP.tag}`;
	const manifestGets = () => lab.requests(`/v2/${APP.name}/manifests/`, "GET").length;
	// celld's log lines of a finished pull of ref (image_pull.c: "pull: NAME is DIGEST ...").
	const pullsLogged = () => {
		let text = "";
		try {
			text = fs.readFileSync(h.logPath, "utf8");
		} catch {
			/* not yet */
		}
		return text.split("\n").filter((l) => l.includes(`pull: ${ref()} is `)).length;
	};
	const images = async () => {
		const res = await fetch(`http://127.0.0.1:${h.port}/v1/images`, {
			headers: { "OPEN-SANDBOX-API-KEY": h.apiKey },
		});
		assert.equal(res.status, 200);
		return res.json();
	};

	it("a create pulls the registry image on first use and runs with its config and layers", { timeout: STEP_MS }, async () => {
		assert.deepEqual((await images()).filter((i) => i.name === ref()), [], "not in the store yet");
		const sbx = await createSandbox({ image: ref() });
		const r = await sbx.commands.run(`id -un; id -u; pwd; echo $LAB_GREETING; cat ${LAB.APP_FILE} ${LAB.ADDED}`);
		assert.equal(r.exitCode, 0, errOut(r));
		assert.equal(
			out(r),
			`sandbox\n${LAB.SANDBOX_UID}\n${LAB.WORKSPACE}\nhello-from-the-lab\n${LAB.APP_TEXT}${LAB.ADDED_TEXT}`,
		);
		const listed = (await images()).filter((i) => i.name === ref());
		assert.equal(listed.length, 1, "listed once");
		assert.equal(listed[0].digest, lab.digests[`${APP.name}:${APP.tag}`], "the pushed manifest's digest");
		const info = await sbx.getInfo();
		assert.equal(info.image?.uri, ref());
		await sbx.kill();
		h.created.delete(sbx.id);
	});

	it("a second create takes it from the store: no pull, no request to the registry", { timeout: STEP_MS }, async () => {
		// The first pull's line is in celld's log (its stream may lag a moment behind).
		for (let i = 0; i < 50 && pullsLogged() < 1; i++) await sleep(100);
		assert.equal(pullsLogged(), 1, "the first create pulled once");
		const gets = manifestGets();
		assert.ok(gets >= 1, `the registry saw the first pull:\n${lab.logTail()}`);
		const sbx = await createSandbox({ image: ref() });
		const r = await sbx.commands.run(`cat ${LAB.APP_FILE}`);
		assert.equal(out(r), LAB.APP_TEXT);
		await sleep(200);
		assert.equal(pullsLogged(), 1, "no second pull in celld's log");
		assert.equal(manifestGets(), gets, "no manifest asked of the registry again");
		assert.equal((await images()).filter((i) => i.name === ref()).length, 1, "still one image");
		await sbx.kill();
		h.created.delete(sbx.id);
	});

	// FastGPT's OpenSandbox adapter (its sdk/sandbox-adapter) creates with its runtime
	// profile's options: the image as "repository:tag", entrypoint
	// ["/home/sandbox/entrypoint.sh"], no expiry, cpu and memory, its env and a sessionId,
	// readyTimeoutSeconds 120, the rest unset.
	it("FastGPT's create: the image's entrypoint runs as `sandbox` and leaves its marker", { timeout: STEP_MS }, async () => {
		const sessionId = `fastgpt-img-${h.tag}`;
		const sbx = await Sandbox.create({
			connectionConfig: new ConnectionConfig({
				domain: `http://127.0.0.1:${h.port}`,
				apiKey: h.apiKey,
				requestTimeoutSeconds: 120,
				debug: false,
				useServerProxy: true,
			}),
			image: ref(),
			entrypoint: [LAB.ENTRYPOINT],
			timeoutSeconds: null,
			resource: { cpu: "1", memory: "512Mi" },
			env: { FASTGPT_ENV: "on" },
			metadata: { suite: h.tag, sessionId },
			networkPolicy: undefined,
			volumes: undefined,
			extensions: undefined,
			skipHealthCheck: undefined,
			readyTimeoutSeconds: 120,
			healthCheckPollingInterval: undefined,
		});
		h.created.add(sbx.id);
		h.closers.push(sbx);
		const info = await sbx.getInfo();
		assert.equal(info.status.state, "Running");
		assert.deepEqual(info.entrypoint, [LAB.ENTRYPOINT]);
		// The entrypoint runs in the background: its marker appears once it has.
		let marker = "";
		for (let i = 0; i < 100; i++) {
			const r = await sbx.commands.run(`cat ${LAB.MARKER} 2>/dev/null`);
			marker = out(r);
			if (marker) break;
			await sleep(100);
		}
		assert.equal(marker, `sandbox ${LAB.SANDBOX_UID} ${LAB.WORKSPACE} hello-from-the-lab\n`, "the entrypoint ran as the image's user");
		// Still running (it stays, as a service's would), as `sandbox`, and FastGPT's env
		// reaches its commands.
		const ps = await sbx.commands.run(`ps -o user,args | grep '[e]ntrypoint.sh'; echo $FASTGPT_ENV`);
		assert.match(out(ps), /^(sandbox|1000)\s+.*entrypoint\.sh\non\n$/, out(ps));
		await sbx.kill();
		h.created.delete(sbx.id);
		assert.equal(pullsLogged(), 1, "the image was in the store: no pull");
	});

	stopsCleanly();
});
