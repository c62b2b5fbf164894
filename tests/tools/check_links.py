#!/usr/bin/env python3
"""Check every relative link and anchor in README.md and docs/*.md: the
file must exist and the anchor must be a heading of it (GitHub's slugs).
Usage: python3 tests/tools/check_links.py [ROOT] (default: the current directory)."""
import os, re, sys, glob
root = sys.argv[1] if len(sys.argv) > 1 else '.'

def slug(h):
    h = re.sub(r'\[([^\]]*)\]\([^)]*\)', r'\1', h)   # links in headings: their text
    s = h.strip().lower()
    s = re.sub(r'[^\w\- ]', '', s)
    return s.replace(' ', '-')

def anchors(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence; continue
        if fence: continue
        m = re.match(r'(#{1,6}) (.*)', line.rstrip('\n'))
        if m:
            s = slug(m.group(2)); n = seen.get(s, 0); seen[s] = n + 1
            out.add(s if n == 0 else f'{s}-{n}')
        for a in re.findall(r'<a (?:name|id)="([^"]+)"', line): out.add(a)
    return out

def links(path):
    fence = False
    for no, line in enumerate(open(path, encoding='utf-8'), 1):
        if line.startswith('```'):
            fence = not fence; continue
        if fence: continue
        line = re.sub(r'`[^`]*`', lambda m: ' ' * len(m.group(0)) if '](' not in m.group(0) else m.group(0), line)
        for m in re.finditer(r'\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)\)', line):
            yield no, m.group(1)

files = [os.path.join(root, 'README.md')] + sorted(glob.glob(os.path.join(root, 'docs', '*.md')))
bad = total = 0
cache = {}
for f in files:
    for no, target in links(f):
        total += 1
        if re.match(r'[a-z][a-z0-9+.-]*:', target):   # http:, mailto: ...: not checked
            continue
        path, _, frag = target.partition('#')
        dest = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(dest):
            print(f'{f}:{no}: {target}: no such file'); bad += 1; continue
        if frag:
            if not dest.endswith('.md'):
                print(f'{f}:{no}: {target}: anchor into a non-Markdown file'); bad += 1; continue
            if dest not in cache: cache[dest] = anchors(dest)
            if frag not in cache[dest]:
                print(f'{f}:{no}: {target}: no heading with anchor #{frag}'); bad += 1
print(f'{len(files)} files, {total} links, {bad} broken')
sys.exit(1 if bad else 0)
