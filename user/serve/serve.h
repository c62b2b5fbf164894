// `ember serve`: a web page and JSON API to start and stop profiles and
// browse their results (README "Web UI"). The HTTP server is cpp-httplib;
// the profiles run in `ember record` processes (user/serve/recorder.h).
#pragma once

#include <cstdint>
#include <expected>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "user/serve/recorder.h"

namespace ember {

struct ServeOptions {
  std::string listen = "127.0.0.1:8080";
  std::string dir;         // results; empty: default_results_dir()
  std::string token_file;  // empty: .token in the results directory
  std::string tls_cert, tls_key;
};

int run_serve(const ServeOptions& options);

// /var/lib/ember/results as root, else $XDG_STATE_HOME/ember/results.
std::string default_results_dir();

// The pieces of the server that read what clients send, on their own for
// the unit tests and the fuzzer.
namespace serve {

// The token a request carries: "Authorization: Bearer T", else the
// ember_token cookie.
std::string request_token(std::string_view authorization, std::string_view cookie);
// Constant-time comparison: how long a wrong token takes says nothing of it.
bool token_matches(std::string_view given, std::string_view expected);

// Why a state-changing request must be refused as possibly cross-site, if
// it must: it lacks "X-Ember-Request: 1", or comes from another origin.
std::optional<std::string> cross_site_refusal(std::string_view marker, std::string_view origin,
                                              std::string_view sec_fetch_site, std::string_view host, bool tls);

// The token in `path`, nothing when there is no such file, or why it is
// refused (readable by others, too short).
std::expected<std::optional<std::string>, std::string> read_token(const std::string& path);
// A fresh random token in a new file `path`, mode 0600.
std::expected<std::string, std::string> create_token(const std::string& path);

// Settings the page saves (settings.json): the fields known, of the right
// types, or why not (a 400).
std::expected<nlohmann::json, std::string> check_settings(const nlohmann::json& settings);

// A POST /api/start body (JSON text), `settings` filling the fields it
// leaves out: the profile to record, or why not (a 400).
std::expected<RecordRequest, std::string> parse_start_request(std::string_view body, const nlohmann::json& settings);

}  // namespace serve
}  // namespace ember
