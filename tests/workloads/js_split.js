// A known split of CPU time between three JavaScript functions, for
// bench/runtimes.sh: each work unit (a loop of random length) runs in
// alpha, beta or gamma, picked at random 5:3:2, so a sampler that does not
// alias with the units sees them 50%, 30% and 20% of the time. Each is too
// large for V8's optimizing compiler to inline into the loop that calls
// them (js_chains.js's inner), so each keeps a frame of its own.
// Usage: node js_split.js SECONDS
'use strict';

function alpha(n) {
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

function beta(n) {
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

function gamma(n) {
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

// xorshift: the same units in every run.
let seed = 88172645;
function random() {
  seed ^= seed << 13; seed ^= seed >>> 17; seed ^= seed << 5;
  return (seed >>> 0) / 4294967296;
}

// At the end the time each took ("alpha_ns N", ...): the truth a sampler
// is judged by, whatever the JIT made of the three. Wall-clock time: node
// has no clock of a thread's CPU time (the process's counts V8's compiler
// threads), so time preempted counts too, spread over the three as they run.
const end = Date.now() + 1000 * Number(process.argv[2] || 10);
const functions = [alpha, alpha, alpha, alpha, alpha, beta, beta, beta, gamma, gamma];
const spent = new Map(functions.map((f) => [f, 0n]));
let sum = 0;
while (Date.now() < end) {
  const f = functions[Math.floor(random() * 10)], n = 2000 + Math.floor(random() * 4000);
  const t = process.hrtime.bigint();
  sum += f(n);
  spent.set(f, spent.get(f) + process.hrtime.bigint() - t);
}
if (sum === 0.5) console.log(sum);  // keeps the work alive
for (const [f, ns] of spent) console.log(`${f.name}_ns ${ns}`);
