package io.slipstream.hadoop.rpc;

import java.io.IOException;
import org.apache.hadoop.ipc.ProtocolInfo;
import org.apache.hadoop.ipc.VersionedProtocol;

/**
 * How a client learns a server's fabric address and gets a session (docs/hadoop-rpc.md, messages 1-2):
 * one call over the server's normal socket listener, so it runs after Hadoop authenticated the connection
 * and the session is bound to that connection's user and address. Carried by Hadoop's
 * {@code WritableRpcEngine} (protocol independent: no generated protobuf code needed), registered on every
 * server of {@link FabricRpcEngine} next to its real protocols.
 */
@ProtocolInfo(protocolName = "io.slipstream.hadoop.rpc.FabricDiscovery", protocolVersion = FabricDiscovery.versionID)
public interface FabricDiscovery extends VersionedProtocol {
    long versionID = 1L;

    /**
     * Opens a fabric session for the calling user: {@code "<frame version> <host> <port> <session id>"},
     * or an empty string when this server does not offer the fabric. Fails when the server holds its
     * maximum of sessions and none is idle.
     */
    String openSession() throws IOException;
}
