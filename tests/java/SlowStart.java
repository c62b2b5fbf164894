import java.nio.file.Files;
import java.nio.file.Path;

/**
 * A system class loader that holds the JVM in its start: HotSpot makes it
 * (-Djava.system.class.loader=SlowStart) before the live phase, while the
 * JVM already answers attach requests. It creates the file named by
 * -Dslowstart.held, then waits until the file -Dslowstart.go exists
 * (at most 60 s), then lets the JVM go on.
 */
public class SlowStart extends ClassLoader {
    public SlowStart(ClassLoader parent) throws Exception {
        super(parent);
        Files.createFile(Path.of(System.getProperty("slowstart.held")));
        Path go = Path.of(System.getProperty("slowstart.go"));
        for (int i = 0; i < 600 && !Files.exists(go); i++) Thread.sleep(100);
    }
}
