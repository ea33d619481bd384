/**
 * What the RPC engines' call queues share, whose idle handlers pull fabric calls themselves
 * ({@link io.slipstream.fabric.pull.CountedCallQueue}). JDK only: it knows no engine, and does not call the
 * fabric (the engines' queues pull through their servers).
 */
package io.slipstream.fabric.pull;
