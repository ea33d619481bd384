package io.slipstream.hadoop.rpc;

import org.apache.hadoop.ipc.ProtocolInfo;
import org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.security.KerberosInfo;
import org.apache.hadoop.security.token.TokenInfo;

/**
 * Hadoop's echo protocol as a secured Hadoop protocol is declared: {@code @KerberosInfo} names the
 * configuration key of the server's principal (the client checks the server against it), {@code @TokenInfo}
 * the selector of its delegation tokens. Its protocol name is its class name, as Hadoop's are, so that
 * service-level authorization finds it ({@code Server.getProtocolClass}).
 */
@KerberosInfo(serverPrincipal = SecureEcho.SERVER_PRINCIPAL_KEY)
@TokenInfo(EchoTokens.Selector.class)
@ProtocolInfo(protocolName = SecureEcho.NAME, protocolVersion = 1)
interface SecureEcho extends TestProtobufRpcProto.BlockingInterface {
    String NAME = "io.slipstream.hadoop.rpc.SecureEcho";
    String SERVER_PRINCIPAL_KEY = "slipstream.test.echo.server.principal";
}
