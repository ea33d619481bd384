package io.slipstream.ohb.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;

import org.junit.jupiter.api.Test;

class BenchParamsTest {
    @Test
    void defaultsAfterSparksGroupByTest() {
        BenchParams p = BenchParams.parse(new String[] {"groupby"});
        assertEquals(BenchParams.Test.GROUPBY, p.test);
        assertEquals(8, p.mappers);
        assertEquals(8, p.reducers, "reducers default to mappers");
        assertEquals(1000, p.valueBytes);
        assertEquals(2, p.executors, "from local-cluster[2,1,4096]");
        assertEquals(8L * 131_072, p.records());
    }

    @Test
    void flagsAndConf() {
        BenchParams p = BenchParams.parse(new String[] {"sortby", "--mappers", "4", "--pairs", "1_000", "--value-bytes", "10",
            "--master", "local[2]", "--seed", "-3", "--conf", "spark.a=b=c", "--conf", "spark.x="});
        assertEquals(BenchParams.Test.SORTBY, p.test);
        assertEquals(4, p.reducers);
        assertEquals(1000, p.pairsPerMapper);
        assertEquals(-3, p.seed);
        assertEquals(0, p.executors, "no wait outside local-cluster");
        assertEquals(Map.of("spark.a", "b=c", "spark.x", ""), p.conf);
    }

    @Test
    void badCommandLines() {
        for (String[] args : new String[][] {{}, {"join"}, {"groupby", "--mappers"}, {"groupby", "--mappers", "0"},
                {"groupby", "--reducers", "x"}, {"groupby", "--conf", "novalue"}, {"groupby", "--bogus", "1"}}) {
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> BenchParams.parse(args));
            assertTrue(!e.getMessage().isEmpty());
        }
    }

    @Test
    void localClusterExecutors() {
        assertEquals(2, BenchParams.localClusterExecutors("local-cluster[2,1,1024]"));
        assertEquals(3, BenchParams.localClusterExecutors(" local-cluster[3, 1, 512] "));
        assertEquals(0, BenchParams.localClusterExecutors("local[*]"));
        assertEquals(0, BenchParams.localClusterExecutors("spark://host:7077"));
    }

    @Test
    void jsonEscapes() {
        String json = new Json().field("a", "q\"b\\n\nc\u0001").field("n", 5L).field("t", true).field("z", (String) null)
                .raw("s", "[]").toString();
        assertEquals("{\"a\":\"q\\\"b\\\\n\\nc\\u0001\",\"n\":5,\"t\":true,\"z\":null,\"s\":[]}", json);
    }
}
