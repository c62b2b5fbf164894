import java.io.FileOutputStream;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadMXBean;

/**
 * A Java workload with hot methods of known names for ember's tests:
 * main spends its CPU in hotA (about twice as much) and hotB, both calling
 * small methods C2 inlines (mix, fold), while a second thread writes to
 * /dev/null so kernel frames stand under a Java method. main's loop turns
 * often enough to be compiled itself (OSR) within the first second.
 * Usage: java Workload SECONDS: seconds of main's CPU time, not of the
 * clock, so a busy machine does not thin the samples of a test.
 */
public class Workload {
    static volatile long sink;
    static volatile boolean done;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        ThreadMXBean threads = ManagementFactory.getThreadMXBean();
        long end = threads.getCurrentThreadCpuTime() + (long) (seconds * 1e9);
        Thread io = new Thread(Workload::ioLoop, "io-writer");
        io.start();
        // The CPU clock is a system call: read every 16 rounds (~0.5 ms).
        for (int round = 1; (round & 15) != 0 || threads.getCurrentThreadCpuTime() < end; round++) {
            hotA();
            hotB();
        }
        done = true;
        io.join();
    }

    static void hotA() {
        long x = 0;
        for (int i = 0; i < 20_000; i++) x += mix(i);
        sink += x;
    }

    static void hotB() {
        long x = 0;
        for (int i = 0; i < 10_000; i++) x += fold(i);
        sink += x;
    }

    static int mix(int i) { return (i * 0x9E3779B9) ^ (i >>> 7); }

    static int fold(int i) { return (i * 31 + 7) ^ (i << 3); }

    static void ioLoop() {
        byte[] buffer = new byte[256 * 1024];
        try (FileOutputStream out = new FileOutputStream("/dev/null")) {
            while (!done) writeChunk(out, buffer);
        } catch (IOException e) {
            throw new RuntimeException(e);
        }
    }

    static void writeChunk(FileOutputStream out, byte[] buffer) throws IOException {
        out.write(buffer);
    }
}
