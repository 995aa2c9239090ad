#!/usr/bin/python3
# tools/bench-jupyter.py — leg 11 of tools/bench, its local baseline: a Python kernel on the
# host through Debian's jupyter_client and ipykernel (no sandbox, no HTTP), the same code the
# code interpreter runs for every cell, timed from execute_request sent to execute_result
# and the kernel's idle status both in hand.
#
#   /usr/bin/python3 tools/bench-jupyter.py N WARMUP [CODE]
#
# Prints one JSON object: {"ms": [...]} (N samples), after WARMUP untimed runs. The kernel
# and its connection file live in a temp dir removed on exit. A failure prints its message
# on stderr and exits 1.
import json
import os
import shutil
import sys
import tempfile
import time

from jupyter_client.manager import KernelManager


def run(kc, code, timeout=30.0):
    """One execute: its time in ms, from the request sent to result and idle received."""
    t0 = time.perf_counter()
    msg_id = kc.execute(code, store_history=False)
    got_result = idle = False
    while not (got_result and idle):
        msg = kc.get_iopub_msg(timeout=timeout)
        if msg["parent_header"].get("msg_id") != msg_id:
            continue
        kind = msg["msg_type"]
        if kind == "execute_result":
            got_result = True
        elif kind == "error":
            raise RuntimeError("the kernel answered an error: %s" % msg["content"].get("evalue"))
        elif kind == "status" and msg["content"]["execution_state"] == "idle":
            idle = True
            if not got_result:
                raise RuntimeError("the kernel went idle without a result for %r" % code)
    ms = (time.perf_counter() - t0) * 1000.0
    reply = kc.get_shell_msg(timeout=timeout)
    if reply["content"].get("status") != "ok":
        raise RuntimeError("execute_reply: %s" % reply["content"].get("status"))
    return ms


def main():
    if len(sys.argv) < 3 or not sys.argv[1].isdigit() or not sys.argv[2].isdigit():
        sys.stderr.write("usage: bench-jupyter.py N WARMUP [CODE]\n")
        return 2
    n, warmup = int(sys.argv[1]), int(sys.argv[2])
    code = sys.argv[3] if len(sys.argv) > 3 else "1+1"
    tmp = tempfile.mkdtemp(prefix="cell-bench-jupyter.")
    km = kc = None
    try:
        # the kernel's runtime files (connection file, history) in our own dir, never ~
        os.environ["JUPYTER_RUNTIME_DIR"] = os.path.join(tmp, "runtime")
        os.environ["IPYTHONDIR"] = os.path.join(tmp, "ipython")
        os.environ["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"  # ipykernel's debugger, quiet
        km = KernelManager(kernel_name="python3")
        km.start_kernel(cwd=tmp)
        kc = km.client()
        kc.start_channels()
        kc.wait_for_ready(timeout=60)
        for _ in range(warmup):
            run(kc, code)
        out = [run(kc, code) for _ in range(n)]
        print(json.dumps({"ms": out}))
        return 0
    except Exception as e:  # noqa: BLE001 — reported to the caller, which names the leg
        sys.stderr.write("%s: %s\n" % (type(e).__name__, e))
        return 1
    finally:
        if kc is not None:
            kc.stop_channels()
        if km is not None and km.has_kernel:
            km.shutdown_kernel(now=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
