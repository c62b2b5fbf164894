// Names of Java classes and methods as ember shows them, from JVMTI.
#pragma once

#include <jvmti.h>

#include <cstddef>

namespace ember::agent {

// "Lcom/example/Foo;" -> "com.example.Foo", "[[I" -> "int[][]".
void format_class(const char* sig, char* out, size_t size);

// A method as "com.example.Foo.bar" into out, or "[unknown method]". `jni`
// (may be null) deletes the local reference to its class: one event can
// name a whole new stack of methods.
void format_method(jvmtiEnv* jvmti, JNIEnv* jni, jmethodID method, char* out, size_t size);

}  // namespace ember::agent
