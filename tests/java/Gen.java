/** The template Unloading copies under a new method name per generation. */
public class Gen {
    public static long spin0000(long n) {
        long x = 0;
        for (long i = 0; i < n; i++) x += (i * 31) ^ x;
        return x;
    }
}
