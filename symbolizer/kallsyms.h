// Kernel symbols from /proc/kallsyms (core kernel, modules, BPF programs).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ember::symbolizer {

class KernelSymbols {
 public:
  struct Symbol {
    std::string_view name;
    std::string_view module;  // "" for the core kernel, else e.g. "kvm" or "bpf"
  };

  static std::expected<KernelSymbols, std::string> load(const std::string& path);

  // True when kernel.kptr_restrict hid the addresses (all read as zero):
  // kernel frames cannot be named.
  bool addresses_hidden() const { return hidden_; }
  // The symbol containing `address`, if any.
  std::optional<Symbol> find(uint64_t address) const;
  size_t size() const { return entries_.size(); }

 private:
  // About 200,000 symbols on a distribution kernel: one text buffer and
  // offsets into it instead of a string per symbol.
  struct Entry {
    uint64_t address;
    uint32_t name;  // offset into text_: name, then '\0', then module
    uint16_t name_len, module_len;
  };
  std::string text_;
  std::vector<Entry> entries_;  // sorted by address
  bool hidden_ = false;
};

}  // namespace ember::symbolizer
