#include "agent/code_heap.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <sys/uio.h>
#include <unistd.h>

namespace ember::agent {
namespace {

// HotSpot has at most 3 code heaps (non-nmethods, profiled, non-profiled),
// a few more with some collectors' or Graal's own; more is not a heap list.
constexpr int64_t kMaxHeaps = 16;
// CodeCacheSegmentSize is a power of two from 1 to 1024 bytes (64 by default).
constexpr int64_t kMaxLog2Segment = 10;

uintptr_t load_pointer(const char* p) {
  uintptr_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// An integer field of `size` bytes at p, sign-extended if its type is signed.
int64_t load_int(const char* p, const VmField& f) {
  switch (f.size) {
    case 1: {
      uint8_t v = static_cast<uint8_t>(*p);
      return f.is_signed ? int64_t{static_cast<int8_t>(v)} : int64_t{v};
    }
    case 2: {
      uint16_t v;
      std::memcpy(&v, p, sizeof v);
      return f.is_signed ? int64_t{static_cast<int16_t>(v)} : int64_t{v};
    }
    case 4: {
      uint32_t v;
      std::memcpy(&v, p, sizeof v);
      return f.is_signed ? int64_t{static_cast<int32_t>(v)} : int64_t{v};
    }
    default: {
      uint64_t v;
      std::memcpy(&v, p, sizeof v);
      return static_cast<int64_t>(v);
    }
  }
}

// `size` bytes at `address` of this process, or false: a pointer read from
// a blob is not trusted to be mapped.
bool read_safely(uintptr_t address, void* to, size_t size) {
  iovec local{to, size}, remote{reinterpret_cast<void*>(address), size};
  return address && process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

// HotSpot's name of a VtableBlob (VtableBlob::create), NUL included.
constexpr char kVtableBlobName[] = "vtable chunks";

}  // namespace

// GrowableArrayBase since JDK 16, GenericGrowableArray before.
bool CodeHeapReader::array_length(const VmStructs& vm, char* missing, size_t size) {
  VmField old;
  if (vm.field("GenericGrowableArray", "_len", &old) && !old.address && old.is_integer()) {
    array_length_ = old;
    return true;
  }
  return need(vm, "GrowableArrayBase", "_len", FieldKind::Integer, &array_length_, missing, size);
}

bool CodeHeapReader::discover(const VmStructs& vm, char* missing, size_t size) {
  ready_ = false;
  if (!need(vm, "CodeCache", "_heaps", FieldKind::Static, &heaps_, missing, size) ||
      !array_length(vm, missing, size) ||
      !need(vm, "GrowableArray<int>", "_data", FieldKind::Pointer, &array_data_, missing, size) ||
      !need(vm, "CodeHeap", "_memory", FieldKind::Embedded, &heap_memory_, missing, size) ||
      !need(vm, "CodeHeap", "_segmap", FieldKind::Embedded, &heap_segmap_, missing, size) ||
      !need(vm, "CodeHeap", "_log2_segment_size", FieldKind::Integer, &heap_log2_segment_, missing, size) ||
      !need(vm, "VirtualSpace", "_low", FieldKind::Pointer, &space_low_, missing, size) ||
      !need(vm, "VirtualSpace", "_high", FieldKind::Pointer, &space_high_, missing, size) ||
      !need(vm, "CodeBlob", "_frame_size", FieldKind::Integer, &frame_size_, missing, size) ||
      !need(vm, "CodeBlob", "_frame_complete_offset", FieldKind::Integer, &frame_complete_, missing, size))
    return false;
  if (!vm.type_size("HeapBlock", &block_header_) || block_header_ == 0 || block_header_ > 256) {
    std::snprintf(missing, size, "HeapBlock");
    return false;
  }
  // JDK 17 to 22 keep the code's bounds as addresses, later JDKs as
  // offsets from the blob (the code ends where the data begins).
  VmField probe;
  code_as_offsets_ = !vm.field("CodeBlob", "_code_begin", &probe);
  if (code_as_offsets_ ? !need(vm, "CodeBlob", "_code_offset", FieldKind::Integer, &code_begin_, missing, size) ||
                             !need(vm, "CodeBlob", "_data_offset", FieldKind::Integer, &code_end_, missing, size)
                       : !need(vm, "CodeBlob", "_code_begin", FieldKind::Pointer, &code_begin_, missing, size) ||
                             !need(vm, "CodeBlob", "_code_end", FieldKind::Pointer, &code_end_, missing, size))
    return false;
  discover_optional(vm);
  blob_extent_ = 0;
  for (const VmField* f : {&frame_size_, &frame_complete_, &code_begin_, &code_end_})
    blob_extent_ = std::max<uint64_t>(blob_extent_, f->offset + (f->size ? f->size : sizeof(void*)));
  ready_ = true;
  return true;
}

void CodeHeapReader::discover_optional(const VmStructs& vm) {
  verified_entry_as_offset_ = !vm.field("nmethod", "_verified_entry_point", &verified_entry_);
  if (verified_entry_as_offset_ &&
      (!vm.field("nmethod", "_verified_entry_offset", &verified_entry_) || !verified_entry_.is_integer()))
    verified_entry_ = {};
  if (vm.field("CodeBlob", "_kind", &kind_) && kind_.is_integer()) {
    if (!vm.int_constant("CodeBlobKind::Vtable", &vtable_kind_)) kind_ = {};
  } else {
    kind_ = {};
    if (!vm.field("CodeBlob", "_name", &name_) || !name_.is_pointer()) name_ = {};
  }
}

bool CodeHeapReader::within(const BlobFrame& blob, const VmField& f) {
  return f.offset + (f.size ? f.size : sizeof(void*)) <= blob.heap_end - blob.blob;
}

uintptr_t CodeHeapReader::verified_entry(const BlobFrame& f) const {
  if (!ready_ || verified_entry_.offset == 0 || !within(f, verified_entry_)) return 0;
  const char* field = reinterpret_cast<const char*>(f.blob) + verified_entry_.offset;
  uintptr_t entry = verified_entry_as_offset_ ? f.code_begin + static_cast<uintptr_t>(load_int(field, verified_entry_))
                                              : load_pointer(field);
  return entry >= f.code_begin && entry < f.code_end ? entry : 0;
}

bool CodeHeapReader::is_vtable_blob(const BlobFrame& f) const {
  if (!ready_) return false;
  const char* blob = reinterpret_cast<const char*>(f.blob);
  if (kind_.size) return within(f, kind_) && load_int(blob + kind_.offset, kind_) == vtable_kind_;
  char name[sizeof kVtableBlobName];
  return name_.offset && within(f, name_) && read_safely(load_pointer(blob + name_.offset), name, sizeof name) &&
         std::memcmp(name, kVtableBlobName, sizeof name) == 0;
}

bool CodeHeapReader::blob_at(uintptr_t pc, BlobFrame* out) const {
  if (!ready_) return false;
  const char* array = reinterpret_cast<const char*>(load_pointer(static_cast<const char*>(heaps_.address)));
  if (!array) return false;  // before the code cache is set up
  int64_t count = load_int(array + array_length_.offset, array_length_);
  const char* data = reinterpret_cast<const char*>(load_pointer(array + array_data_.offset));
  if (count <= 0 || count > kMaxHeaps || !data) return false;
  for (int64_t i = 0; i < count; ++i) {
    const char* heap = reinterpret_cast<const char*>(load_pointer(data + i * sizeof(void*)));
    if (!heap) continue;
    const char* memory = heap + heap_memory_.offset;
    uintptr_t low = load_pointer(memory + space_low_.offset), high = load_pointer(memory + space_high_.offset);
    if (pc >= low && pc < high) return blob_in_heap(heap, low, high, pc, out);
  }
  return false;
}

bool CodeHeapReader::blob_in_heap(const char* heap, uintptr_t low, uintptr_t high, uintptr_t pc,
                                  BlobFrame* out) const {
  int64_t log2 = load_int(heap + heap_log2_segment_.offset, heap_log2_segment_);
  const char* segmap = heap + heap_segmap_.offset;
  uintptr_t map_low = load_pointer(segmap + space_low_.offset), map_high = load_pointer(segmap + space_high_.offset);
  if (log2 < 0 || log2 > kMaxLog2Segment || map_low == 0 || map_high <= map_low) return false;
  const auto* map = reinterpret_cast<const uint8_t*>(map_low);
  uintptr_t segment = (pc - low) >> log2;
  if (segment >= map_high - map_low) return false;
  // Back to the block's first segment; each step goes back at least one.
  while (map[segment] != 0) {
    if (map[segment] == 0xFF || map[segment] > segment) return false;  // free, or a broken map
    segment -= map[segment];
  }
  uintptr_t blob = low + (segment << log2) + block_header_;
  if (blob < low || blob >= high || blob_extent_ > high - blob) return false;
  const char* b = reinterpret_cast<const char*>(blob);
  uintptr_t begin, end;
  if (code_as_offsets_) {
    begin = blob + static_cast<uintptr_t>(load_int(b + code_begin_.offset, code_begin_));
    end = blob + static_cast<uintptr_t>(load_int(b + code_end_.offset, code_end_));
  } else {
    begin = load_pointer(b + code_begin_.offset);
    end = load_pointer(b + code_end_.offset);
  }
  if (begin < blob || begin > end || end > high) return false;
  int64_t words = load_int(b + frame_size_.offset, frame_size_);
  int64_t complete = load_int(b + frame_complete_.offset, frame_complete_);
  if (words < 0 || words > INT32_MAX) return false;
  out->code_begin = begin;
  out->code_end = end;
  out->frame_words = static_cast<int32_t>(words);
  out->frame_complete = complete >= 0 && complete <= static_cast<int64_t>(end - begin) ? static_cast<int32_t>(complete) : -1;
  out->blob = blob;
  out->heap_end = high;
  return true;
}

}  // namespace ember::agent
