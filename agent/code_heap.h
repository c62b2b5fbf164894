// A compiled method's frame geometry, read from HotSpot's code cache with
// the offsets its VMStructs tables give (agent/vm_structs.h): what an
// unwinder needs to step over a JIT frame without frame pointers.
//
// The code cache is a few CodeHeaps (CodeCache::_heaps). Each has its
// memory (a VirtualSpace: committed [_low, _high)) cut into segments of
// 2^_log2_segment_size bytes, and a segment map with one byte per segment:
// 0xFF for a free one, 0 for the first segment of a block, else how many
// segments to step back towards that first one (repeated until 0). A
// block starts with a HeapBlock header; the CodeBlob follows it
// (heap.hpp, CodeHeap::find_start). The blob holds the frame size (words)
// and the offset from its code begin at which the frame is complete
// (codeBlob.hpp: is_frame_complete_at; -1, CodeOffsets::frame_never_safe,
// when it never is). Its code begin is a field (_code_begin, JDK 17) or an
// offset from the blob (_code_offset, JDK 23 and later); so is an nmethod's
// verified entry (_verified_entry_point, _verified_entry_offset). Its kind
// is a field from JDK 23 on (_kind: CodeBlobKind::Vtable for the blob of
// the vtable and itable stubs); JDK 17's blobs tell theirs only by their
// C++ vtable, which VMStructs does not give: there the blob of those stubs
// is told by the name HotSpot gives it (_name: "vtable chunks").
//
// Every read stays inside a code heap's committed memory or its segment
// map, whatever the blob's bytes say, so a wrong guess costs a missing
// answer, never a fault. Read it only while the blob is alive (inside
// CompiledMethodLoad): a freed block may be reused at any time.
#pragma once

#include <cstddef>
#include <cstdint>

#include "agent/vm_structs.h"

namespace ember::agent {

struct BlobFrame {
  uintptr_t code_begin = 0, code_end = 0;
  int32_t frame_words = 0;     // the whole frame, return address and saved rbp included
  int32_t frame_complete = -1;  // bytes from code_begin; -1: never complete (or unknown)
  uintptr_t blob = 0, heap_end = 0;  // the CodeBlob, and the end of its heap's committed memory

  // Whether [start, start + size) lies within the blob's code.
  bool covers(uintptr_t start, uint64_t size) const {
    return code_begin <= start && start <= code_end && size <= code_end - start;
  }
};

class CodeHeapReader {
 public:
  // Finds the fields through the tables. False when one is missing (or of a
  // type this code cannot read): `missing` then names it ("CodeBlob::_frame_size").
  bool discover(const VmStructs& vm, char* missing, size_t size);
  bool ready() const { return ready_; }

  // The blob that holds `pc`, as the code cache says now; false if none.
  bool blob_at(uintptr_t pc, BlobFrame* out) const;
  // The verified entry of compiled method `f` (nmethod::verified_entry_point):
  // where its frame starts being built, after the inline-cache check; 0 if unknown.
  uintptr_t verified_entry(const BlobFrame& f) const;
  // Whether `f` is a VtableBlob: HotSpot's vtable and itable stubs, which
  // jump on to their target without a frame.
  bool is_vtable_blob(const BlobFrame& f) const;

 private:
  bool array_length(const VmStructs& vm, char* missing, size_t size);
  bool blob_in_heap(const char* heap, uintptr_t low, uintptr_t high, uintptr_t pc, BlobFrame* out) const;
  void discover_optional(const VmStructs& vm);
  // Whether field `f` of the blob lies in its heap's memory.
  static bool within(const BlobFrame& blob, const VmField& f);

  bool ready_ = false;
  VmField heaps_;                   // CodeCache::_heaps (static): GrowableArray<CodeHeap*>*
  VmField array_length_, array_data_;  // GrowableArrayBase::_len, GrowableArray<int>::_data
  VmField heap_memory_, heap_segmap_, heap_log2_segment_;  // CodeHeap::
  VmField space_low_, space_high_;  // VirtualSpace::
  uint64_t block_header_ = 0;       // sizeof(HeapBlock)
  VmField frame_size_, frame_complete_;          // CodeBlob::
  VmField code_begin_, code_end_;   // CodeBlob:: _code_begin and _code_end, or _code_offset and _data_offset
  bool code_as_offsets_ = false;
  // Optional (absent: no prologue decoding, or no dispatch stubs told apart).
  VmField verified_entry_;          // nmethod:: _verified_entry_point, or _verified_entry_offset
  bool verified_entry_as_offset_ = false;
  VmField kind_, name_;             // CodeBlob:: _kind (JDK 23+), _name
  int64_t vtable_kind_ = -1;        // CodeBlobKind::Vtable
  uint64_t blob_extent_ = 0;        // the bytes of a CodeBlob read, from its start
};

}  // namespace ember::agent
