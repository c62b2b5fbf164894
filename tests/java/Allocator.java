import com.sun.management.ThreadMXBean;
import java.lang.management.ManagementFactory;

/**
 * Allocates garbage at a steady rate for `ember jvm`'s tests, and reports
 * the truth to compare with: the bytes its allocating thread allocated, as
 * HotSpot counts them (ThreadMXBean.getThreadAllocatedBytes), with the
 * monotonic time, once per REPORT_MS.
 *
 * Usage: java Allocator MB_PER_SECOND SECONDS (MB: 10^6 bytes)
 * Prints "alloc NANOS BYTES" lines (NANOS: System.nanoTime, CLOCK_MONOTONIC
 * on Linux) and flushes each.
 */
public class Allocator {
    static final int CHUNK = 1024;      // a byte[1024] is 1040 bytes with its header
    static final int KEEP = 4096;       // a few MB stay reachable: survivors, not a leak
    static final long REPORT_MS = 250;
    static final Object[] keep = new Object[KEEP];

    public static void main(String[] args) throws Exception {
        double mbPerSecond = Double.parseDouble(args[0]);
        double seconds = Double.parseDouble(args[1]);
        ThreadMXBean threads = (ThreadMXBean) ManagementFactory.getThreadMXBean();
        long self = Thread.currentThread().getId();
        long start = System.nanoTime();
        long end = start + (long) (seconds * 1e9);
        long nextReport = start;
        // Paced in slices of 1 ms: allocate what is due, then sleep.
        double bytesPerNano = mbPerSecond * 1e6 / 1e9;
        long allocated = 0;  // by this loop, in array payload bytes
        int slot = 0;
        while (true) {
            long now = System.nanoTime();
            if (now >= nextReport) {
                System.out.println("alloc " + now + " " + threads.getThreadAllocatedBytes(self));
                System.out.flush();
                nextReport += REPORT_MS * 1_000_000L;
            }
            if (now >= end) break;
            long due = (long) ((now - start) * bytesPerNano);
            while (allocated < due) {
                keep[slot] = new byte[CHUNK];
                slot = (slot + 1) % KEEP;
                allocated += CHUNK + 16;
            }
            Thread.sleep(1);
        }
    }
}
