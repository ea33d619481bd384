package io.slipstream.spark.it;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.RandomAccessFile;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.spark.Dependency;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.rdd.RDD;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * A map output damaged on disk after it was written: a groupByKey runs once, then one byte of every non-empty block
 * of one executor's map outputs is flipped in its data file, then the same shuffled RDD is read again (its map stage
 * is skipped: the reducers read the damaged files). The reader must report the damage as a fetch failure (after one
 * more fetch of a remote block, with Spark's diagnosis when checksums are on), so that Spark recomputes those maps;
 * the result must be the reference's.
 *
 * <p>Only one executor's outputs are damaged: reducers read their local blocks first, and a reducer on the other
 * executor must get to the remote (damaged) ones. Not in {@link Scenario#all()}: only applications that ask for it
 * run it (the prefetch cache would serve undamaged copies: such an application turns it off).
 */
final class CorruptMapOutputScenario extends Scenario {
    static final String NAME = "corruptMapOutput";
    private static final int REDUCERS = 8;
    private final PairData data = PairData.uniform(11, RddScenarios.MAPS, 10_000, 5_000, 100);

    CorruptMapOutputScenario() {
        super(NAME);
    }

    @Override
    public Outcome run(SparkSession spark) throws Exception {
        JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        JavaPairRDD<Long, Iterable<byte[]>> groups = data.generate(sc).groupByKey(REDUCERS);
        long groupCount = groups.count();
        int shuffleId = shuffleIdOf(groups.rdd());
        int flipped = flipOneExecutorsBlocks(Path.of(sc.getConf().get("spark.local.dir")), shuffleId);
        System.out.println("CORRUPTED " + NAME + " " + flipped + " blocks of shuffle " + shuffleId + " (" + groupCount + " groups)");
        if (flipped == 0) {
            throw new IllegalStateException("no map output of shuffle " + shuffleId + " found to damage");
        }
        return RddScenarios.unorderedCheckedPartitions(groups.map(group -> RddScenarios.groupHash(group._1, group._2)),
                REDUCERS);
    }

    @Override
    public Outcome reference() {
        return new RddScenarios.GroupByKey(NAME, data, REDUCERS).reference();
    }

    /** The shuffle nearest to {@code rdd} in its lineage (groupByKey's result maps over the shuffled RDD). */
    private static int shuffleIdOf(RDD<?> rdd) {
        for (RDD<?> next = rdd; ; ) {
            Dependency<?> dependency = next.dependencies().head();
            if (dependency instanceof ShuffleDependency<?, ?, ?> shuffle) {
                return shuffle.shuffleId();
            }
            next = dependency.rdd();
        }
    }

    /** Flips the middle byte of each non-empty block of the shuffle's data files in the first executor's folder. */
    static int flipOneExecutorsBlocks(Path localDir, int shuffleId) throws IOException {
        String prefix = "shuffle_" + shuffleId + "_";
        // Spark hashes each file's name to a subfolder of its own: a data file and its index are found by name.
        Map<String, Path> byName = new HashMap<>();
        try (Stream<Path> files = Files.walk(localDir)) {
            files.filter(f -> f.getFileName().toString().startsWith(prefix))
                    .forEach(f -> byName.put(executorFolder(f) + "/" + f.getFileName(), f));
        }
        List<Path> dataFiles = byName.values().stream().filter(f -> f.toString().endsWith("_0.data")).sorted().toList();
        if (dataFiles.isEmpty()) {
            return 0;
        }
        String firstExecutor = executorFolder(dataFiles.get(0));
        int flipped = 0;
        for (Path dataFile : dataFiles) {
            if (!executorFolder(dataFile).equals(firstExecutor)) {
                continue;
            }
            Path index = byName.get(firstExecutor + "/" + dataFile.getFileName().toString().replace(".data", ".index"));
            if (index == null) {
                throw new IOException("no index file for " + dataFile);
            }
            long[] offsets = readOffsets(index);
            try (RandomAccessFile file = new RandomAccessFile(dataFile.toFile(), "rw")) {
                for (int p = 0; p + 1 < offsets.length; p++) {
                    long length = offsets[p + 1] - offsets[p];
                    if (length > 0) {
                        long at = offsets[p] + length / 2;
                        file.seek(at);
                        int value = file.read();
                        file.seek(at);
                        file.write(~value & 0xff);
                        flipped++;
                    }
                }
            }
        }
        return flipped;
    }

    /** The executor-... folder a file lives under (the whole path when there is none). */
    private static String executorFolder(Path file) {
        for (Path part = file; part != null; part = part.getParent()) {
            if (part.getFileName() != null && part.getFileName().toString().startsWith("executor-")) {
                return part.toString();
            }
        }
        return file.toString();
    }

    private static long[] readOffsets(Path index) throws IOException {
        long bytes = Files.size(index);
        if (bytes < 16 || bytes % 8 != 0 || bytes > (1 << 20)) {
            throw new IOException(index + ": not an index file (" + bytes + " bytes)");
        }
        long[] offsets = new long[(int) (bytes / 8)];
        try (DataInputStream in = new DataInputStream(Files.newInputStream(index))) {
            for (int i = 0; i < offsets.length; i++) {
                offsets[i] = in.readLong();
            }
        }
        return offsets;
    }
}
