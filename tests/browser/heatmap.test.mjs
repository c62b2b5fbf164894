// The heatmap of a recording that changes phase (tests/workloads/phases:
// phase_a, then phase_b), used as a person would: find where the phase
// changes by hovering, drag across each half, read the graph's functions.
// Then FlameScope's grid, on a page made here: two minutes of a steady
// function with a burst of another in seconds 60 and 61.
//
//   node heatmap.test.mjs PAGE.html [--screenshot FILE.png]
//
// Expectations come from the page's own data, decoded here (tables.mjs):
// the timeline's entries, each a stack at a time.
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { assert, check, decodeStacks, failed, hueOf, openPage, pixelAt, pixelRow, readEmbeddedData, settle, waitReady } from './lib.mjs';
import { packTables } from './tables.mjs';

const args = { file: process.argv[2], screenshot: null };
for (let i = 3; i < process.argv.length; i++) if (process.argv[i] === '--screenshot') args.screenshot = process.argv[++i];

// The model: per timeline entry its time (ms), weight and whether its stack holds phase_a / phase_b.
const data = readEmbeddedData(args.file);
const stacks = decodeStacks(data.stacks);
const holds = (s, name) => s.frames.some((f) => data.names[data.frames[3 * f]] === name);
const entries = [];
for (let i = 0, t = 0; i < data.timeline.length; i += 3) {
  t += data.timeline[i];
  const s = stacks[data.timeline[i + 1]];
  entries.push({ t, weight: data.timeline[i + 2], a: holds(s, 'phase_a'), b: holds(s, 'phase_b') });
}
const weightIn = (from, to, which) => entries.filter((e) => e.t >= from && e.t < to && (!which || e[which]))
  .reduce((sum, e) => sum + e.weight, 0);
const lastA = Math.max(...entries.filter((e) => e.a).map((e) => e.t));
const firstB = Math.min(...entries.filter((e) => e.b).map((e) => e.t));
const end = Math.max(...entries.map((e) => e.t));

const { browser, page, dialogs, errors } = await openPage(args.file);
const canvas = page.locator('#heat-canvas');
let box = null;

// The time at a point of the heatmap, read from its tooltip ("1.2 s – 1.22 s ...").
async function timeAt(x) {
  await page.mouse.move(box.x + x, box.y + 10);
  await settle(page);
  const text = await page.locator('#tooltip').textContent();
  const m = /^([\d.,]+) (ms|s)/.exec(text);
  assert(m, 'no time in the tooltip: ' + text);
  return parseFloat(m[1].replace(/,/g, '')) * (m[2] === 's' ? 1000 : 1);
}

// The functions of the graph shown: name -> total, from the function table.
async function functions(filter = 'phase_') {
  if (!(await page.locator('#fn-panel').isVisible())) await page.click('#fn-btn');
  await page.fill('#fn-filter', filter);
  await settle(page);
  return new Map(await page.evaluate(() => [...document.querySelectorAll('#fn-body tr')].map((tr) =>
    [tr.querySelector('.fn-name').textContent, Number(tr.children[3].textContent.replace(/[^\d]/g, ''))])));
}

async function drag(x0, x1) {
  await page.mouse.move(box.x + x0, box.y + 20);
  await page.mouse.down();
  await page.mouse.move(box.x + (x0 + x1) / 2, box.y + 20, { steps: 4 });
  await page.mouse.move(box.x + x1, box.y + 20, { steps: 4 });
  await page.mouse.up();
  await settle(page);
}

// The range in the URL, in ms.
const urlRange = () => page.evaluate(() => {
  const r = new URLSearchParams(location.hash.slice(1)).get('range');
  return r && r.split('-').map((v) => Math.round(Number(v) * 1000));
});

let xOf = null;   // ms -> x on the canvas
let barMs = 0;    // the time a bar of the timeline covers

await check('the recording holds both phases, each in its own half of the time', async () => {
  assert(entries.length > 0, 'the page has no timeline');
  assert(lastA < firstB, `phase_a sampled at ${lastA} ms, after phase_b's first sample at ${firstB} ms`);
  const a = weightIn(0, Infinity, 'a'), b = weightIn(0, Infinity, 'b');
  assert(a > 200 && b > 200, `too few samples: phase_a ${a}, phase_b ${b}`);
  return `phase_a until ${lastA} ms, phase_b from ${firstB} ms to ${end} ms; ${a} and ${b} samples`;
});

await check('the heatmap shows above the graph, a timeline of bars for a short recording', async () => {
  assert(await canvas.isVisible(), 'no heatmap');
  box = await canvas.boundingBox();
  assert(box.height >= 40 && box.width > 600, 'heatmap box ' + JSON.stringify(box));
  assert(/^bars of /.test(await page.locator('#heat-how').textContent()), 'not a timeline of bars');
  assert(/^All time/.test(await page.locator('#heat-range').textContent()), 'the range line does not say all time');
  // Time runs left to right in bars of equal width across the canvas: the
  // last bar's time gives their number, hence the map from ms to pixels.
  const how = /^bars of ([\d.]+) (ms|s)/.exec(await page.locator('#heat-how').textContent());
  barMs = parseFloat(how[1]) * (how[2] === 's' ? 1000 : 1);
  const bars = Math.round(await timeAt(box.width - 0.5) / barMs) + 1;
  xOf = (ms) => ms / barMs * box.width / bars;
  const x0 = box.width * 0.1, x1 = box.width * 0.9, t0 = await timeAt(x0), t1 = await timeAt(x1);
  assert(t1 > t0, `time at ${x1} px is ${t1} ms, not after ${t0} ms at ${x0} px`);
  for (const [x, t] of [[x0, t0], [x1, t1]]) {
    assert(xOf(t) <= x && x < xOf(t + barMs), `the bar at ${x} px starts at ${t} ms, where ${bars} bars of ${barMs} ms put ${xOf(t)} px`);
  }
  return `${t0} ms at ${x0.toFixed(0)} px, ${t1} ms at ${x1.toFixed(0)} px`;
});

const margin = 150;   // ms kept clear of the phase change
await check('dragging across the first half shows phase_a only, with the weight taken in the range', async () => {
  await drag(xOf(0) + 2, xOf(lastA - margin));
  const r = await urlRange();
  assert(r && r[0] < r[1], 'no range in the URL: ' + await page.evaluate(() => location.hash));
  assert(r[1] <= firstB, `the range ${r} reaches phase_b (from ${firstB} ms)`);
  const fns = await functions();
  assert(!fns.has('phase_b'), 'phase_b in the graph of the first half');
  assert(fns.get('phase_a') === weightIn(r[0], r[1], 'a'),
    `phase_a total ${fns.get('phase_a')}, the timeline holds ${weightIn(r[0], r[1], 'a')} in ${r}`);
  const line = await page.locator('#heat-range').textContent();
  assert(line.includes(String(weightIn(r[0], r[1]))), `the range line "${line}" lacks the weight ${weightIn(r[0], r[1])}`);
  return `${r[0]}–${r[1]} ms: phase_a ${fns.get('phase_a')}`;
});

await check('the range survives a reload from the URL', async () => {
  const r = await urlRange();
  await page.reload();
  await waitReady(page);
  assert(JSON.stringify(await urlRange()) === JSON.stringify(r), 'the range changed on reload');
  const fns = await functions();
  assert(!fns.has('phase_b') && fns.get('phase_a') === weightIn(r[0], r[1], 'a'), 'another graph after the reload');
});

await check('dragging across the second half, right to left, shows phase_b only', async () => {
  await drag(xOf(end) - 2, xOf(firstB + margin));
  const r = await urlRange();
  assert(r && r[0] >= lastA, `the range ${r} reaches phase_a (until ${lastA} ms)`);
  const fns = await functions();
  assert(!fns.has('phase_a'), 'phase_a in the graph of the second half');
  assert(fns.get('phase_b') === weightIn(r[0], r[1], 'b'),
    `phase_b total ${fns.get('phase_b')}, the timeline holds ${weightIn(r[0], r[1], 'b')} in ${r}`);
  if (args.screenshot) await page.screenshot({ path: args.screenshot });
  return `${r[0]}–${r[1]} ms: phase_b ${fns.get('phase_b')}`;
});

await check('"All time" shows the whole recording again', async () => {
  await page.click('#heat-clear');
  await settle(page);
  assert(await urlRange() === null, 'the range is still in the URL');
  const fns = await functions();
  assert(fns.get('phase_a') === weightIn(0, Infinity, 'a') && fns.get('phase_b') === weightIn(0, Infinity, 'b'),
    'not every sample is back: ' + JSON.stringify([...fns]));
});

await check('a search colours the heatmap where the matched stacks ran', async () => {
  await page.fill('#search', '^phase_b$');
  await settle(page);
  // Each bar's colour at its middle (its edges blend into the background)
  // on the bottom row of pixels, which a bar of a single sample covers.
  const row = await pixelRow(page, '#heat-canvas', box.height - 14 - 1);
  const wrong = [];
  let withB = 0, onlyA = 0;
  for (let t = 0; t <= end; t += barMs) {
    const a = weightIn(t, t + barMs, 'a'), b = weightIn(t, t + barMs, 'b');
    const c = hueOf(row[Math.floor(xOf(t + barMs / 2))]);
    if (b > 0) {
      withB++;
      if (!(c.sat > 0.5 && Math.abs(c.hue - 300) < 20)) wrong.push(`${t} ms (phase_b ${b}): ${JSON.stringify(c)}`);
    } else if (a > 0) {
      onlyA++;
      if (c.sat > 0.05) wrong.push(`${t} ms (phase_a only): ${JSON.stringify(c)}`);
    }
  }
  assert(withB >= 10 && onlyA >= 10, `${onlyA} bars of phase_a alone and ${withB} with phase_b`);
  assert(wrong.length === 0, 'bars not in the search colour where phase_b ran, or coloured where it did not: ' + wrong.join('; '));
  return `${onlyA} bars grey, ${withB} in the search colour`;
});

// The grid: a sample of `steady` every 10 ms for 120 s, and one of
// `burst` every 10 ms in [60 s, 62 s). Frames in the page's order (by
// name): burst 0, main 1, steady 2, svc 3; stacks svc;main;burst (0) and
// svc;main;steady (1).
const grid = join(tmpdir(), `ember-heatmap-grid-${process.pid}.html`);
{
  const timeline = [];
  let last = 0;
  for (let ms = 0; ms < 120000; ms += 10) {
    timeline.push(ms - last, 1, 1);
    last = ms;
    if (ms >= 60000 && ms < 62000) timeline.push(0, 0, 1);
  }
  const kinds = ['kernel', 'native'];
  const tables = packTables({ names: ['burst', 'main', 'steady', 'svc'], modules: [''], frames: [0, 1, 0, 1, 1, 0, 2, 1, 0, 3, 1, 0],
    stacks: [0, 3, 3, 1, 0, 200, 2, 1, 2, 12000], timeline });
  const json = JSON.stringify({ version: 2, title: 'grid', event: 'cpu-clock', unit: 'samples', kinds, total: 12200,
    duration_ns: 120e9, time_step_ms: 1, info: {}, tables });
  const template = readFileSync(new URL('../../flamegraph/flamegraph.html', import.meta.url), 'utf8');
  writeFileSync(grid, template.replace('@EMBER_DATA@', () => json.replace(/</g, '\\u003c')));
}

await check('two minutes draw as FlameScope\'s grid: columns of 1 s, rows of 20 ms, time running down', async () => {
  await page.goto('file://' + grid);
  await waitReady(page);
  const how = await page.locator('#heat-how').textContent();
  assert(how.startsWith('columns of 1 s, rows of 20 ms'), 'layout: ' + how);
  box = await canvas.boundingBox();
  const cell = (col, row) => [box.width * (col + 0.5) / 120, row * 2 + 1];
  const [x, y] = cell(61, 10);
  await page.mouse.move(box.x + x, box.y + y);
  await settle(page);
  const tip = await page.locator('#tooltip').textContent();
  assert(tip.startsWith('1 min 01.2 s – 1 min 01.22 s'), 'the tooltip of column 61, row 10: ' + tip);
  assert(tip.includes('4 samples'), 'the burst cell should hold 4 samples: ' + tip);
  await page.mouse.move(box.x + box.width / 2, box.y + box.height + 30);
  await settle(page);
  const lightness = ([r, g, b]) => (Math.max(r, g, b) + Math.min(r, g, b)) / 2;
  const steady = lightness(await pixelAt(page, '#heat-canvas', ...cell(30, 25)));
  const burst = lightness(await pixelAt(page, '#heat-canvas', ...cell(60, 25)));
  assert(burst < steady - 20, `the burst's cells (lightness ${burst}) are not darker than the steady ones (${steady})`);
});

await check('a drag from the top of column 60 to the bottom of column 61 picks those two seconds', async () => {
  const w = box.width / 120;
  await page.mouse.move(box.x + 60.5 * w, box.y + 1);
  await page.mouse.down();
  await page.mouse.move(box.x + 61.5 * w, box.y + 50, { steps: 4 });
  await page.mouse.move(box.x + 61.5 * w, box.y + 99, { steps: 4 });
  await page.mouse.up();
  await settle(page);
  const r = await urlRange();
  assert(r && r[0] === 60000 && r[1] === 62000, 'range ' + JSON.stringify(r));
  const fns = await functions('');
  assert(fns.get('burst') === 200 && fns.get('steady') === 200, 'functions: ' + JSON.stringify([...fns]));
  if (args.screenshot) await page.screenshot({ path: args.screenshot.replace(/\.png$/, '-grid.png') });
});

await check('no page errors or dialogs', async () => {
  assert(errors.length === 0, errors.join('; '));
  assert(dialogs.length === 0, dialogs.join('; '));
});

await browser.close();
unlinkSync(grid);
process.exit(failed() ? 1 : 0);
