import java.util.ArrayList;
import java.util.List;

/**
 * A leak for `ember jvm --histo --diff`: a static list that only grows,
 * by PER_SECOND instances of LeakyThing a second (32 bytes each with
 * compressed class pointers), while nothing else keeps growing.
 *
 * Usage: java Leaky PER_SECOND SECONDS
 */
public class Leaky {
    static final List<LeakyThing> leaked = new ArrayList<>();

    static final class LeakyThing {
        final long id, born;
        LeakyThing(long id) { this.id = id; this.born = System.nanoTime(); }
    }

    public static void main(String[] args) throws Exception {
        int perSecond = Integer.parseInt(args[0]);
        long end = System.nanoTime() + (long) (Double.parseDouble(args[1]) * 1e9);
        long id = 0;
        while (System.nanoTime() < end) {
            for (int i = 0; i < perSecond / 100; i++) leaked.add(new LeakyThing(id++));
            Thread.sleep(10);
        }
    }
}
