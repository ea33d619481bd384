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
        coordinator.request(ShuffleProtocol.OP_REGISTER, authenticator.seal(ShuffleProtocol.OP_REGISTER, body)).release();
    }

    /** The address serving {@code peerId}'s map outputs, or empty if it has none (it runs without the fabric). */
    public Optional<InetSocketAddress> lookup(String peerId) {
        Optional<InetSocketAddress> cached = known.get(peerId);
        if (cached != null && cached.isPresent()) {
            return cached;
        }
        ByteBuffer body = ByteBuffer.allocate(ShuffleProtocol.stringBytes(peerId));
        ShuffleProtocol.putString(body, peerId);
        body.flip();
        Optional<InetSocketAddress> found;
        try (FabricBuffer response = coordinator.request(ShuffleProtocol.OP_LOOKUP, authenticator.seal(ShuffleProtocol.OP_LOOKUP, body))) {
            ByteBuffer in = response.byteBuffer();
            ShuffleProtocol.need(in, 1);
            if (in.get() == 0) {
                found = Optional.empty();
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
}
