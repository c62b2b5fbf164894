// Speed of the flamegraph viewer (flamegraph/flamegraph.html) in headless Chromium.
//
//   node bench/viewer.mjs FILE.html [--runs N] [--search REGEX] [--paint-only]
//
// Per run the page is loaded afresh, then:
//   first paint  navigation start -> the page's `ember:first-paint` mark (the
//                frame that draws the graph: from the page's preview, while
//                the browser still reads its tables, on a page that has one)
//   ready        navigation start -> `ember:ready` (the whole tree built and
//                laid out, drawn, the page answering input)
//   search       input event in the search box -> the next animation frame,
//                which the redraw precedes (so the redraw is included)
//   zoom         click on a frame -> the next animation frame after the redraw
//   reverse, sort by weight, transform: the same for those controls (no target; for information)
//   range        on a page with a heatmap (a timeline): a drag across a tenth
//                of it (from 40% to 50% of its width) -> the next frame after
//                the redraw of the graph of that range
//   all time     "a", back to the whole recording -> the next frame
// Prints the median of N runs (default 5), the parts of the page's work
// up to ready (its own measures) and the file size. --paint-only: another
// tool's page (async-profiler's): navigation start -> the first animation
// frame after its load event, and nothing else.
import { statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const require = createRequire(new URL('../tests/browser/package.json', import.meta.url));
const { chromium } = require('playwright-core');

function parseArgs(argv) {
  const args = { file: null, runs: 5, search: '_read|Record', paintOnly: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--runs') args.runs = Math.max(1, parseInt(argv[++i], 10) || 1);
    else if (argv[i] === '--paint-only') args.paintOnly = true;
    else if (argv[i] === '--search') args.search = argv[++i];
    else if (!args.file) args.file = argv[i];
    else throw new Error('unexpected argument: ' + argv[i]);
  }
  if (!args.file) throw new Error('usage: bench/viewer.mjs FILE.html [--runs N] [--search REGEX]');
  return args;
}

const median = (xs) => {
  const s = xs.filter(Number.isFinite).sort((a, b) => a - b);
  if (!s.length) return NaN;
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

// In the page: performs action `act`, resolves with the time until the
// animation frame after the one the page's redraw was queued for.
function afterFrame(page, act, arg) {
  return page.evaluate(([act, arg]) => new Promise((done) => {
    const $ = (id) => document.getElementById(id);
    const input = (id, value) => { $(id).value = value; $(id).dispatchEvent(new Event('input', { bubbles: true })); };
    const t0 = performance.now();
    if (act === 'search') input('search', arg);
    else if (act === 'key') document.dispatchEvent(new KeyboardEvent('keydown', { key: arg, bubbles: true }));
    else if (act === 'zoom') {
      // The middle of the canvas, four rows above the root (flame orientation, scrolled to the root).
      const c = $('flame'), r = c.getBoundingClientRect();
      c.dispatchEvent(new MouseEvent('click', { bubbles: true, clientX: r.left + r.width / 2, clientY: r.bottom - 4 - 18 * 4.5 }));
    } else if (act === 'transform') {
      $('tf-kind').value = 'replace';
      $('tf-kind').dispatchEvent(new Event('change'));
      $('tf-re').value = '_\\d+';
      $('tf-to').value = '_N';
      $('tf-add').click();
    } else if (act === 'clearTransforms') $('tf-clear').click();
    else if (act === 'range') {
      const c = $('heat-canvas'), r = c.getBoundingClientRect(), y = r.top + r.height / 2;
      const at = (type, f) => c.dispatchEvent(new PointerEvent(type, { bubbles: true, pointerId: 1, button: 0, buttons: type === 'pointerup' ? 0 : 1, clientX: r.left + r.width * f, clientY: y }));
      at('pointerdown', 0.4);
      at('pointermove', 0.45);
      at('pointermove', 0.5);
      at('pointerup', 0.5);
    }
    requestAnimationFrame(() => done(performance.now() - t0));
  }), [act, arg]);
}

async function run(args) {
  const file = resolve(args.file);
  const browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: ['--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
  });
  const results = { firstPaint: [], ready: [], search: [], searchCompute: [], zoom: [], reverse: [], sort: [], transform: [], range: [], all: [] };
  const PARTS = ['parse', 'unpack', 'decode', 'heatmap', 'preview', 'build', 'layout', 'first-draw'];
  const parts = Object.fromEntries(PARTS.map((p) => [p, []]));
  const errors = [];
  for (let i = 0; i < args.runs; i++) {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 }, colorScheme: 'light' });
    page.on('pageerror', (e) => errors.push(e.message));
    if (args.paintOnly) {
      await page.goto(pathToFileURL(file).href, { waitUntil: 'load', timeout: 120000 });
      results.ready.push(await page.evaluate(() => new Promise((done) => requestAnimationFrame(() => done(performance.now())))));
      await page.close();
      continue;
    }
    await page.goto(pathToFileURL(file).href, { timeout: 120000 });
    await page.waitForSelector('body[data-state]', { timeout: 60000 });
    const st = await page.evaluate(() => document.body.dataset.state);
    if (st !== 'ready') throw new Error('page state: ' + st);
    const measure = (n) => page.evaluate((n) => {
      const e = performance.getEntriesByName('ember:' + n).pop();
      return e ? e.duration : NaN;
    }, n);
    results.firstPaint.push(await measure('first-paint'));
    results.ready.push(await measure('ready'));
    for (const p of PARTS) parts[p].push(await measure(p));
    await afterFrame(page, 'none');   // let the first frames settle
    results.search.push(await afterFrame(page, 'search', args.search));
    results.searchCompute.push((await measure('search')) + (await measure('draw')));
    await afterFrame(page, 'search', '');
    results.zoom.push(await afterFrame(page, 'zoom'));
    await afterFrame(page, 'key', 'Escape');
    results.reverse.push(await afterFrame(page, 'key', 'r'));
    await afterFrame(page, 'key', 'r');
    results.sort.push(await afterFrame(page, 'key', 'w'));
    await afterFrame(page, 'key', 'w');
    results.transform.push(await afterFrame(page, 'transform'));
    await afterFrame(page, 'clearTransforms');
    if (await page.evaluate(() => !document.getElementById('heat').hidden)) {
      results.range.push(await afterFrame(page, 'range'));
      results.all.push(await afterFrame(page, 'key', 'a'));
    }
    await page.close();
  }
  await browser.close();
  if (errors.length) throw new Error('page error: ' + errors[0]);

  const ms = (xs) => median(xs).toFixed(1).padStart(8) + ' ms';
  const size = statSync(file).size;
  console.log(`file         ${args.file}: ${(size / 1e6).toFixed(2)} MB`);
  console.log(`runs         ${args.runs} (medians)`);
  if (args.paintOnly) {
    console.log(`first paint  ${ms(results.ready)}   (navigation start -> the frame after load)`);
    return;
  }
  const shown = (p) => Number.isFinite(median(parts[p]));
  console.log(`first paint  ${ms(results.firstPaint)}   (navigation start -> ember:first-paint: the frame that draws the graph, from the preview on a plain page)`);
  console.log(`ready        ${ms(results.ready)}   (navigation start -> ember:ready, interactive: ${PARTS.filter(shown).map((p) => `${p} ${median(parts[p]).toFixed(0)}`).join(', ')})`);
  console.log(`search       ${ms(results.search)}   (input -> next frame; search + redraw compute ${median(results.searchCompute).toFixed(1)} ms)`);
  console.log(`zoom         ${ms(results.zoom)}   (click -> next frame)`);
  console.log(`reverse      ${ms(results.reverse)}   (r -> next frame; rebuilds the tree)`);
  console.log(`sort weight  ${ms(results.sort)}   (w -> next frame)`);
  console.log(`transform    ${ms(results.transform)}   (replace _\\d+ -> _N, -> next frame)`);
  if (results.range.length) {
    console.log(`range        ${ms(results.range)}   (drag over a tenth of the heatmap -> next frame)`);
    console.log(`all time     ${ms(results.all)}   (a -> next frame)`);
  }
}

run(parseArgs(process.argv.slice(2))).catch((e) => {
  console.error(e && e.stack || e);
  process.exit(1);
});
