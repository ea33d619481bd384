package io.slipstream.shuffle;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Predicate;

/**
 * Which fabric address serves which peer's map outputs (Spark: executor id to the executor's
 * fabric node). Kept by one coordinator (Spark's driver); peers register when their server starts
 * and reducers look peers up when they first fetch from them. Bounded: at most
 * {@link #PEERS_MAX} peers.
 *
 * <p>Registration is accepted only for a peer the engine says is alive ({@code live}: Spark's
 * block manager master knows the executor), and never replaces a registration: the first one for
 * an id holds until the engine says that peer is gone (a repeat with the same address is
 * accepted). A peer the engine says is gone leaves the directory at the next lookup of it (or
 * when the directory is full), and a lookup of it answers "gone", which a reducer turns into a
 * fetch failure.
 */
public final class PeerDirectory {
    public static final int PEERS_MAX = 100_000;

    /** LOOKUP response statuses. */
    public static final byte UNKNOWN = 0;
    public static final byte FOUND = 1;
    public static final byte GONE = 2;

    private final ConcurrentHashMap<String, InetSocketAddress> peers = new ConcurrentHashMap<>();
    private final Predicate<String> live;

    /** Every peer counts as alive (an engine that cannot tell). */
    public PeerDirectory() {
        this(peerId -> true);
    }

    /** {@code live}: whether the engine knows {@code peerId} as a running peer now (called on the server's threads). */
    public PeerDirectory(Predicate<String> live) {
        this.live = live;
    }

    /** Handles a REGISTER body; returns the (empty) response. */
    ByteBuffer register(ByteBuffer body) {
        String peerId = ShuffleProtocol.getString(body);
        String host = ShuffleProtocol.getString(body);
        ShuffleProtocol.need(body, 4);
        int port = body.getInt();
        if (port <= 0 || port > 0xffff) {
            throw new ShuffleProtocol.ProtocolException("bad port " + port);
        }
        if (!live.test(peerId)) {
            throw new RegistrationRefused("registration of " + peerId + " refused: not a live peer of this application");
        }
        InetSocketAddress address = InetSocketAddress.createUnresolved(host, port);
        if (peers.size() >= PEERS_MAX && !peers.containsKey(peerId)) {
            pruneGone();
            if (peers.size() >= PEERS_MAX) {
                throw new IllegalStateException("peer directory full (" + PEERS_MAX + " peers)");
            }
        }
        InetSocketAddress before = peers.putIfAbsent(peerId, address);
        if (before != null && !before.equals(address)) {
            throw new RegistrationRefused("registration of " + peerId + " at " + host + ":" + port + " refused: it is registered at "
                    + before.getHostString() + ":" + before.getPort() + " and a registration is never replaced");
        }
        return ByteBuffer.allocate(0);
    }

    /** Handles a LOOKUP body: {@code u8 status [, str host, i32 port]}. */
    ByteBuffer lookup(ByteBuffer body) {
        String peerId = ShuffleProtocol.getString(body);
        if (!live.test(peerId)) {
            peers.remove(peerId);
            return ByteBuffer.allocate(1).put(GONE).flip();
        }
        InetSocketAddress address = peers.get(peerId);
        if (address == null) {
            return ByteBuffer.allocate(1).put(UNKNOWN).flip();
        }
        ByteBuffer out = ByteBuffer.allocate(1 + ShuffleProtocol.stringBytes(address.getHostString()) + 4);
        out.put(FOUND);
        ShuffleProtocol.putString(out, address.getHostString());
        out.putInt(address.getPort());
        return out.flip();
    }

    /** Forgets a peer (e.g. its executor was lost). */
    public void remove(String peerId) {
        peers.remove(peerId);
    }

    /** Forgets every peer the engine says is gone. */
    public void pruneGone() {
        peers.keySet().removeIf(peerId -> !live.test(peerId));
    }

    public int size() {
        return peers.size();
    }

    public InetSocketAddress get(String peerId) {
        return peers.get(peerId);
    }

    /** A registration the directory will not accept (the server goes on). */
    public static final class RegistrationRefused extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public RegistrationRefused(String message) {
            super(message);
        }
    }
}
