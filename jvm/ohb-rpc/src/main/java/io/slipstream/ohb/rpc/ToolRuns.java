package io.slipstream.ohb.rpc;

import io.slipstream.hadoop.rpc.FabricRpcEngine;
import java.util.ArrayList;
import java.util.List;

/**
 * Runs one of Hadoop's own benchmark tools once per {@code --run} group of arguments and frames each run's
 * output for {@code ohb}: {@code OHB_TOOL_BEGIN <n>}, the tool's own output, then
 * {@code OHB_TOOL_END {json}} with the tool's exit code and the engine's counters for that run (the calls
 * this JVM sent over the fabric and over sockets), which {@code ohb} checks as the proof of the path.
 */
final class ToolRuns {
    /** One run of the tool with its own arguments; returns its exit code. */
    interface Tool {
        int run(String[] args) throws Exception;
    }

    private ToolRuns() {
    }

    /** {@code --run a b --run c} to {@code [[a, b], [c]]}; null when the first word is not {@code --run}. */
    static List<List<String>> split(List<String> args) {
        if (args.isEmpty() || !args.get(0).equals("--run")) {
            return null;
        }
        List<List<String>> runs = new ArrayList<>();
        for (String a : args) {
            if (a.equals("--run")) {
                runs.add(new ArrayList<>());
            } else {
                runs.get(runs.size() - 1).add(a);
            }
        }
        return runs;
    }

    /** Every run in order; true when all exited 0. */
    static boolean runAll(String config, List<List<String>> runs, Tool tool) {
        boolean ok = true;
        for (int i = 0; i < runs.size(); i++) {
            long fabricBefore = FabricRpcEngine.fabricCalls();
            long socketBefore = FabricRpcEngine.socketCalls();
            System.out.println("OHB_TOOL_BEGIN " + i);
            System.out.flush();
            int rc;
            try {
                rc = tool.run(runs.get(i).toArray(new String[0]));
            } catch (Exception e) {
                e.printStackTrace();
                rc = 1;
            }
            System.out.flush();
            System.out.println("OHB_TOOL_END {\"config\":\"" + config + "\",\"rc\":" + rc + ",\"fabric_calls\":"
                    + (FabricRpcEngine.fabricCalls() - fabricBefore) + ",\"socket_calls\":"
                    + (FabricRpcEngine.socketCalls() - socketBefore) + "}");
            System.out.flush();
            ok &= rc == 0;
        }
        return ok;
    }
}
