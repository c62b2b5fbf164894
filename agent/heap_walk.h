// The agent's `heap=PATH` option: one walk of the live heap, streamed to
// PATH as agent/heap_stream.h describes, for `ember jvm PID --heap`.
#pragma once

#include <jni.h>

namespace ember::agent {

// Walks the heap from its GC roots with a JVMTI environment of its own
// (disposed of before it returns: no tags or callbacks are left behind)
// and writes the graph to `path`, a new file. Runs in the live phase, on a
// thread attached to the VM (the attach listener's). A failure after the
// file is made ends it with a D record; before, it is said on stderr.
//
// What HotSpot makes this cost (measured, 8 M objects; bench/heap.sh):
// - FollowReferences looks up and updates tags about six times per
//   reference, at one safepoint: 3-5 s, where the HPROF dumper takes 0.5.
// - Tagging gives each object an identity hash, for good. JDK 21+'s tag
//   table looks up only objects that have one, so a second walk (or a walk
//   of objects the application hashed) takes 3-4x longer there.
// - JDK 25 frees the disposed environment's tags at the next safepoint
//   (about 2 s): ember brings one at once with a thread dump.
void walk_heap(JavaVM* vm, const char* path);

}  // namespace ember::agent
