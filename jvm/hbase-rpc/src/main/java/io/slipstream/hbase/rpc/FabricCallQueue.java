package io.slipstream.hbase.rpc;

import java.util.Collection;
import java.util.Iterator;
import java.util.concurrent.TimeUnit;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hbase.ipc.CallRunner;
import org.apache.hadoop.hbase.ipc.PluggableBlockingQueue;
import org.apache.hadoop.hbase.ipc.PriorityFunction;

/**
 * HBase's pluggable call queue ({@code hbase.ipc.server.callqueue.type=pluggable},
 * {@code hbase.ipc.server.callqueue.pluggable.queue.class.name=io.slipstream.hbase.rpc.FabricCallQueue}) for a
 * {@link FabricRpcServer}: a bounded FIFO like HBase's default queue, whose idle handlers pull the fabric's calls
 * themselves instead of the server's receiver threads ({@link HandlerQueue}, docs/hbase-rpc.md "Idle handlers
 * pull"). HBase makes one per queue of its general executor; the server finds them in its scheduler at start.
 * Under another server, or an executor whose handlers do not wait in {@code take()} (HBase's fast path, a
 * read/write split), it is a plain queue and the receiver threads pull.
 */
public final class FabricCallQueue extends PluggableBlockingQueue {
    private final HandlerQueue<CallRunner> calls;

    /** The constructor HBase's {@code RpcExecutor} calls (its queue length, at least 250). */
    public FabricCallQueue(int maxQueueLength, PriorityFunction priority, Configuration conf) {
        super(maxQueueLength, priority, conf);
        this.calls = new HandlerQueue<>(maxQueueLength);
    }

    HandlerQueue<CallRunner> handlerQueue() {
        return calls;
    }

    @Override
    public boolean add(CallRunner e) {
        return calls.add(e);
    }

    @Override
    public boolean offer(CallRunner e) {
        return calls.offer(e);
    }

    @Override
    public void put(CallRunner e) throws InterruptedException {
        calls.put(e);
    }

    @Override
    public boolean offer(CallRunner e, long timeout, TimeUnit unit) throws InterruptedException {
        return calls.offer(e, timeout, unit);
    }

    @Override
    public CallRunner take() throws InterruptedException {
        return calls.take();
    }

    @Override
    public CallRunner poll(long timeout, TimeUnit unit) throws InterruptedException {
        return calls.poll(timeout, unit);
    }

    @Override
    public int remainingCapacity() {
        return calls.remainingCapacity();
    }

    @Override
    public boolean remove(Object o) {
        return calls.remove(o);
    }

    @Override
    public boolean contains(Object o) {
        return calls.contains(o);
    }

    @Override
    public int drainTo(Collection<? super CallRunner> c) {
        return calls.drainTo(c);
    }

    @Override
    public int drainTo(Collection<? super CallRunner> c, int maxElements) {
        return calls.drainTo(c, maxElements);
    }

    @Override
    public CallRunner remove() {
        return calls.remove();
    }

    @Override
    public CallRunner poll() {
        return calls.poll();
    }

    @Override
    public CallRunner element() {
        return calls.element();
    }

    @Override
    public CallRunner peek() {
        return calls.peek();
    }

    @Override
    public int size() {
        return calls.size();
    }

    @Override
    public boolean isEmpty() {
        return calls.isEmpty();
    }

    @Override
    public Iterator<CallRunner> iterator() {
        return calls.iterator();
    }

    @Override
    public Object[] toArray() {
        return calls.toArray();
    }

    @Override
    public <T> T[] toArray(T[] a) {
        return calls.toArray(a);
    }

    @Override
    public boolean containsAll(Collection<?> c) {
        return calls.containsAll(c);
    }

    @Override
    public boolean addAll(Collection<? extends CallRunner> c) {
        return calls.addAll(c);
    }

    @Override
    public boolean removeAll(Collection<?> c) {
        return calls.removeAll(c);
    }

    @Override
    public boolean retainAll(Collection<?> c) {
        return calls.retainAll(c);
    }

    @Override
    public void clear() {
        calls.clear();
    }

    @Override
    public String toString() {
        return "FabricCallQueue" + calls;
    }
}
