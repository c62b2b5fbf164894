// Which method an interpreted Java frame runs. HotSpot's interpreter keeps
// the method's Method* (its metadata) in a slot of the frame, below the
// saved rbp; ember's BPF unwinder reads that word, and the agent tells the
// collector which method each Method* is ("P" lines, agent/protocol.h).
//
// A jmethodID is, up to JDK 25, the address of a slot holding the Method*.
// Nothing here takes that on trust: the Method* read through it must lead,
// by the offsets VMStructs gives, to a ConstMethod whose method idnum and
// constant pool lead to the holder class's jmethodID cache, and that cache
// must hold this very jmethodID at that idnum (InstanceKlass::jmethod_id_or_null).
// A JDK where jmethodIDs are no longer pointers (JDK-8268406) fails the check
// and its interpreted frames stay unnamed. Every read goes through
// process_vm_readv, so a wrong pointer costs an answer, never a fault.
#pragma once

#include <cstddef>
#include <cstdint>

#include "agent/vm_structs.h"

namespace ember::agent {

class MethodPointers {
 public:
  // Finds the fields through the tables. False when one is missing:
  // `missing` then names it ("InstanceKlass::_methods_jmethod_ids").
  bool discover(const VmStructs& vm, char* missing, size_t size);
  bool ready() const { return ready_; }

  // Where an interpreter frame's Method* is: rbp + 8 * this (negative).
  int32_t frame_slot() const { return frame_slot_; }

  // The Method* of `method` (a jmethodID), checked as above; 0 if the check fails.
  uintptr_t method_of(const void* method) const;

 private:
  bool ready_ = false;
  int32_t frame_slot_ = 0;
  VmField const_method_;                 // Method::_constMethod
  VmField constants_, idnum_;            // ConstMethod::_constants, _method_idnum
  VmField pool_holder_;                  // ConstantPool::_pool_holder
  VmField jmethod_ids_;                  // InstanceKlass::_methods_jmethod_ids
};

}  // namespace ember::agent
