// A page's preview (flamegraph/html.h): the widest nodes of its tree,
// drawn while the browser still reads the tables. For each PAGE: the
// preview holds exactly the nodes of the whole tree (modelled here from
// the page's tables, sharing no code with ember or the page) at least
// 1/8192 of the total wide, or the 20,000 widest, in pre-order, at the
// offsets the page lays them out at, with the tree's depth, its kinds and
// its number of stacks. Then in Chromium, the page served over HTTP with
// its tables held back: the graph is drawn before the tables are in the
// document, and it is the very picture (header, legend, footer too) the
// whole tree draws once they come.
//
//   node preview.test.mjs PAGE.html...
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import { assert, buildModel, check, failed, labelledStacks, launch, readEmbeddedData, settle, waitReady, watch } from './lib.mjs';
import { unpackPreview } from './tables.mjs';

const PREVIEW_WIDTH = 4096, PREVIEW_NODES = 20000;

function readPreview(html) {
  const m = html.match(/<script id="ember-preview" type="application\/json">([\s\S]*?)<\/script>/);
  assert(m && m[1].startsWith('{'), 'no preview in the page');
  const data = JSON.parse(m[1]);
  assert(typeof data.preview === 'string' && !('tables' in data), 'the preview holds no "preview", or the tables too');
  return { ...data, ...unpackPreview(data.preview) };
}

// The nodes the preview should hold, in pre-order.
function expectedNodes(model) {
  const all = [];
  const walk = (n) => { for (const c of n.children) { all.push(c); walk(c); } };
  walk(model.root);
  const least = Math.max(1, Math.floor(model.total / (2 * PREVIEW_WIDTH)));
  let kept = all.filter((n) => n.total >= least);
  if (kept.length > PREVIEW_NODES) {
    const cut = kept.map((n) => n.total).sort((a, b) => b - a)[PREVIEW_NODES];
    kept = kept.filter((n) => n.total > cut);
  }
  return { kept, of: all.length };
}

async function checkTables(file) {
  const html = readFileSync(file, 'utf8');
  const preview = readPreview(html), data = readEmbeddedData(file);
  const model = buildModel(labelledStacks(data, data.stacks));
  const { kept, of } = expectedNodes(model);
  await check(`${file}: the preview holds the tree's widest nodes, in pre-order, where the page lays them out`, async () => {
    assert(preview.nodes.length === kept.length, `${preview.nodes.length} nodes, expected ${kept.length}`);
    const label = (f) => ({ name: preview.names[preview.frames[3 * f]], kind: data.kinds[preview.frames[3 * f + 1]],
      module: preview.modules[preview.frames[3 * f + 2]] });
    kept.forEach((n, i) => {
      const p = preview.nodes[i], l = label(p.frame);
      assert(l.name === n.label.name && l.kind === n.label.kind && l.module === n.label.module && p.depth === n.depth,
        `node ${i}: ${l.name} (${l.kind}) at depth ${p.depth}, expected ${n.label.name} (${n.label.kind}) at ${n.depth}`);
      assert(p.total === n.total && p.x === n.x0, `node ${i} (${l.name}): total ${p.total} at ${p.x}, expected ${n.total} at ${n.x0}`);
    });
    assert(preview.maxDepth === model.maxDepth, `depth ${preview.maxDepth}, the tree's is ${model.maxDepth}`);
    const kinds = new Set(data.frames.filter((_, i) => i % 3 === 1));
    assert(preview.kinds.length === kinds.size && preview.kinds.every((k) => kinds.has(k)), `kinds ${preview.kinds} of ${[...kinds]}`);
    assert(preview.stacks === countStacks(data.stacks), `${preview.stacks} stacks, the tables hold ${countStacks(data.stacks)}`);
    assert(preview.title === data.title && preview.total === data.total, 'title or total differ from the data\'s');
    return `${kept.length} of ${of} nodes, ${(html.indexOf('id="ember-data"') - html.indexOf('id="ember-preview"')) >> 10} KiB before the tables`;
  });
}

function countStacks(enc) {
  let count = 0;
  for (let i = 0; i < enc.length; i += enc[i + 1] + 3) count++;
  return count;
}

// Serves `html`, holding back what follows the tables' opening until released.
async function holdingServer(html) {
  const at = html.indexOf('<script id="ember-data"');
  let release;
  const released = new Promise((r) => { release = r; });
  const server = createServer(async (req, res) => {
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.write(html.slice(0, at));
    await released;
    res.end(html.slice(at));
  });
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${server.address().port}/`, release, close: () => server.close() };
}

async function checkPaint(browser, file) {
  const html = readFileSync(file, 'utf8');
  const server = await holdingServer(html);
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const dialogs = [], errors = [];
  watch(page, dialogs, errors);
  const look = () => page.evaluate(() => ({
    canvas: document.getElementById('flame').toDataURL(),
    text: ['title', 'summary', 'legend', 'info'].map((id) => document.getElementById(id).textContent),
    tables: !!document.getElementById('ember-data'),
  }));
  try {
    await page.goto(server.url, { waitUntil: 'commit' });
    await page.waitForFunction(() => performance.getEntriesByName('ember:first-paint').length > 0, null, { timeout: 30000 });
    const before = await look();
    server.release();
    await waitReady(page);
    await settle(page);
    const after = await look();
    await check(`${file}: drawn from the preview before the tables came, the same picture as the whole tree's`, async () => {
      assert(!before.tables, 'the tables were in the document at the first paint');
      assert(before.text.join('|') === after.text.join('|'), `header or footer: ${before.text} became ${after.text}`);
      assert(before.canvas === after.canvas, 'the preview differs from the graph once ready');
      const [first, ready] = await page.evaluate(() => ['ember:first-paint', 'ember:ready'].map((n) => performance.getEntriesByName(n)[0].duration));
      return `first paint ${first.toFixed(0)} ms, ready ${ready.toFixed(0)} ms (the tables held back)`;
    });
    await check(`${file}: no page errors or dialogs`, async () => {
      assert(errors.length === 0, errors.join('; '));
      assert(dialogs.length === 0, dialogs.join('; '));
    });
  } finally {
    server.release();
    await page.close();
    server.close();
  }
}

const files = process.argv.slice(2);
assert(files.length, 'usage: preview.test.mjs PAGE.html...');
for (const file of files) await checkTables(file);
const browser = await launch();
for (const file of files) await checkPaint(browser, file);
await browser.close();
process.exit(failed() ? 1 : 0);
