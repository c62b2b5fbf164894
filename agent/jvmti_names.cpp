#include "agent/jvmti_names.h"

#include <cstdio>

namespace ember::agent {

void format_class(const char* sig, char* out, size_t size) {
  size_t dims = 0, n = 0;
  while (sig[dims] == '[') ++dims;
  const char* p = sig + dims;
  const char* prim = nullptr;
  switch (*p) {
    case 'Z': prim = "boolean"; break;
    case 'B': prim = "byte"; break;
    case 'C': prim = "char"; break;
    case 'S': prim = "short"; break;
    case 'I': prim = "int"; break;
    case 'J': prim = "long"; break;
    case 'F': prim = "float"; break;
    case 'D': prim = "double"; break;
    case 'L': ++p; break;
  }
  if (prim) p = prim;
  for (; *p && (prim || *p != ';') && n + 1 < size; ++p) out[n++] = *p == '/' ? '.' : *p;
  for (size_t d = 0; d < dims && n + 3 < size; ++d) {
    out[n++] = '[';
    out[n++] = ']';
  }
  out[n] = '\0';
}

void format_method(jvmtiEnv* jvmti, JNIEnv* jni, jmethodID method, char* out, size_t size) {
  char* name = nullptr;
  char* class_sig = nullptr;
  jclass klass = nullptr;
  if (jvmti->GetMethodName(method, &name, nullptr, nullptr) != JVMTI_ERROR_NONE) {
    std::snprintf(out, size, "[unknown method]");
    return;
  }
  if (jvmti->GetMethodDeclaringClass(method, &klass) == JVMTI_ERROR_NONE) {
    jvmti->GetClassSignature(klass, &class_sig, nullptr);
    if (jni) jni->DeleteLocalRef(klass);
  }
  const char* cls = class_sig ? class_sig : "L?;";
  size_t n = 0;
  if (*cls == 'L') ++cls;
  for (; *cls && *cls != ';' && n + 1 < size; ++cls) out[n++] = *cls == '/' ? '.' : *cls;
  std::snprintf(out + n, size - n, ".%s", name);
  jvmti->Deallocate(reinterpret_cast<unsigned char*>(name));
  if (class_sig) jvmti->Deallocate(reinterpret_cast<unsigned char*>(class_sig));
}

}  // namespace ember::agent
