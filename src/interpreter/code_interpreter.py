#!/usr/bin/python3
"""cell's code-interpreter service: stateful code runs with rich results, inside a sandbox.

It owns one Jupyter kernel per context and answers E2B's code-interpreter server protocol
(as `@e2b/code-interpreter` speaks it) on 127.0.0.1:49999. celld reaches it through its
authenticated port proxy (E2B's routes) and translates OpenSandbox's `/code` routes to it.

Why Python: the kernels speak the Jupyter messaging protocol (ZeroMQ, HMAC-signed
multipart messages, five channels, a kernel launcher per kernelspec). jupyter_client is
that protocol's maintained implementation, and Debian 12 ships it (python3-jupyter-client
7.4) beside ipykernel (6.17). A C service would re-implement all of it. The service uses
only those two packages and the standard library (asyncio for the HTTP server): nothing
from PyPI.

HTTP protocol (HTTP/1.1, keep-alive; request bodies JSON with Content-Length, at most
MAX_BODY bytes; error answers are text/plain, one line naming what was wrong):

  GET  /health                  200 {"status":"ok"}
  POST /execute                 {code, context_id?, language?, env_vars?, text_repr?}
        200 application/x-ndjson, chunked, streamed while the code runs, with the header
        X-Context-Id naming the context it runs in; one JSON object per line, each with
        "type":
          {"type":"number_of_executions","execution_count":N}   once the kernel took it
          {"type":"stdout"|"stderr","text":S,"timestamp":ISO-8601}
          {"type":"result","is_main_result":B, and the MIME fields present:
              text (text/plain; a string's quotes stripped as E2B's server does, unless
              the request's text_repr is true, as celld's OpenSandbox front sends it),
              html, markdown, svg, png (base64), jpeg (base64), pdf,
              latex, json, javascript, data (a DataFrame's columns as lists),
              chart (a matplotlib figure's data: type line|scatter|bar|pie|
              box_and_whisker|superchart|unknown, title, elements, ...),
              extra {mime: value} (any other MIME type)}
          {"type":"error","name":S,"value":S,"traceback":S}
        and exactly one last line: {"type":"end_of_execution"}, or
        {"type":"unexpected_end_of_execution"} when the kernel died during the run
        (an error line before it says so; the next run gets a fresh kernel).
        A run's stdout and stderr together, and its results apart, are bounded (OUTPUT_LIMIT
        bytes each, default 16 MiB): past it one stderr line says so and the rest is
        dropped while the code keeps running. The first run on a context whose kernel was lost when the sandbox
        was stopped (the service started again and found the context saved) answers
        error KernelRestarted without running the code; later runs run.
        400: invalid JSON, `code` missing or not a string, both context_id and language,
             env_vars not an object of strings, a language this image has no kernel for
             (the message names it and the kernels there are);
        404: no context with that id; 413: body too large.
        Runs on one context run one after another, in the order they came; runs on
        different contexts run at the same time. env_vars are set for that run only.
        A client that disconnects during its run (or a timeout that closes the
        connection) interrupts the kernel at once; the context stays usable.
  POST   /contexts {language?, cwd?}  200 {"id","language","cwd"}  (starts its kernel)
  GET    /contexts                    200 [{"id","language","cwd"}, ...]
  GET    /contexts/{id}               200 {"id","language","cwd"}
  POST   /contexts/{id}/restart       204  a fresh kernel, state gone (a run in progress
                                           ends with an error)
  POST   /contexts/{id}/interrupt     204  SIGINT to the run in progress, if any
  DELETE /contexts/{id}               204  (a language's default context too: the next
                                           run without a context gets a new one)

A run without context_id and without language runs in the default python context, which
exists from the start (and is made anew after it was removed); a run with only `language`
runs in that language's default context (created on first use).

Contexts (id, language, cwd, default, whether code ever ran) are saved in STATE_DIR
(/var/lib/code-interpreter/contexts.json), with when the sandbox started: a service that
starts again in the same sandbox run (it crashed; code-interpreter.sh starts it again)
says so in KernelRestarted's message instead of "the sandbox was stopped". Pause and resume need nothing: the kernels
are frozen with the sandbox. The service sends nothing on its own (no timers while
idle, no heartbeats: the kernels talk to it over Unix sockets) and runs as the sandbox's
unprivileged user (code-interpreter.sh drops from root), its kernels too.
"""

import argparse
import asyncio
import datetime
import json
import logging
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid

MAX_BODY = 2 * 1024 * 1024
MAX_HEAD = 64 * 1024
DRAIN_BODY = 64 * 1024 * 1024
OUTPUT_LIMIT = 16 * 1024 * 1024
KERNEL_START_TIMEOUT = 60.0
# After an interrupt (client gone), how long a run may take to stop before its kernel is
# replaced: code that ignores KeyboardInterrupt must not hold the context forever.
INTERRUPT_GRACE = 10.0
KEPT_INTERRUPT_EVERY = 0.25
KERNEL_RESTARTED = (
    "its kernel restarted: the sandbox was stopped; state is gone "
    "(variables, imports and definitions of earlier runs). Run the code again."
)
SERVICE_RESTARTED = (
    "its kernel restarted: the code-interpreter service started again in this sandbox; "
    "state is gone (variables, imports and definitions of earlier runs). Run the code again."
)
LANG_ALIASES = {"python3": "python", "py": "python", "ir": "r"}
ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
CTX_ID = re.compile(r"^[A-Za-z0-9-]{1,64}$")

MIME_FIELDS = {
    "text/plain": "text",
    "text/html": "html",
    "text/markdown": "markdown",
    "image/svg+xml": "svg",
    "image/png": "png",
    "image/jpeg": "jpeg",
    "application/pdf": "pdf",
    "text/latex": "latex",
    "application/json": "json",
    "application/javascript": "javascript",
    "application/vnd.cell.data+json": "data",
    "application/vnd.cell.chart+json": "chart",
}

log = logging.getLogger("code-interpreter")
HERE = os.path.dirname(os.path.abspath(__file__))


class HTTPError(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


def sandbox_start():
    """When the sandbox (its PID 1, in this PID namespace) started, in clock ticks since
    the host booted: it changes with every cold start of the sandbox, not when only this
    service starts again."""
    try:
        with open("/proc/1/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return ""


def now_iso():
    return datetime.datetime.now(datetime.timezone.utc).isoformat()


def json_line(obj):
    try:
        s = json.dumps(obj, ensure_ascii=False, allow_nan=False)
    except ValueError:
        s = json.dumps(sanitize(obj), ensure_ascii=False, allow_nan=False)
    return (s + "\n").encode("utf-8", "replace")


def sanitize(v):
    if isinstance(v, float):
        return v if v == v and v not in (float("inf"), float("-inf")) else None
    if isinstance(v, dict):
        return {k: sanitize(x) for k, x in v.items()}
    if isinstance(v, list):
        return [sanitize(x) for x in v]
    return v


def getpass_user():
    import pwd
    try:
        return pwd.getpwuid(os.getuid()).pw_name
    except KeyError:
        return f"uid {os.getuid()}"


def e2b_text(text):
    """text/plain as E2B's server hands it on: a string's repr without its quotes."""
    if isinstance(text, str) and len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def result_line(data, main, repr_text=False):
    """A result's line; its text as E2B's server gives it unless repr_text (OpenSandbox's
    execd hands Jupyter's text/plain on as it is)."""
    out = {"type": "result", "is_main_result": main}
    extra = {}
    for mime, val in data.items():
        field = MIME_FIELDS.get(mime)
        if field == "text" and not repr_text:
            out[field] = e2b_text(val)
        elif field:
            out[field] = val
        else:
            extra[mime] = val
    if extra:
        out["extra"] = extra
    return out


def stamp(msg):
    d = msg.get("header", {}).get("date")
    if isinstance(d, datetime.datetime):
        return d.isoformat()
    return str(d) if d else now_iso()


def spec_manager():
    """A KernelSpecManager that reads kernelspecs from their kernel.json only: jupyter_client's
    own imports ipykernel and IPython into this process to describe the python kernel and
    to find one more kernels dir, some 30 MiB of memory for what the kernelspec files hold."""
    from jupyter_client.kernelspec import KernelSpec, KernelSpecManager, NoSuchKernel

    class Specs(KernelSpecManager):
        def get_kernel_spec(self, kernel_name):
            d = self.find_kernel_specs().get(kernel_name.lower())
            if d:
                return KernelSpec.from_resource_dir(d)
            if kernel_name == "python3":
                # No kernelspec installed: ipykernel's own, for this interpreter.
                return KernelSpec(argv=[sys.executable, "-m", "ipykernel_launcher", "-f",
                                        "{connection_file}"],
                                  display_name="Python 3", language="python", resource_dir="")
            raise NoSuchKernel(kernel_name)

    from jupyter_core.paths import jupyter_path

    # kernel_dirs given: its default asks IPython (imported for it) for one more dir.
    return Specs(ensure_native_kernel=False, kernel_dirs=jupyter_path("kernels"))


class Kernels:
    """Which languages this image has kernels for: kernelspec language -> kernel name."""

    # What the service and its python kernel import: an image without them (cell binds this
    # service into any image that asks) gets a clear answer instead of a service that dies.
    NEEDS = ("jupyter_client", "ipykernel", "zmq")

    def __init__(self):
        import importlib.util

        self.by_lang = {}
        self.missing = [m for m in self.NEEDS if importlib.util.find_spec(m) is None]
        if self.missing:
            log.error("%s lacks %s: no kernel can start", sys.executable, ", ".join(self.missing))
            self.ksm = None
            return
        self.ksm = spec_manager()
        try:
            names = sorted(self.ksm.find_kernel_specs())
        except Exception as e:  # a broken kernelspec dir must not stop python
            log.warning("reading kernelspecs: %s", e)
            names = []
        for name in names:
            try:
                lang = str(self.ksm.get_kernel_spec(name).language or "").lower()
            except Exception as e:
                log.warning("kernelspec %s: %s", name, e)
                continue
            if lang and lang not in self.by_lang:
                self.by_lang[lang] = name
        self.by_lang.setdefault("python", "python3")

    def check(self):
        if self.missing:
            raise HTTPError(
                400,
                f"this image's Python ({sys.executable}) lacks {', '.join(self.missing)}: "
                "the code interpreter needs ipykernel (Debian: python3-ipykernel; "
                "pip: ipykernel)",
            )

    def resolve(self, language):
        self.check()
        lang = (language or "python").strip().lower()
        lang = LANG_ALIASES.get(lang, lang)
        if lang not in self.by_lang:
            raise HTTPError(
                400,
                f"no kernel for language '{language}' in this image "
                f"(kernels here: {', '.join(sorted(self.by_lang))})",
            )
        return lang


class Context:
    def __init__(self, svc, cid, language, cwd, default=False, used=False, notice=None):
        self.svc = svc
        self.id = cid
        self.language = language
        self.cwd = cwd
        self.default = default
        self.used = used
        self.notice = notice  # an error the next run answers instead of running
        self.lock = asyncio.Lock()  # FIFO: runs on one context in the order they came
        self.km = None
        self.kc = None
        self.restarting = False
        self.removed = False
        # An interrupt asked for while a run is under way but before its code started in the
        # kernel (kernel start, env_vars, the request not yet taken) would reach an idle
        # kernel and be lost: it is kept and sent once the kernel takes the code.
        self.accepted = 0       # runs answered (their head sent) and not yet ended
        self.running = False    # a run holds the lock
        self.executing = False  # its code started in the kernel (execute_input seen)
        self.interrupt_pending = False
        self.interrupt_sent = False  # the run under way was sent a SIGINT

    def public(self):
        return {"id": self.id, "language": self.language, "cwd": self.cwd}

    def record(self):
        return dict(self.public(), default=self.default, used=self.used)

    async def alive(self):
        if self.km is None:
            return False
        try:
            return await self.km.is_alive()
        except Exception:
            return False

    def exit_status(self):
        try:
            p = self.km.provisioner.process
            rc = p.poll() if p is not None else None
        except Exception:
            rc = None
        if rc is None:
            return "it is gone"
        if rc < 0:
            name = signal.Signals(-rc).name if -rc in signal.Signals._value2member_map_ else str(-rc)
            why = " (out of memory?)" if -rc == signal.SIGKILL else ""
            return f"killed by {name}{why}"
        return f"exit status {rc}"

    async def start_kernel(self):
        self.svc.kernels.check()
        from jupyter_client.manager import AsyncKernelManager

        await self.stop_kernel()
        kname = self.svc.kernels.by_lang[self.language]
        rdir = tempfile.mkdtemp(prefix=f"k-{self.id[:8]}-", dir=self.svc.runtime_dir)
        km = AsyncKernelManager(
            kernel_name=kname,
            kernel_spec_manager=self.svc.kernels.ksm,
            transport="ipc",
            ip=os.path.join(rdir, "k"),
            connection_file=os.path.join(rdir, "connection.json"),
        )
        self._rdir = rdir
        if self.language == "python":
            # This interpreter, not whatever `python3` PATH finds first.
            spec = km.kernel_spec
            if spec is not None and spec.argv and os.path.basename(spec.argv[0]).startswith("python"):
                spec.argv[0:1] = [sys.executable, "-Xfrozen_modules=off"]
        env = dict(os.environ)
        for k in list(env):
            if k.startswith("CELL_INTERP_"):
                del env[k]
        env.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        env["PYTHONUNBUFFERED"] = "1"
        cwd = self.cwd if os.path.isdir(self.cwd) else os.path.expanduser("~")
        # The kernel's own stdout and stderr (where ipykernel also copies what its
        # subprocesses print) go nowhere: a run's output reaches its client as messages,
        # and must not fill this service's log.
        self.km = km
        try:
            await km.start_kernel(cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
            kc = km.client()
            # No receive high-water mark: past the default (1000 messages) zmq drops what
            # the kernel publishes while this service is busy, and a run of many display()
            # calls would lose results. What one run may print is bounded in the kernel.
            import zmq

            kc.context.setsockopt(zmq.RCVHWM, 0)
            kc.start_channels(shell=True, iopub=True, stdin=False, hb=False, control=False)
            self.kc = kc
            await kc.wait_for_ready(timeout=KERNEL_START_TIMEOUT)
            if self.language == "python":
                reply = await self.silent(
                    self.svc.startup_code +
                    f"\nimport _cell_interp as _c; _c.set_output_limit({self.svc.output_limit}); del _c\n")
                if reply.get("status") != "ok":
                    log.warning("context %s: kernel startup code: %s %s", self.id,
                                reply.get("ename"), reply.get("evalue"))
        except BaseException:
            await self.stop_kernel()
            raise
        log.info("context %s: %s kernel started (pid %s)", self.id, self.language,
                 getattr(km.provisioner, "pid", "?"))

    async def stop_kernel(self):
        km, kc = self.km, self.kc
        self.km = self.kc = None
        if kc is not None:
            try:
                kc.stop_channels()
            except Exception:
                pass
        if km is not None:
            try:
                await km.shutdown_kernel(now=True)
            except Exception as e:
                log.warning("context %s: stopping kernel: %s", self.id, e)
        rdir = getattr(self, "_rdir", None)
        if rdir:
            for f in os.listdir(rdir) if os.path.isdir(rdir) else []:
                try:
                    os.unlink(os.path.join(rdir, f))
                except OSError:
                    pass
            try:
                os.rmdir(rdir)
            except OSError:
                pass
            self._rdir = None

    async def silent(self, code, timeout=30.0):
        """Run code silently (no output, no execution count); its execute_reply content."""
        mid = self.kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            left = end - loop.time()
            if left <= 0:
                raise TimeoutError("the kernel did not answer")
            try:
                msg = await self.kc.get_shell_msg(timeout=min(left, 1.0))
            except queue.Empty:
                if not await self.alive():
                    raise RuntimeError("the kernel died")
                continue
            if msg.get("parent_header", {}).get("msg_id") == mid:
                return msg.get("content", {})

    async def ensure_kernel(self):
        if not await self.alive():
            await self.start_kernel()

    async def interrupt(self):
        if self.running:
            self.interrupt_sent = True  # _run_locked: the run learns it was interrupted
        if self.km is not None and await self.alive():
            await self.km.interrupt_kernel()

    async def request_interrupt(self):
        """POST /contexts/{id}/interrupt: the run under way stops, whenever it was asked."""
        if (self.running or self.accepted) and not self.executing:
            log.info("context %s: interrupt kept until the kernel takes the code", self.id)
            self.interrupt_pending = True
        else:
            await self.interrupt()

    async def run(self, code, env_vars, emit, gone, repr_text=False):
        """One run: emit(obj) per NDJSON line (returns False once the client is gone);
        `gone` is a future done when the client disconnected."""
        async with self.lock:
            # An interrupt kept before this run took the lock is this run's: not cleared.
            self.running, self.executing, self.interrupt_sent = True, False, False
            try:
                await self._run_locked(code, env_vars, emit, gone, repr_text)
            finally:
                self.running = self.executing = self.interrupt_pending = False
                self.interrupt_sent = False

    async def _run_locked(self, code, env_vars, emit, gone, repr_text):
        """The run, with the context's lock held."""
        if self.removed:
            await emit({"type": "error", "name": "ContextNotFound",
                        "value": f"context {self.id} was removed", "traceback": ""})
            await emit({"type": "end_of_execution"})
            return
        if self.notice:
            name, value = self.notice
            self.notice = None
            await emit({"type": "error", "name": name, "value": value, "traceback": ""})
            await emit({"type": "end_of_execution"})
            self.svc.save()
            return
        try:
            await self.ensure_kernel()
        except Exception as e:
            log.error("context %s: kernel start failed: %s", self.id, e)
            await emit({"type": "error", "name": "KernelStartFailed",
                        "value": f"the {self.language} kernel did not start: {e}",
                        "traceback": ""})
            await emit({"type": "unexpected_end_of_execution"})
            return
        if not self.used:
            self.used = True
            self.svc.save()
        if env_vars:
            try:
                await self.silent("import _cell_interp as _c; _c.set_env(%r); del _c" % (env_vars,))
            except Exception as e:
                log.warning("context %s: setting env_vars: %s", self.id, e)
                if not await self.alive():
                    return await self._died(emit, True)
                await emit({"type": "error", "name": "EnvVarsFailed",
                            "value": f"env_vars could not be set: {e}", "traceback": ""})
                await emit({"type": "end_of_execution"})
                return
        try:
            await self._run(code, emit, gone, repr_text)
        finally:
            if env_vars and self.kc is not None and await self.alive():
                try:
                    await self.silent("import _cell_interp as _c; _c.restore_env(); del _c")
                except Exception as e:
                    log.warning("context %s: restoring env: %s", self.id, e)

    async def _run(self, code, emit, gone, repr_text=False):
        kc = self.kc
        # stop_on_error=False: after an error ipykernel otherwise aborts requests that reach
        # it in the next moment, and the next run, sent as soon as this one ends, would be
        # answered "aborted" without running.
        mid = kc.execute(code, silent=False, store_history=True, allow_stdin=False,
                         stop_on_error=False)
        # Output and results have budgets of their own: a run that printed past its limit
        # still hands back its results (the value of its last line, its figures).
        budget = self.svc.output_limit
        capped = False
        res_budget = self.svc.output_limit
        res_capped = False
        client = True  # the client still listens
        interrupted_at = None
        # A kept interrupt (request_interrupt) is sent when the kernel takes the code, and
        # again every KEPT_INTERRUPT_EVERY until the run ends or raises: a SIGINT that lands
        # while ipykernel itself is between receiving the code and running it is lost.
        kept_until = kept_last = None
        # Whether the run reported an error: one that was sent an interrupt (interrupt_sent)
        # and ends without one had the SIGINT land in ipykernel's own code between messages,
        # and its client must still learn that its run was interrupted.
        errored = False
        loop = asyncio.get_running_loop()
        getter = None
        # The run's execute_reply, read beside iopub: should iopub drop the closing idle
        # status (its socket drops messages past its high-water mark when this service
        # falls behind), the reply still ends the run.
        replier = asyncio.ensure_future(self.reply_to(kc, mid))
        replied_at = None
        try:
            while True:
                if getter is None:
                    getter = asyncio.ensure_future(kc.get_iopub_msg(timeout=None))
                if replied_at is None and replier.done():
                    replied_at = loop.time() if replier.result() else float("inf")
                waits = {getter}
                if replied_at is None:
                    waits.add(replier)
                if client and not gone.done():
                    waits.add(gone)
                done, _ = await asyncio.wait(waits, timeout=KEPT_INTERRUPT_EVERY,
                                             return_when=asyncio.FIRST_COMPLETED)
                if kept_until is not None and loop.time() < kept_until and \
                        loop.time() - kept_last >= KEPT_INTERRUPT_EVERY:
                    kept_last = loop.time()
                    await self.interrupt()
                if client and gone.done():
                    client = False
                    interrupted_at = loop.time()
                    log.info("context %s: client gone, interrupting the run", self.id)
                    await self.interrupt()
                if getter not in done:
                    if not await self.alive():
                        return await self._died(emit, client)
                    if replied_at is not None and loop.time() - replied_at > 2.0:
                        log.warning("context %s: no idle status after the reply; run ended", self.id)
                        if client:
                            await emit({"type": "end_of_execution"})
                        return
                    if interrupted_at is not None and loop.time() - interrupted_at > INTERRUPT_GRACE:
                        log.warning("context %s: run ignored the interrupt; new kernel", self.id)
                        await self.stop_kernel()
                        self.notice = ("KernelRestarted",
                                       "its kernel restarted: a run that was interrupted "
                                       "(its client left) did not stop; state is gone")
                        return
                    continue
                try:
                    msg = getter.result()
                except Exception:
                    msg = None  # its channel closed under it: a restart or a dead kernel
                getter = None
                if msg is None:
                    if not await self.alive():
                        return await self._died(emit, client)
                    continue
                if msg.get("parent_header", {}).get("msg_id") != mid:
                    continue
                mtype = msg.get("msg_type")
                content = msg.get("content", {})
                line = None
                if mtype == "status":
                    if content.get("execution_state") == "idle":
                        if client and self.interrupt_sent and not errored:
                            await emit({"type": "error", "name": "KeyboardInterrupt",
                                        "value": "the run was interrupted", "traceback": ""})
                        if client:
                            await emit({"type": "end_of_execution"})
                        return
                elif mtype == "execute_input":
                    self.executing = True
                    if self.interrupt_pending:
                        self.interrupt_pending = False
                        log.info("context %s: the kept interrupt sent", self.id)
                        kept_last = loop.time()
                        kept_until = kept_last + INTERRUPT_GRACE
                        await self.interrupt()
                    line = {"type": "number_of_executions",
                            "execution_count": content.get("execution_count")}
                elif mtype == "stream":
                    name = content.get("name")
                    if name in ("stdout", "stderr") and not capped:
                        text = content.get("text", "")
                        raw = text.encode("utf-8", "surrogatepass")
                        if len(raw) > budget:
                            text = raw[:budget].decode("utf-8", "ignore")
                            capped = True
                        budget -= len(raw)
                        if text and client:
                            client = await emit({"type": name, "text": text,
                                                 "timestamp": stamp(msg)})
                        if capped and client:
                            client = await emit({
                                "type": "stderr",
                                "text": f"\n[cell: this run's output passed "
                                        f"{self.svc.output_limit} bytes; the rest is "
                                        f"dropped, the code keeps running]\n",
                                "timestamp": now_iso()})
                elif mtype in ("display_data", "execute_result", "update_display_data"):
                    data = content.get("data", {})
                    if not res_capped:
                        size = sum(len(v) if isinstance(v, str) else 256 for v in data.values())
                        if size > res_budget:
                            res_capped = True
                            line = {"type": "stderr",
                                    "text": f"\n[cell: this run's results passed "
                                            f"{self.svc.output_limit} bytes; the rest are "
                                            f"dropped, the code keeps running]\n",
                                    "timestamp": now_iso()}
                        else:
                            res_budget -= size
                            line = result_line(data, mtype == "execute_result", repr_text)
                elif mtype == "error":
                    kept_until = None  # the interrupt (or anything else) raised: done
                    errored = True
                    line = {"type": "error", "name": content.get("ename", ""),
                            "value": content.get("evalue", ""),
                            "traceback": "\n".join(content.get("traceback", []))}
                if line is not None and client:
                    client = await emit(line)
                    if not client and interrupted_at is None:
                        interrupted_at = loop.time()
                        log.info("context %s: client gone, interrupting the run", self.id)
                        await self.interrupt()
        finally:
            for task in (getter, replier):
                if task is not None:
                    task.cancel()
                    try:
                        await task
                    except BaseException:
                        pass
            await self.drain_replies()

    async def reply_to(self, kc, mid):
        # True once the execute_reply of message mid arrived (False: the channel closed).
        try:
            while True:
                msg = await kc.get_shell_msg(timeout=None)
                if msg.get("parent_header", {}).get("msg_id") == mid:
                    return True
        except asyncio.CancelledError:
            raise
        except Exception:
            return False

    async def drain_replies(self):
        # The runs' execute_replies are not needed (iopub's idle ends a run); drop them so
        # they do not pile up in the shell socket.
        kc = self.kc
        try:
            while kc is not None and await kc.shell_channel.msg_ready():
                await kc.get_shell_msg(timeout=0)
        except Exception:
            pass

    async def _died(self, emit, client):
        why = self.exit_status() if self.km is not None else "it was stopped"
        if self.removed:
            value = "the context was removed during this run"
            name = "ContextRemoved"
        elif self.restarting:
            value = "the context was restarted during this run; state is gone"
            name = "KernelRestarted"
        else:
            value = (f"the kernel died ({why}); state is gone, "
                     f"the next run starts a fresh kernel")
            name = "KernelDied"
        log.warning("context %s: kernel died during a run (%s)", self.id, why)
        if client:
            await emit({"type": "error", "name": name, "value": value, "traceback": ""})
            await emit({"type": "unexpected_end_of_execution"})
        if not self.restarting:
            await self.stop_kernel()
            if not client:
                self.notice = ("KernelDied", value)
            try:
                await self.start_kernel()
            except Exception as e:
                log.error("context %s: restarting kernel: %s", self.id, e)


class Service:
    def __init__(self, state_dir, output_limit):
        self.state_dir = state_dir
        self.state_file = os.path.join(state_dir, "contexts.json")
        self.output_limit = output_limit
        self.kernels = Kernels()
        self.contexts = {}
        self.defaults = {}  # language -> context id
        self.boot = sandbox_start()
        with open(os.path.join(HERE, "kernel_startup.py"), encoding="utf-8") as f:
            self.startup_code = f.read()
        # The kernels' connection files and Unix sockets, under the state dir: what a
        # previous start left there (a cold start of the sandbox) is removed first.
        self.runtime_dir = os.path.join(state_dir, "run")
        shutil.rmtree(self.runtime_dir, ignore_errors=True)
        os.mkdir(self.runtime_dir, 0o700)

    # ---- contexts on disk ----

    def load(self):
        try:
            with open(self.state_file, encoding="utf-8") as f:
                saved = json.load(f)
        except FileNotFoundError:
            saved = {"contexts": []}
        except (OSError, ValueError) as e:
            log.warning("%s unreadable (%s): starting with no saved contexts", self.state_file, e)
            saved = {"contexts": []}
        if not isinstance(saved, dict) or not isinstance(saved.get("contexts"), list):
            saved = {"contexts": []}
        same_start = bool(self.boot) and saved.get("sandboxStart") == self.boot
        for c in saved["contexts"]:
            try:
                cid, lang, cwd = str(c["id"]), str(c["language"]), str(c["cwd"])
            except (KeyError, TypeError):
                continue
            if not CTX_ID.match(cid) or lang not in self.kernels.by_lang:
                continue
            used = bool(c.get("used"))
            # A context whose code ran before this start lost its kernel's state.
            why = SERVICE_RESTARTED if same_start else KERNEL_RESTARTED
            notice = ("KernelRestarted", why) if used else None
            ctx = Context(self, cid, lang, cwd, default=bool(c.get("default")),
                          used=used, notice=notice)
            self.contexts[cid] = ctx
            if ctx.default and lang not in self.defaults:
                self.defaults[lang] = cid
        if "python" not in self.defaults:
            self.new_context("python", self.default_cwd(), default=True)
        self.save()

    def save(self):
        data = {"version": 1, "sandboxStart": self.boot,
                "contexts": [c.record() for c in self.contexts.values()]}
        tmp = self.state_file + ".tmp"
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                json.dump(data, f)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.state_file)
        except OSError as e:
            log.error("saving contexts to %s: %s", self.state_file, e)

    def default_cwd(self):
        for d in ("/home/user", os.path.expanduser("~"), "/"):
            if os.path.isdir(d):
                return d
        return "/"

    def new_context(self, language, cwd, default=False):
        cid = str(uuid.uuid4())
        ctx = Context(self, cid, language, cwd, default=default)
        self.contexts[cid] = ctx
        if default:
            self.defaults[language] = cid
        return ctx

    def default_context(self, language):
        cid = self.defaults.get(language)
        if cid is None or cid not in self.contexts:
            ctx = self.new_context(language, self.default_cwd(), default=True)
            self.save()
            return ctx
        return self.contexts[cid]

    def find(self, cid):
        ctx = self.contexts.get(cid)
        if ctx is None:
            raise HTTPError(404, f"Context {cid} not found")
        return ctx

    async def shutdown(self):
        for ctx in list(self.contexts.values()):
            await ctx.stop_kernel()
        shutil.rmtree(self.runtime_dir, ignore_errors=True)

    # ---- HTTP handlers ----

    async def h_create(self, body):
        req = parse_json(body, allow_empty=True)
        lang = req.get("language")
        cwd = req.get("cwd")
        if lang is not None and not isinstance(lang, str):
            raise HTTPError(400, "language must be a string")
        if cwd is not None and (not isinstance(cwd, str) or not cwd.startswith("/") or "\0" in cwd):
            raise HTTPError(400, "cwd must be an absolute path")
        lang = self.kernels.resolve(lang)
        cwd = cwd or self.default_cwd()
        if not os.path.isdir(cwd):
            raise HTTPError(400, f"cwd {cwd} is not a directory")
        # The kernel runs as this service's user: a directory it cannot enter is the
        # caller's error, said now rather than as a kernel that failed to start.
        if not os.access(cwd, os.X_OK):
            raise HTTPError(400, f"cwd {cwd} cannot be entered by the kernel's user "
                                 f"({getpass_user()})")
        ctx = self.new_context(lang, cwd)
        self.save()
        async with ctx.lock:
            try:
                await ctx.start_kernel()
            except Exception as e:
                del self.contexts[ctx.id]
                self.save()
                raise HTTPError(500, f"the {lang} kernel did not start: {e}")
        return ctx.public()

    async def h_restart(self, ctx):
        ctx.restarting = True
        try:
            await ctx.stop_kernel()  # a run in progress sees its kernel gone and ends
            async with ctx.lock:
                ctx.notice = None
                try:
                    await ctx.start_kernel()
                except Exception as e:
                    raise HTTPError(500, f"the {ctx.language} kernel did not start: {e}")
        finally:
            ctx.restarting = False

    async def h_delete(self, ctx):
        # The default context of a language may go too (OpenSandbox deletes all contexts
        # of a language): the next run without a context starts a new default one.
        if self.defaults.get(ctx.language) == ctx.id:
            del self.defaults[ctx.language]
        ctx.removed = True
        ctx.restarting = True
        del self.contexts[ctx.id]
        self.save()
        await ctx.stop_kernel()

    def execute_target(self, body):
        req = parse_json(body)
        code = req.get("code")
        if not isinstance(code, str):
            raise HTTPError(400, "code must be a string")
        cid = req.get("context_id")
        lang = req.get("language")
        if cid is not None and lang is not None:
            raise HTTPError(400, "only one of context_id and language may be given")
        env = req.get("env_vars")
        if env is None:
            env = {}
        if not isinstance(env, dict):
            raise HTTPError(400, "env_vars must be an object of strings")
        for k, v in env.items():
            if not ENV_NAME.match(k) or not isinstance(v, str) or "\0" in v:
                raise HTTPError(400, f"env_vars: {k!r} must be a variable name with a string value")
        if cid is not None:
            if not isinstance(cid, str):
                raise HTTPError(400, "context_id must be a string")
            ctx = self.find(cid)
        else:
            if lang is not None and not isinstance(lang, str):
                raise HTTPError(400, "language must be a string")
            ctx = self.default_context(self.kernels.resolve(lang))
        # cell's own field, for celld's OpenSandbox front: results' text/plain as Jupyter
        # gives it (E2B's server strips a string's quotes).
        repr_text = req.get("text_repr") is True
        return ctx, code, env, repr_text


def parse_json(body, allow_empty=False):
    if not body.strip() and allow_empty:
        return {}
    try:
        req = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        raise HTTPError(400, f"invalid JSON body: {e}")
    if not isinstance(req, dict):
        raise HTTPError(400, "the body must be a JSON object")
    return req


REASONS = {200: "OK", 204: "No Content", 400: "Bad Request", 404: "Not Found",
           405: "Method Not Allowed", 411: "Length Required", 413: "Payload Too Large",
           431: "Request Header Fields Too Large", 500: "Internal Server Error"}


class Connection:
    def __init__(self, svc, reader, writer):
        self.svc = svc
        self.reader = reader
        self.writer = writer

    async def send(self, status, body=b"", ctype="text/plain; charset=utf-8", close=False):
        head = [f"HTTP/1.1 {status} {REASONS.get(status, 'Status')}"]
        if status != 204:
            head.append(f"Content-Type: {ctype}")
            head.append(f"Content-Length: {len(body)}")
        if close:
            head.append("Connection: close")
        self.writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + (body if status != 204 else b""))
        await self.writer.drain()

    async def send_json(self, obj, status=200):
        await self.send(status, json.dumps(obj).encode(), "application/json")

    async def serve(self):
        try:
            while True:
                keep = await self.one()
                if not keep:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except Exception:
            log.exception("connection failed")
        finally:
            try:
                self.writer.close()
            except Exception:
                pass

    async def one(self):
        try:
            head = await self.reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        except asyncio.LimitOverrunError:
            await self.send(431, b"request head too large", close=True)
            return False
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self.send(400, b"bad request line", close=True)
            return False
        method, target, version = parts
        headers = {}
        for line in lines[1:]:
            if not line:
                continue
            k, sep, v = line.partition(":")
            if not sep:
                await self.send(400, b"bad header line", close=True)
                return False
            headers[k.strip().lower()] = v.strip()
        conn = headers.get("connection", "").lower()
        keep = (version == "HTTP/1.1" and conn != "close") or conn == "keep-alive"
        if "transfer-encoding" in headers:
            await self.send(411, b"send the body with Content-Length (chunked bodies are not accepted)", close=True)
            return False
        try:
            length = int(headers.get("content-length", "0"))
            if length < 0:
                raise ValueError
        except ValueError:
            await self.send(400, b"bad Content-Length", close=True)
            return False
        if length > MAX_BODY:
            # Read (and drop) a body of reasonable size first, so that the client, still
            # sending, gets the answer rather than a reset connection.
            if length <= DRAIN_BODY:
                left = length
                while left:
                    chunk = await self.reader.read(min(left, 1 << 20))
                    if not chunk:
                        return False
                    left -= len(chunk)
            await self.send(413, f"request body is {length} bytes; at most {MAX_BODY}".encode(),
                            close=True)
            return False
        body = await self.reader.readexactly(length) if length else b""
        path = target.split("?", 1)[0]
        try:
            return await self.route(method, path, body, keep)
        except HTTPError as e:
            await self.send(e.status, e.message.encode(), close=not keep)
            return keep

    async def route(self, method, path, body, keep):
        svc = self.svc
        seg = [s for s in path.split("/") if s]
        if seg == ["health"] and method == "GET":
            await self.send_json({"status": "ok"})
            return keep
        if seg == ["execute"]:
            if method != "POST":
                raise HTTPError(405, "use POST /execute")
            ctx, code, env, repr_text = svc.execute_target(body)
            return await self.execute(ctx, code, env, keep, repr_text)
        if seg == ["contexts"]:
            if method == "GET":
                await self.send_json([c.public() for c in svc.contexts.values()])
                return keep
            if method == "POST":
                await self.send_json(await svc.h_create(body))
                return keep
            raise HTTPError(405, "use GET or POST /contexts")
        if len(seg) in (2, 3) and seg[0] == "contexts":
            ctx = svc.find(seg[1])
            if len(seg) == 2 and method == "DELETE":
                await svc.h_delete(ctx)
            elif len(seg) == 2 and method == "GET":
                await self.send_json(ctx.public())
                return keep
            elif len(seg) == 3 and seg[2] == "restart" and method == "POST":
                await svc.h_restart(ctx)
            elif len(seg) == 3 and seg[2] == "interrupt" and method == "POST":
                await ctx.request_interrupt()
            else:
                raise HTTPError(405 if len(seg) == 2 or seg[2] in ("restart", "interrupt") else 404,
                                f"no route {method} {path}")
            await self.send(204)
            return keep
        raise HTTPError(404, f"no route {method} {path}")

    async def execute(self, ctx, code, env, keep, repr_text=False):
        w = self.writer
        # From its head on, an interrupt may name this run's context: counted as accepted
        # until it ends, so that an interrupt sent before its code starts is kept.
        ctx.accepted += 1
        try:
            return await self._execute(ctx, code, env, keep, repr_text)
        finally:
            ctx.accepted -= 1

    async def _execute(self, ctx, code, env, keep, repr_text):
        w = self.writer
        # X-Context-Id: the context the run goes to (the one named, or the language's
        # default), which celld's OpenSandbox front hands its client for an interrupt.
        w.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
                b"Cache-Control: no-cache\r\nX-Context-Id: %s\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n" % ctx.id.encode())
        state = {"ok": True}
        loop = asyncio.get_running_loop()
        gone = loop.create_future()
        extra = bytearray()

        async def watch():
            # The client sends nothing while it waits: end of file (or any error) on
            # its side means it left. Bytes it sends (a pipelined request) are kept.
            try:
                data = await self.reader.read(65536)
                if data:
                    extra.extend(data)
                    return  # not gone; the connection closes after this response
            except Exception:
                pass
            if not gone.done():
                gone.set_result(True)

        watcher = asyncio.ensure_future(watch())

        async def emit(obj):
            if not state["ok"]:
                return False
            data = json_line(obj)
            try:
                w.write(b"%x\r\n%s\r\n" % (len(data), data))
                await w.drain()
            except (ConnectionError, RuntimeError):
                state["ok"] = False
                if not gone.done():
                    gone.set_result(True)
                return False
            return True

        try:
            await ctx.run(code, env, emit, gone, repr_text)
        except Exception as e:
            # A failure of this service's own: the client still gets a terminal line.
            log.exception("context %s: run failed", ctx.id)
            await emit({"type": "error", "name": "InterpreterError",
                        "value": f"the code-interpreter service failed: {e}", "traceback": ""})
            await emit({"type": "unexpected_end_of_execution"})
        finally:
            watcher.cancel()
            try:
                await watcher
            except BaseException:
                pass
        if not state["ok"] or gone.done():
            return False
        try:
            w.write(b"0\r\n\r\n")
            await w.drain()
        except ConnectionError:
            return False
        if extra:
            return False  # pipelining is not supported: that request is dropped with the connection
        return keep


async def main_async(args):
    svc = Service(args.state_dir, args.output_limit)
    svc.load()
    default = svc.contexts[svc.defaults["python"]]

    async def warm():
        # The default context's kernel starts at once, so a first run does not wait for it.
        async with default.lock:
            if default.km is None:
                try:
                    await default.start_kernel()
                except Exception as e:
                    log.error("default kernel: %s", e)

    asyncio.ensure_future(warm())
    server = await asyncio.start_server(
        lambda r, w: Connection(svc, r, w).serve(), args.host, args.port,
        limit=MAX_HEAD, reuse_address=True)
    port = server.sockets[0].getsockname()[1]
    log.info("listening on %s:%d (state %s)", args.host, port, args.state_dir)
    if args.ready_file:
        with open(args.ready_file + ".tmp", "w") as f:
            f.write(f"{port}\n")
        os.replace(args.ready_file + ".tmp", args.ready_file)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    await stop.wait()
    server.close()
    await svc.shutdown()


def main():
    # ipykernel's debugger, imported with the kernelspecs, would warn on stderr otherwise.
    os.environ.setdefault("PYDEVD_DISABLE_FILE_VALIDATION", "1")
    p = argparse.ArgumentParser(description="cell's code-interpreter service")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=49999)
    p.add_argument("--state-dir", default="/var/lib/code-interpreter")
    p.add_argument("--output-limit", type=int, default=OUTPUT_LIMIT)
    p.add_argument("--ready-file", help="write the bound port here once listening")
    p.add_argument("--log-level", default="INFO")
    # Arguments it does not know (a client's entrypoint may pass some) are logged, not fatal:
    # the sandbox's entrypoint must come up.
    args, unknown = p.parse_known_args()
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="code-interpreter: %(levelname)s %(message)s")
    if unknown:
        log.warning("ignoring arguments %s", " ".join(unknown))
    os.makedirs(args.state_dir, mode=0o700, exist_ok=True)
    if os.geteuid() == 0:
        log.warning("running as root: kernels run as root too (code-interpreter.sh drops to `user`)")
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
