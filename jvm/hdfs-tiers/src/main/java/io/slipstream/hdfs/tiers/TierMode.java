package io.slipstream.hdfs.tiers;

import java.util.Locale;

/**
 * Triple-H's modes (docs/hdfs-tiers.md). Only HHH and HHH-M are built; the Lustre modes are named so that
 * asking for one gives a clear "not built yet" error instead of silently running another mode.
 */
public enum TierMode {
    /** RAM disk + SSD + HDD: the first replica of a new block in RAM, persisted in the background; the others on SSD/HDD. */
    HHH("hhh"),
    /** As HHH, and files marked short-lived (storage policy LAZY_PERSIST) keep every replica in RAM within a budget. */
    HHH_M("hhh-m");

    /** The value of {@code slipstream.hdfs.tiers.mode} that selects the mode. */
    public final String setting;

    TierMode(String setting) {
        this.setting = setting;
    }

    /** The mode a setting names; a clear error for the modes not built yet and for anything else. */
    public static TierMode parse(String value, String key) {
        String wanted = value == null ? "" : value.trim().toLowerCase(Locale.ROOT);
        for (TierMode mode : values()) {
            if (mode.setting.equals(wanted)) {
                return mode;
            }
        }
        if (wanted.equals("hhh-l") || wanted.equals("hhh-l-bb")) {
            throw new IllegalArgumentException(key + "=" + value + ": Triple-H mode " + wanted
                    + " (Lustre-integrated) is not built yet; the modes built are hhh and hhh-m (docs/hdfs-tiers.md)");
        }
        throw new IllegalArgumentException(key + "=" + value + ": expected one of hhh, hhh-m");
    }
}
