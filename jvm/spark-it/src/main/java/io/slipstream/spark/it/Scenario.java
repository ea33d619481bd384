package io.slipstream.spark.it;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.stream.Stream;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.sql.SparkSession;

/**
 * One shuffle workload: run through Spark (with whichever shuffle manager the application has), and computed
 * without Spark as the reference its result must equal.
 */
public abstract class Scenario {

    public final String name;

    protected Scenario(String name) {
        this.name = name;
    }

    /** Runs the workload on the cluster; throws when a property the scenario exists to exercise did not hold. */
    public abstract Outcome run(SparkSession spark) throws Exception;

    /** The same result computed in this JVM, without Spark. */
    public abstract Outcome reference();

    /** Every scenario, in the order the application runs them (executor loss last: it replaces an executor). */
    public static List<Scenario> all() {
        List<Scenario> all = new ArrayList<>(RddScenarios.all());
        all.addAll(SqlScenarios.all());
        all.add(new ExecutorLossScenario());
        return all;
    }

    /** Scenarios only the applications that name them run (they need settings of their own). */
    static List<Scenario> onRequest() {
        return List.of(new CorruptMapOutputScenario(), new LostExecutorServedScenario());
    }

    public static Scenario named(String name) {
        return Stream.concat(all().stream(), onRequest().stream()).filter(s -> s.name.equals(name)).findFirst()
                .orElseThrow(() -> new IllegalArgumentException("no scenario " + name));
    }

    static List<Integer> range(int count) {
        List<Integer> values = new ArrayList<>(count);
        for (int i = 0; i < count; i++) {
            values.add(i);
        }
        return values;
    }

    /** The unordered digest of an RDD of record hashes: one (count, sum) per partition, summed on the driver. */
    static Outcome unorderedDigest(JavaRDD<Long> recordHashes) {
        List<long[]> partitions = recordHashes.mapPartitions((Iterator<Long> hashes) -> {
            long count = 0;
            long sum = 0;
            while (hashes.hasNext()) {
                sum += hashes.next();
                count++;
            }
            return List.of(new long[] {count, sum}).iterator();
        }).collect();
        Outcome outcome = Outcome.EMPTY;
        for (long[] partition : partitions) {
            outcome = outcome.combineUnordered(new Outcome(partition[0], partition[1]));
        }
        return outcome;
    }
}
