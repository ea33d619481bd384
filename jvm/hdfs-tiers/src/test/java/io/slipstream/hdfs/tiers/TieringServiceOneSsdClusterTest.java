package io.slipstream.hdfs.tiers;

import org.junit.jupiter.api.BeforeAll;

/** {@link TieringServiceClusterTest} with promotion policy ONE_SSD: one replica of the hot file's block on SSD. */
class TieringServiceOneSsdClusterTest extends TieringServiceClusterTest {
    @BeforeAll
    static void start() throws Exception {
        start("ONE_SSD", 1);
    }
}
