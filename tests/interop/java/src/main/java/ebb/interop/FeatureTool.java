package ebb.interop;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;

/**
 * Several runs of Kafka's own kafka-features (org.apache.kafka.tools.FeatureCommand) in one JVM, for
 * tests/interop/test_kafka_features_tool.py: one run a line on stdin, its arguments separated by tabs;
 * for each, a line "## exit <code>" and then what the run printed (stdout and stderr, in order), then
 * "## end". The tool's entry point that returns its exit code instead of exiting is package-private,
 * hence the reflection.
 */
public final class FeatureTool {
    public static void main(String[] args) throws Exception {
        Method run = Class.forName("org.apache.kafka.tools.FeatureCommand").getDeclaredMethod("mainNoExit", String[].class);
        run.setAccessible(true);
        PrintStream out = System.out, err = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line = in.readLine(); line != null; line = in.readLine()) {
            ByteArrayOutputStream printed = new ByteArrayOutputStream();
            PrintStream capture = new PrintStream(printed, true, StandardCharsets.UTF_8);
            System.setOut(capture);
            System.setErr(capture);
            int code;
            try {
                code = (Integer) run.invoke(null, (Object) line.split("\t"));
            } finally {
                System.setOut(out);
                System.setErr(err);
            }
            out.println("## exit " + code);
            out.print(printed.toString(StandardCharsets.UTF_8));
            out.println("## end");
            out.flush();
        }
    }
}
