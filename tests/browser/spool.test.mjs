// Drives `ember serve --dir SPOOL`'s page in headless Chromium as a person
// would: sign in with the printed link, see the agent's spool listed by
// service, filter it, pick a time range, open one service's flamegraph.
// The listing is checked against GET /api/spool as the test script saved it.
//
//   node tests/browser/spool.test.mjs --url 'http://127.0.0.1:PORT/?token=T' --spool SPOOL_JSON \
//        --service NAME --hot FUNCTION [--screenshots DIR]
//
// Prints `ok - name` / `not ok - name: reason` per check; exits 1 on any failure.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { assert, check, failed, launch, settle, waitReady } from './lib.mjs';

const VIEWPORT = { width: 1280, height: 800 };

function parseArgs(argv) {
  const a = { url: null, spool: null, service: null, hot: null, screenshots: null };
  const usage = 'usage: spool.test.mjs --url URL?token=T --spool SPOOL_JSON --service NAME --hot FUNCTION [--screenshots DIR]';
  for (let i = 0; i < argv.length; i += 2) {
    const [flag, v] = [argv[i], argv[i + 1]];
    if (v === undefined) throw new Error(usage);
    if (flag === '--url') a.url = v;
    else if (flag === '--spool') a.spool = JSON.parse(readFileSync(v, 'utf8'));
    else if (flag === '--service') a.service = v;
    else if (flag === '--hot') a.hot = v;
    else if (flag === '--screenshots') a.screenshots = v;
    else throw new Error('unexpected argument: ' + flag);
  }
  if (!a.url || !a.spool || !a.service || !a.hot) throw new Error(usage);
  return a;
}

async function run(args) {
  const t0 = Date.now();
  const browser = await launch();
  const context = await browser.newContext({ viewport: VIEWPORT, colorScheme: 'light' });
  const page = await context.newPage();
  page.setDefaultTimeout(10000);
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(e.message));
  page.on('console', (m) => { if (m.type() === 'error') pageErrors.push('console: ' + m.text()); });
  const shot = async (p, name) => {
    if (args.screenshots) await p.screenshot({ path: join(args.screenshots, `serve-${name}.png`), fullPage: true });
  };
  const rows = () => page.locator('#spool tbody tr');
  // The table as a person reads it: each row's cells, the service carried down.
  const table = () => rows().evaluateAll((trs) => {
    let service = '';
    return trs.map((tr) => {
      const cells = [...tr.cells].map((c) => c.textContent);
      service = cells[0] || service;
      return { service, type: cells[1], periods: Number(cells[2].replace(/,/g, '')), links: cells[5] };
    });
  });

  await check('the link signs in and the page shows the spool, not the recorder', async () => {
    await page.goto(args.url);
    await page.waitForSelector('body[data-ready="true"]');
    for (const id of ['profile-section', 'results-section', 'defaults-section'])
      assert(await page.locator('#' + id).isHidden(), `#${id} is shown`);
    await page.waitForSelector('#spool tbody tr');
    const summary = await page.locator('#spool-summary').textContent();
    assert(summary.startsWith(`${args.spool.periods} periods`), `summary: ${summary}`);
    assert(summary.includes(`${args.spool.sent} sent`), `summary: ${summary}`);
    assert((await page.locator('#dir').textContent()).includes(args.spool.dir), 'the header does not name the spool');
    await shot(page, 'spool');
    return summary;
  });

  await check('every series of the spool is listed, with its periods', async () => {
    const shown = await table();
    const want = args.spool.series.map((s) => `${s.service} ${s.type} ${s.periods}`);
    const got = shown.map((r) => `${r.service} ${r.type} ${r.periods}`);
    assert(JSON.stringify(got) === JSON.stringify(want), `listed ${JSON.stringify(got)}, the API has ${JSON.stringify(want)}`);
    return got.join(', ');
  });

  await check('the filter keeps the matching services', async () => {
    await page.fill('#spool-filter', args.service.slice(0, 4));
    const shown = await table();
    assert(shown.length > 0 && shown.every((r) => r.service.includes(args.service.slice(0, 4))), `rows: ${JSON.stringify(shown)}`);
    await page.fill('#spool-filter', 'no-such-service');
    assert((await page.locator('#spool').textContent()).includes('No service matches'), 'no word when nothing matches');
    await page.fill('#spool-filter', '');
  });

  await check('a range past the spool leaves nothing to open; "all" clears it', async () => {
    const after = new Date(args.spool.end + 3600e3);
    const local = new Date(after - after.getTimezoneOffset() * 60000).toISOString().slice(0, 19);
    await page.fill('#spool-from', local);
    const shown = await table();
    assert(shown.every((r) => r.links === 'none in the range'), `rows: ${JSON.stringify(shown)}`);
    await page.click('button[data-last="0"]');
    assert((await page.locator('#spool-from').inputValue()) === '', 'the range is not cleared');
  });

  await check("a service's flamegraph opens merged over the range, with its hot function", async () => {
    await page.click('button[data-last="3600"]');
    const from = await page.locator('#spool-from').inputValue();
    assert(from, '"last 1 h" set no start');
    const row = page.locator('#spool tbody tr', { hasText: args.service }).first();
    const href = await row.locator('a.open').getAttribute('href');
    const q = new URL(href, 'http://x').searchParams;
    assert(q.get('service') === args.service && q.get('type') === 'process_cpu', `link ${href}`);
    assert(Number(q.get('from')) === new Date(from).getTime(), `link ${href} does not start at ${from}`);
    const [fg] = await Promise.all([context.waitForEvent('page'), row.locator('a.open').click()]);
    fg.on('pageerror', (e) => pageErrors.push('flamegraph: ' + e.message));
    await waitReady(fg);
    const title = await fg.title();
    assert(title.includes(args.service), `title: ${title}`);
    await fg.fill('#search', args.hot);
    await settle(fg);
    const matched = await fg.locator('#matched').textContent();
    const share = parseFloat(/([\d.]+)%/.exec(matched)?.[1] || '0');
    assert(share > 50, `${args.hot} is ${matched} of the graph`);
    await shot(fg, 'spool-flamegraph');
    await fg.close();
    return `${title}; ${args.hot}: ${matched}`;
  });

  await check('no error on the pages', async () => assert(!pageErrors.length, pageErrors.join('; ')));
  await browser.close();
  console.log(`# ${((Date.now() - t0) / 1000).toFixed(1)} s`);
}

run(parseArgs(process.argv.slice(2))).then(
  () => process.exit(failed() ? 1 : 0),
  (e) => { console.log('not ok - harness: ' + e.message); process.exit(1); },
);
