package io.slipstream.fabric;

/** Run in a child JVM by {@link NativeLoaderTest}: what a plugin does, falling back when the fabric is unavailable. */
public final class StartProbeMain {
    private StartProbeMain() {
    }

    public static void main(String[] args) {
        try (FabricNode node = FabricNode.start(FabricConfig.defaults())) {
            System.out.println("STARTED " + node);
        } catch (FabricUnavailableException e) {
            System.out.println("FALLBACK " + e.getMessage());
        }
    }
}
