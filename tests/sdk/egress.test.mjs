// The egress API through the official SDK: getEgressPolicy(), patchEgressRules() and
// deleteEgressRules(), which the SDK sends to /policy under the sandbox's endpoint of port
// 18080 (OpenSandbox's egress sidecar; celld answers there itself). celld runs in a private
// network namespace (useCelld({netns: true})): a sandbox with a network gets one, but no
// packet can leave this machine, and nothing of the host's network is touched. The
// sandboxes never need to reach anything here: these cases check the policy as data, live
// changes and refusals, as the SDK sees them.

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";

import { STEP_MS, createSandbox, h, out, rejectsWith, skip, stopsCleanly, useCelld } from "./harness.mjs";

const allowOnly = {
	defaultAction: "deny",
	egress: [{ action: "allow", target: "allowed.test" }],
};

describe("the egress API through @alibaba-group/opensandbox", { skip }, () => {
	let sbx;

	// Its resolver's upstream is this namespace's own loopback: nothing answers there, and
	// nothing could leave it.
	useCelld({ netns: true, celldArgs: ["--dns-upstream", "127.0.0.1:53"] });

	it("runs celld in a network namespace of its own", { timeout: STEP_MS }, async () => {
		const mine = fs.readlinkSync("/proc/self/ns/net");
		const celld = fs.readlinkSync(`/proc/${h.celld.pid}/ns/net`);
		assert.notEqual(celld, mine, "celld must not share the test's network namespace");
	});

	it("answers the policy a sandbox was created with", { timeout: STEP_MS }, async () => {
		sbx = await createSandbox({ networkPolicy: allowOnly });
		assert.equal(out(await sbx.commands.run("echo up")), "up\n");
		const ep = await sbx.getEndpoint(18080);
		assert.match(ep.endpoint, new RegExp(`/v1/sandboxes/${sbx.id}/proxy/18080$`));
		assert.deepEqual(await sbx.getEgressPolicy(), allowOnly);
	});

	it("merges a patch: incoming rules first, the first rule per target wins", { timeout: STEP_MS }, async () => {
		const r = await sbx.patchEgressRules([
			{ action: "allow", target: "*.allowed.test" },
			{ action: "deny", target: "Allowed.Test." },
			{ action: "allow", target: "allowed.test" },
			{ action: "allow", target: "198.51.100.7" },
			{ action: "allow", target: "203.0.113.0/24" },
		]);
		assert.equal(r, undefined);
		assert.deepEqual(await sbx.getEgressPolicy(), {
			defaultAction: "deny",
			egress: [
				{ action: "allow", target: "*.allowed.test" },
				{ action: "deny", target: "allowed.test" },
				{ action: "allow", target: "198.51.100.7" },
				{ action: "allow", target: "203.0.113.0/24" },
			],
		});
	});

	it("refuses a bad patch with 400 naming the rule, and keeps the policy", { timeout: STEP_MS }, async () => {
		const before = await sbx.getEgressPolicy();
		let err = await rejectsWith(
			sbx.patchEgressRules([
				{ action: "allow", target: "ok.test" },
				{ action: "allow", target: "bad_name.test" },
			]),
			400,
			"INVALID_ARGUMENT",
		);
		assert.match(err.message, /rules\[1\]\.target/);
		err = await rejectsWith(sbx.patchEgressRules([{ action: "allow", target: "2001:db8::1" }]), 400);
		assert.match(err.message, /IPv6/);
		err = await rejectsWith(sbx.patchEgressRules([{ action: "allow", target: "10.0.0.1/8" }]), 400);
		assert.match(err.message, /host bits/);
		err = await rejectsWith(sbx.patchEgressRules([{ action: "permit", target: "ok.test" }]), 400);
		assert.match(err.message, /rules\[0\]\.action/);
		err = await rejectsWith(sbx.patchEgressRules([]), 400);
		assert.match(err.message, /empty/);
		assert.deepEqual(await sbx.getEgressPolicy(), before);
	});

	it("deletes rules by target, idempotently", { timeout: STEP_MS }, async () => {
		assert.equal(await sbx.deleteEgressRules(["ALLOWED.test", "nothere.test"]), undefined);
		const expected = {
			defaultAction: "deny",
			egress: [
				{ action: "allow", target: "*.allowed.test" },
				{ action: "allow", target: "198.51.100.7" },
				{ action: "allow", target: "203.0.113.0/24" },
			],
		};
		assert.deepEqual(await sbx.getEgressPolicy(), expected);
		await sbx.deleteEgressRules(["allowed.test"]);
		assert.deepEqual(await sbx.getEgressPolicy(), expected);
		const err = await rejectsWith(sbx.deleteEgressRules(["ok.test", "a..test"]), 400, "INVALID_ARGUMENT");
		assert.match(err.message, /targets\[1\]/);
		await sbx.deleteEgressRules(["*.allowed.test", "198.51.100.7", "203.0.113.0/24"]);
		assert.deepEqual(await sbx.getEgressPolicy(), { defaultAction: "deny", egress: [] });
		await sbx.kill();
		h.created.delete(sbx.id);
	});

	it("shows a sandbox without a network as deny-all, and refuses to open it", { timeout: STEP_MS }, async () => {
		const none = await createSandbox({ extensions: { "cell.network": "none" } });
		assert.deepEqual(await none.getEgressPolicy(), { defaultAction: "deny", egress: [] });
		const err = await rejectsWith(
			none.patchEgressRules([{ action: "allow", target: "allowed.test" }]),
			409,
			"SANDBOX_NO_NETWORK",
		);
		assert.match(err.message, /no network/);
		await none.deleteEgressRules(["allowed.test"]);
		await none.kill();
		h.created.delete(none.id);
	});

	stopsCleanly();
});
