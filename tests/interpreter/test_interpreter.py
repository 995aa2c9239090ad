#!/usr/bin/python3
"""The code-interpreter service (src/interpreter/code_interpreter.py) over HTTP.

Starts the service on the host, on a free loopback port with a temporary state dir,
against Debian's python3 with python3-jupyter-client and python3-ipykernel (and
matplotlib, numpy, pandas for the results), and checks its protocol as E2B's SDK reads
it. Standard library only; nothing leaves 127.0.0.1.

  CELL_INTERP_PYTHON  the python that runs the service and its kernels (/usr/bin/python3)
  CELL_TEST_SKIPS     the run's list of skips (make check), appended to when the host lacks
                      the packages; CELL_TEST_STRICT=1 (CI) fails instead of skipping
"""

import base64
import http.client
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest

SRC = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "src", "interpreter"))
SERVICE = os.path.join(SRC, "code_interpreter.py")
PYTHON = os.environ.get("CELL_INTERP_PYTHON", "/usr/bin/python3")
OUTPUT_LIMIT = 4 * 1024 * 1024
NEEDED = ["jupyter_client", "ipykernel", "matplotlib", "numpy", "pandas"]


def missing_modules():
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m) is None))"
    try:
        out = subprocess.run([PYTHON, "-c", probe] + NEEDED, capture_output=True, text=True, timeout=60)
    except OSError as e:
        return f"{PYTHON}: {e}"
    return out.stdout.strip()


def record_skip(reason):
    strict = os.environ.get("CELL_TEST_STRICT") == "1"
    line = "\t".join(["interpreter", "test_interpreter.py", "other-strict" if strict else "other",
                      "", reason])
    print(f"interpreter/test_interpreter.py: SKIP: {reason}", file=sys.stderr)
    path = os.environ.get("CELL_TEST_SKIPS")
    if path:
        with open(path, "a") as f:
            f.write(line + "\n")
    return strict


class Service:
    """One running service: its process, port and state dir."""

    def __init__(self, state_dir, log_path):
        self.state_dir = state_dir
        self.log_path = log_path
        self.proc = None
        self.port = None

    def start(self):
        ready = os.path.join(self.state_dir, "..", os.path.basename(self.state_dir) + ".ready")
        ready = os.path.abspath(ready)
        if os.path.exists(ready):
            os.unlink(ready)
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(
            [PYTHON, SERVICE, "--host", "127.0.0.1", "--port", "0", "--state-dir", self.state_dir,
             "--output-limit", str(OUTPUT_LIMIT), "--ready-file", ready],
            stdout=log, stderr=log, stdin=subprocess.DEVNULL, cwd=self.state_dir,
            start_new_session=True)
        log.close()
        deadline = time.time() + 60
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"service exited {self.proc.returncode}; see {self.log_path}")
            try:
                with open(ready) as f:
                    txt = f.read().strip()
                if txt:
                    self.port = int(txt)
                    return
            except FileNotFoundError:
                pass
            time.sleep(0.05)
        raise RuntimeError("service did not start listening")

    def stop(self):
        if self.proc is None:
            return
        try:
            os.kill(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            pass
        except ProcessLookupError:
            pass
        # Its session: the service and any kernel it left behind.
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None

    # ---- HTTP ----

    def request(self, method, path, body=None, raw=None, timeout=120):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
            headers = {"Content-Type": "application/json"} if data is not None else {}
            c.request(method, path, body=data, headers=headers)
            r = c.getresponse()
            return r.status, r.read(), r.getheader("Content-Type", "")
        finally:
            c.close()

    def json(self, method, path, body=None):
        status, data, _ = self.request(method, path, body)
        if status != 200:
            raise AssertionError(f"{method} {path}: {status} {data!r}")
        return json.loads(data)

    def execute(self, code, timeout=120, **kw):
        """The run's NDJSON lines, parsed, in order."""
        body = dict(kw, code=code)
        status, data, ctype = self.request("POST", "/execute", body, timeout=timeout)
        if status != 200:
            raise AssertionError(f"execute: {status} {data!r}")
        assert ctype.startswith("application/x-ndjson"), ctype
        return [json.loads(line) for line in data.decode().splitlines() if line]

    def open_run(self, code, **kw):
        """A run on a raw socket, left open: (socket, file to read lines from)."""
        s = socket.create_connection(("127.0.0.1", self.port), timeout=120)
        body = json.dumps(dict(kw, code=code)).encode()
        s.sendall(b"POST /execute HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        return s, s.makefile("rb")


def read_line(f):
    """The next NDJSON object of a chunked response read from a raw socket (one per chunk)."""
    while True:
        size = f.readline()
        if not size:
            return None
        if size.startswith(b"HTTP/") or b":" in size or size == b"\r\n":
            continue  # status line, headers, blank lines
        n = int(size.strip(), 16)
        if n == 0:
            return None
        chunk = f.read(n)
        f.read(2)
        return json.loads(chunk)


def read_text(path):
    with open(path, errors="replace") as f:
        return f.read()


def of(lines, kind):
    return [l for l in lines if l["type"] == kind]


def stdout(lines):
    return "".join(l["text"] for l in of(lines, "stdout"))


class InterpreterTest(unittest.TestCase):
    svc = None

    @classmethod
    def setUpClass(cls):
        gone = missing_modules()
        if gone:
            strict = record_skip(f"{PYTHON} lacks {gone} (tools/install-deps --ci installs them)")
            if strict:
                raise AssertionError(f"{PYTHON} lacks {gone}; CELL_TEST_STRICT=1 allows no such skip")
            raise unittest.SkipTest(f"{PYTHON} lacks {gone}")
        cls.tmp = tempfile.mkdtemp(prefix="cell-interp-")
        state = os.path.join(cls.tmp, "state")
        os.mkdir(state)
        cls.svc = Service(state, os.path.join(cls.tmp, "service.log"))
        cls.svc.start()

    @classmethod
    def tearDownClass(cls):
        if cls.svc:
            cls.svc.stop()
            if os.environ.get("CELL_INTERP_KEEP_LOG"):
                print(read_text(cls.svc.log_path), file=sys.stderr)
        if getattr(cls, "tmp", None):
            shutil.rmtree(cls.tmp, ignore_errors=True)

    def new_context(self, **kw):
        ctx = self.svc.json("POST", "/contexts", kw)
        self.addCleanup(self.svc.request, "DELETE", f"/contexts/{ctx['id']}")
        return ctx

    def assertEnds(self, lines):
        self.assertTrue(lines, "no lines")
        self.assertEqual(lines[-1]["type"], "end_of_execution", lines[-1])
        self.assertEqual([l for l in lines[:-1] if l["type"].endswith("end_of_execution")], [])

    # ---- results ----

    def test_health(self):
        self.assertEqual(self.svc.json("GET", "/health"), {"status": "ok"})

    def test_state_across_runs(self):
        ctx = self.new_context()
        self.assertEqual(ctx["language"], "python")
        lines = self.svc.execute("x = 41", context_id=ctx["id"])
        self.assertEnds(lines)
        self.assertEqual(of(lines, "result"), [])
        lines = self.svc.execute("x + 1", context_id=ctx["id"])
        self.assertEnds(lines)
        n = of(lines, "number_of_executions")
        self.assertEqual([l["execution_count"] for l in n], [2])
        res = of(lines, "result")
        self.assertEqual(len(res), 1)
        self.assertEqual(res[0]["text"], "42")
        self.assertIs(res[0]["is_main_result"], True)

    def test_default_context_and_language(self):
        c = http.client.HTTPConnection("127.0.0.1", self.svc.port, timeout=60)
        c.request("POST", "/execute", body=json.dumps({"code": "default_marker = 7"}))
        r = c.getresponse()
        r.read()
        c.close()
        default = r.getheader("X-Context-Id")
        self.assertIn(default, [x["id"] for x in self.svc.json("GET", "/contexts")])
        ctx = self.new_context()
        c = http.client.HTTPConnection("127.0.0.1", self.svc.port, timeout=60)
        c.request("POST", "/execute", body=json.dumps({"code": "1", "context_id": ctx["id"]}))
        r = c.getresponse()
        r.read()
        c.close()
        self.assertEqual(r.getheader("X-Context-Id"), ctx["id"])
        lines = self.svc.execute("default_marker", language="python")
        self.assertEqual(of(lines, "result")[0]["text"], "7")
        ctxs = self.svc.json("GET", "/contexts")
        self.assertTrue(any(c["language"] == "python" for c in ctxs))
        for c in ctxs:
            self.assertEqual(set(c), {"id", "language", "cwd"})

    def test_stdout_stderr_order(self):
        code = ("import sys, time\n"
                "print('one'); sys.stdout.flush(); time.sleep(0.3)\n"
                "print('two', file=sys.stderr); sys.stderr.flush(); time.sleep(0.3)\n"
                "print('three'); sys.stdout.flush()\n")
        lines = self.svc.execute(code)
        self.assertEnds(lines)
        logs = [(l["type"], l["text"]) for l in lines if l["type"] in ("stdout", "stderr")]
        self.assertEqual(logs, [("stdout", "one\n"), ("stderr", "two\n"), ("stdout", "three\n")])
        for l in lines:
            if l["type"] in ("stdout", "stderr"):
                self.assertIsInstance(l["timestamp"], str)

    def test_streamed_while_running(self):
        s, f = self.svc.open_run("import time\nprint('early', flush=True)\ntime.sleep(3)\nprint('late')")
        try:
            t0 = time.time()
            seen = []
            while True:
                obj = read_line(f)
                if obj is None:
                    break
                seen.append((obj, time.time() - t0))
                if obj["type"] == "end_of_execution":
                    break
            early = [t for o, t in seen if o["type"] == "stdout" and o["text"] == "early\n"]
            end = [t for o, t in seen if o["type"] == "end_of_execution"]
            self.assertTrue(early and end, seen)
            self.assertLess(early[0], end[0] - 1.0, "stdout came only with the end")
        finally:
            f.close()
            s.close()

    def test_matplotlib_charts(self):
        ctx = self.new_context()
        lines = self.svc.execute(
            "import matplotlib.pyplot as plt\n"
            "plt.plot([1, 2, 3], [4, 5, 6], label='up')\n"
            "plt.title('T'); plt.xlabel('x [s]'); plt.ylabel('y')\n"
            "plt.show()\n", context_id=ctx["id"])
        self.assertEnds(lines)
        self.assertEqual(of(lines, "error"), [])
        res = of(lines, "result")
        self.assertEqual(len(res), 1, res)
        png = base64.b64decode(res[0]["png"])
        self.assertEqual(png[:8], b"\x89PNG\r\n\x1a\n")
        chart = res[0]["chart"]
        self.assertEqual(chart["type"], "line")
        self.assertEqual(chart["title"], "T")
        self.assertEqual(chart["x_label"], "x [s]")
        self.assertEqual(chart["x_unit"], "s")
        self.assertEqual(chart["x_scale"], "linear")
        self.assertTrue(chart["x_ticks"] and chart["x_tick_labels"])
        self.assertEqual(chart["elements"][0]["label"], "up")
        self.assertEqual(chart["elements"][0]["points"], [[1.0, 4.0], [2.0, 5.0], [3.0, 6.0]])

        lines = self.svc.execute(
            "fig, ax = plt.subplots()\nax.bar(['a', 'b'], [3, 5], label='g')\nfig",
            context_id=ctx["id"])
        res = of(lines, "result")
        self.assertTrue(res, lines)
        chart = res[0]["chart"]
        self.assertEqual(chart["type"], "bar")
        self.assertEqual([(e["label"], e["value"]) for e in chart["elements"]],
                         [("a", 3.0), ("b", 5.0)])
        self.assertTrue(res[0]["png"])

        lines = self.svc.execute(
            "plt.figure(); plt.scatter([1, 2], [3, 4]); plt.show()", context_id=ctx["id"])
        chart = of(lines, "result")[0]["chart"]
        self.assertEqual(chart["type"], "scatter")
        self.assertEqual(chart["elements"][0]["points"], [[1.0, 3.0], [2.0, 4.0]])

        lines = self.svc.execute(
            "plt.figure(); plt.pie([1, 3], labels=['p', 'q']); plt.show()", context_id=ctx["id"])
        chart = of(lines, "result")[0]["chart"]
        self.assertEqual(chart["type"], "pie")
        self.assertEqual([e["label"] for e in chart["elements"]], ["p", "q"])
        self.assertEqual([round(e["angle"]) for e in chart["elements"]], [90, 270])

        lines = self.svc.execute(
            "fig, (a, b) = plt.subplots(1, 2); a.plot([1, 2]); b.bar(['u'], [1]);"
            " fig.suptitle('S'); plt.show()", context_id=ctx["id"])
        chart = of(lines, "result")[0]["chart"]
        self.assertEqual(chart["type"], "superchart")
        self.assertEqual(chart["title"], "S")
        self.assertEqual([c["type"] for c in chart["elements"]], ["line", "bar"])

    def test_dataframe(self):
        lines = self.svc.execute(
            "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': ['x', None]})")
        self.assertEnds(lines)
        res = of(lines, "result")
        self.assertEqual(len(res), 1)
        self.assertIn("<table", res[0]["html"])
        self.assertIn("a", res[0]["text"])
        self.assertEqual(res[0]["data"], {"a": [1, 2], "b": ["x", None]})
        self.assertIs(res[0]["is_main_result"], True)

    def test_display_several(self):
        lines = self.svc.execute(
            "from IPython.display import display, HTML, Markdown\n"
            "display(1)\ndisplay(HTML('<b>h</b>'))\ndisplay(Markdown('# m'))\n"
            "{'k': 1}")
        self.assertEnds(lines)
        res = of(lines, "result")
        self.assertEqual(len(res), 4, res)
        self.assertEqual([r["is_main_result"] for r in res], [False, False, False, True])
        self.assertEqual(res[0]["text"], "1")
        self.assertEqual(res[1]["html"], "<b>h</b>")
        self.assertEqual(res[2]["markdown"], "# m")
        self.assertEqual(res[3]["text"], "{'k': 1}")

    def test_many_displays_none_lost(self):
        lines = self.svc.execute(
            "from IPython.display import display\nfor i in range(5000):\n    display(i)")
        self.assertEnds(lines)
        self.assertEqual([r["text"] for r in of(lines, "result")], [str(i) for i in range(5000)])

    def test_error_with_traceback(self):
        lines = self.svc.execute("def f():\n    return 1 / 0\nf()")
        self.assertEnds(lines)
        err = of(lines, "error")
        self.assertEqual(len(err), 1)
        self.assertEqual(err[0]["name"], "ZeroDivisionError")
        self.assertEqual(err[0]["value"], "division by zero")
        tb = re.sub(r"\x1b\[[0-9;]*m", "", err[0]["traceback"])
        self.assertIn("return 1 / 0", tb)
        self.assertIn("ZeroDivisionError", tb)
        self.assertIn("f()", tb)
        # still usable
        self.assertEqual(of(self.svc.execute("2 * 3"), "result")[0]["text"], "6")

    # ---- interrupts, queues, concurrency ----

    def test_interrupt_by_disconnect(self):
        ctx = self.new_context()
        self.svc.execute("kept = 'yes'", context_id=ctx["id"])
        s, f = self.svc.open_run("import time\nprint('started', flush=True)\ntime.sleep(600)",
                                 context_id=ctx["id"])
        while True:
            obj = read_line(f)
            self.assertIsNotNone(obj)
            if obj["type"] == "stdout":
                break
        f.close()  # the file holds the socket open too
        s.close()
        # The next run waits for the interrupted one, which must end at once.
        lines = self.svc.execute("kept", context_id=ctx["id"], timeout=60)
        self.assertEnds(lines)
        # A string's text as E2B's server gives it: without its quotes; with text_repr (as
        # celld's OpenSandbox front asks) as Jupyter gives it.
        self.assertEqual(of(lines, "result")[0]["text"], "yes")
        lines = self.svc.execute("kept", context_id=ctx["id"], text_repr=True)
        self.assertEqual(of(lines, "result")[0]["text"], "'yes'")

    def test_interrupt_route(self):
        ctx = self.new_context()
        out = {}

        def run():
            out["lines"] = self.svc.execute("import time\nprint('go', flush=True)\ntime.sleep(600)",
                                            context_id=ctx["id"], timeout=60)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(2.0)  # let it start (ordering only; the assertion does not depend on it)
        status, body, _ = self.svc.request("POST", f"/contexts/{ctx['id']}/interrupt")
        self.assertEqual(status, 204, body)
        t.join(60)
        self.assertFalse(t.is_alive())
        lines = out["lines"]
        self.assertEnds(lines)
        self.assertEqual(of(lines, "error")[0]["name"], "KeyboardInterrupt")
        self.assertEqual(of(self.svc.execute("1 + 1", context_id=ctx["id"]), "result")[0]["text"], "2")
        status, _, _ = self.svc.request("POST", "/contexts/no-such/interrupt")
        self.assertEqual(status, 404)

    def _timed(self, ctx, tag, results):
        code = ("import time\nt0 = time.time()\ntime.sleep(1.5)\n"
                f"print({tag!r}, t0, time.time())")
        lines = self.svc.execute(code, context_id=ctx)
        _, a, b = stdout(lines).split()
        results[tag] = (float(a), float(b))

    def test_same_context_queued_in_order(self):
        ctx = self.new_context()["id"]
        results = {}
        t1 = threading.Thread(target=self._timed, args=(ctx, "first", results))
        t1.start()
        time.sleep(0.3)
        t2 = threading.Thread(target=self._timed, args=(ctx, "second", results))
        t2.start()
        t1.join(60)
        t2.join(60)
        self.assertGreaterEqual(results["second"][0], results["first"][1])

    def test_two_contexts_concurrent(self):
        a, b = self.new_context()["id"], self.new_context()["id"]
        results = {}
        ts = [threading.Thread(target=self._timed, args=(c, tag, results))
              for c, tag in ((a, "a"), (b, "b"))]
        for t in ts:
            t.start()
        for t in ts:
            t.join(60)
        # The two runs overlapped in time: each began before the other ended.
        self.assertLess(results["a"][0], results["b"][1])
        self.assertLess(results["b"][0], results["a"][1])
        # ...and their state is their own.
        self.svc.execute("iso = 'a'", context_id=a)
        lines = self.svc.execute("iso", context_id=b)
        self.assertEqual(of(lines, "error")[0]["name"], "NameError")

    def test_env_vars_for_one_run(self):
        ctx = self.new_context()["id"]
        self.svc.execute("import os; os.environ['CELL_KEEP'] = 'k'", context_id=ctx)
        lines = self.svc.execute(
            "import os; print(os.environ.get('CELL_T1'), os.environ.get('CELL_KEEP'))",
            context_id=ctx, env_vars={"CELL_T1": "v1", "CELL_KEEP": "over"})
        self.assertEqual(stdout(lines), "v1 over\n")
        lines = self.svc.execute(
            "print(os.environ.get('CELL_T1'), os.environ.get('CELL_KEEP'))", context_id=ctx)
        self.assertEqual(stdout(lines), "None k\n")

    def test_cwd(self):
        d = tempfile.mkdtemp(prefix="cwd-", dir=self.tmp)
        ctx = self.new_context(cwd=d)
        self.assertEqual(ctx["cwd"], d)
        self.assertEqual(stdout(self.svc.execute("import os; print(os.getcwd())",
                                                 context_id=ctx["id"])), d + "\n")

    # ---- bad input ----

    def test_bad_input(self):
        before = self.svc.json("GET", "/contexts")
        for lang in ("java", "typescript", "go"):
            status, body, _ = self.svc.request("POST", "/execute", {"code": "1", "language": lang})
            self.assertEqual(status, 400)
            self.assertIn(lang, body.decode())
            self.assertIn("python", body.decode())
            status, body, _ = self.svc.request("POST", "/contexts", {"language": lang})
            self.assertEqual(status, 400)
            self.assertIn(lang, body.decode())
        status, body, _ = self.svc.request("POST", "/execute", {"code": "1", "context_id": "nope"})
        self.assertEqual(status, 404)
        self.assertIn("nope", body.decode())
        status, body, _ = self.svc.request(
            "POST", "/execute", {"code": "1", "context_id": before[0]["id"], "language": "python"})
        self.assertEqual(status, 400)
        status, body, _ = self.svc.request("POST", "/execute", raw=b"{not json")
        self.assertEqual(status, 400)
        self.assertIn("JSON", body.decode())
        status, body, _ = self.svc.request("POST", "/execute", raw=b"[1]")
        self.assertEqual(status, 400)
        status, body, _ = self.svc.request("POST", "/execute", {"codes": "1"})
        self.assertEqual(status, 400)
        status, body, _ = self.svc.request("POST", "/execute", {"code": "1", "env_vars": {"A": 1}})
        self.assertEqual(status, 400)
        status, body, _ = self.svc.request("POST", "/execute", {"code": "1", "env_vars": ["A"]})
        self.assertEqual(status, 400)
        big = json.dumps({"code": "x = '" + "a" * (10 * 1024 * 1024) + "'"}).encode()
        status, body, _ = self.svc.request("POST", "/execute", raw=big)
        self.assertEqual(status, 413)
        status, body, _ = self.svc.request("POST", "/contexts", {"cwd": "/no/such/dir"})
        self.assertEqual(status, 400)
        status, body, _ = self.svc.request("GET", "/nothing")
        self.assertEqual(status, 404)
        status, body, _ = self.svc.request("DELETE", "/contexts/nope")
        self.assertEqual(status, 404)
        status, body, _ = self.svc.request("POST", "/contexts/nope/restart")
        self.assertEqual(status, 404)
        # Nothing changed.
        self.assertEqual(self.svc.json("GET", "/contexts"), before)
        self.assertEqual(of(self.svc.execute("1 + 1"), "result")[0]["text"], "2")

    # ---- bounds and failures ----

    def test_output_bounded(self):
        ctx = self.new_context()["id"]
        self.svc.execute("alive = 'still'", context_id=ctx)
        lines = self.svc.execute(
            "import sys\nchunk = 'x' * 999999 + '\\n'\n"
            "for _ in range(100):\n    sys.stdout.write(chunk)\n"
            "print('done', file=sys.stderr)\n'its value'", context_id=ctx, timeout=300)
        self.assertEnds(lines)
        # Results have a budget of their own: the last line's value still comes.
        self.assertEqual([l["text"] for l in of(lines, "result")], ["its value"])
        out = stdout(lines)
        self.assertLessEqual(len(out), OUTPUT_LIMIT)
        self.assertGreater(len(out), OUTPUT_LIMIT // 2)
        notes = [l["text"] for l in of(lines, "stderr") if "rest is dropped" in l["text"]]
        self.assertEqual(len(notes), 1)
        # The code ran to its end and the kernel lives on with its state.
        lines = self.svc.execute("alive", context_id=ctx)
        self.assertEqual(of(lines, "result")[0]["text"], "still")
        # The limit is per run.
        self.assertEqual(stdout(self.svc.execute("print('small')", context_id=ctx)), "small\n")

    def test_kernel_death(self):
        ctx = self.new_context()["id"]
        self.svc.execute("gone = 1", context_id=ctx)
        lines = self.svc.execute("import os\nos._exit(3)", context_id=ctx, timeout=60)
        self.assertEqual(lines[-1]["type"], "unexpected_end_of_execution", lines)
        err = of(lines, "error")
        self.assertEqual(err[0]["name"], "KernelDied")
        self.assertIn("exit status 3", err[0]["value"])
        # A fresh kernel: it runs, and the old state is gone.
        lines = self.svc.execute("gone", context_id=ctx)
        self.assertEnds(lines)
        self.assertEqual(of(lines, "error")[0]["name"], "NameError")
        lines = self.svc.execute("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
                                 context_id=ctx, timeout=60)
        self.assertEqual(lines[-1]["type"], "unexpected_end_of_execution", lines)
        self.assertIn("SIGKILL", of(lines, "error")[0]["value"])
        self.assertEqual(of(self.svc.execute("3", context_id=ctx), "result")[0]["text"], "3")

    def test_restart_and_remove(self):
        ctx = self.svc.json("POST", "/contexts", {})
        self.svc.execute("r = 1", context_id=ctx["id"])
        status, body, _ = self.svc.request("POST", f"/contexts/{ctx['id']}/restart")
        self.assertEqual(status, 204, body)
        lines = self.svc.execute("r", context_id=ctx["id"])
        self.assertEqual(of(lines, "error")[0]["name"], "NameError")
        status, body, _ = self.svc.request("DELETE", f"/contexts/{ctx['id']}")
        self.assertEqual(status, 204, body)
        self.assertNotIn(ctx["id"], [c["id"] for c in self.svc.json("GET", "/contexts")])
        status, _, _ = self.svc.request("POST", "/execute", {"code": "1", "context_id": ctx["id"]})
        self.assertEqual(status, 404)

    def test_remove_default_context(self):
        self.svc.execute("in_default = 1")
        before = {c["id"] for c in self.svc.json("GET", "/contexts")}
        default = None
        for c in self.svc.json("GET", "/contexts"):
            lines = self.svc.execute("in_default", context_id=c["id"])
            if not of(lines, "error"):
                default = c["id"]
        self.assertIsNotNone(default)
        status, body, _ = self.svc.request("DELETE", f"/contexts/{default}")
        self.assertEqual(status, 204, body)
        # A run without a context gets a new default context, fresh.
        lines = self.svc.execute("in_default")
        self.assertEqual(of(lines, "error")[0]["name"], "NameError")
        after = {c["id"] for c in self.svc.json("GET", "/contexts")}
        self.assertEqual(len(after - before), 1)
        self.assertNotIn(default, after)


class PersistenceTest(unittest.TestCase):
    """Contexts outlive the service (a sandbox's cold start); their kernels do not."""

    def setUp(self):
        if missing_modules():
            self.skipTest("packages missing (see InterpreterTest)")
        self.tmp = tempfile.mkdtemp(prefix="cell-interp-")
        state = os.path.join(self.tmp, "state")
        os.mkdir(state)
        self.svc = Service(state, os.path.join(self.tmp, "service.log"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(self.svc.stop)

    def test_kernel_restarted_once(self):
        svc = self.svc
        svc.start()
        used = svc.json("POST", "/contexts", {"cwd": self.tmp})
        unused = svc.json("POST", "/contexts", {})
        svc.execute("v = 1", context_id=used["id"])
        svc.execute("w = 2")
        before = sorted(svc.json("GET", "/contexts"), key=lambda c: c["id"])
        svc.stop()
        # A cold start: the sandbox's PID 1 started anew (the host's did not: the service
        # recorded when it started, and this stands in for a new one).
        path = os.path.join(svc.state_dir, "contexts.json")
        with open(path) as f:
            saved = json.load(f)
        self.assertTrue(saved["sandboxStart"])
        saved["sandboxStart"] = "0"
        with open(path, "w") as f:
            json.dump(saved, f)
        svc.start()
        self.assertEqual(sorted(svc.json("GET", "/contexts"), key=lambda c: c["id"]), before)
        for target in ({"context_id": used["id"]}, {}):
            lines = svc.execute("print('ran'); v = 5", **target)
            self.assertEqual(lines[-1]["type"], "end_of_execution")
            err = of(lines, "error")
            self.assertEqual(err[0]["name"], "KernelRestarted", lines)
            self.assertIn("the sandbox was stopped; state is gone", err[0]["value"])
            self.assertEqual(of(lines, "stdout"), [])  # the code did not run
            lines = svc.execute("print('ran')", **target)
            self.assertEqual(stdout(lines), "ran\n")
            self.assertEqual(of(lines, "error"), [])
        lines = svc.execute("import os; print(os.getcwd())", context_id=used["id"])
        self.assertEqual(stdout(lines), self.tmp + "\n")
        # A context no code ran in lost nothing: it just runs.
        self.assertEqual(stdout(svc.execute("print('fresh')", context_id=unused["id"])), "fresh\n")


class EarlyInterruptTest(unittest.TestCase):
    """An interrupt asked for right after a run began, while its context's kernel is still
    starting (a fresh service's default context), is kept and sent once the kernel takes
    the code: it is not lost on a kernel that was not running anything yet."""

    def setUp(self):
        if missing_modules():
            self.skipTest("packages missing (see InterpreterTest)")
        self.tmp = tempfile.mkdtemp(prefix="cell-interp-")
        state = os.path.join(self.tmp, "state")
        os.mkdir(state)
        self.svc = Service(state, os.path.join(self.tmp, "service.log"))
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.addCleanup(self.svc.stop)

    def test_interrupt_before_the_code_starts(self):
        svc = self.svc
        svc.start()
        s, f = svc.open_run("import time\nfor i in range(600):\n    print(i, flush=True)\n"
                            "    time.sleep(0.1)")
        ctx = None
        while ctx is None:  # the head comes at once, before the kernel starts
            line = f.readline()
            self.assertTrue(line, "the head")
            if line.lower().startswith(b"x-context-id:"):
                ctx = line.split(b":", 1)[1].strip().decode()
        status, body, _ = svc.request("POST", f"/contexts/{ctx}/interrupt")
        self.assertEqual(status, 204, body)
        lines = []
        while True:
            obj = read_line(f)
            if obj is None:
                break
            lines.append(obj)
        f.close()
        s.close()
        self.assertEqual(lines[-1]["type"], "end_of_execution", lines)
        self.assertEqual(of(lines, "error")[0]["name"], "KeyboardInterrupt", lines)
        self.assertLess(len(of(lines, "stdout")), 600, "the loop did not run to its end")


class LauncherTest(unittest.TestCase):
    """code-interpreter.sh started as root runs the service and its kernels unprivileged."""

    def setUp(self):
        if missing_modules():
            self.skipTest("packages missing (see InterpreterTest)")
        if os.geteuid() != 0:
            if record_skip("code-interpreter.sh drops from root: needs root"):
                self.fail("needs root; CELL_TEST_STRICT=1 allows no such skip")
            self.skipTest("needs root")
        self.tmp = tempfile.mkdtemp(prefix="cell-interp-")
        os.chmod(self.tmp, 0o711)  # the account passes through to its state dir
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def test_drops_to_account(self):
        state = os.path.join(self.tmp, "state")
        ready = os.path.join(state, "ready")
        env = dict(os.environ, CODE_INTERPRETER_USER="nobody", CODE_INTERPRETER_STATE_DIR=state,
                   CODE_INTERPRETER_PYTHON=PYTHON)
        log = open(os.path.join(self.tmp, "service.log"), "wb")
        proc = subprocess.Popen(
            [os.path.join(SRC, "code-interpreter.sh"), "--port", "0", "--ready-file", ready,
             "--an-argument-it-does-not-know"],
            env=env, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        svc = Service(state, os.path.join(self.tmp, "service.log"))
        svc.proc = proc
        self.addCleanup(svc.stop)
        svc.port = self.wait_ready(proc, ready, svc.log_path)
        st = os.stat(state)
        self.assertEqual((st.st_uid, st.st_mode & 0o777), (65534, 0o700))
        service = self.service_pid(proc.pid)
        for pid in (proc.pid, service):
            with open(f"/proc/{pid}/status") as f:
                status = dict(l.split(":", 1) for l in f.read().splitlines() if ":" in l)
            self.assertEqual(status["Uid"].split(), ["65534"] * 4)
            self.assertEqual(int(status["CapEff"], 16), 0)
        lines = svc.execute("import os; print(os.getuid(), os.geteuid(), os.getgid())\nkept = 1")
        self.assertEqual(stdout(lines), "65534 65534 65534\n")

        # The service dies: the launcher starts it again, and the context says why its
        # state is gone.
        os.unlink(ready)
        os.kill(service, signal.SIGKILL)
        svc.port = self.wait_ready(proc, ready, svc.log_path)
        self.assertNotEqual(self.service_pid(proc.pid), service)
        lines = svc.execute("kept")
        err = of(lines, "error")
        self.assertEqual(err[0]["name"], "KernelRestarted")
        self.assertIn("service started again in this sandbox", err[0]["value"])
        self.assertEqual(of(svc.execute("1 + 1"), "result")[0]["text"], "2")

        # SIGTERM stops the service and the launcher, cleanly.
        service = self.service_pid(proc.pid)
        os.kill(proc.pid, signal.SIGTERM)
        self.assertEqual(proc.wait(timeout=30), 0)
        self.assertFalse(os.path.exists(f"/proc/{service}"))

    @staticmethod
    def service_pid(launcher):
        deadline = time.time() + 30
        while time.time() < deadline:
            with open(f"/proc/{launcher}/task/{launcher}/children") as f:
                for pid in f.read().split():
                    with open(f"/proc/{pid}/cmdline", "rb") as c:
                        if b"code_interpreter.py" in c.read():
                            return int(pid)
            time.sleep(0.05)
        raise AssertionError("no service under the launcher")

    def wait_ready(self, proc, ready, log_path):
        deadline = time.time() + 60
        while time.time() < deadline:
            self.assertIsNone(proc.poll(), read_text(log_path))
            try:
                with open(ready) as f:
                    port = int(f.read().strip() or 0)
                if port:
                    return port
            except (FileNotFoundError, PermissionError):
                pass
            time.sleep(0.05)
        self.fail("the service did not start: " + read_text(log_path))


if __name__ == "__main__":
    unittest.main(verbosity=2)
