package io.slipstream.fabric;

/**
 * Counters of a node at one moment; mirrors the Rust {@code fabric::Stats} (same order).
 *
 * @param requestsSent requests this node sent
 * @param responsesReceived responses (successes and remote failures) it received
 * @param requestsServed requests its handlers answered
 * @param requestsShed requests it refused because its dispatch queue was full
 * @param requestsTimedOut requests of this node that got no response in time
 * @param connectionsOpen connections open now, both directions
 * @param poolBytesMapped registered memory mapped now
 * @param poolBytesInUse registered memory held by buffers now (by class capacity)
 * @param poolCapBytes the cap on mapped memory
 * @param protocolErrors frames that broke the wire format
 * @param peersFailed connections that failed
 * @param sameHostBytesPulled bytes pulled from same-host senders' memory (CMA) instead of sent through UCX
 * @param sameHostPullsFailed such pulls that failed (their messages failed)
 * @param sameHostPullRefused same-host connections on which pulling was refused, by either side
 * @param poolBytesMappedPeak the most registered memory mapped at once since the node started: its off-heap
 *     memory at its worst (at most the cap plus a small reserve for acknowledgements)
 * @param bundlesSent messages that carried several small requests or answers at once (connections over TCP only)
 * @param answersBundled answers sent in those bundles
 * @param requestsBundled requests sent in those bundles
 * @param corked requests and answers that waited for the next progress round to go out together
 *     ({@link FabricConfig#corkOverTcp()})
 */
public record FabricStats(long requestsSent, long responsesReceived, long requestsServed, long requestsShed,
        long requestsTimedOut, long connectionsOpen, long poolBytesMapped, long poolBytesInUse, long poolCapBytes,
        long protocolErrors, long peersFailed, long sameHostBytesPulled, long sameHostPullsFailed,
        long sameHostPullRefused, long poolBytesMappedPeak, long bundlesSent, long answersBundled,
        long requestsBundled, long corked) {

    static FabricStats of(long[] fields) {
        if (fields == null || fields.length != FabricNative.STATS_FIELDS) {
            throw new FabricException(FabricException.Kind.INTERNAL, "native stats have "
                    + (fields == null ? "no" : fields.length) + " fields, expected " + FabricNative.STATS_FIELDS);
        }
        return new FabricStats(fields[0], fields[1], fields[2], fields[3], fields[4], fields[5], fields[6], fields[7],
                fields[8], fields[9], fields[10], fields[11], fields[12], fields[13], fields[14], fields[15],
                fields[16], fields[17], fields[18]);
    }
}
