package ebb.interop;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.concurrent.CompletableFuture;

import org.apache.kafka.common.utils.Exit;

/**
 * Kafka's command-line tools run one after another in this one JVM, so that a test module pays the
 * JVM's start and the tools' class loading once instead of once per call (tests/interop/conftest.py).
 *
 * <p>Each call on stdin: a line with the number of words, then one word per line (the tool's main
 * class, then its arguments). Each answer on stdout: one JSON line {"step": "tool", "code", "out", "err"}
 * with the exit code and what the tool printed. A tool runs on its own thread named "main" with
 * System.out/err and Scala's Console (kafka.admin.ConfigCommand prints through it) sent to buffers.
 * Kafka's tools end through {@link Exit}: its procedure here takes the code and shuts the buffers, so
 * that, as with a real exit, nothing the tool prints after it counts; it then unwinds the tool's thread
 * with an error, so that the tool's finally blocks close its clients (a real exit would end them with
 * the JVM), and the next call starts once that thread has ended. A main that returns is code 0; one
 * that throws prints as the JVM does and is code 1.
 */
public final class ToolRunner {
    private ToolRunner() {}

    private static final long UNWIND_MS = 60_000;

    /** Thrown by the exit procedure through the tool's frames. */
    private static final class Exited extends Error {
        Exited() {
            super("Exit.exit", null, false, false);
        }
    }

    /** A buffer that takes nothing once shut. */
    private static final class Capture extends OutputStream {
        final ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        volatile boolean shut;

        @Override
        public synchronized void write(int b) {
            if (!shut) bytes.write(b);
        }

        @Override
        public synchronized void write(byte[] b, int off, int len) {
            if (!shut) bytes.write(b, off, len);
        }

        synchronized String text() {
            return bytes.toString(StandardCharsets.UTF_8);
        }
    }

    public static void main(String[] args) throws Exception {
        PrintStream stdout = System.out;
        PrintStream stderr = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String count; (count = in.readLine()) != null; ) {
            String[] words = new String[Integer.parseInt(count.trim())];
            for (int i = 0; i < words.length; i++) {
                words[i] = in.readLine();
            }
            Capture out = new Capture();
            Capture err = new Capture();
            PrintStream toolOut = new PrintStream(out, true, StandardCharsets.UTF_8);
            PrintStream toolErr = new PrintStream(err, true, StandardCharsets.UTF_8);
            CompletableFuture<Integer> ended = new CompletableFuture<>();
            Exit.Procedure exit = (code, message) -> {
                toolOut.flush();
                toolErr.flush();
                out.shut = err.shut = true;
                ended.complete(code);
                throw new Exited();
            };
            Exit.setExitProcedure(exit);
            Exit.setHaltProcedure(exit);
            System.setOut(toolOut);
            System.setErr(toolErr);
            Thread tool = new Thread(() -> {
                Throwable thrown = scala.Console$.MODULE$.withOut(toolOut, () ->
                    scala.Console$.MODULE$.withErr(toolErr, () -> invoke(words)));
                if (thrown != null && !(thrown instanceof Exited)) {
                    toolErr.print("Exception in thread \"main\" ");
                    thrown.printStackTrace(toolErr);
                }
                ended.complete(thrown == null ? 0 : 1);  // no effect after an exit: its code came first
            }, "main");
            tool.setDaemon(true);
            tool.start();
            int code = ended.get();
            tool.join(UNWIND_MS);
            System.setOut(stdout);
            System.setErr(stderr);
            toolOut.flush();
            toolErr.flush();
            Json.emit("tool", "code", code, "out", out.text(), "err", err.text());
        }
    }

    /** Runs the main of words[0] with the rest as its arguments; what it threw (unwrapped), or null. */
    private static Throwable invoke(String[] words) {
        try {
            Method main = Class.forName(words[0]).getMethod("main", String[].class);
            main.invoke(null, (Object) Arrays.copyOfRange(words, 1, words.length));
            return null;
        } catch (InvocationTargetException e) {
            return e.getCause();
        } catch (Throwable t) {
            return t;
        }
    }
}
