// Drives an ember flamegraph page in headless Chromium the way a person would:
// look at it, hover, search, click, press keys. Expected values come from the
// JSON embedded in the page itself.
//
//   node tests/browser/flamegraph.test.mjs FILE.html [--screenshot out.png] [--search REGEX]
//
// The basics are checked here; transforms, reverse, sort, the function table,
// the sandwich view, URL state and saved defaults in features.mjs (run from
// here too). Differential pages: diff.test.mjs.
// Prints `ok - name` / `not ok - name: reason` per check; exits 1 on any failure.
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import { featureChecks } from './features.mjs';
import { assert, assertPercent, check, decodeStacks, failed, hoverMany, launch, readEmbeddedData } from './lib.mjs';

// Default matches nested frames (ksys_read above vfs_read) in the fixture and
// in ember's recordings of tests/workloads/syscall_loop.
const DEFAULT_SEARCH = '_read|Record';
const VIEWPORT = { width: 1280, height: 800 };

function parseArgs(argv) {
  const args = { file: null, screenshot: null, search: DEFAULT_SEARCH };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--screenshot') args.screenshot = argv[++i];
    else if (argv[i] === '--search') args.search = argv[++i];
    else if (!args.file) args.file = argv[i];
    else throw new Error('unexpected argument: ' + argv[i]);
  }
  if (!args.file) throw new Error('usage: flamegraph.test.mjs FILE.html [--screenshot out.png] [--search REGEX]');
  return args;
}

// ------------------------------------------------------------ expectations from the embedded JSON

function makeModel(data) {
  const stacks = decodeStacks(data.stacks);
  const total = stacks.reduce((s, x) => s + x.weight, 0);
  const name = (f) => data.names[data.frames[3 * f]];
  const kind = (f) => data.kinds[data.frames[3 * f + 1]];
  const module = (f) => data.modules[data.frames[3 * f + 2]];
  // What the tooltip's second line shows for frame f.
  const meta = (f) => kind(f) + (module(f) ? ' · ' + module(f) : '');
  // Weight of the node reached by a path of tooltip labels, root excluded.
  const pathWeight = (labels) => stacks
    .filter((s) => labels.every((l, d) => d < s.frames.length && name(s.frames[d]) === l.name && meta(s.frames[d]) === l.meta))
    .reduce((sum, s) => sum + s.weight, 0);
  // Share covered by matches, each stack counted once however many frames match.
  const matchedShare = (re) => stacks
    .filter((s) => s.frames.some((f) => re.test(name(f))))
    .reduce((sum, s) => sum + s.weight, 0) / total;
  const naiveShare = (re) => stacks
    .reduce((sum, s) => sum + s.weight * s.frames.filter((f) => re.test(name(f))).length, 0) / total;
  // Distinct outermost matches (by frame path from the root): the stops of
  // next / previous match.
  const matchStops = (re) => new Set(stacks.flatMap((s) => {
    const i = s.frames.findIndex((f) => re.test(name(f)));
    return i < 0 ? [] : [s.frames.slice(0, i + 1).join(',')];
  })).size;
  return { data, stacks, total, pathWeight, matchedShare, naiveShare, matchStops };
}

// ------------------------------------------------------------ page helpers

function pageHelpers(page) {
  let box = null;
  const h = {
    async canvasBox() { box = await page.locator('#flame').boundingBox(); return box; },
    // Tooltip after moving the pointer to canvas coordinates (x, y), or null.
    async hover(x, y) {
      await page.mouse.move(box.x + x, box.y + y);
      return page.evaluate(() => {
        const t = document.getElementById('tooltip');
        if (t.hidden) return null;
        const line = (c) => (t.querySelector(c) || {}).textContent || '';
        return { name: line('.tt-name'), meta: line('.tt-meta'), weight: line('.tt-weight'), zoom: line('.tt-zoom'), text: t.textContent };
      });
    },
    // Tooltips at many points in one round trip (whole pixels).
    hoverMany: (points) => hoverMany(page, '#flame', points.map(([x, y]) => [Math.round(x), Math.round(y)])),
    async click(x, y) { await page.mouse.click(box.x + x, box.y + y); await h.settle(); },
    // Waits until a scheduled redraw has happened.
    settle: () => page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))),
    visible: (sel) => page.locator(sel).isVisible(),
    text: (sel) => page.locator(sel).textContent(),
    measure: (name) => page.evaluate((n) => {
      const e = performance.getEntriesByName('ember:' + n).pop();
      return e ? e.duration : NaN;
    }, name),
    // Pixel statistics of the canvas as drawn.
    pixels: () => page.evaluate(() => {
      const c = document.getElementById('flame');
      const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      const counts = new Map();
      let magenta = 0;
      for (let i = 0; i < d.length; i += 4) {
        const key = (d[i] << 16) | (d[i + 1] << 8) | d[i + 2];
        counts.set(key, (counts.get(key) || 0) + 1);
        if (d[i] > 200 && d[i + 1] < 140 && d[i + 2] > 200) magenta++;
      }
      const [bg, bgCount] = [...counts.entries()].sort((a, b) => b[1] - a[1])[0];
      return { total: d.length / 4, painted: d.length / 4 - bgCount, colours: counts.size, magenta, bg };
    }),
  };
  return h;
}

// Walks up a column of the flame graph (root at the bottom) and returns up to
// `want` complete rows as { y (row centre), label, tip }, root first.
async function scanColumn(h, x, height, want) {
  const rows = [];
  let current = null;
  const ys = [];
  for (let i = 1; i < height; i += 2) ys.push(height - i);
  const tips = await h.hoverMany(ys.map((y) => [x, y]));
  for (let j = 0; j < ys.length && rows.length <= want; j++) {
    const y = ys[j], tip = tips[j];
    const key = tip && tip.name + '\n' + tip.meta;
    if (key === current) continue;
    if (rows.length) rows[rows.length - 1].endY = y;
    if (tip) rows.push({ startY: y, tip });
    current = key;
  }
  // Direct recursion stacks identical rows into one run: split runs by the
  // height of the root row (always a single row).
  const done = rows.filter((r) => r.endY !== undefined);
  const rowH = done.length ? done[0].startY - done[0].endY : 0;
  const split = [];
  for (const r of done) {
    const n = Math.max(1, Math.round((r.startY - r.endY) / rowH));
    for (let i = 0; i < n; i++) split.push({ startY: r.startY - i * rowH, endY: r.startY - (i + 1) * rowH, tip: r.tip });
  }
  return split.slice(0, want).map((r) => ({ y: (r.startY + r.endY) / 2, label: { name: r.tip.name, meta: r.tip.meta }, tip: r.tip }));
}

// ------------------------------------------------------------ checks

async function run(args) {
  const model = makeModel(readEmbeddedData(args.file));
  const browser = await launch();
  // One context, so pages opened by later checks share localStorage (saved defaults).
  const context = await browser.newContext({ viewport: VIEWPORT, colorScheme: 'light' });
  const page = await context.newPage();
  page.setDefaultTimeout(5000);
  const dialogs = [], pageErrors = [];
  page.on('dialog', (d) => { dialogs.push(d.message()); d.dismiss().catch(() => {}); });
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push('console: ' + m.text()); });
  const h = pageHelpers(page);
  let W = 0, H = 0, rows = null;
  const timings = {};

  await check('page loads and reports ready', async () => {
    const t0 = Date.now();
    await page.goto(pathToFileURL(resolve(args.file)).href);
    await page.waitForSelector('body[data-state]', { timeout: 30000 });
    const st = await page.evaluate(() => document.body.dataset.state);
    if (st !== 'ready') throw new Error(`state is ${st}: ${await page.evaluate(() => document.getElementById('chart').textContent.trim())}`);
    for (const n of ['parse', 'decode', 'build', 'layout', 'first-draw', 'ready']) timings[n] = await h.measure(n);
    const box = await h.canvasBox();
    W = box.width; H = box.height;
    return `load ${Date.now() - t0} ms`;
  });

  await check('header shows title, event and total', async () => {
    const title = await h.text('#title');
    assert(title === model.data.title, `title ${JSON.stringify(title)} != ${JSON.stringify(model.data.title)}`);
    assert(await page.title() === model.data.title, 'document title differs');
    const summary = await h.text('#summary');
    assert(summary.includes(model.data.event), `summary lacks event: ${summary}`);
    if (model.data.unit === 'samples') {
      const total = model.total.toLocaleString('en-US');
      assert(summary.includes(total), `summary lacks total ${total}: ${summary}`);
    }
    const info = await h.text('#info');
    for (const k of Object.keys(model.data.info || {})) assert(info.includes(k + ':'), `info lacks ${k}: ${info}`);
  });

  await check('canvas is painted', async () => {
    const px = await h.pixels();
    assert(px.painted / px.total > 0.02, `only ${px.painted} of ${px.total} pixels painted`);
    assert(px.colours >= 6, `only ${px.colours} distinct colours`);
    assert(px.magenta === 0, `magenta (search) pixels before any search: ${px.magenta}`);
  });

  await check('canvas stays viewport-sized; deep stacks scroll', async () => {
    const m = await page.evaluate(() => {
      const c = document.getElementById('flame'), chart = document.getElementById('chart');
      return { ch: c.height, vh: chart.clientHeight, dpr: devicePixelRatio, sh: chart.scrollHeight };
    });
    assert(m.ch <= Math.ceil(m.vh * m.dpr) + 1, `canvas ${m.ch}px tall for a ${m.vh}px viewport`);
    const deepest = Math.max(...model.stacks.map((s) => s.frames.length));
    if (deepest * 12 < m.vh) return 'SKIP profile too shallow to scroll';
    assert(m.sh > m.vh, `content ${m.sh}px does not scroll past ${m.vh}px with depth ${deepest}`);
  });

  await check('hover shows name and percent', async () => {
    // Deep enough to reach where real profiles branch (often 10+ frames up).
    rows = await scanColumn(h, W / 2, H, 40);
    assert(rows.length >= 3, `only ${rows.length} rows found in the middle column`);
    assert(rows[0].label.name === 'all', `bottom row is ${rows[0].label.name}, expected all`);
    assertPercent(rows[0].tip.weight, 100, 'root');
    for (let d = 1; d < rows.length; d++) {
      const labels = rows.slice(1, d + 1).map((r) => r.label);
      const expected = (100 * model.pathWeight(labels)) / model.total;
      assert(expected > 0, `tooltip names ${JSON.stringify(rows[d].label)} are not a frame path of the profile`);
      assertPercent(rows[d].tip.weight, expected, `depth ${d} (${rows[d].label.name})`);
    }
  });

  await check('root children are merged and ordered by name', async () => {
    const names = [];
    const xs = [];
    for (let x = 1; x < W; x += 3) xs.push(x);
    for (const tip of await h.hoverMany(xs.map((x) => [x, rows[1].y])))
      if (tip && tip.name !== names[names.length - 1]) names.push(tip.name);
    const firstFrames = new Set(model.stacks.map((s) => s.frames[0]));
    assert(names.length >= 1, 'no frame found in the row above the root');
    assert(names.length <= firstFrames.size, `${names.length} frames drawn for ${firstFrames.size} distinct root children`);
    for (let i = 1; i < names.length; i++) {
      assert(names[i - 1] < names[i], `${JSON.stringify(names[i - 1])} is left of ${JSON.stringify(names[i])}`);
    }
  });

  await check('regex search highlights and reports matched share', async () => {
    const re = new RegExp(args.search);
    const expected = 100 * model.matchedShare(re);
    assert(expected > 0, `fixture has no frame matching /${args.search}/`);
    await page.fill('#search', args.search);
    await h.settle();
    assert(await h.visible('#matched'), 'matched readout hidden');
    const text = await h.text('#matched');
    assert(/^matched [\d.]+%$/.test(text), `readout is ${JSON.stringify(text)}`);
    assertPercent(text, expected, 'matched');
    timings.search = await h.measure('search');
    timings.searchDraw = await h.measure('draw');
    const px = await h.pixels();
    assert(px.magenta > 0, 'no highlighted (magenta) pixels after search');
    const naive = 100 * model.naiveShare(re);
    return Math.abs(naive - expected) > 0.01 ? `nested matches not double-counted (naive ${naive.toFixed(2)}%)` : '';
  });

  await check('Enter / Shift+Enter in search zoom to the next / previous match', async () => {
    const re = new RegExp(args.search);
    const stops = model.matchStops(re);
    await page.focus('#search');
    await page.keyboard.press('Enter');
    await h.settle();
    const first = await h.text('#matched');
    assert(first.endsWith(` · 1/${stops}`), `readout ${JSON.stringify(first)}, expected 1/${stops}`);
    const crumbs = await page.locator('#crumbs button').allTextContents();
    assert(re.test(crumbs[crumbs.length - 1]), `zoomed to ${JSON.stringify(crumbs[crumbs.length - 1])}, not a match`);
    if (stops > 1) {
      await page.keyboard.press('Enter');
      await h.settle();
      assert((await h.text('#matched')).endsWith(` · 2/${stops}`), 'Enter did not move to match 2');
      await page.keyboard.press('Shift+Enter');
      await h.settle();
      assert((await h.text('#matched')).endsWith(` · 1/${stops}`), 'Shift+Enter did not move back to match 1');
    }
    await page.keyboard.press('Escape');  // leave the box
    await page.click('#reset');
    await h.settle();
    return `${stops} stops`;
  });

  await check('invalid regex shows an error, no exception', async () => {
    await page.fill('#search', '([');
    await h.settle();
    assert(await h.visible('#search-error'), 'no error shown');
    assert(!(await h.visible('#matched')), 'matched readout still shown');
    assert(pageErrors.length === 0, `page error: ${pageErrors[0]}`);
    await page.fill('#search', '');
    await h.settle();
    assert(!(await h.visible('#search-error')), 'error stays after clearing');
    assert((await h.pixels()).magenta === 0, 'highlight stays after clearing');
  });

  const zoomedSpansWidth = async (row) => {
    const left = await h.hover(2, row.y), right = await h.hover(W - 3, row.y);
    return left && right && left.name === row.label.name && right.name === row.label.name &&
      left.meta === row.label.meta && right.meta === row.label.meta;
  };

  // The zoom target: the shallowest frame in the middle column that is not
  // already full width, with a frame above it for the breadcrumb check.
  let t = 0;
  await check('click zooms the frame to full width', async () => {
    for (t = 1; t < rows.length - 1 && (await zoomedSpansWidth(rows[t])); t++);
    assert(t < rows.length - 1, 'every frame in the middle column already spans the full width');
    const row = rows[t];
    await h.click(W / 2, row.y);
    timings.zoomDraw = await h.measure('draw');
    assert(await zoomedSpansWidth(row), `${row.label.name} does not span the width after the click`);
    const tip = await h.hover(W / 2, row.y);
    assert(/100\.00% of zoomed frame/.test(tip.zoom), `tooltip lacks zoom share: ${tip.text}`);
    assert(await h.visible('#reset'), 'reset button hidden');
    assert(await h.visible('#crumbs'), 'breadcrumbs hidden');
    const crumbs = await page.locator('#crumbs button').allTextContents();
    const expected = rows.slice(0, t + 1).map((r) => r.label.name);
    assert(JSON.stringify(crumbs) === JSON.stringify(expected), `breadcrumbs ${JSON.stringify(crumbs)}, expected ${JSON.stringify(expected)}`);
  });

  await check('reset restores the full view', async () => {
    await page.click('#reset');
    await h.settle();
    assert(!(await zoomedSpansWidth(rows[t])), 'frame still spans the full width');
    assert((await h.hover(W / 2, rows[t].y)).name === rows[t].label.name, 'frame moved after reset');
    assert(!(await h.visible('#reset')) && !(await h.visible('#crumbs')), 'reset/breadcrumbs still visible');
  });

  await check('breadcrumb click zooms out one level', async () => {
    await h.click(W / 2, rows[t + 1].y);
    assert(await zoomedSpansWidth(rows[t + 1]), 'deeper zoom failed');
    await page.locator('#crumbs button').nth(t).click();
    await h.settle();
    assert(await zoomedSpansWidth(rows[t]), `${rows[t].label.name} not full width after breadcrumb click`);
    assert(await page.locator('#crumbs button').count() === t + 1, 'breadcrumbs not shortened');
  });

  await check('Escape and clicking the root reset the zoom', async () => {
    await page.keyboard.press('Escape');
    await h.settle();
    assert(!(await h.visible('#reset')), 'Escape did not reset');
    await h.click(W / 2, rows[t].y);
    assert(await h.visible('#reset'), 'zoom failed');
    await h.click(W / 2, rows[0].y);
    assert(!(await h.visible('#reset')), 'root click did not reset');
    assert(!(await zoomedSpansWidth(rows[t])), 'frame still spans the full width');
  });

  await check('injected frame names render as text', async () => {
    const htmlish = new Set(model.data.names.filter((n) => /[<>&]/.test(n)));
    // Nothing to look for (most recordings): no need to sweep three rows.
    if (!htmlish.size) return 'SKIP no HTML-like names in this profile';
    const before = await page.evaluate(() => document.querySelectorAll('img, b, i, iframe, script').length);
    const seen = new Set();
    for (const row of rows.slice(1, 4)) {
      const xs = [];
      for (let x = 2; x < W; x += 6) xs.push(x);
      const tips = await h.hoverMany(xs.map((x) => [x, row.y]));
      for (let i = 0; i < xs.length && seen.size < htmlish.size; i++) {
        const x = xs[i], tip = tips[i];
        if (tip && htmlish.has(tip.name) && !seen.has(tip.name)) {
          seen.add(tip.name);
          await h.click(x, row.y);
          const crumbs = await page.locator('#crumbs button').allTextContents();
          assert(crumbs.includes(tip.name), `breadcrumbs ${JSON.stringify(crumbs)} lack ${tip.name}`);
          await page.keyboard.press('Escape');
        }
      }
    }
    const after = await page.evaluate(() => document.querySelectorAll('img, b, i, iframe, script').length);
    assert(after === before, `elements appeared: ${before} -> ${after}`);
    assert(dialogs.length === 0, `dialog fired: ${dialogs[0]}`);
    assert(seen.size > 0, `none of ${htmlish.size} HTML-like names found in the first rows`);
    return `${seen.size} shown literally`;
  });

  await check('icicle toggle puts the root at the top', async () => {
    await page.click('#orient');
    await h.settle();
    const top = await h.hover(W / 2, 10);
    assert(top && top.name === 'all', `top row is ${top && top.name}`);
    await page.click('#orient');
    await h.settle();
    const bottom = await h.hover(W / 2, rows[0].y);
    assert(bottom && bottom.name === 'all', `bottom row is ${bottom && bottom.name} after toggling back`);
  });

  await check('dark mode toggle', async () => {
    const bg = () => page.evaluate(() => getComputedStyle(document.body).backgroundColor);
    const before = await bg(), pxBefore = await h.pixels();
    await page.click('#theme');
    await h.settle();
    const after = await bg(), pxAfter = await h.pixels();
    assert(before !== after, 'page background unchanged');
    assert(pxBefore.bg !== pxAfter.bg, 'canvas background unchanged');
    await page.click('#theme');
    await h.settle();
  });

  await check('keyboard: / and Ctrl+F focus search, ? shows help', async () => {
    const focused = () => page.evaluate(() => document.activeElement && document.activeElement.id);
    await page.locator('#title').click();   // move focus off the search box
    await page.keyboard.press('/');
    assert(await focused() === 'search', '/ did not focus search');
    await page.keyboard.press('Escape');
    await page.keyboard.press('Control+f');
    assert(await focused() === 'search', 'Ctrl+F did not focus search');
    await page.keyboard.press('Escape');
    await page.keyboard.press('?');
    assert(await h.visible('#help'), '? did not show help');
    await page.keyboard.press('Escape');
    assert(!(await h.visible('#help')), 'Escape did not close help');
  });

  await featureChecks({ page, file: args.file, data: model.data, pageErrors, dialogs });

  await check('a page whose packed tables are damaged, or a template without data, says so instead of drawing', async () => {
    const html = readFileSync(args.file, 'utf8');
    const tables = html.match(/"tables":"([^"]*)"/)[1];
    const mid = tables.length >> 1;
    const damaged = html.replace(tables, tables.slice(0, mid) + (tables[mid] === 'A' ? 'B' : 'A') + tables.slice(mid + 1));
    const template = html.replace(/(<script id="ember-data" type="application\/json">)[\s\S]*?(<\/script>)/, '$1@EMBER_DATA@$2');
    const notes = [];
    for (const [name, text, want] of [['damaged', damaged, /damaged/], ['template', template, /no profile data/]]) {
      const file = join(tmpdir(), `ember-${name}-${process.pid}.html`);
      writeFileSync(file, text);
      const p = await context.newPage();
      try {
        await p.goto(pathToFileURL(file).href);
        await p.waitForSelector('body[data-state]', { timeout: 10000 });
        const st = await p.evaluate(() => document.body.dataset.state);
        const message = (await p.evaluate(() => document.getElementById('chart').textContent)).trim();
        assert(st === 'error', `${name}: state ${st}`);
        assert(want.test(message), `${name}: message '${message}'`);
        notes.push(`${name}: ${message}`);
      } finally {
        await p.close();
        unlinkSync(file);
      }
    }
    return notes.join('; ');
  });

  await check('no dialog fired', async () => { assert(dialogs.length === 0, `dialogs: ${JSON.stringify(dialogs)}`); });
  await check('no page errors', async () => {
    assert(pageErrors.length === 0, `${pageErrors.length} error(s), first: ${pageErrors[0]}`);
  });

  const fmt = (v) => (Number.isFinite(v) ? v.toFixed(1) : '?');
  console.log(`# timings ms: parse ${fmt(timings.parse)}, decode ${fmt(timings.decode)}, build ${fmt(timings.build)}, ` +
    `layout ${fmt(timings.layout)}, first draw ${fmt(timings['first-draw'])}, ready (since navigation) ${fmt(timings.ready)}; ` +
    `search ${fmt(timings.search)} + draw ${fmt(timings.searchDraw)}; zoom draw ${fmt(timings.zoomDraw)}`);

  if (args.screenshot) {
    await page.fill('#search', args.search);
    await h.settle();
    await page.screenshot({ path: args.screenshot });
    console.log(`# screenshot ${args.screenshot}`);
  }
  await browser.close();
}

const args = parseArgs(process.argv.slice(2));
run(args).then(() => {
  console.log(failed() ? `# ${failed()} check(s) failed` : '# all checks passed');
  process.exit(failed() ? 1 : 0);
}, (e) => {
  console.log(`not ok - harness: ${e && e.stack || e}`);
  process.exit(1);
});
