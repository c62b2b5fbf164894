#!/usr/bin/env python3
"""SIGKILLs a process the moment something shows it is in a given phase,
for tests of what a kill -9 at that phase leaves behind.

  kill_when.py PID fd REGEX     one of PID's open files (the target of a
                                /proc/PID/fd link) matches REGEX
  kill_when.py PID path PATH    PATH exists

Polls every 0.2 ms; run it under a real-time policy (chrt -f) to see a
phase that lasts a few milliseconds on a busy machine. Prints what it saw; exits 0 once PID is killed, 1 if PID
ended first or nothing showed within --timeout seconds (default 60).
"""
import argparse
import os
import re
import signal
import sys
import time


def open_files(pid):
    fd_dir = "/proc/%d/fd" % pid
    for fd in os.listdir(fd_dir):
        try:
            yield os.readlink(os.path.join(fd_dir, fd))
        except OSError:
            pass  # closed meanwhile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("pid", type=int)
    ap.add_argument("what", choices=["fd", "path"])
    ap.add_argument("pattern")
    ap.add_argument("--timeout", type=float, default=60)
    a = ap.parse_args()
    regex = re.compile(a.pattern) if a.what == "fd" else None
    deadline = time.monotonic() + a.timeout
    while time.monotonic() < deadline:
        try:
            if regex:
                seen = next((f for f in open_files(a.pid) if regex.search(f)), None)
            else:
                seen = a.pattern if os.path.lexists(a.pattern) else None
                os.kill(a.pid, 0)
        except (FileNotFoundError, ProcessLookupError):
            print("process %d ended before %s %s showed" % (a.pid, a.what, a.pattern))
            return 1
        if seen:
            os.kill(a.pid, signal.SIGKILL)
            print("killed %d at %s" % (a.pid, seen))
            return 0
        time.sleep(0.0002)
    print("no %s %s in %d's after %.0f s" % (a.what, a.pattern, a.pid, a.timeout))
    return 1


if __name__ == "__main__":
    sys.exit(main())
