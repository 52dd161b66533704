# srt-mcp's Python kernel: one long-lived interpreter per workspace, driven
# over pipes (see kernel.go for the protocol). It keeps the user's namespace
# between cells, captures everything written to fds 1 and 2 (print, C
# extensions, subprocesses), returns the value of a trailing expression like
# a REPL, reports exceptions as tracebacks, and saves open matplotlib
# figures as PNG files in the working directory. A cell's output cap is
# applied here: past it, output is counted and dropped, never sent.
import ast
import codecs
import importlib
import json
import linecache
import os
import signal
import sys
import threading
import traceback

KERNEL_FILE = sys._getframe().f_code.co_filename
PROTO = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8", errors="replace")
_proto_lock = threading.Lock()
SYNC = b"\x00srt-mcp-sync\x00"
REPR_MAX = 1 << 20  # a REPL value's repr is cut to this many bytes (or what the cap leaves)
EVALUE_MAX = 4096  # an error frame's message (the whole traceback goes to stderr)


def send(msg):
    line = json.dumps(msg, ensure_ascii=False)
    with _proto_lock:
        PROTO.write(line + "\n")
        PROTO.flush()


def utf8_cut(data, n):
    """The longest start of data of at most n bytes that ends on a
    character boundary."""
    if n <= 0:
        return b""
    if len(data) <= n:
        return data
    while n > 0 and (data[n] & 0xC0) == 0x80:
        n -= 1
    return data[:n]


class Capture:
    """Redirects one fd to a pipe whose reader thread forwards its bytes as
    frames of the current cell, up to the cell's cap."""

    def __init__(self, fd, name):
        self.fd, self.name = fd, name
        r, w = os.pipe()
        os.dup2(w, fd)
        os.close(w)
        self.r = r
        self.lock = threading.Lock()
        self.begin(0, 0)
        self.synced = threading.Event()
        threading.Thread(target=self.pump, daemon=True).start()

    def begin(self, cell, cap):
        """Starts a request: its output is sent up to cap bytes (0: all)."""
        with self.lock:
            self.cell, self.cap = cell, cap
            self.sent = 0  # bytes of output sent (or taken by the REPL value)
            self.noted = False  # a "truncated" frame was sent
            self.decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def pump(self):
        pending = b""
        while True:
            try:
                chunk = os.read(self.r, 65536)
            except OSError:
                return
            if not chunk:
                return
            pending += chunk
            while True:
                i = pending.find(SYNC)
                if i < 0:
                    break
                self.emit(pending[:i], final=True)
                pending = pending[i + len(SYNC):]
                self.synced.set()
            # Keep a tail that could be the start of a marker.
            keep = 0
            for k in range(min(len(SYNC) - 1, len(pending)), 0, -1):
                if SYNC.startswith(pending[-k:]):
                    keep = k
                    break
            if len(pending) > keep:
                self.emit(pending[: len(pending) - keep])
                pending = pending[len(pending) - keep:]

    def emit(self, data, final=False):
        with self.lock:
            cut = self.cap > 0 and len(data) > self.cap - self.sent
            if cut:
                data = utf8_cut(data, self.cap - self.sent)
            self.sent += len(data)
            text = self.decoder.decode(data, final)
            if cut:
                self.decoder.reset()  # a character the cut split is dropped
                self.sent = max(self.sent, self.cap)
            if text:
                send({"id": self.cell, "ev": self.name, "data": text})
            if cut and not self.noted:
                self.noted = True
                send({"id": self.cell, "ev": "truncated", "stream": self.name})

    def left(self):
        """How many more bytes the request may send (None: no cap)."""
        with self.lock:
            return None if self.cap <= 0 else max(self.cap - self.sent, 0)

    def account(self, n, truncated):
        """Counts n bytes sent outside the pipe (the REPL value)."""
        with self.lock:
            self.sent += n
            if truncated and not self.noted:
                self.noted = True
                send({"id": self.cell, "ev": "truncated", "stream": self.name})

    def sync(self):
        self.synced.clear()
        os.write(self.fd, SYNC)
        self.synced.wait(2)


sys.stdout.flush()
sys.stderr.flush()
OUT, ERR = Capture(1, "stdout"), Capture(2, "stderr")
sys.stdout = os.fdopen(1, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)
sys.stderr = os.fdopen(2, "w", buffering=1, encoding="utf-8", errors="replace", closefd=False)

os.environ.setdefault("MPLBACKEND", "Agg")
user_ns = {"__name__": "__main__", "__builtins__": __builtins__}
exec_count = 0
figures_saved = 0


def save_figures(cell):
    global figures_saved
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for num in plt.get_fignums():
        fig = plt.figure(num)
        figures_saved += 1
        name = "figure_%d_%d.png" % (cell, figures_saved)
        try:
            fig.savefig(os.path.join(os.getcwd(), name))
            send({"id": cell, "ev": "figure", "path": os.path.join(os.getcwd(), name)})
        except Exception as e:  # a figure that cannot be saved is reported, not fatal
            send({"id": cell, "ev": "stderr", "data": "srt-mcp: could not save figure %d: %s\n" % (num, e)})
    plt.close("all")


def send_result(cell, value):
    """Sends a value's repr, cut (with a note saying so) so that it and the
    newline the server adds fit in REPR_MAX bytes and what is left of the
    cell's stdout cap."""
    text = repr(value)
    limit = REPR_MAX - 1
    left = OUT.left()
    if left is not None:
        limit = min(limit, left - 1)
    if len(text) * 4 > limit:  # else it fits whatever its characters
        raw = text.encode("utf-8", "replace")
        if len(raw) > limit:
            note = "\u2026 (truncated, %d bytes in all)" % len(raw)
            keep = limit - len(note.encode("utf-8"))
            if keep < 0:  # not even the note fits in what the cap leaves
                OUT.account(0, True)
                return
            text = utf8_cut(raw, keep).decode("utf-8", "replace") + note
            OUT.account(len(text.encode("utf-8", "replace")) + 1, True)
            send({"id": cell, "ev": "result", "repr": text})
            return
    OUT.account(len(text.encode("utf-8", "replace")) + 1, False)
    send({"id": cell, "ev": "result", "repr": text})


def run_cell(cell, code):
    global exec_count
    exec_count += 1
    importlib.invalidate_caches()  # packages installed since the last cell are found
    ok = True
    name = "<cell %d>" % exec_count
    linecache.cache[name] = (len(code), None, code.splitlines(True), name)  # tracebacks show the lines
    try:
        tree = ast.parse(code, name, "exec")
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        exec(compile(tree, "<cell %d>" % exec_count, "exec"), user_ns)
        if last is not None:
            value = eval(compile(last, "<cell %d>" % exec_count, "eval"), user_ns)
            if value is not None:
                user_ns["_"] = value
                # What the cell printed comes first.
                sys.stdout.flush()
                sys.stderr.flush()
                OUT.sync()
                ERR.sync()
                send_result(cell, value)
    except BaseException as e:  # KeyboardInterrupt and SystemExit included: the kernel stays
        ok = False
        tb = e.__traceback__
        # Drop the kernel's own frames.
        while tb is not None and tb.tb_frame.f_code.co_filename == KERNEL_FILE:
            tb = tb.tb_next
        if isinstance(e, SystemExit):
            # sys.exit() ends the cell as it would end a script: no
            # traceback, a message argument printed, its status reported.
            if e.code is not None and not isinstance(e.code, int):
                sys.stderr.write(str(e.code) + "\n")
            evalue = "" if e.code is None else (str(e.code) if isinstance(e.code, int) else "1")
        else:
            text = "".join(traceback.format_exception(type(e), e, tb))
            sys.stderr.write(text)
            try:
                evalue = str(e)[:EVALUE_MAX]
            except BaseException:
                evalue = ""
        send({"id": cell, "ev": "error", "ename": type(e).__name__, "evalue": evalue})
    try:
        save_figures(cell)
    except BaseException:
        pass
    sys.stdout.flush()
    sys.stderr.flush()
    OUT.sync()
    ERR.sync()
    send({"id": cell, "ev": "done", "ok": ok, "exec_count": exec_count})


def info(cell):
    import types
    variables, modules = [], set()
    for k, v in list(user_ns.items()):
        if k.startswith("_") or k == "__builtins__":
            continue
        if isinstance(v, types.ModuleType):
            modules.add(v.__name__)
            continue
        variables.append(k)
    rss = 0
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except Exception:
        import resource
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    send({"id": cell, "ev": "info", "variables": sorted(variables), "modules": sorted(modules),
          "exec_count": exec_count, "memory_bytes": rss})


def main():
    signal.signal(signal.SIGINT, signal.default_int_handler)
    send({"id": 0, "ev": "ready", "language": "python", "version": sys.version.split()[0], "pid": os.getpid()})
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        cell = req.get("id", 0)
        cap = 0
        if req.get("op") == "exec":
            try:
                cap = max(int(req.get("max_output") or 0), 0)
            except (TypeError, ValueError):
                cap = 0
        OUT.begin(cell, cap)
        ERR.begin(cell, cap)
        try:
            if req.get("op") == "exec":
                run_cell(cell, req.get("code", ""))
            elif req.get("op") == "preload":
                # Warm the module cache without touching the user's namespace:
                # a later `import pandas` is then a dictionary lookup.
                import importlib
                for m in req.get("modules", []):
                    try:
                        importlib.import_module(m)
                    except Exception as e:
                        send({"id": cell, "ev": "stderr", "data": "preload %s: %s\n" % (m, e)})
                send({"id": cell, "ev": "done", "ok": True, "exec_count": exec_count})
            elif req.get("op") == "info":
                info(cell)
                send({"id": cell, "ev": "done", "ok": True, "exec_count": exec_count})
        except KeyboardInterrupt:
            # An interrupt between cells (or while reporting): the cell ends.
            send({"id": cell, "ev": "error", "ename": "KeyboardInterrupt", "evalue": ""})
            send({"id": cell, "ev": "done", "ok": False, "exec_count": exec_count})


main()
