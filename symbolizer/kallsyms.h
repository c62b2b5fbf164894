// Kernel symbols from /proc/kallsyms (core kernel, modules, BPF programs).
#pragma once

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <vector>

namespace ember::symbolizer {

class KernelSymbols {
 public:
  struct Symbol {
    uint64_t address;
    std::string name;
    std::string module;  // "" for the core kernel, else e.g. "kvm" or "bpf"
  };

  static std::expected<KernelSymbols, std::string> load(const std::string& path);

  // True when kernel.kptr_restrict hid the addresses (all read as zero):
  // kernel frames cannot be named.
  bool addresses_hidden() const { return hidden_; }
  // The symbol containing `address`, or nullptr.
  const Symbol* find(uint64_t address) const;
  size_t size() const { return symbols_.size(); }

 private:
  std::vector<Symbol> symbols_;  // sorted by address
  bool hidden_ = false;
};

}  // namespace ember::symbolizer
