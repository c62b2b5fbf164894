// A differential flamegraph page (JSON with "base") in headless Chromium,
// looked at the way a person would: hover frames, read the colours and the
// tooltips, toggle normalise and the base shape, transform, reverse, search.
// Expected values come from an independent model of the embedded JSON.
//
//   node tests/browser/make_fixture.mjs /tmp/diff.html --diff
//   node tests/browser/diff.test.mjs /tmp/diff.html
//
// The frames looked at are found from the data: the most grown, the most
// shrunk, the widest NEW-only and the widest vanished (BASE-only) path; in
// the fixture those are app::Diff::growing(), shrinking(), added(), removed().
// Prints `ok - name` / `not ok - name: reason`; exits 1 on any failure.
// (On `make_fixture.mjs --big --diff` pages give node a larger heap for the
// model: node --max-old-space-size=8192 ...)
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';
import {
  assert, assertPercent, buildModel, calibrate, canvasBox, check, escapeRegExp, failed, hoverMany, hueOf, labelledStacks,
  launch, lookup, matchedShare, nodes, pixelAt, readEmbeddedData, reverseStacks, settle, transforms, waitReady, watch,
} from './lib.mjs';

const VIEWPORT = { width: 1280, height: 800 };

// ------------------------------------------------------------ expectations

// Change of node n (in `shown`) against the same path in `other`, NEW minus BASE.
function change(n, shown, other, shownIsNew, normalise) {
  const m = lookup(other, n);
  const here = n.total, there = m ? m.total : -1;
  const v = shownIsNew
    ? { now: here, nowAll: shown.total, base: there, baseAll: other.total }
    : { now: there, nowAll: other.total, base: here, baseAll: shown.total };
  const a = Math.max(v.now, 0), b = Math.max(v.base, 0);
  v.pp = 100 * (a / v.nowAll - b / v.baseAll);
  v.abs = a - b * (normalise ? v.nowAll / v.baseAll : 1);
  return v;
}

const pathNames = (n) => { const out = []; for (let a = n; a.parent; a = a.parent) out.unshift(a.label.name); return out; };

// Tooltip lines: "base: 1,234 samples — 1.74% of base", "Δ +12 samples · +6.96 pp …".
function parseSide(text) {
  if (/path absent/.test(text)) return null;
  const m = /: ([\d,]+) samples? — ([\d.]+)% of/.exec(text);
  assert(m, `cannot read ${JSON.stringify(text)}`);
  return { value: Number(m[1].replace(/,/g, '')), share: parseFloat(m[2]) };
}

function parseDelta(text) {
  const m = /Δ ([+−±])([\d,]+) samples? · ([+−±])([\d.]+) pp/.exec(text);
  assert(m, `cannot read delta ${JSON.stringify(text)}`);
  const sign = (s) => (s === '−' ? -1 : s === '+' ? 1 : 0);
  return { abs: sign(m[1]) * Number(m[2].replace(/,/g, '')), pp: sign(m[3]) * parseFloat(m[4]) };
}

function assertTooltip(tip, v, what) {
  const base = parseSide(tip.base), now = parseSide(tip.now), d = parseDelta(tip.delta);
  if (v.base < 0) assert(base === null, `${what}: base should be absent: ${tip.base}`);
  else {
    assert(base && base.value === v.base, `${what}: base ${tip.base}, expected ${v.base}`);
    assertPercent(tip.base, (100 * v.base) / v.baseAll, `${what} base share`);
  }
  if (v.now < 0) assert(now === null, `${what}: new should be absent: ${tip.now}`);
  else {
    assert(now && now.value === v.now, `${what}: new ${tip.now}, expected ${v.now}`);
    assertPercent(tip.now, (100 * v.now) / v.nowAll, `${what} new share`);
  }
  assert(Math.abs(d.pp - v.pp) <= 0.005 + 1e-9, `${what}: Δ ${d.pp} pp, expected ${v.pp.toFixed(4)}`);
  assert(Math.abs(d.abs - v.abs) <= 0.5 + 1e-9, `${what}: Δ ${d.abs}, expected ${v.abs.toFixed(2)}`);
}

// Hue families of the page's diff colours.
const COLOURS = {
  red: (h) => h.sat > 0.25 && (h.hue < 12 || h.hue > 348),
  blue: (h) => h.sat > 0.25 && h.hue > 200 && h.hue < 235,
  teal: (h) => h.sat > 0.25 && h.hue > 150 && h.hue < 185,
  amber: (h) => h.sat > 0.25 && h.hue > 30 && h.hue < 52,
  neutral: (h) => h.sat < 0.12,
};

// ------------------------------------------------------------ checks

async function run(file) {
  const data = readEmbeddedData(file);
  assert(data.base && Array.isArray(data.base.stacks), `${file} is not a differential page (no "base")`);
  const now = labelledStacks(data, data.stacks), base = labelledStacks(data, data.base.stacks);
  const N = buildModel(now, { diff: true }), B = buildModel(base, { diff: true });

  // The frames to look at, each at least 2% of its parent (visible once zoomed to it).
  const visible = (n) => n.depth >= 1 && n.depth <= 25 && n.total / n.parent.total >= 0.02;
  let grown = null, shrunk = null, added = null, vanished = null;
  for (const n of nodes(N)) {
    if (!visible(n)) continue;
    const v = change(n, N, B, true, true);
    // Ties (a frame and its only child) go to the shallower frame.
    if (v.base < 0) { if (!added || n.total > added.n.total || (n.total === added.n.total && n.depth < added.n.depth)) added = { n, v }; continue; }
    const better = (o, sign) => !o || sign * (v.pp - o.v.pp) > 1e-9 || (Math.abs(v.pp - o.v.pp) <= 1e-9 && n.depth < o.n.depth);
    if (better(grown, 1)) grown = { n, v };
    if (better(shrunk, -1)) shrunk = { n, v };
  }
  for (const n of nodes(B)) {
    if (visible(n) && !lookup(N, n) && (!vanished || n.total > vanished.n.total || (n.total === vanished.n.total && n.depth < vanished.n.depth))) {
      vanished = { n, v: change(n, B, N, false, true) };
    }
  }

  const browser = await launch();
  const context = await browser.newContext({ viewport: VIEWPORT, colorScheme: 'light' });
  const dialogs = [], pageErrors = [];
  const url = pathToFileURL(resolve(file)).href;
  const open = async (hash = '') => {
    const p = await context.newPage();
    watch(p, dialogs, pageErrors);
    await p.goto(url + hash);
    await waitReady(p);
    await settle(p);
    return p;
  };
  const zoomHash = (n) => '#zoom=' + encodeURIComponent(JSON.stringify(pathNames(n.parent)));

  // Hovers node n of model M, zoomed to its parent; returns tooltip and pixel colour.
  async function inspect(page, n, M, icicle = false) {
    const { width } = await canvasBox(page, '#flame');
    const p = n.parent;
    const x = Math.round(((n.x0 - p.x0 + n.total / 2) / p.total) * width);
    const g = await calibrate(page, '#flame', icicle, x);
    const y = Math.round(g.rowY(n.depth));
    const [tip] = await hoverMany(page, '#flame', [[x, y]]);
    assert(tip, `no tooltip at ${n.label.name} (${x},${y})`);
    assert(tip.name === n.label.name, `tooltip names ${JSON.stringify(tip.name)}, expected ${JSON.stringify(n.label.name)}`);
    return { tip, hue: hueOf(await pixelAt(page, '#flame', x, y)), x, y, g };
  }

  let page = null;
  await check('diff page loads; labels, normalise stated, legend explains total share', async () => {
    page = await open();
    const labels = await page.textContent('#diff-labels');
    assert(labels.includes(data.base.label) && labels.includes(data.label), `labels ${JSON.stringify(labels)}`);
    assert(await page.getAttribute('#normalise', 'aria-pressed') === 'true', 'normalise is not on by default');
    const mode = await page.textContent('#diff-mode');
    assert(/normalised/.test(mode) && (await page.locator('#diff-mode').isVisible()), `mode text ${JSON.stringify(mode)}`);
    const why = await page.textContent('#diff-why');
    assert(/total/.test(why) && /width/.test(why) && /self/.test(why) && (await page.locator('#diff-why').isVisible()), `legend ${JSON.stringify(why)}`);
    const summary = await page.textContent('#summary');
    assert(summary.includes(N.total.toLocaleString('en-US')) && summary.includes(B.total.toLocaleString('en-US')), `summary ${summary}`);
  });

  await check('the title shows whole, both files named (the controls make way)', async () => {
    const title = await page.evaluate(() => {
      const h = document.querySelector('#title');
      return { text: h.textContent, cut: h.scrollWidth > h.clientWidth, doc: document.title };
    });
    assert(title.text === data.title && title.doc === data.title, `title ${JSON.stringify(title)}`);
    assert(!title.cut, `the title is cut short at ${VIEWPORT.width} px: ${JSON.stringify(title.text)}`);
  });

  const cases = [['grown frame is red', grown, 'red'], ['shrunk frame is blue', shrunk, 'blue'], ['NEW-only frame is teal', added, 'teal']];
  for (const [title, c, colour] of cases) {
    await check(`${title}; tooltip shows base, new and Δ`, async () => {
      assert(c, 'no such frame in this diff');
      if (colour === 'red') assert(c.v.pp > 0, `largest change ${c.v.pp} pp is not growth`);
      if (colour === 'blue') assert(c.v.pp < 0, `smallest change ${c.v.pp} pp is not a shrink`);
      const p = await open(zoomHash(c.n));
      const { tip, hue } = await inspect(p, c.n, N);
      assert(COLOURS[colour](hue), `colour hue ${hue.hue.toFixed(0)}° sat ${hue.sat.toFixed(2)} is not ${colour}`);
      assertTooltip(tip, c.v, c.n.label.name);
      if (colour === 'teal') assert(/new path/.test(tip.delta), `tooltip does not say new: ${tip.delta}`);
      await p.close();
      return `${c.n.label.name}: ${tip.delta}`;
    });
  }

  await check('normalise off: raw Δ as computed, colours follow raw weights', async () => {
    const c = shrunk;
    const p = await open(zoomHash(c.n));
    const { hue: rootBefore } = await (async () => {
      const { width } = await canvasBox(p, '#flame');
      const g = await calibrate(p, '#flame', false, width / 2);
      return { hue: hueOf(await pixelAt(p, '#flame', 3, g.y0)) };
    })();
    await p.click('#normalise');
    await settle(p);
    assert(await p.getAttribute('#normalise', 'aria-pressed') === 'false', 'normalise still pressed');
    assert(/raw/.test(await p.textContent('#diff-mode')), 'mode text does not say raw');
    const raw = change(c.n, N, B, true, false);
    const { tip, g } = await inspect(p, c.n, N);
    assertTooltip(tip, raw, c.n.label.name);
    const before = change(c.n, N, B, true, true);
    assert(Math.abs(raw.abs - before.abs) > 1, 'fixture gives no difference between raw and normalised Δ');
    // The root compares totals: unchanged when normalised, by the totals' change when raw.
    const rootAfter = hueOf(await pixelAt(p, '#flame', 3, g.y0));
    const grew = N.total > B.total;
    assert(COLOURS.neutral(rootBefore), `normalised root is coloured (sat ${rootBefore.sat.toFixed(2)})`);
    assert(N.total === B.total || COLOURS[grew ? 'red' : 'blue'](rootAfter), `raw root hue ${rootAfter.hue.toFixed(0)}° is not ${grew ? 'red' : 'blue'}`);
    const link = p.url();
    assert(/normalise=0/.test(link), `URL lacks normalise=0: ${link}`);
    await p.close();
    return `${c.n.label.name}: normalised Δ ${before.abs.toFixed(0)} -> raw ${tip.delta}`;
  });

  await check('base shape shows the vanished frame (amber), with its values', async () => {
    assert(vanished, 'no vanished frame in this diff');
    // Zoomed within BASE's shape from the start: the path does not exist in NEW's.
    const p = await open(zoomHash(vanished.n) + '&shape=base');
    assert(await p.getAttribute('#shape', 'aria-pressed') === 'true', 'base shape not pressed');
    assert(/BASE/.test(await p.textContent('#diff-mode')), 'mode text does not name BASE');
    const { tip, hue } = await inspect(p, vanished.n, B);
    assert(COLOURS.amber(hue), `colour hue ${hue.hue.toFixed(0)}° sat ${hue.sat.toFixed(2)} is not amber`);
    assertTooltip(tip, vanished.v, vanished.n.label.name);
    assert(/vanished/.test(tip.delta), `tooltip does not say vanished: ${tip.delta}`);
    // The same rule, inverted view: the shrunk frame is still blue in BASE's shape.
    const s = lookup(B, shrunk.n);
    if (s && s.parent === vanished.n.parent) {
      const r = await inspect(p, s, B);
      assert(COLOURS.blue(r.hue), `shrunk frame in base shape: hue ${r.hue.hue.toFixed(0)}°`);
      assertTooltip(r.tip, change(s, B, N, false, true), s.label.name);
    }
    await p.close();
    return `${vanished.n.label.name}: ${tip.delta}`;
  });

  await check('transforms apply to both profiles (remove the heaviest other root child)', async () => {
    const onPath = pathNames(shrunk.n)[0];
    const other = N.root.children.filter((c) => c.label.name !== onPath).sort((a, b) => b.total - a.total)[0];
    assert(other, 'no other root child');
    const re = new RegExp('^' + escapeRegExp(other.label.name) + '$');
    const N2 = buildModel(transforms.remove(now, re), { diff: true }), B2 = buildModel(transforms.remove(base, re), { diff: true });
    const n = lookup(N2, shrunk.n);
    assert(n, 'shrunk frame gone after the transform');
    const p = await open(zoomHash(shrunk.n));
    await p.click('#tf-btn');
    await p.selectOption('#tf-kind', 'remove');
    await p.fill('#tf-re', re.source);
    await p.click('#tf-add');
    await settle(p);
    const { tip } = await inspect(p, n, N2);
    const v = change(n, N2, B2, true, true);
    assertTooltip(tip, v, n.label.name);
    assert(Math.abs(v.pp - shrunk.v.pp) > 0.01, 'transform did not change the expected Δ');
    await p.close();
    return `without ${other.label.name}: ${n.label.name} ${shrunk.v.pp.toFixed(2)} pp -> ${v.pp.toFixed(2)} pp`;
  });

  await check('reverse applies to both profiles', async () => {
    const Nr = buildModel(reverseStacks(now), { diff: true }), Br = buildModel(reverseStacks(base), { diff: true });
    const p = await open('#reverse=1');
    assert(await p.getAttribute('#reverse', 'aria-pressed') === 'true', 'reverse not on');
    const { width } = await canvasBox(p, '#flame');
    const kids = Nr.root.children.filter((c) => (c.total / Nr.total) * width > 8).slice(0, 12);
    const g = await calibrate(p, '#flame', false, ((kids[0].x0 + kids[0].total / 2) / Nr.total) * width);
    const pts = kids.map((c) => [Math.round(((c.x0 + c.total / 2) / Nr.total) * width), Math.round(g.rowY(1))]);
    const tips = await hoverMany(p, '#flame', pts);
    tips.forEach((t, i) => {
      assert(t && t.name === kids[i].label.name, `root child ${i}: ${t && t.name}, expected ${kids[i].label.name}`);
      assertTooltip(t, change(kids[i], Nr, Br, true, true), kids[i].label.name);
    });
    await p.close();
    return `${kids.length} leaf frames checked`;
  });

  await check('search works in diff mode (matched share of the shown profile)', async () => {
    const p = await open();
    const text = escapeRegExp(shrunk.n.label.name) + '|' + escapeRegExp(added.n.label.name);
    await p.fill('#search', text);
    await settle(p);
    assertPercent(await p.textContent('#matched'), 100 * matchedShare(now, new RegExp(text)), 'matched (new)');
    await p.click('#shape');
    await settle(p);
    assertPercent(await p.textContent('#matched'), 100 * matchedShare(base, new RegExp(text)), 'matched (base shape)');
    await p.close();
  });

  await check('keys n and b toggle normalise and shape', async () => {
    const p = await open();
    await p.keyboard.press('n');
    assert(await p.getAttribute('#normalise', 'aria-pressed') === 'false', 'n did not toggle normalise');
    await p.keyboard.press('b');
    assert(await p.getAttribute('#shape', 'aria-pressed') === 'true', 'b did not toggle shape');
    await p.close();
  });

  await check('no dialog fired', async () => { assert(dialogs.length === 0, `dialogs: ${JSON.stringify(dialogs)}`); });
  await check('no page errors', async () => {
    assert(pageErrors.length === 0, `${pageErrors.length} error(s), first: ${pageErrors[0]}`);
  });
  await browser.close();
}

const file = process.argv[2];
if (!file || process.argv.length > 3) {
  console.log('usage: diff.test.mjs FILE.html');
  process.exit(2);
}
run(file).then(() => {
  console.log(failed() ? `# ${failed()} check(s) failed` : '# all checks passed');
  process.exit(failed() ? 1 : 0);
}, (e) => {
  console.log(`not ok - harness: ${e && e.stack || e}`);
  process.exit(1);
});
