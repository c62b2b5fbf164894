#include "user/net/address.h"

#include <arpa/inet.h>

namespace ember::net {
namespace {

// A port's digits: 1 to 65535, or 0 if they are not one.
int parse_port(std::string_view text) {
  int port = 0;
  for (char c : text) {
    if (c < '0' || c > '9' || port > 65535) return 0;
    port = port * 10 + (c - '0');
  }
  return text.empty() || port > 65535 ? 0 : port;
}

}  // namespace

std::expected<Endpoint, std::string> parse_listen(std::string_view text) {
  auto bad = [&] { return std::unexpected("'" + std::string(text) + "' is not ADDRESS:PORT"); };
  size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return bad();
  std::string host(text.substr(0, colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  else if (host.find(':') != std::string::npos) return bad();  // IPv6 needs brackets
  if (host.empty()) host = "0.0.0.0";
  int port = parse_port(text.substr(colon + 1));
  if (port == 0) return bad();
  // The one name taken, and as 127.0.0.1 without asking a resolver (which
  // may say ::1, or nothing in a bare container).
  if (host == "localhost") host = "127.0.0.1";
  unsigned char addr[16];
  if (inet_pton(AF_INET, host.c_str(), addr) != 1 && inet_pton(AF_INET6, host.c_str(), addr) != 1)
    return std::unexpected("'" + host + "' is not an IP address (host names are not resolved, but localhost)");
  return Endpoint{host, port};
}

bool is_loopback(std::string_view host) { return host == "::1" || host.starts_with("127."); }

std::expected<Url, std::string> parse_url(std::string_view text) {
  auto bad = [&](const std::string& why) {
    return std::unexpected("'" + std::string(text) + "' is not a URL (" + why +
                           "): give http://HOST:PORT or https://HOST[:PORT][/PATH]");
  };
  Url url;
  std::string_view rest = text;
  if (rest.starts_with("https://")) {
    url.tls = true;
    rest.remove_prefix(8);
  } else if (rest.starts_with("http://")) {
    rest.remove_prefix(7);
  } else {
    return bad("no http:// or https://");
  }
  if (rest.find_first_of("?#") != std::string_view::npos) return bad("a query or fragment");
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  while (path.ends_with('/')) path.remove_suffix(1);
  url.path = path;
  if (authority.find('@') != std::string_view::npos) return bad("credentials belong in server.user or server.token_file");
  std::string_view port_text;
  if (authority.starts_with('[')) {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return bad("an unclosed [");
    url.host = authority.substr(1, close - 1);
    std::string_view after = authority.substr(close + 1);
    if (!after.empty() && !after.starts_with(':')) return bad("text after ]");
    if (!after.empty()) port_text = after.substr(1);
  } else {
    size_t colon = authority.rfind(':');
    url.host = authority.substr(0, colon);
    if (colon != std::string_view::npos) port_text = authority.substr(colon + 1);
  }
  if (url.host.empty()) return bad("no host");
  for (char c : url.host)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' || c == '_'))
      return bad("a host name cannot hold '" + std::string(1, c) + "'");
  url.port = url.tls ? 443 : 80;
  if (!port_text.empty() || authority.ends_with(':')) {
    url.port = parse_port(port_text);
    if (url.port == 0) return bad("a port is 1 to 65535");
  }
  return url;
}

std::string Url::origin() const {
  std::string h = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  return std::string(tls ? "https://" : "http://") + h + ":" + std::to_string(port);
}

}  // namespace ember::net
