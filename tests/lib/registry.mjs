// A registry lab for the client suites (tests/sdk, tests/e2b), as the integration suites'
// tests/integration/registry_lab.c is for theirs: Debian's docker-registry serving plain
// HTTP on 127.0.0.1:<free port> (never any other address), its storage, config and log in a
// lab dir of its own (mkdtemp, removed in the end), and images the test builds from the
// host's static busybox with umoci and pushes with skopeo.
//
// skopeo and umoci never read or write the host's containers state: HOME, the XDG dirs,
// TMPDIR, _CONTAINERS_ROOTLESS_UID (the blob-info cache under the lab's XDG_DATA_HOME, not
// /var/lib), CONTAINERS_REGISTRIES_CONF, REGISTRY_AUTH_FILE, CONTAINERS_CONF, the signature
// policy (--policy) and registries.d (--registries.d) are all the lab's.
//
// An image (push), bottom up:
//   1  the root filesystem: busybox and its applets (no bash),
//      /etc/passwd with root and `sandbox` (uid 1000, home /home/sandbox, owned by it, with
//      workspace/ and entrypoint.sh)
//   2  LAB.ADDED (LAB.ADDED_TEXT) and LAB.APP_FILE: the top layer
// and its config: Env, WorkingDir, User, Entrypoint, Cmd as the spec says.
//
// Use inside a describe, before useCelld:
//   const lab = useRegistry({ images: [{ name: "lab/app", tag: "1", spec: {...} }] });
//   useCelld({ celldArgs: () => ["--registries-conf", lab.registriesConf] });

import { after, before } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

import { freePort, sleep } from "./celld.mjs";

export const LAB = {
	ADDED: "/etc/cell-lab/added",
	ADDED_TEXT: "added by the second layer\n",
	APP_FILE: "/opt/app/hello.txt",
	APP_TEXT: "hello from the top layer\n",
	SANDBOX_UID: 1000,
	HOME: "/home/sandbox",
	WORKSPACE: "/home/sandbox/workspace",
	ENTRYPOINT: "/home/sandbox/entrypoint.sh",
	// what the entrypoint writes: "<user> <uid> <cwd> <$LAB_GREETING>"
	MARKER: "/home/sandbox/entrypoint.ran",
};

// The application image both client suites run: two layers, the config's user `sandbox`, its
// workspace as the working dir, an Env of its own and entrypoint.sh as its entrypoint.
export const APP = {
	name: "lab/app",
	tag: "1",
	spec: {
		env: ["LAB_GREETING=hello-from-the-lab", "PATH=/usr/local/bin:/usr/bin:/bin"],
		workdir: LAB.WORKSPACE,
		user: "sandbox",
		entrypoint: [LAB.ENTRYPOINT],
	},
};

// The image's entrypoint: leaves a marker of who ran it and where, then runs its arguments,
// or stays, as a service's would.
const ENTRYPOINT_SH = `#!/bin/sh
echo "$(id -un) $(id -u) $(pwd) \${LAB_GREETING:-}" > ${LAB.MARKER}
[ $# -gt 0 ] && exec "$@"
while :; do sleep 3600; done
`;

// GOARCH of this host: the config's architecture, so a pull takes it.
const GOARCH = { x64: "amd64", arm64: "arm64", arm: "arm", ppc64: "ppc64le", s390x: "s390x", riscv64: "riscv64" }[process.arch];

const PREFIX = path.join(os.tmpdir(), "cell-rlab-");

export class RegistryLab {
	dir = null; // the lab dir (mkdtemp under PREFIX)
	port = 0;
	host = null; // 127.0.0.1:PORT
	url = null; // http://127.0.0.1:PORT
	registriesConf = null; // celld's: docker.io blocked, this registry insecure and searched
	logPath = null;
	digests = {}; // "name:tag" -> the pushed manifest's digest
	#proc = null;
	#exited = null;
	#env = null;
	#builds = 0;

	async start() {
		assert.ok(!this.dir, "the lab runs already");
		this.dir = fs.mkdtempSync(PREFIX);
		fs.chmodSync(this.dir, 0o700);
		this.port = await freePort();
		this.host = `127.0.0.1:${this.port}`;
		this.url = `http://${this.host}`;
		this.logPath = this.#p("registry.log");
		for (const d of ["home", "home/.config", "home/.local", "home/.local/share", "home/.cache", "run", "tmp", "registries.d", "storage"])
			fs.mkdirSync(this.#p(d), { mode: 0o700 });
		this.#env = {
			PATH: "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			HOME: this.#p("home"),
			XDG_CONFIG_HOME: this.#p("home/.config"),
			XDG_DATA_HOME: this.#p("home/.local/share"),
			XDG_CACHE_HOME: this.#p("home/.cache"),
			XDG_RUNTIME_DIR: this.#p("run"),
			TMPDIR: this.#p("tmp"),
			// a uid other than 0: the blob-info cache goes under XDG_DATA_HOME, not /var/lib
			_CONTAINERS_ROOTLESS_UID: String(LAB.SANDBOX_UID),
			CONTAINERS_REGISTRIES_CONF: this.#p("registries.conf"),
			REGISTRY_AUTH_FILE: this.#p("auth.json"),
			CONTAINERS_CONF: this.#p("containers.conf"),
		};
		fs.writeFileSync(this.#p("registries.conf"), `[[registry]]\nlocation = "${this.host}"\ninsecure = true\n`);
		fs.writeFileSync(this.#p("auth.json"), '{"auths":{}}\n', { mode: 0o600 });
		fs.writeFileSync(this.#p("containers.conf"), "");
		fs.writeFileSync(this.#p("policy.json"), '{"default":[{"type":"insecureAcceptAnything"}]}\n');
		this.registriesConf = this.#p("celld-registries.conf");
		fs.writeFileSync(
			this.registriesConf,
			`unqualified-search-registries = ["${this.host}"]\n` +
				'[[registry]]\nprefix = "docker.io"\nlocation = "docker.io"\nblocked = true\n' +
				`[[registry]]\nlocation = "${this.host}"\ninsecure = true\n`,
		);
		fs.writeFileSync(
			this.#p("config.yml"),
			"version: 0.1\n" +
				"log:\n  level: info\n  accesslog:\n    disabled: false\n" +
				`storage:\n  filesystem:\n    rootdirectory: ${this.#p("storage")}\n` +
				"  delete:\n    enabled: true\n" +
				"  maintenance:\n    uploadpurging:\n      enabled: false\n" +
				`http:\n  addr: ${this.host}\n  secret: cell-lab-secret\n`,
			{ mode: 0o600 },
		);
		const log = fs.openSync(this.logPath, "a");
		try {
			this.#proc = spawn("/usr/bin/docker-registry", ["serve", this.#p("config.yml")], {
				// Not the tools' environment: the registry reads REGISTRY_* as its config
				// (REGISTRY_AUTH_FILE would be its auth section).
				env: { PATH: this.#env.PATH, HOME: this.#env.HOME, TMPDIR: this.#env.TMPDIR },
				stdio: ["ignore", log, log],
			});
		} finally {
			fs.closeSync(log);
		}
		this.#exited = new Promise((resolve) => this.#proc.on("exit", () => resolve()));
		const deadline = Date.now() + 20_000;
		for (;;) {
			assert.ok(this.#proc.exitCode === null && this.#proc.signalCode === null, `docker-registry exited:\n${this.logTail()}`);
			try {
				const res = await fetch(`${this.url}/v2/`, { signal: AbortSignal.timeout(2000) });
				await res.arrayBuffer();
				return;
			} catch {
				/* not yet */
			}
			assert.ok(Date.now() < deadline, `docker-registry never answered on ${this.url}:\n${this.logTail()}`);
			await sleep(100);
		}
	}

	// Kill the registry (this lab's process only) and remove the lab dir.
	async stop() {
		const proc = this.#proc;
		this.#proc = null;
		if (proc && proc.exitCode === null && proc.signalCode === null) {
			proc.kill("SIGTERM");
			const r = await Promise.race([this.#exited, sleep(3000).then(() => "timeout")]);
			if (r === "timeout") {
				proc.kill("SIGKILL");
				await this.#exited;
			}
		}
		const dir = this.dir;
		this.dir = null;
		if (!dir || process.env.CELL_SDK_KEEP === "1") {
			if (dir) console.error(`kept ${dir}`);
			return;
		}
		// Only the dir mkdtemp made here: PREFIX and six characters, nothing else.
		assert.ok(
			dir.startsWith(PREFIX) && dir.length === PREFIX.length + 6 && !dir.slice(PREFIX.length).includes("/"),
			`not removing '${dir}': not a lab dir`,
		);
		fs.rmSync(dir, { recursive: true, force: true });
	}

	// The registry's log: every request it answered (its access log) and more.
	log() {
		try {
			return fs.readFileSync(this.logPath, "utf8");
		} catch {
			return "";
		}
	}

	logTail(n = 30) {
		return this.log().split("\n").slice(-n).join("\n");
	}

	// The access log's requests whose line holds needle (a path or a part of one); of
	// method only when given ("GET": what a pull asks, never a push's PUT).
	requests(needle, method = "(GET|HEAD|PUT|POST|PATCH|DELETE)") {
		const line = new RegExp(`"${method} /`);
		return this.log()
			.split("\n")
			.filter((l) => line.test(l) && l.includes(needle));
	}

	// skopeo with the lab's environment, policy and registries.d.
	skopeo(args) {
		return this.#run("/usr/bin/skopeo", ["--policy", this.#p("policy.json"), "--registries.d", this.#p("registries.d"), ...args], 120_000);
	}

	// Build an image and push it as name:tag; its manifest's digest.
	//   spec.env: ["K=V", ...]; spec.workdir, spec.user: strings; spec.entrypoint, spec.cmd:
	//   argv arrays (unset when absent)
	push(name, tag, spec = {}) {
		const layout = this.#build(spec);
		const digestFile = path.join(path.dirname(layout), "digest");
		this.skopeo([
			"copy", "--quiet", "--dest-tls-verify=false", "--digestfile", digestFile, "--format", "oci",
			`oci:${layout}:img`, `docker://${this.host}/${name}:${tag}`,
		]);
		const digest = fs.readFileSync(digestFile, "utf8").trim();
		assert.match(digest, /^sha256:[0-9a-f]{64}$/, "skopeo's digest");
		this.digests[`${name}:${tag}`] = digest;
		return digest;
	}

	#p(rel) {
		return path.join(this.dir, rel);
	}

	#run(cmd, args, timeout = 60_000) {
		const r = spawnSync(cmd, args, { encoding: "utf8", env: this.#env, timeout });
		if (r.error) throw new Error(`${cmd}: ${r.error.message}`);
		if (r.status !== 0) throw new Error(`${cmd} ${args.join(" ")} exited ${r.status}: ${r.stdout}${r.stderr}\nregistry:\n${this.logTail()}`);
		return r.stdout;
	}

	// An OCI layout <lab>/build-N/layout holding the image as its tag "img".
	#build(spec) {
		const n = ++this.#builds;
		const work = this.#p(`build-${n}`);
		fs.mkdirSync(work, { mode: 0o700 });
		const layout = path.join(work, "layout");
		const bundle = path.join(work, "bundle");
		const image = `${layout}:img`;
		const umoci = (...args) => this.#run("/usr/bin/umoci", args, 120_000);
		umoci("init", "--layout", layout);
		umoci("new", "--image", image);
		umoci("unpack", "--image", image, bundle);
		const root = path.join(bundle, "rootfs");
		fillRootfs(root, `build ${n} of ${path.basename(this.dir)}\n`);
		umoci("repack", "--refresh-bundle", "--image", image, bundle); // layer 1
		fs.mkdirSync(path.join(root, path.dirname(LAB.APP_FILE)), { recursive: true, mode: 0o755 });
		fs.writeFileSync(path.join(root, LAB.ADDED), LAB.ADDED_TEXT, { mode: 0o644 });
		fs.writeFileSync(path.join(root, LAB.APP_FILE), LAB.APP_TEXT, { mode: 0o644 });
		umoci("repack", "--refresh-bundle", "--image", image, bundle); // layer 2
		const cfg = ["config", "--image", image, "--os", "linux", "--architecture", GOARCH];
		for (const e of spec.env || []) cfg.push(`--config.env=${e}`);
		if (spec.workdir) cfg.push(`--config.workingdir=${spec.workdir}`);
		if (spec.user) cfg.push(`--config.user=${spec.user}`);
		for (const a of spec.entrypoint || []) cfg.push(`--config.entrypoint=${a}`);
		for (const a of spec.cmd || []) cfg.push(`--config.cmd=${a}`);
		umoci(...cfg);
		return layout;
	}
}

function hostBusybox() {
	const bb = ["/bin/busybox", "/usr/bin/busybox"].find((p) => fs.existsSync(p));
	assert.ok(bb, "no busybox on the host (busybox-static)");
	return bb;
}

// Layer 1 into umoci's unpacked rootfs.
function fillRootfs(root, stamp) {
	const dirs = [
		["bin", 0o755], ["dev", 0o755], ["etc", 0o755], ["etc/cell-lab", 0o755], ["home", 0o755],
		["opt", 0o755], ["proc", 0o755], ["root", 0o700], ["sys", 0o755], ["tmp", 0o1777],
		["usr", 0o755], ["usr/bin", 0o755], ["home/sandbox", 0o755], ["home/sandbox/workspace", 0o755],
	];
	for (const [d, mode] of dirs) {
		fs.mkdirSync(path.join(root, d), { recursive: true });
		fs.chmodSync(path.join(root, d), mode);
	}
	const bb = hostBusybox();
	fs.copyFileSync(bb, path.join(root, "bin", "busybox"));
	fs.chmodSync(path.join(root, "bin", "busybox"), 0o755);
	const list = spawnSync(bb, ["--list"], { encoding: "utf8" });
	assert.equal(list.status, 0, "busybox --list");
	for (const applet of list.stdout.split("\n").filter(Boolean)) {
		if (applet === "busybox" || applet.includes("/")) continue;
		const p = path.join(root, "bin", applet);
		if (!fs.existsSync(p)) fs.symlinkSync("busybox", p);
	}
	const files = [
		["etc/passwd", "root:x:0:0:root:/root:/bin/sh\nsandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh\n", 0o644],
		["etc/group", "root:x:0:\nsandbox:x:1000:\n", 0o644],
		["etc/cell-lab/build", stamp, 0o644],
		[LAB.ENTRYPOINT.slice(1), ENTRYPOINT_SH, 0o755],
		// No /bin/bash: E2B's SDK runs every command as /bin/bash -l -c, and cell-init
		// runs that with the image's sh, as on alpine or busybox images.
	];
	for (const [f, text, mode] of files) {
		fs.writeFileSync(path.join(root, f), text);
		fs.chmodSync(path.join(root, f), mode);
	}
	for (const p of [LAB.HOME, LAB.WORKSPACE, LAB.ENTRYPOINT])
		fs.chownSync(path.join(root, p.slice(1)), LAB.SANDBOX_UID, LAB.SANDBOX_UID);
}

// Whether this host has what a lab needs; else why not (a reason for a skip).
export function labMissing() {
	for (const bin of ["/usr/bin/docker-registry", "/usr/bin/umoci", "/usr/bin/skopeo"])
		if (!fs.existsSync(bin)) return `${bin} missing (tools/install-deps)`;
	if (!["/bin/busybox", "/usr/bin/busybox"].some((p) => fs.existsSync(p))) return "no busybox on the host (busybox-static)";
	if (!GOARCH) return `no GOARCH for ${process.arch}`;
	return false;
}

// Inside a describe, before useCelld: a lab started (and opts.images pushed) before the
// file's cases, stopped and removed after them, even when one fails.
export function useRegistry(opts = {}) {
	const lab = new RegistryLab();
	before(async () => {
		await lab.start();
		for (const img of opts.images || []) lab.push(img.name, img.tag, img.spec);
	});
	after(async () => {
		await lab.stop();
	});
	return lab;
}
