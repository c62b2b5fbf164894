#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/auxv.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
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
  std::string cfa, rbp, ra;  // "rsp+8", "c-16", "u", "exp", ...
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
        if (columns[i] == "rbp") row.rbp = w[i];
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

// Whether `row` says what readelf says for the same address.
bool agrees(const ember_unwind_row& row, const OracleRow& o) {
  if (o.ra == "u") return row.type == EMBER_ROW_ROOT;
  if (o.cfa == "exp") return row.type == EMBER_ROW_PLT || row.type == EMBER_ROW_SIGNAL || row.type == EMBER_ROW_UNSUPPORTED;
  if (o.ra != "c-8") return row.type == EMBER_ROW_UNSUPPORTED;
  std::string reg = o.cfa.substr(0, 3);
  if ((reg != "rsp" && reg != "rbp") || o.cfa[3] != '+') return row.type == EMBER_ROW_UNSUPPORTED;
  if (row.type != (reg == "rsp" ? EMBER_ROW_CFA_RSP : EMBER_ROW_CFA_RBP)) return false;
  if (row.cfa != std::stoul(o.cfa.substr(4))) return false;
  if (o.rbp == "u" || o.rbp == "s") return row.rbp == 0;
  if (o.rbp.starts_with("c")) return row.rbp * 8 == std::stol(o.rbp.substr(1));
  return row.type == EMBER_ROW_UNSUPPORTED;
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

}  // namespace

TEST_CASE("cfi table: every row of Debian's libraries agrees with readelf", "[unwind]") {
  for (const std::string& path : {system_library("libc.so.6"), system_library("libstdc++.so.6"),
                                  std::string("/lib64/ld-linux-x86-64.so.2")}) {
    INFO(path);
    CfiTable table = table_of(path);
    auto [fdes, cies] = read_oracle(path);
    REQUIRE(fdes.size() == table.fdes);
    size_t compared = 0, signal = 0, roots = 0;
    for (const OracleFde& fde : fdes) {
      std::vector<OracleRow> rows = fde.rows;
      if (rows.empty()) {
        REQUIRE(cies.count(fde.cie));
        rows.push_back(cies[fde.cie]);
        rows.back().loc = fde.start;
      }
      for (const OracleRow& o : rows) {
        const ember_unwind_row* row = row_at(table, o.loc);
        INFO("at 0x" << std::hex << o.loc << ": readelf " << o.cfa << " rbp " << o.rbp << " ra " << o.ra);
        REQUIRE(row);
        CHECK(agrees(*row, o));
        signal += row->type == EMBER_ROW_SIGNAL;
        roots += row->type == EMBER_ROW_ROOT;
        ++compared;
      }
    }
    CHECK(compared > 2000);
    // Code past the last function has no CFI.
    CHECK(table.rows.back().type == EMBER_ROW_NONE);
    if (path.find("libc.so") != std::string::npos) {
      CHECK(signal >= 1);  // __restore_rt, the signal return trampoline
      CHECK(roots >= 1);   // clone3: a thread's outermost frame
    }
  }
}

TEST_CASE("cfi table: rows are sorted, compact, and libc builds fast enough to do lazily", "[unwind]") {
  CfiTable table = table_of(system_library("libc.so.6"));
  for (size_t i = 1; i < table.rows.size(); ++i) {
    REQUIRE(table.rows[i - 1].pc < table.rows[i].pc);
    const auto &a = table.rows[i - 1], &b = table.rows[i];
    REQUIRE(!(a.type == b.type && a.cfa == b.cfa && a.rbp == b.rbp));
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

TEST_CASE("cfi table: corrupt or truncated CFI never crashes and never reads out of bounds", "[unwind]") {
  std::ifstream in(system_library("libc.so.6"), std::ios::binary);
  std::string image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  REQUIRE(image.size() > 100000);
  // Where .eh_frame lies: flip bytes there (and in .eh_frame_hdr just before it).
  std::istringstream sections(run("readelf -SW '" + system_library("libc.so.6") + "'"));
  uint64_t offset = 0, size = 0;
  for (std::string l; std::getline(sections, l);)
    if (l.find(" .eh_frame ") != std::string::npos) {
      std::istringstream w(l.substr(l.find(".eh_frame ") + 10));
      std::string type, addr, off, sz;
      w >> type >> addr >> off >> sz;
      offset = std::stoull(off, nullptr, 16);
      size = std::stoull(sz, nullptr, 16);
    }
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
std::optional<ember_unwind_row> elfutils_row(Dwarf_CFI* cfi, uint64_t address) {
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
  Dwarf_Op mem[3], *ops = nullptr;
  size_t n = 0;
  if (dwarf_frame_register(frame, 16, mem, &ops, &n) != 0) return row;
  if (n == 0 && ops == mem) {
    row.type = EMBER_ROW_ROOT;
    return row;
  }
  if (at_cfa(ops, n) != -8 || dwarf_frame_cfa(frame, &ops, &n) != 0) return row;
  // rsp or rbp + offset: elfutils says bregx, or breg7 / breg6.
  uint64_t reg = n == 1 && ops[0].atom == DW_OP_bregx ? ops[0].number : n == 1 ? ops[0].atom - DW_OP_breg0 : 0;
  uint64_t offset = n == 1 && ops[0].atom == DW_OP_bregx ? ops[0].number2 : n == 1 ? ops[0].number : 0;
  if (n == 1 && (reg == 7 || reg == 6)) {
    row.type = reg == 7 ? EMBER_ROW_CFA_RSP : EMBER_ROW_CFA_RBP;
    row.cfa = static_cast<uint16_t>(offset);
  } else if (n == 9 && ops[4].atom >= DW_OP_lit0 && ops[4].atom <= DW_OP_lit15) {
    row.type = EMBER_ROW_PLT;  // the PLT expression (its form is checked against readelf above)
    row.cfa = static_cast<uint8_t>(ops[4].atom - DW_OP_lit0);
  } else {
    return row;
  }
  if (dwarf_frame_register(frame, 6, mem, &ops, &n) != 0) return ember_unwind_row{0, 0, EMBER_ROW_UNSUPPORTED, 0};
  if (n > 0) {
    auto at = at_cfa(ops, n);
    if (!at) return ember_unwind_row{0, 0, EMBER_ROW_UNSUPPORTED, 0};
    row.rbp = static_cast<int8_t>(*at / 8);
  }
  return row;
}

}  // namespace

// The table's interpreter of CFA programs against elfutils' on two large
// binaries of other toolchains' making (remember/restore state, long
// programs): at the first and last address of every 5th row.
TEST_CASE("cfi table: rows agree with elfutils' evaluation on large binaries", "[unwind]") {
  std::vector<std::string> paths = {"/usr/lib/gcc/x86_64-linux-gnu/12/cc1plus"};
  for (const char* jvm : {"/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"})
    if (access(jvm, R_OK) == 0) paths.push_back(jvm);
  for (const std::string& path : paths) {
    INFO(path);
    if (access(path.c_str(), R_OK) != 0) continue;
    CfiTable table = table_of(path);
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    REQUIRE(fd >= 0);
    elf_version(EV_CURRENT);
    Elf* elf = elf_begin(fd, ELF_C_READ_MMAP, nullptr);
    Dwarf_CFI* cfi = dwarf_getcfi_elf(elf);
    REQUIRE(cfi);
    size_t compared = 0;
    for (size_t i = 0; i + 1 < table.rows.size(); i += 5) {
      const ember_unwind_row& row = table.rows[i];
      if (row.type == EMBER_ROW_NONE || row.type == EMBER_ROW_UNSUPPORTED) continue;
      for (uint64_t address : {table.base + row.pc, table.base + table.rows[i + 1].pc - 1}) {
        auto theirs = elfutils_row(cfi, address);
        if (!theirs) continue;  // padding the table let the function before cover
        INFO("at 0x" << std::hex << address);
        CHECK(theirs->type == row.type);
        CHECK(theirs->cfa == row.cfa);
        CHECK(theirs->rbp == row.rbp);
        ++compared;
      }
    }
    CHECK(compared > 10000);
    dwarf_cfi_end(cfi);
    elf_end(elf);
    close(fd);
  }
}
