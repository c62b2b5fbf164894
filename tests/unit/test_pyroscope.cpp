#include <catch2/catch.hpp>

#include "flamegraph/protobuf.h"
#include "user/fleet/http.h"
#include "user/fleet/pyroscope.h"

using namespace ember;
using fleet::Label;

namespace {

// Every length-delimited field `field` of `message`, in order.
std::vector<std::string> fields(std::string_view message, int field) {
  std::vector<std::string> out;
  protobuf::Reader r(message);
  int f = 0, wire = 0;
  while (r.next(f, wire)) {
    if (f == field && wire == protobuf::kLen)
      out.emplace_back(r.bytes());
    else
      r.skip(wire);
  }
  REQUIRE(r.ok());
  return out;
}

}  // namespace

TEST_CASE("pyroscope: labels sorted by name, the last value of a name kept, empty ones dropped") {
  auto l = fleet::normalized({{"service_name", "a"}, {"__name__", "process_cpu"}, {"pod", ""}, {"service_name", "b"}});
  CHECK(l == std::vector<Label>{{"__name__", "process_cpu"}, {"service_name", "b"}});
}

TEST_CASE("pyroscope: a push request holds each series' labels and its profile") {
  std::string binary("\x1f\x8b\x08\x00\x00\x80\xff", 7);  // bytes, not text: zeros and high bits pass
  fleet::Series cpu{{{"service_name", "nginx"}, {"__name__", "process_cpu"}}, binary, "id-1"};
  fleet::Series off{{{"__name__", "off_cpu"}, {"service_name", "shop/api"}}, "pprof-2", ""};
  std::vector<fleet::Series> all = {cpu, off};
  std::string body = fleet::encode_push_request(all);

  auto series = fields(body, 1);
  REQUIRE(series.size() == 2);
  auto labels = fields(series[0], 1);
  REQUIRE(labels.size() == 2);
  CHECK(fields(labels[0], 1) == std::vector<std::string>{"__name__"});
  CHECK(fields(labels[0], 2) == std::vector<std::string>{"process_cpu"});
  CHECK(fields(labels[1], 1) == std::vector<std::string>{"service_name"});
  CHECK(fields(labels[1], 2) == std::vector<std::string>{"nginx"});
  auto samples = fields(series[0], 2);
  REQUIRE(samples.size() == 1);
  CHECK(fields(samples[0], 1) == std::vector<std::string>{binary});
  CHECK(fields(samples[0], 2) == std::vector<std::string>{"id-1"});

  auto second = fields(series[1], 2);
  REQUIRE(second.size() == 1);
  CHECK(fields(second[0], 1) == std::vector<std::string>{"pprof-2"});
  CHECK(fields(second[0], 2).empty());  // no ID given: none sent
  CHECK(fleet::encode_push_request({}).empty());
}

TEST_CASE("pyroscope: a push request reads back as it was written; corrupt ones are refused") {
  std::string binary("\x1f\x8b\x08\x00\x00\x80\xff", 7);
  std::vector<fleet::Series> all = {{{{"service_name", "nginx"}, {"__name__", "process_cpu"}}, binary, "id-1"},
                                    {{{"__name__", "off_cpu"}, {"service_name", "shop/api"}}, "pprof-2", ""}};
  std::string body = fleet::encode_push_request(all);
  auto back = fleet::decode_push_request(body);
  REQUIRE(back);
  REQUIRE(back->size() == 2);
  CHECK((*back)[0].labels == fleet::normalized(all[0].labels));
  CHECK((*back)[0].profile == binary);
  CHECK((*back)[0].id == "id-1");
  CHECK((*back)[1].profile == "pprof-2");
  CHECK_FALSE(fleet::decode_push_request(body.substr(0, body.size() - 3)));
}

TEST_CASE("pyroscope: the server's answers: what to do, its message, its Retry-After") {
  CHECK(fleet::next_for_status(200) == fleet::SendResult::Next::Done);
  CHECK(fleet::next_for_status(429) == fleet::SendResult::Next::Retry);
  CHECK(fleet::next_for_status(503) == fleet::SendResult::Next::Retry);
  CHECK(fleet::next_for_status(400) == fleet::SendResult::Next::GiveUp);
  CHECK(fleet::error_message(R"({"code":"invalid_argument","message":"too many samples"})") == "too many samples");
  CHECK(fleet::error_message("plain text\r\n") == "plain text");
  CHECK(fleet::error_message("") == "(no message)");
  CHECK(fleet::error_message(std::string(1000, 'x')).size() == 300);

  std::time_t now = 784111777;  // Sun, 06 Nov 1994 08:49:37 GMT
  CHECK(fleet::parse_retry_after("120", now) == 120);
  CHECK(fleet::parse_retry_after(" 7 ", now) == 7);
  CHECK(fleet::parse_retry_after("Sun, 06 Nov 1994 08:51:37 GMT", now) == 120);
  CHECK(fleet::parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now) == 0);  // already past
  for (const char* bad : {"", "-5", "1e300", "inf", "nan", "12s", "99999999999", "Sun, 06 Nov 1994 08:51:37",
                          "Sunday, 06-Nov-94 08:49:37 GMT"})
    CHECK_FALSE(fleet::parse_retry_after(bad, now));
}
