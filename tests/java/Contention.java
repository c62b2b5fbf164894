/**
 * Monitor contention for ember's lock tests: two threads ("contender-1",
 * "contender-2") take turns on one monitor, an instance of SharedLock,
 * holding it for INSIDE rounds of work (default 20000, ~20 us) and doing
 * OUTSIDE rounds (default 2000) between (Contention.critical), so each
 * spends much of its time waiting to enter. Prints "entries N". Small
 * INSIDE and OUTSIDE, and more THREADS (default 2, named contender-N),
 * make many short waits: the worst case for lock events. HOLD_MS: each
 * also sleeps that long holding the monitor, so the others wait however
 * busy the machine is. Prints "waited_ns N", the time the threads took to
 * enter the monitor, as measured around it.
 * Usage: java Contention SECONDS [INSIDE [OUTSIDE [THREADS [HOLD_MS]]]]
 */
public class Contention {
    static final class SharedLock {
        long counter;
    }

    static final SharedLock lock = new SharedLock();
    static volatile boolean stop;
    static volatile long sink;
    static int inside = 20_000, outside = 2_000;
    static long holdMs;
    static long waitedNs;  // under the lock

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        if (args.length > 1) inside = Integer.parseInt(args[1]);
        if (args.length > 2) outside = Integer.parseInt(args[2]);
        Thread[] threads = new Thread[args.length > 3 ? Integer.parseInt(args[3]) : 2];
        if (args.length > 4) holdMs = Long.parseLong(args[4]);
        for (int t = 0; t < threads.length; t++) {
            threads[t] = new Thread(Contention::worker, "contender-" + (t + 1));
            threads[t].start();
        }
        Thread.sleep((long) (seconds * 1000));
        stop = true;
        for (Thread t : threads) t.join();
        System.out.println("entries " + lock.counter);
        System.out.println("waited_ns " + waitedNs);
    }

    static void worker() {
        long x = 1;
        while (!stop) {
            x = critical(x);
            x = outside(x);
        }
        sink = x;
    }

    static long critical(long x) {
        long start = System.nanoTime();
        synchronized (lock) {
            waitedNs += System.nanoTime() - start;
            lock.counter++;
            if (holdMs > 0) {
                try {
                    Thread.sleep(holdMs);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return spin(x, inside);
        }
    }

    static long outside(long x) { return spin(x, outside); }

    static long spin(long x, int rounds) {
        for (int i = 0; i < rounds; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        return x;
    }
}
