package io.slipstream.spark.it;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

/**
 * A Spark installation built by {@code tools/spark-home.sh} (through {@code make spark-homes}): a folder with
 * {@code jars/}. The homes the tests run on are the ones listed in {@code build/spark/homes.txt}, which the Makefile
 * writes from its version variables.
 */
final class SparkHome {

    final String version;
    final Path jars;

    private SparkHome(String version, Path jars) {
        this.version = version;
        this.jars = jars;
    }

    /** Every listed home; fails (does not skip) when there is none, since then nothing would be tested. */
    static List<SparkHome> listed() throws IOException {
        String homesProperty = System.getProperty("slipstream.it.sparkHomes");
        if (homesProperty == null) {
            fail("system property slipstream.it.sparkHomes (the Spark homes' folder) is not set: run through Maven");
        }
        Path homes = Path.of(homesProperty).toAbsolutePath().normalize();
        Path list = homes.resolve("homes.txt");
        if (!Files.isRegularFile(list)) {
            fail(list + " is missing: build the Spark homes first (make spark-homes)");
        }
        List<SparkHome> listed = Files.readAllLines(list).stream().map(String::trim).filter(v -> !v.isEmpty())
                .map(version -> new SparkHome(version, homes.resolve(version).resolve("jars"))).toList();
        if (listed.isEmpty()) {
            fail(list + " lists no Spark version");
        }
        for (SparkHome home : listed) {
            if (!Files.isRegularFile(home.launcherJar())) {
                fail("Spark home " + home.jars.getParent() + " is missing or incomplete: make spark-homes");
            }
        }
        return listed;
    }

    Path launcherJar() {
        return jars.resolve("spark-launcher_2.13-" + version + ".jar");
    }

    /**
     * The JVM options that spark-submit gives a driver on Java 17 ({@code --add-opens ...}), from this version's own
     * launcher: a driver started with plain {@code java} needs them, and each version has its own list.
     */
    List<String> driverModuleOptions() throws ReflectiveOperationException, IOException {
        try (URLClassLoader launcher = new URLClassLoader(new URL[] {launcherJar().toUri().toURL()}, null)) {
            Class<?> moduleOptions = launcher.loadClass("org.apache.spark.launcher.JavaModuleOptions");
            String options = (String) moduleOptions.getMethod("defaultModuleOptions").invoke(null);
            return List.of(options.trim().split("\\s+"));
        }
    }

    @Override
    public String toString() {
        return version;
    }
}
