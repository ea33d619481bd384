package io.slipstream.fabric;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.net.Inet4Address;
import java.net.InetAddress;
import java.net.NetworkInterface;
import java.util.Collections;
import org.junit.jupiter.api.Test;

/** The devices of a listen address: its own device, never "all" unless the address is the wildcard. */
class NetDevicesTest {

    @Test
    void loopbackAddressesUseLoTheWildcardUsesAll() {
        assertEquals("lo", NetDevices.forAddress("127.0.0.1", "x.netDevices"));
        assertEquals("lo", NetDevices.forAddress("127.0.0.2", "x.netDevices"), "the rest of 127/8 is on lo too");
        assertEquals("all", NetDevices.forAddress("0.0.0.0", "x.netDevices"));
    }

    @Test
    void eachAddressOfThisHostMapsToItsOwnDevice() throws Exception {
        for (NetworkInterface device : Collections.list(NetworkInterface.getNetworkInterfaces())) {
            for (InetAddress address : Collections.list(device.getInetAddresses())) {
                if (address instanceof Inet4Address && !address.isLoopbackAddress()) {
                    assertEquals(device.getName(), NetDevices.forAddress(address.getHostAddress(), "x").split(",")[0], address.toString());
                }
            }
        }
    }

    @Test
    void anAddressOnNoDeviceNamesTheSettingToUse() throws Exception {
        // A documentation address (RFC 5737) on no device here; resolving a literal sends nothing.
        String elsewhere = null;
        for (String candidate : new String[] {"198.51.100.77", "203.0.113.77", "192.0.2.77"}) {
            if (NetworkInterface.getByInetAddress(InetAddress.getByName(candidate)) == null) {
                elsewhere = candidate;
                break;
            }
        }
        assertTrue(elsewhere != null, "every candidate address is on a device of this host");
        String address = elsewhere;
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> NetDevices.forAddress(address, "engine.netDevices"));
        assertTrue(e.getMessage().contains("engine.netDevices"), e.getMessage());
    }
}
