package dev.ferry.rpc.fault;

import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

import dev.ferry.rpc.TransportOpener;
import dev.ferry.transport.MessageHandler;
import dev.ferry.transport.Transport;
import dev.ferry.transport.TransportConfig;

/**
 * Opens {@link FaultyTransport}s (pass it where a {@link TransportOpener} goes) and commands
 * them: all of them, or those of one provider.
 */
public final class FaultInjector implements TransportOpener {

    private final List<FaultyTransport> transports = new CopyOnWriteArrayList<>();
    private final List<String> providers = new CopyOnWriteArrayList<>();
    private final String only;

    /** Wraps every transport it opens. */
    public FaultInjector() {
        this(null);
    }

    /** Wraps only the transports of {@code provider}; opens the others plainly. */
    public FaultInjector(String provider) {
        this.only = provider;
    }

    @Override
    public Transport open(TransportConfig config, MessageHandler handler) {
        if (only != null && !only.equals(config.provider())) {
            return TransportOpener.DEFAULT.open(config, handler);
        }
        FaultyTransport transport = FaultyTransport.open(config, handler);
        transports.add(transport);
        providers.add(config.provider());
        return transport;
    }

    /** The transports opened so far. */
    public List<FaultyTransport> transports() {
        return List.copyOf(transports);
    }

    /** Fails every link of every transport now. */
    public void failLinks() {
        transports.forEach(FaultyTransport::failLinks);
    }

    /** Refuses connects on every transport while {@code refuse}. */
    public void refuseConnects(boolean refuse) {
        transports.forEach(t -> t.refuseConnects(refuse));
    }

    /** Drops the next {@code count} frames of every transport. */
    public void dropNext(int count) {
        transports.forEach(t -> t.dropNext(count));
    }

    /** Delays the next {@code count} frames of every transport by {@code millis}. */
    public void delayNext(int count, long millis) {
        transports.forEach(t -> t.delayNext(count, millis));
    }

    /** Clears every pending fault. */
    public void heal() {
        transports.forEach(FaultyTransport::heal);
    }

    /** Links failed so far, over all transports. */
    public long linksFailed() {
        return transports.stream().mapToLong(FaultyTransport::linksFailed).sum();
    }
}
