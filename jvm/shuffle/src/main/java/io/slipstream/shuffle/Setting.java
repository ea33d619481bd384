package io.slipstream.shuffle;

import java.util.List;

/**
 * A user setting of an engine adapter, declared once: its key, its default in the form the
 * engine's configuration parses, and its one-line meaning. Each adapter lists its settings in one
 * place and reads them from there; docs/configuration.md's tables are generated from those lists
 * ({@link #markdownTable}) and the adapters' tests fail when the document and the code disagree.
 */
public record Setting(String key, String defaultValue, String meaning) {
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
