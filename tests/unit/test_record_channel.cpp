#include <catch2/catch.hpp>

#include "user/session/record_channel.h"

using namespace ember::record_channel;

TEST_CASE("record channel: every message reads back as written") {
  Message progress{.kind = Message::Kind::Progress, .seconds = 1.25, .samples = 420, .lost = 3};
  auto p = decode(encode(progress));
  REQUIRE(p);
  CHECK(p->kind == Message::Kind::Progress);
  CHECK(p->seconds == 1.25);
  CHECK(p->samples == 420);
  CHECK(p->lost == 3);

  Message error{.kind = Message::Kind::Error, .text = "no process with pid 7 (-p)\nand \"quotes\""};
  auto e = decode(encode(error));
  REQUIRE(e);
  CHECK(e->kind == Message::Kind::Error);
  CHECK(e->text == error.text);
  CHECK(encode(error).find('\n') == std::string::npos);  // one line

  Message done{.kind = Message::Kind::Done, .seconds = 5, .samples = 9, .lost = 0, .outputs = {"a.pb.gz"}};
  auto d = decode(encode(done));
  REQUIRE(d);
  CHECK(d->outputs == std::vector<std::string>{"a.pb.gz"});
}

TEST_CASE("record channel: lines that are not messages are passed over") {
  CHECK(!decode(""));
  CHECK(!decode("1.25 420 3"));  // the old format
  CHECK(!decode("{\"progress\":{\"seconds\":\"x\"}}"));
  CHECK(!decode("{\"error\":1}"));
  CHECK(!decode("{\"other\":1}"));
  CHECK(!decode("[1]"));
}
