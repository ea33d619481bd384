package io.slipstream.shuffle;

import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * A user setting of an engine adapter, declared once: its key, its default in the form the
 * engine's configuration parses, and its one-line meaning. Each adapter lists its settings in one
 * place and reads them from there; docs/configuration.md's tables are generated from those lists
 * ({@link #markdownTable}) and the adapters' tests fail when the document and the code disagree.
 */
public record Setting(String key, String defaultValue, String meaning) {
    /**
     * A setting's text as one of an enum's constants, case-insensitive; a clear error naming the key
     * and the allowed values otherwise.
     */
    public static <E extends Enum<E>> E parseEnum(Class<E> type, String value, String key) {
        try {
            return Enum.valueOf(type, value.trim().toUpperCase(Locale.ROOT));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(key + "=" + value + ": expected one of "
                    + Arrays.toString(type.getEnumConstants()).toLowerCase(Locale.ROOT), e);
        }
    }

    /** The table docs/configuration.md shows: key, default ({@code (empty)} for none), meaning. */
    public static String markdownTable(List<Setting> settings) {
        StringBuilder out = new StringBuilder("| setting | default | meaning |\n|---|---|---|\n");
        for (Setting s : settings) {
            String value = s.defaultValue().isEmpty() ? "(empty)" : "`" + s.defaultValue() + "`";
            out.append("| `").append(s.key()).append("` | ").append(value).append(" | ")
                    .append(s.meaning().replace("|", "\\|")).append(" |\n");
        }
        return out.toString();
    }
}
