#!/usr/bin/env python3
"""Runs the examples of README.md and docs/*.md that say they run as they
stand: a fenced block right after a line `<!-- example -->`. In it, a line
`$ COMMAND` is a command (`sudo ` dropped: the tests run as root; `$ #` a
comment) and the lines up to the next are what it printed.

Each block runs in WORK (a directory where build/ and tests/ lead to the
clone's), its commands in order, each within 120 s. A command must exit 0.
What ember printed in the docs must still be what it prints: each shown
line of ember's own (`ember: ...`, and its summary's indented `  label  N`
lines) must appear in what the command printed, up to the line's first
number. Other commands (cat, grep) must print something if the docs show
output. Counts, times and PIDs differ from run to run; the words do not.

Usage: docs_examples.py ROOT WORK"""
import glob
import os
import re
import subprocess
import sys

root, work = sys.argv[1:3]


def blocks(path):
    """(line number, [(command, [shown lines])]) of each marked block."""
    lines = open(path, encoding="utf-8").read().splitlines()
    for i, line in enumerate(lines):
        if line.strip() != "<!-- example -->":
            continue
        if i + 1 >= len(lines) or not lines[i + 1].startswith("```"):
            sys.exit("%s:%d: <!-- example --> not followed by a fenced block" % (path, i + 1))
        commands = []
        for body in lines[i + 2:]:
            if body.startswith("```"):
                break
            if body.startswith("$ "):
                commands.append((body[2:], []))
            elif commands:
                commands[-1][1].append(body)
            else:
                sys.exit("%s:%d: an example's block must start with a command" % (path, i + 3))
        yield i + 1, commands


def label(shown):
    """The words of one of ember's lines, before its first number."""
    return re.split(r"\d", shown, maxsplit=1)[0].rstrip()


def ours(shown):
    return shown.startswith("ember: ") or re.match(r"^  [a-z][a-z -]*\S", shown)


failed = 0
ran = 0
for path in [os.path.join(root, "README.md")] + sorted(glob.glob(os.path.join(root, "docs", "*.md"))):
    for line_no, commands in blocks(path):
        where = "%s:%d" % (os.path.relpath(path, root), line_no)
        for command, shown in commands:
            if command.startswith("#"):
                continue
            command = re.sub(r"^sudo ", "", command)
            try:
                out = subprocess.run(["bash", "-o", "pipefail", "-c", command], cwd=work, capture_output=True,
                                     text=True, timeout=120)
            except subprocess.TimeoutExpired:
                print("FAIL %s: %s: still running after 120 s" % (where, command))
                failed += 1
                break
            ran += 1
            printed = out.stdout + out.stderr
            if out.returncode:
                print("FAIL %s: %s: exit %d: %s" % (where, command, out.returncode, printed[-600:]))
                failed += 1
                break
            wanted = [s for s in shown if s.strip() and s.strip() != "..."]
            if command.startswith("build/ember"):
                missing = [s for s in wanted if ours(s) and label(s) not in printed]
                if missing:
                    print("FAIL %s: %s: the docs show lines it no longer prints: %s\n--- it printed:\n%s" %
                          (where, command, missing, printed[-1500:]))
                    failed += 1
            elif wanted and not printed.strip():
                print("FAIL %s: %s: printed nothing; the docs show output" % (where, command))
                failed += 1
        print("ok   %s (%d commands)" % (where, len(commands)))
print("%d commands run, %d failed" % (ran, failed))
sys.exit(1 if failed or not ran else 0)
