package io.slipstream.fabric;

import java.io.IOException;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.net.SocketException;
import java.net.UnknownHostException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

/**
 * Which network devices a node may use ({@link FabricConfig#netDevices()}, UCX_NET_DEVICES syntax)
 * when it listens on a given address: the device that carries the address, plus the RDMA ports
 * behind it (an IPoIB or RoCE interface's HCA), so the fabric reaches no further than the engine
 * that chose the address; every device only for the wildcard address. UCX's TCP transport listens
 * on every device it uses, which is why "all" is never the answer for a specific address.
 */
public final class NetDevices {
    private NetDevices() {
    }

    /**
     * The devices for a node listening on {@code host}. An address on no device of this host is an
     * {@link IllegalArgumentException} naming {@code settingKey}, the engine setting that names the
     * devices explicitly.
     */
    public static String forAddress(String host, String settingKey) {
        InetAddress address;
        try {
            address = InetAddress.getByName(host);
        } catch (UnknownHostException e) {
            throw new IllegalArgumentException("slipstream: cannot resolve the bind address " + host, e);
        }
        if (address.isAnyLocalAddress()) {
            return "all";
        }
        NetworkInterface device;
        try {
            // 127.0.0.2 and the rest of 127/8 are on lo without being listed as its addresses.
            device = NetworkInterface.getByInetAddress(address.isLoopbackAddress() && NetworkInterface.getByInetAddress(address) == null
                    ? InetAddress.getLoopbackAddress() : address);
        } catch (SocketException e) {
            throw new IllegalArgumentException("slipstream: cannot list the network devices: " + e.getMessage(), e);
        }
        if (device == null) {
            throw new IllegalArgumentException("slipstream: the bind address " + host
                    + " is on no network device of this host; set " + settingKey);
        }
        StringBuilder devices = new StringBuilder(device.getName());
        for (String port : rdmaPortsBehind(device.getName())) {
            devices.append(',').append(port);
        }
        return devices.toString();
    }

    /** An IPoIB (or RoCE) interface's RDMA ports as UCX names them ({@code mlx5_0:1}), from sysfs; none for other devices. */
    static List<String> rdmaPortsBehind(String interfaceName) {
        Path net = Path.of("/sys/class/net", interfaceName);
        Path hcas = net.resolve("device/infiniband");
        if (!Files.isDirectory(hcas)) {
            return List.of();
        }
        int port = 1;
        try {
            port = Integer.parseInt(Files.readString(net.resolve("dev_port")).trim()) + 1;
        } catch (IOException | NumberFormatException e) {
            // Single-port HCAs have no dev_port: port 1.
        }
        List<String> ports = new ArrayList<>();
        try (Stream<Path> names = Files.list(hcas)) {
            for (Path hca : names.sorted().toList()) {
                ports.add(hca.getFileName() + ":" + port);
            }
        } catch (IOException e) {
            return List.of();
        }
        return ports;
    }
}
