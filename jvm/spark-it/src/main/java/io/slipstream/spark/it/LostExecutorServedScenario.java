package io.slipstream.spark.it;

import org.apache.spark.HashPartitioner;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.sql.SparkSession;

/**
 * With the external shuffle service, a lost executor's map outputs outlive it: a shuffle is written and read once
 * (every executor now knows the others' fabric addresses), then one executor halts, then the same shuffle is read
 * again. Spark keeps the lost executor's map statuses (the service serves its files), so the second read must get
 * its blocks from the service and run no map task. The second read's stages carry the scenario name plus
 * {@link #AFTER_LOSS}, so the test can count its map tasks and fetch failures apart. Not in {@link Scenario#all()}:
 * it needs a cluster whose workers run the service.
 */
final class LostExecutorServedScenario extends Scenario {
    static final String NAME = "lostExecutorServed";
    static final String AFTER_LOSS = "AfterLoss";
    static final int REDUCERS = 6;
    /** The victim executor's exit status, recognisable in the worker's log. */
    static final int VICTIM_EXIT_STATUS = 58;

    private final PairData data = PairData.uniform(12, RddScenarios.MAPS, 10_000, 2_000, 100);

    LostExecutorServedScenario() {
        super(NAME);
    }

    @Override
    public Outcome run(SparkSession spark) {
        JavaSparkContext sc = JavaSparkContext.fromSparkContext(spark.sparkContext());
        JavaPairRDD<Long, byte[]> shuffled = data.generate(sc).partitionBy(new HashPartitioner(REDUCERS));
        long count = shuffled.count();
        if (count != (long) data.maps * data.recordsPerMap) {
            throw new IllegalStateException("the first read of the shuffle counted " + count + " records");
        }
        // One task halts its executor (its first attempt only: the retry, elsewhere, returns).
        sc.parallelize(Scenario.range(1), 1).foreach(ignored -> {
            TaskContext task = TaskContext.get();
            if (task.stageAttemptNumber() == 0 && task.attemptNumber() == 0) {
                System.err.println(NAME + ": this executor halts");
                Runtime.getRuntime().halt(VICTIM_EXIT_STATUS);
            }
        });
        // The survivor remembers the lost executor's fabric address from the first read: its first reducer's fetch
        // fails and moves the lost executor's blocks to the service; its later reducers hear "gone" from the directory
        // at once (each executor runs one task at a time).
        sc.setLocalProperty(ShuffleMetricsListener.SCENARIO_PROPERTY, NAME + AFTER_LOSS);
        try {
            return Scenario.unorderedDigest(shuffled.mapPartitions(PairData::recordHashes));
        } finally {
            sc.setLocalProperty(ShuffleMetricsListener.SCENARIO_PROPERTY, NAME);
        }
    }

    @Override
    public Outcome reference() {
        return data.unorderedReference();
    }
}
