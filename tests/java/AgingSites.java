import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Map;

/**
 * A slow leak among requests thirty times as busy, for `ember record -e alloc
 * --live --min-age`: each turn of a 1 ms loop makes three 16 KiB buffers for
 * requests in flight (request), every tenth turn also keeps one in a static
 * map for good (leak), and the requests in flight are dropped every
 * CLEAR_MS milliseconds, then collected (System.gc(): a busy service's own
 * old-generation cycles, which the buffers held for seconds would wait
 * for). Both stay reachable until dropped: a full GC at the end does not
 * tell them apart, their age does. The leak pauses from 0.2 s
 * before the moment MIN_AGE_S before the end to 0.8 s after it, so that a
 * profiler stopped up to 0.8 s after "done" counts the same old buffers.
 * It starts once the file GO exists (a profiler attached), runs SECONDS,
 * prints "done leak_old N in_flight M" (buffers of the leak at least
 * MIN_AGE_S old; buffers in flight), then idles until killed, holding them.
 * Usage: java AgingSites GO SECONDS MIN_AGE_S CLEAR_MS
 */
public class AgingSites {
    static final Map<Integer, byte[]> LEAKED = new HashMap<>();
    static final ArrayList<byte[]> inFlight = new ArrayList<>();
    static final int SIZE = 16 * 1024;

    public static void main(String[] args) throws Exception {
        Path go = Path.of(args[0]);
        double seconds = Double.parseDouble(args[1]);
        double minAge = Double.parseDouble(args[2]);
        double clear = Double.parseDouble(args[3]) / 1000;
        while (!Files.exists(go)) Thread.sleep(10);
        long start = System.nanoTime();
        ArrayList<Double> leakedAt = new ArrayList<>();
        double lastClear = 0;
        for (int turn = 0;; turn++) {
            double t = (System.nanoTime() - start) / 1e9;
            if (t >= seconds) break;
            for (int i = 0; i < 3; i++) inFlight.add(request(turn));
            if (turn % 10 == 0 && !(t > seconds - minAge - 0.2 && t < seconds - minAge + 0.8)) {
                leak(turn);
                leakedAt.add(t);
            }
            if (t - lastClear >= clear) {
                inFlight.clear();
                System.gc();
                lastClear = t;
            }
            Thread.sleep(1);
        }
        double end = (System.nanoTime() - start) / 1e9;
        long old = leakedAt.stream().filter(at -> end - at >= minAge).count();
        System.out.println("done leak_old " + old + " in_flight " + inFlight.size());
        System.out.flush();
        Thread.sleep(600_000);
    }

    static byte[] request(int turn) {
        byte[] b = new byte[SIZE];
        b[0] = (byte) turn;
        return b;
    }

    static void leak(int turn) {
        byte[] b = new byte[SIZE];
        b[0] = (byte) turn;
        LEAKED.put(turn, b);
    }
}
