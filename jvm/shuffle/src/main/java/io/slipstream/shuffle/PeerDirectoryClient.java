package io.slipstream.shuffle;

import io.slipstream.fabric.FabricBuffer;
import io.slipstream.fabric.FabricEndpoint;
import io.slipstream.fabric.FabricNode;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.Optional;
import java.util.concurrent.ConcurrentHashMap;

/**
 * A peer's view of the {@link PeerDirectory}: registers its own server and looks others up,
 * remembering the answers (a peer's address does not change while it lives).
 */
public final class PeerDirectoryClient {
    private final FabricEndpoint coordinator;
    private final RequestAuthenticator authenticator;
    private final ConcurrentHashMap<String, Optional<InetSocketAddress>> known = new ConcurrentHashMap<>();

    public PeerDirectoryClient(FabricNode node, InetSocketAddress coordinator, RequestAuthenticator authenticator) {
        this.coordinator = node.endpoint(coordinator);
        this.authenticator = authenticator;
    }

    /** Registers {@code peerId}'s server address; throws a {@code FabricException} if the coordinator cannot be reached. */
    public void register(String peerId, InetSocketAddress address) {
        String host = address.getAddress() != null ? address.getAddress().getHostAddress() : address.getHostString();
        ByteBuffer body = ByteBuffer.allocate(ShuffleProtocol.stringBytes(peerId) + ShuffleProtocol.stringBytes(host) + 4);
        ShuffleProtocol.putString(body, peerId);
        ShuffleProtocol.putString(body, host);
        body.putInt(address.getPort()).flip();
        ByteBuffer payload = authenticator.seal(ShuffleProtocol.OP_REGISTER, body);
        try (FabricBuffer response = coordinator.request(ShuffleProtocol.OP_REGISTER, payload)) {
            authenticator.openResponse(ShuffleProtocol.OP_REGISTER, authenticator.requestTag(payload), response.byteBuffer());
        }
    }

    /**
     * The address serving {@code peerId}'s map outputs, or empty if it has none (it runs without
     * the fabric). A peer the coordinator knows to be gone is a {@link PeerGoneException}; a
     * response that fails authentication an {@link RequestAuthenticator.AuthenticationException}.
     */
    public Optional<InetSocketAddress> lookup(String peerId) {
        Optional<InetSocketAddress> cached = known.get(peerId);
        if (cached != null && cached.isPresent()) {
            return cached;
        }
        ByteBuffer body = ByteBuffer.allocate(ShuffleProtocol.stringBytes(peerId));
        ShuffleProtocol.putString(body, peerId);
        body.flip();
        Optional<InetSocketAddress> found;
        ByteBuffer payload = authenticator.seal(ShuffleProtocol.OP_LOOKUP, body);
        try (FabricBuffer response = coordinator.request(ShuffleProtocol.OP_LOOKUP, payload)) {
            ByteBuffer in = authenticator.openResponse(ShuffleProtocol.OP_LOOKUP, authenticator.requestTag(payload), response.byteBuffer());
            ShuffleProtocol.need(in, 1);
            byte status = in.get();
            if (status == PeerDirectory.GONE) {
                known.remove(peerId);
                throw new PeerGoneException(peerId + " is gone (its engine lost it)");
            } else if (status == PeerDirectory.UNKNOWN) {
                found = Optional.empty();
            } else if (status != PeerDirectory.FOUND) {
                throw new ShuffleProtocol.ProtocolException("bad lookup status " + status);
            } else {
                String host = ShuffleProtocol.getString(in);
                ShuffleProtocol.need(in, 4);
                found = Optional.of(new InetSocketAddress(host, in.getInt()));
            }
        }
        if (found.isPresent()) {
            known.put(peerId, found);
        }
        return found;
    }

    /**
     * Forgets the remembered address of {@code peerId} (its server stopped answering), so the next
     * {@link #lookup} asks the coordinator again, which then knows whether the peer is gone.
     */
    public void forget(String peerId) {
        known.remove(peerId);
    }

    /**
     * Whether the coordinator says {@code peerId} is gone, asked afresh every {@code pollMs} for up to {@code wait}
     * while it still says the peer is alive: a peer's server fails at once when its process dies, and its engine
     * learns of the loss a moment later. False when the peer is still alive after the wait, when the coordinator
     * cannot be asked, or when the thread is interrupted (its interrupt status kept).
     */
    public boolean awaitGone(String peerId, java.time.Duration wait, long pollMs) {
        long deadline = System.nanoTime() + wait.toNanos();
        while (true) {
            forget(peerId);
            try {
                lookup(peerId);
            } catch (PeerGoneException gone) {
                return true;
            } catch (RuntimeException unanswered) {
                return false;
            }
            if (System.nanoTime() - deadline >= 0) {
                return false;
            }
            try {
                Thread.sleep(pollMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return false;
            }
        }
    }

    /** The coordinator says the peer is gone: its map outputs are lost. */
    public static final class PeerGoneException extends RuntimeException {
        private static final long serialVersionUID = 1L;

        public PeerGoneException(String message) {
            super(message);
        }
    }
}
