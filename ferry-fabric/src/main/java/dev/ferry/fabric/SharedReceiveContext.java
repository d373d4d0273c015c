package dev.ferry.fabric;

import java.lang.foreign.MemorySegment;

import static dev.ferry.fabric.InfoDescriptor.EP_MSG;
import static dev.ferry.fabric.InfoDescriptor.MSG_RECV;

/**
 * A shared receive context ({@code fi_srx_context}): one receive queue for many connected
 * endpoints. Receives are posted here once, and a message arriving on any endpoint
 * {@link Endpoint#bind(SharedReceiveContext) bound} to it takes the oldest one.
 *
 * <p>Completions of those receives are reported to the completion queue each endpoint bound for
 * {@code Fi.RECV}, not to the context's own; and they do not name the endpoint the message came
 * on: the receiver learns the sender from the message itself. A message that finds no receive
 * posted waits at the provider (tcp) or is refused (verbs: receiver-not-ready).
 */
public final class SharedReceiveContext extends FabricObject {

    private final MemorySegment recvFn;

    SharedReceiveContext(long fid, Domain domain) {
        super(fid, domain);
        this.recvFn = LibFabric.function(LibFabric.word(fid, EP_MSG), MSG_RECV);
    }

    /**
     * Reports cancelled receives (on close) to {@code cq}. Returns false where the provider binds
     * no queue to the context (verbs), true once bound (tcp requires it).
     */
    public boolean bind(CompletionQueue cq) {
        ensureOpen();
        try {
            bindTo(cq, Fi.RECV, "fi_srx_bind(cq)");
            return true;
        } catch (FabricException e) {
            if (e.errno() == Errno.ENOSYS) {
                return false;
            }
            throw e;
        }
    }

    /** Posts a receive buffer; false on {@code -FI_EAGAIN} (the context is full). */
    public boolean recv(long buffer, long length, long descriptor, long context) {
        try {
            long rc = (long) LibFabric.L_JJJJJJ.invokeExact(recvFn, fid, buffer, length, descriptor, Fi.ADDR_UNSPEC,
                    context);
            if (rc == -Errno.EAGAIN) {
                return false;
            }
            LibFabric.check(rc, "fi_recv(srx)");
            return true;
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }
}
