// The harness of the E2B suite (tests/e2b/*.test.mjs): E2B's official JS SDK (npm e2b,
// pinned in package-lock.json), unchanged, driving a real celld's E2B listener
// (celld --e2b-listen) through the two variables a self-hoster sets: E2B_API_URL and
// E2B_SANDBOX_URL, both the listener's plain http:// URL. Each test file calls useCelld()
// inside its describe.
//
// E2B's "base" template is cell's "default" image (Debian with bash and the account
// "user"): from CELL_TEST_DEFAULT_IMAGES (make check's cache), else built there by
// rootfs/build-image (minutes, from Debian's archive) the first time.
//
// Environment: as tests/lib/celld.mjs says, plus CELL_TEST_DEFAULT_IMAGES.

import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";

import { Sandbox } from "e2b";

import { REPO, h, run, useCelld as useLibCelld } from "../lib/celld.mjs";

export * from "../lib/celld.mjs";

// The images dir holding "default" (the base template's image).
// The audit log's records as celld wrote them, read from its files: security.log
// (lifecycle, network decisions, failed authentication) and audit.log (commands, file
// changes), each rotated on its own, merged in the order of the one seq that counts both.
export function auditRecords(state) {
	const dir = path.join(state, "audit");
	const recs = [];
	for (const name of ["security.log", "audit.log"]) {
		let text = "";
		try {
			text = fs.readFileSync(path.join(dir, name), "utf8");
		} catch (e) {
			if (e.code !== "ENOENT") throw e;
		}
		for (const l of text.split("\n")) if (l.trim()) recs.push(JSON.parse(l));
	}
	return recs.sort((a, b) => (a.seq ?? 0) - (b.seq ?? 0));
}

export function defaultImages() {
	const dir = path.resolve(
		process.env.CELL_TEST_DEFAULT_IMAGES || path.join(REPO, "build", "tests", "images-cache"),
	);
	if (!fs.existsSync(path.join(dir, "default", "rootfs"))) {
		fs.mkdirSync(dir, { recursive: true });
		run(path.join(REPO, "rootfs", "build-image"), ["default", dir], { stdio: "inherit" });
	}
	assert.ok(fs.existsSync(path.join(dir, "default", "rootfs")), `no ${dir}/default/rootfs`);
	return dir;
}

// What the SDK's calls take: the listener for both URLs, the API key. The variables are
// set too, as a self-hoster would set them (the SDK reads them when an option is left out).
export function opts(extra = {}) {
	return {
		apiKey: h.apiKey,
		apiUrl: `http://127.0.0.1:${h.e2bPort}`,
		sandboxUrl: `http://127.0.0.1:${h.e2bPort}`,
		requestTimeoutMs: 60_000,
		...extra,
	};
}

function setEnv() {
	process.env.E2B_API_KEY = h.apiKey;
	process.env.E2B_API_URL = `http://127.0.0.1:${h.e2bPort}`;
	process.env.E2B_SANDBOX_URL = `http://127.0.0.1:${h.e2bPort}`;
	delete process.env.E2B_DEBUG;
	delete process.env.E2B_DOMAIN;
}

// A sandbox of this file, deleted in the end whatever happens.
export async function createSandbox(extra = {}) {
	const sbx = await Sandbox.create({
		metadata: { suite: h.tag },
		timeoutMs: 600_000,
		...opts(extra),
	});
	h.created.add(sbx.sandboxId);
	return sbx;
}

// Deletes every sandbox this file made (a failed case may have stopped half way).
export async function deleteLeftovers() {
	if (!h.celld || !h.e2bPort) return;
	try {
		const pages = Sandbox.list({ ...opts(), query: { metadata: { suite: h.tag } } });
		while (pages.hasNext)
			for (const s of await pages.nextItems()) h.created.add(s.sandboxId);
	} catch {
		/* celld may be gone */
	}
	for (const id of h.created) {
		try {
			await Sandbox.kill(id, opts());
			h.created.delete(id);
		} catch {
			/* kept for the report */
		}
	}
}

// Called inside a test file's describe: a private celld with an E2B listener on the
// default image, the SDK's variables pointing at it, every sandbox deleted in the end.
export function useCelld(extra = {}) {
	useLibCelld({
		...extra,
		e2b: true,
		images: extra.images || defaultImages,
		started: setEnv,
		// A file's own cleanup (sandboxes of other keys) first, then the default key's.
		cleanup: async () => {
			await extra.cleanup?.();
			await deleteLeftovers();
		},
	});
}
