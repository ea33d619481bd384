package io.slipstream.shuffle;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentHashMap;

/**
 * Which fabric address serves which peer's map outputs (Spark: executor id to the executor's
 * fabric node). Kept by one coordinator (Spark's driver); peers register when their server starts
 * and reducers look peers up when they first fetch from them. Bounded: at most
 * {@link #PEERS_MAX} peers (a re-registration replaces the old address).
 */
public final class PeerDirectory {
    public static final int PEERS_MAX = 100_000;

    private final ConcurrentHashMap<String, InetSocketAddress> peers = new ConcurrentHashMap<>();

    /** Handles a REGISTER body; returns the (empty) response. */
    ByteBuffer register(ByteBuffer body) {
        String peerId = ShuffleProtocol.getString(body);
        String host = ShuffleProtocol.getString(body);
        ShuffleProtocol.need(body, 4);
        int port = body.getInt();
        if (port <= 0 || port > 0xffff) {
            throw new ShuffleProtocol.ProtocolException("bad port " + port);
        }
        if (peers.size() >= PEERS_MAX && !peers.containsKey(peerId)) {
            throw new IllegalStateException("peer directory full (" + PEERS_MAX + " peers)");
        }
        peers.put(peerId, InetSocketAddress.createUnresolved(host, port));
        return ByteBuffer.allocate(0);
    }

    /** Handles a LOOKUP body. */
    ByteBuffer lookup(ByteBuffer body) {
        String peerId = ShuffleProtocol.getString(body);
        InetSocketAddress address = peers.get(peerId);
        if (address == null) {
            return ByteBuffer.allocate(1).put((byte) 0).flip();
        }
        ByteBuffer out = ByteBuffer.allocate(1 + ShuffleProtocol.stringBytes(address.getHostString()) + 4);
        out.put((byte) 1);
        ShuffleProtocol.putString(out, address.getHostString());
        out.putInt(address.getPort());
        return out.flip();
    }

    /** Forgets a peer (e.g. its executor was lost). */
    public void remove(String peerId) {
        peers.remove(peerId);
    }

    public int size() {
        return peers.size();
    }

    public InetSocketAddress get(String peerId) {
        return peers.get(peerId);
    }
}
