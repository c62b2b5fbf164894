import java.io.InputStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;

/**
 * Loads and unloads classes in a loop, so JIT code is freed and its
 * addresses reused while ember records. Generation g is a copy of Gen whose
 * method spin0000 is renamed spin<g> in the class bytes (same length, so the
 * class file stays valid), defined by a fresh class loader, run until it is
 * compiled, then dropped and collected.
 * Usage: java Unloading SECONDS
 */
public class Unloading {
    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 5;
        byte[] template;
        try (InputStream in = Unloading.class.getResourceAsStream("Gen.class")) {
            template = in.readAllBytes();
        }
        long end = System.nanoTime() + (long) (seconds * 1e9);
        long sink = 0;
        for (int g = 0; System.nanoTime() < end; g++) {
            String name = String.format("spin%04d", g % 10000);
            byte[] bytes = rename(template, "spin0000", name);
            Class<?> gen = new ClassLoader(null) {
                Class<?> define() { return defineClass("Gen", bytes, 0, bytes.length); }
            }.define();
            Method spin = gen.getMethod(name, long.class);
            long until = System.nanoTime() + 100_000_000L;
            while (System.nanoTime() < until) sink += (Long) spin.invoke(null, 20_000L);
            if (g % 4 == 3) System.gc();
        }
        System.out.println("done " + (sink & 1));
    }

    static byte[] rename(byte[] bytes, String from, String to) {
        byte[] out = bytes.clone();
        byte[] a = from.getBytes(StandardCharsets.UTF_8), b = to.getBytes(StandardCharsets.UTF_8);
        for (int i = 0; i + a.length <= out.length; i++) {
            boolean match = true;
            for (int j = 0; j < a.length && match; j++) match = out[i + j] == a[j];
            if (match) System.arraycopy(b, 0, out, i, b.length);
        }
        return out;
    }
}
