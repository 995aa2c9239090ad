// The code-interpreter image (rootfs/build-image code-interpreter: default plus Jupyter's
// Python kernel, the data packages and the project's code-interpreter service) for the SDK
// suites that run code. `make check` builds it once per run beside the integration suites
// and names its dir in CELL_TEST_INTERPRETER_IMAGES; a file run alone builds it into the
// test cache (build/tests/images-cache) when it is not current there (minutes: apt from
// Debian's archive), as the E2B suites do with "default".
import fs from "node:fs";
import path from "node:path";
import { spawnSync } from "node:child_process";

import { REPO } from "./celld.mjs";

const BUILD_IMAGE = path.join(REPO, "rootfs", "build-image");

function current(dir) {
	return spawnSync(BUILD_IMAGE, ["code-interpreter", dir, "--check"], { stdio: "ignore" }).status === 0;
}

// The images dir holding a current "code-interpreter" image.
export function interpreterImages() {
	const dir = path.resolve(
		process.env.CELL_TEST_INTERPRETER_IMAGES ||
			process.env.CELL_TEST_DEFAULT_IMAGES ||
			path.join(REPO, "build", "tests", "images-cache"),
	);
	if (!current(dir)) {
		fs.mkdirSync(dir, { recursive: true });
		const r = spawnSync(BUILD_IMAGE, ["code-interpreter", dir, "--if-changed"], { stdio: "inherit" });
		if (r.status !== 0) throw new Error(`build-image code-interpreter ${dir} failed (${r.status ?? r.signal})`);
	}
	if (!current(dir)) throw new Error(`no current code-interpreter image in ${dir}`);
	return dir;
}
