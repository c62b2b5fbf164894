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
void walk_heap(JavaVM* vm, const char* path);

}  // namespace ember::agent
