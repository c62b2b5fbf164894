// gzip in memory (zlib), for the files ember writes and reads: pprof
// (profile.proto is gzipped) and the tables inside an HTML flamegraph.
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace ember::flamegraph {

std::string gzip(std::string_view raw);

// Fails on corrupt or truncated data, and on data that inflates past 2 GiB
// (a hostile file must not eat memory).
std::expected<std::string, std::string> gunzip(std::string_view in);

// Whether `bytes` start as gzip data does (its magic number).
bool is_gzip(std::string_view bytes);

// `bytes` themselves, or their contents inflated into `storage` if they
// are gzip data.
std::expected<std::string_view, std::string> inflated(std::string_view bytes, std::string& storage);

}  // namespace ember::flamegraph
