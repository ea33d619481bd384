package io.slipstream.mapreduce;

import io.slipstream.fabric.FabricUnavailableException;
import io.slipstream.shuffle.RequestAuthenticator;
import io.slipstream.shuffle.ShuffleServer;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import javax.crypto.SecretKey;
import org.apache.hadoop.mapred.JobConf;
import org.apache.hadoop.mapred.ShuffleHandler;
import org.apache.hadoop.mapreduce.JobID;
import org.apache.hadoop.yarn.server.api.ApplicationTerminationContext;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Hadoop's {@code mapreduce_shuffle} aux service, unchanged (the HTTP shuffle keeps serving jobs
 * without the plugin, and the plugin's fallback), plus the same map outputs over the fabric.
 * Registered as {@code yarn.nodemanager.aux-services.mapreduce_shuffle.class}, it receives every
 * job's token as the ShuffleHandler does; a fabric request for a job is checked against that
 * job's shuffle secret, so a reducer of one job cannot read another's outputs.
 */
public class SlipstreamShuffleHandler extends ShuffleHandler {
    private static final Logger LOG = LoggerFactory.getLogger(SlipstreamShuffleHandler.class);

    private volatile NodeFabric fabric;
    private volatile JobConf jobConf;
    /** The least this NodeManager answers with ({@code full}: reducers asking for header-only MACs are refused). */
    private volatile RequestAuthenticator.ResponseMac responseMac = RequestAuthenticator.ResponseMac.HEADER;
    private final Map<String, ShuffleServer.Scope> scopes = new ConcurrentHashMap<>();

    @Override
    protected void serviceStart() throws Exception {
        super.serviceStart();
        MapReduceConf conf = new MapReduceConf(getConfig());
        jobConf = new JobConf(getConfig());
        responseMac = conf.responseMac;
        int shufflePort = ShuffleHandler.deserializeMetaData(getMetaData());
        try {
            fabric = NodeFabric.acquire(conf, shufflePort, this);
        } catch (FabricUnavailableException | RuntimeException e) {
            if (conf.fallback == MapReduceConf.Fallback.NEVER) {
                throw new IllegalStateException("slipstream: the fabric cannot start on this NodeManager ("
                        + MapReduceConf.FALLBACK.key() + "=never): " + e.getMessage(), e);
            }
            LOG.warn("slipstream: the fabric cannot start on this NodeManager, map outputs are served over HTTP only: {}", e.toString());
        }
    }

    @Override
    protected void serviceStop() throws Exception {
        NodeFabric started = fabric;
        fabric = null;
        if (started != null) {
            started.release(this);
        }
        scopes.clear();
        super.serviceStop();
    }

    @Override
    public void stopApplication(ApplicationTerminationContext context) {
        JobID job = new JobID(Long.toString(context.getApplicationId().getClusterTimestamp()), context.getApplicationId().getId());
        scopes.keySet().removeIf(scope -> scope.endsWith("/" + job));
        super.stopApplication(context);
    }

    /** What a request's scope names on this NodeManager: a job it knows, under that job's secret. */
    ShuffleServer.Scope scope(String scope) {
        ShuffleServer.Scope known = scopes.get(scope);
        if (known != null) {
            return known;
        }
        JobID job;
        try {
            job = MapBlocks.scopeJob(scope);
        } catch (IllegalArgumentException e) {
            throw new RequestAuthenticator.AuthenticationException("malformed scope");
        }
        String user = userRsrc.get(job.toString());
        SecretKey secret;
        try {
            secret = secretManager.retrieveTokenSecret(job.toString());
        } catch (org.apache.hadoop.security.token.SecretManager.InvalidToken e) {
            secret = null;
        }
        if (user == null || secret == null) {
            throw new RequestAuthenticator.AuthenticationException("unknown job " + job);
        }
        ShuffleServer.Scope created = new ShuffleServer.Scope(RequestAuthenticator.scoped(scope, MapBlocks.secretText(secret), responseMac),
                new JobMapOutputs(getAuxiliaryLocalPathHandler(), jobConf, job, user), null);
        ShuffleServer.Scope raced = scopes.putIfAbsent(scope, created);
        return raced != null ? raced : created;
    }
}
