package ebb.interop;

import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;

/** One JSON object per line on stdout: what a check saw, for pytest to judge. */
final class Json {
    private Json() {}

    /** Prints {"step": step, k1: v1, ...}; values are strings, numbers, booleans, null, maps or collections. */
    static void emit(String step, Object... keysAndValues) {
        Map<String, Object> object = new LinkedHashMap<>();
        object.put("step", step);
        for (int i = 0; i < keysAndValues.length; i += 2) {
            object.put((String) keysAndValues[i], keysAndValues[i + 1]);
        }
        StringBuilder out = new StringBuilder();
        write(out, object);
        System.out.println(out);
        System.out.flush();
    }

    /** The class name of an exception's root cause and its message, as the client raised it. */
    static String error(Throwable t) {
        Throwable cause = t;
        while (cause.getCause() != null && (cause instanceof java.util.concurrent.ExecutionException
                || cause instanceof org.apache.kafka.common.KafkaException && cause.getCause() instanceof org.apache.kafka.common.KafkaException)) {
            cause = cause.getCause();
        }
        return cause.getClass().getSimpleName() + ": " + cause.getMessage();
    }

    private static void write(StringBuilder out, Object value) {
        if (value == null) {
            out.append("null");
        } else if (value instanceof Number || value instanceof Boolean) {
            out.append(value);
        } else if (value instanceof Map<?, ?> map) {
            out.append('{');
            String sep = "";
            for (Map.Entry<?, ?> e : map.entrySet()) {
                out.append(sep);
                write(out, String.valueOf(e.getKey()));
                out.append(':');
                write(out, e.getValue());
                sep = ",";
            }
            out.append('}');
        } else if (value instanceof Collection<?> list) {
            out.append('[');
            String sep = "";
            for (Object item : list) {
                out.append(sep);
                write(out, item);
                sep = ",";
            }
            out.append(']');
        } else {
            out.append('"');
            for (char c : value.toString().toCharArray()) {
                switch (c) {
                    case '"' -> out.append("\\\"");
                    case '\\' -> out.append("\\\\");
                    case '\n' -> out.append("\\n");
                    case '\r' -> out.append("\\r");
                    case '\t' -> out.append("\\t");
                    default -> {
                        if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
                        else out.append(c);
                    }
                }
            }
            out.append('"');
        }
    }
}
