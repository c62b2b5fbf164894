// Checks of the viewer's analysis features — transforms, reverse, sort by
// weight, the function table, the sandwich view, URL state and saved
// defaults — run by flamegraph.test.mjs on the page it has open. Expected
// values come from lib.mjs's independent model of the embedded JSON.
import { pathToFileURL } from 'node:url';
import { resolve } from 'node:path';
import {
  assert, assertPercent, buildModel, calibrate, canvasBox, canvasHash, check, differingColumns, escapeRegExp,
  gridCheck, hoverMany, labelledStacks, matchedShare, meta, nodes, reverseStacks, sameTree, sandwichStacks, settle, sumWeight,
  transforms, waitReady, watch,
} from './lib.mjs';

const LAMBDA_RE = '\\$\\$Lambda\\$\\d+/0x[0-9a-f]+';

// Names that sit inside stacks (not only at the root or as leaves) and cover
// a fair share of the weight: good regex targets in any profile.
function candidates(stacks, maxDepth) {
  const total = sumWeight(stacks), share = new Map(), inner = new Set();
  for (const s of stacks) {
    const seen = new Set();
    s.frames.forEach((l, i) => {
      if (i >= 2 && i < s.frames.length - 1 && i < maxDepth) inner.add(l.name);
      if (!seen.has(l.name)) { seen.add(l.name); share.set(l.name, (share.get(l.name) || 0) + s.weight); }
    });
  }
  return [...share]
    .filter(([n, w]) => inner.has(n) && w / total >= 0.005 && w / total <= 0.995)
    .sort((a, b) => Math.abs(a[1] / total - 0.25) - Math.abs(b[1] / total - 0.25) || (a[0] < b[0] ? -1 : 1))
    .map(([n]) => n);
}

// Per function (name + kind): self (leaf) and total (once per stack).
function functionStats(stacks) {
  const stats = new Map();
  const get = (l) => {
    const k = l.name + '\0' + l.kind;
    if (!stats.has(k)) stats.set(k, { name: l.name, kind: l.kind, self: 0, total: 0 });
    return stats.get(k);
  };
  for (const s of stacks) {
    const seen = new Set();
    for (const l of s.frames) { const st = get(l); if (!seen.has(st)) { seen.add(st); st.total += s.weight; } }
    if (s.frames.length) get(s.frames[s.frames.length - 1]).self += s.weight;
  }
  return stats;
}

async function readTable(page, limit = 40) {
  return page.evaluate((limit) => [...document.querySelectorAll('#fn-body tr')].slice(0, limit).map((tr) => ({
    name: tr.querySelector('.fn-name').textContent,
    kind: tr.querySelector('.fn-kind').textContent.trim(),
    cells: [...tr.children].map((td) => td.textContent),
    selected: tr.getAttribute('aria-selected') === 'true',
  })), limit);
}

const pct = (text) => parseFloat(/([\d.]+)%/.exec(text)[1]);

async function addTransform(page, kind, re, to) {
  if (!(await page.locator('#tf-panel').isVisible())) await page.click('#tf-btn');
  await page.selectOption('#tf-kind', kind);
  await page.fill('#tf-re', re);
  if (to !== undefined) await page.fill('#tf-to', to);
  await page.click('#tf-add');
  await settle(page);
}

const pressed = (page, sel) => page.evaluate((sel) => document.querySelector(sel).getAttribute('aria-pressed') === 'true', sel);

// What a person sees of the view state, for "same view" comparisons.
function viewState(page) {
  return page.evaluate(() => ({
    search: document.getElementById('search').value,
    matched: document.getElementById('matched').hidden ? '' : document.getElementById('matched').textContent,
    transforms: [...document.querySelectorAll('#tf-list li')].map((li) => li.textContent),
    pressed: ['orient', 'reverse', 'sort'].map((id) => document.getElementById(id).getAttribute('aria-pressed')),
    theme: document.documentElement.dataset.theme || '',
    crumbs: [...document.querySelectorAll('#crumbs button')].map((b) => b.textContent),
  }));
}

export async function featureChecks({ page, file, data, pageErrors, dialogs }) {
  const url = pathToFileURL(resolve(file)).href;
  const original = labelledStacks(data, data.stacks);
  const plain = buildModel(original);
  const { width: W } = await canvasBox(page, '#flame');
  let geo = null, visibleDepth = 0, names = [];

  await check('hover grid over the whole graph matches the independent model', async () => {
    await page.keyboard.press('Escape');
    geo = await calibrate(page, '#flame', false, W / 2);
    visibleDepth = Math.floor(geo.y0 / geo.rowH);
    names = candidates(original, visibleDepth - 4);   // targets low enough that what changes is on screen
    return `${await gridCheck(page, { model: plain, geometry: geo })} points`;
  });

  await check('a click zooms the frame clicked, not a sibling of the same name', async () => {
    const px = (w) => (w * W) / plain.total;
    const twins = [...nodes(plain)].filter((n) => n.parent && n.depth < visibleDepth && px(n.total) >= 6 &&
      n.parent.children.some((c) => c !== n && c.label.name === n.label.name));
    if (!twins.length) return 'SKIP no two sibling frames share a name';
    for (const n of twins.slice(0, 6)) {
      const y = Math.round(geo.rowY(n.depth));
      await page.locator('#flame').click({ position: { x: Math.round(px(n.x0 + n.total / 2)), y } });
      await settle(page);
      const [left, right] = await hoverMany(page, '#flame', [[2, y], [Math.round(W) - 3, y]]);
      await page.keyboard.press('Escape');   // the later checks start unzoomed
      await settle(page);
      const want = `${n.label.name} (${meta(n.label)})`, got = (t) => t && `${t.name} (${t.meta})`;
      assert(got(left) === want && got(right) === want, `clicking ${want} zoomed to ${got(left)} … ${got(right)}`);
    }
    return `${twins.length} frames with a twin`;
  });

  const chartHeight = () => page.evaluate(() => {
    const c = document.getElementById('chart');
    return { scroll: c.scrollHeight, client: c.clientHeight };
  });

  // Adds one transform through the panel, compares the graph with the model,
  // removes it with its × button and compares with the plain model again.
  // Leaves no transform behind, whatever failed.
  const clearTransforms = async () => {
    if (await page.locator('#tf-list li').count()) { await page.click('#tf-clear'); await settle(page); }
  };

  // `candidates`: regexes to try, the first whose change is on screen wins.
  async function transformCase(title, kind, candidates, to) {
    await check(`transform: ${title}`, async () => {
      try { return await transformCaseBody(kind, candidates.filter((r) => r !== null), to); } finally { await clearTransforms(); }
    });
  }

  async function transformCaseBody(kind, candidates, to) {
    {
      if (!candidates.length) return 'SKIP no suitable frame in this profile';
      if (!(await page.locator('#tf-panel').isVisible())) await page.click('#tf-btn');
      const { width } = await canvasBox(page, '#flame');   // the panel narrows the graph
      let re = null, after = null, xs = [];
      for (const c of candidates.slice(0, 6)) {
        const m = buildModel(transforms[kind](original, c ? new RegExp(c) : null, to));
        if (sameTree(m, plain)) continue;
        const cols = differingColumns(m, plain, width, visibleDepth);
        if (after === null || (cols.length && !xs.length)) { re = c; after = m; xs = cols; }
        if (xs.length) break;
      }
      if (!after) return 'SKIP transform changes nothing in this profile';
      await addTransform(page, kind, re, to);
      const items = await page.locator('#tf-list li').allTextContents();
      assert(items.length === 1, `panel lists ${items.length} transforms`);
      if (re) assert(items[0].includes(re), `panel item ${JSON.stringify(items[0])} lacks the regex`);
      assert((await page.textContent('#tf-btn')).includes('(1)'), 'Transforms button does not count 1');
      const points = await gridCheck(page, { model: after, geometry: geo, xs, versus: plain });
      const h = await chartHeight();
      const want = Math.max(h.client, (after.maxDepth + 1) * geo.rowH + 8);
      assert(Math.abs(h.scroll - want) <= 1, `graph is ${h.scroll}px tall, expected ${want} for depth ${after.maxDepth}`);
      await page.locator('#tf-list .tf-remove').first().click();
      await settle(page);
      assert(await page.locator('#tf-list li').count() === 0, 'transform not removed');
      await gridCheck(page, { model: plain, geometry: geo, xs });
      return `/${re}/: ${points} points, ${xs.length} columns where it differs; depth ${plain.maxDepth} -> ${after.maxDepth}`;
    }
  }

  const re = (name) => (name === undefined ? null : '^' + escapeRegExp(name) + '$');
  const from = (i) => names.slice(i).concat(names.slice(0, i)).map(re);   // each case starts elsewhere in the list
  await transformCase('filter keeps only stacks with a match', 'filter', from(0));
  await transformCase('remove drops stacks with a match', 'remove', from(1));
  const hasLambda = original.some((s) => s.frames.some((l) => new RegExp(LAMBDA_RE).test(l.name)));
  await transformCase('replace strips lambda ids, equal frames merge', 'replace', [hasLambda ? LAMBDA_RE : null], '$$Lambda');
  await transformCase('replace with a $1 group', 'replace', ['(\\D)\\d+'], '$1N');
  await transformCase('hide frames above the first match', 'above', from(2));
  await transformCase('hide frames below the last match', 'below', from(3));
  await transformCase('collapse direct recursion (any frame)', 'collapse', ['']);
  await transformCase('collapse recursion with gaps (any frame)', 'gaps', ['']);

  await check('transforms apply in order and are removable one by one; clear all', async () => {
    if (names.length < 2) return 'SKIP no suitable frame in this profile';
    const r1 = new RegExp('(\\D)\\d+'), r2 = new RegExp(re(names[1]).replace(/\d+/g, 'N'));
    // Replace first, then remove by the replaced name: the order matters.
    await addTransform(page, 'replace', r1.source, '$1N');
    await addTransform(page, 'remove', r2.source);
    const both = buildModel(transforms.remove(transforms.replace(original, r1, '$1N'), r2));
    await gridCheck(page, { model: both, geometry: geo });
    await page.locator('#tf-list .tf-remove').first().click();
    await settle(page);
    const items = await page.locator('#tf-list li').allTextContents();
    assert(items.length === 1 && items[0].includes(r2.source), `left: ${JSON.stringify(items)}`);
    await gridCheck(page, { model: buildModel(transforms.remove(original, r2)), geometry: geo });
    await page.click('#tf-clear');
    await settle(page);
    assert(await page.locator('#tf-list li').count() === 0, 'clear all left transforms');
    await gridCheck(page, { model: plain, geometry: geo });
    await page.click('#tf-btn');   // close the panel
  });

  await check('invalid transform regex is refused with a message', async () => {
    await addTransform(page, 'filter', '([');
    assert(await page.locator('#tf-error').isVisible(), 'no error shown');
    assert(await page.locator('#tf-list li').count() === 0, 'invalid transform was added');
    assert(pageErrors.length === 0, `page error: ${pageErrors[0]}`);
    await page.fill('#tf-re', '');
    await page.click('#tf-btn');
  });

  await check('reverse: leaves become roots, merged (button and r)', async () => {
    await page.click('#reverse');
    await settle(page);
    assert(await pressed(page, '#reverse'), 'reverse not pressed');
    const n = await gridCheck(page, { model: buildModel(reverseStacks(original)), geometry: geo });
    await page.keyboard.press('r');
    await settle(page);
    assert(!(await pressed(page, '#reverse')), 'r did not toggle reverse off');
    await gridCheck(page, { model: plain, geometry: geo });
    return `${n} points`;
  });

  await check('sort by weight: heaviest child first (button and w)', async () => {
    await page.click('#sort');
    await settle(page);
    const model = buildModel(original, { sort: 'weight' });
    const n = await gridCheck(page, { model, geometry: geo });
    // Root children, left to right, by hovering row 1.
    const xs = [];
    for (let x = 1; x < W; x += 2) xs.push([x, Math.round(geo.rowY(1))]);
    const shares = [];
    for (const t of await hoverMany(page, '#flame', xs)) {
      if (t && t.name !== (shares[shares.length - 1] || {}).name) shares.push({ name: t.name, p: pct(t.weight) });
    }
    for (let i = 1; i < shares.length; i++) assert(shares[i - 1].p >= shares[i].p, `${shares[i - 1].name} (${shares[i - 1].p}%) left of heavier ${shares[i].name}`);
    await page.keyboard.press('w');
    await settle(page);
    assert(!(await pressed(page, '#sort')), 'w did not toggle back');
    await gridCheck(page, { model: plain, geometry: geo });
    return `${n} points; root children ${shares.map((s) => s.p).join(' ≥ ')}`;
  });

  const stats = functionStats(original);
  const total = sumWeight(original);
  await check('function table: self, total (once per stack), percent; sortable', async () => {
    await page.click('#fn-btn');
    await page.waitForSelector('#fn-body tr');
    const count = await page.textContent('#fn-count');
    assert(count.startsWith(stats.size.toLocaleString('en-US') + ' function'), `count ${JSON.stringify(count)}, expected ${stats.size}`);
    const head = await page.locator('#fn-head th').allTextContents();
    const col = (label) => head.findIndex((h) => h.replace(/[▾▴ ]+$/, '') === label);
    const [iSelfP, iTotalP] = [col('Self %'), col('Total %')];
    assert(iSelfP > 0 && iTotalP > 0, `headers ${JSON.stringify(head)}`);
    const verify = (rows, key) => {
      rows.forEach((r, i) => {
        const s = stats.get(r.name + '\0' + r.kind);
        assert(s, `row ${JSON.stringify(r.name)} (${r.kind}) is not a function of the profile`);
        assertPercent(r.cells[iSelfP], (100 * s.self) / total, `self % of ${r.name}`);
        assertPercent(r.cells[iTotalP], (100 * s.total) / total, `total % of ${r.name}`);
        if (i > 0) {
          const p = stats.get(rows[i - 1].name + '\0' + rows[i - 1].kind);
          assert(p[key] >= s[key], `${key}: ${rows[i - 1].name} (${p[key]}) above ${r.name} (${s[key]})`);
        }
      });
      const max = Math.max(...[...stats.values()].map((s) => s[key]));
      const top = stats.get(rows[0].name + '\0' + rows[0].kind);
      assert(top[key] === max, `first row ${key} ${top[key]}, max is ${max}`);
    };
    verify(await readTable(page), 'total');
    await page.click('#fn-head th[data-col="self"]');
    verify(await readTable(page), 'self');
    await page.click('#fn-head th[data-col="self"]');   // again: ascending
    const asc = await readTable(page, 5);
    const s0 = stats.get(asc[0].name + '\0' + asc[0].kind), s1 = stats.get(asc[1].name + '\0' + asc[1].kind);
    assert(s0.self <= s1.self, 'second click did not reverse the order');
    await page.click('#fn-head th[data-col="total"]');
  });

  await check('function table: filter box narrows the rows', async () => {
    const needle = (names[0] || [...stats.values()][0].name).slice(0, 6).toLowerCase();
    await page.fill('#fn-filter', needle);
    const want = [...stats.values()].filter((s) => s.name.toLowerCase().includes(needle)).length;
    const count = await page.textContent('#fn-count');
    assert(count.startsWith(want.toLocaleString('en-US') + ' function'), `count ${JSON.stringify(count)} for ${JSON.stringify(needle)}, expected ${want}`);
    const rows = await readTable(page, 1000);
    assert(rows.every((r) => r.name.toLowerCase().includes(needle)), 'a row does not contain the filter text');
    await page.fill('#fn-filter', '');
    return `${JSON.stringify(needle)}: ${want} rows`;
  });

  // The sandwich target: called from somewhere and calling something.
  const target = [...stats.values()]
    .filter((s) => s.total / total >= 0.005 && s.total / total <= 0.995 && s.self < s.total &&
      original.every((st) => !st.frames.length || st.frames[0].name !== s.name) && !/[<>]/.test(s.name))
    .sort((a, b) => Math.abs(a.total / total - 0.3) - Math.abs(b.total / total - 0.3))[0];

  await check('function table: clicking a row highlights the function like a search', async () => {
    if (!target) return 'SKIP no suitable function';
    await page.fill('#fn-filter', target.name);
    const rows = await readTable(page, 1000);
    const i = rows.findIndex((r) => r.name === target.name && r.kind === target.kind);
    assert(i >= 0, `row for ${target.name} not found`);
    await page.locator('#fn-body tr').nth(i).click();
    await settle(page);
    const search = await page.inputValue('#search');
    const rx = new RegExp(search);
    assert(rx.test(target.name), `search ${JSON.stringify(search)} does not match ${target.name}`);
    assertPercent(await page.textContent('#matched'), 100 * matchedShare(original, rx), 'matched');
    assert((await readTable(page, 1000))[i].selected, 'row not marked selected');
    const magenta = await page.evaluate(() => {
      const c = document.getElementById('flame'), d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let j = 0; j < d.length; j += 4) if (d[j] > 200 && d[j + 1] < 140 && d[j + 2] > 200) n++;
      return n;
    });
    // Visible unless every occurrence is narrower than a pixel or above the screen.
    const { width } = await canvasBox(page, '#flame');
    const wide = [...nodes(plain)].some((n) => n.depth > 0 && n.depth <= visibleDepth && rx.test(n.label.name) && (n.total / plain.total) * width >= 1);
    if (wide) assert(magenta > 0, 'nothing highlighted in the graph');
    return `${target.name}: ${await page.textContent('#matched')}${wide ? '' : ' (no occurrence a pixel wide on screen)'}`;
  });

  await check('sandwich: callers above, callees below, drawn like the graph', async () => {
    if (!target) return 'SKIP no suitable function';
    await page.click('#fn-sandwich');
    await settle(page);
    assert(await page.locator('#sandwich').isVisible(), 'sandwich not shown');
    assert(!(await page.locator('#chart').isVisible()), 'main graph still shown');
    const title = await page.textContent('#sw-title');
    assert(title.includes(target.name), `title ${JSON.stringify(title)}`);
    const root = { name: target.name, kind: target.kind, module: '' };
    const notes = [];
    for (const [sel, callers] of [['#sw-callers canvas', true], ['#sw-callees canvas', false]]) {
      const model = buildModel(sandwichStacks(original, target.name, target.kind, callers), { root });
      assert(model.total === target.total, `${callers ? 'callers' : 'callees'} weigh ${model.total}, function total ${target.total}`);
      const { width } = await canvasBox(page, sel);
      const widest = model.root.children.reduce((a, b) => (b.total > a.total ? b : a), model.root.children[0]);
      if (!widest) { notes.push(`${callers ? 'callers' : 'callees'}: none`); continue; }
      const g = await calibrate(page, sel, !callers, ((widest.x0 + widest.total / 2) / model.total) * width);
      assert(callers ? g.rowY(1) < g.y0 : g.rowY(1) > g.y0, `${callers ? 'callers' : 'callees'} grow the wrong way`);
      const n = await gridCheck(page, { canvas: sel, model, geometry: g, pctBase: total });
      notes.push(`${callers ? 'callers' : 'callees'} ${n} points`);
    }
    await page.keyboard.press('Escape');
    await settle(page);
    assert(!(await page.locator('#sandwich').isVisible()) && (await page.locator('#chart').isVisible()), 'Escape did not close the sandwich');
    return target.name + ': ' + notes.join(', ');
  });

  await check('s on a hovered frame opens its sandwich; s again closes it', async () => {
    await page.locator('#title').click();   // keys go to the page, not a text box
    const box = await page.locator('#flame').boundingBox();
    await page.mouse.move(box.x + 5, box.y + 5);
    await page.mouse.move(box.x + box.width / 2, box.y + geo.rowY(3));
    assert(await page.locator('#tooltip').isVisible(), 'no tooltip under the pointer');
    const name = await page.evaluate(() => document.querySelector('#tooltip .tt-name').textContent);
    await page.keyboard.press('s');
    await settle(page);
    assert(await page.locator('#sandwich').isVisible(), 'sandwich not shown');
    assert((await page.textContent('#sw-title')).includes(name), `title lacks ${name}`);
    await page.keyboard.press('s');
    await settle(page);
    assert(!(await page.locator('#sandwich').isVisible()), 's did not close it');
    await page.fill('#search', '');
    await page.click('#fn-btn');   // close the table
    await settle(page);
    return name;
  });

  await check('help overlay lists the new shortcuts', async () => {
    await page.locator('#title').click();
    await page.keyboard.press('?');
    const text = await page.textContent('#help');
    for (const k of ['reverse', 'weight', 'transforms', 'functions', 'sandwich', 'normalise', 'base']) {
      assert(text.toLowerCase().includes(k), `help lacks ${k}`);
    }
    await page.keyboard.press('Escape');
  });

  await check('keys x and f toggle the transforms and function panels', async () => {
    await page.keyboard.press('x');
    assert(await page.locator('#tf-panel').isVisible(), 'x did not open transforms');
    await page.keyboard.press('f');
    assert(await page.locator('#fn-panel').isVisible(), 'f did not open functions');
    await page.keyboard.press('x');
    await page.keyboard.press('f');
    assert(!(await page.locator('#side').isVisible()), 'panels still open');
  });

  const context = page.context();
  const open = async (href) => {
    const p = await context.newPage();
    watch(p, dialogs, pageErrors);
    await p.goto(href);
    await waitReady(p);
    await settle(p);
    return p;
  };

  await check('URL fragment: a link reopens the same view; no history entries', async () => {
    const p = await open(url);
    const history0 = await p.evaluate(() => history.length);
    await p.click('#sort');
    await p.click('#orient');
    await p.click('#theme');
    await p.click('#reverse');
    await addTransform(p, 'replace', '(\\D)\\d+', '$1N');
    if (names[1]) await addTransform(p, 'remove', re(names[1]));
    await p.fill('#search', names[0] ? escapeRegExp(names[0]).replace(/\d+/g, 'N') : 'a');
    await p.click('#tf-btn');   // panels are not view state
    await settle(p);
    const g = await calibrate(p, '#flame', true, W / 2);
    const box = await p.locator('#flame').boundingBox();
    // Zoom into the widest frame of row 2 that is not already full width.
    const row = [];
    for (let x = 1; x < box.width; x += 3) row.push([x, Math.round(g.rowY(2))]);
    let best = null;
    (await hoverMany(p, '#flame', row)).forEach((t, i) => {
      if (t && pct(t.weight) < 99.99 && (!best || pct(t.weight) > best.p)) best = { x: row[i][0], p: pct(t.weight) };
    });
    if (!best) return 'SKIP nothing to zoom into in row 2 of this profile';
    await p.mouse.click(box.x + best.x, box.y + g.rowY(2));
    await settle(p);
    const link = p.url();
    assert(link.includes('#'), 'no fragment in the URL');
    assert(await p.evaluate(() => history.length) === history0, 'state changes added history entries');
    const a = await viewState(p), ha = await canvasHash(p);
    assert(a.crumbs.length === 3, `zoom did not happen: crumbs ${JSON.stringify(a.crumbs)}`);
    const q = await open(link);
    const b = await viewState(q), hb = await canvasHash(q);
    assert(JSON.stringify(a) === JSON.stringify(b), `view differs: ${JSON.stringify(a)} vs ${JSON.stringify(b)}`);
    assert(ha === hb, 'canvas pixels differ');
    await p.close();
    await q.close();
    return `${decodeURIComponent(link.slice(link.indexOf('#'))).slice(0, 160)}…`;
  });

  await check('malformed URL fragments are ignored, valid parts applied, nothing thrown', async () => {
    const before = pageErrors.length;
    const frags = ['#%E0%A4%A', '#zoom=[1,2', '#tf=[["filter","("]]&sort=sideways&icicle=maybe',
      '#tf={"a":1}&zoom="x"&sandwich=[1]&theme=<b>', '#search=(&reverse=1&zoom=["no","such","frames"]'];
    for (const frag of frags) {
      const p = await open(url + frag);
      const st = await viewState(p);
      assert(st.transforms.length === 0, `${frag}: transforms ${JSON.stringify(st.transforms)}`);
      if (frag.startsWith('#search')) {
        assert(st.search === '(' && (await p.locator('#search-error').isVisible()), `${frag}: search not shown as invalid`);
        assert(st.pressed[1] === 'true', `${frag}: reverse=1 not applied`);
      } else {
        assert(st.pressed.every((x) => x === 'false') && st.theme === '', `${frag}: state ${JSON.stringify(st)}`);
      }
      await p.close();
    }
    assert(pageErrors.length === before, `page error: ${pageErrors[before]}`);
  });

  await check('save as default: new graphs open with it unless the URL has state; reset defaults', async () => {
    const p = await open(url);
    await p.click('#reverse');
    await addTransform(p, 'collapse', '');
    await p.click('#save-defaults');
    const q = await open(url);
    let st = await viewState(q);
    assert(st.transforms.length === 1 && st.pressed[1] === 'true', `defaults not applied: ${JSON.stringify(st)}`);
    const stored = await q.evaluate(() => localStorage.getItem('ember.defaults'));
    assert(stored && JSON.parse(stored).reverse === true, `localStorage ember.defaults: ${stored}`);
    const r = await open(url + '#sort=weight');
    st = await viewState(r);
    assert(st.transforms.length === 0 && st.pressed[1] === 'false' && st.pressed[2] === 'true', `URL state did not win: ${JSON.stringify(st)}`);
    await q.click('#tf-btn');
    await q.click('#reset-defaults');
    const s = await open(url);
    st = await viewState(s);
    assert(st.transforms.length === 0 && st.pressed[1] === 'false', `defaults still applied after reset: ${JSON.stringify(st)}`);
    for (const x of [p, q, r, s]) await x.close();
  });
}
