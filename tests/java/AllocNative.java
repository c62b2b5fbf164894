/**
 * Allocates byte arrays of one size at two sites, equal volumes (1:1), for
 * ember's test of native frames in allocation stacks: site A allocates
 * from Java (allocJava); site B from C code through JNI (nativeAlloc ->
 * Java_AllocNative_nativeAlloc -> make_buffers -> NewByteArray, in
 * tests/java/allocnative.c, built as build/java/liballocnative.so). Both
 * keep their arrays in rings, so neither can be optimized away.
 * Usage: java -Djava.library.path=build/java AllocNative SECONDS
 */
public class AllocNative {
    static final int SIZE = 4096;
    static final int BATCH = 256;
    static byte[][] javaRing = new byte[BATCH][];
    static byte[][] nativeRing = new byte[BATCH][];

    static native void nativeAlloc(byte[][] ring, int size);

    public static void main(String[] args) {
        System.loadLibrary("allocnative");
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long rounds = 0;
        while (System.nanoTime() < end) {
            allocJava();
            nativeAlloc(nativeRing, SIZE);
            rounds++;
        }
        System.out.println("rounds " + rounds);
    }

    static void allocJava() {
        for (int i = 0; i < BATCH; i++) javaRing[i] = new byte[SIZE];
    }
}
