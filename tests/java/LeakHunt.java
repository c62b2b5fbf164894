import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.HashMap;
import java.util.Map;

/**
 * A slow leak among short-lived garbage at a hundred times its rate, for
 * `ember jvm --leaks`: each turn of a 1 ms loop handles five requests, each
 * a 16 KiB buffer kept in flight for half a second (young, reachable: a
 * plain --live recording shows them first), and every twentieth turn
 * remembers a 16 KiB session buffer in a static map for good (the leak).
 * It starts once the file GO exists, stops leaking once the file STOP
 * exists and prints "stopped leaked N" (the map's entries), then goes on
 * with the requests until killed.
 * Usage: java LeakHunt GO STOP
 */
public class LeakHunt {
    static final Map<Long, byte[]> SESSIONS = new HashMap<>();
    static final ArrayDeque<byte[]> inFlight = new ArrayDeque<>();
    static final int SIZE = 16 * 1024;
    static final int IN_FLIGHT = 5 * 500;

    public static void main(String[] args) throws Exception {
        Path go = Path.of(args[0]), stop = Path.of(args[1]);
        while (!Files.exists(go)) Thread.sleep(10);
        boolean leaking = true;
        for (long turn = 0;; turn++) {
            for (int i = 0; i < 5; i++) handle(turn);
            if (leaking && turn % 20 == 0) {
                if (Files.exists(stop)) {
                    leaking = false;
                    System.out.println("stopped leaked " + SESSIONS.size());
                    System.out.flush();
                } else {
                    remember(turn);
                }
            }
            Thread.sleep(1);
        }
    }

    static void handle(long turn) {
        byte[] b = new byte[SIZE];
        b[0] = (byte) turn;
        inFlight.addLast(b);
        if (inFlight.size() > IN_FLIGHT) inFlight.removeFirst();
    }

    static void remember(long turn) {
        byte[] b = new byte[SIZE];
        b[1] = (byte) turn;
        SESSIONS.put(turn, b);
    }
}
