// JavaScript lines for ember's tests (--lines), in every Node.js from 18:
// as a server's handlers run, tick runs once per turn of the event loop
// and calls handle, which calls mix, small enough for V8's optimizing
// compiler to inline, then work, too large to inline; tick, called over
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

// Each case a different operation: bytecode past V8's inlining budget.
function work(n) {
  let x = 0;
  for (let i = 0; i < n; i++) {
    switch (i & 15) {
      case 0: x += Math.sqrt(i); break;
      case 1: x -= Math.sin(i) * 3; break;
      case 2: x += Math.cos(i) / 7; break;
      case 3: x ^= i << 2; break;
      case 4: x += Math.log1p(i) * 1.5; break;
      case 5: x -= Math.atan(i) + 2; break;
      case 6: x += Math.hypot(i, x & 255); break;
      case 7: x = (x * 31 + i) % 1000003; break;
      case 8: x += Math.exp(-(i & 7)); break;
      case 9: x -= Math.tanh(i / 1000); break;
      case 10: x += Math.cbrt(i) * 2; break;
      case 11: x ^= (i >>> 3) | 1; break;
      case 12: x += Math.abs(Math.sin(x)) * 5; break;
      case 13: x -= Math.floor(i / 3); break;
      case 14: x += Math.max(i & 63, x & 63); break;
      default: x += Math.round(Math.sqrt(i * 3)); break;
    }
  }
  return x;
}

function handle(n) {
  let s = 0;
  for (let i = 0; i < 150; i++) s += mix(i); // handle-mix
  return s + work(n); // handle-work
}

function tick(until, then) {
  handle(400); // tick-handle
  if (Date.now() < until) setImmediate(tick, until, then);
  else then();
}

tick(Math.min(end, Date.now() + 2000), () => {
  console.log('ready');
  tick(end, () => {});
});
