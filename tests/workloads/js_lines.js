// JavaScript lines for ember's tests (--lines), in every Node.js from 18:
// as a server's handlers run, tick runs once per turn of the event loop
// and calls handle, which calls mix, small enough for V8's optimizing
// compiler to inline, then work, larger; tick, called over
// and over, gets optimized code of its own (not code optimized on stack
// replacement, which a long-running loop would get). The test finds
// each call by the comment that ends its line. Prints "ready" once they
// have run long enough to be optimized.
// Usage: node js_lines.js SECONDS
'use strict';

const end = Date.now() + 1000 * Number(process.argv[2] || 60);

function mix(x) {
  let h = x;
  for (let j = 0; j < 40; j++) h = (h * 31 + j) | 0;
  return h;
}

// Strings and arrays, lines of several kinds, beyond what V8 inlines.
function work(n) {
  const words = [];
  let total = 0;
  for (let i = 0; i < n; i++) {
    const word = ((i * 2654435761) >>> 0).toString(36);
    if (word.length > 5) words.push(word.slice(1, 4).toUpperCase());
    else total += word.charCodeAt(0) * word.length;
    if (words.length === 16) {
      words.sort();
      total += words.join('-').length + words.indexOf('ZZZ');
      words.length = 0;
    }
    total = (total * 31 + (i & 1023)) % 1000003;
  }
  return total;
}

function handle(n) {
  let s = 0;
  for (let i = 0; i < 150; i++) s += mix(i); // handle-mix
  return s + work(n); // handle-work
}

function tick(until, then) {
  handle(24); // tick-handle
  if (Date.now() < until) setImmediate(tick, until, then);
  else then();
}

tick(Math.min(end, Date.now() + 2000), () => {
  console.log('ready');
  tick(end, () => {});
});
