#include <catch2/catch.hpp>

#include "user/net/address.h"

using namespace ember::net;

TEST_CASE("address: a listen address takes IPv4, bracketed IPv6 and a bare port") {
  auto v4 = parse_listen("127.0.0.1:8080");
  REQUIRE(v4);
  CHECK(v4->host == "127.0.0.1");
  CHECK(v4->port == 8080);
  auto v6 = parse_listen("[::1]:9000");
  REQUIRE(v6);
  CHECK(v6->host == "::1");
  auto local = parse_listen("localhost:8080");
  REQUIRE(local);
  CHECK(local->host == "127.0.0.1");
  CHECK(is_loopback(local->host));
  CHECK(parse_listen("vm:18083").error() == "'vm' is not an IP address (host names are not resolved, but localhost)");
  auto any = parse_listen(":80");
  REQUIRE(any);
  CHECK(any->host == "0.0.0.0");
  for (const char* bad : {"8080", "127.0.0.1:", "127.0.0.1:0", "127.0.0.1:65536", "::1:80", "host.example:80",
                          "127.0.0.1:80x", "1.2.3.4:-1"})
    CHECK_FALSE(parse_listen(bad));
  CHECK(is_loopback("127.0.0.1"));
  CHECK(is_loopback("::1"));
  CHECK_FALSE(is_loopback("0.0.0.0"));
  CHECK_FALSE(is_loopback("10.0.0.1"));
}

TEST_CASE("address: a server URL gives scheme, host, port (the scheme's by default) and a path prefix") {
  auto plain = parse_url("http://pyroscope:4040");
  REQUIRE(plain);
  CHECK_FALSE(plain->tls);
  CHECK(plain->host == "pyroscope");
  CHECK(plain->port == 4040);
  CHECK(plain->path.empty());
  CHECK(plain->origin() == "http://pyroscope:4040");
  auto cloud = parse_url("https://profiles-prod-001.grafana.net/");
  REQUIRE(cloud);
  CHECK(cloud->tls);
  CHECK(cloud->port == 443);
  CHECK(cloud->path.empty());
  auto prefixed = parse_url("https://[::1]:8443/pyroscope/");
  REQUIRE(prefixed);
  CHECK(prefixed->host == "::1");
  CHECK(prefixed->path == "/pyroscope");
  CHECK(prefixed->origin() == "https://[::1]:8443");
  for (const char* bad : {"pyroscope:4040", "ftp://x", "http://", "http://:80", "http://h:0", "http://h:99999",
                          "http://u:p@h", "http://h/x?y=1", "http://h h", "http://[::1"})
    CHECK_FALSE(parse_url(bad));
  CHECK(parse_url("htp://x").error().find("give http://HOST:PORT") != std::string::npos);
}
