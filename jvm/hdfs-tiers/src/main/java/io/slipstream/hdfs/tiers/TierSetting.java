package io.slipstream.hdfs.tiers;

import java.util.List;

/**
 * One user setting of the tiers module: key, default as Hadoop's Configuration parses it, one-line meaning.
 * The module's own copy of jvm/shuffle's Setting record: depending on jvm/shuffle would bring the fabric,
 * which tiering (storage, not transport) does not use.
 */
record TierSetting(String key, String defaultValue, String meaning) {
    /** The table docs/configuration.md shows: key, default ({@code (empty)} for none), meaning. */
    static String markdownTable(List<TierSetting> settings) {
        StringBuilder out = new StringBuilder("| setting | default | meaning |\n|---|---|---|\n");
        for (TierSetting s : settings) {
            String value = s.defaultValue().isEmpty() ? "(empty)" : "`" + s.defaultValue() + "`";
            out.append("| `").append(s.key()).append("` | ").append(value).append(" | ")
                    .append(s.meaning().replace("|", "\\|")).append(" |\n");
        }
        return out.toString();
    }
}
