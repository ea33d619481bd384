package io.slipstream.hdfs.tiers;

import java.util.Locale;

/** Triple-H's modes (docs/hdfs-tiers.md). */
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
    HHH_L("hhh-l"),
    /**
     * HHH-L with a burst buffer: placed as HHH-L, and the DataNode writes the parallel file system's replica into
     * slipstream-cache servers first and flushes it to the parallel file system in the background.
     */
    HHH_L_BB("hhh-l-bb");

    /** The value of {@code slipstream.hdfs.tiers.mode} that selects the mode. */
    public final String setting;

    TierMode(String setting) {
        this.setting = setting;
    }

    /** Whether one replica of each new block goes to the parallel file system (the ARCHIVE storage). */
    public boolean usesParallelFileSystem() {
        return this == HHH_L || this == HHH_L_BB;
    }

    /** The mode a setting names; a clear error for anything else. */
    public static TierMode parse(String value, String key) {
        String wanted = value == null ? "" : value.trim().toLowerCase(Locale.ROOT);
        for (TierMode mode : values()) {
            if (mode.setting.equals(wanted)) {
                return mode;
            }
        }
        throw new IllegalArgumentException(key + "=" + value + ": expected one of hhh, hhh-m, hhh-l, hhh-l-bb");
    }
}
