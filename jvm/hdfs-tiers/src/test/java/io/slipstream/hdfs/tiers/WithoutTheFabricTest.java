package io.slipstream.hdfs.tiers;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.URL;
import java.net.URLClassLoader;
import org.apache.hadoop.conf.Configuration;
import org.junit.jupiter.api.Test;

/**
 * The fabric is {@code provided}: a DataNode without the HDFS plugin's jar has none. This module's classes,
 * loaded (and verified) where the fabric's are hidden, must still give HHH-L-BB its TCP burst buffer, and
 * {@code bb.transport=fabric} a clear error naming the setting, not a class-loading failure of the DataNode.
 */
class WithoutTheFabricTest {
    /** Loads this module's classes itself (child first) and refuses every class of the fabric. */
    private static final class NoFabricLoader extends URLClassLoader {
        NoFabricLoader(URL classes, ClassLoader parent) {
            super(new URL[] {classes}, parent);
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            synchronized (getClassLoadingLock(name)) {
                if (name.startsWith("io.slipstream.fabric.")) {
                    throw new ClassNotFoundException(name + " (hidden: no fabric on this class path)");
                }
                if (name.startsWith("io.slipstream.hdfs.tiers.")) {
                    Class<?> loaded = findLoadedClass(name);
                    if (loaded == null) {
                        loaded = findClass(name);
                    }
                    if (resolve) {
                        resolveClass(loaded);
                    }
                    return loaded;
                }
                return super.loadClass(name, resolve);
            }
        }
    }

    @Test
    void theTcpBurstBufferNeedsNoFabricAndTheFabricOneSaysWhatIsMissing() throws Exception {
        URL classes = BurstBuffer.class.getProtectionDomain().getCodeSource().getLocation();
        try (NoFabricLoader loader = new NoFabricLoader(classes, getClass().getClassLoader())) {
            assertThrows(ClassNotFoundException.class, () -> loader.loadClass("io.slipstream.fabric.FabricNode"));
            Class<?> burstBuffer = Class.forName(BurstBuffer.class.getName(), true, loader);
            Class<?> tiersConf = Class.forName(TiersConf.class.getName(), true, loader);
            Method client = burstBuffer.getDeclaredMethod("client", tiersConf, String.class);
            client.setAccessible(true);
            Configuration conf = new Configuration(false);
            conf.set(TiersConf.MODE.key(), "hhh-l-bb");
            conf.set(TiersConf.BB_SERVERS.key(), "127.0.0.1:1");
            Object tcp = client.invoke(null, tiersConf.getConstructor(Configuration.class).newInstance(conf), "");
            assertEquals(BurstBufferTextClient.class.getName(), tcp.getClass().getName());
            ((AutoCloseable) tcp).close();
            conf.set(TiersConf.BB_TRANSPORT.key(), "fabric");
            Object fabricConf = tiersConf.getConstructor(Configuration.class).newInstance(conf);
            InvocationTargetException e = assertThrows(InvocationTargetException.class, () -> client.invoke(null, fabricConf, ""));
            assertInstanceOf(IllegalArgumentException.class, e.getCause());
            assertTrue(e.getCause().getMessage().contains(TiersConf.BB_TRANSPORT.key()), e.getCause().getMessage());
        }
    }
}
