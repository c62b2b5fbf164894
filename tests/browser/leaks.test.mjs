// The Leaks panel of a --live recording's page, used as a person would:
// open it, read the first suspect and its curve, click it and see the
// search find the leaking function's share of what is live.
//
//   node leaks.test.mjs PAGE.html FUNCTION [--site SITE] [--held TEXT] [--plain CPU.html] [--screenshot FILE.png]
//
// PAGE: a recording of tests/workloads/aging_sites with -e malloc --live,
// whose leak FUNCTION (leak_here) must come first (its site starting with
// SITE, by default FUNCTION); or `ember jvm --leaks`'s page, whose first
// suspect also says how the heap holds it (a line with TEXT). The share is
// computed here from the page's own stacks. CPU: a page that is not of
// live allocations, which has no Leaks button.
import { assert, check, escapeRegExp, failed, labelledStacks, matchedShare, openPage, readEmbeddedData, settle, waitReady } from './lib.mjs';

const args = { file: process.argv[2], leak: process.argv[3], site: process.argv[3], held: null, screenshot: null, plain: null };
for (let i = 4; i < process.argv.length; i++) {
  if (process.argv[i] === '--screenshot') args.screenshot = process.argv[++i];
  else if (process.argv[i] === '--plain') args.plain = process.argv[++i];
  else if (process.argv[i] === '--site') args.site = process.argv[++i];
  else if (process.argv[i] === '--held') args.held = process.argv[++i];
}

const data = readEmbeddedData(args.file);
const stacks = labelledStacks(data, data.stacks);
const re = new RegExp('^' + escapeRegExp(args.leak) + '$');

const { browser, page, dialogs, errors } = await openPage(args.file);

await check('the Leaks button opens the panel with the leak first', async () => {
  assert(await page.locator('#leak-btn').isVisible(), 'no Leaks button on a --live page');
  await page.click('#leak-btn');
  await settle(page);
  assert(await page.locator('#leak-panel').isVisible(), 'the panel did not open');
  const sites = await page.locator('#leak-list .leak-site').allTextContents();
  assert(sites.length >= 1, 'no suspect listed: ' + (await page.locator('#leak-how').textContent()));
  assert(sites[0].startsWith('1. ' + args.site + ' ← '), 'first suspect: ' + sites[0]);
  const figures = await page.locator('#leak-list .leak-figures').first().textContent();
  assert(/^kept [\d.,]+ (B|KiB|MiB|GiB)\/min · live /.test(figures), 'figures: ' + figures);
  return sites.length + ' suspects; ' + figures;
});

await check('its curve rises across the recording, the young end shaded', async () => {
  const points = await page.locator('#leak-list li').first().locator('polyline').getAttribute('points');
  const ys = points.split(' ').map((p) => Number(p.split(',')[1]));
  // y grows downwards: the curve starts at the bottom and ends at the top,
  // never falling, and is well inside its height at the middle of the
  // recording: a leak, not a step (start-up's allocations, or a burst at
  // the end). A steady leak is near 21 there; a leak paced by its
  // program's turns slows when the machine gets busier (a compile beside
  // LeakHunt put 79% of its leak, y 9.9, in the first half).
  assert(ys[0] === 40 && Math.abs(ys[ys.length - 1] - 2) < 0.01, 'ends: ' + ys[0] + ', ' + ys[ys.length - 1]);
  assert(ys.every((y, i) => i === 0 || y <= ys[i - 1] + 1e-9), 'the curve falls: ' + points);
  const middle = ys[Math.floor(ys.length / 2)];
  assert(middle > 5 && middle < 35, 'at the middle of the recording: ' + middle + ' of 40 (a steady leak is near 21)');
  const shade = await page.locator('#leak-list li').first().locator('rect.young');
  const x = Number(await shade.getAttribute('x')), w = Number(await shade.getAttribute('width'));
  assert(x > 50 && Math.abs(x + w - 100) < 1, 'the young end: x ' + x + ' width ' + w);
});

if (args.held) {
  await check('the first suspect says how the heap holds it', async () => {
    const held = await page.locator('#leak-list li').first().locator('.leak-held').allTextContents();
    assert(held.some((t) => t.includes(args.held)), 'held: ' + JSON.stringify(held));
    return held.join(' / ');
  });
}

await check('a click searches for the leaking function', async () => {
  await page.locator('#leak-list li').first().click();
  await settle(page);
  assert((await page.inputValue('#search')) === '^' + escapeRegExp(args.leak) + '$', 'search: ' + (await page.inputValue('#search')));
  const shown = await page.locator('#matched').textContent();
  const expected = 100 * matchedShare(stacks, re);
  const m = /([\d.]+)%/.exec(shown);
  assert(m && Math.abs(parseFloat(m[1]) - expected) < 0.01, 'matched ' + shown + ', the page\'s stacks give ' + expected.toFixed(2) + '%');
  if (args.screenshot) await page.screenshot({ path: args.screenshot });
  return shown;
});

if (args.plain) {
  await check('a page that is not of live allocations has no Leaks button, nor its key', async () => {
    await page.goto('file://' + args.plain);
    await waitReady(page);
    assert(!(await page.locator('#leak-btn').isVisible()), 'a Leaks button on ' + args.plain);
    await page.keyboard.press('l');
    await settle(page);
    assert(!(await page.locator('#leak-panel').isVisible()), 'l opened the Leaks panel');
  });
}

await check('no page errors or dialogs', async () => {
  assert(errors.length === 0, errors.join('; '));
  assert(dialogs.length === 0, dialogs.join('; '));
});

await browser.close();
process.exit(failed() ? 1 : 0);
