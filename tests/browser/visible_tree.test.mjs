// The first paint of a big profile draws buildVisibleTree's tree: the nodes
// of buildTree's tree that weigh at least a threshold, in the same
// pre-order. Both functions are taken from the page's own script and run
// here on generated stacks, in the written order (sorted, with the prefix
// each shares with the one before), at several thresholds. Then, given a
// page big enough to be painted so (a million nodes), the first paint in
// Chromium must be the very picture the whole tree draws once ready.
//
//   node visible_tree.test.mjs [PAGE.html]
import { readFileSync } from 'node:fs';
import { assert, check, failed, launch, settle, waitReady, watch } from './lib.mjs';

const page = readFileSync(new URL('../../flamegraph/flamegraph.html', import.meta.url), 'utf8');
const source = (name) => {
  const at = page.indexOf(`\nfunction ${name}(`);
  assert(at >= 0, `no function ${name} in the page`);
  return page.slice(at, page.indexOf('\n}\n', at) + 3);
};
// buildTree asks stackOrder for the order: as written, in order (null).
const { buildTree, buildVisibleTree, layoutTree } = new Function(`const ROOT = 0; const stackOrder = () => null;
  ${source('buildTree')} ${source('buildVisibleTree')} ${source('layoutTree')}
  return { buildTree, buildVisibleTree, layoutTree };`)();

// Stacks as the page decodes them: root first, sorted by frame ids, each
// with the prefix it shares with the one before; deep and shallow ones,
// one that is a prefix of the next, weights from 1 to 1,000.
let seed = 42;
const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
const list = [];
for (let i = 0; i < 3000; i++) {
  const depth = 1 + Math.floor(random() * random() * 40);
  const stack = [];
  for (let d = 0; d < depth; d++) stack.push(Math.floor(random() * (d < 3 ? 4 : 60)));
  list.push(stack);
}
list.push([0], [0, 0], [0, 0, 0]);
list.sort((a, b) => { for (let i = 0; i < Math.min(a.length, b.length); i++) if (a[i] !== b[i]) return a[i] - b[i]; return a.length - b.length; });
const unique = list.filter((s, i) => i === 0 || s.join() !== list[i - 1].join());
const start = new Int32Array(unique.length + 1), prefixes = new Int32Array(unique.length), weight = new Float64Array(unique.length);
const frames = [];
unique.forEach((s, i) => {
  start[i] = frames.length;
  frames.push(...s);
  weight[i] = 1 + Math.floor(random() ** 4 * 1000);
  const prev = unique[i - 1] || [];
  let k = 0;
  while (k < s.length && k < prev.length && s[k] === prev[k]) k++;
  prefixes[i] = k;
});
start[unique.length] = frames.length;
const st = { count: unique.length, frames: Int32Array.from(frames), start, weight, prefixes };

const full = buildTree(st, null, -1);
for (const share of [0, 0.0001, 0.001, 0.01, 0.2]) {
  await check(`nodes of at least ${share * 100}% of the total: buildTree's, in its order`, async () => {
    const min = full.total[0] * share;
    const kept = [];   // full tree's node indices kept, in pre-order
    for (let n = 1; n < full.count; n++) if (full.total[n] >= min) kept.push(n);
    const t = buildVisibleTree(st, min);
    assert(t.count === kept.length + 1, `${t.count - 1} nodes, buildTree has ${kept.length} at or above the threshold`);
    assert(t.total[0] === full.total[0] && t.maxDepth === full.maxDepth, 'root total or depth differ');
    const x = layoutTree(full).x;
    const index = new Map(kept.map((n, i) => [n, i + 1]));
    kept.forEach((n, i) => {
      const m = i + 1;
      assert(t.frame[m] === full.frame[n] && t.depth[m] === full.depth[n] && t.total[m] === full.total[n],
        `node ${m}: frame ${t.frame[m]} depth ${t.depth[m]} total ${t.total[m]}, not ${full.frame[n]}, ${full.depth[n]}, ${full.total[n]}`);
      assert(t.parent[m] === (full.parent[n] === 0 ? 0 : index.get(full.parent[n])), `node ${m}'s parent`);
      assert(t.x[m] === x[n], `node ${m} at ${t.x[m]}, not ${x[n]}: the left-out nodes before it take no room`);
      let size = 1;
      for (let c = n + 1; c < n + full.size[n]; c++) if (full.total[c] >= min) size++;
      assert(t.size[m] === size, `node ${m}'s subtree: ${t.size[m]} nodes, not ${size}`);
    });
    return `${kept.length} of ${full.count - 1} nodes`;
  });
}
if (process.argv[2]) {
  const browser = await launch();
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const dialogs = [], errors = [];
  watch(page, dialogs, errors);
  // The canvas as drawn when the page marks its first paint.
  await page.addInitScript(() => {
    const measure = performance.measure.bind(performance);
    performance.measure = (name, options) => {
      if (name === 'ember:first-paint') window.firstPaint = document.getElementById('flame').toDataURL();
      return measure(name, options);
    };
  });
  await page.goto('file://' + process.argv[2]);
  await waitReady(page);
  await settle(page);
  await check('a big page is painted from its visible nodes first, the same picture as its whole tree', async () => {
    const [first, ready] = await page.evaluate(() => ['ember:first-paint', 'ember:ready'].map((n) => performance.getEntriesByName(n)[0].duration));
    assert(first < ready, `first paint at ${first} ms, not before ready at ${ready} ms: not painted from its visible nodes`);
    const [before, after] = await page.evaluate(() => [window.firstPaint, document.getElementById('flame').toDataURL()]);
    assert(before && before === after, 'the first paint differs from the graph once ready');
    return `first paint ${first.toFixed(0)} ms, ready ${ready.toFixed(0)} ms`;
  });
  await check('no page errors or dialogs', async () => {
    assert(errors.length === 0, errors.join('; '));
    assert(dialogs.length === 0, dialogs.join('; '));
  });
  await browser.close();
}
process.exit(failed() ? 1 : 0);
