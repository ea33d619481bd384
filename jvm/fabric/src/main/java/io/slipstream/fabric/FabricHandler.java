package io.slipstream.fabric;

/**
 * Serves requests on Java threads started by {@link FabricNode#serve(FabricHandler, int)}.
 *
 * <p>The handler answers each request once, here or later from another thread. If it throws before
 * answering, the request fails with the exception's text; the thread goes on serving.
 */
@FunctionalInterface
public interface FabricHandler {
    void handle(FabricRequest request) throws Exception;
}
