// The harness of the SDK suite (tests/sdk/*.test.mjs): the official OpenSandbox
// TypeScript SDK driving a real celld (tests/lib/celld.mjs). Each test file calls
// useCelld() inside its describe.
//
// Environment: as tests/lib/celld.mjs says (CELL_BUILD, CELL_TEST_IMAGES, CELLD_EXTRA_ARGS,
// CELL_SDK_KEEP).

import assert from "node:assert/strict";

import { Sandbox, SandboxManager } from "@alibaba-group/opensandbox";

import { h, useCelld as useLibCelld } from "../lib/celld.mjs";

export * from "../lib/celld.mjs";

export function conn(apiKey = h.apiKey) {
	return {
		domain: `127.0.0.1:${h.port}`,
		protocol: "http",
		apiKey,
		requestTimeoutSeconds: 45,
	};
}

export function manager(apiKey) {
	const m = SandboxManager.create({ connectionConfig: conn(apiKey) });
	h.closers.push(m);
	return m;
}

export async function createSandbox(opts = {}) {
	const sbx = await Sandbox.create({
		image: "busybox",
		connectionConfig: conn(),
		metadata: { suite: h.tag },
		timeoutSeconds: 600,
		readyTimeoutSeconds: 20,
		...opts,
	});
	h.created.add(sbx.id);
	h.closers.push(sbx);
	return sbx;
}

// Deletes every sandbox this run made (a failed case may have stopped half way).
export async function deleteLeftovers() {
	if (!h.celld || !h.port) return;
	const m = SandboxManager.create({ connectionConfig: conn() });
	try {
		const listed = await m.listSandboxInfos({ metadata: { suite: h.tag } });
		for (const s of listed.items) h.created.add(s.id);
	} catch {
		/* celld may be gone */
	}
	for (const id of h.created) {
		try {
			await m.killSandbox(id);
			h.created.delete(id);
		} catch (e) {
			if (e.statusCode === 404) h.created.delete(id);
		}
	}
	await m.close();
}

// Awaits a promise expected to fail with an SDK SandboxApiException of `status`.
export async function rejectsWith(promise, status, code) {
	let err;
	try {
		await promise;
	} catch (e) {
		err = e;
	}
	assert.ok(err, `expected HTTP ${status}${code ? " " + code : ""}, but the call succeeded`);
	assert.equal(
		err.statusCode,
		status,
		`expected HTTP ${status}, got ${err.name}: ${err.message} (statusCode=${err.statusCode})`,
	);
	if (code) assert.equal(err.error?.code, code, `error code for: ${err.message}`);
	return err;
}

// Output events come one per line without the line ending (an empty line is "\n"), as
// execd sends them: these put the endings back for comparing whole outputs.
export const asLines = (msgs) => msgs.map((m) => (m.text === "\n" ? "\n" : `${m.text}\n`)).join("");
export const out = (r) => asLines(r.logs.stdout);
export const errOut = (r) => asLines(r.logs.stderr);
export const rawOut = (r) => r.logs.stdout.map((m) => m.text).join("");

// Called inside a test file's describe: a private celld for its cases (tests/lib/celld.mjs),
// every sandbox made through the SDK deleted in the end.
export function useCelld(opts = {}) {
	// A file's own cleanup (sandboxes of other keys) first, then the default key's.
	const cleanup = async () => {
		await opts.cleanup?.();
		await deleteLeftovers();
	};
	useLibCelld({ ...opts, cleanup });
}
