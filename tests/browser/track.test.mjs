// The class tracker's page (`ember jvm --track -o x.html`), used as a
// person would: read the table, hover the chart and read the tooltip,
// switch to bytes, hide a class. Expectations come from the page's own
// data (the JSON it embeds), which the shell test checks against the JVM.
//
//   node track.test.mjs PAGE.html CLASS [--screenshot FILE.png]
import { readFileSync } from 'node:fs';
import { pathToFileURL } from 'node:url';
import { assert, check, failed, launch, settle, waitReady, watch } from './lib.mjs';

const [file, cls] = process.argv.slice(2);
const shot = process.argv.includes('--screenshot') ? process.argv[process.argv.indexOf('--screenshot') + 1] : null;
const html = readFileSync(file, 'utf8');
const data = JSON.parse(html.match(/<script id="ember-track" type="application\/json">([\s\S]*?)<\/script>/)[1]);
const series = data.series.find((s) => s.name === cls);
assert(series, `no series ${cls} in the page's data`);
const group = (v) => v.toLocaleString('en-US');

const browser = await launch();
const page = await browser.newPage({ viewport: { width: 1200, height: 800 } });
const errors = [], dialogs = [];
watch(page, dialogs, errors);
await page.goto(pathToFileURL(file).href);
await waitReady(page);

await check('the table gives the first and last count of the tracked class', async () => {
  const row = page.locator('#rows tr', { hasText: cls }).first();
  const cells = await row.locator('td').allTextContents();
  const first = series.instances[0], last = series.instances[series.instances.length - 1];
  assert(cells[1] === group(first) && cells[2] === group(last), `row ${JSON.stringify(cells)}, data ${first} .. ${last}`);
  assert(cells[3] === (last > first ? '+' : last < first ? '-' : '') + group(Math.abs(last - first)), `change ${cells[3]}`);
});

// Hovering at each sample's x shows that sample's time and count.
async function hoverSample(k) {
  const box = await page.locator('#chart').boundingBox();
  const t = data.times, left = 80, right = 16;  // the page's PAD
  const x = box.x + left + (t[k] / t[t.length - 1]) * (box.width - left - right);
  await page.mouse.move(x, box.y + 60);
  await settle(page);
  return page.locator('#tip').textContent();
}

await check('hovering the chart shows each sample\'s count', async () => {
  for (const k of [0, Math.floor(data.times.length / 2), data.times.length - 1]) {
    const tip = await hoverSample(k);
    const want = `${cls}: ${group(series.instances[k])}`;
    assert(tip.split('\n').includes(want), `sample ${k}: tooltip ${JSON.stringify(tip)}, wanted ${want}`);
  }
  if (shot) await page.screenshot({ path: shot });
});

await check('Bytes switches the chart and the table to bytes', async () => {
  const before = Number(await page.locator('#chart').getAttribute('data-y-max'));
  await page.click('#show-bytes');
  await settle(page);
  const after = Number(await page.locator('#chart').getAttribute('data-y-max'));
  assert(after > before, `the axis went from ${before} to ${after}`);
  const maxBytes = Math.max(...series.bytes);
  assert(after >= maxBytes && after < 2 * maxBytes + 1, `axis max ${after} for ${maxBytes} bytes`);
  const tip = await hoverSample(data.times.length - 1);
  assert(/ (KiB|MiB|GiB|B)$/m.test(tip), 'the tooltip is not in bytes: ' + tip);
});

await check('clicking a class hides its line and greys its row', async () => {
  const row = page.locator('#rows tr', { hasText: cls }).first();
  await row.click();
  await settle(page);
  assert((await row.getAttribute('class')) === 'off', 'the row is not greyed');
  const tip = await hoverSample(0);
  assert(!tip.includes(cls + ':'), 'a hidden class is still in the tooltip');
  await row.click();
  await settle(page);
  assert((await row.getAttribute('class')) === '', 'the row stays greyed');
});

await check('no page errors or dialogs', async () => {
  assert(errors.length === 0, errors.join('; '));
  assert(dialogs.length === 0, dialogs.join('; '));
});

await browser.close();
process.exit(failed() ? 1 : 0);
