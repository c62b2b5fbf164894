#!/usr/bin/env python3
"""Runs a command on a terminal of its own and presses Ctrl-C there, once
each time its output (stdout and stderr, the terminal's) matches the next
pattern: a SIGINT as the terminal sends it (si_code SI_KERNEL, to the whole
foreground process group), which kill(1) cannot send.

  ctrl_c.py [--timeout S] --after REGEX [--after REGEX ...] -- CMD [ARG ...]

Copies the command's output to stdout, prints "ctrl_c: pressed after
/REGEX/ at T s" on stderr for each press, and exits with the command's exit
status (128 + N if signal N ended it), or 124 if a pattern did not show or
the command did not end within --timeout seconds (default 60) of its start.
"""
import argparse
import os
import pty
import re
import select
import signal
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--timeout", type=float, default=60)
    p.add_argument("--after", action="append", required=True)
    p.add_argument("command", nargs=argparse.REMAINDER)
    args = p.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        p.error("no command")

    pid, fd = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)
    start = time.monotonic()
    patterns = [re.compile(a) for a in args.after]
    seen = ""  # the output since the last press
    while True:
        left = start + args.timeout - time.monotonic()
        if left <= 0:
            print("ctrl_c: timed out, waiting for /%s/" % patterns[0].pattern if patterns else "ctrl_c: timed out",
                  file=sys.stderr)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return 124
        ready, _, _ = select.select([fd], [], [], min(left, 0.1))
        if ready:
            try:
                data = os.read(fd, 4096)
            except OSError:  # EIO: the terminal's last holder closed it
                data = b""
            if not data:
                break
            sys.stdout.write(data.decode(errors="replace"))
            sys.stdout.flush()
            seen += data.decode(errors="replace")
        if patterns and patterns[0].search(seen):
            os.write(fd, b"\x03")  # the line discipline turns it into SIGINT (ISIG is on)
            print("ctrl_c: pressed after /%s/ at %.2f s" % (patterns[0].pattern, time.monotonic() - start),
                  file=sys.stderr)
            patterns.pop(0)
            seen = ""
    _, status = os.waitpid(pid, 0)
    if patterns:
        print("ctrl_c: the command ended before /%s/" % patterns[0].pattern, file=sys.stderr)
        return 124
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)


if __name__ == "__main__":
    sys.exit(main())
