/**
 * Calls so short that a sample of them often lands where a compiled
 * method's frame is half built or half torn down (its prologue and
 * epilogue), for ember's tests of those windows: leaf() builds a frame
 * without a stack bang, middle() one with it (it calls), both kept out of
 * line with -XX:CompileCommand=dontinline,Prologues::*.
 * Usage: java -XX:CompileCommand=dontinline,Prologues::* Prologues SECONDS
 */
public class Prologues {
    static volatile long sink;

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) sink += loop();
    }

    static long loop() {
        long x = 0;
        for (int i = 0; i < 100_000; i++) x += middle(i);
        return x;
    }

    static long middle(int i) { return leaf(i) ^ i; }

    static long leaf(int i) { return i * 0x9E3779B9L; }
}
