/**
 * The parameter server on the wire: {@link dev.ferry.ps.net.PsDescriptor} (methods and body
 * layouts; the {@code CREATE_TABLE} body in {@code CreateTableDescriptor}, the {@code DESCRIBE}
 * and {@code SLOT_TABLE} answers in {@code DescribeDescriptor}), {@link dev.ferry.ps.net.PsServer}
 * (a {@link dev.ferry.ps.ParameterServer} behind an RPC server; its handlers in
 * {@code DataHandlers} and {@code AdminHandlers}), {@link dev.ferry.ps.net.PsClient} (batched,
 * routed, parallel pulls and pushes; {@code SparseCalls}, {@code DenseCalls},
 * {@code ClusterBootstrap}), and the processes: {@link dev.ferry.ps.net.PsServerMain} runs one
 * server, {@link dev.ferry.ps.net.LocalCluster} starts several as child processes and stops them
 * by PID.
 */
package dev.ferry.ps.net;
