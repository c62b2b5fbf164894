// A directory for one test, removed with everything in it at scope exit.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string t = (std::filesystem::temp_directory_path() / "ember-test-XXXXXX").string();
    path = mkdtemp(t.data());
  }
  TempDir(TempDir&& other) noexcept : path(std::move(other.path)) { other.path.clear(); }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
};
