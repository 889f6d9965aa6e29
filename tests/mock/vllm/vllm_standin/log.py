"""vLLM-style log lines (`INFO 11-29 17:50:52 [api_server.py] message`) on stdout/stderr.

The format follows vLLM's; the `[file.py]` part names the vLLM / vllm-ascend module whose real message is
mirrored (no line numbers: this is not that code). Lines about simulated things carry `SIMULATED` / `[sim]`.
"""

import sys
import threading
import time

_lock = threading.Lock()


def _emit(level, where, msg, stream=None):
    stamp = time.strftime("%m-%d %H:%M:%S")
    out = stream or (sys.stderr if level in ("WARNING", "ERROR") else sys.stdout)
    with _lock:
        for i, line in enumerate(str(msg).splitlines() or [""]):
            if i == 0:
                out.write("%s %s [%s] %s\n" % (level, stamp, where, line))
            else:
                out.write(line + "\n")
        out.flush()


def info(where, msg):
    _emit("INFO", where, msg)


def warning(where, msg):
    _emit("WARNING", where, msg)


def error(where, msg):
    _emit("ERROR", where, msg)


def raw(line, stream=None):
    """A line without the vLLM prefix (uvicorn's `INFO:     ...` lines, tracebacks)."""
    out = stream or sys.stdout
    with _lock:
        out.write(line.rstrip("\n") + "\n")
        out.flush()
