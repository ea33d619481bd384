package io.slipstream.hadoop.rpc;

import io.slipstream.fabric.session.FrameAuth;
import io.slipstream.fabric.session.SessionKeys;
import java.io.IOException;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.security.InvalidKeyException;
import java.util.Base64;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.CommonConfigurationKeysPublic;
import org.apache.hadoop.ipc.FabricCallBridge;
import org.apache.hadoop.security.UserGroupInformation;

/**
 * A fabric session as the client holds it: where the server's fabric node listens, the session id, the key
 * its frames are signed with, and what the server said of the session the client held before (message 7).
 * {@link #open} is messages 1-2 of docs/hadoop-rpc.md; {@link #answer} is the server's side of message 2.
 */
record SessionOffer(String host, int port, long sessionId, FrameAuth auth, Previous previous) {
    private static final Method OPEN_SESSION;

    /** What the server said of the session named as the client's previous one. */
    enum Previous {
        /** None was named. */
        NONE,
        /** The server does not hold it (any more): a frame of it refused as unknown was not taken. */
        GONE,
        /** The server holds it: a refusal of a frame of it as unknown was not the server's. */
        OPEN;

        String word() {
            return name().toLowerCase(java.util.Locale.ROOT);
        }
    }

    static {
        try {
            OPEN_SESSION = FabricDiscovery.class.getMethod("openSession", String.class, byte[].class, long.class, String.class);
        } catch (NoSuchMethodException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    /**
     * Asks {@code server} for a session as {@code ticket}, over a socket connection made for {@code protocol}
     * (so Hadoop authenticates it as the protocol's own calls would be: its {@code @KerberosInfo} names the
     * server's principal, its {@code @TokenInfo} picks the delegation token). Returns null when the server
     * offers no fabric; throws Hadoop's {@link org.apache.hadoop.ipc.RemoteException} for the server's
     * refusals (no such protocol or version, session limit, authorization) and its {@link IOException} when
     * the connection cannot be made or authenticated. {@code previousSession}: the session the client held and
     * was told is unknown, whose fate the server reports in {@link #previous} (0: none). {@code frameMac}: the MAC
     * coverage this client asks for; the session's is at least that.
     */
    static SessionOffer open(Configuration conf, InetSocketAddress server, Class<?> protocol, String protocolName,
            UserGroupInformation ticket, int rpcTimeoutMs, long previousSession, FrameAuth.Coverage frameMac)
            throws IOException {
        SessionKeys keys = SessionKeys.generate();
        Configuration discoveryConf = new Configuration(conf);
        // One connection attempt: an unreachable server fails the discovery as it would the call.
        discoveryConf.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_MAX_RETRIES_KEY, 0);
        discoveryConf.setInt(CommonConfigurationKeysPublic.IPC_CLIENT_CONNECT_MAX_RETRIES_ON_SOCKET_TIMEOUTS_KEY, 0);
        Object answer = FabricCallBridge.callWritable(discoveryConf, server, protocol, ticket, rpcTimeoutMs, OPEN_SESSION,
                protocolName, keys.publicKey(), previousSession, frameMac.word());
        if (answer == null || "".equals(answer)) {
            return null;
        }
        return accept(server, answer.toString(), keys, previousSession, frameMac);
    }

    /**
     * The client's side of the answer: parse it, agree the key. A session whose MACs would cover less than
     * {@code frameMac} asks for is refused (a server that answers so is not following the protocol).
     */
    static SessionOffer accept(InetSocketAddress server, String answer, SessionKeys keys, long previousSession,
            FrameAuth.Coverage frameMac) throws IOException {
        String[] parts = answer.split(" ");
        if (parts.length != 7 || !parts[0].equals(Byte.toString(Frames.FRAME_VERSION))) {
            throw new IOException("slipstream: RPC server " + server + " answered an unknown session format: " + answer);
        }
        try {
            int port = Integer.parseInt(parts[2]);
            long sessionId = Long.parseLong(parts[3]);
            byte[] serverPublicKey = Base64.getDecoder().decode(parts[4]);
            Previous previous = Previous.valueOf(parts[5].toUpperCase(java.util.Locale.ROOT));
            if ((previous == Previous.NONE) != (previousSession == 0)) {
                throw new IllegalArgumentException("the previous session is " + parts[5]);
            }
            FrameAuth.Coverage coverage = FrameAuth.Coverage.ofWord(parts[6]);
            if (coverage == null || (frameMac == FrameAuth.Coverage.FULL && coverage != FrameAuth.Coverage.FULL)) {
                throw new IllegalArgumentException("MACs covering " + parts[6] + ", this client asked for "
                        + frameMac.word());
            }
            byte[] secret = keys.agree(serverPublicKey);
            return new SessionOffer(parts[1], port, sessionId,
                    new FrameAuth(SessionKeys.macKey(secret, sessionId, keys.publicKey(), serverPublicKey,
                            Frames.keyPurpose(coverage)), coverage), previous);
        } catch (IllegalArgumentException | InvalidKeyException e) {
            throw new IOException("slipstream: RPC server " + server + " answered a session that cannot be used ("
                    + e.getMessage() + "): " + answer, e);
        }
    }

    /** The server's answer (message 2) for a session it holds, given its own public key. */
    static String answer(InetSocketAddress fabricAddress, long sessionId, byte[] serverPublicKey, Previous previous,
            FrameAuth.Coverage coverage) {
        return Frames.FRAME_VERSION + " " + fabricAddress.getAddress().getHostAddress() + " " + fabricAddress.getPort() + " "
                + sessionId + " " + Base64.getEncoder().encodeToString(serverPublicKey) + " " + previous.word() + " "
                + coverage.word();
    }
}
