#include <catch2/catch.hpp>

#include <fstream>

#include "temp_dir.h"
#include "user/fleet/config.h"

using namespace ember::fleet;

namespace {

std::string write_toml(const TempDir& dir, const std::string& text) {
  std::string path = (dir.path / "agent.toml").string();
  std::ofstream(path) << text;
  return path;
}

// The error of a configuration that must be refused.
std::string error_of(const std::string& file, const KeyValues& flags = {}) {
  auto c = load_agent_config(file, flags);
  REQUIRE_FALSE(c);
  return c.error();
}

}  // namespace

TEST_CASE("agent config: a TOML file with every kind of key, and flags over it") {
  TempDir dir;
  std::string spool = (dir.path / "spool").string();
  std::string token = (dir.path / "token").string();
  std::ofstream(token) << "s3cret\n";
  std::string file = write_toml(dir, R"(
period = "30s"
frequency = 99
events = ["cpu", "offcpu"]
labels = { env = "prod", region = "eu-1" }
pid_label = true

[server]
url = "https://pyroscope.example:4040/p"
tenant = "team-a"
token_file = ")" + token + R"("
timeout = "2500ms"

[spool]
dir = ")" + spool + R"("
max_size = "64MiB"
max_age = "2h"

[metrics]
listen = "[::1]:9464"

[java]
deny = ["org\\.gradle\\..*"]
attach_timeout = "30s"

[[relabel]]
action = "replace"
label = "service_name"
regex = "(.*)-[0-9]+"
target = "service_name"
replacement = "$1"

[[relabel]]
action = "drop"
label = "service_name"
regex = "kernel"
)");
  auto c = load_agent_config(file, {{"frequency", {"19"}}, {"labels", {"env=staging"}}});
  REQUIRE(c);
  CHECK(c->period_s == 30);
  CHECK(c->frequency == 19);  // the flag wins
  CHECK(c->events == std::vector<std::string>{"cpu", "offcpu"});
  CHECK(c->labels == std::map<std::string, std::string>{{"env", "staging"}});  // a list flag replaces the list
  CHECK(c->pid_label);
  CHECK(c->server.url == "https://pyroscope.example:4040/p");
  CHECK(c->server.tenant == "team-a");
  CHECK(c->token == "s3cret");
  CHECK(c->server.timeout_s == Approx(2.5));
  CHECK(c->spool.dir == spool);
  CHECK(c->spool.max_bytes == 64ull << 20);
  CHECK(c->spool.max_age_s == 7200);
  CHECK(c->metrics_listen == "[::1]:9464");
  CHECK(c->java.deny == std::vector<std::string>{"org\\.gradle\\..*"});
  CHECK(c->java.attach_timeout_s == 30);
  REQUIRE(c->relabel.size() == 2);
  CHECK(c->relabel[0].action == RelabelRule::Action::Replace);
  CHECK(c->relabel[0].replacement == "$1");
  CHECK(c->relabel[1].action == RelabelRule::Action::Drop);
}

TEST_CASE("agent config: flags alone, and the defaults") {
  TempDir dir;
  std::string spool = (dir.path / "s").string();
  auto c = load_agent_config("", {{"spool.dir", {spool}}, {"relabel", {"keep service_name (api|web)"}}});
  REQUIRE(c);
  CHECK(c->period_s == 15);
  CHECK(c->frequency == 19);
  CHECK(c->events == std::vector<std::string>{"cpu"});
  CHECK(c->server.url.empty());
  CHECK(c->server.api == "push");
  CHECK(c->metrics_listen == "127.0.0.1:9464");
  CHECK(c->java.attach_timeout_s == 10);
  CHECK_FALSE(c->live);
  CHECK(c->alloc_interval == 512 * 1024);
  REQUIRE(c->relabel.size() == 1);
  CHECK(c->relabel[0].action == RelabelRule::Action::Keep);
  CHECK(c->relabel[0].regex_text == "(api|web)");
}

TEST_CASE("agent config: live allocations, as ember record's settings") {
  TempDir dir;
  std::string file = write_toml(dir, "events = [\"malloc\"]\nlive = true\nmin_age = \"30s\"\nalloc_interval = \"64KiB\"\n");
  auto c = load_agent_config(file, {{"spool.dir", {(dir.path / "s").string()}}});
  REQUIRE(c);
  ember::events::Settings s = event_settings(*c);
  CHECK(s.live);
  CHECK(s.min_age == "30s");
  CHECK(s.alloc_interval == 64 * 1024);
  CHECK(s.frequency == 19);
}

TEST_CASE("agent config: each mistake names the key, the line and the fix") {
  TempDir dir;
  KeyValues ok_spool = {{"spool.dir", {(dir.path / "s").string()}}};
  auto in_file = [&](const std::string& text) { return error_of(write_toml(dir, text), ok_spool); };
  CHECK(in_file("period = \"5x\"\n") == (dir.path / "agent.toml").string() +
                                           ":1: period: '5x' is not a duration: give it as 15s, 500ms, 2m or 24h");
  CHECK_THAT(in_file("\n\nperod = 1\n"), Catch::Contains(":3: unknown key 'perod'"));
  CHECK_THAT(in_file("[server]\nurl = 3\nbad = 1\n"), Catch::Contains(":2: server.url: '3' is not a URL"));
  CHECK_THAT(in_file("[server]\nbad = 1\n"), Catch::Contains("unknown key 'server.bad'"));
  CHECK_THAT(in_file("period = \n"), Catch::Contains(":1: not TOML"));
  // toml++ asserted on this one (AFL): an error, not an abort.
  CHECK_THAT(in_file(" [,1"), Catch::Contains("agent.toml: not TOML"));
  CHECK_THAT(in_file("frequency = 0\n"), Catch::Contains("frequency: '0' is out of range: give 1 to 10000"));
  CHECK_THAT(in_file("\nevents = [\"cpu\", \"gpu\"]\n"),
             Catch::Contains(":2: events: unknown event 'gpu': give one of cpu-clock (or cpu), cycles,"));
  CHECK_THAT(in_file("events = [\"wall\", \"wall\"]\n"), Catch::Contains(":1: events: 'wall' is given twice"));
  CHECK_THAT(in_file("events = [\"alloc\"]\n[java]\nattach = false\n"),
             Catch::Contains("'alloc' needs ember's Java agent: set java.attach = true"));
  CHECK_THAT(in_file("events = [\"cpu\"]\nlive = true\n"),
             Catch::Contains("live applies to allocations: add 'malloc' or 'alloc'"));
  CHECK_THAT(in_file("events = [\"malloc\"]\nmin_age = \"30s\"\n"),
             Catch::Contains("min_age keeps the allocations still live at the end that are at least that old: add live"));
  CHECK_THAT(in_file("events = [\"malloc\"]\nlive = true\nmin_gcs = 2\n"),
             Catch::Contains("min_gcs applies to Java objects still live (C and C++ blocks are not collected): add "
                             "'alloc' with live"));
  CHECK_THAT(in_file("min_age = \"soon\"\n"), Catch::Contains(":1: min_age: 'soon' is not a duration"));
  CHECK_THAT(in_file("alloc_interval = \"0\"\n"), Catch::Contains(":1: alloc_interval: '0' is not a size"));
  CHECK_THAT(in_file("events = \"cpu\"\nframes = [1]\n"), Catch::Contains("unknown key 'frames'"));
  CHECK_THAT(in_file("pid_label = \"yes\"\n"), Catch::Contains("pid_label: 'yes' is not true or false"));
  CHECK_THAT(in_file("[[relabel]]\naction = \"rename\"\nlabel = \"x\"\nregex = \".*\"\n"),
             Catch::Contains("relabel: action 'rename' is not keep, drop or replace"));
  CHECK_THAT(in_file("[[relabel]]\naction = \"keep\"\nlabel = \"x\"\nregex = \"(\"\n"),
             Catch::Contains("is not a POSIX extended regular expression"));
  CHECK_THAT(in_file("[java]\nallow = [\"[\"]\n"), Catch::Contains("java.allow: '[' is not a POSIX extended"));
  CHECK_THAT(in_file("labels = { \"bad-name\" = \"x\" }\n"), Catch::Contains("labels: 'bad-name=x' is not NAME=VALUE"));
  CHECK_THAT(in_file("[server]\nurl = \"http://h:1\"\nuser = \"u\"\n"),
             Catch::Contains("server.user: needs server.password_file"));
  CHECK_THAT(in_file("[server]\nurl = \"http://h:1\"\ntoken_file = \"/nonexistent/t\"\n"),
             Catch::Contains("server.token_file: cannot read '/nonexistent/t'"));
  CHECK_THAT(in_file("[server]\nurl = \"http://h:1\"\nca_file = \"/etc/hostname\"\n"),
             Catch::Contains("server.ca_file: only for an https:// server.url"));
  CHECK_THAT(in_file("[metrics]\nlisten = \"localhost\"\n"), Catch::Contains("metrics.listen: 'localhost' is not ADDRESS:PORT"));
  CHECK_THAT(error_of("", {{"spool.dir", {"/proc/1/nope"}}}), Catch::Contains("spool.dir: cannot create '/proc/1/nope'"));
  CHECK_THAT(error_of("", {{"spool.dir", {"/proc"}}}), Catch::Contains("spool.dir: cannot write in '/proc'"));
  CHECK_THAT(error_of("", {{"period", {"1", "2"}}}), Catch::Contains("--period: takes one value"));
  CHECK_THAT(error_of("", {{"relabel", {"keep service_name"}}}), Catch::Contains("--relabel: 'keep service_name' is not a rule"));
  CHECK_THAT(error_of((dir.path / "none.toml").string()), Catch::Contains("--config: cannot read"));
}

TEST_CASE("agent config: durations and sizes") {
  CHECK(parse_seconds("15s") == 15);
  CHECK(parse_seconds("500ms") == Approx(0.5));
  CHECK(parse_seconds("2m") == 120);
  CHECK(parse_seconds("24h") == 86400);
  CHECK(parse_seconds("7") == 7);
  CHECK_FALSE(parse_seconds("-1s"));
  CHECK_FALSE(parse_seconds("1d"));
  CHECK(parse_bytes("512MiB") == 512ull << 20);
  CHECK(parse_bytes("1GiB") == 1ull << 30);
  CHECK(parse_bytes("100MB") == 100'000'000);
  CHECK(parse_bytes("4096") == 4096);
  CHECK_FALSE(parse_bytes("1TB"));
  CHECK_FALSE(parse_bytes("lots"));
}
