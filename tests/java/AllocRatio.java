/**
 * Allocates two classes of known sizes at a 3:1 byte ratio, steadily, for
 * ember's allocation-profiling tests: per round one Big (int + 10 longs:
 * 96 bytes with compressed class pointers) and one Small (int + 2 longs:
 * 32 bytes), equal counts, so bytes are 3:1 while counts are 1:1 — a
 * profile that weighed samples by count would show 1:1. Both escape into
 * rings so C2 cannot scalar-replace them. The sizes the JVM reports are in
 * the agent's A lines; the test checks them.
 * Usage: java AllocRatio SECONDS [WORK [ROUNDS]]: for SECONDS, and on until
 * ROUNDS of each were allocated (a starved JVM, still interpreting, does a
 * hundredth of its usual work in that time); WORK: a spin after each.
 */
public class AllocRatio {
    static final class Big {
        int tag;
        long a0, a1, a2, a3, a4, a5, a6, a7, a8, a9;
    }

    static final class Small {
        int tag;
        long b0, b1;
    }

    static Big[] bigs = new Big[4096];
    static Small[] smalls = new Small[4096];
    static int work;
    static volatile long sink;

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        work = args.length > 1 ? Integer.parseInt(args[1]) : 0;
        long least = args.length > 2 ? Long.parseLong(args[2]) : 0;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long rounds = 0;
        while (System.nanoTime() < end || rounds < least) {
            for (int i = 0; i < 4096; i++) {
                allocBig(i);
                allocSmall(i);
            }
            rounds += 4096;
        }
        System.out.println("rounds " + rounds);
    }

    static void allocBig(int i) {
        Big b = new Big();
        b.tag = i;
        bigs[i] = b;
        if (work > 0) spin(i);
    }

    static void allocSmall(int i) {
        Small s = new Small();
        s.tag = i;
        smalls[i] = s;
        if (work > 0) spin(i);
    }

    static void spin(long x) {
        for (int i = 0; i < work; i++) x = x * 6364136223846793005L + 1442695040888963407L;
        sink = x;
    }
}
