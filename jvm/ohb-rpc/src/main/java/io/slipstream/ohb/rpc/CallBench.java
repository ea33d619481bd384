package io.slipstream.ohb.rpc;

import io.slipstream.hadoop.rpc.FabricRpcEngine;
import java.util.Arrays;
import java.util.List;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.ipc.ProtobufRpcEngine2;
import org.apache.hadoop.ipc.RPCCallBenchmark;
import org.apache.hadoop.ipc.TestRpcBase;
import org.apache.hadoop.util.ToolRunner;

/**
 * {@code ohb rpc callbench}'s JVM side: Hadoop's own {@code RPCCallBenchmark} (hadoop-common's test jar),
 * unmodified, with its own main's arguments, for one configuration ({@code vanilla}, {@code fabric},
 * {@code fabric-tcp}) per process; its server and its clients run in this process, as the tool does.
 *
 * <p>The tool picks its engine with {@code RPC.setProtocolEngine(conf, TestRpcService.class,
 * ProtobufRpcEngine2.class)}, which only sets {@code rpc.engine.<protocol>} when the configuration has no
 * value yet (its {@code -e} flag accepts only {@code protobuf}). So the engine is chosen from outside, as
 * for any Hadoop program: the configuration handed to {@code ToolRunner} already names
 * {@code FabricRpcEngine} for {@code TestRpcBase$TestRpcService}, and the tool's server
 * ({@code RPC.Builder}) and clients ({@code RPC.getProxy}) both use it.
 *
 * <p>Arguments: {@code <config> --run <tool args...> [--run <tool args...>]...}; output framed by
 * {@link ToolRuns}.
 */
public final class CallBench {
    private CallBench() {
    }

    public static void main(String[] args) {
        List<List<String>> runs = args.length < 2 ? null : ToolRuns.split(Arrays.asList(args).subList(1, args.length));
        if (runs == null) {
            System.err.println("usage: CallBench vanilla|fabric|fabric-tcp --run <RPCCallBenchmark args> [--run ...]");
            System.exit(2);
        }
        String config = args[0];
        Configuration conf = RpcBench.conf(config);
        conf.set("rpc.engine." + TestRpcBase.TestRpcService.class.getName(),
                (config.equals("vanilla") ? ProtobufRpcEngine2.class : FabricRpcEngine.class).getName());
        // Warm-up, outside the framed runs (ohb reads only those): the first run's arguments for 5 s, so the
        // first point does not measure the JIT (RpcBench's thr: 7.2k calls/s after 0.5 s, 19.6k after 8 s).
        List<String> warmUp = new java.util.ArrayList<>(runs.get(0));
        int seconds = warmUp.indexOf("-t");
        if (seconds >= 0 && seconds + 1 < warmUp.size()) {
            warmUp.set(seconds + 1, "5");
        }
        System.out.println("CallBench: warm-up run, not measured: " + warmUp);
        try {
            ToolRunner.run(new Configuration(conf), new RPCCallBenchmark(), warmUp.toArray(new String[0]));
        } catch (Exception e) {
            System.err.println("CallBench: the warm-up run failed: " + e);
            System.exit(1);
        }
        // A fresh Configuration per run: ToolRunner's GenericOptionsParser writes into it.
        boolean ok = ToolRuns.runAll(config, runs,
                toolArgs -> ToolRunner.run(new Configuration(conf), new RPCCallBenchmark(), toolArgs));
        // The tool leaves its client proxies (and their threads) open: exit explicitly.
        System.exit(ok ? 0 : 1);
    }
}
