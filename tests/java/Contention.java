/**
 * Monitor contention for ember's lock tests: two threads ("contender-1",
 * "contender-2") take turns on one monitor, an instance of SharedLock,
 * holding it for ~50 us of work each time (Contention.critical), so each
 * spends much of its time waiting to enter. Prints "entries N".
 * Usage: java Contention SECONDS
 */
public class Contention {
    static final class SharedLock {
        long counter;
    }

    static final SharedLock lock = new SharedLock();
    static volatile boolean stop;
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        Thread[] threads = new Thread[2];
        for (int t = 0; t < threads.length; t++) {
            threads[t] = new Thread(Contention::worker, "contender-" + (t + 1));
            threads[t].start();
        }
        Thread.sleep((long) (seconds * 1000));
        stop = true;
        for (Thread t : threads) t.join();
        System.out.println("entries " + lock.counter);
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
        synchronized (lock) {
            lock.counter++;
            return spin(x, 20_000);
        }
    }

    static long outside(long x) { return spin(x, 2_000); }

    static long spin(long x, int rounds) {
        for (int i = 0; i < rounds; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        return x;
    }
}
