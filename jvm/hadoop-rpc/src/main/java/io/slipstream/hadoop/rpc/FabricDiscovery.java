package io.slipstream.hadoop.rpc;

import java.io.IOException;
import org.apache.hadoop.ipc.ProtocolInfo;
import org.apache.hadoop.ipc.VersionedProtocol;

/**
 * How a client learns a server's fabric address and gets a session (docs/hadoop-rpc.md, messages 1-2):
 * one call over the server's normal socket listener, on a connection made for the protocol the session is
 * for, so it runs after Hadoop authenticated (and, with service-level authorization, authorised) that
 * connection, and the session is bound to the connection's user. Carried by Hadoop's
 * {@code WritableRpcEngine} (protocol independent: no generated protobuf code needed), registered on every
 * server of {@link FabricRpcEngine} next to its real protocols.
 *
 * <p>Version 2 adds the key agreement (version 1's {@code openSession()} gave unauthenticated sessions);
 * version 3 is the same call for sessions whose answers are signed (frame version 3); version 4 is for sessions
 * whose refusals are signed too (frame version 4), and names the session the client held before, so that the
 * server can say whether it still holds it (docs/hadoop-rpc.md, message 7); version 5 agrees what the MACs cover
 * (frame version 5: the whole body, or its length). A client and a server that would not
 * understand each other never open a session: Hadoop matches versions exactly, so a client and a server of
 * different versions get {@code RPC.VersionMismatch}, which the client takes as "no fabric here" (socket path,
 * or with fallback never an error).
 */
@ProtocolInfo(protocolName = "io.slipstream.hadoop.rpc.FabricDiscovery", protocolVersion = FabricDiscovery.versionID)
public interface FabricDiscovery extends VersionedProtocol {
    long versionID = 5L;

    /**
     * Opens a fabric session for the calling user and {@code protocol} (the name calls of the session will
     * carry), with {@code clientPublicKey} the client's ephemeral X25519 public key (32 bytes). Answers
     * {@code "<frame version> <host> <port> <session id> <server public key, base64> <previous> <coverage>"}, or an empty
     * string when this server does not offer the fabric. {@code previousSession} is the id of the session the
     * client held before and was told is unknown (0: none; the server never gives out 0); {@code <previous>} says
     * whether the server holds that session now: {@code open}, {@code gone}, or {@code none} when none was named.
     * {@code frameMac} is the coverage the client asks for ({@code full} or {@code header}, its
     * {@code slipstream.rpc.frameMac}); {@code <coverage>} is the session's: {@code full} when either side's
     * setting says so, else {@code header}.
     * Fails when the server holds its maximum of sessions and none is idle, when the key is not a valid one, or
     * when the user may not call {@code protocol}.
     */
    String openSession(String protocol, byte[] clientPublicKey, long previousSession, String frameMac) throws IOException;
}
