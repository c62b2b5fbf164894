/**
 * Allocates arrays too large for a thread-local allocation buffer: once
 * allocate() is compiled by C2, each one leaves the compiled code through
 * C2's runtime stub for arrays (_new_array_Java; "C2 Runtime new_array" on
 * JDK 25) into the JVM, which zeroes it there. For ember's tests of stacks
 * through that stub, which saves rbp (x29) without pointing it at its frame.
 * Usage: java LargeArrays SECONDS
 */
public class LargeArrays {
    static volatile Object sink;

    public static void main(String[] args) {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) allocate(1000);
    }

    static void allocate(int count) {
        for (int i = 0; i < count; i++) sink = new long[64 * 1024];
    }
}
