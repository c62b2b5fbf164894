// The heap graph the agent streams for `ember jvm PID --heap`, shared by
// both ends: agent/heap_walk.cpp writes it, user/java/heap_graph.cpp reads
// it. Plain constants only: the agent links no libstdc++.
//
// OPTIONS
// `ember jvm PID --heap` attaches the agent with
//   heap=PATH    walk the heap once and write its graph to PATH (created,
//                mode 0600; it must not exist), then return. The walk has
//                a JVMTI environment of its own, disposed of at the end:
//                the JVM keeps no tag and no callback of it, and a stream
//                being published (`ember record`) goes on untouched.
//
// THE STREAM
// Binary: a header line, then records. Numbers are unsigned LEB128
// varints unless said otherwise; a string is its length, then its UTF-8
// bytes. Every object has an id (the JVMTI tag the walk gave it): classes
// and threads are given theirs before the walk, in their records; the
// objects the walk finds get the next ids in the order they are first
// reported, from the `first object` of the B record on.
//
//   "ember-heap 1\n"
//   'C' id name super field-base fields (flags name)...
//                      a class (its java.lang.Class object's id): name as
//                      Java writes it ("java.lang.String", "byte[]");
//                      super: its superclass's id, 0 for none (and for an
//                      interface); fields: the fields it declares, in
//                      JVMTI's order (GetClassFields), flags bit 0: static.
//                      The JVMTI index of a field reference from an object
//                      of class C (or of a static field of C) counts from
//                      field-base: the fields of java.lang.Object, then of
//                      each subclass down to C, in that order; for an
//                      interface, its own fields. field-base is the number
//                      of fields of the interfaces C implements (of its
//                      superinterfaces for an interface): JVMTI counts them
//                      first. A class whose fields the JVM would not give
//                      (not yet prepared) declares none.
//   'T' id name        a thread (its java.lang.Thread object's id)
//   'B' first-object   the walk begins: the JVM is paused from here to 'E'
//   'O' class size     the object of the next id: its class (0: loaded
//                      while the walk was being prepared) and shallow size
//                      in bytes; written before the first reference to it
//   'X' id class size  the same for a class or thread object, which has
//                      its id already, when first reached
//   'F' id             the references that follow are held by object id
//                      (0: the GC roots); each object's come together
//   kind to-delta [info]
//                      a reference (kind: JVMTI's jvmtiHeapReferenceKind,
//                      1 to 27, below 'B') to the object whose id is the
//                      previous reference's plus to-delta (signed, zigzag:
//                      0, -1, 1, -2 as 0, 1, 2, 3; the first counts from 0).
//                      info: for FIELD and STATIC_FIELD the field index,
//                      for ARRAY_ELEMENT the element index, for
//                      CONSTANT_POOL the pool index; for STACK_LOCAL and
//                      JNI_LOCAL the thread's id (0: unknown), the frame's
//                      depth and its method (an M key); nothing otherwise
//   'M' key name       after the walk: the method of a stack root
//                      ("com.acme.Worker.run")
//   'E' objects references pause-ns unknown-class
//                      the end: objects and references reported, the time
//                      the JVM was paused for the walk, objects whose class
//                      was not known
//   'D' message        the walk failed (why); nothing follows
#pragma once

#include <cstdint>

namespace ember::agent::heap_stream {

inline constexpr char kHeader[] = "ember-heap 1\n";
inline constexpr char kOption[] = "heap";

// Record tags; references are tagged by their kind, which is below kBegin.
inline constexpr unsigned char kClass = 'C', kThread = 'T', kBegin = 'B', kObject = 'O', kKnownObject = 'X',
                               kFrom = 'F', kMethod = 'M', kEnd = 'E', kFailed = 'D';

// jvmtiHeapReferenceKind, as written (jvmti.h: JVMTI 1.1 on).
enum Kind : unsigned char {
  kClassRef = 1, kField = 2, kArrayElement = 3, kClassLoader = 4, kSigners = 5, kProtectionDomain = 6,
  kInterface = 7, kStaticField = 8, kConstantPool = 9, kSuperclass = 10, kJniGlobal = 21, kSystemClass = 22,
  kMonitor = 23, kStackLocal = 24, kJniLocal = 25, kThreadRoot = 26, kOther = 27,
};

inline constexpr unsigned kFieldStatic = 1;

}  // namespace ember::agent::heap_stream
