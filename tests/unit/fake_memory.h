// A process's memory for the runtime readers' tests: regions by start
// address, read as process_vm_readv reads (all of a range, or nothing).
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <vector>

#include "user/runtimes/process_memory.h"

struct FakeMemory {
  std::map<uint64_t, std::vector<uint8_t>> regions;
  void put(uint64_t at, const void* data, size_t size) {
    auto& r = regions[at];
    r.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + size);
  }
  ember::runtimes::ReadMemory reader() const {
    return [this](uint64_t address, void* out, size_t size) {
      auto it = regions.upper_bound(address);
      if (it == regions.begin()) return false;
      --it;
      if (address + size > it->first + it->second.size()) return false;
      std::memcpy(out, it->second.data() + (address - it->first), size);
      return true;
    };
  }
};
