package io.slipstream.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Spark's local mode runs tasks in the driver, whose fabric runtime keeps the peer directory and
 * serves no map outputs: its shuffles must read as Spark does (a reader on the driver's runtime
 * failed with a NullPointerException on its first local block).
 */
class LocalModeTest {
    @Test
    void shuffles_in_local_mode_read_through_spark() {
        SparkConf conf = new SparkConf().setMaster("local[2]").setAppName("slipstream-local-mode")
                .set("spark.shuffle.manager", SlipstreamShuffleManager.class.getName())
                .set("spark.driver.host", "127.0.0.1").set("spark.driver.bindAddress", "127.0.0.1")
                .set("spark.ui.enabled", "false").set("spark.slipstream.fallback", "never");
        try (JavaSparkContext context = new JavaSparkContext(conf)) {
            SlipstreamShuffleManager manager = (SlipstreamShuffleManager) SparkEnv.get().shuffleManager();
            assertTrue(manager.fabricActive(), "the driver's directory did not start");
            List<Integer> numbers = new ArrayList<>();
            for (int i = 0; i < 10_000; i++) {
                numbers.add(i);
            }
            List<Tuple2<Integer, Iterable<Integer>>> groups =
                    context.parallelize(numbers, 4).mapToPair(n -> new Tuple2<>(n % 7, n)).groupByKey(3).collect();
            assertEquals(7, groups.size());
            long total = 0;
            for (Tuple2<Integer, Iterable<Integer>> group : groups) {
                for (int n : group._2()) {
                    assertEquals((int) group._1(), n % 7);
                    total += n;
                }
            }
            assertEquals(10_000L * 9_999 / 2, total);
            assertEquals(10_000L, context.parallelize(numbers, 4).mapToPair(n -> new Tuple2<>(n, n)).sortByKey(false, 2).count());
        }
    }
}
