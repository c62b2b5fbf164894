#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <dwarf.h>
#include <elfutils/libdw.h>

#include <memory>
#include <optional>

#include "unwind/cfi_table.h"

using namespace ember::unwind;

namespace {

// One row as binutils' `readelf --debug-dump=frames-interp` prints it: an
// oracle that shares no code with elfutils.
struct OracleRow {
  uint64_t loc;
  std::string cfa, fp, ra;  // "rsp+8", "sp+16", "c-16", "u", "exp", ...
};
struct OracleFde {
  uint64_t start, end;
  std::vector<OracleRow> rows;  // empty: the CIE's initial rules hold
  std::string cie;
};

std::string run(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  REQUIRE(p);
  char buf[65536];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  pclose(p);  // readelf -wF exits 1 on Debian's libc though it prints every frame
  REQUIRE(!out.empty());
  return out;
}

// The FDEs of `path`, and the initial rows of its CIEs by offset.
std::pair<std::vector<OracleFde>, std::map<std::string, OracleRow>> read_oracle(const std::string& path) {
  std::istringstream in(run("readelf --debug-dump=frames-interp '" + path + "' 2>/dev/null"));
  std::vector<OracleFde> fdes;
  std::map<std::string, OracleRow> cies;
  std::string line, cie_offset;
  std::vector<std::string> columns;
  bool in_cie = false;
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    if (w.size() >= 4 && w[3] == "CIE") {
      in_cie = true;
      cie_offset = w[0];
    } else if (w.size() >= 5 && w[3] == "FDE") {
      in_cie = false;
      OracleFde fde;
      fde.cie = w[4].substr(4);
      std::string range = w[5].substr(3);
      size_t dots = range.find("..");
      fde.start = std::stoull(range.substr(0, dots), nullptr, 16);
      fde.end = std::stoull(range.substr(dots + 2), nullptr, 16);
      fdes.push_back(fde);
    } else if (!w.empty() && w[0] == "LOC") {
      columns = w;
    } else if (!w.empty() && w.size() == columns.size() && w[0].size() == 16) {
      OracleRow row{std::stoull(w[0], nullptr, 16), w[1], "u", "u"};
      for (size_t i = 2; i < columns.size(); ++i) {
        if (columns[i] == "rbp" || columns[i] == "x29") row.fp = w[i];
        if (columns[i] == "ra") row.ra = w[i];
      }
      if (in_cie) {
        cies.try_emplace(cie_offset, row);
      } else if (!fdes.empty()) {
        fdes.back().rows.push_back(row);
      }
    }
  }
  return {fdes, cies};
}

const ember_unwind_row* row_at(const CfiTable& t, uint64_t address) {
  if (address < t.base) return nullptr;
  auto it = std::upper_bound(t.rows.begin(), t.rows.end(), address - t.base,
                             [](uint64_t pc, const ember_unwind_row& r) { return pc < r.pc; });
  return it == t.rows.begin() ? nullptr : &*std::prev(it);
}

// Where a row says the return address and the caller's fp are, from the
// oracle's rules for them (offsets from the CFA; nullopt: not saved, the
// return address in the link register), bpf/unwind.h's EMBER_RA_* and the
// row's fp; nullopt where no row can say it.
std::optional<std::pair<uint8_t, int64_t>> expected_ra(uint64_t cfa_offset, std::optional<int64_t> fp_at,
                                                       std::optional<int64_t> ra_at) {
  auto fits = [](int64_t words) { return words >= INT8_MIN && words <= INT8_MAX; };
  std::pair<uint8_t, int64_t> out{EMBER_RA_CFA, fp_at.value_or(0) / 8};
  if (!ra_at) {
    out.first = EMBER_RA_LINK;
  } else if (fp_at && *ra_at == *fp_at + 8) {
    out.first = EMBER_RA_RECORD;
    if (!fits(out.second)) out = {EMBER_RA_RECORD_LOW, (*fp_at + int64_t(cfa_offset)) / 8};
  } else if (*ra_at == -8) {
    out.first = EMBER_RA_CFA;
  } else if (!fp_at) {
    out = {EMBER_RA_SAVED, *ra_at / 8};
  } else {
    return std::nullopt;
  }
  if (!fits(out.second)) return std::nullopt;  // a frame of over 1 KiB, its record not at its bottom
  return out;
}

// Whether `row` says what readelf says for the same address. readelf
// prints "u" for a register without a rule as for one undefined: on arm64
// a return address "u" is in the link register, or the stack's end.
bool agrees(const ember_unwind_row& row, const OracleRow& o, bool arm64) {
  const std::string sp = arm64 ? "sp" : "rsp", fp = arm64 ? "x29" : "rbp";
  if (o.ra == "u" && (!arm64 || row.type == EMBER_ROW_ROOT)) return row.type == EMBER_ROW_ROOT;
  if (o.cfa == "exp") return row.type == EMBER_ROW_PLT || row.type == EMBER_ROW_SIGNAL || row.type == EMBER_ROW_UNSUPPORTED;
  size_t plus = o.cfa.find('+');
  std::string reg = o.cfa.substr(0, plus);
  if (plus == std::string::npos || (reg != sp && reg != fp)) return row.type == EMBER_ROW_UNSUPPORTED;
  auto at_cfa = [](const std::string& rule) -> std::optional<int64_t> {
    if (rule.starts_with("c")) return std::stol(rule.substr(1));
    return std::nullopt;
  };
  if ((!at_cfa(o.fp) && o.fp != "u" && o.fp != "s") || (!at_cfa(o.ra) && o.ra != "u"))
    return row.type == EMBER_ROW_UNSUPPORTED;
  auto where = expected_ra(std::stoul(o.cfa.substr(plus + 1)), at_cfa(o.fp), at_cfa(o.ra));
  if (!where) return row.type == EMBER_ROW_UNSUPPORTED;
  return row.type == (reg == sp ? EMBER_ROW_CFA_SP : EMBER_ROW_CFA_FP) && row.cfa == std::stoul(o.cfa.substr(plus + 1)) &&
         row.ra == where->first && row.fp == where->second;
}

CfiTable table_of(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  REQUIRE(fd >= 0);
  auto table = build_cfi_table(fd);
  close(fd);
  REQUIRE(table);
  return std::move(*table);
}

std::string system_library(const char* name) {
  for (const char* dir : {"/lib/x86_64-linux-gnu/", "/usr/lib/x86_64-linux-gnu/"})
    if (access((std::string(dir) + name).c_str(), R_OK) == 0) return std::string(dir) + name;
  FAIL("no " << name);
  return {};
}

// Where section `name` of `path` lies, as readelf says: its address, file
// offset and size (0: no such section).
struct Section {
  uint64_t address = 0, offset = 0, size = 0;
};
Section section_of(const std::string& path, const std::string& name) {
  std::istringstream sections(run("readelf -SW '" + path + "'"));
  Section s;
  for (std::string l; std::getline(sections, l);)
    if (size_t at = l.find(" " + name + " "); at != std::string::npos) {
      std::istringstream w(l.substr(at + name.size() + 2));
      std::string type, address, offset, size;
      w >> type >> address >> offset >> size;
      s = {std::stoull(address, nullptr, 16), std::stoull(offset, nullptr, 16), std::stoull(size, nullptr, 16)};
    }
  return s;
}

// Debian 12's arm64 libraries, from the sysroot `make test` unpacks for
// the arm64 build (scripts/sysroot.sh).
std::string arm64_library(const char* name) {
  const std::string root = "/var/cache/ember/arm64-sysroot";
  for (const char* dir : {"/lib/aarch64-linux-gnu/", "/usr/lib/aarch64-linux-gnu/"})
    if (access((root + dir + name).c_str(), R_OK) == 0) return root + dir + name;
  FAIL("no " << root << "/.../" << name << ": make ARCH=arm64 unpacks Debian's arm64 libraries there");
  return {};
}

// The oracle's rows for every FDE of `path` against the table's; the
// number compared, and of signal frames and roots met.
struct Compared {
  size_t rows = 0, signal = 0, roots = 0;
};
Compared compare_with_readelf(const std::string& path, bool arm64) {
  INFO(path);
  CfiTable table = table_of(path);
  auto [fdes, cies] = read_oracle(path);
  REQUIRE(fdes.size() == table.fdes);
  Compared n;
  for (const OracleFde& fde : fdes) {
    std::vector<OracleRow> rows = fde.rows;
    if (rows.empty()) {
      REQUIRE(cies.count(fde.cie));
      rows.push_back(cies[fde.cie]);
      rows.back().loc = fde.start;
    }
    for (const OracleRow& o : rows) {
      const ember_unwind_row* row = row_at(table, o.loc);
      INFO("at 0x" << std::hex << o.loc << ": readelf " << o.cfa << " fp " << o.fp << " ra " << o.ra);
      REQUIRE(row);
      CHECK(agrees(*row, o, arm64));
      n.signal += row->type == EMBER_ROW_SIGNAL;
      n.roots += row->type == EMBER_ROW_ROOT;
      ++n.rows;
    }
  }
  // Code past the last function has no CFI.
  CHECK(table.rows.back().type == EMBER_ROW_NONE);
  return n;
}

}  // namespace

TEST_CASE("cfi table: every row of Debian's libraries agrees with readelf", "[unwind]") {
  for (const std::string& path : {system_library("libc.so.6"), system_library("libstdc++.so.6"),
                                  std::string("/lib64/ld-linux-x86-64.so.2")}) {
    Compared n = compare_with_readelf(path, false);
    CHECK(n.rows > 2000);
    if (path.find("libc.so") != std::string::npos) {
      CHECK(n.signal >= 1);  // __restore_rt, the signal return trampoline
      CHECK(n.roots >= 1);   // clone3: a thread's outermost frame
    }
  }
}

TEST_CASE("cfi table: every row of Debian's arm64 libraries agrees with readelf", "[unwind]") {
  for (const char* name : {"libc.so.6", "libstdc++.so.6", "ld-linux-aarch64.so.1"}) {
    Compared n = compare_with_readelf(arm64_library(name), true);
    CHECK(n.rows > 1000);
    if (std::string(name) == "libc.so.6") CHECK(n.roots >= 1);  // clone3, thread_start: x30 undefined
  }
}

TEST_CASE("cfi table: rows are sorted, compact, and libc builds fast enough to do lazily", "[unwind]") {
  CfiTable table = table_of(system_library("libc.so.6"));
  for (size_t i = 1; i < table.rows.size(); ++i) {
    REQUIRE(table.rows[i - 1].pc < table.rows[i].pc);
    const auto &a = table.rows[i - 1], &b = table.rows[i];
    REQUIRE(!(a.type == b.type && a.ra == b.ra && a.cfa == b.cfa && a.fp == b.fp));
  }
  // About 23k rows in Debian 12's libc (8 bytes each).
  CHECK(table.rows.size() > 10000);
  CHECK(table.rows.size() < 60000);
  CHECK(sizeof(ember_unwind_row) == 8);
  // A file offset in the text segment lands where the segment says.
  REQUIRE(!table.segments.empty());
  for (const auto& s : table.segments) CHECK(table.address_of_offset(s.offset) == s.vaddr);
}

TEST_CASE("cfi table: the vDSO's, from memory", "[unwind]") {
  auto base = reinterpret_cast<const char*>(getauxval(AT_SYSINFO_EHDR));
  REQUIRE(base);
  std::ifstream maps("/proc/self/maps");
  std::string line;
  size_t size = 0;
  while (std::getline(maps, line))
    if (line.find("[vdso]") != std::string::npos) {
      uint64_t start = std::stoull(line, nullptr, 16), end = std::stoull(line.substr(line.find('-') + 1), nullptr, 16);
      if (start == reinterpret_cast<uint64_t>(base)) size = end - start;
    }
  REQUIRE(size > 0);
  auto table = build_cfi_table(std::string_view(base, size));
  REQUIRE(table);
  CHECK(table->fdes > 0);
  CHECK(table->rows.size() > 2);
}

// Debian 12's arm64 kernel's vDSO (6.1.0, read from a process's memory in
// the arm64 guest): no CFI at all.
TEST_CASE("cfi table: arm64's vDSO without CFI, from its code's shape", "[unwind]") {
  std::ifstream in(std::filesystem::path(__FILE__).parent_path().parent_path() / "fixtures/vdso-6.1-arm64.so",
                   std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(image.size() == 4096);
  REQUIRE(!build_cfi_table(std::string_view(image)));
  auto table = build_vdso_table(std::string_view(image));
  REQUIRE(table);
  // As aarch64-linux-gnu-objdump -d shows it: .text from 0x2d0, the
  // trampoline's mov x8 at 0x7bc after a nop, svc at 0x7c0; .text ends at 0x7c4.
  auto kind = [&](uint64_t address) {
    const ember_unwind_row* row = row_at(*table, address);
    REQUIRE(row);
    return std::pair<int, int>(row->type, row->ra);
  };
  const std::pair<int, int> leaf{EMBER_ROW_CFA_SP, EMBER_RA_LINK}, signal{EMBER_ROW_SIGNAL, 0};
  CHECK(kind(0x2d0) == leaf);  // __kernel_clock_gettime: paciasp, no frame
  CHECK(kind(0x570) == leaf);  // __kernel_gettimeofday
  CHECK(kind(0x7b4) == leaf);
  CHECK(kind(0x7bb) == signal);  // a return address to the trampoline, less 1
  CHECK(kind(0x7c0) == signal);
  CHECK(kind(0x7c4).first == EMBER_ROW_NONE);
}

TEST_CASE("cfi table: corrupt or truncated CFI never crashes and never reads out of bounds", "[unwind]") {
  std::ifstream in(system_library("libc.so.6"), std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(image.size() > 100000);
  // Where .eh_frame lies: flip bytes there (and in .eh_frame_hdr just before it).
  auto [address, offset, size] = section_of(system_library("libc.so.6"), ".eh_frame");
  REQUIRE(size > 0);
  std::mt19937 random(42);
  for (int round = 0; round < 40; ++round) {
    std::string copy = image;
    for (int i = 0; i < 64; ++i) copy[offset + random() % size] = static_cast<char>(random());
    auto table = build_cfi_table(std::string_view(copy));
    if (table) CHECK(std::is_sorted(table->rows.begin(), table->rows.end(),
                                     [](const auto& a, const auto& b) { return a.pc < b.pc; }));
  }
  for (size_t cut : {offset + size / 2, offset + 7, image.size() / 3, size_t(64)}) {
    auto table = build_cfi_table(std::string_view(image.data(), cut));
    (void)table;  // an error or a table: either is fine, a crash is not
  }
  auto none = build_cfi_table(std::string_view("not an ELF file"));
  REQUIRE(!none);
  CHECK(none.error().reason == NoTable::Unreadable);
}

namespace {

// A row as elfutils evaluates the CFI at `address` (dwarf_cfi_addrframe:
// its own interpreter of the CFA programs), in the table's terms; nullopt
// where elfutils has no answer.
std::optional<ember_unwind_row> elfutils_row(Dwarf_CFI* cfi, uint64_t address, bool arm64) {
  const int sp = arm64 ? 31 : 7, fp = arm64 ? 29 : 6, ra_column = arm64 ? 30 : 16;
  Dwarf_Frame* frame = nullptr;
  Dwarf_Addr start, end;
  bool signal = false;
  if (dwarf_cfi_addrframe(cfi, address, &frame) != 0) return std::nullopt;
  std::unique_ptr<Dwarf_Frame, void (*)(void*)> owned(frame, free);
  if (dwarf_frame_info(frame, &start, &end, &signal) < 0) return std::nullopt;
  ember_unwind_row row{};
  row.type = EMBER_ROW_UNSUPPORTED;
  if (signal) {
    row.type = EMBER_ROW_SIGNAL;
    return row;
  }
  auto at_cfa = [](const Dwarf_Op* ops, size_t n) -> std::optional<int64_t> {
    if (n == 1 && ops[0].atom == DW_OP_call_frame_cfa) return 0;
    if (n == 2 && ops[0].atom == DW_OP_call_frame_cfa && ops[1].atom == DW_OP_plus_uconst)
      return static_cast<int64_t>(ops[1].number);
    return std::nullopt;
  };
  // A register's rule: same value (nullopt, true), undefined (nullopt,
  // false), at CFA + offset, or something else (false returned).
  struct Saved {
    std::optional<int64_t> at;
    bool same = false;
  };
  auto saved = [&](int reg, Saved& out) {
    Dwarf_Op mem[3], *ops = nullptr;
    size_t n = 0;
    if (dwarf_frame_register(frame, reg, mem, &ops, &n) != 0) return false;
    if (n == 0) {
      out.same = ops == nullptr;
      return true;
    }
    out.at = at_cfa(ops, n);
    return out.at.has_value();
  };
  Saved ra, saved_fp;
  if (!saved(ra_column, ra)) return row;
  if (!ra.at && !ra.same) {
    row.type = EMBER_ROW_ROOT;
    return row;
  }
  Dwarf_Op* ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_cfa(frame, &ops, &n) != 0) return row;
  // sp or fp + offset: elfutils says bregx, or bregN.
  uint64_t reg = n == 1 && ops[0].atom == DW_OP_bregx ? ops[0].number : n == 1 ? ops[0].atom - DW_OP_breg0 : 0;
  uint64_t offset = n == 1 && ops[0].atom == DW_OP_bregx ? ops[0].number2 : n == 1 ? ops[0].number : 0;
  uint8_t type;
  uint16_t cfa;
  if (n == 1 && (reg == uint64_t(sp) || reg == uint64_t(fp))) {
    type = reg == uint64_t(sp) ? EMBER_ROW_CFA_SP : EMBER_ROW_CFA_FP;
    cfa = static_cast<uint16_t>(offset);
  } else if (!arm64 && n == 9 && ops[4].atom >= DW_OP_lit0 && ops[4].atom <= DW_OP_lit15) {
    type = EMBER_ROW_PLT;  // the PLT expression (its form is checked against readelf above)
    cfa = static_cast<uint8_t>(ops[4].atom - DW_OP_lit0);
  } else {
    return row;
  }
  if (!saved(fp, saved_fp)) return row;
  auto where = expected_ra(cfa, saved_fp.at, ra.at);
  if (!where) return row;
  row.type = type;
  row.cfa = cfa;
  row.ra = where->first;
  row.fp = static_cast<int8_t>(where->second);
  return row;
}

}  // namespace

// The table's interpreter of CFA programs against elfutils' on large
// binaries of other toolchains' making (remember/restore state, long
// programs) and on arm64's libc: at the first and last address of every
// 5th row.
TEST_CASE("cfi table: rows agree with elfutils' evaluation on large binaries", "[unwind]") {
  std::vector<std::pair<std::string, bool>> paths = {{"/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus", false},
                                                     {arm64_library("libc.so.6"), true}};
  for (const char* jvm : {"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"})
    if (access(jvm, R_OK) == 0) paths.emplace_back(jvm, false);
  for (const auto& [path, arm64] : paths) {
    INFO(path);
    if (access(path.c_str(), R_OK) != 0) continue;
    CfiTable table = table_of(path);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    elf_version(EV_CURRENT);
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    Dwarf_CFI* cfi = dwarf_getcfi_elf(elf);
    REQUIRE(cfi);
    size_t compared = 0, links = 0;
    for (size_t i = 0; i + 1 < table.rows.size(); i += 5) {
      const ember_unwind_row& row = table.rows[i];
      if (row.type == EMBER_ROW_NONE || row.type == EMBER_ROW_UNSUPPORTED) continue;
      for (uint64_t address : {table.base + row.pc, table.base + table.rows[i + 1].pc - 1}) {
        auto theirs = elfutils_row(cfi, address, arm64);
        if (!theirs) continue;  // padding the table let the function before cover, or arm64's PLT
        INFO("at 0x" << std::hex << address);
        CHECK(theirs->type == row.type);
        CHECK(theirs->ra == row.ra);
        CHECK(theirs->cfa == row.cfa);
        CHECK(theirs->fp == row.fp);
        links += row.ra == EMBER_RA_LINK;
        ++compared;
      }
    }
    CHECK(compared > (arm64 ? 3000 : 10000));
    if (arm64) CHECK(links > 1000);  // every function's entry
    dwarf_cfi_end(cfi);
    elf_end(elf);
    close(fd);
  }
}

// arm64's PLT has no CFI: the table describes it (unwind/cfi_table.cpp's
// add_plt), its entries and the lazy binder's header with its push.
TEST_CASE("cfi table: arm64's PLT, as aarch64-linux-gnu-objdump shows it", "[unwind]") {
  const std::string path = arm64_library("libstdc++.so.6");
  auto [plt, offset, size] = section_of(path, ".plt");
  REQUIRE(size > 64);
  // The header's first instruction pushes x16 and x30, as objdump says.
  std::string first = run("aarch64-linux-gnu-objdump -d -j .plt --start-address=" + std::to_string(plt) +
                          " --stop-address=" + std::to_string(plt + 4) + " '" + path + "'");
  REQUIRE(first.find("stp\tx16, x30, [sp, #-16]!") != std::string::npos);
  CfiTable table = table_of(path);
  auto expect = [&](uint64_t address, uint16_t cfa) {
    INFO("at 0x" << std::hex << address);
    const ember_unwind_row* row = row_at(table, address);
    REQUIRE(row);
    CHECK(row->type == EMBER_ROW_CFA_SP);
    CHECK(row->cfa == cfa);
    CHECK(row->ra == EMBER_RA_LINK);
    CHECK(row->fp == 0);
  };
  expect(plt, 0);
  expect(plt + 4, 16);
  expect(plt + 28, 16);
  expect(plt + 32, 0);
  expect(plt + size - 4, 0);
}
