package io.slipstream.ohb.rpc;

import org.apache.hadoop.ipc.ProtocolInfo;
import org.apache.hadoop.ipc.protobuf.TestProtos.EchoRequestProto;
import org.apache.hadoop.ipc.protobuf.TestProtos.EchoResponseProto;
import org.apache.hadoop.ipc.protobuf.TestRpcServiceProtos.TestProtobufRpcProto;
import org.apache.hadoop.thirdparty.protobuf.BlockingService;
import org.apache.hadoop.thirdparty.protobuf.RpcController;

/**
 * Hadoop's echo protocol ({@code TestProtobufRpcProto.echo}) under two client interfaces of one protocol
 * name, because Hadoop fixes the engine per interface class for the whole JVM: {@link Fabric} takes
 * the fabric engine (both fabric configurations: the transport is per call's configuration),
 * {@link Vanilla} Hadoop's own ProtobufRpcEngine2.
 */
final class BenchProtocols {
    static final String NAME = "io.slipstream.ohb.rpc.Echo";

    private BenchProtocols() {
    }

    @ProtocolInfo(protocolName = NAME, protocolVersion = 1)
    interface Fabric extends TestProtobufRpcProto.BlockingInterface {
    }

    @ProtocolInfo(protocolName = NAME, protocolVersion = 1)
    interface Vanilla extends TestProtobufRpcProto.BlockingInterface {
    }

    /** The server: echo answers its message; the protocol's other methods are not used here. */
    static BlockingService echoService() {
        return TestProtobufRpcProto.newReflectiveBlockingService(
                (TestProtobufRpcProto.BlockingInterface) java.lang.reflect.Proxy.newProxyInstance(
                        BenchProtocols.class.getClassLoader(), new Class<?>[] {TestProtobufRpcProto.BlockingInterface.class},
                        (proxy, method, args) -> {
                            if (method.getName().equals("echo")) {
                                return echo((RpcController) args[0], (EchoRequestProto) args[1]);
                            }
                            throw new org.apache.hadoop.thirdparty.protobuf.ServiceException(
                                    "ohb rpc: " + method.getName() + " is not part of the benchmark");
                        }));
    }

    private static EchoResponseProto echo(RpcController controller, EchoRequestProto request) {
        return EchoResponseProto.newBuilder().setMessage(request.getMessage()).build();
    }
}
