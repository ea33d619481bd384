package io.slipstream.hdfs.tiers;

import java.io.IOException;

/**
 * HHH-M refused a new block: keeping all its replicas in RAM would take the cluster's RAM_DISK storages
 * past the memory budget. Reaches the writing client as a RemoteException naming this class; public with a
 * (String) constructor so that {@code RemoteException.unwrapRemoteException} can rebuild it.
 */
public class TierBudgetExceededException extends IOException {
    private static final long serialVersionUID = 1L;

    public TierBudgetExceededException(String message) {
        super(message);
    }
}
