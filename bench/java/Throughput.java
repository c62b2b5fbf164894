import java.util.concurrent.atomic.LongAdder;

/**
 * A CPU-bound Java service stand-in for overhead benchmarks: one thread per
 * CPU runs requests (a few nested calls of integer work, some inlined by
 * C2) for SECONDS, then it prints "requests N".
 * Usage: java Throughput SECONDS
 */
public class Throughput {
    static final LongAdder done = new LongAdder();
    static volatile boolean stop;
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 10;
        int threads = Runtime.getRuntime().availableProcessors();
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            long seed = t + 1;
            workers[t] = new Thread(() -> serve(seed), "worker-" + t);
            workers[t].start();
        }
        Thread.sleep((long) (seconds * 1000));
        stop = true;
        for (Thread w : workers) w.join();
        System.out.println("requests " + done.sum());
    }

    static void serve(long x) {
        long n = 0;
        while (!stop) {
            x = handleRequest(x);
            n++;
        }
        done.add(n);
        sink = x;
    }

    static long handleRequest(long x) { return encodeResponse(computeResponse(parseRequest(x))); }

    static long parseRequest(long x) { return mix(x, 300); }

    static long computeResponse(long x) { return mix(x, 600); }

    static long encodeResponse(long x) { return mix(x, 100); }

    static long mix(long x, int rounds) {
        for (int i = 0; i < rounds; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        return x;
    }
}
