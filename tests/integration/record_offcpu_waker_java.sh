#!/usr/bin/env bash
# -e offcpu --waker on a JVM: a Java thread's block on a pipe names the
# Java frames of the Java thread that wrote to it, through the JVM's code
# map (record_offcpu_waker.sh: native wakers).
. "$(dirname "$0")/../lib.sh"
need_bpf
ms() { awk -v ns="$1" 'BEGIN { printf "%.1f", ns / 1e6 }'; }

command -v javac >/dev/null || fail "javac missing: scripts/deps.sh installs openjdk-17-jdk-headless"
mkdir -p "$TMP/java"
cat >"$TMP/java/WakerJ.java" <<'EOF'
import java.nio.ByteBuffer;
import java.nio.channels.Pipe;

// A thread reads a pipe in waitForX until another thread writes to it from
// wakeFromY, 20 ms later, each cycle, and prints how long it waited. Both
// run hot first, so they are mostly compiled; on a busy machine the JIT
// may lag, and interpreted frames count too. A pipe, not LockSupport.park:
// glibc's condition variables have no frame pointers. The sleeper also prints how long it waited for a
// CPU meanwhile (the kernel's run_delay): on a busy machine its clock
// counts that too.
public class WakerJ {
    static final ByteBuffer in = ByteBuffer.allocateDirect(1), out = ByteBuffer.allocateDirect(1);

    static void waitForX(Pipe.SourceChannel source) throws Exception {
        in.clear();
        source.read(in);
    }

    static void wakeFromY(Pipe.SinkChannel sink) throws Exception {
        out.clear();
        sink.write(out);
    }

    static long runDelay() throws Exception {
        String stat = new String(java.nio.file.Files.readAllBytes(java.nio.file.Paths.get("/proc/thread-self/schedstat")));
        return Long.parseLong(stat.trim().split(" ")[1]);
    }

    public static void main(String[] args) throws Exception {
        int cycles = Integer.parseInt(args[0]);
        Pipe pipe = Pipe.open();
        for (int i = 0; i < 20000; i++) {  // warm up: nothing blocks yet
            wakeFromY(pipe.sink());
            waitForX(pipe.source());
        }
        Thread sleeper = new Thread(() -> {
            try {
                long waited = 0, delay = runDelay();
                for (int i = 0; i < cycles; i++) {
                    long start = System.nanoTime();
                    waitForX(pipe.source());
                    waited += System.nanoTime() - start;
                }
                System.out.println("waited_ns " + waited);
                System.out.println("runnable_ns " + (runDelay() - delay));
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "sleeper");
        sleeper.start();
        for (int i = 0; i < cycles; i++) {
            Thread.sleep(20);
            wakeFromY(pipe.sink());
        }
        sleeper.join();
    }
}
EOF
javac -d "$TMP/java" "$TMP/java/WakerJ.java" || fail "javac failed"
"$EMBER" record -e offcpu --waker -o "$TMP/j.folded" -- java -cp "$TMP/java" WakerJ 50 >"$TMP/out" 2>"$TMP/err" ||
	fail "ember exited $?: $(cat "$TMP/err")"
java=$(weight "$TMP/j.folded" ';WakerJ.waitForX_\[[ji0]\];.*;__schedule_\[k\];--;try_to_wake_up_\[k\];.*pipe_write_\[k\];.*;WakerJ.wakeFromY_\[[ji0]\];.*\[waker: java\] [0-9]+$')
waited=$(awk '/^waited_ns/ { print $2 }' "$TMP/out")
runnable=$(awk '/^runnable_ns/ { print $2 }' "$TMP/out")
echo "Java: waitForX woken from wakeFromY: $(ms "$java") ms (the JVM measured $(ms "$waited") ms, $(ms "$runnable") ms of it waiting for a CPU)"
blocked_within "$java" "$waited" "$runnable" 10 ||
	fail "waitForX woken from wakeFromY: $(ms "$java") ms, not $(ms "$waited") ms (less up to $(ms "$runnable") ms runnable) ±10%: $(grep -E 'waitForX|wakeFromY' "$TMP/j.folded" | cut -c1-600)"
true
