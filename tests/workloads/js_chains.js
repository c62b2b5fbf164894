// Known JavaScript call chains for ember's tests, in every Node.js from 18:
// the main thread spins in outer -> Shapes.middle -> inner (a method, and
// inner too large for V8's optimizing compiler to inline, so that its
// frames stay apart), a worker thread (an isolate of its own) spins in
// workerOuter -> workerInner. Prints "ready" once both spin.
// Usage: node js_chains.js SECONDS
'use strict';
const { Worker, isMainThread, parentPort } = require('worker_threads');

const end = Date.now() + 1000 * Number(process.argv[2] || 60);

// Each case a different operation: bytecode past V8's inlining budget.
function inner(n) {
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

class Shapes {
  middle() { return inner(20000); }
}

function outer() {
  const shapes = new Shapes();
  let s = 0;
  while (Date.now() < end) s += shapes.middle();
  return s;
}

function workerInner(n) {
  let x = 0;
  for (let i = 0; i < n; i++) x += Math.sqrt(i) * Math.sin(i);
  return x;
}

function workerOuter() {
  let s = 0;
  while (Date.now() < end) s += workerInner(20000);
  return s;
}

if (isMainThread) {
  const worker = new Worker(__filename, { argv: process.argv.slice(2) });
  worker.on('message', () => {
    console.log('ready');
    outer();
    worker.terminate();
  });
} else {
  parentPort.postMessage('spinning');
  workerOuter();
}
