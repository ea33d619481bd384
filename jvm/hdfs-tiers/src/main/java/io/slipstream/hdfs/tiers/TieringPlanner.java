package io.slipstream.hdfs.tiers;

import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import org.apache.hadoop.hdfs.protocol.HdfsConstants;

/**
 * The tiering service's decisions, without a cluster: given the SSD tier's space and the files seen (their
 * replica bytes per tier, storage policy and reads in the window), which files to evict from SSD and which to
 * promote to it in this batch. Policies are the service's only lever: the promotion policy (ONE_SSD or ALL_SSD,
 * {@code tiering.promotePolicy}) promotes, HOT evicts, and HDFS's StoragePolicySatisfier moves the replicas. A
 * file whose policy the service already set and whose replicas have not all moved yet is pending: its bytes count
 * as moved, so the next batch does not ask for them again. Replicas that have moved but that the storage reports
 * do not show yet ({@link UnreportedMoves}) are taken off the reported use, so a decision in that gap does not
 * evict again what has already left.
 */
final class TieringPlanner {
    static final byte UNSPECIFIED = HdfsConstants.BLOCK_STORAGE_POLICY_ID_UNSPECIFIED;
    static final byte HOT = HdfsConstants.HOT_STORAGE_POLICY_ID;
    static final byte ALL_SSD = HdfsConstants.ALLSSD_STORAGE_POLICY_ID;
    static final byte ONE_SSD = HdfsConstants.ONESSD_STORAGE_POLICY_ID;

    /**
     * One file as the service sees it: bytes of its replicas on SSD, bytes of its replicas on other movable
     * tiers (DISK, ARCHIVE: RAM replicas are HDFS's lazy persister's business and do not move), the bytes the
     * promotion policy would move onto SSD ({@code promoteBytes}: under ALL_SSD every movable replica off SSD,
     * under ONE_SSD each block with no replica on SSD or RAM, once), its own storage policy id, reads in the window, and
     * its modification time (the older, the colder among equals).
     */
    record FileTiers(String path, long ssdBytes, long offSsdBytes, long promoteBytes, byte policy, long reads,
            long modifiedMs) {
    }

    /** HDFS's name of one of the policies the service sets (HOT, ONE_SSD, ALL_SSD), as setStoragePolicy takes it. */
    static String policyName(byte policy) {
        return switch (policy) {
            case HOT -> HdfsConstants.HOT_STORAGE_POLICY_NAME;
            case ONE_SSD -> HdfsConstants.ONESSD_STORAGE_POLICY_NAME;
            case ALL_SSD -> HdfsConstants.ALLSSD_STORAGE_POLICY_NAME;
            default -> throw new IllegalArgumentException("not a policy the tiering service sets: id " + policy);
        };
    }

    /** One file to move, with the replica bytes the move concerns and the reads that decided it. */
    record Move(String path, long bytes, long reads) {
    }

    /**
     * One batch: evictions first (they make the room), then promotions; the SSD tier's use when decided (as
     * reported, and the bytes moved off and onto SSD that the report may not show yet), the use expected once
     * this batch and the pending ones have moved (the moves off SSD taken as not in the report: the figure
     * eviction works towards), and whether the next decision still evicts towards the low-water mark.
     */
    record Batch(List<Move> evictions, List<Move> promotions, long ssdUsedBytes, UnreportedMoves.Bytes unreported,
            long ssdProjectedBytes, long ssdCapacityBytes, boolean evicting) {
        boolean isEmpty() {
            return evictions.isEmpty() && promotions.isEmpty();
        }
    }

    private final long hotReads;
    private final double highWater;
    private final double lowWater;
    private final int maxFiles;
    private final long maxBytes;
    private final byte promotePolicy;

    TieringPlanner(TiersConf conf) {
        this(conf.tieringHotReads, conf.tieringSsdHighWater, conf.tieringSsdLowWater, conf.tieringBatchMaxFiles,
                conf.tieringBatchMaxBytes, conf.tieringPromotePolicy);
    }

    TieringPlanner(long hotReads, double highWater, double lowWater, int maxFiles, long maxBytes, byte promotePolicy) {
        if (promotePolicy != ONE_SSD && promotePolicy != ALL_SSD) {
            throw new IllegalArgumentException("TieringPlanner: promotion policy must be ONE_SSD or ALL_SSD, got id "
                    + promotePolicy);
        }
        this.promotePolicy = promotePolicy;
        this.hotReads = hotReads;
        this.highWater = highWater;
        this.lowWater = lowWater;
        this.maxFiles = maxFiles;
        this.maxBytes = maxBytes;
    }

    /** The batch for an SSD tier of {@code capacityBytes} with {@code usedBytes} in use, and these files. */
    Batch plan(long capacityBytes, long usedBytes, List<FileTiers> files) {
        return plan(capacityBytes, usedBytes, UnreportedMoves.Bytes.NONE, files, false);
    }

    /**
     * The batch for an SSD tier of {@code capacityBytes} with {@code usedBytes} in use as reported, the bytes
     * moved off and onto SSD per the listing that the report may not show yet ({@code unreported}), and these
     * files. {@code evicting}: the last decision's {@link Batch#evicting()}.
     *
     * <p>Each unreported move is in the reported use or not; each decision takes the reading that moves less.
     * Eviction takes every move off SSD as not reported and every move onto it as reported (the lowest use
     * possible), promotion the other way round (the highest). Eviction starts when SSD passes the high-water mark
     * and goes on, decision after decision, until the use expected is at or below the low-water mark with no
     * move off SSD waiting for its report: a move counted twice (its report came before the listing that showed
     * it) stops it one decision early, and without that condition the use would then stay between the marks,
     * where no decision evicts.
     */
    Batch plan(long capacityBytes, long usedBytes, UnreportedMoves.Bytes unreported, List<FileTiers> files,
            boolean evicting) {
        List<Move> evictions = new ArrayList<>();
        List<Move> promotions = new ArrayList<>();
        if (capacityBytes <= 0) {
            return new Batch(evictions, promotions, usedBytes, unreported, usedBytes, capacityBytes, false);
        }
        long lowest = usedBytes - unreported.offSsdBytes(); // on SSD now at the least
        long projected = lowest;
        for (FileTiers f : files) {
            if (f.policy() == HOT) {
                projected -= f.ssdBytes(); // eviction asked for, not all moved yet
            } else if (f.policy() == promotePolicy) {
                projected += f.promoteBytes(); // promotion asked for, not all moved yet
            }
        }
        long highBytes = (long) (highWater * capacityBytes);
        long lowBytes = (long) (lowWater * capacityBytes);
        long batchBytes = 0;
        boolean evictNow = lowest > highBytes || evicting;
        boolean evictNext = evictNow && !(projected <= lowBytes && unreported.offSsdBytes() == 0);
        if (evictNow) {
            List<FileTiers> cold = new ArrayList<>();
            for (FileTiers f : files) {
                if (f.ssdBytes() > 0 && f.reads() < hotReads && (f.policy() == UNSPECIFIED || f.policy() == promotePolicy)) {
                    cold.add(f);
                }
            }
            cold.sort(Comparator.comparingLong(FileTiers::reads).thenComparingLong(FileTiers::modifiedMs)
                    .thenComparing(FileTiers::path));
            for (FileTiers f : cold) {
                if (projected <= lowBytes || !fits(evictions.size(), batchBytes, f.ssdBytes())) {
                    break;
                }
                evictions.add(new Move(f.path(), f.ssdBytes(), f.reads()));
                batchBytes += f.ssdBytes();
                projected -= f.ssdBytes();
            }
        }
        List<FileTiers> hot = new ArrayList<>();
        for (FileTiers f : files) {
            if (f.reads() >= hotReads && f.promoteBytes() > 0 && (f.policy() == UNSPECIFIED || f.policy() == HOT)) {
                hot.add(f);
            }
        }
        hot.sort(Comparator.comparingLong(FileTiers::reads).reversed().thenComparing(FileTiers::path));
        // The highest use possible: the moves off SSD already in the report, the moves onto it not yet.
        long highest = projected + unreported.offSsdBytes() + unreported.onSsdBytes();
        for (FileTiers f : hot) {
            int count = evictions.size() + promotions.size();
            if (!fits(count, batchBytes, f.promoteBytes())) {
                break;
            }
            if (highest + f.promoteBytes() > highBytes) {
                continue; // a smaller hot file may still fit
            }
            promotions.add(new Move(f.path(), f.promoteBytes(), f.reads()));
            batchBytes += f.promoteBytes();
            projected += f.promoteBytes();
            highest += f.promoteBytes();
        }
        return new Batch(evictions, promotions, usedBytes, unreported, projected, capacityBytes, evictNext);
    }

    /** The batch's limits: a file more, its bytes within the byte limit (a first file may pass it alone). */
    private boolean fits(int filesSoFar, long bytesSoFar, long fileBytes) {
        return filesSoFar < maxFiles && (filesSoFar == 0 || bytesSoFar + fileBytes <= maxBytes);
    }
}
