package io.slipstream.hdfs.tiers;

import java.io.IOException;

/**
 * What HHH-L-BB asks of its burst buffer's servers: memcached's set, get and delete of one key. Every request
 * is idempotent, so a client may send one again after a failure that leaves its outcome unknown. Two
 * transports ({@code bb.transport}): memcached's text protocol over TCP ({@link BurstBufferTextClient}, any
 * memcached) and slipstream-cache's binary protocol over the fabric ({@link BurstBufferFabricClient}).
 */
interface BurstBufferClient extends AutoCloseable {
    /** Stores {@code length} bytes under {@code key}; an IOException names the server and its answer otherwise. */
    void set(String key, byte[] value, int offset, int length) throws IOException;

    /** The value stored under {@code key}, or null when the server has none. */
    byte[] get(String key) throws IOException;

    /** Removes {@code key}; true if it was there. */
    boolean delete(String key) throws IOException;

    @Override
    void close();
}
