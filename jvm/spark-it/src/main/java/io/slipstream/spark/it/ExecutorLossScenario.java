package io.slipstream.spark.it;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.channels.FileLock;
import java.nio.channels.OverlappingFileLockException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Collections;
import java.util.Iterator;
import org.apache.spark.HashPartitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * An executor dies in the middle of a reduce stage, and the other executor's reducers then fetch from it: the
 * shuffle must report that as a fetch failure naming the dead executor, so that Spark recomputes its map outputs
 * and the job completes with the right result.
 *
 * <p>Making the survivor really fetch from the dead executor takes care: when Spark learns of the loss it drops the
 * dead executor's map outputs at once, and a reducer that asks for the map statuses afterwards fails before any
 * fetch. So a first job reads the whole shuffle (every executor now caches its map statuses), and a second job
 * reads it again with a gate in front of each reducer: the task of partition 0 halts its executor, the others wait
 * until that process is gone, then read with the cached statuses, which still list the dead executor's blocks.
 * Only the reduce stage's first attempt is gated; Spark's retry of it runs straight through. The victim's death is
 * seen as the release of a lock it took on a file (the kernel drops a process's locks when it ends), so the gate
 * needs only a file system the executors share: it works on one host (local-cluster) and across hosts with PID
 * namespaces of their own (SeparateHostsTest), where the victim's process id means nothing to the others.
 */
final class ExecutorLossScenario extends Scenario {

    static final int REDUCERS = 6;
    /** How long a gated reducer waits for the victim's death before reading anyway (the test then fails). */
    static final long VICTIM_DEATH_WAIT_MS = 60_000;
    /** The victim executor's exit status, recognisable in the worker's log. */
    static final int VICTIM_EXIT_STATUS = 57;

    private final PairData data = PairData.uniform(10, RddScenarios.MAPS, 20_000, 2_000, 100);

    ExecutorLossScenario() {
        super("executorLoss");
    }

    @Override
    public Outcome run(SparkSession spark) throws IOException {
        JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        Path markers = Files.createTempDirectory("slipstream-executor-loss");
        try {
            JavaPairRDD<Long, byte[]> shuffled = data.generate(sc).partitionBy(new HashPartitioner(REDUCERS));
            long count = shuffled.count(); // the first job: map stage, and every executor caches the map statuses
            if (count != (long) data.maps * data.recordsPerMap) {
                throw new IllegalStateException("the first read of the shuffle counted " + count + " records");
            }
            String markerDirectory = markers.toString();
            JavaRDD<Integer> gate = sc.parallelize(Scenario.range(REDUCERS), REDUCERS)
                    .mapPartitions(ignored -> passGate(markerDirectory));
            JavaRDD<Long> recordHashes = gate.zipPartitions(shuffled, (passed, records) -> PairData.recordHashes(records));
            return Scenario.unorderedDigest(recordHashes);
        } finally {
            try (var files = Files.list(markers)) {
                for (Path file : (Iterable<Path>) files::iterator) {
                    Files.deleteIfExists(file);
                }
            }
            Files.deleteIfExists(markers);
        }
    }

    /**
     * Runs in a reduce task before it reads the shuffle (zipPartitions computes the gate first). In the stage's first
     * attempt, partition 0 halts its executor and the others wait for that executor's process to end.
     */
    private static Iterator<Integer> passGate(String markerDirectory) throws IOException, InterruptedException {
        TaskContext task = TaskContext.get();
        if (task.stageAttemptNumber() != 0 || task.attemptNumber() != 0) {
            return Collections.emptyIterator();
        }
        Path victim = Path.of(markerDirectory, "victim");
        Path victimLock = Path.of(markerDirectory, "victim.lock");
        if (task.partitionId() == 0) {
            // Taken before the marker appears and never released: it goes when the process ends.
            FileChannel lockFile = FileChannel.open(victimLock, StandardOpenOption.CREATE, StandardOpenOption.WRITE);
            if (lockFile.lock() == null) {
                throw new IllegalStateException("no lock on " + victimLock);
            }
            Path written = Path.of(markerDirectory, "victim.tmp");
            Files.writeString(written, "partition 0", StandardCharsets.US_ASCII);
            Files.move(written, victim, StandardCopyOption.ATOMIC_MOVE);
            System.err.println("executorLoss: partition 0 halts this executor");
            Runtime.getRuntime().halt(VICTIM_EXIT_STATUS);
        }
        long deadline = System.currentTimeMillis() + VICTIM_DEATH_WAIT_MS;
        while (System.currentTimeMillis() < deadline) {
            if (Files.exists(victim) && victimLockIsFree(victimLock)) {
                System.err.println("executorLoss: partition " + task.partitionId() + " reads, the victim is dead");
                return Collections.emptyIterator();
            }
            Thread.sleep(50);
        }
        System.err.println("executorLoss: partition " + task.partitionId() + " saw no victim die; reading anyway");
        return Collections.emptyIterator();
    }

    /** Whether no process holds the victim's lock (tried and released at once). */
    private static boolean victimLockIsFree(Path victimLock) throws IOException {
        try (FileChannel lockFile = FileChannel.open(victimLock, StandardOpenOption.WRITE)) {
            FileLock lock = lockFile.tryLock();
            if (lock == null) {
                return false;
            }
            lock.release();
            return true;
        } catch (OverlappingFileLockException e) {
            return false; // this very JVM holds it: the victim is alive
        }
    }

    @Override
    public Outcome reference() {
        return data.unorderedReference();
    }
}
