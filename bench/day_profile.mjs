// Writes a pprof of a day-long recording with each sample's time (the
// "time" label ember writes): the input of the heatmap's targets.
//
//   node bench/day_profile.mjs [--hours H] [--hz N] [--cpus N] > FILE.pb.gz
//
// Shape (deterministic, fixed seed): one Java service kept busy on every
// CPU, sampled at N Hz (default 19, ember agent's rate) on N CPUs (2) for
// H hours (24): 3.3 million samples by default, each with its time.
//   - stacks: random walks down a call graph in which each function calls
//     2 to 5 others, from 40 entry paths; depth 10 to 80; about 30,000
//     unique stacks in a day;
//   - most samples pick a stack with a skew (a few hot, most rare);
//   - what changes over the day: a batch job from 01:00 to 02:00 with its
//     own entry paths, and a 2-second stall in a full GC every 37 minutes,
//     during which every sample is the GC's.
import { gzipSync } from 'node:zlib';
import { parseArgs } from 'node:util';
import { seeded } from './random.mjs';

const { values } = parseArgs({
  options: { hours: { type: 'string', default: '24' }, hz: { type: 'string', default: '19' }, cpus: { type: 'string', default: '2' } },
});
const HOURS = Number(values.hours), HZ = Number(values.hz), CPUS = Number(values.cpus);
if (!(HOURS > 0 && HZ > 0 && CPUS > 0)) throw new Error('usage: day_profile.mjs [--hours H] [--hz N] [--cpus N]');

const random = seeded(0x1b873593);
const pick = (list) => list[Math.floor(random() * list.length)];

// The functions: Java methods and some JVM, libc and kernel ones.
const WORDS = ['order', 'customer', 'invoice', 'payment', 'session', 'cache', 'index', 'request', 'response', 'batch',
  'stream', 'channel', 'buffer', 'codec', 'schema', 'record', 'ledger', 'account', 'token', 'route', 'query', 'plan'];
const VERBS = ['find', 'load', 'resolve', 'apply', 'encode', 'decode', 'dispatch', 'handle', 'merge', 'validate'];
const cap = (w) => w[0].toUpperCase() + w.slice(1);
const names = [];
for (let i = 0; i < 6000; i++) {
  names.push(`com.acme.${pick(WORDS)}.${cap(pick(WORDS))}${cap(pick(WORDS))}${pick(['Service', 'Handler', 'Impl', ''])}.` +
    `${pick(VERBS)}${cap(pick(WORDS))}`);
}
const LEAVES = ['__memmove_avx_unaligned_erms', '__libc_malloc', 'SharedRuntime::resolve_sub_helper', 'ObjectMonitor::enter',
  'copy_user_enhanced_fast_string', 'tcp_sendmsg_locked', 'asm_exc_page_fault', 'Unsafe_Park'];
const firstLeaf = names.length;
names.push(...LEAVES);
const GC = ['G1CollectedHeap::do_collection', 'G1FullCollector::collect', 'G1FullGCMarker::follow_marking_stacks',
  'G1FullGCMarker::mark_and_push', 'G1FullGCCompactTask::compact_region'];
const firstGc = names.length;
names.push(...GC);
const THREADS = ['start_thread', 'thread_native_entry', 'Thread::call_run', 'JavaThread::thread_main_inner'];
const firstThread = names.length;
names.push(...THREADS);

// Each function calls a few others: walks down this graph share prefixes.
const callees = [];
for (let f = 0; f < firstLeaf; f++) callees.push(Array.from({ length: 2 + Math.floor(random() * 4) }, () => Math.floor(random() * firstLeaf)));

// Stacks are root first, as function indices.
const thread = [firstThread, firstThread + 1, firstThread + 2, firstThread + 3];
function walk(entry) {
  const depth = 10 + Math.min(70, Math.floor(-Math.log(1 - random()) * 20));
  const s = thread.concat(entry);
  let f = entry[entry.length - 1];
  while (s.length < depth) s.push(f = pick(callees[f]));
  if (random() < 0.3) s.push(firstLeaf + Math.floor(random() * LEAVES.length));
  return s;
}
const entries = (n) => Array.from({ length: n }, () => Array.from({ length: 1 + Math.floor(random() * 3) }, () => Math.floor(random() * firstLeaf)));
const service = entries(40), batch = entries(6);
const unique = (make, n) => {
  const seen = new Map();
  for (let tries = 0; seen.size < n && tries < n * 4; tries++) { const s = make(); seen.set(s.join(','), s); }
  return [...seen.values()];
};
const serviceStacks = unique(() => walk(pick(service)), 24000);
const batchStacks = unique(() => walk(pick(batch)), 6000);
const gcStacks = GC.map((_, i) => thread.concat(Array.from({ length: i + 1 }, (_, k) => firstGc + k)));
const skewed = (list) => list[Math.floor(list.length * random() ** 3)];

// --- protobuf
class Out {
  constructor() { this.chunks = []; this.buf = Buffer.allocUnsafe(256); this.at = 0; }
  room(n) {
    if (this.at + n <= this.buf.length) return;
    this.chunks.push(this.buf.subarray(0, this.at));
    this.buf = Buffer.allocUnsafe(Math.max(Math.min(2 * this.buf.length, 1 << 24), n));
    this.at = 0;
  }
  varint(v) {
    this.room(10);
    while (v >= 128) { this.buf[this.at++] = (v % 128) | 128; v = Math.floor(v / 128); }
    this.buf[this.at++] = v;
  }
  bytes(b) { this.room(b.length); b.copy(this.buf, this.at); this.at += b.length; }
  field(n, wire) { this.varint(n * 8 + wire); }
  uint(n, v) { this.field(n, 0); this.varint(v); }
  message(n, b) { this.field(n, 2); this.varint(b.length); this.bytes(b); }
  done() { this.chunks.push(this.buf.subarray(0, this.at)); return Buffer.concat(this.chunks); }
}
const build = (fn) => { const o = new Out(); fn(o); return o.done(); };

const strings = ['', 'samples', 'count', 'cpu', 'nanoseconds', 'time', 'comm', 'java'];
const str = (s) => { strings.push(s); return strings.length - 1; };
const out = new Out();
out.message(1, build((o) => { o.uint(1, 1); o.uint(2, 2); }));
out.message(1, build((o) => { o.uint(1, 3); o.uint(2, 4); }));
out.message(3, build((o) => { o.uint(1, 1); o.uint(5, str('/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so')); o.uint(7, 1); }));
names.forEach((name, i) => {
  const id = str(name);
  out.message(5, build((o) => { o.uint(1, i + 1); o.uint(2, id); o.uint(3, id); }));
  out.message(4, build((o) => { o.uint(1, i + 1); o.uint(2, 1); o.message(4, build((l) => l.uint(1, i + 1))); }));
});
// A sample's body but its values and time: leaf-first locations, the comm label.
const comm = build((o) => { o.uint(1, 6); o.uint(2, 7); });
const bodies = new Map();
function body(stack) {
  let b = bodies.get(stack);
  if (!b) {
    b = build((o) => {
      const locs = build((l) => { for (let i = stack.length - 1; i >= 0; i--) l.varint(stack[i] + 1); });
      o.message(1, locs);
      o.message(3, comm);
    });
    bodies.set(stack, b);
  }
  return b;
}

const PERIOD_NS = 1e9 / HZ, TICKS = Math.round(HOURS * 3600 * HZ);
const HOUR_NS = 3600e9, STALL_EVERY_NS = 37 * 60e9, STALL_NS = 2e9;
// Written straight into the output: a sample is its body, its values and
// its time label (key "time", num t, unit "nanoseconds").
const valuesField = build((o) => o.message(2, build((v) => { v.varint(1); v.varint(Math.round(PERIOD_NS)); })));
const varintLength = (v) => { let n = 1; while (v >= 128) { v = Math.floor(v / 128); n++; } return n; };
let samples = 0;
for (let k = 0; k < TICKS; k++) {
  for (let c = 0; c < CPUS; c++) {
    const t = Math.round(k * PERIOD_NS + c * PERIOD_NS / CPUS + random() * 1e6);
    let stack;
    if (t % STALL_EVERY_NS < STALL_NS && t > STALL_NS) stack = pick(gcStacks);
    else if (t >= HOUR_NS && t < 2 * HOUR_NS && random() < 0.7) stack = skewed(batchStacks);
    else stack = skewed(serviceStacks);
    const b = body(stack), label = 5 + varintLength(t);
    out.field(2, 2);
    out.varint(b.length + valuesField.length + 2 + label);
    out.bytes(b);
    out.bytes(valuesField);
    out.field(3, 2);
    out.varint(label);
    out.uint(1, 5);
    out.uint(3, t);
    out.uint(4, 4);
    samples++;
  }
}
out.uint(9, Date.UTC(2026, 10, 25) * 1e6);
out.uint(10, Math.round(HOURS * HOUR_NS));
out.message(11, build((o) => { o.uint(1, 3); o.uint(2, 4); }));
out.uint(12, Math.round(PERIOD_NS));
for (const s of strings) out.message(6, Buffer.from(s));
const raw = out.done();
process.stdout.write(gzipSync(raw, { level: 1 }));
process.stderr.write(`day_profile: ${HOURS} h at ${HZ} Hz on ${CPUS} CPUs: ${samples} samples, ` +
  `${bodies.size} unique stacks, ${(raw.length / 1e6).toFixed(0)} MB before gzip\n`);
