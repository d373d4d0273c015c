package dev.ferry.fabric;

import java.lang.foreign.MemorySegment;

import static dev.ferry.fabric.InfoDescriptor.DOMAIN_ATTR;
import static dev.ferry.fabric.InfoDescriptor.EP_ATTR;
import static dev.ferry.fabric.InfoDescriptor.FABRIC_ATTR;
import static dev.ferry.fabric.InfoDescriptor.INFO;
import static dev.ferry.fabric.InfoDescriptor.RX_ATTR;
import static dev.ferry.fabric.InfoDescriptor.TX_ATTR;
import static dev.ferry.fabric.InfoDescriptor.offset;
import static dev.ferry.fabric.LibFabric.int32;
import static dev.ferry.fabric.LibFabric.word;
import static java.lang.foreign.ValueLayout.JAVA_BYTE;

/**
 * One {@code struct fi_info}: a provider, domain and endpoint type that can serve the hints,
 * with the attributes Ferry needs read out. Valid while the {@link InfoList} (or the
 * {@link ConnectionEvent}) it came from is open.
 */
public final class FabricInfo {

    final long address;
    private final String provider;
    private final String fabricName;
    private final String domainName;
    private final EndpointType endpointType;
    private final long caps;
    private final long mode;
    private final int mrMode;
    private final int addressFormat;
    private final long injectSize;
    private final long maxMessageSize;
    private final long txSize;
    private final long rxSize;
    private final long cqDataSize;
    private final long mrKeySize;
    private final long msgOrder;
    private final int threading;
    private final int dataProgress;
    private final boolean sharesReceiveContext;
    private final byte[] sourceAddress;
    private final byte[] destinationAddress;

    FabricInfo(long address) {
        this.address = address;
        long tx = word(address, offset(INFO, "tx_attr"));
        long rx = word(address, offset(INFO, "rx_attr"));
        long ep = word(address, offset(INFO, "ep_attr"));
        long domain = word(address, offset(INFO, "domain_attr"));
        long fabric = word(address, offset(INFO, "fabric_attr"));
        this.caps = word(address, offset(INFO, "caps"));
        this.mode = word(address, offset(INFO, "mode"));
        this.addressFormat = int32(address, offset(INFO, "addr_format"));
        this.provider = LibFabric.string(word(fabric, offset(FABRIC_ATTR, "prov_name")));
        this.fabricName = LibFabric.string(word(fabric, offset(FABRIC_ATTR, "name")));
        this.domainName = LibFabric.string(word(domain, offset(DOMAIN_ATTR, "name")));
        this.endpointType = EndpointType.of(int32(ep, offset(EP_ATTR, "type")));
        this.maxMessageSize = word(ep, offset(EP_ATTR, "max_msg_size"));
        this.mrMode = int32(domain, offset(DOMAIN_ATTR, "mr_mode"));
        this.cqDataSize = word(domain, offset(DOMAIN_ATTR, "cq_data_size"));
        this.mrKeySize = word(domain, offset(DOMAIN_ATTR, "mr_key_size"));
        this.threading = int32(domain, offset(DOMAIN_ATTR, "threading"));
        this.dataProgress = int32(domain, offset(DOMAIN_ATTR, "data_progress"));
        this.injectSize = word(tx, offset(TX_ATTR, "inject_size"));
        this.txSize = word(tx, offset(TX_ATTR, "size"));
        this.msgOrder = word(tx, offset(TX_ATTR, "msg_order"));
        this.rxSize = word(rx, offset(RX_ATTR, "size"));
        this.sharesReceiveContext = word(ep, offset(EP_ATTR, "rx_ctx_cnt")) == InfoDescriptor.SHARED_CONTEXT;
        this.sourceAddress = bytes(word(address, offset(INFO, "src_addr")), word(address, offset(INFO, "src_addrlen")));
        this.destinationAddress = bytes(word(address, offset(INFO, "dest_addr")),
                word(address, offset(INFO, "dest_addrlen")));
    }

    private static byte[] bytes(long pointer, long length) {
        if (pointer == 0 || length <= 0) {
            return new byte[0];
        }
        return MemorySegment.ofAddress(pointer).reinterpret(length).toArray(JAVA_BYTE);
    }

    /** The provider name, e.g. {@code tcp}, {@code shm}, {@code tcp;ofi_rxm}. */
    public String provider() {
        return provider;
    }

    /** The fabric name. */
    public String fabricName() {
        return fabricName;
    }

    /** The domain name, e.g. the interface {@code lo}. */
    public String domainName() {
        return domainName;
    }

    /** The endpoint type. */
    public EndpointType endpointType() {
        return endpointType;
    }

    /** The capabilities granted. */
    public long caps() {
        return caps;
    }

    /** The mode bits the provider asks Ferry to honour. */
    public long mode() {
        return mode;
    }

    /** The memory-registration modes in force ({@code Fi.MR_*}). */
    public int mrMode() {
        return mrMode;
    }

    /** The address format ({@code Fi.SOCKADDR_IN}, {@code Fi.ADDR_STR}, ...). */
    public int addressFormat() {
        return addressFormat;
    }

    /** The largest message that may be injected (sent without a completion). */
    public long injectSize() {
        return injectSize;
    }

    /** The largest message the endpoint sends. */
    public long maxMessageSize() {
        return maxMessageSize;
    }

    /** The transmit queue depth. */
    public long txSize() {
        return txSize;
    }

    /** The receive queue depth. */
    public long rxSize() {
        return rxSize;
    }

    /** Bytes of immediate data a send or write may carry (0: none). */
    public long cqDataSize() {
        return cqDataSize;
    }

    /** Bytes in a memory key. */
    public long mrKeySize() {
        return mrKeySize;
    }

    /** The message ordering the transmit side guarantees ({@code FI_ORDER_*} bits). */
    public long msgOrder() {
        return msgOrder;
    }

    /**
     * Whether endpoints opened from this info receive through a {@link SharedReceiveContext}
     * ({@code ep_attr.rx_ctx_cnt == FI_SHARED_CONTEXT}); ask for it with
     * {@link Hints#withSharedReceive()}.
     */
    public boolean sharesReceiveContext() {
        return sharesReceiveContext;
    }

    /** The threading model. */
    public int threading() {
        return threading;
    }

    /** The data progress model. */
    public int dataProgress() {
        return dataProgress;
    }

    /** The local address the provider resolved, or empty. */
    public byte[] sourceAddress() {
        return sourceAddress.clone();
    }

    /** The remote address the provider resolved (for connecting), or empty. */
    public byte[] destinationAddress() {
        return destinationAddress.clone();
    }

    /** libfabric's own rendering of this {@code fi_info} ({@code fi_tostr}). */
    public String describe() {
        try {
            return LibFabric.string((long) LibFabric.FI_TOSTR.invokeExact(address, LibFabric.FI_TYPE_INFO));
        } catch (Throwable t) {
            throw LibFabric.rethrow(t);
        }
    }

    @Override
    public String toString() {
        return provider + " " + endpointType + " domain=" + domainName + " mr_mode=" + Fi.mrModeNames(mrMode)
                + " inject=" + injectSize + " max_msg=" + maxMessageSize;
    }
}
