// Writes a folded profile shaped like one service's profiles merged over an
// hour across a fleet: many unique stacks that share only their first few
// frames, long Java and C++ names, deep stacks.
//
//   node bench/fleet_profile.mjs [--stacks N] [--samples N] > FILE.folded
//
// Shape (deterministic, fixed seed):
//   - stacks: N unique (default 100,000), depth 8 to 150, mean 37
//     (8 + an exponential of mean 29, cut at 150);
//   - the first 2 to 6 frames come from one of 300 entry paths (threads,
//     executors, event loops); below them every frame is drawn afresh, so
//     the graph has about N x 33 nodes (3.3 million at 100,000 stacks);
//   - names: a pool of N / 2 + 20,000 functions: Java methods of packaged
//     classes (JIT-compiled, inlined or interpreted), C++ functions with
//     namespaces and templates, libc and kernel functions; 60 to 200
//     characters for most Java and C++ ones;
//   - weights: samples (default 10 per stack) spread so that a few stacks
//     are heavy and most weigh 1 to a few.
import { parseArgs } from 'node:util';
import { seeded } from './random.mjs';

const { values } = parseArgs({
  options: { stacks: { type: 'string', default: '100000' }, samples: { type: 'string', default: '' } },
});
const STACKS = Number(values.stacks);
const SAMPLES = values.samples ? Number(values.samples) : STACKS * 10;
if (!(STACKS > 0) || !(SAMPLES >= STACKS)) throw new Error('usage: fleet_profile.mjs [--stacks N] [--samples N >= N]');

const random = seeded(0x2545f491);
const pick = (list) => list[Math.floor(random() * list.length)];

const WORDS = ['order', 'customer', 'invoice', 'payment', 'session', 'cache', 'index', 'request', 'response', 'batch',
  'stream', 'channel', 'buffer', 'codec', 'schema', 'record', 'ledger', 'account', 'token', 'route', 'query', 'plan',
  'shard', 'replica', 'snapshot', 'segment', 'metric', 'event', 'policy', 'quota', 'tenant', 'report'];
const VERBS = ['find', 'load', 'resolve', 'apply', 'encode', 'decode', 'dispatch', 'handle', 'merge', 'validate', 'compute',
  'lookup', 'flush', 'schedule', 'acquire', 'serialize', 'transform', 'update', 'emit', 'collect'];
const cap = (w) => w[0].toUpperCase() + w.slice(1);
const camel = (n) => Array.from({ length: n }, (_, i) => (i ? cap(pick(WORDS)) : pick(WORDS))).join('');

function javaName() {
  const pkg = ['com', pick(['acme', 'example', 'fleet', 'corp']), pick(WORDS), pick(WORDS), pick(WORDS)].join('.');
  const cls = cap(camel(2 + Math.floor(random() * 3))) + pick(['Impl', 'Service', 'Handler', 'Repository', 'Factory', '']);
  const inner = random() < 0.2 ? '$' + pick(['Builder', 'Lambda$' + Math.floor(random() * 90), '1', 'Worker']) : '';
  const method = pick(VERBS) + cap(camel(1 + Math.floor(random() * 3)));
  const kind = random();
  return `${pkg}.${cls}${inner}.${method}${kind < 0.75 ? '_[j]' : kind < 0.93 ? '_[i]' : '_[0]'}`;
}

function cppName() {
  const ns = ['app', pick(WORDS), pick(WORDS)].join('::');
  const cls = cap(camel(1 + Math.floor(random() * 2)));
  const arg = pick(['int', 'std::string const&', 'std::span<std::byte const>', `${ns}::${cap(pick(WORDS))}&`, 'unsigned long']);
  if (random() < 0.35) {
    const t = `std::vector<${ns}::${cap(pick(WORDS))}, std::allocator<${ns}::${cap(pick(WORDS))}> >`;
    return `${ns}::${cls}<${t}>::${pick(VERBS)}_${pick(WORDS)}(${arg})`;
  }
  return `${ns}::${cls}::${pick(VERBS)}${cap(pick(WORDS))}(${arg}, ${pick(['bool', 'int', 'double'])})`;
}

const SYSTEM = ['__memmove_avx_unaligned_erms', '__libc_malloc', '_int_free', 'pthread_cond_wait@@GLIBC_2.3.2',
  '__GI___poll', 'epoll_wait', 'JavaCalls::call_helper', 'Interpreter', 'SharedRuntime::resolve_sub_helper',
  'G1ParScanThreadState::trim_queue_partially', 'ObjectMonitor::enter', 'Unsafe_Park', 'JVM_Sleep'];
const KERNEL = ['entry_SYSCALL_64_after_hwframe_[k]', 'do_syscall_64_[k]', '__x64_sys_futex_[k]', 'futex_wait_[k]',
  '__schedule_[k]', 'tcp_sendmsg_locked_[k]', 'ip_finish_output2_[k]', 'copy_user_enhanced_fast_string_[k]',
  'asm_exc_page_fault_[k]', 'handle_mm_fault_[k]', 'ext4_file_read_iter_[k]', 'filemap_read_[k]'];

// The function pool: mostly Java and C++, some libc/JVM and kernel.
const POOL = STACKS / 2 + 20000;
const names = [];
for (let i = 0; i < POOL; i++) names.push(random() < 0.55 ? javaName() : cppName());

// Entry paths: a thread name, then 1 to 5 frames of its runtime.
const ENTRIES = [];
for (let i = 0; i < 300; i++) {
  const thread = pick(['java', 'service', 'netty', 'grpc', 'worker']) + ';[' +
    pick(['http-nio-8080-exec-', 'ForkJoinPool.commonPool-worker-', 'grpc-default-executor-', 'epollEventLoopGroup-2-', 'C2 CompilerThread']) +
    (i % 40) + ']';
  const path = [thread, 'start_thread', 'thread_native_entry', 'JavaThread::thread_main_inner'];
  const extra = 1 + Math.floor(random() * 5);
  for (let k = 0; k < extra; k++) path.push(names[Math.floor(random() * 2000)]);
  ENTRIES.push(path.slice(0, 2 + Math.floor(random() * 5)).join(';'));
}

// A few stacks heavy, most light: weights from a Pareto draw, then scaled
// so that they sum to SAMPLES with each at least 1.
const raw = new Float64Array(STACKS);
let rawSum = 0;
for (let i = 0; i < STACKS; i++) { raw[i] = Math.pow(1 - random(), -1 / 1.3); rawSum += raw[i]; }
const spare = SAMPLES - STACKS;

// Stacks told apart by a 52-bit hash (a Set of the strings themselves
// would hold gigabytes at a million stacks).
function hash(s) {
  let a = 0x811c9dc5, b = 0x9747b28c;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    a = Math.imul(a ^ c, 0x01000193);
    b = Math.imul(b ^ c, 0x5bd1e995);
  }
  return (a >>> 0) * 0x100000 + (b >>> 12);
}
const seen = new Set();
const out = [];
let written = 0, frames = 0;
const flush = () => { process.stdout.write(out.join('')); out.length = 0; };
for (let i = 0; i < STACKS;) {
  const depth = Math.min(150, 8 + Math.floor(-Math.log(1 - random()) * 29));
  const entry = pick(ENTRIES);
  let stack = entry, n = entry.split(';').length;
  for (; n < depth; n++) {
    const r = random();
    // The leaf sometimes in libc, the JVM or the kernel, as real stacks end.
    const f = n >= depth - 3 && r < 0.3 ? (r < 0.15 ? pick(KERNEL) : pick(SYSTEM)) : names[Math.floor(random() * POOL)];
    stack += ';' + f;
  }
  const h = hash(stack);
  if (seen.has(h)) continue;
  seen.add(h);
  const weight = 1 + Math.floor(raw[i] / rawSum * spare);
  out.push(stack, ' ', String(weight), '\n');
  written += weight;
  frames += n;
  i++;
  if (out.length > 4000) flush();
}
flush();
process.stderr.write(`fleet_profile: ${STACKS} stacks, ${written} samples, mean depth ${(frames / STACKS).toFixed(1)}, ${POOL} functions\n`);
