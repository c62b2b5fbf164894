// HotSpot's self-description: the tables libjvm exports for debuggers
// (gHotSpotVMStructs, gHotSpotVMTypes and gHotSpotVMIntConstants), read by name so that no offset
// is hard-coded per JDK version. Each table is an array of entries ended by
// one with a null name; the layout of an entry (its stride and the offset
// of each member) is exported too (gHotSpotVMStructEntryArrayStride, ...),
// so it is not assumed either.
// No allocation, no JVMTI: unit-tested over a fake table (tests/unit).
#pragma once

#include <cstddef>
#include <cstdint>

namespace ember::agent {

// An instance field (offset from the object) or a static one (address),
// with the size and signedness of its type where the types table has it.
struct VmField {
  uint64_t offset = 0;
  const void* address = nullptr;  // static fields only
  uint32_t size = 0;              // 0: its type is not in the types table
  bool is_signed = false;

  bool is_integer() const { return size == 1 || size == 2 || size == 4 || size == 8; }
  // Pointer types are in the types table only when HotSpot declared them.
  bool is_pointer() const { return size == 0 || size == sizeof(void*); }
};

// What a field is read as (see need()).
enum class FieldKind { Integer, Pointer, Static, Embedded };

class VmStructs {
 public:
  // The address of an exported data symbol of libjvm, or null.
  using Lookup = const void* (*)(const char* name, void* context);

  // Finds the tables through `lookup`. False when a symbol is missing:
  // *missing names it (for the agent's "O frames-unavailable" line).
  bool open(Lookup lookup, void* context, const char** missing);

  bool field(const char* type, const char* name, VmField* out) const;
  bool type_size(const char* type, uint64_t* out) const;
  // An integer constant ("frame::interpreter_frame_last_sp_offset"); false
  // also when the JVM exports no constants table.
  bool int_constant(const char* name, int64_t* out) const;

 private:
  // Where the members of an entry are, from the exported companions.
  struct StructLayout {
    const char* entries = nullptr;
    uint64_t stride = 0, type_name = 0, field_name = 0, type_string = 0, is_static = 0, offset = 0, address = 0;
  };
  struct TypeLayout {
    const char* entries = nullptr;
    uint64_t stride = 0, type_name = 0, size = 0, is_unsigned = 0;
  };
  struct ConstantLayout {
    const char* entries = nullptr;
    uint64_t stride = 0, name = 0, value = 0;
  };
  // The types-table entry named `type`, or null.
  const char* type_entry(const char* type) const;

  StructLayout structs_;
  TypeLayout types_;
  ConstantLayout int_constants_;
};

// Looks up Type::name and checks it is what the caller reads it as: false,
// with "Type::name" in `missing`, when it is absent or of another kind.
bool need(const VmStructs& vm, const char* type, const char* name, FieldKind kind, VmField* out, char* missing,
          size_t size);

}  // namespace ember::agent
