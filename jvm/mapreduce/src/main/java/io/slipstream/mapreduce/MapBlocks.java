package io.slipstream.mapreduce;

import io.slipstream.shuffle.MapOutputBlock;
import java.util.Base64;
import javax.crypto.SecretKey;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.mapreduce.TaskAttemptID;
import org.apache.hadoop.mapreduce.TaskType;

/**
 * How Hadoop's map outputs are named on the fabric. A request's scope names the NodeManager (its
 * HTTP shuffle port, as in the map completion events: several NodeManagers may share one process
 * and one fabric node) and the job; a block names the map attempt and the reduce partition, and
 * whether the reducer wants the partition's bytes ({@link #DATA}) or its 24-byte index record
 * ({@link #INDEX}: start offset, raw length, part length, big-endian, as in {@code file.out.index}),
 * which gives the decompressed length the merge needs before it takes the bytes.
 */
final class MapBlocks {
    static final int DATA = 0;
    static final int INDEX = 1;
    static final int INDEX_RECORD_BYTES = 24;

    private MapBlocks() {}

    static String scope(int nodeManagerShufflePort, JobID job) {
        return nodeManagerShufflePort + "/" + job;
    }

    /** The NodeManager's shuffle port a scope names; throws IllegalArgumentException if malformed. */
    static int scopePort(String scope) {
        int slash = scope.indexOf('/');
        if (slash <= 0) {
            throw new IllegalArgumentException("malformed scope " + scope);
        }
        return Integer.parseInt(scope.substring(0, slash));
    }

    /** The job a scope names; throws IllegalArgumentException if malformed. */
    static JobID scopeJob(String scope) {
        return JobID.forName(scope.substring(scope.indexOf('/') + 1));
    }

    /**
     * The request authenticator's secret: the job's shuffle key, as text. Here, not in the
     * NodeManager's handler, because the reducer needs it too, and touching the handler's class
     * there initializes Hadoop's ShuffleHandler (Netty and all): 200 ms or more of a reducer's
     * shuffle phase in the profile of docs/mapreduce-shuffle.md.
     */
    static String secretText(SecretKey key) {
        return Base64.getEncoder().encodeToString(key.getEncoded());
    }

    static MapOutputBlock block(int kind, TaskAttemptID map, int partition) {
        return new MapOutputBlock(kind, mapId(map), partition);
    }

    /** The task number in the high half, the attempt number in the low half. */
    static long mapId(TaskAttemptID map) {
        return ((long) map.getTaskID().getId() << 32) | (map.getId() & 0xffffffffL);
    }

    /** The map attempt of {@code job} a block's map id names. */
    static TaskAttemptID mapAttempt(JobID job, long mapId) {
        int task = (int) (mapId >>> 32);
        int attempt = (int) mapId;
        if (task < 0 || attempt < 0) {
            throw new IllegalArgumentException("bad map id " + mapId);
        }
        return new TaskAttemptID(job.getJtIdentifier(), job.getId(), TaskType.MAP, task, attempt);
    }
}
