# ember: the one build entry. `make` builds build/ember; `make demo`,
# `make test` and `make bench` install what is missing first.
# V=1 shows the full commands.

# `make` alone builds `all`: the rules made by $(eval) below would
# otherwise come first and be the default (an archive, not build/ember).
.DEFAULT_GOAL := all
.DELETE_ON_ERROR:
.SUFFIXES:
.SECONDARY:
# Parallel by default (reaches the sub-makes of demo, test and bench):
# the sanitizer build of the unit tests is the slow part.
MAKEFLAGS += -j$(shell nproc)

# The kernel's names of architectures: x86 (x86_64), arm64 (aarch64).
# `make ARCH=arm64` on an x86_64 host cross-builds ember and its agent into
# build/arm64, against Debian 12's arm64 libraries in a sysroot
# (scripts/sysroot.sh); the tests run in an arm64 guest (tests/kernels).
HOST_ARCH := $(patsubst x86_64,x86,$(patsubst aarch64,arm64,$(shell uname -m)))
ARCH ?= $(HOST_ARCH)
ifeq ($(wildcard vmlinux/$(ARCH)/vmlinux.h),)
$(error no vmlinux/$(ARCH)/vmlinux.h for architecture $(ARCH): generate it from a kernel of it with `bpftool btf dump file /sys/kernel/btf/vmlinux format c > vmlinux/$(ARCH)/vmlinux.h`)
endif

CLANG ?= clang
BPFTOOL ?= bpftool
ifeq ($(ARCH),$(HOST_ARCH))
BUILD := build
CXX ?= g++
CC ?= gcc
WORKLOAD_CC := $(CLANG)
else
CROSS_arm64 := aarch64-linux-gnu
CROSS := $(or $(CROSS_$(ARCH)),$(error no cross compiler known for ARCH=$(ARCH): arm64 is))
BUILD := build/$(ARCH)
SYSROOT ?= /var/cache/ember/$(ARCH)-sysroot
# Made first: every compile includes its headers.
SYSROOT_READY := $(SYSROOT)/.ember-sysroot
CXX := $(CROSS)-g++ --sysroot=$(SYSROOT)
CC := $(CROSS)-gcc --sysroot=$(SYSROOT)
AR := $(CROSS)-ar
# clang builds the workloads (see WORKLOAD_CFLAGS): for the target, with
# the sysroot's C library and the cross binutils.
WORKLOAD_CC := $(CLANG) --target=$(CROSS) --sysroot=$(SYSROOT)
endif
# Go's names of the architectures, for build/pprof; Debian's, for the package.
GOARCH_x86 := amd64
GOARCH_arm64 := arm64
DEBARCH_x86 := amd64
DEBARCH_arm64 := arm64
# ember's version (`ember --version`, the package's): the file VERSION.
VERSION := $(shell cat VERSION)

ifeq ($(V),1)
Q :=
msg :=
else
Q := @
msg = @printf '  %-8s %s\n' "$(1)" "$(2)";
endif

WARN := -Wall -Wextra
# -g1: line tables and functions, no locals: ember's stacks and sanitizer
# reports keep their file:line, and the four heaviest files (CLI11, toml++,
# httplib, json) compile in 9 s instead of 13 each (-g: gdb's locals).
CXXFLAGS ?= -O2 -g1
CXXFLAGS += -std=c++2b $(WARN) -I. -Ibpf -I$(BUILD) -MMD -MP
# The features Debian's libcpp-httplib was built with (its cpp-httplib.pc):
# the header's classes must match the library's.
CXXFLAGS += -DCPPHTTPLIB_OPENSSL_SUPPORT -DCPPHTTPLIB_ZLIB_SUPPORT -DCPPHTTPLIB_BROTLI_SUPPORT
# cpp-httplib (ember serve) is Debian's shared build, with OpenSSL for TLS.
# Every program takes these; the HTTP and TLS libraries only what serves.
LDLIBS := -lbpf -ldw -ldebuginfod -lelf -llzma -lz -pthread
HTTP_LIBS := -lcpp-httplib -lssl -lcrypto
# Debian's hardening (dpkg-buildflags' defaults) for what ships: fortified
# libc calls, stack protector, a read-only GOT. Not the sanitizer tree's:
# ASan checks those calls itself.
HARDEN := -D_FORTIFY_SOURCE=2 -fstack-protector-strong
HARDEN_LDFLAGS := -Wl,-z,relro,-z,now
BPF_CFLAGS := -g -O2 -target bpf -D__TARGET_ARCH_$(ARCH) -Ivmlinux/$(ARCH) -Ibpf $(WARN) -Wno-unused-parameter

# The libraries, one per folder, each built once as a static archive; a
# program links the archives it needs and takes from each only the objects
# it uses, in the layers of docs/architecture.md: cli -> serve -> fleet ->
# net, session -> events -> java, runtimes, host -> heap, symbolizer,
# unwind -> flamegraph.
LIBS := serve fleet net session events java runtimes host heap symbolizer unwind flamegraph
SRC_flamegraph := $(wildcard flamegraph/*.cpp)
SRC_symbolizer := $(wildcard symbolizer/*.cpp)
SRC_unwind := $(wildcard unwind/*.cpp)
SRC_session := $(wildcard user/session/*.cpp)
SRC_events := $(wildcard user/events/*.cpp)
SRC_java := $(wildcard user/java/*.cpp)
SRC_heap := $(wildcard user/heap/*.cpp)
SRC_runtimes := $(wildcard user/runtimes/*.cpp)
SRC_host := $(wildcard user/host/*.cpp)
SRC_serve := $(wildcard user/serve/*.cpp)
SRC_fleet := $(wildcard user/fleet/*.cpp)
SRC_net := $(wildcard user/net/*.cpp)
# Embedded pages, assembled once for both trees.
ASM_flamegraph := $(BUILD)/obj/flamegraph/html_template.o
ASM_serve := $(BUILD)/obj/user/serve/serve_page.o
ASM_java := $(BUILD)/obj/user/java/track_page.o
CLI_SRC := $(wildcard user/cli/*.cpp)
# The archives of tree T (obj, or san: the unit tests and build/san/ember,
# under the sanitizers), in link order.
archives = -Wl,--start-group $(LIBS:%=$(BUILD)/$(1)/lib%.a) -Wl,--end-group
define archive_rule
$(BUILD)/$(1)/lib$(2).a: $$(SRC_$(2):%.cpp=$(BUILD)/$(1)/%.o) $$(ASM_$(2))
	$$(call msg,AR,$$@)
	$$(Q)rm -f $$@ && $$(AR) rcs $$@ $$^
endef
$(foreach tree,obj san afl,$(foreach lib,$(LIBS),$(eval $(call archive_rule,$(tree),$(lib)))))
# One BPF object: the event programs and the unwinder they call, linked.
BPF_SKELS := $(BUILD)/profile.skel.h
# The parts that define the maps others declare extern (record.bpf.h,
# targets.bpf.h, unwind.bpf.h) are linked first: an extern map met before its definition
# keeps offset 0 in the linked .maps (bpftool 7.1, libbpf 1.1), and the
# skeleton fails with "map relo failed to find map".
BPF_DEFINING := $(BUILD)/record.bpf.o $(BUILD)/targets.bpf.o $(BUILD)/unwind.bpf.o
BPF_PARTS := $(BPF_DEFINING) $(filter-out $(BPF_DEFINING),$(patsubst bpf/%.bpf.c,$(BUILD)/%.bpf.o,$(wildcard bpf/*.bpf.c)))

# Unit tests and the libraries they cover, under AddressSanitizer + UBSan.
# -Wno-maybe-uninitialized: GCC 12 warns falsely inside <regex> under ASan.
# -O0 -g1 (line tables: reports keep their file:line): the sanitized tree
# was two thirds of the build at -O2 -g. Measured on the 2-core machine,
# from clean, building and then running the unit tests: 362 + 13 s at
# -O1 -g1, 218 + 29 s at -O0 -g1.
SAN := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all -Wno-maybe-uninitialized
SAN_OPT := -O0 -g1
# Catch2's main() comes built with Debian's catch2 (libCatch2WithMain.a):
# compiled here under the sanitizers it took 90 s of the CI machine.
UNIT_SRC := $(wildcard tests/unit/*.cpp)
# The agent's parts that need no JVM: its reader of HotSpot's VMStructs, its prologue decoder.
AGENT_UNIT_SRC := agent/vm_structs.cpp agent/code_heap.cpp agent/method_pointers.cpp agent/prologue.cpp agent/jitmap_writer.cpp
UNIT_OBJ := $(UNIT_SRC:%.cpp=$(BUILD)/san/%.o) $(AGENT_UNIT_SRC:%.cpp=$(BUILD)/san/%.o)

# Workloads and fixtures: frame pointers on, so user stacks unwind.
WORKLOADS := $(patsubst tests/workloads/%.c,$(BUILD)/workloads/%,$(wildcard tests/workloads/*.c))
# GCC 12 ignores -mno-omit-leaf-frame-pointer (fixed in GCC 14); clang honours it.
WORKLOAD_CFLAGS := -O1 -g -fno-omit-frame-pointer -mno-omit-leaf-frame-pointer -fno-inline -Wall -Wextra
FIXTURES := $(BUILD)/fixtures/libfixture.so $(BUILD)/fixtures/libfixture-stripped.so

# The JVMTI agent: no exceptions, no RTTI, only the Agent_* entry points
# exported, no libstdc++ at run time (it lives inside someone else's JVM).
JAVA_HOME ?= $(patsubst %/bin/javac,%,$(realpath $(shell command -v javac)))
AGENT := $(BUILD)/libember-agent.so
AGENT_CXXFLAGS := -O2 -g -fPIC -std=c++2b $(WARN) -fno-exceptions -fno-rtti -fvisibility=hidden \
	-I. -I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux

.PHONY: all deps deps-test deps-bench deps-deb deps-fuzz demo test test-build guest-build bench fuzz deb image clean
all: $(BUILD)/ember $(AGENT)

deps:
	$(Q)scripts/deps.sh build
deps-test:
	$(Q)scripts/deps.sh test
deps-bench:
	$(Q)scripts/deps.sh bench
deps-deb:
	$(Q)scripts/deps.sh deb
deps-fuzz:
	$(Q)scripts/deps.sh fuzz

$(BUILD)/%.bpf.o: bpf/%.bpf.c $(wildcard bpf/*.h) vmlinux/$(ARCH)/vmlinux.h
	$(call msg,BPF,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CLANG) $(BPF_CFLAGS) -c $< -o $@

$(BUILD)/profile.o: $(BPF_PARTS)
	$(call msg,BPFLINK,$@)
	$(Q)$(BPFTOOL) gen object $@ $^

$(BUILD)/%.skel.h: $(BUILD)/%.o
	$(call msg,SKEL,$@)
	$(Q)$(BPFTOOL) gen skeleton $< name $(subst -,_,$*)_bpf > $@

# The standard library's headers, precompiled once per tree (pch/std.h) and
# included first into every file of the libraries and the command line:
# 3.2 s -> 0.6 s of each file's compile for them alone. GCC takes the .gch
# beside the header -include names, if its flags match the file's.
STD_PCH = $(BUILD)/$(1)/pch/std.h.gch
ifdef CROSS
$(SYSROOT_READY): scripts/sysroot.sh
	$(call msg,SYSROOT,$(SYSROOT))
	$(Q)scripts/sysroot.sh $(ARCH) $(SYSROOT)
endif

$(BUILD)/obj/pch/std.h.gch: pch/std.h | $(SYSROOT_READY)
	$(call msg,PCH,$@)
	$(Q)mkdir -p $(@D)
	$(Q)cp $< $(@D)/std.h
	$(Q)$(CXX) $(CXXFLAGS) $(HARDEN) -x c++-header $< -o $@
$(BUILD)/san/pch/std.h.gch: pch/std.h
	$(call msg,PCH,$@)
	$(Q)mkdir -p $(@D)
	$(Q)cp $< $(@D)/std.h
	$(Q)$(CXX) $(CXXFLAGS) $(SAN) $(SAN_OPT) -x c++-header $< -o $@

$(BUILD)/obj/%.o: %.cpp $(call STD_PCH,obj) | $(BPF_SKELS)
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXXFLAGS) $(HARDEN) -include $(BUILD)/obj/pch/std.h -Winvalid-pch -c $< -o $@

$(BUILD)/obj/flamegraph/html_template.o: flamegraph/html_template.S flamegraph/flamegraph.html | $(SYSROOT_READY)
	$(call msg,AS,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c $< -o $@

$(BUILD)/obj/user/serve/serve_page.o: user/serve/serve_page.S user/serve/serve.html | $(SYSROOT_READY)
	$(call msg,AS,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c $< -o $@

$(BUILD)/obj/user/java/track_page.o: user/java/track_page.S user/java/track.html | $(SYSROOT_READY)
	$(call msg,AS,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) -c $< -o $@

# The version, for the one file that prints it (user/cli/main.cpp).
$(BUILD)/version.h: VERSION
	$(Q)mkdir -p $(@D)
	$(Q)echo '#define EMBER_VERSION "$(VERSION)"' >$@
$(BUILD)/obj/user/cli/main.o $(BUILD)/san/user/cli/main.o: $(BUILD)/version.h
$(BUILD)/ember: $(CLI_SRC:%.cpp=$(BUILD)/obj/%.o) $(LIBS:%=$(BUILD)/obj/lib%.a)
	$(call msg,LINK,$@)
	$(Q)$(CXX) $(CXXFLAGS) $(HARDEN_LDFLAGS) $(filter %.o,$^) $(call archives,obj) $(LDLIBS) $(HTTP_LIBS) -o $@

# ember under ASan + UBSan, from the san tree: a part of the integration
# tests runs again with it (tests/run.sh). Its JVM agent is the one beside
# build/ember (an agent lives in someone else's JVM, uninstrumented).
$(BUILD)/san/ember: $(CLI_SRC:%.cpp=$(BUILD)/san/%.o) $(LIBS:%=$(BUILD)/san/lib%.a) $(AGENT)
	$(call msg,LINK,$@)
	$(Q)$(CXX) $(CXXFLAGS) $(SAN) $(filter %.o,$^) $(call archives,san) $(LDLIBS) $(HTTP_LIBS) -o $@
	$(Q)ln -sf ../$(notdir $(AGENT)) $(@D)/$(notdir $(AGENT))

$(AGENT): $(wildcard agent/*.cpp) $(wildcard agent/*.h) | $(SYSROOT_READY)
	$(call msg,AGENT,$@)
	$(Q)test -f "$(JAVA_HOME)/include/jvmti.h" || { echo "no jvmti.h under JAVA_HOME=$(JAVA_HOME): install openjdk-17-jdk-headless (make deps)" >&2; exit 1; }
	$(Q)$(CXX) $(AGENT_CXXFLAGS) $(HARDEN) -shared -Wl,--as-needed -Wl,-z,defs $(HARDEN_LDFLAGS) $(filter %.cpp,$^) -o $@

# JNI libraries of the Java workloads (tests/java/NAME.c -> libNAME.so):
# frame pointers on, no inlining, as the workloads.
JNI_LIBS := $(patsubst tests/java/%.c,$(BUILD)/java/lib%.so,$(wildcard tests/java/*.c))
$(BUILD)/java/lib%.so: tests/java/%.c | $(SYSROOT_READY)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(WORKLOAD_CC) $(WORKLOAD_CFLAGS) -fPIC -shared -I$(JAVA_HOME)/include -I$(JAVA_HOME)/include/linux $< -o $@

# The Java workloads (tests/java, bench/java), compiled once: each test
# copies the classes (java_classes in tests/lib.sh), as a javac start takes
# tens of seconds under the kernel matrix's emulator.
JAVA_CLASSES := $(BUILD)/java/classes/.built
$(JAVA_CLASSES): $(wildcard tests/java/*.java) $(wildcard bench/java/*.java)
	$(call msg,JAVAC,$(@D))
	$(Q)rm -rf $(@D) && mkdir -p $(@D)
	$(Q)$(JAVA_HOME)/bin/javac -d $(@D) $^
	$(Q)touch $@

$(BUILD)/san/%.o: %.cpp $(call STD_PCH,san) | $(BPF_SKELS)
	$(call msg,CXX-SAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXXFLAGS) $(SAN) $(SAN_OPT) -include $(BUILD)/san/pch/std.h -Winvalid-pch -c $< -o $@

# Catch2's header, precompiled once for the tests (each includes it first):
# parsing it took ~2 s of each test file's compile. Made from a file that
# includes it, so that it stays a system header (its macros warn otherwise);
# beside it the header itself, which a test's own headers include again
# (GCC looks there, finds it included already).
CATCH_PCH := $(BUILD)/san/pch/catch2/catch.hpp.gch
$(CATCH_PCH): tests/unit/catch_pch.h /usr/include/catch2/catch.hpp
	$(call msg,PCH,$@)
	$(Q)mkdir -p $(@D)
	$(Q)ln -sf /usr/include/catch2/catch.hpp $(@D)/catch.hpp
	$(Q)$(CXX) $(CXXFLAGS) $(SAN) $(SAN_OPT) -x c++-header $< -o $@

$(BUILD)/san/tests/unit/%.o: tests/unit/%.cpp $(CATCH_PCH) | $(BPF_SKELS)
	$(call msg,CXX-SAN,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXXFLAGS) $(SAN) $(SAN_OPT) -I$(BUILD)/san/pch -Winvalid-pch -c $< -o $@

$(BUILD)/unit-tests: $(UNIT_OBJ) $(LIBS:%=$(BUILD)/san/lib%.a)
	$(call msg,LINK,$@)
	$(Q)$(CXX) $(CXXFLAGS) $(SAN) $(UNIT_OBJ) $(call archives,san) -lCatch2WithMain $(LDLIBS) $(HTTP_LIBS) -ldl -o $@

$(BUILD)/workloads/%: tests/workloads/%.c tests/workloads/elapsed.h tests/workloads/work.h | $(SYSROOT_READY)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(WORKLOAD_CC) $(WORKLOAD_CFLAGS) $< -o $@ -lpthread

# Workloads of the unwinding tests (tests/workloads/unwind/): -O2 as
# distributions build, so NOT the frame-pointer WORKLOAD_CFLAGS. unwind_mix is
# built twice, with its library, for tests/integration/unwind_native.sh to
# compare: NAME-nofp (-fomit-frame-pointer) and NAME-fp.
UNWIND_CFLAGS := -O2 -g -Wall -Wextra
UNWIND_FP_nofp := -fomit-frame-pointer
UNWIND_FP_fp := -fno-omit-frame-pointer
WORKLOADS += $(BUILD)/workloads/unwind_mix-nofp $(BUILD)/workloads/unwind_mix-fp $(BUILD)/workloads/offcpu_libc \
	$(BUILD)/workloads/late_library $(BUILD)/workloads/liblate_plugin.so \
	$(BUILD)/workloads/call_graph-nofp $(BUILD)/workloads/call_graph-fp

$(BUILD)/workloads/libunwind_mixlib-%.so: tests/workloads/unwind/mixlib.c tests/workloads/unwind/mixlib.h | $(SYSROOT_READY)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_CFLAGS) $(UNWIND_FP_$*) -fPIC -shared $< -o $@

$(BUILD)/workloads/unwind_mix-%: tests/workloads/unwind/unwind_mix.cpp tests/workloads/unwind/mixlib.h \
		$(BUILD)/workloads/libunwind_mixlib-%.so
	$(call msg,CXX,$@)
	$(Q)$(CXX) $(UNWIND_CFLAGS) $(UNWIND_FP_$*) $< -o $@ -L$(@D) -l:libunwind_mixlib-$*.so -Wl,-rpath,'$$ORIGIN' -lpthread

# bench/unwind.sh's second workload, built both ways.
$(BUILD)/workloads/call_graph-%: tests/workloads/unwind/call_graph.c | $(SYSROOT_READY)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_CFLAGS) $(UNWIND_FP_$*) $< -o $@ -lpthread

$(BUILD)/workloads/offcpu_libc: tests/workloads/unwind/offcpu_libc.c tests/workloads/elapsed.h | $(SYSROOT_READY)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_CFLAGS) -fomit-frame-pointer -Itests/workloads $< -o $@ -lpthread

$(BUILD)/workloads/late_library: tests/workloads/unwind/late_library.c | $(SYSROOT_READY)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_CFLAGS) -fomit-frame-pointer $< -o $@ -ldl

$(BUILD)/workloads/liblate_plugin.so: tests/workloads/unwind/late_plugin.c | $(SYSROOT_READY)
	$(call msg,CC,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CC) $(UNWIND_CFLAGS) -fomit-frame-pointer -fPIC -shared $< -o $@

$(BUILD)/fixtures/libfixture.so: tests/fixtures/fixture.cpp
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -O1 -g -fPIC -shared -fno-inline $< -o $@

# The real pprof tool, from Debian's Go sources (no network): the oracle for
# ember's pprof output.
$(BUILD)/pprof:
	$(call msg,GO,$@)
	$(Q)GOPATH=/usr/share/gocode GO111MODULE=off GOARCH=$(GOARCH_$(ARCH)) GOCACHE=$(abspath $(BUILD))/gocache go build -o $@ github.com/google/pprof

# Python classes of OTLP's profiles (tests/otlp: opentelemetry-proto's own
# files) and of pprof's profile.proto (Debian's pprof sources), generated by
# protoc: the tests' decoder of what ember writes as OTLP
# (tests/tools/otlp_read.py).
OTLP_PROTOS := $(shell find tests/otlp -name '*.proto')
PPROF_PROTO_DIR := /usr/share/gocode/src/github.com/google/pprof/proto
$(BUILD)/otlp_py/.done: $(OTLP_PROTOS)
	$(call msg,PROTOC,$(@D))
	$(Q)rm -rf $(@D) && mkdir -p $(@D)
	$(Q)protoc -Itests/otlp --python_out=$(@D) $(OTLP_PROTOS:tests/otlp/%=%)
	$(Q)protoc -I$(PPROF_PROTO_DIR) --python_out=$(@D) profile.proto
	$(Q)touch $@

$(BUILD)/fixtures/libfixture-stripped.so: $(BUILD)/fixtures/libfixture.so
	$(call msg,STRIP,$@)
	$(Q)strip --strip-all $< -o $@

# Symbolizer fixtures (tests/integration/symbolize_fixtures.sh): one -O2 -g
# program with inlined calls, which maps a library twice, and copies of it
# that lead to their names the other ways. Load layouts: a PIE, a non-PIE, and
# a library linked at a non-zero address (ld makes an ET_EXEC of a PIE linked
# so); then stripped with a .gnu_debuglink to .debug/, stripped with only
# MiniDebugInfo, compressed DWARF.
SYMFIX := $(BUILD)/fixtures
SYMFIX_CXXFLAGS := -O2 -g -Wall -Wextra
SYMFIX_TARGETS := $(SYMFIX)/symtarget $(SYMFIX)/symtarget-nopie
SYMFIX_LIBS := $(SYMFIX)/libsymlib.so $(SYMFIX)/libsymlib-based.so
FIXTURES += $(SYMFIX_LIBS) $(SYMFIX_TARGETS) $(SYMFIX)/symtarget-debuglink $(SYMFIX)/symtarget-mini \
	$(SYMFIX)/symtarget-zdebug

$(SYMFIX)/symtarget-nopie: SYMFIX_LAYOUT := -no-pie
$(SYMFIX)/libsymlib-based.so: SYMFIX_LAYOUT := -Wl,-Ttext-segment=0x20000000
$(SYMFIX_LIBS): tests/fixtures/symbolizer/symlib.cpp
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(SYMFIX_CXXFLAGS) $(SYMFIX_LAYOUT) -fPIC -shared $< -o $@

$(SYMFIX_TARGETS): tests/fixtures/symbolizer/target.cpp
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(SYMFIX_CXXFLAGS) $(SYMFIX_LAYOUT) $< -o $@

$(SYMFIX)/.debug/symtarget-debuglink.debug: $(SYMFIX)/symtarget
	$(call msg,OBJCOPY,$@)
	$(Q)mkdir -p $(@D)
	$(Q)objcopy --only-keep-debug $< $@

$(SYMFIX)/symtarget-debuglink: $(SYMFIX)/symtarget $(SYMFIX)/.debug/symtarget-debuglink.debug
	$(call msg,STRIP,$@)
	$(Q)strip --strip-all $< -o $@
	$(Q)objcopy --add-gnu-debuglink=$(word 2,$^) $@

$(SYMFIX)/symtarget-mini: $(SYMFIX)/symtarget tests/fixtures/symbolizer/minidebuginfo.sh
	$(call msg,MINIDBG,$@)
	$(Q)tests/fixtures/symbolizer/minidebuginfo.sh $< $@

$(SYMFIX)/symtarget-zdebug: $(SYMFIX)/symtarget
	$(call msg,OBJCOPY,$@)
	$(Q)objcopy --compress-debug-sections=zlib $< $@

# BCC's symbolizer as a command: an oracle for ember's names.
ORACLES := $(BUILD)/oracle/bcc_symbolize
$(BUILD)/oracle/bcc_symbolize: tests/oracle/bcc_symbolize.cpp
	$(call msg,CXX,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) -O1 -g -std=c++2b $(WARN) $< -lbcc -o $@

# Fuzzing every reader of outside data: replays of the kept corpus run in
# `make test`; `make fuzz` grows the corpus with AFL++ (FUZZ_SECONDS per
# target). Its gcc plugin (afl-g++-fast) refuses Debian 12's gcc build and
# clang 14 lacks C++23 <expected>, so the classic afl-g++ instrumentation
# it is. Targets: the flamegraph readers (folded, pprof, otlp), the symbolizer's
# ELF/DWARF, maps and perf-map parsers (elf, perfmap), the JVM agents'
# streams (jitmap), a JVM's attach replies and hsperfdata (attach,
# hsperf), the agent's configuration and its backend's answers
# (agent_config, backend), what clients send ember serve (serve), and the
# tables of an HTML flamegraph that `ember convert` reads back (page), and
# a JVM's heap dump (HPROF) that `ember jvm --heap` reads (heap), and a
# CPython process's code objects and line tables (python), and a node
# process's functions, strings and scripts (v8).
FUZZ_TARGETS := folded pprof otlp elf perfmap jitmap attach hsperf agent_config backend serve page heap python v8
# The replay of every corpus (make test): one binary, each harness under the
# sanitizers with its entry renamed fuzz_TARGET (a link of the san tree
# takes ~30 s: one, not one a target).
FUZZ_OBJ := $(FUZZ_TARGETS:%=$(BUILD)/san/tests/fuzz/fuzz_%.o)
$(BUILD)/san/tests/fuzz/fuzz_%.o: CXXFLAGS += -DLLVMFuzzerTestOneInput=$(basename $(notdir $@))
$(BUILD)/san/tests/fuzz/replay.o: CXXFLAGS += -DFUZZ_ALL="$(foreach t,$(FUZZ_TARGETS),TARGET($(t)))"
$(BUILD)/san/tests/fuzz/replay.o: Makefile  # the list of targets is here
$(BUILD)/fuzz/replay: $(FUZZ_OBJ) $(BUILD)/san/tests/fuzz/replay.o $(LIBS:%=$(BUILD)/san/lib%.a)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXXFLAGS) $(SAN) $(filter %.o,$^) $(call archives,san) $(LDLIBS) $(HTTP_LIBS) -o $@

# The AFL++ tree: the libraries built again by afl-g++ (only ember's code
# is instrumented: libelf and libdw steer the search through what they
# hand back, and crash it if they crash).
AFL_CXX = AFL_QUIET=1 AFL_CC_COMPILER=GCC afl-g++
$(BUILD)/afl/%.o: %.cpp | $(BPF_SKELS)
	$(call msg,AFL,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(AFL_CXX) $(CXXFLAGS) -O1 -fsanitize=address,undefined -Wno-maybe-uninitialized -c $< -o $@

$(FUZZ_TARGETS:%=$(BUILD)/fuzz/afl-%): $(BUILD)/fuzz/afl-%: tests/fuzz/fuzz_%.cpp tests/fuzz/replay.cpp \
		$(LIBS:%=$(BUILD)/afl/lib%.a)
	$(call msg,AFL,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(AFL_CXX) $(CXXFLAGS) -O1 -fsanitize=address,undefined $(filter %.cpp,$^) $(call archives,afl) \
		$(LDLIBS) $(HTTP_LIBS) -o $@

FUZZ_SECONDS ?= 60
# Kept: the finds that reached new edges (AFL's "+cov"), named by their
# content (afl-SHA1), not the seeds it queued again. ELF inputs are ~10 KB
# each and AFL queues hundreds: their finds stay in build/fuzz/out-elf, to
# pick a few by hand (afl-cmin, then those that add the most edges), so the
# kept corpus stays small.
FUZZ_PICK_BY_HAND := elf
fuzz: deps-fuzz
	$(Q)$(MAKE) --no-print-directory $(FUZZ_TARGETS:%=$(BUILD)/fuzz/afl-%)
	$(Q)for t in $(FUZZ_TARGETS); do \
		AFL_AUTORESUME=1 AFL_SKIP_CPUFREQ=1 AFL_I_DONT_CARE_ABOUT_MISSING_CRASHES=1 AFL_NO_UI=1 \
		timeout -s INT $(FUZZ_SECONDS) afl-fuzz -m none -i tests/fuzz/corpus/$$t -o $(BUILD)/fuzz/out-$$t -- $(BUILD)/fuzz/afl-$$t @@; \
		case " $(FUZZ_PICK_BY_HAND) " in \
		*" $$t "*) echo "fuzz: $$t finds are in $(BUILD)/fuzz/out-$$t/default/queue";; \
		*) for f in $(BUILD)/fuzz/out-$$t/default/queue/id:*+cov; do \
			[ -e "$$f" ] && cp -n "$$f" tests/fuzz/corpus/$$t/afl-$$(sha1sum <"$$f" | cut -c1-12); \
		done;; \
		esac; \
		ls $(BUILD)/fuzz/out-$$t/default/crashes/id:* 2>/dev/null && { echo "fuzz: crashes in $$t"; exit 1; }; \
	done; true

demo: deps
	$(Q)$(MAKE) --no-print-directory $(BUILD)/ember $(AGENT) $(WORKLOADS)
	$(Q)scripts/demo.sh

# The Debian package build/ember_VERSION_ARCH.deb (scripts/deb.sh): the
# binary, its Java agent, man pages, the agent's systemd unit and
# configuration; `make ARCH=arm64 deb` for arm64.
DEB := $(BUILD)/ember_$(VERSION)_$(DEBARCH_$(ARCH)).deb
deb: deps-deb
	$(Q)$(MAKE) --no-print-directory $(DEB)
$(DEB): $(BUILD)/ember $(AGENT) $(wildcard man/*.1) $(wildcard docs/*.md) README.md deploy/agent.toml \
		deploy/systemd/ember-agent.service scripts/deb.sh VERSION
	$(call msg,DEB,$@)
	$(Q)scripts/deb.sh $(BUILD) $(DEBARCH_$(ARCH)) $(VERSION) $(if $(SYSROOT_READY),$(SYSROOT))

# The fleet agent's OCI image build/ember-agent_VERSION_ARCH.oci.tar
# (scripts/image.sh): Debian 12's minimal root with the package, by
# mmdebstrap and umoci, nothing from a container registry.
IMAGE := $(BUILD)/ember-agent_$(VERSION)_$(DEBARCH_$(ARCH)).oci.tar
image: deps-deb
	$(Q)$(MAKE) --no-print-directory $(IMAGE)
$(IMAGE): $(DEB) scripts/image.sh
	$(call msg,IMAGE,$@)
	$(Q)scripts/image.sh $(BUILD) $(DEBARCH_$(ARCH)) $(VERSION) $(DEB)

# Programs of the tests and benchmarks, each its object and the archives:
# java_events_dump (tests/integration/java_alloc_lock.sh: a JVM's Java events
# as folded stacks, no recording), unwind_churn (tests/integration/
# unwind_churn.sh: the unwinder through thousands of short-lived processes,
# with the kernel's maps but no programs), python_stacks (tests/integration/
# python_layout.sh: Python call chains read by ember's layouts), symbolize_bench (bench/symbolize.sh's
# in-process half).
$(BUILD)/tools/%: $(BUILD)/obj/tests/tools/%.o $(LIBS:%=$(BUILD)/obj/lib%.a)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXXFLAGS) $< $(call archives,obj) $(LDLIBS) -o $@

$(BUILD)/bench/%: $(BUILD)/obj/bench/%.o $(LIBS:%=$(BUILD)/obj/lib%.a)
	$(call msg,LINK,$@)
	$(Q)mkdir -p $(@D)
	$(Q)$(CXX) $(CXXFLAGS) $< $(call archives,obj) $(LDLIBS) -o $@

# Everything the tests run, built without running them: for
# tests/run.sh GROUP while working on a part.
# On x86_64 also the arm64 build of what the kernel matrix's arm64 guest
# runs (guest-build), into build/arm64.
test-build:
	$(Q)$(MAKE) --no-print-directory $(BUILD)/ember $(BUILD)/san/ember $(AGENT) $(BUILD)/unit-tests $(WORKLOADS) $(JNI_LIBS) $(JAVA_CLASSES) $(FIXTURES) $(ORACLES) $(BUILD)/pprof $(BUILD)/otlp_py/.done $(DEB) $(IMAGE) \
		$(BUILD)/fuzz/replay $(BUILD)/tools/java_events_dump $(BUILD)/tools/unwind_churn $(BUILD)/tools/python_stacks
ifeq ($(ARCH)-$(HOST_ARCH),x86-x86)
	$(Q)$(MAKE) --no-print-directory ARCH=arm64 guest-build
endif

# What the integration tests of kind structural run (the kernel matrix's
# guests; `make ARCH=arm64 guest-build` for the arm64 one, whose guest sees
# build/arm64 as build).
guest-build:
	$(Q)$(MAKE) --no-print-directory $(BUILD)/ember $(AGENT) $(WORKLOADS) $(JNI_LIBS) $(JAVA_CLASSES) $(BUILD)/pprof

test: deps-test
	$(Q)$(MAKE) --no-print-directory test-build
	$(Q)tests/run.sh

bench: deps-bench
	$(Q)$(MAKE) --no-print-directory $(BUILD)/ember $(AGENT) $(WORKLOADS) $(BUILD)/bench/symbolize_bench
	$(Q)bench/record.sh
	$(Q)bench/java.sh
	$(Q)bench/java_alloc.sh
	$(Q)bench/heap.sh
	$(Q)bench/viewer.sh
	$(Q)bench/events.sh
	$(Q)bench/unwind.sh
	$(Q)bench/cgroup.sh
	$(Q)bench/symbolize.sh
	$(Q)bench/soak.sh agent
	$(Q)bench/agent_capabilities.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
