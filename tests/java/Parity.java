// A JVM as it runs traced and untraced (tests/test_parity.py): NullPointerExceptions (the JVM
// turns SIGSEGV into them in its own handler, which runs through the tracer's trampoline), a
// StackOverflowError (its guard pages and handler), a shutdown hook, file writes and reads
// from 8 threads.  java Parity FILE
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;

public class Parity {
  static int depth = 0;

  static void recurse() {
    depth++;
    recurse();
  }

  public static void main(String[] args) throws Exception {
    Runtime.getRuntime().addShutdownHook(new Thread(() -> System.out.println("hook ran")));
    int npes = 0;
    for (int i = 0; i < 1000; i++) {
      try {
        String s = (i % 2 == 0) ? null : "x";
        s.length();
      } catch (NullPointerException e) {
        npes++;
      }
    }
    System.out.println("npes " + npes);
    try {
      recurse();
    } catch (StackOverflowError e) {
      System.out.println("stack overflow caught");
    }
    try (FileOutputStream f = new FileOutputStream(args[0])) {
      for (int i = 0; i < 1000; i++) f.write(new byte[64]);
    }
    System.out.println("length " + new File(args[0]).length());
    Thread[] ts = new Thread[8];
    for (int t = 0; t < 8; t++) {
      ts[t] = new Thread(() -> {
        try (FileInputStream f = new FileInputStream(args[0])) {
          byte[] b = new byte[100];
          while (f.read(b) > 0) {}
        } catch (Exception e) {
          System.out.println(e);
        }
      });
      ts[t].start();
    }
    for (Thread t : ts) t.join();
    System.gc();
    System.out.println("done");
  }
}
