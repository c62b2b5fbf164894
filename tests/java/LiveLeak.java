import java.util.ArrayList;

/**
 * A leak for ember's `live` allocation tests: every round allocates a
 * Dropped (kept only in a small ring, so it dies young) and every fourth
 * round a Kept, which goes into a static list that only grows — until
 * MAX_KEPT (about 100 MB of them), after which only Dropped come. At the
 * end the Kept are still reachable (static) and no Dropped is (the ring is
 * a local of a method that has returned). Both are 48 bytes (int + 4 longs
 * with compressed class pointers). It prints "rounds N kept M" then, with
 * LINGER, idles that many seconds before exiting — time for a test to end
 * the agent's stream (its final GC) while the state is held.
 * Usage: java LiveLeak SECONDS [LINGER [ROUNDS]]: churns for SECONDS, and on
 * until ROUNDS rounds (a starved JVM does a hundredth of its usual work).
 */
public class LiveLeak {
    static final class Kept {
        int tag;
        long k0, k1, k2, k3;
    }

    static final class Dropped {
        int tag;
        long d0, d1, d2, d3;
    }

    static final int MAX_KEPT = 2_000_000;
    static final ArrayList<Kept> kept = new ArrayList<>();

    public static void main(String[] args) throws InterruptedException {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        double linger = args.length > 1 ? Double.parseDouble(args[1]) : 0;
        long least = args.length > 2 ? Long.parseLong(args[2]) : 0;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long rounds = churn(end, least);
        System.out.println("rounds " + rounds + " kept " + kept.size());
        System.out.flush();
        Thread.sleep((long) (linger * 1000));
    }

    static long churn(long end, long least) {
        Dropped[] ring = new Dropped[1024];
        long rounds = 0;
        while (System.nanoTime() < end || rounds < least) {
            for (int i = 0; i < 1024; i++) {
                ring[i] = drop(i);
                if ((i & 3) == 0 && kept.size() < MAX_KEPT) keep(i);
            }
            rounds += 1024;
        }
        return rounds;
    }

    static Dropped drop(int i) {
        Dropped d = new Dropped();
        d.tag = i;
        return d;
    }

    static void keep(int i) {
        Kept k = new Kept();
        k.tag = i;
        kept.add(k);
    }
}
