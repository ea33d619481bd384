package io.slipstream.hdfs.tiers;

import java.util.Locale;

/**
 * Triple-H's modes (docs/hdfs-tiers.md). HHH, HHH-M and HHH-L are built; HHH-L-BB is named so that asking
 * for it gives a clear "not built yet" error instead of silently running another mode.
 */
public enum TierMode {
    /** RAM disk + SSD + HDD: the first replica of a new block in RAM, persisted in the background; the others on SSD/HDD. */
    HHH("hhh"),
    /** As HHH, and files marked short-lived (storage policy LAZY_PERSIST) keep every replica in RAM within a budget. */
    HHH_M("hhh-m"),
    /**
     * Parallel file system: one replica of each new block on the DataNodes' ARCHIVE storage, which stands for
     * a directory on a parallel file system (Lustre, GPFS, BeeGFS) mounted on every DataNode; the others local,
     * placed as HHH places them.
     */
    HHH_L("hhh-l");

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
        if (wanted.equals("hhh-l-bb")) {
            throw new IllegalArgumentException(key + "=" + value + ": Triple-H mode " + wanted
                    + " (burst buffer in front of the parallel file system) is not built yet; the modes built are "
                    + "hhh, hhh-m and hhh-l (docs/hdfs-tiers.md)");
        }
        throw new IllegalArgumentException(key + "=" + value + ": expected one of hhh, hhh-m, hhh-l");
    }
}
