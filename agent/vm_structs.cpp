#include "agent/vm_structs.h"

#include <cstdio>
#include <cstring>
#include <initializer_list>

namespace ember::agent {
namespace {

// An entry is a few pointers and integers (48 bytes on JDK 17 and 25):
// anything larger is not the table this code knows.
constexpr uint64_t kMaxStride = 256;

template <typename T>
T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// The value of the exported uint64_t `name`: the companions that describe
// an entry's layout.
bool exported_u64(VmStructs::Lookup lookup, void* context, const char* name, uint64_t* out, const char** missing) {
  const void* p = lookup(name, context);
  if (!p) {
    *missing = name;
    return false;
  }
  *out = load<uint64_t>(static_cast<const char*>(p));
  return true;
}

// The array an exported pointer (gHotSpotVMStructs, ...) points at.
bool exported_array(VmStructs::Lookup lookup, void* context, const char* name, const char** out,
                    const char** missing) {
  const void* p = lookup(name, context);
  *out = p ? load<const char*>(static_cast<const char*>(p)) : nullptr;
  if (!*out) *missing = name;
  return *out != nullptr;
}

// Each member, read as 8 bytes at most, lies inside the entry.
bool fits(uint64_t stride, std::initializer_list<uint64_t> members) {
  if (stride == 0 || stride > kMaxStride || stride % 8) return false;
  for (uint64_t m : members)
    if (m + 8 > stride) return false;
  return true;
}

bool same(const char* a, const char* b) { return a && std::strcmp(a, b) == 0; }

}  // namespace

bool VmStructs::open(Lookup lookup, void* context, const char** missing) {
  StructLayout s;
  TypeLayout t;
  bool found = exported_array(lookup, context, "gHotSpotVMStructs", &s.entries, missing) &&
               exported_u64(lookup, context, "gHotSpotVMStructEntryArrayStride", &s.stride, missing) &&
               exported_u64(lookup, context, "gHotSpotVMStructEntryTypeNameOffset", &s.type_name, missing) &&
               exported_u64(lookup, context, "gHotSpotVMStructEntryFieldNameOffset", &s.field_name, missing) &&
               exported_u64(lookup, context, "gHotSpotVMStructEntryTypeStringOffset", &s.type_string, missing) &&
               exported_u64(lookup, context, "gHotSpotVMStructEntryIsStaticOffset", &s.is_static, missing) &&
               exported_u64(lookup, context, "gHotSpotVMStructEntryOffsetOffset", &s.offset, missing) &&
               exported_u64(lookup, context, "gHotSpotVMStructEntryAddressOffset", &s.address, missing) &&
               exported_array(lookup, context, "gHotSpotVMTypes", &t.entries, missing) &&
               exported_u64(lookup, context, "gHotSpotVMTypeEntryArrayStride", &t.stride, missing) &&
               exported_u64(lookup, context, "gHotSpotVMTypeEntryTypeNameOffset", &t.type_name, missing) &&
               exported_u64(lookup, context, "gHotSpotVMTypeEntrySizeOffset", &t.size, missing) &&
               exported_u64(lookup, context, "gHotSpotVMTypeEntryIsUnsignedOffset", &t.is_unsigned, missing);
  if (!found) return false;
  if (!fits(s.stride, {s.type_name, s.field_name, s.type_string, s.is_static, s.offset, s.address})) {
    *missing = "gHotSpotVMStructEntryArrayStride";  // an entry layout this code cannot read
    return false;
  }
  if (!fits(t.stride, {t.type_name, t.size, t.is_unsigned})) {
    *missing = "gHotSpotVMTypeEntryArrayStride";
    return false;
  }
  structs_ = s;
  types_ = t;
  // Constants are optional: the code cache needs none.
  ConstantLayout c;
  const char* absent = nullptr;
  if (exported_array(lookup, context, "gHotSpotVMIntConstants", &c.entries, &absent) &&
      exported_u64(lookup, context, "gHotSpotVMIntConstantEntryArrayStride", &c.stride, &absent) &&
      exported_u64(lookup, context, "gHotSpotVMIntConstantEntryNameOffset", &c.name, &absent) &&
      exported_u64(lookup, context, "gHotSpotVMIntConstantEntryValueOffset", &c.value, &absent) &&
      fits(c.stride, {c.name}) && c.value + 4 <= c.stride)
    int_constants_ = c;
  return true;
}

bool VmStructs::int_constant(const char* name, int64_t* out) const {
  if (!int_constants_.entries) return false;
  for (const char* e = int_constants_.entries;; e += int_constants_.stride) {
    const char* entry_name = load<const char*>(e + int_constants_.name);
    if (!entry_name) return false;
    if (same(entry_name, name)) {
      *out = load<int32_t>(e + int_constants_.value);  // VMIntConstantEntry::value is an int32_t
      return true;
    }
  }
}

const char* VmStructs::type_entry(const char* type) const {
  if (!types_.entries) return nullptr;
  for (const char* e = types_.entries;; e += types_.stride) {
    const char* name = load<const char*>(e + types_.type_name);
    if (!name) return nullptr;
    if (same(name, type)) return e;
  }
}

bool VmStructs::type_size(const char* type, uint64_t* out) const {
  const char* e = type_entry(type);
  if (!e) return false;
  *out = load<uint64_t>(e + types_.size);
  return true;
}

bool VmStructs::field(const char* type, const char* name, VmField* out) const {
  if (!structs_.entries) return false;
  for (const char* e = structs_.entries;; e += structs_.stride) {
    const char* type_name = load<const char*>(e + structs_.type_name);
    if (!type_name) return false;
    if (!same(type_name, type) || !same(load<const char*>(e + structs_.field_name), name)) continue;
    VmField f;
    if (load<int32_t>(e + structs_.is_static))
      f.address = load<const void*>(e + structs_.address);
    else
      f.offset = load<uint64_t>(e + structs_.offset);
    // "int", "int16_t", "address", "CodeHeap*": the types table knows their sizes.
    const char* type_string = load<const char*>(e + structs_.type_string);
    if (const char* t = type_string ? type_entry(type_string) : nullptr) {
      uint64_t size = load<uint64_t>(t + types_.size);
      f.size = size <= 8 ? static_cast<uint32_t>(size) : 0;
      f.is_signed = load<int32_t>(t + types_.is_unsigned) == 0;
    }
    *out = f;
    return true;
  }
}

bool need(const VmStructs& vm, const char* type, const char* name, FieldKind kind, VmField* out, char* missing,
          size_t size) {
  VmField f;
  bool ok = vm.field(type, name, &f);
  if (ok) {
    switch (kind) {
      case FieldKind::Integer: ok = !f.address && f.is_integer(); break;
      case FieldKind::Pointer: ok = !f.address && f.is_pointer(); break;
      case FieldKind::Static: ok = f.address && f.is_pointer(); break;
      case FieldKind::Embedded: ok = !f.address; break;
    }
  }
  if (!ok) {
    std::snprintf(missing, size, "%s::%s", type, name);
    return false;
  }
  *out = f;
  return true;
}

}  // namespace ember::agent
