package io.slipstream.ohb.spark;

/** A JSON object written field by field: enough for one result line (no dependency beyond the JDK). */
final class Json {
    private final StringBuilder out = new StringBuilder("{");
    private boolean first = true;

    private StringBuilder key(String name) {
        if (!first) {
            out.append(',');
        }
        first = false;
        quote(out, name);
        return out.append(':');
    }

    Json field(String name, long value) {
        key(name).append(value);
        return this;
    }

    Json field(String name, boolean value) {
        key(name).append(value);
        return this;
    }

    /** A string, or null. */
    Json field(String name, String value) {
        if (value == null) {
            key(name).append("null");
        } else {
            quote(key(name), value);
        }
        return this;
    }

    /** An already-written JSON value (an object or an array of them). */
    Json raw(String name, String json) {
        key(name).append(json);
        return this;
    }

    @Override
    public String toString() {
        return out + "}";
    }

    static void quote(StringBuilder out, String text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                default -> {
                    if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
