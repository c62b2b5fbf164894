// libember-agent.so: a JVMTI agent that publishes what only the JVM knows —
// where JIT-compiled methods live, what they inlined, their frames, where
// the interpreter and stubs are, which method each Method* an interpreted
// frame holds is — as a stream the ember collector tails; and,
// on request, Java allocation samples and monitor contention with their
// Java stacks.
//
// Load at start-up:  java -agentpath:/path/libember-agent.so=out=/path/x.jitmap ...
// or let `ember record` attach it to a running JVM. Its options and the
// stream it writes: agent/protocol.h.
//
// Contracts (design.md): callbacks allocate nothing on the Java heap, hold
// at most a few KiB of stack, delete the JNI local references they make,
// and never wait on anything a GC pause could be waiting on; every buffer
// and table is bounded.
#include <jvmti.h>
#include <jvmticmlr.h>
#include <dirent.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <sched.h>
#include <sys/file.h>
#include <unwind.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/code_heap.h"
#include "agent/jitmap_writer.h"
#include "agent/jvmti_names.h"
#include "agent/live_objects.h"
#include "agent/method_pointers.h"
#include "agent/prologue.h"
#include "agent/protocol.h"
#include "agent/vm_structs.h"

#define EMBER_EXPORT extern "C" __attribute__((visibility("default"))) JNIEXPORT

namespace ember::agent {
namespace {

constexpr int kMaxFrames = protocol::kMaxJavaFrames;  // deeper stacks are cut (and marked)
// Native frames of an allocation made through native code: the unwinder
// walks at most kMaxWalk frames (the agent's and the JVM's own allocation
// path take ~12 of them), and the innermost kMaxNative past the JVM's are kept.
constexpr int kMaxWalk = 96;
constexpr int kMaxNative = protocol::kMaxNativeFrames;
constexpr int kMaxLibraries = 256;
constexpr uint64_t kDefaultAllocInterval = 512 * 1024;
constexpr uint64_t kDefaultLockIntervalNs = 10'000;
// How often `live` looks for freed objects: a sweep of a full table takes
// 0.3 ms (LiveObjects), so at most 0.03% of a thread's time, or 0.12% while
// the table is full (a leak: sweeping at every sample would be in vain).
constexpr uint64_t kLiveSweepNs = 1'000'000'000;
constexpr uint64_t kLiveFullSweepNs = 250'000'000;

JavaVM* g_vm = nullptr;
jvmtiEnv* g_jvmti = nullptr;
JitMapWriter g_writer;
LiveObjects g_live;  // guarded by g_writer's lock
jobject g_pin = nullptr;  // the pin array (option pin), a JNI global reference; guarded by g_control

// What the callbacks do; read on every event, changed by start().
std::atomic<bool> g_alloc_on{false}, g_live_on{false}, g_lock_on{false};
std::atomic<bool> g_live_end_gc{true};  // the live stream's end may force a full GC (no `nogc`)
// Garbage collections finished since the agent loaded (GarbageCollectionFinish,
// where only atomics are allowed), and the count the stream last said
// (guarded by g_writer's lock; kNoGcs: none said, or not counting).
constexpr uint64_t kNoGcs = ~uint64_t{0};
std::atomic<uint64_t> g_gcs{0};
std::atomic<bool> g_counting_gcs{false};
uint64_t g_gcs_written = kNoGcs;
std::atomic<uint64_t> g_lock_interval{0};
std::atomic<uint64_t> g_lock_short_waits{0};  // ns of waits under the interval, for sampling them
std::atomic<uint32_t> g_lock_epoch{0};        // bumped when lock events are turned on
std::atomic<uint64_t> g_next_sample{1};       // sample numbers, unique over the JVM's life
std::atomic<int> g_in_flight{0};              // alloc/lock callbacks running now
// Loss counters of the current stream, written as D lines at its end.
std::atomic<uint64_t> g_reentered{0};   // events raised inside our own callback, skipped
uint64_t g_last_sweep_ns = 0;           // guarded by g_writer's lock

// Whether the JVM collects with G1 (see `live`), found while its threads run.
std::atomic<bool> g_g1{false};

// Frame geometry of compiled code (G lines), found once at load; when
// VMStructs lacks an entry, what it lacks (an "O frames-unavailable" line
// opens each stream) and no geometry.
CodeHeapReader g_code_heap;
char g_frames_missing[128] = "gHotSpotVMStructs";
uint64_t g_frames_unmatched = 0;  // compiled methods without a G line; guarded by g_writer's lock
// Which Method* an interpreted frame holds (P lines), found once at load
// the same way; when VMStructs lacks an entry, what it lacks.
MethodPointers g_method_pointers;
char g_methods_missing[128] = "gHotSpotVMStructs";

// Per thread, trivially destructible (no TLS destructors in someone else's JVM).
thread_local uint32_t t_tid = 0;
thread_local uint32_t t_named_in = 0;  // the stream generation this thread's T line went to
thread_local uint64_t t_enter_ns = 0;  // MonitorContendedEnter time
thread_local uint32_t t_enter_epoch = 0;
thread_local bool t_busy = false;
// On the attaching thread while it replays the code that exists: the
// recording runs already, and that code was there before any of its samples.
thread_local bool t_replaying = false;

struct Options {
  char out[4096] = {};
  bool stop = false;
  bool lease = false;
  uint64_t alloc = 0;  // sampling interval in bytes; 0: off
  bool live = false;
  bool nogc = false;  // with live: no full GC when the stream ends
  char pin[protocol::kMaxPinToken + 1] = {};  // pin=TOKEN: hold the live objects for a heap dump
  bool lock = false;
  uint64_t lock_interval = kDefaultLockIntervalNs;
};

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

uint32_t current_tid() {
  // syscall, not gettid(): the agent may be copied into a container with a
  // glibc older than 2.30.
  if (!t_tid) t_tid = static_cast<uint32_t>(syscall(SYS_gettid));
  return t_tid;
}

// Counts the alloc and lock callbacks in progress, so start() can wait for
// them to leave before it changes what they use.
struct InFlight {
  InFlight() { g_in_flight.fetch_add(1); }
  ~InFlight() { g_in_flight.fetch_sub(1); }
};

// Copies path[0..len) to out, replacing "{pid}" with our pid.
void expand_path(const char* path, size_t len, char* out, size_t size) {
  size_t n = 0;
  for (size_t i = 0; i < len && n + 1 < size;) {
    if (len - i >= 5 && std::strncmp(path + i, "{pid}", 5) == 0) {
      int w = std::snprintf(out + n, size - n, "%d", getpid());
      n = w > 0 ? std::min(size - 1, n + static_cast<size_t>(w)) : n;
      i += 5;
    } else {
      out[n++] = path[i++];
    }
  }
  out[n] = '\0';
}

// "NAME" or "NAME=<number>" at p[0..len): true if the name matches; the
// number (if any; 0 only if `zero_ok`) goes to *value.
bool numeric_option(const char* p, size_t len, const char* name, bool zero_ok, uint64_t* value, bool* bad) {
  size_t n = std::strlen(name);
  if (len < n || std::strncmp(p, name, n) != 0) return false;
  if (len == n) return true;
  if (p[n] != '=') return false;
  uint64_t v = 0;
  size_t i = n + 1;
  for (; i < len && p[i] >= '0' && p[i] <= '9' && v < (uint64_t{1} << 50); ++i) v = v * 10 + uint64_t(p[i] - '0');
  if (i != len || i == n + 1 || (v == 0 && !zero_ok))
    *bad = true;
  else
    *value = v;
  return true;
}

// Whether p[0..len) is the option `name`; with `value`, "name=<value>"
// (a value not empty), its value.
bool is_option(const char* p, size_t len, const char* name, const char** value = nullptr, size_t* value_len = nullptr) {
  size_t n = std::strlen(name);
  if (len < n || std::strncmp(p, name, n) != 0) return false;
  if (!value) return len == n;
  if (len <= n + 1 || p[n] != '=') return false;
  *value = p + n + 1;
  *value_len = len - n - 1;
  return true;
}

void parse_options(const char* text, Options& o) {
  if (!text) return;
  const char* p = text;
  while (*p) {
    const char* end = std::strchr(p, ',');
    size_t len = end ? static_cast<size_t>(end - p) : std::strlen(p);
    uint64_t alloc = kDefaultAllocInterval, lock = kDefaultLockIntervalNs;
    bool bad = false;
    const char* path;
    size_t path_len;
    if (is_option(p, len, protocol::args::kOut, &path, &path_len)) {
      expand_path(path, path_len, o.out, sizeof o.out);
    } else if (is_option(p, len, protocol::args::kStop)) {
      o.stop = true;
    } else if (is_option(p, len, protocol::args::kLive)) {
      o.live = true;
    } else if (is_option(p, len, protocol::args::kNoGc)) {
      o.nogc = true;
    } else if (is_option(p, len, protocol::args::kLease)) {
      o.lease = true;
    } else if (is_option(p, len, protocol::args::kPin, &path, &path_len) && path_len > 0 &&
               path_len <= protocol::kMaxPinToken &&
               std::all_of(path, path + path_len, [](char c) { return std::isalnum(static_cast<unsigned char>(c)); })) {
      std::memcpy(o.pin, path, path_len);
    } else if (numeric_option(p, len, protocol::args::kAlloc, false, &alloc, &bad)) {
      o.alloc = std::min<uint64_t>(alloc, INT_MAX);  // SetHeapSamplingInterval takes a jint
    } else if (numeric_option(p, len, protocol::args::kLock, true, &lock, &bad)) {  // lock=0: every wait
      o.lock = true;
      o.lock_interval = lock;
    } else {
      std::fprintf(stderr, "ember-agent: ignoring unknown option '%.*s'\n", static_cast<int>(len), p);
    }
    if (bad)
      std::fprintf(stderr, "ember-agent: '%.*s' needs a number (alloc: above 0); using the default\n",
                   static_cast<int>(len), p);
    p += len + (end ? 1 : 0);
  }
  if (o.live && !o.alloc) o.alloc = kDefaultAllocInterval;
}

uint64_t name_hash(const char* s) {  // FNV-1a
  uint64_t h = 0xcbf29ce484222325ULL;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 0x100000001b3ULL;
  return h;
}

// Threads that post JVMTI events are Java threads, attached to JNI.
void method_name(jmethodID method, char* out, size_t size) {
  JNIEnv* jni = nullptr;
  if (!g_vm || g_vm->GetEnv(reinterpret_cast<void**>(&jni), JNI_VERSION_1_6) != JNI_OK) jni = nullptr;
  format_method(g_jvmti, jni, method, out, size);
}

// With the writer locked.
uint32_t intern_method(jmethodID method) {
  bool is_new = false;
  uint32_t id = g_writer.method_id(method, &is_new);
  if (is_new) {
    char name[1024];
    method_name(method, name, sizeof name);
    g_writer.define_method(id, name);
  }
  return id;
}

// With the writer locked. `sig` may be null (unknown class: id 0).
uint32_t intern_class(const char* sig) {
  if (!sig) return 0;
  bool is_new = false;
  uint32_t id = g_writer.class_id(name_hash(sig), &is_new);
  if (is_new) {
    char name[1024];
    format_class(sig, name, sizeof name);
    g_writer.define_class(id, name);
  }
  return id;
}

// With the writer locked: this thread's T line, once per stream.
void name_thread(JNIEnv* jni, jthread thread) {
  uint32_t generation = g_writer.generation();
  if (t_named_in == generation) return;
  t_named_in = generation;
  jvmtiThreadInfo info{};
  if (g_jvmti->GetThreadInfo(thread, &info) != JVMTI_ERROR_NONE) return;
  g_writer.thread_name(current_tid(), info.name ? info.name : "?");
  if (info.name) g_jvmti->Deallocate(reinterpret_cast<unsigned char*>(info.name));
  if (jni && info.thread_group) jni->DeleteLocalRef(info.thread_group);
  if (jni && info.context_class_loader) jni->DeleteLocalRef(info.context_class_loader);
}

// The Java stack of the current thread, innermost first, cut at kMaxFrames.
struct JavaStack {
  jvmtiFrameInfo frames[kMaxFrames + 1];
  jint count = 0;
  bool truncated = false;

  void take(jthread thread) {
    if (g_jvmti->GetStackTrace(thread, 0, kMaxFrames + 1, frames, &count) != JVMTI_ERROR_NONE) count = 0;
    truncated = count > kMaxFrames;
    if (truncated) count = kMaxFrames;
  }
  // With the writer locked: method ids into ids[].
  void intern(uint32_t* ids) const {
    for (jint i = 0; i < count; ++i) ids[i] = intern_method(frames[i].method);
  }
};

// Native frames of allocations made by native code: a JNI method's C code
// calling NewObject or NewByteArray, a JDK library, a native thread attached
// to the JVM. JVMTI's stack holds only the Java frames; the C frames between
// the innermost one and the allocation are the unwinder's (libgcc_s, which
// libjvm links already), from .eh_frame: it walks C code and libjvm and ends
// at the first frame it has no unwind information for, the JVM's generated
// code (native-method wrapper, stubs, JIT code, interpreter) — exactly the
// native part of the stack. Only allocations whose innermost Java frame is a
// native method (or that have no Java frame) are walked: Java code allocates
// through the JVM's own runtime, whose frames a user has no use for (nor
// does async-profiler show them), so the common case costs one comparison.
//
// The libraries native frames lie in, by address range: the JVM's and the
// agent's own are known from the start (their frames are the allocation
// path, not the user's); others are found with dl_iterate_phdr when first
// seen and described to the reader once per stream (an "O native-library"
// line), so that it can name the frames after the JVM has exited.
struct Library {
  uintptr_t lo = 0, hi = 0;  // the PT_LOAD segments' span
  uintptr_t bias = 0;        // address - bias = address in the file's symbol table
  uint32_t described_in = 0;  // the stream generation it was described in
  bool jvm = false;           // libjvm or this agent: the JVM's own allocation path
  bool thread_start = false;  // libc (libpthread before glibc 2.34): start_thread, clone
  char path[1024] = {};  // as the JVM sees it; with the table, 256 KiB of bss touched only as used
};
Library g_libraries[kMaxLibraries];  // guarded by g_writer's lock (after init_jvmti)
int g_library_count = 0;

struct FindLibrary {
  uintptr_t pc;
  Library* out;
  bool found;
};

int find_library_cb(dl_phdr_info* info, size_t, void* arg) {
  auto* f = static_cast<FindLibrary*>(arg);
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    lo = std::min<uintptr_t>(lo, info->dlpi_addr + ph.p_vaddr);
    hi = std::max<uintptr_t>(hi, info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  if (f->pc < lo || f->pc >= hi) return 0;
  f->out->lo = lo;
  f->out->hi = hi;
  f->out->bias = info->dlpi_addr;
  const char* name = info->dlpi_name;
  if (name && *name) {
    std::snprintf(f->out->path, sizeof f->out->path, "%s", name);
  } else {  // the main program
    ssize_t n = readlink("/proc/self/exe", f->out->path, sizeof f->out->path - 1);
    f->out->path[n > 0 ? n : 0] = '\0';
  }
  f->found = true;
  return 1;
}

// With the writer locked (or before any event): the library that maps pc,
// added to the table if new; null for code outside every loaded ELF object
// (the JVM's generated code) or when the table is full.
Library* library_of(uintptr_t pc) {
  for (int i = 0; i < g_library_count; ++i)
    if (pc >= g_libraries[i].lo && pc < g_libraries[i].hi) return &g_libraries[i];
  if (g_library_count == kMaxLibraries) return nullptr;
  Library fresh;
  FindLibrary f{pc, &fresh, false};
  dl_iterate_phdr(find_library_cb, &f);
  if (!f.found) return nullptr;
  g_libraries[g_library_count] = fresh;
  return &g_libraries[g_library_count++];
}

// Once, before any event: libjvm (where JVMTI's functions live) and this
// agent; and where threads start, the root of every thread's stack.
void find_jvm_libraries() {
  if (Library* l = library_of(reinterpret_cast<uintptr_t>(g_jvmti->functions->GetStackTrace))) l->jvm = true;
  if (Library* l = library_of(reinterpret_cast<uintptr_t>(&find_jvm_libraries))) l->jvm = true;
  if (Library* l = library_of(reinterpret_cast<uintptr_t>(&pthread_create))) l->thread_start = true;
  if (Library* l = library_of(reinterpret_cast<uintptr_t>(&clone))) l->thread_start = true;
}

struct Walk {
  uintptr_t pcs[kMaxWalk];
  int count = 0;
};

_Unwind_Reason_Code walk_frame(_Unwind_Context* context, void* arg) {
  auto* w = static_cast<Walk*>(arg);
  uintptr_t pc = _Unwind_GetIP(context);
  if (pc == 0 || w->count == kMaxWalk) return _URC_END_OF_STACK;
  w->pcs[w->count++] = pc;
  return _URC_NO_REASON;
}

// The native frames of one allocation, innermost first, as call sites
// (return address - 1, what a symbolizer names).
struct NativeStack {
  Walk walk;
  uint64_t frames[kMaxNative];
  int count = 0;

  // Whether `stack` says the allocation came from native code: its
  // innermost Java frame is a native method (JVMTI location -1), or it has
  // no Java frame at all (a native thread attached to the JVM).
  static bool wanted(const JavaStack& stack) { return stack.count == 0 || stack.frames[0].location == -1; }

  void take() { _Unwind_Backtrace(walk_frame, &walk); }

  // With the writer locked: keeps the frames past the JVM's own allocation
  // path — the first frame outside libjvm and the agent, and the libjvm
  // frame it called (the JNI function: jni_NewByteArray, JVM_NewArray) —
  // up to the first frame in no ELF object (the unwinder's last, in
  // generated code). Describes their libraries if this stream has not yet.
  // A JVM thread with no Java frame (Attach Listener, Service Thread) walks
  // down to where threads start: that alone is no native code allocating.
  void resolve(uint32_t generation) {
    Library* libs[kMaxWalk];
    int end = 0, first = -1;
    bool user_code = false;
    for (; end < walk.count; ++end) {
      libs[end] = library_of(walk.pcs[end]);
      if (!libs[end]) break;
      if (first < 0 && !libs[end]->jvm) first = end;
      user_code |= !libs[end]->jvm && !libs[end]->thread_start;
    }
    count = 0;
    if (first < 0 || !user_code) return;
    for (int i = first > 0 ? first - 1 : first; i < end && count < kMaxNative; ++i) {
      Library& lib = *libs[i];
      if (lib.described_in != generation) {
        lib.described_in = generation;
        char value[sizeof lib.path + 64];
        std::snprintf(value, sizeof value, "%llx %llx %llx %s", static_cast<unsigned long long>(lib.lo),
                      static_cast<unsigned long long>(lib.hi), static_cast<unsigned long long>(lib.bias), lib.path);
        g_writer.option(protocol::setting::kNativeLibrary, value);
      }
      frames[count++] = walk.pcs[i] - 1;
    }
  }
};

// Appends one event of `thread` with its Java stack and a class (`sig`,
// freed here): `write` gets the class id and the interned frames, with the
// writer locked.
template <class Write>
void write_event(JNIEnv* jni, jthread thread, const JavaStack& stack, char* sig, Write&& write) {
  uint32_t ids[kMaxFrames];
  g_writer.lock();
  if (g_writer.is_open()) {
    name_thread(jni, thread);
    uint32_t class_id = intern_class(sig);
    stack.intern(ids);
    write(class_id, ids);
    g_writer.commit_lazy();
  }
  g_writer.unlock();
  if (sig) g_jvmti->Deallocate(reinterpret_cast<unsigned char*>(sig));
}

void JNICALL on_gc_finish(jvmtiEnv*) { g_gcs.fetch_add(1, std::memory_order_relaxed); }

// With the writer locked: an O gcs line if collections ran since the last.
void note_gcs() {
  if (!g_counting_gcs.load(std::memory_order_relaxed)) return;
  uint64_t n = g_gcs.load(std::memory_order_relaxed);
  if (n == g_gcs_written) return;
  char value[24];
  std::snprintf(value, sizeof value, "%llu", static_cast<unsigned long long>(n));
  g_writer.option(protocol::setting::kGcs, value);
  g_gcs_written = n;
}

// With the writer locked: F lines for the followed objects the GC freed.
void sweep_live(JNIEnv* jni, uint64_t now) {
  g_last_sweep_ns = now;
  g_live.sweep(jni, [](uint64_t sample) { g_writer.freed(sample); });
}

void JNICALL on_sampled_object_alloc(jvmtiEnv*, JNIEnv* jni, jthread thread, jobject object, jclass klass,
                                     jlong size) {
  InFlight in_flight;
  if (!g_alloc_on.load()) return;
  if (t_busy) {  // JVMTI allocating inside our callback: never expected, never followed
    g_reentered.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  t_busy = true;
  uint64_t now = monotonic_ns();
  JavaStack stack;
  stack.take(thread);
  NativeStack native;
  bool through_native = NativeStack::wanted(stack);
  if (through_native) native.take();
  char* sig = nullptr;
  if (g_jvmti->GetClassSignature(klass, &sig, nullptr) != JVMTI_ERROR_NONE) sig = nullptr;
  write_event(jni, thread, stack, sig, [&](uint32_t class_id, const uint32_t* ids) {
    if (through_native) native.resolve(g_writer.generation());
    uint64_t sample = 0;
    if (g_live_on.load() && jni) {
      if (now - g_last_sweep_ns >= (g_live.full() ? kLiveFullSweepNs : kLiveSweepNs)) sweep_live(jni, now);
      uint64_t n = g_next_sample.fetch_add(1, std::memory_order_relaxed);
      if (g_live.add(jni, object, n)) sample = n;  // else: untracked, the reader counts them
      note_gcs();
    }
    g_writer.alloc(now, current_tid(), static_cast<uint64_t>(size), class_id, sample, ids, stack.count,
                   stack.truncated, native.frames, native.count);
  });
  t_busy = false;
}

void JNICALL on_monitor_contended_enter(jvmtiEnv*, JNIEnv*, jthread, jobject) {
  if (!g_lock_on.load(std::memory_order_relaxed)) return;
  t_enter_epoch = g_lock_epoch.load(std::memory_order_relaxed);
  t_enter_ns = monotonic_ns();
}

void JNICALL on_monitor_contended_entered(jvmtiEnv*, JNIEnv* jni, jthread thread, jobject object) {
  InFlight in_flight;
  uint64_t enter = t_enter_ns;
  t_enter_ns = 0;
  // A wait that began before lock events were (last) turned on has no start.
  if (!g_lock_on.load() || enter == 0 || t_enter_epoch != g_lock_epoch.load() || t_busy) return;
  uint64_t wait = monotonic_ns() - enter;
  // Short waits are sampled by time: one record per `interval` ns of them,
  // which the reader weighs `interval` (user/java/java_events.h).
  uint64_t interval = g_lock_interval.load(std::memory_order_relaxed);
  if (interval && wait < interval) {
    uint64_t before = g_lock_short_waits.fetch_add(wait, std::memory_order_relaxed);
    if ((before + wait) / interval == before / interval) return;
  }
  t_busy = true;
  JavaStack stack;
  stack.take(thread);
  char* sig = nullptr;
  if (jni && object) {
    jclass klass = jni->GetObjectClass(object);
    if (klass) {
      if (g_jvmti->GetClassSignature(klass, &sig, nullptr) != JVMTI_ERROR_NONE) sig = nullptr;
      jni->DeleteLocalRef(klass);
    }
  }
  write_event(jni, thread, stack, sig, [&](uint32_t class_id, const uint32_t* ids) {
    g_writer.contended(enter, current_tid(), wait, class_id, ids, stack.count, stack.truncated);
  });
  t_busy = false;
}

const void* jvm_symbol(const char* name, void* jvm) { return dlsym(jvm, name); }

// Once, at load: the code cache's and the interpreter's layout from
// libjvm's VMStructs tables (the library that holds JVMTI's functions:
// dlsym by its handle, as it may have been loaded without RTLD_GLOBAL by an
// embedding launcher).
void discover_vm_structs() {
  Dl_info info{};
  void* jvm = nullptr;
  if (dladdr(reinterpret_cast<void*>(g_jvmti->functions->GetStackTrace), &info) && info.dli_fname)
    jvm = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
  if (!jvm) return;  // g_frames_missing names the tables
  VmStructs vm;
  const char* missing = nullptr;
  if (vm.open(jvm_symbol, jvm, &missing)) {
    g_code_heap.discover(vm, g_frames_missing, sizeof g_frames_missing);
    g_method_pointers.discover(vm, g_methods_missing, sizeof g_methods_missing);
  } else {
    std::snprintf(g_frames_missing, sizeof g_frames_missing, "%s", missing);
    std::snprintf(g_methods_missing, sizeof g_methods_missing, "%s", missing);
  }
  dlclose(jvm);  // only drops the reference dlopen took
}

// `complete` (from the blob's code begin) as an offset from `start`; -1
// when the frame is never complete or that point lies before start.
int32_t complete_from(uintptr_t start, const BlobFrame& f) {
  if (f.frame_complete < 0) return -1;
  uintptr_t at = f.code_begin + static_cast<uintptr_t>(f.frame_complete);
  return at >= start ? static_cast<int32_t>(at - start) : -1;
}

// Prologues are a few instructions: what lies further is not one.
constexpr uint32_t kMaxPrologueBytes = 64;

// With the writer locked, after the L line of a compiled method (alive
// while its load event runs): its G line, if its blob covers its code.
// Where its prologue can be decoded, the G line says exactly where the
// frame grows, and that it is complete as soon as it is built (HotSpot's
// frame-complete offset may lie further: see agent/prologue.h).
void publish_compiled_frame(uintptr_t start, uint64_t size) {
  if (!g_code_heap.ready()) return;
  BlobFrame f;
  if (!g_code_heap.blob_at(start, &f) || !f.covers(start, size)) {
    ++g_frames_unmatched;
    return;
  }
  if (f.frame_words == 0) {  // frameless (method-handle intrinsics): nothing to complete
    g_writer.frame(start, 0, 0);
    return;
  }
  int32_t complete = complete_from(start, f);
  uintptr_t entry = g_code_heap.verified_entry(f);
  if (complete > 0 && entry >= start && entry < start + static_cast<uint32_t>(complete)) {
    uint32_t length = std::min<uint32_t>(start + complete - entry, kMaxPrologueBytes);
    Prologue p = decode_prologue(reinterpret_cast<const uint8_t*>(entry), length, static_cast<uint32_t>(entry - start),
                                 f.frame_words);
    if (p.built >= 0) {
      g_writer.frame(start, f.frame_words, p.built, p.steps, p.count);
      return;
    }
  }
  g_writer.frame(start, f.frame_words, complete);
}

// With the writer locked, after the S line of generated code: a G line for
// a blob of its own with a frame (RuntimeStub, SafepointBlob, ...), and a
// frameless one (0 words) for each vtable and itable stub. Other stubs
// inside one BufferBlob (StubRoutines, the interpreter) have no frame size:
// they get none. Of a blob HotSpot calls never complete, the frame its
// prologue builds, when that is all it does to sp and fp: C2's runtime
// stubs (_new_instance_Java, ...) through which allocations and monitors
// call into the JVM, which save rbp (x29) without pointing it at their
// frame; those that do (enter()) are walked by it.
void publish_stub_frame(uintptr_t start, uint64_t size) {
  BlobFrame f;
  if (!g_code_heap.ready() || !g_code_heap.blob_at(start, &f) || !f.covers(start, size)) return;
  if (f.code_begin == start && f.frame_words > 0) {
    int32_t complete = complete_from(start, f);
    if (complete < 0) {
      Prologue p = decode_prologue(reinterpret_cast<const uint8_t*>(start),
                                   std::min<uint64_t>(size, kMaxPrologueBytes), 0, f.frame_words);
      if (p.built >= 0 && !p.sets_fp) {
        g_writer.frame(start, f.frame_words, p.built, p.steps, p.count);
        return;
      }
    }
    g_writer.frame(start, f.frame_words, complete);
  } else if (g_code_heap.is_vtable_blob(f)) {
    g_writer.frame(start, 0, 0);
  }
}

bool same_frames(const PCStackInfo& a, const PCStackInfo& b) {
  return a.numstackframes == b.numstackframes &&
         std::equal(a.methods, a.methods + a.numstackframes, b.methods);
}

void JNICALL on_compiled_method_load(jvmtiEnv*, jmethodID method, jint code_size, const void* code_addr,
                                     jint, const jvmtiAddrLocationMap*, const void* compile_info) {
  g_writer.lock();
  if (g_writer.is_open()) {
    uint32_t id = intern_method(method);
    uint64_t start = reinterpret_cast<uintptr_t>(code_addr);
    g_writer.compiled_load(start, static_cast<uint64_t>(code_size), id, t_replaying);
    publish_compiled_frame(start, static_cast<uint64_t>(code_size));
    for (auto* rec = static_cast<const jvmtiCompiledMethodLoadRecordHeader*>(compile_info); rec; rec = rec->next) {
      if (rec->kind != JVMTI_CMLR_INLINE_INFO) continue;
      auto* inl = reinterpret_cast<const jvmtiCompiledMethodLoadInlineRecord*>(rec);
      uint32_t ids[64];
      // An address takes the frames of the first pc at or after it, so
      // every pc counts, those of the compiled method alone too (else code
      // before them would take the inlined frames of a later pc); of a run
      // of pcs with the same frames, the last says it for all.
      for (jint i = 0; i < inl->numpcs; ++i) {
        const PCStackInfo& pc = inl->pcinfo[i];
        if (i + 1 < inl->numpcs && same_frames(pc, inl->pcinfo[i + 1])) continue;
        int n = pc.numstackframes < 64 ? pc.numstackframes : 64;
        if (n <= 0) continue;
        for (int f = 0; f < n; ++f) ids[f] = intern_method(pc.methods[f]);
        g_writer.inline_frames(reinterpret_cast<uintptr_t>(pc.pc) - start, ids, n);
      }
    }
    g_writer.commit();
  }
  g_writer.unlock();
}

void JNICALL on_compiled_method_unload(jvmtiEnv*, jmethodID, const void* code_addr) {
  g_writer.lock();
  g_writer.compiled_unload(reinterpret_cast<uintptr_t>(code_addr));
  g_writer.commit();
  g_writer.unlock();
}

void JNICALL on_dynamic_code_generated(jvmtiEnv*, const char* name, const void* address, jint length) {
  g_writer.lock();
  g_writer.stub(reinterpret_cast<uintptr_t>(address), static_cast<uint64_t>(length), name, t_replaying);
  publish_stub_frame(reinterpret_cast<uintptr_t>(address), static_cast<uint64_t>(length));
  g_writer.commit();
  g_writer.unlock();
}

// A refused enable is said on the JVM's stderr: what the agent publishes
// for that event stops there, and ember's summary points at this stream.
bool set_event(jvmtiEventMode mode, jvmtiEvent event) {
  jvmtiError err = g_jvmti->SetEventNotificationMode(mode, event, nullptr);
  if (err != JVMTI_ERROR_NONE && mode == JVMTI_ENABLE)
    std::fprintf(stderr, "ember-agent: the JVM refused JVMTI event %d (JVMTI error %d)\n", event, err);
  return err == JVMTI_ERROR_NONE;
}

// Methods whose Method* the attach-time sweep published, and those it could not.
struct Sweep {
  uint64_t resolved = 0, failed = 0;
};

// The P lines of a prepared class's methods: which method each Method* is,
// for the interpreted frames ember's unwinder finds. Every method of the
// class, run yet or not: an interpreted frame names no method the collector
// could ask about later (the JVM may be gone by then). Written at once,
// like a compiled method's lines: the collector names the samples it holds
// within 0.3 s (a write costs little beside a class load); a sweep writes
// when it is done.
void publish_method_pointers(jclass klass, Sweep* sweep = nullptr) {
  jint count = 0;
  jmethodID* methods = nullptr;
  if (g_jvmti->GetClassMethods(klass, &count, &methods) != JVMTI_ERROR_NONE) return;
  g_writer.lock();
  for (jint i = 0; i < count && g_writer.is_open(); ++i) {
    if (!g_writer.claim_method_pointer(methods[i])) continue;
    uintptr_t pointer = g_method_pointers.method_of(methods[i]);
    if (pointer) g_writer.method_pointer(pointer, intern_method(methods[i]));
    if (sweep) ++(pointer ? sweep->resolved : sweep->failed);
  }
  if (!sweep) g_writer.commit();
  g_writer.unlock();
  g_jvmti->Deallocate(reinterpret_cast<unsigned char*>(methods));
}

void JNICALL on_class_prepare(jvmtiEnv*, JNIEnv*, jthread, jclass klass) { publish_method_pointers(klass); }

// The P lines of every class loaded so far (later ones come with their
// ClassPrepare event; a class seen by both is written once). When no
// jmethodID led to its Method*, the stream says so: a JDK whose jmethodIDs
// are not Method* slots any more (JDK-8268406).
void publish_loaded_method_pointers(JNIEnv* jni) {
  jint count = 0;
  jclass* classes = nullptr;
  if (!jni || g_jvmti->GetLoadedClasses(&count, &classes) != JVMTI_ERROR_NONE) return;
  Sweep sweep;
  for (jint i = 0; i < count; ++i) {
    jint status = 0;
    if (g_jvmti->GetClassStatus(classes[i], &status) == JVMTI_ERROR_NONE && (status & JVMTI_CLASS_STATUS_PREPARED) &&
        !(status & (JVMTI_CLASS_STATUS_ARRAY | JVMTI_CLASS_STATUS_PRIMITIVE)))
      publish_method_pointers(classes[i], &sweep);
    jni->DeleteLocalRef(classes[i]);
  }
  g_jvmti->Deallocate(reinterpret_cast<unsigned char*>(classes));
  g_writer.lock();
  if (sweep.resolved == 0 && sweep.failed > 0)
    g_writer.option(protocol::setting::kMethodsUnavailable, "its jmethodIDs do not lead to Method*s");
  g_writer.commit();
  g_writer.unlock();
}

// With the writer locked, after a `pin`: holds the objects `live` still
// follows in one Object[] under a JNI global reference (g_pin), element 0
// the marker String, then each object, told by an H line. Allocates on
// the Java heap: an attach's work, never a callback's (their events are
// off by now). Writes "O pinned" or why not.
void pin_live(JNIEnv* jni, const char* token) {
  char text[sizeof protocol::kPinMarker + protocol::kMaxPinToken + 1];
  std::snprintf(text, sizeof text, "%s %s", protocol::kPinMarker, token);
  jclass object_class = jni->FindClass("java/lang/Object");
  jstring marker = object_class ? jni->NewStringUTF(text) : nullptr;
  jobjectArray array =
      marker ? jni->NewObjectArray(static_cast<jsize>(g_live.size() + 1), object_class, marker) : nullptr;
  if (array) g_pin = jni->NewGlobalRef(array);
  if (!g_pin) {
    if (jni->ExceptionCheck()) jni->ExceptionClear();
    g_writer.option(protocol::setting::kPinUnavailable, "the JVM could not allocate the pin array");
  } else {
    // Filled from 1 up: an object freed since the last sweep leaves its
    // element out, so that the array's non-null elements are in H order.
    uint32_t at = 1;
    g_live.each([&](jweak ref, uint64_t sample) {
      jobject object = jni->NewLocalRef(ref);
      if (!object) return;
      jni->SetObjectArrayElement(array, static_cast<jsize>(at), object);
      jni->DeleteLocalRef(object);
      g_writer.held(at++, sample);
    });
    char value[protocol::kMaxPinToken + 24];
    std::snprintf(value, sizeof value, "%s %u", token, at - 1);
    g_writer.option(protocol::setting::kPinned, value);
  }
  for (jobject local : {static_cast<jobject>(array), static_cast<jobject>(marker), static_cast<jobject>(object_class)})
    if (local) jni->DeleteLocalRef(local);
}

// Lets go of the pin array, if any.
void release_pin(JNIEnv* jni) {
  if (g_pin && jni) jni->DeleteGlobalRef(g_pin);
  if (jni) g_pin = nullptr;
}

// Turns off alloc and lock events and waits for callbacks under way to
// leave (they may be blocked at a safepoint: bounded). With `live`, looks a
// last time for freed objects — after a full GC if `final_gc` and the
// stream allows one (no `nogc`) — writes them, and lets go of the weak
// references; with a `pin` token, holds what is left first (pin_live).
// Lets go of an earlier pin. Writes the loss counters.
void end_java_events(JNIEnv* jni, bool final_gc, const char* pin = nullptr) {
  release_pin(jni);
  bool alloc = g_alloc_on.exchange(false), lock = g_lock_on.exchange(false), live = g_live_on.exchange(false);
  if (alloc) set_event(JVMTI_DISABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC);
  if (lock) {
    set_event(JVMTI_DISABLE, JVMTI_EVENT_MONITOR_CONTENDED_ENTER);
    set_event(JVMTI_DISABLE, JVMTI_EVENT_MONITOR_CONTENDED_ENTERED);
  }
  for (int i = 0; i < 2000 && g_in_flight.load() > 0; ++i) usleep(1000);
  bool collected =
      live && jni && final_gc && g_live_end_gc.load() && g_jvmti->ForceGarbageCollection() == JVMTI_ERROR_NONE;
  g_writer.lock();
  if (jni && live && g_live.size()) sweep_live(jni, monotonic_ns());
  if (pin && jni && live)
    pin_live(jni, pin);
  else if (pin)
    g_writer.option(protocol::setting::kPinUnavailable, live ? "no JNI environment" : "the stream follows no live objects");
  if (jni) g_live.clear(jni);
  if (live) {
    note_gcs();
    g_writer.option(protocol::setting::kLiveEnd, collected ? protocol::setting::kEndGc : protocol::setting::kEndNone);
  }
  if (g_counting_gcs.exchange(false)) set_event(JVMTI_DISABLE, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH);
  if (alloc || lock) {
    if (uint64_t n = g_reentered.exchange(0)) g_writer.counter(protocol::counter::kReentered, n);
    if (uint64_t n = g_writer.write_errors()) g_writer.counter(protocol::counter::kWriteErrorBytes, n);
    g_writer.commit();
  }
  g_writer.unlock();
}

// Adds one capability; false (with the reason on stderr) if the JVM refuses.
bool add_capability(void (*set)(jvmtiCapabilities&), const char* what) {
  jvmtiCapabilities caps{};
  set(caps);
  jvmtiError e = g_jvmti->AddCapabilities(&caps);
  if (e == JVMTI_ERROR_NONE) return true;
  std::fprintf(stderr, "ember-agent: the JVM refused %s (JVMTI error %d)\n", what, static_cast<int>(e));
  return false;
}

// With a fresh stream open: the O lines, then the events.
void start_java_events(const Options& o) {
  char value[32];
  // JVMTI calls first, the writer's lock only for the lines.
  if (o.alloc) {
    bool ok = add_capability([](jvmtiCapabilities& c) { c.can_generate_sampled_object_alloc_events = 1; },
                             "sampled object allocation events (JDK 11 or later needed)") &&
              g_jvmti->SetHeapSamplingInterval(static_cast<jint>(o.alloc)) == JVMTI_ERROR_NONE;
    // Live objects' ages in collections survived: counted from now.
    bool gcs = ok && o.live &&
               add_capability([](jvmtiCapabilities& c) { c.can_generate_garbage_collection_events = 1; },
                              "garbage collection events") &&
               set_event(JVMTI_ENABLE, JVMTI_EVENT_GARBAGE_COLLECTION_FINISH);
    g_writer.lock();
    std::snprintf(value, sizeof value, "%llu", static_cast<unsigned long long>(o.alloc));
    g_writer.option(ok ? protocol::setting::kAllocInterval : protocol::setting::kAllocUnavailable, value);
    if (ok && o.live) {
      std::snprintf(value, sizeof value, "%u", LiveObjects::kMaxTracked);
      g_writer.option(protocol::setting::kLiveMax, value);
      g_counting_gcs = gcs;
      g_gcs_written = kNoGcs;
      note_gcs();
    }
    g_writer.commit();
    g_writer.unlock();
    if (ok) {
      g_live_end_gc = !o.nogc;
      g_live_on = o.live;
      g_alloc_on = true;
      set_event(JVMTI_ENABLE, JVMTI_EVENT_SAMPLED_OBJECT_ALLOC);
    }
  }
  if (o.lock) {
    bool ok = add_capability([](jvmtiCapabilities& c) { c.can_generate_monitor_events = 1; }, "monitor events");
    g_writer.lock();
    std::snprintf(value, sizeof value, "%llu", static_cast<unsigned long long>(o.lock_interval));
    g_writer.option(ok ? protocol::setting::kLockInterval : protocol::setting::kLockUnavailable, value);
    g_writer.commit();
    g_writer.unlock();
    if (ok) {
      g_lock_interval = o.lock_interval;
      g_lock_short_waits = 0;
      g_lock_epoch.fetch_add(1);
      g_lock_on = true;
      set_event(JVMTI_ENABLE, JVMTI_EVENT_MONITOR_CONTENDED_ENTER);
      set_event(JVMTI_ENABLE, JVMTI_EVENT_MONITOR_CONTENDED_ENTERED);
    }
  }
}

void close_stream() {
  g_writer.lock();
  if (g_frames_unmatched) g_writer.counter(protocol::counter::kFramesUnmatched, g_frames_unmatched);
  g_writer.close();
  g_writer.unlock();
}

// Whether the collector is G1, by its marking thread's name ("G1 Main
// Marker", JDK 11 to 21): its full GC is safe at VMDeath. The thread is
// gone by VMDeath, so this runs at VMInit or attach. A name it cannot
// find only costs the final GC, never a hang.
bool collector_is_g1() {
  DIR* dir = opendir("/proc/self/task");
  if (!dir) return false;
  bool found = false;
  char path[64], comm[32];
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    std::snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", e->d_name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    ssize_t n = read(fd, comm, sizeof comm - 1);
    close(fd);
    if (n > 0 && static_cast<size_t>(n) == sizeof "G1 Main Marker" && std::memcmp(comm, "G1 Main Marker\n", n) == 0) {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

// A stream opened at load has missed the classes the VM loaded before its
// ClassPrepare events began.
void JNICALL on_vm_init(jvmtiEnv*, JNIEnv* jni, jthread) {
  g_g1 = collector_is_g1();
  if (g_method_pointers.ready() && g_writer.is_open()) publish_loaded_method_pointers(jni);
}

// The JVM is exiting (System.exit or the last thread): the last word of
// the stream, while JVMTI and JNI still work. A final GC only with G1 (see
// `live`).
void JNICALL on_vm_death(jvmtiEnv*, JNIEnv* jni) {
  end_java_events(jni, g_g1.load());
  close_stream();
}

jint init_jvmti(JavaVM* vm) {
  if (g_jvmti) return JNI_OK;
  g_vm = vm;
  jint got = vm->GetEnv(reinterpret_cast<void**>(&g_jvmti), JVMTI_VERSION_1_2);
  // Attached before the JVM finished starting (HotSpot answers an attach
  // from its START phase): said to the attacher alone, which asks again.
  if (got == JNI_EDETACHED) return JNI_EDETACHED;
  if (got != JNI_OK) {
    std::fprintf(stderr, "ember-agent: no JVMTI 1.2 environment\n");
    return JNI_ERR;
  }
  jvmtiCapabilities caps{};
  caps.can_generate_compiled_method_load_events = 1;
  if (g_jvmti->AddCapabilities(&caps) != JVMTI_ERROR_NONE) {
    std::fprintf(stderr, "ember-agent: the JVM refused the compiled-method-load capability\n");
    return JNI_ERR;
  }
  jvmtiEventCallbacks callbacks{};
  callbacks.CompiledMethodLoad = on_compiled_method_load;
  callbacks.CompiledMethodUnload = on_compiled_method_unload;
  callbacks.DynamicCodeGenerated = on_dynamic_code_generated;
  callbacks.SampledObjectAlloc = on_sampled_object_alloc;
  callbacks.MonitorContendedEnter = on_monitor_contended_enter;
  callbacks.MonitorContendedEntered = on_monitor_contended_entered;
  callbacks.VMDeath = on_vm_death;
  callbacks.GarbageCollectionFinish = on_gc_finish;
  callbacks.VMInit = on_vm_init;
  callbacks.ClassPrepare = on_class_prepare;
  g_jvmti->SetEventCallbacks(&callbacks, sizeof callbacks);
  find_jvm_libraries();
  discover_vm_structs();
  set_event(JVMTI_ENABLE, JVMTI_EVENT_VM_DEATH);
  jvmtiPhase phase = JVMTI_PHASE_ONLOAD;
  g_jvmti->GetPhase(&phase);
  if (phase == JVMTI_PHASE_LIVE)
    g_g1 = collector_is_g1();
  else
    set_event(JVMTI_ENABLE, JVMTI_EVENT_VM_INIT);
  return JNI_OK;
}

// The code events every stream carries.
constexpr jvmtiEvent kCodeEvents[] = {JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
                                      JVMTI_EVENT_DYNAMIC_CODE_GENERATED};

// Serialises what changes the stream: an attach (start) and a lease's end.
pthread_mutex_t g_control = PTHREAD_MUTEX_INITIALIZER;

// Ends publishing: what `stop` does, and what the end of a lease does.
void stop_publishing(JNIEnv* jni, bool final_gc) {
  end_java_events(jni, final_gc);
  for (jvmtiEvent e : kCodeEvents) set_event(JVMTI_DISABLE, e);
  set_event(JVMTI_DISABLE, JVMTI_EVENT_CLASS_PREPARE);
  close_stream();
}

// A stream's lease (option `lease`): its reader's shared flock on the
// directory of the stream. A thread of ours waits for an exclusive lock,
// which it gets once the reader has let go: after a `stop` (then the stream
// is closed already, or is another one), or because the reader died
// (kill -9): then nobody will ever read or remove the files, so the agent
// stops publishing and removes them, its directory too.
struct Lease {
  int dir_fd;
  uint32_t generation;  // the stream it covers
  char dir[4096];
  char file[256];
};

// The stream's files: FILE, and the FILE.N it went on in that the reader
// had not read to their end.
void remove_stream_files(const Lease* lease) {
  int fd = dup(lease->dir_fd);  // fdopendir takes it
  DIR* dir = fd >= 0 ? fdopendir(fd) : nullptr;
  if (!dir) {
    if (fd >= 0) close(fd);
    return;
  }
  size_t n = std::strlen(lease->file);
  while (dirent* e = readdir(dir))
    if (std::strncmp(e->d_name, lease->file, n) == 0 && (e->d_name[n] == '\0' || e->d_name[n] == '.'))
      unlinkat(lease->dir_fd, e->d_name, 0);
  closedir(dir);
}

void* watch_lease(void* arg) {
  Lease* lease = static_cast<Lease*>(arg);
  while (flock(lease->dir_fd, LOCK_EX) != 0 && errno == EINTR) {
  }
  pthread_mutex_lock(&g_control);
  if (g_writer.generation() == lease->generation && g_writer.is_open()) {
    // JVMTI and JNI want a thread the VM knows: ours is not one until it
    // attaches. If it cannot (the VM is exiting), VMDeath ends the stream.
    JNIEnv* jni = nullptr;
    if (g_vm->AttachCurrentThreadAsDaemon(reinterpret_cast<void**>(&jni), nullptr) == JNI_OK) {
      stop_publishing(jni, false);
      g_vm->DetachCurrentThread();
    } else {
      close_stream();
    }
    remove_stream_files(lease);
    rmdir(lease->dir);
  }
  pthread_mutex_unlock(&g_control);
  close(lease->dir_fd);
  std::free(lease);
  return nullptr;
}

// Starts the thread that watches the lease on `path`'s directory.
bool start_lease(const char* path) {
  const char* slash = std::strrchr(path, '/');
  if (!slash || slash == path || std::strlen(slash + 1) >= sizeof Lease::file) return false;
  Lease* lease = static_cast<Lease*>(std::calloc(1, sizeof(Lease)));
  if (!lease) return false;
  std::snprintf(lease->dir, sizeof lease->dir, "%.*s", static_cast<int>(slash - path), path);
  std::snprintf(lease->file, sizeof lease->file, "%s", slash + 1);
  lease->generation = g_writer.generation();
  lease->dir_fd = open(lease->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  pthread_attr_t attr;
  pthread_t thread;
  bool started = lease->dir_fd >= 0 && pthread_attr_init(&attr) == 0;
  if (started) {
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 64 * 1024);
    started = pthread_create(&thread, &attr, watch_lease, lease) == 0;
    pthread_attr_destroy(&attr);
  }
  if (!started) {
    if (lease->dir_fd >= 0) close(lease->dir_fd);
    std::free(lease);
  }
  return started;
}

// Starts publishing as `text` says, or says on stderr why it cannot.
void start_locked(JavaVM* vm, const Options& o, bool attached) {
  // No JNI environment in Agent_OnLoad (the VM is not up yet): nothing to
  // end there either.
  JNIEnv* jni = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&jni), JNI_VERSION_1_6) != JNI_OK) jni = nullptr;
  // Whatever the last attach turned on ends with its stream. A `stop` ends
  // a recording, which with `live` wants its final GC (the VM is fully up:
  // safe with every collector); a new attach replaces a stream nobody
  // reads any more. A `pin` ends the events but not the stream: its reader
  // reads the H lines, then dumps the heap.
  if (o.pin[0]) {
    end_java_events(jni, false, o.pin);
    return;
  }
  if (o.stop || !o.out[0]) {
    stop_publishing(jni, o.stop);
    if (!o.stop) std::fprintf(stderr, "ember-agent: no out=PATH given: nothing to publish\n");
    return;
  }
  end_java_events(jni, false);
  g_writer.lock();
  bool opened = g_writer.open(o.out, getpid());
  g_frames_unmatched = 0;
  if (opened && !g_code_heap.ready()) g_writer.option(protocol::setting::kFramesUnavailable, g_frames_missing);
  if (opened && g_method_pointers.ready()) {
    char slot[16];
    std::snprintf(slot, sizeof slot, "%d", g_method_pointers.frame_slot());
    g_writer.option(protocol::setting::kMethodSlot, slot);
  } else if (opened) {
    char reason[160];
    std::snprintf(reason, sizeof reason, "its VMStructs lack %s", g_methods_missing);
    g_writer.option(protocol::setting::kMethodsUnavailable, reason);
  }
  if (opened) g_writer.commit();
  g_writer.unlock();
  if (!opened) {
    int e = errno;
    std::fprintf(stderr, "ember-agent: cannot create %s: %s%s\n", o.out, std::strerror(e),
                 e == EEXIST || e == ELOOP ? " (the agent writes only a new file, never through a link: remove it or "
                                             "give out= another path)"
                                           : "");
    return;
  }
  if (o.lease && !start_lease(o.out)) {
    std::fprintf(stderr, "ember-agent: cannot watch the lease on %s: %s\n", o.out, std::strerror(errno));
    stop_publishing(jni, false);
    return;
  }
  for (jvmtiEvent e : kCodeEvents)
    if (!set_event(JVMTI_ENABLE, e)) {
      stop_publishing(jni, false);
      return;
    }
  if (g_method_pointers.ready()) set_event(JVMTI_ENABLE, JVMTI_EVENT_CLASS_PREPARE);
  start_java_events(o);
  if (attached) {
    // Replay the code that exists already: events arrive on this thread.
    t_replaying = true;
    g_jvmti->GenerateEvents(JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
    g_jvmti->GenerateEvents(JVMTI_EVENT_COMPILED_METHOD_LOAD);
    t_replaying = false;
    if (g_method_pointers.ready()) publish_loaded_method_pointers(jni);
  }
}

// Once its callbacks are set, the agent answers JNI_OK whatever follows:
// the JVM unloads an agent that fails to start, and its callbacks, still
// registered, would then call into unmapped code (VMDeath at exit: a fault
// the JVM retries forever, and it never exits). At startup, an error would
// also stop the JVM. ember sees the failure as no code map (or a stop's).
jint start(JavaVM* vm, const char* text, bool attached) {
  Options o;
  parse_options(text, o);
  pthread_mutex_lock(&g_control);
  jint r = init_jvmti(vm);
  if (r == JNI_OK) start_locked(vm, o, attached);
  pthread_mutex_unlock(&g_control);
  return r;
}

}  // namespace
}  // namespace ember::agent

EMBER_EXPORT jint JNICALL Agent_OnLoad(JavaVM* vm, char* options, void*) {
  return ember::agent::start(vm, options, false);
}

EMBER_EXPORT jint JNICALL Agent_OnAttach(JavaVM* vm, char* options, void*) {
  return ember::agent::start(vm, options, true);
}

// VMDeath has closed the stream already, unless the JVM failed to start:
// then no Java thread can hold the writer. (After VMDeath a thread may hold
// it for good, blocked in a VM transition as the VM exits: do not wait.)
EMBER_EXPORT void JNICALL Agent_OnUnload(JavaVM*) {
  using ember::agent::g_writer;
  if (!g_writer.is_open()) return;
  g_writer.lock();
  g_writer.close();
  g_writer.unlock();
}
