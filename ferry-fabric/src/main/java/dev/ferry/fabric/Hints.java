package dev.ferry.fabric;

import java.util.Objects;

/**
 * What Ferry asks of {@code fi_getinfo}: a provider, an endpoint type, capabilities, the mode
 * bits and memory-registration modes it can honour, and optionally a node and service.
 *
 * @param provider provider name ({@code shm}, {@code tcp}, {@code verbs}, {@code tcp;ofi_rxm}), or null for any
 * @param endpointType the endpoint type wanted
 * @param caps capabilities wanted, e.g. {@code Fi.MSG | Fi.RMA}
 * @param mode mode bits Ferry supports; by default {@code FI_CONTEXT | FI_CONTEXT2}, which
 *     {@link OperationContexts} satisfies, and {@code FI_RX_CQ_DATA}: on providers that keep it
 *     in the info's mode (verbs MSG) an RMA write with immediate data consumes a receive posted
 *     at the target ({@link Domain#remoteDataConsumesReceive()}); verbs offers immediate data
 *     only to applications that accept this
 * @param mrMode memory-registration modes Ferry handles
 * @param threading requested threading model, {@link Fi#THREAD_UNSPEC} for the provider's choice
 * @param node host to resolve, or null
 * @param service port or service to resolve, or null
 * @param source whether node/service name the local side ({@code FI_SOURCE}, for listeners)
 * @param sharedReceive whether endpoints must be able to receive through a
 *     {@link SharedReceiveContext} ({@code ep_attr.rx_ctx_cnt = FI_SHARED_CONTEXT})
 */
public record Hints(String provider, EndpointType endpointType, long caps, long mode, int mrMode, int threading,
        String node, String service, boolean source, boolean sharedReceive) {

    /** Checks the endpoint type is given. */
    public Hints {
        Objects.requireNonNull(endpointType, "endpointType");
    }

    /** Hints for endpoints with receive queues of their own. */
    public Hints(String provider, EndpointType endpointType, long caps, long mode, int mrMode, int threading,
            String node, String service, boolean source) {
        this(provider, endpointType, caps, mode, mrMode, threading, node, service, source, false);
    }

    /** Messages and RMA on {@code provider} with endpoints of {@code type}. */
    public static Hints of(String provider, EndpointType type) {
        return new Hints(provider, type, Fi.MSG | Fi.RMA, Fi.CONTEXT | Fi.CONTEXT2 | Fi.RX_CQ_DATA, Fi.MR_MODES_SUPPORTED,
                Fi.THREAD_UNSPEC, null, null, false);
    }

    /** These hints resolving {@code node}:{@code service} as the local (listening) address. */
    public Hints localAddress(String host, String port) {
        return new Hints(provider, endpointType, caps, mode, mrMode, threading, host, port, true, sharedReceive);
    }

    /** These hints resolving {@code node}:{@code service} as the remote address to connect to. */
    public Hints remoteAddress(String host, String port) {
        return new Hints(provider, endpointType, caps, mode, mrMode, threading, host, port, false, sharedReceive);
    }

    /** These hints with other memory-registration modes. */
    public Hints withMrMode(int value) {
        return new Hints(provider, endpointType, caps, mode, value, threading, node, service, source, sharedReceive);
    }

    /** These hints with another threading model. */
    public Hints withThreading(int value) {
        return new Hints(provider, endpointType, caps, mode, mrMode, value, node, service, source, sharedReceive);
    }

    /** These hints asking for endpoints that receive through a shared receive context. */
    public Hints withSharedReceive() {
        return new Hints(provider, endpointType, caps, mode, mrMode, threading, node, service, source, true);
    }
}
