// Addresses given on the command line or in a configuration: where a
// server listens (ember serve, the fleet agent's /metrics) and which
// server a client talks to (the fleet agent's backend).
#pragma once

#include <expected>
#include <string>
#include <string_view>

namespace ember::net {

struct Endpoint {
  std::string host;  // without brackets
  int port = 0;
};
// "127.0.0.1:8080", "[::1]:8080", "0.0.0.0:80", ":8080" (all addresses),
// "localhost:8080" (127.0.0.1); host names are not resolved.
std::expected<Endpoint, std::string> parse_listen(std::string_view text);
bool is_loopback(std::string_view host);

struct Url {
  bool tls = false;  // https
  std::string host;  // without brackets
  int port = 0;      // the scheme's when not given
  std::string path;  // a prefix the server is mounted under: "" or "/pyroscope" (no trailing '/')
  // "http://host:port" (IPv6 bracketed): what an HTTP client is given.
  std::string origin() const;
};
// "http://HOST[:PORT][/PREFIX]" or "https://...", without query or fragment.
std::expected<Url, std::string> parse_url(std::string_view text);

}  // namespace ember::net
