#include "agent/heap_walk.h"

#include <fcntl.h>
#include <jvmti.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "agent/heap_stream.h"
#include "agent/jvmti_names.h"

namespace ember::agent {
namespace {

namespace hs = heap_stream;

uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// The stream's file, written through a buffer: the walk's callbacks run
// in the VM thread at a safepoint, so a write costs the JVM pause time,
// and a large buffer makes few of them.
class Out {
 public:
  bool open(const char* path) {
    error_ = 0;
    used_ = 0;
    fd_ = ::open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    return fd_ >= 0;
  }
  bool ok() const { return error_ == 0; }
  int error() const { return error_; }
  void byte(unsigned char b) {
    if (used_ == sizeof buffer_) flush();
    buffer_[used_++] = b;
  }
  void varint(uint64_t v) {
    if (used_ + 10 > sizeof buffer_) flush();
    for (; v >= 0x80; v >>= 7) buffer_[used_++] = static_cast<unsigned char>(v | 0x80);
    buffer_[used_++] = static_cast<unsigned char>(v);
  }
  void string(const char* s) {
    size_t n = std::strlen(s);
    varint(n);
    for (size_t i = 0; i < n; ++i) byte(static_cast<unsigned char>(s[i]));
  }
  void raw(const char* s) {
    for (; *s; ++s) byte(static_cast<unsigned char>(*s));
  }
  void flush() {
    for (size_t at = 0; at < used_ && ok();) {
      ssize_t n = ::write(fd_, buffer_ + at, used_ - at);
      if (n > 0)
        at += static_cast<size_t>(n);
      else if (n < 0 && errno != EINTR)
        error_ = errno;
    }
    used_ = 0;
  }
  void close() {
    flush();
    ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  int error_ = 0;
  size_t used_ = 0;
  unsigned char buffer_[1 << 20];
};

// The methods of stack roots, named after the walk (the callbacks may not
// call JVMTI). Open addressing; past its bound a method goes unnamed.
class MethodSet {
 public:
  static constexpr size_t kCapacity = size_t{1} << 16;
  void add(jmethodID m) {
    if (!m || count_ >= kCapacity / 2) return;
    size_t i = (reinterpret_cast<uintptr_t>(m) >> 3) * 0x9E3779B97F4A7C15ull >> 48;
    for (;; i = (i + 1) & (kCapacity - 1)) {
      if (slots_[i] == m) return;
      if (!slots_[i]) {
        slots_[i] = m;
        ++count_;
        return;
      }
    }
  }
  void clear() {
    std::memset(slots_, 0, sizeof slots_);
    count_ = 0;
  }
  template <typename F>
  void each(F&& f) const {
    for (jmethodID m : slots_)
      if (m) f(m);
  }

 private:
  jmethodID slots_[kCapacity] = {};
  size_t count_ = 0;
};

// What the walk's callback keeps. One walk at a time (g_walking), so it
// is static: 1.5 MiB the JVM pays for only once ember asks for a walk.
struct Walk {
  Out out;
  MethodSet methods;
  jlong first_object = 0, next_object = 0;
  unsigned char* reached = nullptr;  // bit per class and thread id: its X record is written
  jlong from = -1, last_to = 0;
  uint64_t objects = 0, references = 0, unknown_class = 0;
  void reset() {
    methods.clear();
    first_object = next_object = 0;
    reached = nullptr;
    from = -1;
    last_to = 0;
    objects = references = unknown_class = 0;
  }
};
Walk g_walk;
pthread_mutex_t g_walking = PTHREAD_MUTEX_INITIALIZER;

void new_object(Walk& w, jlong* tag_ptr, jlong class_tag, jlong size) {
  *tag_ptr = w.next_object++;
  w.out.byte(hs::kObject);
  w.out.varint(static_cast<uint64_t>(class_tag));
  w.out.varint(static_cast<uint64_t>(size));
  ++w.objects;
  if (class_tag <= 0 || class_tag >= w.first_object) ++w.unknown_class;
}

// Where a stack or JNI local root is held: its thread, frame and method.
void frame_root(Walk& w, jlong thread_tag, jint depth, jmethodID method) {
  w.out.varint(static_cast<uint64_t>(thread_tag));
  w.out.varint(static_cast<uint32_t>(depth));
  w.out.varint(reinterpret_cast<uintptr_t>(method));
  w.methods.add(method);
}

// Called in the VM thread, at the walk's safepoint, once per reference:
// no JVMTI or JNI here.
jint JNICALL on_reference(jvmtiHeapReferenceKind kind, const jvmtiHeapReferenceInfo* info, jlong class_tag,
                          jlong referrer_class_tag, jlong size, jlong* tag_ptr, jlong* referrer_tag_ptr, jint,
                          void* user_data) {
  Walk& w = *static_cast<Walk*>(user_data);
  if (!w.out.ok()) return JVMTI_VISIT_ABORT;
  // A referrer is an object reported (so tagged) before it is visited;
  // should HotSpot ever differ, it gets an id of its own all the same.
  if (referrer_tag_ptr && *referrer_tag_ptr == 0) new_object(w, referrer_tag_ptr, referrer_class_tag, 0);
  jlong from = referrer_tag_ptr ? *referrer_tag_ptr : 0;
  jlong to = *tag_ptr;
  if (to == 0) {
    new_object(w, tag_ptr, class_tag, size);
    to = *tag_ptr;
  } else if (to < w.first_object && !(w.reached[to >> 3] & (1u << (to & 7)))) {
    w.reached[to >> 3] |= static_cast<unsigned char>(1u << (to & 7));
    w.out.byte(hs::kKnownObject);
    w.out.varint(static_cast<uint64_t>(to));
    w.out.varint(static_cast<uint64_t>(class_tag));
    w.out.varint(static_cast<uint64_t>(size));
    ++w.objects;
  }
  if (from != w.from) {
    w.out.byte(hs::kFrom);
    w.out.varint(static_cast<uint64_t>(from));
    w.from = from;
  }
  w.out.byte(static_cast<unsigned char>(kind));
  int64_t delta = to - w.last_to;
  w.out.varint((static_cast<uint64_t>(delta) << 1) ^ static_cast<uint64_t>(delta >> 63));
  w.last_to = to;
  ++w.references;
  switch (kind) {
    case JVMTI_HEAP_REFERENCE_FIELD:
    case JVMTI_HEAP_REFERENCE_STATIC_FIELD:
      w.out.varint(static_cast<uint32_t>(info->field.index));
      break;
    case JVMTI_HEAP_REFERENCE_ARRAY_ELEMENT:
      w.out.varint(static_cast<uint32_t>(info->array.index));
      break;
    case JVMTI_HEAP_REFERENCE_CONSTANT_POOL:
      w.out.varint(static_cast<uint32_t>(info->constant_pool.index));
      break;
    case JVMTI_HEAP_REFERENCE_STACK_LOCAL:
      frame_root(w, info->stack_local.thread_tag, info->stack_local.depth, info->stack_local.method);
      break;
    case JVMTI_HEAP_REFERENCE_JNI_LOCAL:
      frame_root(w, info->jni_local.thread_tag, info->jni_local.depth, info->jni_local.method);
      break;
    default:
      break;
  }
  return JVMTI_VISIT_OBJECTS;
}

// The fields `klass` declares, as `count`; false if the JVM will not say.
bool declared_fields(jvmtiEnv* jvmti, jclass klass, jint* count, jfieldID** fields) {
  *count = 0;
  *fields = nullptr;
  return jvmti->GetClassFields(klass, count, fields) == JVMTI_ERROR_NONE;
}

// Interface ids met while counting field-base: each interface counts once.
struct Interfaces {
  static constexpr int kMax = 512;
  jlong ids[kMax];
  int count = 0;
  bool add(jlong id) {
    for (int i = 0; i < count; ++i)
      if (ids[i] == id) return false;
    if (count < kMax) ids[count++] = id;
    return true;
  }
};

// Adds the fields of the interfaces `klass` implements or extends,
// recursively, each interface once.
jint interface_fields(jvmtiEnv* jvmti, JNIEnv* jni, jclass klass, Interfaces& seen, int depth = 0) {
  jint n = 0, total = 0;
  jclass* list = nullptr;
  if (depth > 64 || jvmti->GetImplementedInterfaces(klass, &n, &list) != JVMTI_ERROR_NONE) return 0;
  for (jint i = 0; i < n; ++i) {
    jlong id = 0;
    jvmti->GetTag(list[i], &id);
    if (seen.add(id)) {
      jint count;
      jfieldID* fields;
      if (declared_fields(jvmti, list[i], &count, &fields)) jvmti->Deallocate(reinterpret_cast<unsigned char*>(fields));
      total += count + interface_fields(jvmti, jni, list[i], seen, depth + 1);
    }
    jni->DeleteLocalRef(list[i]);
  }
  jvmti->Deallocate(reinterpret_cast<unsigned char*>(list));
  return total;
}

void write_class(jvmtiEnv* jvmti, JNIEnv* jni, Out& out, jclass klass, jlong id) {
  char* sig = nullptr;
  char name[1024] = "[unknown class]";
  if (jvmti->GetClassSignature(klass, &sig, nullptr) == JVMTI_ERROR_NONE && sig) {
    format_class(sig, name, sizeof name);
    jvmti->Deallocate(reinterpret_cast<unsigned char*>(sig));
  }
  jboolean interface = JNI_FALSE;
  jvmti->IsInterface(klass, &interface);
  jlong super_id = 0;
  Interfaces seen;
  jint base = 0;
  if (interface) {
    base = interface_fields(jvmti, jni, klass, seen);
  } else {
    jclass super = jni->GetSuperclass(klass);
    if (super) jvmti->GetTag(super, &super_id);
    base = interface_fields(jvmti, jni, klass, seen);
    for (jclass c = super; c;) {
      base += interface_fields(jvmti, jni, c, seen);
      jclass next = jni->GetSuperclass(c);
      jni->DeleteLocalRef(c);
      c = next;
    }
  }
  out.byte(hs::kClass);
  out.varint(static_cast<uint64_t>(id));
  out.string(name);
  out.varint(static_cast<uint64_t>(super_id));
  out.varint(static_cast<uint32_t>(base));
  jint count;
  jfieldID* fields;
  declared_fields(jvmti, klass, &count, &fields);
  out.varint(static_cast<uint32_t>(count));
  for (jint i = 0; i < count; ++i) {
    char* field = nullptr;
    jint modifiers = 0;
    jvmti->GetFieldModifiers(klass, fields[i], &modifiers);
    out.varint((modifiers & 0x0008) ? hs::kFieldStatic : 0);  // ACC_STATIC
    if (jvmti->GetFieldName(klass, fields[i], &field, nullptr, nullptr) == JVMTI_ERROR_NONE && field) {
      out.string(field);
      jvmti->Deallocate(reinterpret_cast<unsigned char*>(field));
    } else {
      out.string("?");
    }
  }
  if (fields) jvmti->Deallocate(reinterpret_cast<unsigned char*>(fields));
}

void fail(Out& out, const char* what, jvmtiError e) {
  char message[160];
  std::snprintf(message, sizeof message, "%s: JVMTI error %d", what, static_cast<int>(e));
  out.byte(hs::kFailed);
  out.string(message);
}

// With the file open: classes and threads tagged and written, the walk,
// the methods named, the end.
void walk(jvmtiEnv* jvmti, JNIEnv* jni, Walk& w) {
  jint class_count = 0, thread_count = 0;
  jclass* classes = nullptr;
  jthread* threads = nullptr;
  if (jvmtiError e = jvmti->GetLoadedClasses(&class_count, &classes); e != JVMTI_ERROR_NONE)
    return fail(w.out, "GetLoadedClasses", e);
  if (jvmtiError e = jvmti->GetAllThreads(&thread_count, &threads); e != JVMTI_ERROR_NONE) {
    thread_count = 0;
    threads = nullptr;
  }
  // Ids first, so that each class record can name its superclass.
  for (jint i = 0; i < class_count; ++i) jvmti->SetTag(classes[i], i + 1);
  for (jint i = 0; i < thread_count; ++i) jvmti->SetTag(threads[i], class_count + 1 + i);
  for (jint i = 0; i < class_count; ++i) {
    write_class(jvmti, jni, w.out, classes[i], i + 1);
    jni->DeleteLocalRef(classes[i]);
  }
  for (jint i = 0; i < thread_count; ++i) {
    jvmtiThreadInfo info{};
    if (jvmti->GetThreadInfo(threads[i], &info) == JVMTI_ERROR_NONE) {
      w.out.byte(hs::kThread);
      w.out.varint(static_cast<uint64_t>(class_count + 1 + i));
      w.out.string(info.name ? info.name : "");
      if (info.name) jvmti->Deallocate(reinterpret_cast<unsigned char*>(info.name));
      if (info.thread_group) jni->DeleteLocalRef(info.thread_group);
      if (info.context_class_loader) jni->DeleteLocalRef(info.context_class_loader);
    }
    jni->DeleteLocalRef(threads[i]);
  }
  jvmti->Deallocate(reinterpret_cast<unsigned char*>(classes));
  if (threads) jvmti->Deallocate(reinterpret_cast<unsigned char*>(threads));

  w.first_object = w.next_object = class_count + thread_count + 1;
  w.reached = static_cast<unsigned char*>(std::calloc(static_cast<size_t>(w.first_object) / 8 + 1, 1));
  if (!w.reached) return fail(w.out, "out of memory", JVMTI_ERROR_OUT_OF_MEMORY);
  w.out.byte(hs::kBegin);
  w.out.varint(static_cast<uint64_t>(w.first_object));
  jvmtiHeapCallbacks callbacks{};
  callbacks.heap_reference_callback = on_reference;
  uint64_t start = monotonic_ns();
  jvmtiError e = jvmti->FollowReferences(0, nullptr, nullptr, &callbacks, &w);
  uint64_t pause = monotonic_ns() - start;
  std::free(w.reached);
  w.reached = nullptr;
  if (!w.out.ok()) return;
  if (e != JVMTI_ERROR_NONE) return fail(w.out, "FollowReferences", e);
  w.methods.each([&](jmethodID m) {
    char name[1024];
    format_method(jvmti, jni, m, name, sizeof name);
    w.out.byte(hs::kMethod);
    w.out.varint(reinterpret_cast<uintptr_t>(m));
    w.out.string(name);
  });
  w.out.byte(hs::kEnd);
  w.out.varint(w.objects);
  w.out.varint(w.references);
  w.out.varint(pause);
  w.out.varint(w.unknown_class);
}

}  // namespace

void walk_heap(JavaVM* vm, const char* path) {
  if (pthread_mutex_trylock(&g_walking) != 0) {
    std::fprintf(stderr, "ember-agent: a heap walk is running already: %s not written\n", path);
    return;
  }
  jvmtiEnv* jvmti = nullptr;
  JNIEnv* jni = nullptr;
  if (vm->GetEnv(reinterpret_cast<void**>(&jvmti), JVMTI_VERSION_1_2) != JNI_OK ||
      vm->GetEnv(reinterpret_cast<void**>(&jni), JNI_VERSION_1_6) != JNI_OK) {
    std::fprintf(stderr, "ember-agent: no JVMTI or JNI environment for the heap walk\n");
    pthread_mutex_unlock(&g_walking);
    return;
  }
  Walk& w = g_walk;
  w.reset();
  if (!w.out.open(path)) {
    std::fprintf(stderr, "ember-agent: cannot create %s: %s\n", path, std::strerror(errno));
  } else {
    w.out.raw(hs::kHeader);
    jvmtiCapabilities caps{};
    caps.can_tag_objects = 1;
    if (jvmtiError e = jvmti->AddCapabilities(&caps); e != JVMTI_ERROR_NONE)
      fail(w.out, "the JVM refused to tag objects", e);
    else if (jni->PushLocalFrame(64) != 0)
      fail(w.out, "no room for JNI references", JVMTI_ERROR_OUT_OF_MEMORY);
    else {
      walk(jvmti, jni, w);
      jni->PopLocalFrame(nullptr);
    }
    w.out.close();
    if (!w.out.ok()) std::fprintf(stderr, "ember-agent: writing %s: %s\n", path, std::strerror(w.out.error()));
  }
  // Its tags and capability go with the environment.
  jvmti->DisposeEnvironment();
  pthread_mutex_unlock(&g_walking);
}

}  // namespace ember::agent
