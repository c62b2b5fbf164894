// Builds a self-contained flamegraph page from flamegraph/flamegraph.html and
// a synthetic, deterministic profile (data contract version 2).
//
//   node tests/browser/make_fixture.mjs OUT.html [--big] [--unit samples|ns|bytes] [--diff]
//
// Default: ~5,000 unique stacks. --big: 100,000 unique stacks of depth 8-60.
// The profile holds kernel, native, cpp, jit, inlined, interpreted, alloc,
// thread, process and unknown frames, a 250-deep recursive stack, recursion
// with gaps (a recursive-descent parser), Java lambda classes with ids, two
// sibling frames of one name (_start in ld.so and in the executable), and
// frame names / a title that try to inject HTML.
//
// --diff: a differential page. BASE is the profile above; NEW is the same
// with every weight doubled, plus known changes under myapp's main:
// app::Diff::growing() goes from 2% to 10% of the total, app::Diff::shrinking()
// from 10% to 2%, app::Diff::added() (3%) exists only in NEW and
// app::Diff::removed() (3%) only in BASE; each calls app::Diff::work().
import { readFileSync, writeFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { packTables } from './tables.mjs';

const PLACEHOLDER = '@EMBER_DATA@';
const TEMPLATE = resolve(dirname(fileURLToPath(import.meta.url)), '../../flamegraph/flamegraph.html');
const XSS_PROCESS = '</script><script>alert(1)</script>';
const XSS_THREAD = '<img src=x onerror=alert(2)>';

function parseArgs(argv) {
  const args = { out: null, big: false, unit: 'samples', diff: false };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--big') args.big = true;
    else if (argv[i] === '--diff') args.diff = true;
    else if (argv[i] === '--unit') args.unit = argv[++i];
    else if (!args.out) args.out = argv[i];
    else throw new Error('unexpected argument: ' + argv[i]);
  }
  if (!args.out || !['samples', 'ns', 'bytes'].includes(args.unit)) {
    throw new Error('usage: make_fixture.mjs OUT.html [--big] [--unit samples|ns|bytes] [--diff]');
  }
  return args;
}

// Small seeded PRNG so fixtures are reproducible.
function mulberry32(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const KINDS = ['kernel', 'native', 'cpp', 'jit', 'inlined', 'interpreted', 'alloc', 'thread', 'process', 'unknown'];

// Interns names, modules and (name, kind, module) frames into the JSON pools.
class Pools {
  constructor() {
    this.names = []; this.modules = ['']; this.frames = [];
    this.nameIds = new Map(); this.moduleIds = new Map([['', 0]]); this.frameIds = new Map();
  }
  intern(list, ids, value) {
    if (!ids.has(value)) { ids.set(value, list.length); list.push(value); }
    return ids.get(value);
  }
  frame(name, kind, module = '') {
    const key = `${name}\0${kind}\0${module}`;
    if (!this.frameIds.has(key)) {
      this.frameIds.set(key, this.frameIds.size);
      this.frames.push(this.intern(this.names, this.nameIds, name), KINDS.indexOf(kind),
        this.intern(this.modules, this.moduleIds, module));
    }
    return this.frameIds.get(key);
  }
}

const APP = '/usr/bin/myapp';
const LIBC = '/usr/lib/x86_64-linux-gnu/libc.so.6';
const KERNEL = '[kernel.kallsyms]';
const KERNEL_CHAIN = ['entry_SYSCALL_64_after_hwframe', 'do_syscall_64', '__x64_sys_read', 'ksys_read',
  'vfs_read', 'new_sync_read', 'sock_read_iter', 'tcp_recvmsg', 'tcp_recvmsg_locked', 'skb_copy_datagram_iter',
  '_copy_to_iter', 'copy_user_enhanced_fast_string'];
const VERBS = ['read', 'parse', 'handle', 'encode', 'decode', 'flush', 'lookup', 'insert', 'compute', 'render', 'hash', 'visit'];
const NOUNS = ['Request', 'Record', 'Buffer', 'Index', 'Page', 'Token', 'Frame', 'Batch', 'Node', 'Chunk'];

// A random call DAG: function i only calls functions with larger ids, so
// walks terminate and recursion appears only where we add it on purpose.
function makeFunctions(pools, rand, count) {
  const fns = [];
  for (let i = 0; i < count; i++) {
    const r = rand(), verb = VERBS[i % VERBS.length], noun = NOUNS[(i * 7) % NOUNS.length];
    let frame;
    if (r < 0.55) frame = pools.frame(`app::${noun}Service::${verb}${noun}_${i}(${noun} const&)`, 'cpp', APP);
    else if (r < 0.65) frame = pools.frame(`app::detail::${verb}_${i}`, 'inlined', APP);
    else if (r < 0.75) frame = pools.frame(`__libc_${verb}_${i}`, 'native', LIBC);
    else if (r < 0.85) frame = pools.frame(`Ljava/app/${noun};::${verb}${i}`, 'jit', '[jit]');
    else if (r < 0.93) frame = pools.frame(`py:${verb}_${noun.toLowerCase()}_${i} (handlers.py:${i})`, 'interpreted', '/usr/bin/python3.11');
    else frame = pools.frame(i % 2 ? `operator new(unsigned long) #${i}` : `malloc #${i}`, 'alloc', LIBC);
    fns.push({ frame, callees: [] });
  }
  fns.forEach((fn, i) => {
    const n = 1 + Math.floor(rand() * 5);
    for (let j = 0; j < n; j++) {
      const target = i + 1 + Math.floor(rand() * 40);
      if (target < count) fn.callees.push(target);
    }
  });
  return fns;
}

// Process -> thread -> startup frames, shared by every stack of that thread.
function makeThreads(pools) {
  const start = ['_start', '__libc_start_main', 'main'].map((n) => pools.frame(n, n === 'main' ? 'cpp' : 'native', n === 'main' ? APP : LIBC));
  const proc = (name) => pools.frame(name, 'process');
  const thread = (name) => pools.frame(name, 'thread');
  return [
    { share: 0.45, prefix: [proc('myapp'), thread('myapp'), ...start] },
    { share: 0.15, prefix: [proc('myapp'), thread('worker-1'), ...start] },
    { share: 0.15, prefix: [proc(XSS_PROCESS), thread(XSS_THREAD), ...start] },
    { share: 0.15, prefix: [proc('postgres'), thread('postgres'), ...start] },
    { share: 0.10, kernelOnly: true, prefix: [proc('swapper'), thread('swapper/0'),
      ...['secondary_startup_64', 'start_secondary', 'cpu_startup_entry', 'do_idle'].map((n) => pools.frame(n, 'kernel', KERNEL))] },
  ];
}

function pickThread(threads, r) {
  for (const t of threads) { if ((r -= t.share) < 0) return t; }
  return threads[threads.length - 1];
}

function randomStack(pools, rand, fns, threads) {
  const thread = pickThread(threads, rand());
  const stack = [...thread.prefix];
  const depth = 8 + Math.floor(rand() * 53);
  if (thread.kernelOnly) {
    const idle = ['default_idle_call', 'cpuidle_idle_call', 'call_cpuidle', 'cpuidle_enter', 'intel_idle', 'mwait_idle_with_hints'];
    stack.push(...idle.slice(0, 1 + Math.floor(rand() * idle.length)).map((n) => pools.frame(n, 'kernel', KERNEL)));
    return stack;
  }
  // Skewed walk down the call DAG: early callees are hot paths.
  let fn = Math.floor(rand() * rand() * 20);
  while (stack.length < depth - 2) {
    stack.push(fns[fn].frame);
    const callees = fns[fn].callees;
    if (!callees.length) break;
    fn = callees[Math.floor(rand() * rand() * callees.length)];
  }
  const leaf = rand();
  if (leaf < 0.3) {
    const n = 2 + Math.floor(rand() * (KERNEL_CHAIN.length - 1));
    stack.push(...KERNEL_CHAIN.slice(0, n).map((name) => pools.frame(name, 'kernel', KERNEL)));
  } else if (leaf < 0.35) {
    stack.push(pools.frame('[unknown]', 'unknown'));
  }
  return stack;
}

// 250 frames deep: forces vertical scrolling and exercises recursion.
function deepStack(pools, threads) {
  const rec = pools.frame('app::Tree::visitRecursive(Node*)', 'cpp', APP);
  return [...threads[0].prefix, ...Array(245).fill(rec)];
}

function generate({ big, unit }) {
  const rand = mulberry32(big ? 0xb16 : 0xe3b3);
  const pools = new Pools();
  const fns = makeFunctions(pools, rand, big ? 4000 : 800);
  const threads = makeThreads(pools);
  const target = big ? 100_000 : 5_000;
  const scale = unit === 'ns' ? 1_000_000 : unit === 'bytes' ? 4096 : 1;
  const byKey = new Map();
  while (byKey.size < target) {
    const stack = randomStack(pools, rand, fns, threads);
    const key = stack.join(',');
    if (!byKey.has(key)) byKey.set(key, { stack, weight: (1 + Math.floor(40 * rand() ** 3)) * scale });
  }
  let total = 0;
  for (const s of byKey.values()) total += s.weight;
  const deep = deepStack(pools, threads);
  byKey.set(deep.join(','), { stack: deep, weight: Math.round(total * 0.03) });
  // Added after the random stacks, with their own PRNG, so those stay as they were.
  const extraRand = mulberry32(0x1a3b);
  for (const stack of [...lambdaStacks(pools, threads), ...parserStacks(pools, threads, extraRand)]) {
    byKey.set(stack.join(','), { stack, weight: Math.max(1, Math.round(total * (0.002 + 0.003 * extraRand()))) });
  }
  const twin = loaderStack(pools, threads);
  byKey.set(twin.join(','), { stack: twin, weight: Math.round(total * 0.015) });
  return { pools, threads, list: [...byKey.values()], total };
}

// Java lambdas: one class per call site with a generated id, the case for a
// "replace" transform (e.g. \$\$Lambda\$\d+/0x[0-9a-f]+ -> $$Lambda).
function lambdaStacks(pools, threads) {
  const jit = (n) => pools.frame(n, 'jit', '[jit]');
  const prefix = [...threads[1].prefix, jit('Ljava/lang/Thread;::run'),
    jit('Ljava/util/concurrent/ThreadPoolExecutor$Worker;::run'), jit('Ljava/app/Dispatcher;::dispatch')];
  const out = [];
  for (let i = 0; i < 8; i++) {
    const id = 17 + 23 * i, addr = (0x800c01000 + 0x2a8 * i).toString(16).padStart(16, '0');
    out.push([...prefix, jit(`Ljava/app/Handler$$Lambda$${id}/0x${addr};::apply`), jit(`Ljava/app/Handler;::lambda$handle$${i % 3}`)]);
  }
  return out;
}

// A process caught in its dynamic loader: a second _start (ld.so's) beside
// its executable's, the same name under the same parent.
function loaderStack(pools, threads) {
  const ld = (n) => pools.frame(n, 'native', '/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2');
  return [...threads[3].prefix.slice(0, 2), ld('_start'), ld('_dl_start'), ld('_dl_start_final')];
}

// A recursive-descent parser: parseExpr -> parseTerm -> parseFactor ->
// parseExpr ... so functions recur with other frames in between.
function parserStacks(pools, threads, rand) {
  const cpp = (n) => pools.frame(n, 'cpp', APP);
  const cycle = ['app::Parser::parseExpr(Lexer&)', 'app::Parser::parseTerm(Lexer&)', 'app::Parser::parseFactor(Lexer&)'].map(cpp);
  const leaves = ['app::Lexer::next()', 'app::Lexer::peek() const', 'app::Ast::makeNode(Kind)'].map(cpp);
  const out = [];
  for (let i = 0; i < 24; i++) {
    const len = 2 + Math.floor(rand() * 12);
    const stack = [...threads[0].prefix, cpp('app::Parser::parse(std::string_view)')];
    for (let j = 0; j < len; j++) stack.push(cycle[j % 3]);
    stack.push(leaves[i % 3]);
    out.push(stack);
  }
  return out;
}

// NEW for --diff: BASE with doubled weights and the known changes.
function diffProfiles(pools, threads, list, total) {
  const cpp = (n) => pools.frame(n, 'cpp', APP);
  const main = threads[0].prefix, work = cpp('app::Diff::work()');
  const at = (name) => [...main, cpp(name), work];
  const base = list.map((s) => ({ stack: s.stack, weight: s.weight }));
  const now = list.map((s) => ({ stack: s.stack, weight: 2 * s.weight }));
  base.push({ stack: at('app::Diff::growing()'), weight: Math.round(0.02 * total) },
    { stack: at('app::Diff::shrinking()'), weight: Math.round(0.10 * total) },
    { stack: at('app::Diff::removed()'), weight: Math.round(0.03 * total) });
  now.push({ stack: at('app::Diff::growing()'), weight: Math.round(0.10 * 2 * total) },
    { stack: at('app::Diff::shrinking()'), weight: Math.round(0.02 * 2 * total) },
    { stack: at('app::Diff::added()'), weight: Math.round(0.03 * 2 * total) });
  return { base, now };
}

function compareStacks(a, b) {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return a.length - b.length;
}

// Root-first stacks, sorted, each coded as: prefix, n, f_1..f_n, weight.
function encodeStacks(list) {
  list.sort((p, q) => compareStacks(p.stack, q.stack));
  const out = [];
  let prev = [];
  for (const { stack, weight } of list) {
    let prefix = 0;
    while (prefix < prev.length && prefix < stack.length && prev[prefix] === stack[prefix]) prefix++;
    out.push(prefix, stack.length - prefix, ...stack.slice(prefix), weight);
    prev = stack;
  }
  return out;
}

// Same escaping as the C++ writer: no '<', '>' or '&' can reach the HTML parser.
function escapeForScript(json) {
  return json.replace(/</g, '\\u003c').replace(/>/g, '\\u003e').replace(/&/g, '\\u0026');
}

function main() {
  const args = parseArgs(process.argv.slice(2));
  const gen = generate(args);
  const { pools } = gen;
  let list = gen.list, base = null;
  if (args.diff) ({ now: list, base } = diffProfiles(pools, gen.threads, gen.list, gen.total));
  const sum = (l) => l.reduce((acc, s) => acc + s.weight, 0);
  const total = sum(list);
  const data = {
    version: 2,
    title: `ember — cpu-clock, 10.0 s, host <b>fixture</b>${args.big ? ' (big)' : ''}${args.diff ? ' (diff): baseline-recording.html → candidate-recording.html' : ''}`,
    event: 'cpu-clock',
    unit: args.unit,
    kinds: KINDS,
    total,
    info: { samples: total, lost: 12, truncated: 1, unknown: 3, duration_s: 10.0, host: '<i>fixture</i>' },
  };
  if (base) {
    data.label = 'new.folded';
    data.base = { total: sum(base), label: 'base.folded' };
  }
  data.tables = packTables({ names: pools.names, modules: pools.modules, frames: pools.frames,
    stacks: encodeStacks(list), baseStacks: base ? encodeStacks(base) : [] });
  const template = readFileSync(TEMPLATE, 'utf8');
  if (template.split(PLACEHOLDER).length !== 2) throw new Error(`${TEMPLATE} must contain ${PLACEHOLDER} exactly once`);
  // A function replacement, so '$' sequences in the data are not special.
  const html = template.replace(PLACEHOLDER, () => escapeForScript(JSON.stringify(data)));
  writeFileSync(args.out, html);
  console.log(`wrote ${args.out}: ${list.length} stacks${base ? ` (base ${base.length})` : ''}, ${pools.frames.length / 3} frames, ${(html.length / 1e6).toFixed(2)} MB`);
}

main();
