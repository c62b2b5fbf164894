// Shared by the browser tests: harness, an independent model of what the
// page should draw (decoder, transforms, merged trees, layout) computed from
// the JSON embedded in the page — deliberately sharing no code with it — and
// helpers that look at the page the way a person does (hover, read tooltips).
import { readFileSync } from 'node:fs';
import { chromium } from 'playwright-core';
import { unpackTables } from './tables.mjs';

// ------------------------------------------------------------ harness

let failures = 0;
export function failed() { return failures; }

export async function check(name, fn) {
  try {
    const note = await fn();
    console.log(`ok - ${name}${note ? ' # ' + note : ''}`);
  } catch (e) {
    failures++;
    const reason = String((e && e.message) || e).split('\n')[0];
    console.log(`not ok - ${name}: ${reason.length > 400 ? reason.slice(0, 400) + '…' : reason}`);
  }
}

export function assert(cond, msg) { if (!cond) throw new Error(msg); }

// A percentage shown with some decimals equals `expected` up to that rounding.
export function assertPercent(text, expected, what) {
  const m = /([\d.]+)%/.exec(text || '');
  assert(m, `${what}: no percentage in ${JSON.stringify(text)}`);
  const shown = parseFloat(m[1]), digits = (m[1].split('.')[1] || '').length;
  assert(Math.abs(shown - expected) <= 0.5 * 10 ** -digits + 1e-9,
    `${what}: shows ${m[1]}%, expected ${expected.toFixed(4)}%`);
}

export async function launch() {
  return chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
}

// Records dialogs and page errors of a page into the given arrays.
export function watch(page, dialogs, pageErrors) {
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push('console: ' + m.text()); });
}

// A browser with one 1280x800 page on `file`, ready, its dialogs and errors
// recorded: { browser, page, dialogs, errors }.
export async function openPage(file) {
  const browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const dialogs = [], errors = [];
  watch(page, dialogs, errors);
  await page.goto('file://' + file);
  await waitReady(page);
  return { browser, page, dialogs, errors };
}

export async function waitReady(page) {
  await page.waitForSelector('body[data-state]', { timeout: 30000 });
  const st = await page.evaluate(() => document.body.dataset.state);
  if (st !== 'ready') throw new Error(`state is ${st}: ${await page.evaluate(() => document.body.textContent.trim().slice(0, 200))}`);
}

// Waits until a scheduled redraw has happened.
export const settle = (page) => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));

// ------------------------------------------------------------ the embedded JSON

// The page's data, with its tables unpacked into the fields they hold:
// names, modules, frames, stacks, timeline, and base.stacks on a differential page.
export function readEmbeddedData(file) {
  const html = readFileSync(file, 'utf8');
  const m = html.match(/<script id="ember-data" type="application\/json">([\s\S]*?)<\/script>/);
  if (!m) throw new Error('no ember-data script in ' + file);
  const data = JSON.parse(m[1]);
  const { names, modules, frames, stacks, baseStacks, timeline } = unpackTables(data.tables);
  Object.assign(data, { names, modules, frames, stacks, timeline });
  if (data.base) data.base.stacks = baseStacks;
  return data;
}

// Independent decoder (deliberately not shared with the page).
export function decodeStacks(enc) {
  const out = [];
  let prev = [];
  for (let i = 0; i < enc.length;) {
    const prefix = enc[i], n = enc[i + 1];
    const frames = prev.slice(0, prefix).concat(enc.slice(i + 2, i + 2 + n));
    out.push({ frames, weight: enc[i + 2 + n] });
    prev = frames;
    i += n + 3;
  }
  return out;
}

// Stacks as lists of frame labels { name, kind, module } (root first), so
// transforms can rename frames.
export function labelledStacks(data, enc) {
  const labels = [];
  for (let f = 0; 3 * f < data.frames.length; f++) {
    labels.push({
      name: data.names[data.frames[3 * f]],
      kind: data.kinds[data.frames[3 * f + 1]] || 'unknown',
      module: data.modules[data.frames[3 * f + 2]] || '',
    });
  }
  return decodeStacks(enc).map((s) => ({ frames: s.frames.map((f) => labels[f]), weight: s.weight }));
}

// Frames are one frame when name, kind and module agree (name and kind only in a diff).
export const identity = (l, diff) => (diff ? l.name + '\0' + l.kind : l.name + '\0' + l.kind + '\0' + l.module);
export const meta = (l) => l.kind + (l.module ? ' · ' + l.module : '');
export const sumWeight = (stacks) => stacks.reduce((s, x) => s + x.weight, 0);
export const escapeRegExp = (s) => s.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&');

// ------------------------------------------------------------ transforms, written from their definitions

const hits = (re) => (l) => (re ? re.test(l.name) : true);
const same = (a, b) => a.name === b.name && a.kind === b.kind && a.module === b.module;

export const transforms = {
  filter: (stacks, re) => stacks.filter((s) => s.frames.some(hits(re))),
  remove: (stacks, re) => stacks.filter((s) => !s.frames.some(hits(re))),
  // JS replace semantics on every occurrence ($1 groups, $$ for a dollar).
  replace: (stacks, re, to) => {
    const g = new RegExp(re.source, 'g');
    return stacks.map((s) => ({ weight: s.weight, frames: s.frames.map((l) => ({ ...l, name: l.name.replace(g, to) })) }));
  },
  // Keep the stack up to and including its first (rootmost) match.
  above: (stacks, re) => stacks.map((s) => {
    const i = s.frames.findIndex(hits(re));
    return i < 0 ? s : { weight: s.weight, frames: s.frames.slice(0, i + 1) };
  }),
  // Drop everything rootward of the last (leafmost) match.
  below: (stacks, re) => stacks.map((s) => {
    let i = s.frames.length - 1;
    while (i >= 0 && !hits(re)(s.frames[i])) i--;
    return i < 0 ? s : { weight: s.weight, frames: s.frames.slice(i) };
  }),
  // A matching frame equal to the frame just below it goes.
  collapse: (stacks, re) => stacks.map((s) => ({
    weight: s.weight,
    frames: s.frames.filter((l, i) => !(i > 0 && same(s.frames[i - 1], l) && hits(re)(l))),
  })),
  // Repeatedly: take the first matching frame that occurred earlier in the
  // stack, and cut out everything after that earlier occurrence up to it.
  gaps: (stacks, re) => stacks.map((s) => {
    const frames = s.frames.slice();
    for (;;) {
      let cut = null;
      for (let j = 0; j < frames.length && !cut; j++) {
        if (!hits(re)(frames[j])) continue;
        const i = frames.findIndex((l) => same(l, frames[j]));
        if (i < j) cut = [i, j];
      }
      if (!cut) break;
      frames.splice(cut[0] + 1, cut[1] - cut[0]);
    }
    return { weight: s.weight, frames };
  }),
};

export const reverseStacks = (stacks) => stacks.map((s) => ({ weight: s.weight, frames: s.frames.slice().reverse() }));

// Sandwich: callers are the frames rootward of the function's last
// occurrence, nearest first; callees are the frames after its first one.
export function sandwichStacks(stacks, name, kind, callers) {
  const out = [];
  for (const s of stacks) {
    const is = (l) => l.name === name && l.kind === kind;
    if (callers) {
      let i = s.frames.length - 1;
      while (i >= 0 && !is(s.frames[i])) i--;
      if (i >= 0) out.push({ weight: s.weight, frames: s.frames.slice(0, i).reverse() });
    } else {
      const i = s.frames.findIndex(is);
      if (i >= 0) out.push({ weight: s.weight, frames: s.frames.slice(i + 1) });
    }
  }
  return out;
}

// ------------------------------------------------------------ merged tree and layout

const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
const byName = (a, b) => cmp(a.label.name, b.label.name) || cmp(a.label.kind, b.label.kind) || cmp(a.label.module, b.label.module);

// The tree the page should draw: siblings by name (or heaviest first), each
// node with x0 = weight offset of its left edge.
export function buildModel(stacks, { sort = 'name', diff = false, root = null } = {}) {
  const mk = (label, id, parent) => ({ label, id, parent, depth: parent ? parent.depth + 1 : 0, total: 0, self: 0, kids: new Map(), children: [], x0: 0 });
  const top = mk(root || { name: 'all', kind: 'root', module: '' }, '', null);
  for (const s of stacks) {
    let n = top;
    n.total += s.weight;
    for (const l of s.frames) {
      const id = identity(l, diff);
      let c = n.kids.get(id);
      if (!c) { c = mk(l, id, n); n.kids.set(id, c); }
      c.total += s.weight;
      n = c;
    }
    n.self += s.weight;
  }
  let maxDepth = 0, count = 0;
  const order = sort === 'weight' ? (a, b) => b.total - a.total || byName(a, b) : byName;
  const todo = [top];
  while (todo.length) {
    const n = todo.pop();
    count++;
    maxDepth = Math.max(maxDepth, n.depth);
    n.children = [...n.kids.values()].sort(order);
    let x = n.x0;
    for (const c of n.children) { c.x0 = x; x += c.total; todo.push(c); }
  }
  return { root: top, total: top.total, maxDepth, count, diff };
}

// Same path from the root (frame identities) in two models?
export function samePath(a, b) {
  for (; a && b; a = a.parent, b = b.parent) if (a.id !== b.id) return false;
  return !a && !b;
}

// The node of model m at the path of node n (of another model), or null.
export function lookup(m, n) {
  const ids = [];
  for (let a = n; a.parent; a = a.parent) ids.push(a.id);
  let x = m.root;
  for (let i = ids.length - 1; i >= 0 && x; i--) x = x.kids.get(ids[i]) || null;
  return x;
}

// Same merged tree (paths and weights)?
export function sameTree(a, b) {
  if (a.count !== b.count) return false;
  const todo = [[a.root, b.root]];
  while (todo.length) {
    const [x, y] = todo.pop();
    if (x.total !== y.total || x.kids.size !== y.kids.size) return false;
    for (const [id, c] of x.kids) { const d = y.kids.get(id); if (!d) return false; todo.push([c, d]); }
  }
  return true;
}

// Node drawn at weight offset w and depth d, or null.
export function modelAt(model, w, d) {
  let n = model.root;
  if (w < 0 || w >= n.total) return null;
  for (let i = 0; i < d; i++) {
    const c = n.children.find((k) => w >= k.x0 && w < k.x0 + k.total);
    if (!c) return null;
    n = c;
  }
  return n;
}

export function* nodes(model) {
  const todo = [model.root];
  while (todo.length) {
    const n = todo.pop();
    yield n;
    todo.push(...n.children);
  }
}

// Weight of stacks with a frame whose name matches, each stack once.
export const matchedShare = (stacks, re) => sumWeight(stacks.filter((s) => s.frames.some((l) => re.test(l.name)))) / sumWeight(stacks);

// ------------------------------------------------------------ looking at a canvas

// Moves the pointer over each canvas point (x, y in whole CSS px) and reads
// the tooltip. Dispatched as mouse events inside the page, so hundreds of
// points take one round trip; the page's own mousemove handler does the hit
// test. (Mouse events carry integer coordinates: callers pass whole pixels.)
export function hoverMany(page, canvas, points) {
  return page.evaluate(({ canvas, points }) => {
    const c = document.querySelector(canvas), r = c.getBoundingClientRect();
    const t = document.getElementById('tooltip');
    const line = (cls) => (t.querySelector(cls) || {}).textContent || '';
    const out = points.map(([x, y]) => {
      c.dispatchEvent(new MouseEvent('mousemove', { bubbles: true, clientX: r.left + x, clientY: r.top + y }));
      if (t.hidden) return null;
      return { name: line('.tt-name'), meta: line('.tt-meta'), weight: line('.tt-weight'), base: line('.tt-base'),
        now: line('.tt-new'), delta: line('.tt-delta'), fn: line('.tt-fn'), text: t.textContent };
    });
    c.dispatchEvent(new MouseEvent('mouseleave'));
    return out;
  }, { canvas, points });
}

export function canvasBox(page, canvas) {
  return page.evaluate((canvas) => {
    const r = document.querySelector(canvas).getBoundingClientRect();
    return { width: r.width, height: r.height };
  }, canvas);
}

// Row geometry found by hovering up (flame) or down (icicle) a column at x
// until the root row and the next one have been crossed.
export async function calibrate(page, canvas, icicle, x) {
  x = Math.round(x);
  const { height } = await canvasBox(page, canvas);
  const ys = [];
  for (let i = 1; i < Math.min(height, 120); i++) ys.push(icicle ? i : height - i);
  const tips = await hoverMany(page, canvas, ys.map((y) => [x, y]));
  const runs = [];
  tips.forEach((t, i) => {
    const key = t && t.name + '\n' + t.meta;
    const last = runs[runs.length - 1];
    if (last && last.key === key) last.end = ys[i];
    else runs.push({ key, start: ys[i], end: ys[i] });
  });
  const rows = runs.filter((r) => r.key !== null);
  assert(rows.length >= 2, `calibration at x=${x} found ${rows.length} rows`);
  const y0 = (rows[0].start + rows[0].end) / 2;
  const rowH = Math.abs(rows[1].start - rows[0].start);
  return { y0, rowH, icicle, rowY: (d) => (icicle ? y0 + d * rowH : y0 - d * rowH) };
}

// Hovers a grid of points over a canvas and compares each tooltip with the
// model: the same frame (name, kind · module) with the same share, or nothing
// where the model has nothing. Points within 1.5 px of a frame edge are
// skipped. `xs` adds columns (in CSS px) to the evenly spaced ones. With
// `versus` (another model), at least one point must show a different frame or
// weight there, so the check does see what changed.
export async function gridCheck(page, { canvas = '#flame', model, geometry, pctBase = model.total, columns = 11, xs = [], checkMeta = true, versus = null }) {
  const { width, height } = await canvasBox(page, canvas);
  const k = model.total / width;      // weight per CSS px
  // Whole pixels: mouse events carry integer coordinates.
  const cols = [];
  for (let i = 0; i < columns; i++) cols.push(Math.round(((i + 0.5) * width) / columns));
  cols.push(...xs.map(Math.round));
  const points = [], expect = [];
  for (let d = 0; d <= model.maxDepth + 1; d++) {
    const y = Math.round(geometry.rowY(d));
    if (y < 2 || y > height - 2) continue;
    for (const x of cols) {
      const n = modelAt(model, x * k, d);
      if (n !== modelAt(model, (x - 1.5) * k, d) || n !== modelAt(model, (x + 1.5) * k, d)) continue;
      points.push([x, y]);
      expect.push(n);
    }
  }
  const tips = await hoverMany(page, canvas, points);
  const bad = [];
  tips.forEach((t, i) => {
    const n = expect[i], where = `(${points[i][0].toFixed(0)},${points[i][1].toFixed(0)})`;
    if (!n) { if (t) bad.push(`${where}: expected nothing, tooltip ${JSON.stringify(t.name)}`); return; }
    if (!t) { bad.push(`${where}: expected ${JSON.stringify(n.label.name)}, no tooltip`); return; }
    if (t.name !== n.label.name) { bad.push(`${where}: tooltip ${JSON.stringify(t.name)}, expected ${JSON.stringify(n.label.name)}`); return; }
    if (checkMeta && n.depth > 0 && t.meta !== meta(n.label)) { bad.push(`${where}: meta ${JSON.stringify(t.meta)}, expected ${JSON.stringify(meta(n.label))}`); return; }
    try { assertPercent(t.weight, (100 * n.total) / pctBase, `${where} ${n.label.name}`); } catch (e) { bad.push(e.message); }
  });
  assert(points.length >= 10, `only ${points.length} usable grid points`);
  if (versus) {
    const kv = versus.total / width;
    const differs = points.filter(([x, y], i) => {
      const d = geometry.icicle ? (y - geometry.y0) / geometry.rowH : (geometry.y0 - y) / geometry.rowH;
      const m = modelAt(versus, x * kv, Math.round(d)), n = expect[i];
      return !n !== !m || (n && (!samePath(n, m) || n.total !== m.total));
    }).length;
    assert(differs > 0, 'no grid point differs from the model compared with: the change is not looked at');
  }
  assert(!bad.length, `${bad.length} of ${points.length} points differ, first: ${bad[0]}`);
  return points.length;
}

// Columns (whole CSS px) where model a draws, stable over ±1.5 px, something
// other than model b at some depth up to maxDepth: where a grid checking a
// sees the change. Up to `count`, spread over the width.
export function differingColumns(a, b, width, maxDepth, count = 8) {
  const column = (m, x) => {
    const k = m.total / width, out = [];
    for (const dx of [-1.5, 0, 1.5]) {
      const w = (x + dx) * k, col = [];
      let n = w >= 0 && w < m.total ? m.root : null;
      for (let d = 0; d <= maxDepth; d++) {
        col.push(n);
        n = n && (n.children.find((c) => w >= c.x0 && w < c.x0 + c.total) || null);
      }
      out.push(col);
    }
    return out;
  };
  const found = [];
  for (let x = 2; x < width - 2; x += 2) {
    const [a0, a1, a2] = column(a, x), [, b1] = column(b, x);
    for (let d = 1; d <= maxDepth; d++) {
      if (a0[d] !== a1[d] || a1[d] !== a2[d]) continue;
      const n = a1[d], m = b1[d];
      if (!n !== !m || (n && (!samePath(n, m) || n.total !== m.total))) { found.push(x); break; }
    }
  }
  if (found.length <= count) return found;
  return Array.from({ length: count }, (_, i) => found[Math.floor((i * found.length) / count)]);
}

// Canvas pixels as one string hash, for "the same view" comparisons.
export function canvasHash(page, canvas = '#flame') {
  return page.evaluate((canvas) => {
    const c = document.querySelector(canvas);
    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
    let h = 0x811c9dc5;
    for (let i = 0; i < d.length; i++) h = Math.imul(h ^ d[i], 16777619);
    return (h >>> 0).toString(16) + ':' + c.width + 'x' + c.height;
  }, canvas);
}

// RGB of the canvas pixel at CSS point (x, y).
export function pixelAt(page, canvas, x, y) {
  return page.evaluate(({ canvas, x, y }) => {
    const c = document.querySelector(canvas), k = c.width / c.getBoundingClientRect().width;
    const d = c.getContext('2d').getImageData(Math.round(x * k), Math.round(y * k), 1, 1).data;
    return [d[0], d[1], d[2]];
  }, { canvas, x, y });
}

// The RGB triples of one row of a canvas, a CSS pixel each.
export function pixelRow(page, canvas, y) {
  return page.evaluate(({ canvas, y }) => {
    const c = document.querySelector(canvas), k = c.width / c.getBoundingClientRect().width;
    const d = c.getContext('2d').getImageData(0, Math.round(y * k), c.width, 1).data;
    return Array.from({ length: Math.floor(c.width / k) }, (_, x) => {
      const i = 4 * Math.round(x * k);
      return [d[i], d[i + 1], d[i + 2]];
    });
  }, { canvas, y });
}

// Hue (degrees) and saturation (0..1) of an RGB triple.
export function hueOf([r, g, b]) {
  const max = Math.max(r, g, b), min = Math.min(r, g, b), c = max - min;
  if (c === 0) return { hue: 0, sat: 0 };
  let h;
  if (max === r) h = ((g - b) / c) % 6;
  else if (max === g) h = (b - r) / c + 2;
  else h = (r - g) / c + 4;
  return { hue: (h * 60 + 360) % 360, sat: c / max };
}
