#include <catch2/catch.hpp>

#include "tests/unit/temp_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "user/serve/recorder.h"
#include "user/serve/results.h"
#include "user/serve/serve.h"

using namespace ember;
namespace fs = std::filesystem;

TEST_CASE("serve: the token comes from the bearer header, else the cookie, and must match exactly") {
  CHECK(serve::request_token("Bearer abc", "ember_token=xyz") == "abc");
  CHECK(serve::request_token("", "a=1; ember_token=xyz; b=2") == "xyz");
  CHECK(serve::request_token("", "not_ember_token=xyz") == "");
  CHECK(serve::request_token("Basic abc", "") == "");
  CHECK(serve::token_matches("secret-token", "secret-token"));
  CHECK_FALSE(serve::token_matches("secret-toke", "secret-token"));
  CHECK_FALSE(serve::token_matches("secret-tokenX", "secret-token"));
  CHECK_FALSE(serve::token_matches("", ""));  // no token configured lets nobody in
}

TEST_CASE("serve: state changes need the marker header and the server's own origin") {
  CHECK_FALSE(serve::cross_site_refusal("1", "", "", "127.0.0.1:8080", false));
  CHECK_FALSE(serve::cross_site_refusal("1", "http://127.0.0.1:8080", "same-origin", "127.0.0.1:8080", false));
  CHECK(serve::cross_site_refusal("", "", "", "127.0.0.1:8080", false));
  CHECK(serve::cross_site_refusal("1", "http://evil.example", "", "127.0.0.1:8080", false));
  CHECK(serve::cross_site_refusal("1", "http://127.0.0.1:8080", "", "127.0.0.1:8080", true));  // https expected
  CHECK(serve::cross_site_refusal("1", "", "cross-site", "127.0.0.1:8080", false));
}

TEST_CASE("serve: the token file is created private once, then read back") {
  TempDir dir;
  std::string path = (dir.path / "token").string();
  auto none = serve::read_token(path);
  REQUIRE(none);
  CHECK_FALSE(none->has_value());
  auto made = serve::create_token(path);
  REQUIRE(made);
  CHECK(made->size() == 48);
  struct stat st {};
  REQUIRE(::stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  auto again = serve::read_token(path);
  REQUIRE(again);
  CHECK(**again == *made);
  CHECK_FALSE(serve::create_token(path));  // never over an existing file
  ::chmod(path.c_str(), 0644);
  CHECK_FALSE(serve::read_token(path));  // readable by others: refused
}

TEST_CASE("results: names follow the scheme and nothing else is reachable") {
  CHECK(is_result_file_name("20261121-034604-542afb0c-cpu-host.html"));
  CHECK(is_result_file_name("20261121-034604-542afb0c-alloc-pid1234.pb.gz"));
  for (const char* bad : {"../20261121-034604-542afb0c-cpu-host.html", "20261121-034604-542afb0c-cpu-host.sh",
                          ".token", "settings.json", "20261121-034604-542afb0c-cpu-host.html/..",
                          "20261121-034604-542AFB0C-cpu-host.html", "/etc/passwd"})
    CHECK_FALSE(is_result_file_name(bad));
  std::string base = result_base_name(1795232764346, "542afb0c", "cpu", "host");
  CHECK(base.size() == 15 + 1 + 8 + 9);
  CHECK(base.substr(15) == "-542afb0c-cpu-host");
}

TEST_CASE("results: a store lists newest first, with sizes, and removes a result's files") {
  TempDir dir;
  auto store = ResultStore::open((dir.path / "a" / "results").string());
  REQUIRE(store);
  struct stat st {};
  REQUIRE(::stat(store->dir().c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0700);
  auto make = [&](int64_t created, const std::string& event) {
    ResultInfo r;
    r.id = store->new_id();
    r.created_ms = created;
    r.event = event;
    r.target = "host";
    r.base = result_base_name(created, r.id, r.event, r.target);
    r.status = "ok";
    r.total = 42;
    REQUIRE(store->save(r));
    std::ofstream(store->path(r.base + ".folded")) << "main 42\n";
    return r;
  };
  ResultInfo older = make(1795232000000, "cpu"), newer = make(1795232900000, "offcpu");
  auto list = store->list();
  REQUIRE(list.size() == 2);
  CHECK(list[0].id == newer.id);
  CHECK(list[1].id == older.id);
  CHECK(list[0].files.at("folded") == 8);
  CHECK(list[0].total == 42);
  REQUIRE(store->find(older.id));

  // A link named like a result file is not followed, and removing the
  // result removes the link, not its target.
  std::string outside = (dir.path / "secret").string();
  std::ofstream(outside) << "secret\n";
  std::string link = store->path(older.base + ".html");
  REQUIRE(::symlink(outside.c_str(), link.c_str()) == 0);
  auto opened = store->open_file(older.base + ".html");
  REQUIRE_FALSE(opened);
  CHECK(opened.error() == ELOOP);
  CHECK_FALSE(store->open_file("../secret"));
  auto ok = store->open_file(older.base + ".folded");
  REQUIRE(ok);
  ::close(*ok);

  CHECK(store->remove(older.id) == 3);  // .json, .folded, the link
  CHECK(fs::exists(outside));
  CHECK(store->list().size() == 1);
  CHECK(store->remove("00000000") == 0);
}

TEST_CASE("serve: a start request becomes ember record's arguments") {
  RecordRequest cpu;
  cpu.pid = 42;
  cpu.frequency = 499;
  cpu.interval = 4096;  // not cpu's: left out
  cpu.duration = 2.5;
  CHECK(record_arguments(cpu, "/r/x.pb.gz", 3) ==
        std::vector<std::string>{"record", "-e", "cpu-clock", "-p", "42", "-F", "499", "-d", "2.5", "-o", "/r/x.pb.gz",
                                 "--progress-fd", "3"});
  RecordRequest alloc;
  alloc.event = "alloc";
  alloc.interval = 1048576;
  CHECK(record_arguments(alloc, "x.pb.gz", 3) ==
        std::vector<std::string>{"record", "-e", "alloc", "-a", "--alloc-interval", "1048576", "-o", "x.pb.gz",
                                 "--progress-fd", "3"});
  RecordRequest bad;
  bad.event = "cycles";
  CHECK_FALSE(check_request(bad));
  bad.event = "offcpu";
  bad.min_block = "-1ms";
  CHECK_FALSE(check_request(bad));
  bad.min_block = "2ms";
  CHECK(check_request(bad));
}
