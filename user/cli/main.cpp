// The ember command line.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "flamegraph/output.h"
#include "user/events/event.h"
#include "user/fleet/agent.h"
#include "user/java/jvm.h"
#include "user/cli/record.h"
#include "user/serve/serve.h"
#include "user/cli/symbolize.h"
#include "user/cli/tools.h"
#include "version.h"  // build/version.h, from the file VERSION

namespace {

// -e's help, from the list of events record accepts.
std::string record_events_help() {
  std::string help = "What to record, one graph each (comma-separated):";
  const char* separator = " ";
  for (const ember::events::Event* e : ember::events::all()) {
    help += separator + std::string(e->name) + ": " + std::string(e->help);
    separator = "; ";
  }
  return help;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ember: a system-wide profiler for Linux (eBPF)", "ember"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ember " EMBER_VERSION);

  ember::RecordOptions rec;
  CLI::App* record = app.add_subcommand("record", "Sample stacks of the whole host, some processes, or a command");
  record->add_option("-e,--event", rec.session.events, record_events_help())
      ->delimiter(',')
      ->capture_default_str();
  record->add_option("--min-block", rec.session.settings.min_block, "offcpu: leave out blocks shorter than this (500us, 2ms, 1s)")
      ->capture_default_str();
  record->add_option("--alloc-interval", rec.session.settings.alloc_interval, "malloc, alloc: take a sample every this many bytes allocated")
      ->capture_default_str();
  record->add_flag("--live", rec.session.settings.live,
                   "malloc, alloc: only allocations still not freed (Java: still reachable) at the end (leaks)");
  record->add_option("--min-age", rec.session.settings.min_age,
                     "malloc, alloc with --live: only allocations at least this old at the end (30s, 5m): what "
                     "stays, not what is in flight (Java: no full GC forced at the end)");
  record->add_option("--min-gcs", rec.session.settings.min_gcs,
                     "alloc with --live: only Java objects that survived at least this many garbage collections by "
                     "the end (no full GC forced)");
  record->add_flag("--waker", rec.session.settings.waker,
                   "offcpu, lock: each blocked stack with the stack of whoever woke it, above a '--' frame "
                   "(as BCC's offwaketime)");
  record->add_option("-F,--freq", rec.session.settings.frequency, "Samples per second per CPU")->capture_default_str();
  record->add_flag("-a,--all", rec.all)->description("Profile every process on the host (the default without -p, --tid, --cgroup or a command)");
  record->add_option("-p,--pid", rec.session.pids, "Profile only these processes (comma-separated)")->delimiter(',');
  record->add_option("--tid", rec.session.tids, "Profile only these threads (comma-separated)")->delimiter(',');
  record->add_option("--cgroup", rec.session.cgroups,
                     "Profile only tasks in this cgroup (v2) or below it: a directory under the cgroup2 mount, or "
                     "a path relative to it (system.slice/foo.service); repeat for several")
      ->allow_extra_args(false);
  record->add_option("--comm", rec.session.comm, "Profile only processes or threads whose name matches this (POSIX extended) regex");
  record->add_option("-d,--duration", rec.duration, "Stop after this many seconds (default: Ctrl-C, or when the command exits)");
  record->add_option("--window", rec.window,
                     "Cut the recording into windows of this many seconds, each written to its own numbered file "
                     "(out.0001.html, out.0002.html, ...); the summary covers the last one")
      ->check(CLI::PositiveNumber);
  record->add_option("-o,--output", rec.output,
                     "Output file; the format follows the extension: " + ember::flamegraph::output_extensions_text() +
                         ". With several events, .html and folded names get one file per event (out.EVENT.html); "
                         "pprof and OTLP hold them all in one file (a sample type, or a profile, per event)")
      ->capture_default_str();
  record->add_flag("--threads", rec.session.thread_frames, "Add a frame per thread under its process");
  record->add_flag("--pid-frames", rec.session.pid_frames, "Root frame per process as 'comm (pid)' instead of 'comm'");
  record->add_flag("--kernel-only", rec.session.kernel_only, "Keep only kernel frames");
  record->add_flag("--user-only", rec.session.user_only, "Keep only user-space frames");
  record->add_flag("--idle", rec.session.idle, "Include samples of idle CPUs (swapper)");
  record->add_flag("--no-java{false}", rec.session.java, "Do not attach ember's agent to JVMs (Java frames stay unnamed)");
  record->add_option("--java-attach", rec.session.java_attach, "Attach the agent only to these JVMs (comma-separated pids)")
      ->delimiter(',');
  record->add_option("--attach-timeout", rec.session.java_attach_timeout_s,
                     "Seconds a JVM may take to answer the attach and, separately, to load the agent (large JVMs "
                     "on a busy host take longer); past it, its Java frames stay unnamed")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  record->add_flag("--preserve-frame-pointer", rec.java_frame_pointers,
                   "Add -XX:+PreserveFramePointer to JVMs started by the command (ember steps through their JIT "
                   "frames without it, by the frame sizes its agent publishes; --unwind fp adds it)");
  record->add_flag("--lines", rec.session.lines, "Add file:line to frame names (from DWARF)");
  record->add_flag("--no-inlines{false}", rec.session.inlines, "Do not show inlined calls as frames of their own");
  record->add_option("--symbol-memory", rec.session.symbol_memory_mib,
                     "MiB the symbolizer may hold (symbols, DWARF, caches), DWARF at most half; past that the largest "
                     "binaries lose inlined frames")
      ->capture_default_str();
  record->add_option("--unwind", rec.session.unwind,
                     "How user stacks are unwound, in the kernel: cfi (from each binary's .eh_frame call frame "
                     "information: whole stacks without frame pointers), fp (frame pointers only: cheapest, but "
                     "code built without them loses callers), auto (cfi, and frame pointers for code without CFI, "
                     "such as JIT code)")
      ->check(CLI::IsMember({"auto", "cfi", "fp"}))
      ->capture_default_str();
  record->add_option("--unwind-memory", rec.session.unwind_memory_mib,
                     "MiB of kernel memory for unwind tables (8 bytes per CFI row: libc takes 0.2 MiB, libjvm 1 "
                     "MiB); binaries past it are walked by frame pointers, and the summary names them")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  record->add_flag("-v,--verbose", rec.session.verbose, "Show libbpf's messages (verifier log on load failures)");
  record->add_option("--progress-fd", rec.progress_fd,
                     "Report to this open file descriptor as JSON lines: progress 4 times a second, warnings, "
                     "the error or the files written")
      ->group("Scripting");
  record->add_option("command", rec.command, "Command to start and profile, after --, e.g. -- ./server --port 80");
  record->get_option("--kernel-only")->excludes("--user-only");

  const std::string input_help =
      "Folded stacks, pprof, OpenTelemetry profiles (OTLP) or an HTML flamegraph ember wrote, told apart by content";
  const std::string event_help =
      "Which of a pprof's sample types, or an OTLP file's events, to read (e.g. offcpu, or cpu for a pprof's "
      "nanoseconds); default: the file's default. A wrong name lists those the file holds";
  std::string convert_in, convert_out, convert_event;
  ember::SpoolRange convert_spool;
  CLI::App* convert = app.add_subcommand("convert", "Convert a profile between folded stacks, pprof, OTLP and HTML");
  convert->add_option("input", convert_in,
                      input_help + "; or ember agent's spool directory, one service's periods merged")
      ->required();
  convert->add_option("-e,--event", convert_event,
                      event_help + ". For a spool: the profile type (process_cpu, off_cpu, ... or cpu, offcpu)");
  convert->add_option("-o,--output", convert_out,
                      "Output; the format follows the extension: " + ember::flamegraph::output_extensions_text())
      ->required();
  convert->add_option("--service", convert_spool.service, "Spool: the service_name to merge");
  convert->add_option("--from", convert_spool.from,
                      "Spool: periods from this time, Unix seconds or UTC as 2026-11-26T03:00[:00]");
  convert->add_option("--to", convert_spool.to, "Spool: periods until this time (same forms)");

  std::string report_in, report_event;
  size_t report_rows = 20;
  CLI::App* report = app.add_subcommand("report", "Print the top functions of a profile by self time");
  report->add_option("input", report_in, input_help)->required();
  report->add_option("-n,--top", report_rows, "How many functions")->capture_default_str();
  report->add_option("-e,--event", report_event, event_help);

  std::string diff_base, diff_new, diff_out = "diff.html", diff_event;
  CLI::App* diff = app.add_subcommand("diff", "Differential flamegraph: NEW's shape, coloured by change against BASE");
  diff->add_option("base", diff_base, "The earlier profile (folded, pprof, OTLP or an HTML flamegraph ember wrote)")->required();
  diff->add_option("new", diff_new, "The later profile (folded, pprof, OTLP or an HTML flamegraph ember wrote)")->required();
  diff->add_option("-o,--output", diff_out, "Output .html")->capture_default_str();
  diff->add_option("-e,--event", diff_event, "Which sample type (pprof) or event (OTLP) of the two files to compare; default: their default");

  ember::SymbolizeOptions sym;
  CLI::App* symbolize = app.add_subcommand("symbolize", "Name addresses of a binary, a process or the kernel (batch)");
  auto* elf_opt = symbolize->add_option("-e,--elf", sym.elf, "Addresses are this ELF file's virtual addresses");
  auto* pid_opt = symbolize->add_option("-p,--pid", sym.pid, "Addresses are this process's");
  auto* kernel_opt = symbolize->add_flag("-k,--kernel", sym.kernel, "Addresses are the kernel's");
  elf_opt->excludes(pid_opt)->excludes(kernel_opt);
  pid_opt->excludes(kernel_opt);
  symbolize->add_flag("--lines", sym.lines, "Add file:line to frame names");
  symbolize->add_flag("--no-inlines{false}", sym.inlines, "Do not show inlined calls");
  symbolize->add_option("--symbol-memory", sym.memory_mib, "MiB to hold at most, DWARF at most half")->capture_default_str();
  symbolize->add_option("addresses", sym.addresses, "Hex addresses (default: read from stdin, one per line)");

  // ---- ember jvm: JVM telemetry (hsperfdata) and class histograms (user/java/jvm.h) ----
  ember::JvmOptions jvm_opt;
  CLI::App* jvm = app.add_subcommand(
      "jvm", "Live heap, GC and allocation rate of a JVM, its class histogram, or what keeps its heap alive");
  jvm->add_option("pid", jvm_opt.pid, "The JVM's pid")->required();
  auto* jvm_interval = jvm->add_option("-i,--interval", jvm_opt.interval, "Seconds between lines")
                           ->check(CLI::Range(0.01, 86400.0))
                           ->capture_default_str();
  auto* jvm_count = jvm->add_option("-c,--count", jvm_opt.count, "Lines to print (default: until Ctrl-C or the JVM exits)");
  auto* jvm_histo = jvm->add_flag("--histo", jvm_opt.histo, "Print the class histogram (instances and bytes per class)");
  jvm->add_flag("--live", jvm_opt.live,
                "Histogram (or with --track, histograms) of reachable objects only: the JVM runs a full GC first");
  jvm->add_option("--save", jvm_opt.save, "Save the histogram (or with --heap, the classes' sizes) to this file, for a later --diff");
  jvm->add_option("--diff", jvm_opt.diff,
                  "Print the change since this saved histogram (or with --heap, heap snapshot), largest change of bytes "
                  "(of retained bytes with --heap; gained or lost) first");
  jvm->add_option("-n,--top", jvm_opt.top, "Rows of the histogram or the diff")->capture_default_str();
  jvm_histo->excludes(jvm_interval)->excludes(jvm_count);
  auto* jvm_heap = jvm->add_flag(
      "--heap", jvm_opt.heap,
      "Dump the heap and read it from its GC roots (the JVM is paused for a full GC and the dump): retained bytes per "
      "class, the objects where memory accumulates and the shortest path that holds each");
  jvm->add_option("-o,--output", jvm_opt.output,
                  "With --heap: the dominator tree as a flamegraph (root -> dominators -> class, width: retained bytes): " +
                      ember::flamegraph::output_extensions_text() + ". With --track: a chart (.html) or .csv");
  jvm->add_flag("--force", jvm_opt.force,
                "With --heap: dump a heap of more than " + std::to_string(ember::kHeapDumpCap >> 20) +
                    " MiB in use, or of unknown size, all the same")
      ->needs(jvm_heap);
  jvm->add_option("--alloc", jvm_opt.alloc,
                  "With --heap: a recording of `ember record -e alloc --live` of this JVM (any output format): where "
                  "the classes that retain most were allocated")
      ->needs(jvm_heap);
  jvm_heap->excludes(jvm_histo)->excludes(jvm_interval)->excludes(jvm_count);
  auto* jvm_track = jvm->add_option(
      "--track", jvm_opt.track,
      "Follow the instances and bytes of the classes matching this regex, from a class histogram every --every "
      "seconds (the JVM stops while it counts its heap)");
  jvm->add_option("--every", jvm_opt.every, "With --track: seconds between histograms")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str()
      ->needs(jvm_track);
  jvm->add_option("-d,--duration", jvm_opt.duration, "With --track: seconds to track (default: until Ctrl-C or the JVM exits)")
      ->check(CLI::Range(0.0, 1e9))
      ->needs(jvm_track);
  jvm_track->excludes(jvm_histo)->excludes(jvm_heap)->excludes(jvm_interval)->excludes(jvm_count);
  // ---- ember serve: the web UI (user/serve/serve.h) ----
  ember::ServeOptions serve_opt;
  CLI::App* serve = app.add_subcommand("serve", "Web UI and JSON API to start and stop profiles and open their results");
  serve->add_option("--listen", serve_opt.listen, "ADDRESS:PORT to listen on ([::1]:8080 for IPv6)")->capture_default_str();
  serve->add_option("--dir", serve_opt.dir, "Results directory (default: " + ember::default_results_dir() + ")");
  serve->add_option("--token-file", serve_opt.token_file,
                    "Access token file (default: .token in the results directory; created, mode 0600, if missing)");
  auto* cert = serve->add_option("--tls-cert", serve_opt.tls_cert, "Serve HTTPS with this PEM certificate");
  auto* key = serve->add_option("--tls-key", serve_opt.tls_key, "... and this PEM private key");
  cert->needs(key);
  key->needs(cert);
  // ---- end ember serve ----
  // ---- ember agent: always-on profiling into Pyroscope (user/fleet/agent.h) ----
  ember::fleet::AgentOptions agent_opt;
  CLI::App* agent = app.add_subcommand(
      "agent", "Profile the whole host without end: a profile per service every period, pushed to Grafana Pyroscope "
               "and kept in a spool");
  agent->add_option("-c,--config", agent_opt.config_file, "TOML configuration; each of its keys is also a flag below, "
                                                         "which wins over the file");
  std::map<std::string, std::vector<std::string>> agent_values;
  for (const ember::fleet::KeyInfo& k : ember::fleet::agent_keys()) {
    std::string name = k.name;
    auto* o = agent->add_option("--" + name, agent_values[name], k.help);
    if (name == "events" || name == "service_sources") o->delimiter(',');
    o->type_name("VALUE");
    if (!k.list) o->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    o->group(name.find('.') == std::string::npos ? "Keys" : "Keys: " + name.substr(0, name.find('.')));
  }

  // ---- end ember jvm (dispatch: the `if (*jvm)` line after parsing) ----

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (*record) return ember::run_record(rec);
  if (*convert) return ember::run_convert(convert_in, convert_out, convert_event, convert_spool);
  if (*report) return ember::run_report(report_in, report_rows, report_event);
  if (*symbolize) {
    if (sym.elf.empty() && !sym.pid && !sym.kernel) {
      std::fprintf(stderr, "ember symbolize: say whose addresses: --elf FILE, --pid PID or --kernel\n");
      return 2;
    }
    return ember::run_symbolize(sym);
  }
  if (*diff) return ember::run_diff(diff_base, diff_new, diff_out, diff_event);
  if (*jvm) return ember::run_jvm(jvm_opt);  // ember jvm
  if (*serve) return ember::run_serve(serve_opt);
  if (*agent) {
    for (const ember::fleet::KeyInfo& k : ember::fleet::agent_keys())
      if (agent->count(std::string("--") + k.name)) agent_opt.flags.emplace_back(k.name, agent_values[k.name]);
    return ember::fleet::run_agent(agent_opt);
  }
  return 0;
}
