package io.slipstream.spark;

import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Every fallback to Spark's own reader says, once per process and reason, what happened and why
 * (a fallback that happens per task would otherwise repeat in every task, or say nothing).
 */
final class FallbackLog {
    private static final Logger LOG = LoggerFactory.getLogger(FallbackLog.class);
    /** Distinct reasons remembered: a bound, although reasons are few (executor ids, block id classes). */
    static final int REASONS_MAX = 1024;
    private static final Set<String> LOGGED = ConcurrentHashMap.newKeySet();

    private FallbackLog() {}

    /** Logs {@code what} and {@code why} as a warning the first time this {@code what} happens in this process. */
    static void once(String what, String why) {
        if (LOGGED.size() < REASONS_MAX && LOGGED.add(what)) {
            LOG.warn("slipstream: {} through Spark's own transfer service: {} (spark.slipstream.fallback=auto; logged once)", what, why);
        }
    }

    /** As {@link #once} at info level: not a fallback of the transport (e.g. blocks that are all local anyway). */
    static void onceInfo(String what, String why) {
        if (LOGGED.size() < REASONS_MAX && LOGGED.add(what)) {
            LOG.info("slipstream: {} through Spark's own reader: {} (logged once)", what, why);
        }
    }
}
