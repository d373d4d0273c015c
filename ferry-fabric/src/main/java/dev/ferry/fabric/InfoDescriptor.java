package dev.ferry.fabric;

import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemoryLayout.PathElement;
import java.lang.foreign.StructLayout;

import static java.lang.foreign.ValueLayout.JAVA_INT;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

/**
 * Layouts of {@code struct fi_info} and the attribute structs it points to (libfabric 1.x,
 * LP64), and of the queue entries Ferry reads. Offsets are derived from the layouts, never
 * written by hand; {@code FabricLayoutTest} checks every field against {@code fi_tostr}.
 *
 * <pre>
 * fi_info (120 B)                     fi_domain_attr (192 B)
 * +-------------------------+        +----------------------------+
 * |  0 next                 |        |  0 domain     8 name       |
 * |  8 caps     16 mode     |        | 16 threading 20 ctl_prog   |
 * | 24 addr_format (u32)    |        | 24 data_prog 28 res_mgmt   |
 * | 32 src_addrlen 40 dest_ |        | 32 av_type   36 mr_mode    |
 * | 48 src_addr  56 dest_addr        | 40 mr_key_size 48 cq_data_ |
 * | 64 handle               |        | ...                        |
 * | 72 tx_attr  80 rx_attr  |        +----------------------------+
 * | 88 ep_attr  96 domain_attr
 * |104 fabric_attr 112 nic  |
 * +-------------------------+
 * </pre>
 */
final class InfoDescriptor {

    private InfoDescriptor() {
    }

    static final StructLayout INFO = MemoryLayout.structLayout(
            JAVA_LONG.withName("next"),
            JAVA_LONG.withName("caps"),
            JAVA_LONG.withName("mode"),
            JAVA_INT.withName("addr_format"),
            MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("src_addrlen"),
            JAVA_LONG.withName("dest_addrlen"),
            JAVA_LONG.withName("src_addr"),
            JAVA_LONG.withName("dest_addr"),
            JAVA_LONG.withName("handle"),
            JAVA_LONG.withName("tx_attr"),
            JAVA_LONG.withName("rx_attr"),
            JAVA_LONG.withName("ep_attr"),
            JAVA_LONG.withName("domain_attr"),
            JAVA_LONG.withName("fabric_attr"),
            JAVA_LONG.withName("nic"));

    static final StructLayout TX_ATTR = MemoryLayout.structLayout(
            JAVA_LONG.withName("caps"),
            JAVA_LONG.withName("mode"),
            JAVA_LONG.withName("op_flags"),
            JAVA_LONG.withName("msg_order"),
            JAVA_LONG.withName("comp_order"),
            JAVA_LONG.withName("inject_size"),
            JAVA_LONG.withName("size"),
            JAVA_LONG.withName("iov_limit"),
            JAVA_LONG.withName("rma_iov_limit"),
            JAVA_INT.withName("tclass"),
            MemoryLayout.paddingLayout(4));

    static final StructLayout RX_ATTR = MemoryLayout.structLayout(
            JAVA_LONG.withName("caps"),
            JAVA_LONG.withName("mode"),
            JAVA_LONG.withName("op_flags"),
            JAVA_LONG.withName("msg_order"),
            JAVA_LONG.withName("comp_order"),
            JAVA_LONG.withName("total_buffered_recv"),
            JAVA_LONG.withName("size"),
            JAVA_LONG.withName("iov_limit"));

    static final StructLayout EP_ATTR = MemoryLayout.structLayout(
            JAVA_INT.withName("type"),
            JAVA_INT.withName("protocol"),
            JAVA_INT.withName("protocol_version"),
            MemoryLayout.paddingLayout(4),
            JAVA_LONG.withName("max_msg_size"),
            JAVA_LONG.withName("msg_prefix_size"),
            JAVA_LONG.withName("max_order_raw_size"),
            JAVA_LONG.withName("max_order_war_size"),
            JAVA_LONG.withName("max_order_waw_size"),
            JAVA_LONG.withName("mem_tag_format"),
            JAVA_LONG.withName("tx_ctx_cnt"),
            JAVA_LONG.withName("rx_ctx_cnt"),
            JAVA_LONG.withName("auth_key_size"),
            JAVA_LONG.withName("auth_key"));

    static final StructLayout DOMAIN_ATTR = MemoryLayout.structLayout(
            JAVA_LONG.withName("domain"),
            JAVA_LONG.withName("name"),
            JAVA_INT.withName("threading"),
            JAVA_INT.withName("control_progress"),
            JAVA_INT.withName("data_progress"),
            JAVA_INT.withName("resource_mgmt"),
            JAVA_INT.withName("av_type"),
            JAVA_INT.withName("mr_mode"),
            JAVA_LONG.withName("mr_key_size"),
            JAVA_LONG.withName("cq_data_size"),
            JAVA_LONG.withName("cq_cnt"),
            JAVA_LONG.withName("ep_cnt"),
            JAVA_LONG.withName("tx_ctx_cnt"),
            JAVA_LONG.withName("rx_ctx_cnt"),
            JAVA_LONG.withName("max_ep_tx_ctx"),
            JAVA_LONG.withName("max_ep_rx_ctx"),
            JAVA_LONG.withName("max_ep_stx_ctx"),
            JAVA_LONG.withName("max_ep_srx_ctx"),
            JAVA_LONG.withName("cntr_cnt"),
            JAVA_LONG.withName("mr_iov_limit"),
            JAVA_LONG.withName("caps"),
            JAVA_LONG.withName("mode"),
            JAVA_LONG.withName("auth_key"),
            JAVA_LONG.withName("auth_key_size"),
            JAVA_LONG.withName("max_err_data"),
            JAVA_LONG.withName("mr_cnt"),
            JAVA_INT.withName("tclass"),
            MemoryLayout.paddingLayout(4));

    static final StructLayout FABRIC_ATTR = MemoryLayout.structLayout(
            JAVA_LONG.withName("fabric"),
            JAVA_LONG.withName("name"),
            JAVA_LONG.withName("prov_name"),
            JAVA_INT.withName("prov_version"),
            JAVA_INT.withName("api_version"));

    /**
     * {@code struct fi_cq_data_entry}, the completion format Ferry reads (FI_CQ_FORMAT_DATA).
     * <pre>
     * 0 op_context | 8 flags | 16 len | 24 buf | 32 data   (40 B)
     * </pre>
     */
    static final StructLayout CQ_DATA_ENTRY = MemoryLayout.structLayout(
            JAVA_LONG.withName("op_context"),
            JAVA_LONG.withName("flags"),
            JAVA_LONG.withName("len"),
            JAVA_LONG.withName("buf"),
            JAVA_LONG.withName("data"));

    /** {@code struct fi_cq_err_entry} (80 B). */
    static final StructLayout CQ_ERR_ENTRY = MemoryLayout.structLayout(
            JAVA_LONG.withName("op_context"),
            JAVA_LONG.withName("flags"),
            JAVA_LONG.withName("len"),
            JAVA_LONG.withName("buf"),
            JAVA_LONG.withName("data"),
            JAVA_LONG.withName("tag"),
            JAVA_LONG.withName("olen"),
            JAVA_INT.withName("err"),
            JAVA_INT.withName("prov_errno"),
            JAVA_LONG.withName("err_data"),
            JAVA_LONG.withName("err_data_size"));

    /** {@code struct fi_eq_err_entry} (48 B). */
    static final StructLayout EQ_ERR_ENTRY = MemoryLayout.structLayout(
            JAVA_LONG.withName("fid"),
            JAVA_LONG.withName("context"),
            JAVA_LONG.withName("data"),
            JAVA_INT.withName("err"),
            JAVA_INT.withName("prov_errno"),
            JAVA_LONG.withName("err_data"),
            JAVA_LONG.withName("err_data_size"));

    /** {@code struct fi_eq_cm_entry}: fid, info, then connection data. */
    static final StructLayout EQ_CM_ENTRY = MemoryLayout.structLayout(
            JAVA_LONG.withName("fid"),
            JAVA_LONG.withName("info"));

    /** {@code struct fi_cq_attr} (40 B). */
    static final StructLayout CQ_ATTR = MemoryLayout.structLayout(
            JAVA_LONG.withName("size"),
            JAVA_LONG.withName("flags"),
            JAVA_INT.withName("format"),
            JAVA_INT.withName("wait_obj"),
            JAVA_INT.withName("signaling_vector"),
            JAVA_INT.withName("wait_cond"),
            JAVA_LONG.withName("wait_set"));

    /** {@code struct fi_eq_attr} (32 B). */
    static final StructLayout EQ_ATTR = MemoryLayout.structLayout(
            JAVA_LONG.withName("size"),
            JAVA_LONG.withName("flags"),
            JAVA_INT.withName("wait_obj"),
            JAVA_INT.withName("signaling_vector"),
            JAVA_LONG.withName("wait_set"));

    /** {@code struct fi_av_attr} (48 B). */
    static final StructLayout AV_ATTR = MemoryLayout.structLayout(
            JAVA_INT.withName("type"),
            JAVA_INT.withName("rx_ctx_bits"),
            JAVA_LONG.withName("count"),
            JAVA_LONG.withName("ep_per_node"),
            JAVA_LONG.withName("name"),
            JAVA_LONG.withName("map_addr"),
            JAVA_LONG.withName("flags"));

    /** The byte offset of {@code field} in {@code layout}. */
    static long offset(StructLayout layout, String field) {
        return layout.byteOffset(PathElement.groupElement(field));
    }

    // Ops-table offsets: every table starts with size_t size, then function pointers.
    /** {@code struct fid}: fclass@0, context@8, ops@16. */
    static final long FID_OPS = 16;
    /** {@code struct fi_ops}: close, bind, control. */
    static final long OPS_CLOSE = 8;
    static final long OPS_BIND = 16;
    static final long OPS_CONTROL = 24;
    /** Objects embed {@code struct fid} (24 B) first, then their own tables. */
    static final long OBJ_OPS = 24;
    /** {@code struct fid_domain}: ops@24, mr@32. */
    static final long DOMAIN_MR = 32;
    /** {@code struct fid_ep}: ops@24, cm@32, msg@40, rma@48. */
    static final long EP_CM = 32;
    static final long EP_MSG = 40;
    static final long EP_RMA = 48;
    /** {@code struct fid_mr}: mem_desc@24, key@32. */
    static final long MR_DESC = 24;
    static final long MR_KEY = 32;
    /** {@code struct fi_ops_fabric}: domain, passive_ep, eq_open. */
    static final long FABRIC_DOMAIN = 8;
    static final long FABRIC_PASSIVE_EP = 16;
    static final long FABRIC_EQ_OPEN = 24;
    /**
     * {@code struct fi_ops_domain}: av_open, cq_open, endpoint, scalable_ep, cntr_open,
     * poll_open, stx_ctx, srx_ctx.
     */
    static final long DOMAIN_AV_OPEN = 8;
    static final long DOMAIN_CQ_OPEN = 16;
    static final long DOMAIN_ENDPOINT = 24;
    static final long DOMAIN_SRX_CTX = 64;
    /** {@code FI_SHARED_CONTEXT}: {@code ep_attr.rx_ctx_cnt} of an endpoint that receives through a shared context. */
    static final long SHARED_CONTEXT = -1L;
    /** {@code struct fi_ops_mr}: reg. */
    static final long MR_REG = 8;
    /** {@code struct fi_ops_av}: insert, insertsvc, insertsym, remove. */
    static final long AV_INSERT = 8;
    static final long AV_REMOVE = 32;
    /** {@code struct fi_ops_cq}: read, readfrom, readerr, sread, sreadfrom, signal, strerror. */
    static final long CQ_READ = 8;
    static final long CQ_READFROM = 16;
    static final long CQ_READERR = 24;
    static final long CQ_SREAD = 32;
    static final long CQ_SREADFROM = 40;
    static final long CQ_SIGNAL = 48;
    static final long CQ_STRERROR = 56;
    /** {@code struct fi_ops_eq}: read, readerr, write, sread. */
    static final long EQ_READ = 8;
    static final long EQ_READERR = 16;
    static final long EQ_SREAD = 32;
    /** {@code struct fi_ops_cm}: setname, getname, getpeer, connect, listen, accept, reject, shutdown. */
    static final long CM_GETNAME = 16;
    static final long CM_CONNECT = 32;
    static final long CM_LISTEN = 40;
    static final long CM_ACCEPT = 48;
    static final long CM_REJECT = 56;
    static final long CM_SHUTDOWN = 64;
    /** {@code struct fi_ops_msg}: recv, recvv, recvmsg, send, sendv, sendmsg, inject, senddata, injectdata. */
    static final long MSG_RECV = 8;
    static final long MSG_SEND = 32;
    static final long MSG_INJECT = 56;
    static final long MSG_SENDDATA = 64;
    static final long MSG_INJECTDATA = 72;
    /** {@code struct fi_ops_rma}: read, readv, readmsg, write, writev, writemsg, inject, writedata. */
    static final long RMA_READ = 8;
    static final long RMA_WRITE = 32;
    static final long RMA_WRITEDATA = 64;
    /** {@code struct fi_ops_ep}: cancel, getopt, setopt, tx_ctx, rx_ctx, rx_size_left, tx_size_left. */
    static final long EP_RX_SIZE_LEFT = 48;
    static final long EP_TX_SIZE_LEFT = 56;
}
