const { chromium } = require('playwright-core');
(async () => {
  const b = await chromium.launch({ executablePath: '/usr/bin/chromium', args: ['--no-sandbox','--disable-gpu','--disable-background-networking'] });
  const p = await b.newPage({ viewport: { width: 1280, height: 800 } });
  await p.goto('file:///work/vp/probe.html');
  await p.waitForSelector('body[data-state]', { timeout: 60000 });
  for (const q of ['Repository\\.find|::merge', 'Repository', 'a', 'x', 'Impl\\.find', '', 'Repository\\.find|::merge']) {
    const r = await p.evaluate((q) => new Promise((done) => {
      const s = document.getElementById('search'); s.value = q; const t0 = performance.now(); s.dispatchEvent(new Event('input'));
      requestAnimationFrame(() => { const t1 = performance.now(); const m = (n) => { const e = performance.getEntriesByName('ember:' + n).pop(); return e ? e.duration.toFixed(1) : '-'; };
        done(`${q}: total ${(t1 - t0).toFixed(1)} hits ${m('hits')} weight ${m('weight')} draw ${m('draw')} matched ${document.getElementById('matched').textContent}`); });
    }), q);
    console.log(r);
  }
  await b.close();
})();
