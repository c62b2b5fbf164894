// libember-agent.so: a JVMTI agent that publishes what only the JVM knows —
// where JIT-compiled methods live, what they inlined, and where the
// interpreter and stubs are — as a stream the ember collector tails.
//
// Load at start-up:  java -agentpath:/path/libember-agent.so=out=/tmp/x.jitmap ...
// or let `ember record` attach it to a running JVM. Options (comma-separated):
//   out=PATH   where to write the stream (default /tmp/ember-<pid>.jitmap);
//              "{pid}" in PATH becomes this JVM's pid (as it sees it)
//   stop       stop publishing and close the file (the "detach": HotSpot
//              never unloads an agent library, so a later attach restarts it)
// Attaching again while publishing starts a fresh stream: the collector of a
// new recording replays the JVM's current code from the top.
#include <jvmti.h>
#include <jvmticmlr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "agent/jitmap_writer.h"

#define EMBER_EXPORT extern "C" __attribute__((visibility("default"))) JNIEXPORT

namespace ember::agent {
namespace {

jvmtiEnv* g_jvmti = nullptr;
JitMapWriter g_writer;

struct Options {
  char out[4096] = {};
  bool stop = false;
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

void parse_options(const char* text, Options& o) {
  std::snprintf(o.out, sizeof o.out, "/tmp/ember-%d.jitmap", getpid());
  if (!text) return;
  const char* p = text;
  while (*p) {
    const char* end = std::strchr(p, ',');
    size_t len = end ? static_cast<size_t>(end - p) : std::strlen(p);
    if (len > 4 && std::strncmp(p, "out=", 4) == 0)
      expand_path(p + 4, len - 4, o.out, sizeof o.out);
    else if (len == 4 && std::strncmp(p, "stop", 4) == 0)
      o.stop = true;
    else
      std::fprintf(stderr, "ember-agent: ignoring unknown option '%.*s'\n", static_cast<int>(len), p);
    p += len + (end ? 1 : 0);
  }
}

// "Lcom/example/Foo;" + "bar" -> "com.example.Foo.bar" into out.
void format_method(jmethodID method, char* out, size_t size) {
  char* name = nullptr;
  char* class_sig = nullptr;
  jclass klass = nullptr;
  if (g_jvmti->GetMethodName(method, &name, nullptr, nullptr) != JVMTI_ERROR_NONE) {
    std::snprintf(out, size, "[unknown method]");
    return;
  }
  if (g_jvmti->GetMethodDeclaringClass(method, &klass) == JVMTI_ERROR_NONE)
    g_jvmti->GetClassSignature(klass, &class_sig, nullptr);
  const char* cls = class_sig ? class_sig : "L?;";
  size_t n = 0;
  if (*cls == 'L') ++cls;
  for (; *cls && *cls != ';' && n + 1 < size; ++cls) out[n++] = *cls == '/' ? '.' : *cls;
  std::snprintf(out + n, size - n, ".%s", name);
  g_jvmti->Deallocate(reinterpret_cast<unsigned char*>(name));
  if (class_sig) g_jvmti->Deallocate(reinterpret_cast<unsigned char*>(class_sig));
}

// With the writer locked.
uint32_t intern_method(jmethodID method) {
  bool is_new = false;
  uint32_t id = g_writer.method_id(method, &is_new);
  if (is_new) {
    char name[1024];
    format_method(method, name, sizeof name);
    g_writer.define_method(id, name);
  }
  return id;
}

void JNICALL on_compiled_method_load(jvmtiEnv*, jmethodID method, jint code_size, const void* code_addr,
                                     jint, const jvmtiAddrLocationMap*, const void* compile_info) {
  g_writer.lock();
  if (g_writer.is_open()) {
    uint32_t id = intern_method(method);
    uint64_t start = reinterpret_cast<uintptr_t>(code_addr);
    g_writer.compiled_load(start, static_cast<uint64_t>(code_size), id);
    for (auto* rec = static_cast<const jvmtiCompiledMethodLoadRecordHeader*>(compile_info); rec; rec = rec->next) {
      if (rec->kind != JVMTI_CMLR_INLINE_INFO) continue;
      auto* inl = reinterpret_cast<const jvmtiCompiledMethodLoadInlineRecord*>(rec);
      uint32_t ids[64];
      for (jint i = 0; i < inl->numpcs; ++i) {
        const PCStackInfo& pc = inl->pcinfo[i];
        if (pc.numstackframes <= 1) continue;  // no inlining at this pc
        int n = pc.numstackframes < 64 ? pc.numstackframes : 64;
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
  g_writer.stub(reinterpret_cast<uintptr_t>(address), static_cast<uint64_t>(length), name);
  g_writer.commit();
  g_writer.unlock();
}

bool set_event(jvmtiEventMode mode, jvmtiEvent event) {
  return g_jvmti->SetEventNotificationMode(mode, event, nullptr) == JVMTI_ERROR_NONE;
}

jint init_jvmti(JavaVM* vm) {
  if (g_jvmti) return JNI_OK;
  if (vm->GetEnv(reinterpret_cast<void**>(&g_jvmti), JVMTI_VERSION_1_2) != JNI_OK) {
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
  g_jvmti->SetEventCallbacks(&callbacks, sizeof callbacks);
  return JNI_OK;
}

jint start(JavaVM* vm, const char* text, bool live) {
  if (init_jvmti(vm) != JNI_OK) return JNI_ERR;
  Options o;
  parse_options(text, o);
  const jvmtiEvent events[] = {JVMTI_EVENT_COMPILED_METHOD_LOAD, JVMTI_EVENT_COMPILED_METHOD_UNLOAD,
                               JVMTI_EVENT_DYNAMIC_CODE_GENERATED};
  if (o.stop) {
    for (jvmtiEvent e : events) set_event(JVMTI_DISABLE, e);
    g_writer.lock();
    g_writer.close();
    g_writer.unlock();
    return JNI_OK;
  }
  g_writer.lock();
  bool opened = g_writer.open(o.out, getpid());
  g_writer.unlock();
  if (!opened) {
    std::fprintf(stderr, "ember-agent: cannot write %s: %s\n", o.out, std::strerror(errno));
    return JNI_ERR;
  }
  for (jvmtiEvent e : events)
    if (!set_event(JVMTI_ENABLE, e)) return JNI_ERR;
  if (live) {
    // Replay the code that exists already: events arrive on this thread.
    g_jvmti->GenerateEvents(JVMTI_EVENT_DYNAMIC_CODE_GENERATED);
    g_jvmti->GenerateEvents(JVMTI_EVENT_COMPILED_METHOD_LOAD);
  }
  return JNI_OK;
}

}  // namespace
}  // namespace ember::agent

EMBER_EXPORT jint JNICALL Agent_OnLoad(JavaVM* vm, char* options, void*) {
  return ember::agent::start(vm, options, false);
}

EMBER_EXPORT jint JNICALL Agent_OnAttach(JavaVM* vm, char* options, void*) {
  return ember::agent::start(vm, options, true);
}

EMBER_EXPORT void JNICALL Agent_OnUnload(JavaVM*) {
  ember::agent::g_writer.lock();
  ember::agent::g_writer.close();
  ember::agent::g_writer.unlock();
}
