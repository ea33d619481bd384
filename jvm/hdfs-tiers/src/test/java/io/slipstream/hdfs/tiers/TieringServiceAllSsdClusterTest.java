package io.slipstream.hdfs.tiers;

import org.junit.jupiter.api.BeforeAll;

/** {@link TieringServiceClusterTest} with the default promotion policy, ALL_SSD: the hot file's three replicas. */
class TieringServiceAllSsdClusterTest extends TieringServiceClusterTest {
    @BeforeAll
    static void start() throws Exception {
        start("ALL_SSD", 3);
    }
}
