import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A leak for `ember jvm --heap`: a static cache (HeapLeak$Cache.ENTRIES, a
 * HashMap of ArrayLists of Payloads, each holding a byte[]) that keeps
 * ENTRIES x PER_ENTRY payloads of PAYLOAD bytes; besides it, unrelated
 * live data (a list of small strings), garbage made all the time, and a
 * thread "holder" whose stack keeps an int[] of HELD ints. It prints
 * "cache ENTRIES PAYLOADS BYTES" (the payloads' byte[] lengths summed) and
 * "held HELD" once all is in place, then runs for SECONDS. With DELAY, it
 * waits that many seconds before it fills the cache (for a recording of its
 * allocations to see them).
 * Usage: java HeapLeak ENTRIES PER_ENTRY PAYLOAD SECONDS [DELAY]
 */
public class HeapLeak {
    static final class Payload {
        final long id;
        final byte[] data;

        Payload(long id, int size) {
            this.id = id;
            this.data = new byte[size];
            this.data[0] = (byte) id;
        }
    }

    static final class Cache {
        static final Map<String, List<Payload>> ENTRIES = new HashMap<>();
    }

    static final int HELD = 250_000;
    static final List<String> NOISE = new ArrayList<>();
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        int entries = Integer.parseInt(args[0]), perEntry = Integer.parseInt(args[1]);
        int payload = Integer.parseInt(args[2]);
        double seconds = Double.parseDouble(args[3]);
        if (args.length > 4) Thread.sleep((long) (Double.parseDouble(args[4]) * 1000));
        long bytes = 0, id = 0;
        for (int e = 0; e < entries; e++) {
            List<Payload> list = new ArrayList<>();
            for (int p = 0; p < perEntry; p++) {
                list.add(new Payload(id++, payload));
                bytes += payload;
            }
            Cache.ENTRIES.put("entry-" + e, list);
        }
        for (int i = 0; i < 20_000; i++) NOISE.add("noise " + i);
        Thread holder = new Thread(HeapLeak::hold, "holder");
        holder.setDaemon(true);
        holder.start();
        System.out.println("cache " + entries + " " + id + " " + bytes);
        System.out.println("held " + HELD);
        System.out.flush();
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (System.nanoTime() < end) churn();
    }

    // Garbage: short-lived objects, dead by the next young GC.
    static void churn() {
        long sum = 0;
        for (int i = 0; i < 1000; i++) sum += new StringBuilder("x").append(i).toString().length();
        sink = sum;
    }

    static void hold() {
        int[] held = new int[HELD];
        held[0] = 1;
        while (true) {
            try {
                Thread.sleep(60_000);
            } catch (InterruptedException e) {
                return;
            }
            sink = held[0];
        }
    }
}
