package io.slipstream.mapreduce;

/**
 * The plugin's own task counters (group {@code io.slipstream.mapreduce.SlipstreamCounter}), beside
 * Hadoop's shuffle counters, which it fills as the HTTP shuffle does: they show which transport
 * carried a job's shuffle.
 */
public enum SlipstreamCounter {
    /** Map-output bytes (as stored, compressed if so) a reducer received over the fabric. */
    FABRIC_SHUFFLE_BYTES,
    /** Map outputs a reducer received over the fabric. */
    FABRIC_SHUFFLED_MAPS,
    /** Fabric requests a reducer sent. */
    FABRIC_REQUESTS,
    /** Reduce tasks that fell back to the HTTP shuffle (fallback=auto and no fabric). */
    HTTP_FALLBACKS,
    /**
     * NodeManagers a reduce task fetched from over the HTTP shuffle because nothing answered on their
     * fabric port (fallback=auto: no plugin there, or its fabric could not start), counted once each.
     */
    HTTP_FALLBACK_HOSTS
}
